"""The importer of official SciLaws-Bench task folders, on fixtures in that layout."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from lawlab.tasks.library import TaskLibrary
from lawlab_ops.taskbuild.importer import Unconvertible, convert_module, convert_rubric_item
from tests.support.official import FIXTURES, LAWLAB, import_fixtures


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    return import_fixtures(tmp_path_factory, "imported")


def test_fixtures_import_and_validate(imported):
    out, reports = imported
    assert {"pendulum_period", "enzyme_clusters"} <= set(reports)
    assert all(r.ok for r in reports.values()), {k: r.problems for k, r in reports.items()}
    library = TaskLibrary(out)
    pendulum, enzyme = library.get("pendulum_period"), library.get("enzyme_clusters")
    assert pendulum.meta.discipline == "physics" and not pendulum.meta.multi_group
    assert enzyme.meta.multi_group and enzyme.meta.group_description == "enzyme preparation"
    assert "group_id" in enzyme.train.columns and enzyme.group_ids[:2] == ["c0", "c1"]
    refs = {r.name: r for r in pendulum.references()}
    assert refs["amplitude_series"].expr == "2 * pi * sqrt(length / g) * (1 + amplitude ** 2 / 16)"
    assert refs["small_angle"].constants == {"g": 9.81}
    (mm,) = enzyme.references()
    assert mm.local_names == ("Vm",) and mm.global_names == ("K",)
    metrics = json.loads((pendulum.root / "eval" / "reference_metrics.json").read_text())
    assert metrics["best_reference"] == "amplitude_series"  # the generating law wins
    assert metrics["references"]["amplitude_series"]["heldout_metric"] < metrics["naive_baseline"]


def test_unconvertible_parts_are_reported_precisely(imported):
    out, reports = imported
    pend, enz = reports["pendulum_period"].unconvertible, reports["enzyme_clusters"].unconvertible
    # a branch of the law is kept as where(), and reported with its line
    assert any("tabulated.py:12: np.where(L < 1.0" in n and "kept as where()" in n
               for n in reports["pendulum_period"].notes)
    assert any("simulator/formula.py:10: branch (if)" in u for u in enz)
    assert any(u.startswith("rubric eval/rubric.json[2] 'Amplitude enters") for u in pend)
    prose = json.loads((out / "pendulum_period" / "eval" / "rubric_prose.json").read_text())
    assert [p["id"] for p in prose] == ["series"]
    rubric = json.loads((out / "pendulum_period" / "eval" / "rubric.json").read_text())
    assert {(r["id"], r["kind"]) for r in rubric} >= {("monotone_length", "monotone"),
                                                       ("positive", "positive")}
    hidden = json.loads((out / "pendulum_period" / "eval" / "imported_hidden_law.json").read_text())
    assert hidden["expr"] == "2 * pi * sqrt(length / g) * (1 + c2 * amplitude ** 2)"
    assert not (out / "enzyme_clusters" / "eval" / "imported_hidden_law.json").exists()


@pytest.mark.parametrize("body, reason", [
    ("for i in range(3):\n        pass\n    return X[:, 0]", "loop (for)"),
    ("return np.piecewise(X[:, 0], [X[:, 0] > 1], [1, 2])", "branch (np.piecewise)"),
    ("return np.where((X[:, 0] > 1) & (X[:, 0] < 2), 1.0, a)", "not one comparison"),
    ("return X[:, 0] if a > 0 else a", "branch (conditional expression)"),
    ("return np.polyval([a, 1.0], X[:, 0])", "call of 'np.polyval'"),
    ("return X[X[:, 0] > 1, 0]", "is not an input column"),
    ("return open('x').read()", "call of"),
])
def test_convert_module_refuses_what_is_not_a_law(body, reason):
    source = f"import numpy as np\nUSED_INPUTS = ['x']\nLAW_CONSTANTS = {{'a': 1.0}}\n" \
             f"def predict(X, a=1.0):\n    {body}\n"
    with pytest.raises(Unconvertible, match=reason.replace("(", r"\(").replace(")", r"\)")):
        convert_module(source, "m.py", ["x"])


def test_rubric_prose_conversion():
    inputs = ["temperature", "pressure"]
    item = convert_rubric_item("Rate increases with temperature", inputs, target="rate")
    assert item is not None and item["kind"] == "monotone"
    item = convert_rubric_item({"id": "b", "description": "Output between 0 and 1"}, inputs)
    assert item == {"id": "b", "kind": "bounded", "lo": 0.0, "hi": 1.0,
                    "description": "Output between 0 and 1"}
    assert convert_rubric_item("Has a physically meaningful Arrhenius term", inputs) is None


def test_cli_import_exit_codes(tmp_path):
    ok = subprocess.run([LAWLAB, "tasks", "import", str(FIXTURES), "--out", str(tmp_path / "a")],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "imported 6 of 6" in ok.stdout and "NOT converted" in ok.stdout
    broken = tmp_path / "broken"
    shutil.copytree(FIXTURES / "pendulum_period", broken)
    for f in (broken / "eval" / "baselines").glob("*.py"):
        if f.name != "tabulated.py":
            f.unlink()
    tab = broken / "eval" / "baselines" / "tabulated.py"
    tab.write_text(tab.read_text().replace("return np.where(", "return np.select(")
                   .replace("b * np.sqrt(L))", "[b * np.sqrt(L)])"))
    bad = subprocess.run([LAWLAB, "tasks", "import", str(broken), "--out", str(tmp_path / "b")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "no reference formula could be converted" in bad.stdout
