"""The official-layout fixtures (tests/fixtures/scilaws), imported once per module,
and the same fixtures as the Hugging Face release lays them out."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import pickle
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from lawlab_ops.taskbuild.importer import import_all

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scilaws"
LAWLAB = str(Path(sys.executable).parent / "lawlab")
# the fixtures the release view is made of: one Type I, one Type II
RELEASE_TASKS = {"orbit_distance_demo__r_mean_km": "typeI", "culture_growth_demo__od": "typeII"}
GRADER_KEYS = ("references", "validity_rubrics", "best_baseline")


def import_fixtures(tmp_path_factory: Any, name: str) -> tuple[Path, dict[str, Any]]:
    """Every fixture task imported into a fresh folder: the folder and each report."""
    out = tmp_path_factory.mktemp(name)
    return out, {r.task_id: r for r in import_all(FIXTURES, out)}


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"_fixture_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rmse(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(p, float) - y) ** 2)))


def harness_anchor(task: Path, module: Path, target: str) -> dict[str, Any]:
    """One baseline's entry of the official ``eval/reference_metrics.json``, computed
    as the SciLaws-Bench harness computes it (lawlab's own fixture modules run here:
    they are test code, not submissions): Type I ``predict`` on test.csv with the
    LAW_CONSTANTS; Type II per cluster ``fit`` on test_fit.csv, ``predict`` on
    test_test.csv."""
    mod = _module(module)
    law = dict(mod.LAW_CONSTANTS)
    used = list(mod.USED_INPUTS)
    if not mod.LOCAL_FITTABLE:
        test = pd.read_csv(task / "data" / "test.csv")
        pred = mod.predict(test[used].to_numpy(float), **law)
        return {"kind": "reference", "law_constants": law,
                "metrics": {"rmse": _rmse(test[target].to_numpy(float), pred)}}
    fit_rows = pd.read_csv(task / "data" / "test_fit.csv")
    test_rows = pd.read_csv(task / "data" / "test_test.csv")
    per = {}
    for g, rows in test_rows.groupby("group_id"):
        calib = fit_rows[fit_rows["group_id"] == g]
        local = mod.fit(calib[used].to_numpy(float), calib[target].to_numpy(float), **law)
        pred = mod.predict(rows[used].to_numpy(float), **law, **local)
        per[str(g)] = {"rmse": _rmse(rows[target].to_numpy(float), pred)}
    return {"kind": "reference", "law_constants": law,
            "local_fittable": sorted(mod.LOCAL_FITTABLE), "per_cluster": per}


class _Tripwire:
    """Unpickling this touches ``path``: a state.joblib that proves it was opened."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def release_view(dst: Path, marker: Path) -> Path:
    """The release fixtures at ``dst/tasks/<type>/<task>`` as the official export's
    eval view lays a task out: a solver-facing metadata.yaml; eval/metadata_full.yaml
    (plus ``references`` without ``formula_file``, ``validity_rubrics``,
    ``best_baseline``); eval/validity_rubrics.json (a list); eval/reference_metrics.json
    (the harness's anchors, ``harness_anchor``); simulator/formula.py (the hidden law),
    sample.csv and a state.joblib that touches ``marker`` if anyone unpickles it; no
    formulas/. Returns ``dst``."""
    for task, kind in RELEASE_TASKS.items():
        src, out = FIXTURES / task, dst / "tasks" / kind / task
        shutil.copytree(src / "data", out / "data")
        full = yaml.safe_load((src / "metadata.yaml").read_text(encoding="utf-8"))
        rubric_file = src / "eval" / "validity_rubrics.json"
        rubric = (json.loads(rubric_file.read_text()) if rubric_file.exists()
                  else full.get("validity_rubrics", []))
        full["validity_rubrics"] = rubric
        for ref in full["references"]:
            ref.pop("formula_file", None)
        (out / "eval").mkdir()
        (out / "metadata.yaml").write_text(yaml.safe_dump(
            {k: v for k, v in full.items() if k not in GRADER_KEYS}, sort_keys=False,
            allow_unicode=True), encoding="utf-8")
        (out / "eval" / "metadata_full.yaml").write_text(
            yaml.safe_dump(full, sort_keys=False, allow_unicode=True), encoding="utf-8")
        (out / "eval" / "validity_rubrics.json").write_text(json.dumps(rubric, indent=2))
        target = full["target"]["name"]
        baselines = {r["id"]: harness_anchor(out, src / "formulas" / f"{r['id']}.py", target)
                     for r in full["references"]}
        (out / "eval" / "reference_metrics.json").write_text(json.dumps(
            {"task": task, "type": kind, "metric_declared": full["metric"],
             "baselines": baselines}, indent=2))
        (out / "simulator").mkdir()
        first = full["references"][0]["id"]
        shutil.copy(src / "formulas" / f"{first}.py", out / "simulator" / "formula.py")
        pd.read_csv(out / "data" / "train.csv").head(20).to_csv(
            out / "simulator" / "sample.csv", index=False)
        (out / "simulator" / "state.joblib").write_bytes(pickle.dumps(_Tripwire(marker)))
    return dst
