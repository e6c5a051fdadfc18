"""``lawlab tasks import <dir>``: official SciLaws-Bench tasks into lawlab's forms.

The official 118 tasks live on a hub that cannot be reached from here; users
who have downloaded them point this at the folder. Accepted layout (one task
per folder, or a folder of task folders):

    <task>/metadata.yaml        target, inputs, metric, context (key aliases below)
    <task>/data/train.csv       target and inputs (+ group column for Type II)
    <task>/data/test.csv | test_fit.csv + test_test.csv
    <task>/eval/baselines/*.py  reference formulas in the submission contract
                                (also eval/references/*.py or formulas/*.py)
    <task>/eval/rubric.json|yaml  rubric items (prose, for an LLM judge)
    <task>/simulator/formula.py the hidden law of the Parallel world

What is converted: metadata (aliases ``name``/``title``, ``domain``/``discipline``,
``description``/``context``; a group column named ``cluster``, ``group`` or
``group_id`` becomes ``group_id``); each reference's ``predict`` into a
restricted expression with its constants (global, and LOCAL_FITTABLE as
per-group parameters); the hidden law likewise; rubric prose that states a
checkable property (monotone, non-negative, positive, finite, bounded, depends
on an input) into executable items. What cannot be converted is reported
precisely (file, line and reason: a branch, a loop, an unsupported call) and
left out; prose rubric items that are not recognised are kept in
``eval/rubric_prose.json`` for an LLM judge. Reference metrics are recomputed
under lawlab's protocol, and the result is validated like a built task. The
Parallel world of an imported task is not calibrated here (the converted law
is written to ``eval/imported_hidden_law.json``); worlds come from
``lawlab tasks build``.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from lawlab import metrics
from lawlab.contract import read_module
from lawlab.expr import Expression
from lawlab.fitting import FitError, fit_expression
from lawlab.predict import PredictWalker
from lawlab.tasks import GROUP_COL, Task

GROUP_ALIASES = ("group_id", "cluster", "group", "cluster_id")


class Unconvertible(ValueError):
    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")


@dataclass
class Converted:
    expr: str
    used_inputs: list[str]
    constants: dict[str, float]
    local: dict[str, float]  # LOCAL_FITTABLE name -> init


@dataclass
class ImportReport:
    task_id: str
    converted: list[str] = field(default_factory=list)
    unconvertible: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # validation after import

    @property
    def ok(self) -> bool:
        return not self.problems


class _ToExpr(PredictWalker[str]):
    """predict()'s body -> restricted-expression text (the walker's rules)."""

    def __init__(self, path: str, used: list[str], names: set[str]) -> None:
        super().__init__(used)
        self.path = path
        self.names = names  # constants and local parameters

    def fail(self, node: ast.AST | None, reason: str) -> Unconvertible:
        return Unconvertible(f"{self.path}:{getattr(node, 'lineno', '?')}", reason)

    def number(self, value: float, node: ast.AST) -> str:
        literal = node.value if isinstance(node, ast.Constant) else value
        return repr(literal)

    def integer(self, value: int) -> str:
        return str(value)

    def declared(self, name: str, node: ast.AST) -> str:
        if name in self.names:
            return name
        if isinstance(node, ast.Name):
            raise self.fail(node, f"unknown name {name!r}")
        raise self.fail(node, f"{ast.unparse(node)!r} is not an input column or constant")

    def column(self, name: str) -> str:
        return name

    def reuse(self, value: str) -> str:
        return f"({value})"

    def operator(self, op: type[ast.operator], left: str, right: str) -> str:
        sign = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}[op]
        return f"({left} {sign} {right})"

    def negate(self, value: str) -> str:
        return f"(-{value})"

    def function(self, name: str, arg: str) -> str:
        return f"{name}({arg})"

    def math_constant(self, name: str) -> str:
        # np.e / np.pi: the bare name is the number only while no input or constant
        # of the law is called so; otherwise the number is written out exactly
        if name in self.names or name in self.used:
            return "exp(1)" if name == "e" else "(4 * atan(1))"
        return name


def convert_module(source: str, path: str, inputs: list[str]) -> Converted:
    module = read_module(source)
    fn = module.function("predict", "formula", "law", "f", "model")
    if fn is None:
        raise Unconvertible(path, "no predict (or formula/law) function")
    used = module.used_inputs(inputs)
    constants = module.constants(("LAW_CONSTANTS", "OTHER_CONSTANTS", "CONSTANTS", "PARAMS"))
    local = module.local_init()
    params = [a.arg for a in fn.args.args[1:]] + [a.arg for a in fn.args.kwonlyargs]
    defaults = fn.args.defaults
    for a, d in zip(fn.args.args[len(fn.args.args) - len(defaults):], defaults):
        if a.arg in local:
            continue
        try:
            constants.setdefault(a.arg, float(ast.literal_eval(d)))
        except (ValueError, TypeError):
            pass
    missing = [p for p in params if p not in constants and p not in local]
    if missing:
        raise Unconvertible(f"{path}:{fn.lineno}", f"parameters without values: {missing}")
    clash = [n for n in [*constants, *local] if n in used]
    if clash:
        raise Unconvertible(path, f"constant names clash with inputs: {clash}")
    tr = _ToExpr(path, used, set(constants) | set(local))
    text = ast.unparse(ast.parse(tr.read(fn), mode="eval"))  # minimal parentheses
    Expression(text)  # must be a valid restricted expression
    return Converted(text, used, constants, local)


# ---- rubric prose -> executable items -----------------------------------------------

def convert_rubric_item(item: Any, inputs: list[str]) -> dict[str, Any] | None:
    text = item if isinstance(item, str) else str(item.get("description") or item.get("text")
                                                  or item.get("criterion") or "")
    rid = (item.get("id") if isinstance(item, dict) else None) or re.sub(r"\W+", "_",
                                                                          text.lower())[:40]
    low = text.lower()
    named = [c for c in inputs if re.search(rf"\b{re.escape(c.lower())}\b", low)]
    if ("increas" in low or "decreas" in low) and ("monoton" in low or "with" in low) and named:
        direction = "increasing" if "increas" in low else "decreasing"
        return {"id": rid, "kind": "monotone", "input": named[0], "direction": direction,
                "description": text}
    if "non-negative" in low or "nonnegative" in low or ">= 0" in low:
        return {"id": rid, "kind": "nonnegative", "description": text}
    if "positive" in low:
        return {"id": rid, "kind": "positive", "description": text}
    if "finite" in low:
        return {"id": rid, "kind": "finite", "description": text}
    m = re.search(r"between\s+(-?[\d.e+-]+)\s+and\s+(-?[\d.e+-]+)", low)
    if m:
        try:
            return {"id": rid, "kind": "bounded", "lo": float(m.group(1)), "hi": float(m.group(2)),
                    "description": text}
        except ValueError:
            return None
    if ("depend" in low or "involve" in low) and named and "not" not in low:
        return {"id": rid, "kind": "depends_on", "input": named[0], "description": text}
    return None


# ---- the task --------------------------------------------------------------------

def _meta_value(raw: dict[str, Any], *keys: str, default: Any = "") -> Any:
    for k in keys:
        if k in raw and raw[k] not in (None, ""):
            return raw[k]
    return default


def _variable(v: Any) -> dict[str, Any]:
    if isinstance(v, str):
        return {"name": v, "symbol": v, "unit": "", "description": ""}
    return {"name": str(v["name"]), "symbol": str(v.get("symbol", v["name"])),
            "unit": str(v.get("unit", v.get("units", ""))),
            "description": str(v.get("description", ""))}


def _read(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    for alias in GROUP_ALIASES:
        if alias in frame.columns and alias != GROUP_COL:
            frame = frame.rename(columns={alias: GROUP_COL})
            break
    if GROUP_COL in frame.columns:
        frame[GROUP_COL] = frame[GROUP_COL].astype(str)
    return frame


def _reference_files(src: Path) -> list[Path]:
    for sub in ("eval/baselines", "eval/references", "formulas", "baselines"):
        files = sorted((src / sub).glob("*.py"))
        if files:
            return files
    return []


def import_task(src: Path, out: Path) -> ImportReport:
    raw = yaml.safe_load((src / "metadata.yaml").read_text()) or {}
    task_id = str(_meta_value(raw, "task_id", "id", default=src.name))
    report = ImportReport(task_id)
    target = _variable(_meta_value(raw, "target", "target_name"))
    inputs = [_variable(v) for v in _meta_value(raw, "inputs", "input_columns", "features",
                                                default=[])]
    names = [v["name"] for v in inputs]
    metric = str(_meta_value(raw, "metric", "primary_metric", default="rmse")).lower()
    if metric not in metrics.METRICS:
        report.unconvertible.append(f"metadata.yaml: metric {metric!r} unknown; using rmse")
        metric = "rmse"
    data = {p.stem: _read(p) for p in sorted((src / "data").glob("*.csv"))}
    if "train" not in data:
        raise FileNotFoundError(f"{src}/data/train.csv is missing")
    multi = GROUP_COL in data["train"].columns
    for name, frame in data.items():
        missing = [c for c in [target["name"], *names] if c not in frame.columns]
        if missing:
            raise ValueError(f"{src}/data/{name}.csv lacks columns {missing}")
    root = out / task_id
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "eval" / "references").mkdir(parents=True)
    cols = [target["name"], *names, *([GROUP_COL] if multi else [])]
    for name, frame in data.items():
        frame[cols].to_csv(root / "data" / f"{name}.csv", index=False)
    train = data["train"]

    refs = []
    for path in _reference_files(src):
        rel = str(path.relative_to(src))
        try:
            conv = convert_module(path.read_text(), rel, names)
        except (Unconvertible, SyntaxError, ValueError) as err:
            report.unconvertible.append(f"reference {rel}: {err}")
            continue
        refs.append((path.stem, conv, path.read_text()))
        report.converted.append(f"reference {rel} -> {conv.expr}")
    if not refs:
        report.problems.append("no reference formula could be converted")

    ref_json, ref_scores = [], {}
    for name, conv, source in refs:
        (root / "eval" / "references" / f"{name}.py").write_text(source)
        ref_json.append({"name": name, "citation": str(raw.get("reference_citation", rel_source(src))),
                         "expr": conv.expr, "global": sorted(conv.constants),
                         "local": sorted(conv.local), "init": {**conv.constants, **conv.local},
                         "constants": conv.constants})
        ref_scores[name] = {"heldout_metric": _heldout(conv, data, target["name"], metric, multi),
                            "train_r2_residual_space": float("nan")}
    finite = {k: v for k, v in ref_scores.items() if np.isfinite(v["heldout_metric"])}
    best = (max if metric == "r2" else min)(finite, key=lambda k: finite[k]["heldout_metric"]) \
        if finite else (refs[0][0] if refs else "")
    naive = _naive(data, target["name"], metric, multi)
    (root / "eval" / "references.json").write_text(json.dumps(ref_json, indent=2) + "\n")
    (root / "eval" / "reference_metrics.json").write_text(json.dumps(
        {"best_reference": best, "naive_baseline": naive, "references": ref_scores},
        indent=2, default=float) + "\n")

    rubric_raw = []
    for fname in ("rubric.json", "rubric.yaml", "rubric.yml"):
        p = src / "eval" / fname
        if p.exists():
            loaded = json.loads(p.read_text()) if fname.endswith("json") else yaml.safe_load(p.read_text())
            rubric_raw = loaded.get("items", loaded) if isinstance(loaded, dict) else loaded
            break
    items, prose = [], []
    for item in rubric_raw or []:
        conv_item = convert_rubric_item(item, names)
        if conv_item is None:
            prose.append(item)
            report.unconvertible.append(f"rubric item {json.dumps(item)[:80]}: not an executable "
                                        "property; kept in eval/rubric_prose.json")
        else:
            items.append(conv_item)
    if not any(i["kind"] == "finite" for i in items):
        items.append({"id": "finite", "kind": "finite", "description": "finite over the input range"})
    (root / "eval" / "rubric.json").write_text(json.dumps(items, indent=2) + "\n")
    (root / "eval" / "rubric_prose.json").write_text(json.dumps(prose, indent=2) + "\n")

    hidden = src / "simulator" / "formula.py"
    if hidden.exists():
        try:
            conv = convert_module(hidden.read_text(), "simulator/formula.py", names)
            (root / "eval" / "imported_hidden_law.json").write_text(json.dumps(
                {"expr": conv.expr, "constants": conv.constants, "local": conv.local},
                indent=2) + "\n")
            report.converted.append(f"hidden law simulator/formula.py -> {conv.expr}")
        except (Unconvertible, SyntaxError, ValueError) as err:
            report.unconvertible.append(f"hidden law: {err}")

    n_train = len(train)
    caps = {"max_law_constants": max([len(c.constants) for _, c, _ in refs] or [0]) + 2,
            "max_local_params": (max([len(c.local) for _, c, _ in refs] or [0]) + 1) if multi else 0,
            "fit_timeout_seconds": 10.0, "max_experiment_calls": 10,
            "max_points_per_call": max(10, n_train // 10), "min_samples_per_point": 1,
            "max_samples_per_point": 3, "max_turns": 30}
    y = train[target["name"]].to_numpy(float)
    meta = {
        "task_id": task_id, "title": str(_meta_value(raw, "title", "name", default=task_id)),
        "discipline": str(_meta_value(raw, "discipline", "domain", "field", default="")),
        "context": str(_meta_value(raw, "context", "description", "background")),
        "type": "II" if multi else "I",
        "target": {**target, "min": float(y.min()), "max": float(y.max())},
        "inputs": [{**v, "min": float(train[v["name"]].min()), "max": float(train[v["name"]].max())}
                   for v in inputs],
        "group_description": str(_meta_value(raw, "group_description", "cluster_description",
                                             default="group" if multi else "")),
        "metric": metric, "caps": caps,
        "split": {"kind": str(_meta_value(raw, "split_kind", "split", default="as published")),
                  "rationale": str(_meta_value(raw, "split_rationale", default="imported"))},
        "source": str(_meta_value(raw, "source", "citation", "dataset_source",
                                  default=f"imported from {src.name}")),
        "license": str(_meta_value(raw, "license", "licence", default="see the official task")),
    }
    (root / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False, width=100))

    from lawlab.taskbuild.validate import validate_task

    report.problems += validate_task(Task(root)).problems
    return report


def rel_source(src: Path) -> str:
    return f"official task {src.name}"


def _predict(conv: Converted, frame: pd.DataFrame,
             local: dict[str, float] | None = None) -> np.ndarray:
    env: dict[str, Any] = {c: frame[c].to_numpy(float) for c in conv.used_inputs}
    env.update(conv.constants)
    env.update(local or conv.local)
    with np.errstate(all="ignore"):
        return np.broadcast_to(np.asarray(Expression(conv.expr).evaluate(env), float), (len(frame),))


def _heldout(conv: Converted, data: dict[str, pd.DataFrame], target: str, metric: str,
             multi: bool) -> float:
    if not multi:
        test = data.get("test")
        if test is None:
            return float("nan")
        return metrics.compute(metric, test[target].to_numpy(float), _predict(conv, test))
    fit_rows, test_rows = data.get("test_fit"), data.get("test_test")
    if fit_rows is None or test_rows is None:
        return float("nan")
    values = []
    for g, rows in test_rows.groupby(GROUP_COL):
        calib = fit_rows[fit_rows[GROUP_COL] == g]
        local = dict(conv.local)
        if conv.local and len(calib):
            try:
                env = {c: calib[c].to_numpy(float) for c in conv.used_inputs}
                env.update(conv.constants)
                fit = fit_expression(Expression(conv.expr), env, calib[target].to_numpy(float),
                                     list(conv.local), conv.local, n_starts=4)
                local = fit.constants
            except FitError:
                values.append(float("nan"))
                continue
        values.append(metrics.compute(metric, rows[target].to_numpy(float),
                                      _predict(conv, rows, local)))
    return float(np.mean(values)) if values else float("nan")


def _naive(data: dict[str, pd.DataFrame], target: str, metric: str, multi: bool) -> float:
    train = data["train"]
    if not multi:
        test = data.get("test")
        if test is None:
            return float("nan")
        return metrics.compute(metric, test[target].to_numpy(float),
                               np.full(len(test), float(train[target].mean())))
    values = []
    for g, rows in data.get("test_test", pd.DataFrame(columns=[GROUP_COL])).groupby(GROUP_COL):
        calib = data["test_fit"][data["test_fit"][GROUP_COL] == g]
        values.append(metrics.compute(metric, rows[target].to_numpy(float),
                                      np.full(len(rows), float(calib[target].mean()))))
    return float(np.mean(values)) if values else float("nan")


def import_all(src: Path, out: Path) -> list[ImportReport]:
    """``src`` is one task folder or a folder of task folders."""
    out.mkdir(parents=True, exist_ok=True)
    if (src / "metadata.yaml").exists():
        return [import_task(src, out)]
    return [import_task(d, out) for d in sorted(p.parent for p in src.glob("*/metadata.yaml"))]


__all__ = ["import_all", "import_task", "convert_module", "convert_rubric_item"]
