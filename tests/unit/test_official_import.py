"""Official SciLaws-Bench task folders (fixtures of our own making in that layout,
one per construct family, Type I and Type II) import, validate and score; the import
goes on past a broken task and says which failed and why."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
import yaml

from lawlab.tasks.library import TaskLibrary
from lawlab_ops.taskbuild.importer import import_all
from tests.support.official import FIXTURES, LAWLAB, import_fixtures

OFFICIAL = ["runoff_partition_demo__evap_fraction", "orbit_distance_demo__r_mean_km",
            "culture_growth_demo__od", "regional_yield_demo__yield_t_ha"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    return import_fixtures(tmp_path_factory, "official")


def test_every_fixture_imports_and_validates(imported):
    out, reports = imported
    assert set(OFFICIAL) <= set(reports)
    assert all(r.ok for r in reports.values()), {k: (r.error, r.problems) for k, r in reports.items()}
    library = TaskLibrary(out)
    assert not library.get("runoff_partition_demo__evap_fraction").meta.multi_group
    assert library.get("culture_growth_demo__od").meta.multi_group
    for task_id in OFFICIAL:
        r = reports[task_id]
        assert r.references_converted == r.references_total >= 2, (task_id, r.unconvertible)


def test_guards_and_branches_are_kept_and_named(imported):
    out, reports = imported
    notes = reports["runoff_partition_demo__evap_fraction"].notes
    assert any("fu_curve.py:16" in n and "numerical guard" in n for n in notes)
    assert any("energy_water_limit.py:16" in n and "kept as min()" in n for n in notes)
    refs = json.loads((out / "runoff_partition_demo__evap_fraction" / "eval"
                       / "references.json").read_text())
    assert {r["name"]: r["expr"] for r in refs}["energy_water_limit"] == "min(aridity, 1.0)"


def test_input_named_e_is_the_eccentricity(imported):
    out, _ = imported
    m = json.loads((out / "orbit_distance_demo__r_mean_km" / "eval"
                    / "reference_metrics.json").read_text())
    best = m["references"]["time_average"]["heldout_metric"]
    assert m["best_reference"] == "time_average" and best < m["naive_baseline"] / 20
    refs = {r["name"]: r for r in json.loads((out / "orbit_distance_demo__r_mean_km" / "eval"
                                               / "references.json").read_text())}
    assert refs["time_average"]["constants"] == {"c2": 0.5}  # 1.0 / 2.0, folded
    assert refs["circular"]["constants"] == pytest.approx({"k": 1.495978707e8})


def test_type_ii_helpers_and_init_none(imported):
    out, _ = imported
    refs = {r["name"]: r for r in json.loads((out / "culture_growth_demo__od" / "eval"
                                               / "references.json").read_text())}
    assert refs["gompertz_curve"]["local"] == ["A", "lam", "mu"]
    assert refs["gompertz_curve"]["expr"].startswith("A * exp(-exp(clip(")
    assert refs["logistic_curve"]["local_starts"] == {"A": [0.5], "mu": [0.05], "lam": [3.0]}


def test_nothing_the_paper_uses_is_dropped(imported):
    out, reports = imported
    root = out / "regional_yield_demo__yield_t_ha"
    text = (root / "metadata.yaml").read_text(encoding="utf-8")
    assert "t ha⁻¹" in text and "\\u" not in text
    meta = yaml.safe_load(text)
    official = meta["official"]
    assert official["priors"][0]["name"] == "nitrogen_response_rate"
    assert official["unseen_group_strategy"] == "error"
    assert official["split"]["holdout"] == "every third site"
    assert meta["split"]["kind"] == "cluster_holdout"
    assert meta["caps"]["max_law_constants"] == 2 and meta["caps"]["max_local_params"] == 1
    assert official["caps"]["max_init_size_per_param"] == 1
    inputs = {v["name"]: v for v in meta["inputs"]}
    assert (inputs["nitrogen_kg_ha"]["min"], inputs["nitrogen_kg_ha"]["max"]) == (0.0, 250.0)
    assert inputs["n_applications"]["values"] == [1, 2, 3, 4]
    assert inputs["n_applications"]["dtype"] == "int"
    assert inputs["region"]["categories"] == ["north", "south", "east"]
    train = TaskLibrary(out).get("regional_yield_demo__yield_t_ha").train
    assert set(train["region"].unique()) <= {0.0, 1.0, 2.0}
    refs = {r["name"]: r for r in json.loads((root / "eval" / "references.json")
                                              .read_text(encoding="utf-8"))}
    assert refs["mitscherlich"]["citation"].startswith("Mitscherlich response, Y = Ymax (1 − exp")
    metrics = json.loads((root / "eval" / "reference_metrics.json").read_text())
    assert metrics["references"]["mitscherlich"]["official_measured"] == {"rmse": 0.21, "r2": 0.97}
    assert metrics["official_best_baseline"] == 0.21
    runoff = yaml.safe_load((out / "runoff_partition_demo__evap_fraction" / "metadata.yaml")
                            .read_text(encoding="utf-8"))
    assert {v["name"]: v["unit"] for v in runoff["inputs"]}["tav_C"] == "°C"
    assert runoff["official"]["caps"]["fit_timeout_seconds"] is None


def test_official_rubric_kept_verbatim(imported):
    out, _ = imported
    for task_id in ("runoff_partition_demo__evap_fraction", "regional_yield_demo__yield_t_ha"):
        source = yaml.safe_load((FIXTURES / task_id / "metadata.yaml").read_text())
        kept = json.loads((out / task_id / "eval" / "validity_rubrics.json").read_text())
        assert [s["text"] for s in kept["sentences"]] == source["validity_rubrics"]
    # "predicted evaporative fraction" is not the target's name (evap_fraction) nor its
    # symbol: which quantity it means is for the LLM judge (a "predicted mass-specific
    # BMR" of a whole-organism BMR task read as the target was a wrong conversion)
    kept = json.loads((out / "runoff_partition_demo__evap_fraction" / "eval"
                       / "validity_rubrics.json").read_text())
    assert [s["judge"] for s in kept["sentences"]] == ["llm"] * 5
    culture = json.loads((out / "culture_growth_demo__od" / "eval" / "validity_rubrics.json")
                         .read_text())
    assert culture["source"] == "eval/validity_rubrics.json" and len(culture["sentences"]) == 4
    assert [s["judge"] for s in culture["sentences"]] == ["executable", "executable", "llm",
                                                          "llm"]
    items = json.loads((out / "culture_growth_demo__od" / "eval" / "rubric.json").read_text())
    mono = next(i for i in items if i["kind"] == "monotone")
    assert (mono["input"], mono["direction"], mono["strict"]) == ("time_h", "increasing", False)


def test_cli_goes_on_past_broken_tasks(tmp_path):
    src = tmp_path / "tasks"
    for task_id in OFFICIAL:
        shutil.copytree(FIXTURES / task_id, src / task_id)
    bad_yaml = src / "broken_yaml"
    shutil.copytree(FIXTURES / "orbit_distance_demo__r_mean_km", bad_yaml)
    text = (bad_yaml / "metadata.yaml").read_text().replace("type: typeI", "type: [typeI")
    (bad_yaml / "metadata.yaml").write_text(text)
    no_test = src / "broken_data"
    shutil.copytree(FIXTURES / "culture_growth_demo__od", no_test)
    (no_test / "data" / "test_test.csv").unlink()
    run = subprocess.run([LAWLAB, "tasks", "import", str(src), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    table = run.stdout.split("\n\n")[0]
    for task_id in OFFICIAL:
        assert any(line.startswith(task_id) and " converted " in line
                   for line in table.splitlines()), table
    assert any(line.startswith("orbit_distance_demo__r_mean_km") for line in table.splitlines())
    assert "metadata.yaml:" in table and "not valid YAML" in table
    assert "data/test_test.csv" in run.stdout and "FAILED" in table
    assert "imported 4 of 6 tasks" in run.stdout


def test_a_rubric_only_the_llm_judge_reads_imports(tmp_path):
    """An official rubric with no sentence that converts exactly (14 of the first 47
    official tasks measured by bench/official_sample.py) has nothing to probe; the
    import crashed in validation ('No objects to concatenate')."""
    src = tmp_path / "orbit_distance_demo__r_mean_km"
    shutil.copytree(FIXTURES / src.name, src)
    meta = yaml.safe_load((src / "metadata.yaml").read_text())
    meta["validity_rubrics"] = ["captures the time spent far from the primary",
                                "reduces to the circular orbit when the orbit is round"]
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, allow_unicode=True))
    [report] = import_all(src, tmp_path / "out")
    assert report.ok, (report.error, report.problems)
    assert (report.rubric_executable, report.rubric_llm) == (0, 2)


def test_an_input_called_group_beside_group_id_stays_an_input(tmp_path):
    """An official battery task has an input named ``group`` (the cell's design group)
    beside ``group_id``: renaming the alias to group_id made two group_id columns and
    lost the input ('train.csv lacks columns [group]')."""
    import pandas as pd

    src = tmp_path / "culture_growth_demo__od"
    shutil.copytree(FIXTURES / src.name, src)
    meta = yaml.safe_load((src / "metadata.yaml").read_text())
    meta["inputs"].append({"name": "group", "symbol": "g", "unit": "", "range": [1, 4],
                           "description": "design group of the culture"})
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, allow_unicode=True))
    for csv in (src / "data").glob("*.csv"):
        frame = pd.read_csv(csv)
        frame["group"] = 1 + np.arange(len(frame)) % 4
        frame.to_csv(csv, index=False)
    [report] = import_all(src, tmp_path / "out")
    assert report.ok, (report.error, report.problems)
    train = TaskLibrary(tmp_path / "out").get("culture_growth_demo__od").train
    assert set(train["group"]) == {1, 2, 3, 4}
    assert set(train["group_id"]) == set(pd.read_csv(src / "data" / "train.csv")["group_id"])


@pytest.mark.parametrize("cap, status", [(3, "ok"), (1, "contract_fail")])
def test_start_lists_within_the_official_cap_score(tmp_path, cap, status):
    """The official caps allow max_init_size_per_param starts per local parameter; the
    sandbox refused any list longer than one."""
    src = tmp_path / "culture_growth_demo__od"
    shutil.copytree(FIXTURES / src.name, src)
    module = tmp_path / "submission.py"  # the logistic reference with three starts for A
    module.write_text((src / "formulas" / "logistic_curve.py").read_text().replace(
        '{"init": [0.5]}', '{"init": [0.5, 0.3, 0.7]}'))
    meta = yaml.safe_load((src / "metadata.yaml").read_text())
    meta["caps"]["max_init_size_per_param"] = cap
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, allow_unicode=True))
    [report] = import_all(src, tmp_path / "out")
    assert report.ok, (report.error, report.problems)
    run = subprocess.run([LAWLAB, "score", "--task", src.name, "--submission", str(module),
                          "--tasks-dir", str(tmp_path / "out"), "--json"],
                         capture_output=True, text=True, timeout=300)
    doc = json.loads(run.stdout[run.stdout.index("{"):])
    assert doc["status"] == status, doc
    if status != "ok":
        assert "init list of 3 starts exceeds the cap of 1" in doc["message"], doc


@pytest.mark.parametrize("task_id, reference", [
    ("orbit_distance_demo__r_mean_km", "time_average"),  # OTHER_CONSTANTS not a parameter
    ("culture_growth_demo__od", "gompertz_curve"),  # "init": None
])
def test_imported_references_score(imported, task_id, reference):
    out, _ = imported
    run = subprocess.run([LAWLAB, "score", "--task", task_id, "--submission",
                          str(out / task_id / "eval" / "references" / f"{reference}.py"),
                          "--tasks-dir", str(out), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(run.stdout[run.stdout.index("{"):])
    assert doc["status"] == "ok" and np.isfinite(doc["s_n"]) and doc["s_n"] > 0


def test_the_prompt_shows_an_official_start_list_cap(imported):
    import dataclasses

    from lawlab_agent.prompts import caps_text

    out, _ = imported
    task = TaskLibrary(out).get("culture_growth_demo__od")
    public = task.meta.public(task.group_ids)
    assert "max_init_size_per_param" not in caps_text(public, False)  # one: not said
    three = dataclasses.replace(public, caps=dataclasses.replace(public.caps,
                                                                 max_init_size_per_param=3))
    assert "- max_init_size_per_param = 3: starts a LOCAL_FITTABLE \"init\" list may hold" \
        in caps_text(three, False)


def test_priors_reach_the_solvers_prompt_as_the_papers_prompt_shows_them(imported):
    """The official candidate constants (distractors among them) are shown to the
    solver, without the grader's _role saying which are distractors."""
    from lawlab.rpc import convert
    from lawlab_agent.prompts import user_prompt

    out, _ = imported
    task = TaskLibrary(out).get("regional_yield_demo__yield_t_ha")
    assert len(task.meta.priors) == 1
    prior = json.loads(task.meta.priors[0])
    assert prior["name"] == "nitrogen_response_rate" and prior["unit"] == "ha kg⁻¹"
    assert "_role" not in prior
    # through the catalogue's message, as the agent receives the task
    solver = convert.solver_task_from_proto(convert.meta_to_proto(task.meta, task.group_ids))
    assert solver.priors == task.meta.priors
    prompt = user_prompt(solver, parallel=False)
    assert "Candidate constants from the literature" in prompt
    assert "nitrogen_response_rate" in prompt and "candidate" not in prompt.split(
        "Candidate constants")[1].lower().split("\n", 1)[1]
    # a task without priors: no such section
    plain = TaskLibrary(out).get("orbit_distance_demo__r_mean_km")
    assert "Candidate constants" not in user_prompt(plain.meta.public(), parallel=False)
