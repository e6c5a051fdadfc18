"""Tokens' cost (issue #52): a price list the user keeps, read with the file and entry
named on every mistake; a model without a price has no cost, never 0."""

from __future__ import annotations

import pytest

from lawlab.results import prices
from lawlab.results.prices import PriceListError


def test_a_price_list_prices_the_models_it_names(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("openai/gpt-4o: {prompt: 2.5, completion: 10}\n")
    table = prices.load(path)
    # 1M prompt tokens and 200k completion tokens: 2.50 + 2.00
    assert prices.cost(table, "openai/gpt-4o", 1_000_000, 200_000) == pytest.approx(4.5)
    assert prices.cost(table, "openai/o3", 10, 10) is None
    assert prices.cost(None, "openai/gpt-4o", 10, 10) is None
    assert prices.cost(table, "template", 0, 0) == 0.0  # no tokens cost nothing
    assert prices.dollars(4.5) == "$4.50" and prices.dollars(0.0012) == "$0.0012"
    assert prices.dollars(None) == "-"


@pytest.mark.parametrize("text,says", [
    ("[1, 2]", "must map model names"),
    ("m: {prompt: 1}", "'m' needs exactly prompt and completion"),
    ("m: {prompt: -1, completion: 2}", "'m'.prompt must be a number >= 0"),
    ("m: {prompt: 1, completion: yes}", "'m'.completion must be a number >= 0"),
    ("m: [unclosed", "is not YAML or JSON"),
])
def test_a_bad_list_names_the_file_and_the_entry(tmp_path, text, says):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(PriceListError, match=says.replace("[", r"\[")) as err:
        prices.load(path)
    assert str(path) in str(err.value)


def test_a_missing_list_and_a_service_started_with_a_bad_one(tmp_path, monkeypatch):
    from lawlab.rpc.settings import Settings, SettingsError

    with pytest.raises(PriceListError, match="cannot read the price list"):
        prices.load(tmp_path / "absent.yaml")
    monkeypatch.setenv("LAWLAB_PRICES", str(tmp_path / "absent.yaml"))
    with pytest.raises(SettingsError, match="LAWLAB_PRICES: cannot read the price list"):
        Settings.from_env()


def test_the_report_and_the_pages_show_the_cost_per_model_and_in_all(tmp_path):
    from lawlab.results.aggregate import Row, token_usage
    from lawlab_agent.pages.trials import token_table
    from lawlab_agent.store import TrialRecord

    table = {"openai/a": prices.Price(1.0, 2.0)}
    rows = [Row(agent=a, setting="real", context="full", task_id="t", seed=0,
                status="completed", score_status="", s_n=0.5, s_v=1.0, s_s=None,
                prompt_tokens=500_000, completion_tokens=250_000)
            for a in ("openai/a", "openai/b")]
    usage = {u["agent"]: u for u in token_usage(rows, table)}
    assert usage["openai/a"]["cost_usd"] == pytest.approx(1.0)
    assert usage["openai/b"]["cost_usd"] is None
    records = [TrialRecord(f"t{i}", "t", "real", "openai", m, 0, status="completed",
                           prompt_tokens=500_000, completion_tokens=250_000)
               for i, m in enumerate(("a", "b"))]
    html = token_table(records, table)
    assert "<td>openai/a</td><td>1</td><td>500,000</td><td>250,000</td><td>750,000</td>" \
           "<td>750,000</td><td>$1.00</td>" in html
    assert "<td>openai/b</td>" in html and "<td>-</td></tr>" in html  # no price: a dash
    assert "$1.00 (priced models)" in html
    assert "LAWLAB_PRICES" in token_table(records)  # without a list: how to get costs
