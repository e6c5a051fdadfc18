"""``lawlab tasks import <dir>``: official SciLaws-Bench tasks into lawlab's forms.

The official 118 tasks live on a hub that cannot be reached from here; users
who have downloaded them point this at the folder. Accepted layout (one task
per folder, or a folder of task folders at any depth):

    <task>/metadata.yaml        task_id, domain, type (typeI/typeII), context, target,
                                inputs (range or values, dtype), data_files, priors,
                                references (id, label, formula_file, measured), caps,
                                metric, validity_rubrics, unseen_group_strategy, split
    <task>/data/train.csv       target and inputs (+ group_id for Type II)
    <task>/data/test.csv | test_fit.csv + test_test.csv
    <task>/formulas/*.py        the published references (also eval/baselines/*.py)
    <task>/eval/validity_rubrics.json  the rubric, where metadata.yaml has none
    <task>/simulator/state.joblib  the Parallel world (read in a sandbox box only)
    <task>/simulator/formula.py the hidden law of the Parallel world

The Hugging Face release (``RealSR/SciLaws-Bench``, ``tasks/typeI|typeII/<task>``) is
this layout with the grader's fields moved: ``metadata.yaml`` is solver-facing,
``eval/metadata_full.yaml`` adds ``references`` (without ``formula_file``),
``validity_rubrics`` and ``best_baseline``, and ``eval/reference_metrics.json`` holds
the official anchors (each baseline's held-out metric, per cluster for Type II, and
the derived caps). The release ships no ``formulas/``: the published reference
modules come from ``formulas=`` (``lawlab tasks import --formulas DIR``), a folder
holding ``<task>/formulas/<reference id>.py``; without them the task is refused with
that instruction. ``simulator/state.joblib`` is a pickle: it is read only inside a
sandbox box, and the world it holds is served as published
(lawlab_ops.taskbuild.official_world); lawlab never unpickles in a trusted process.

Every task is tried; one that cannot be imported is reported with the file and
line that stopped it, and the rest go on. Each reference's ``predict`` becomes a
restricted expression (LAW_CONSTANTS named, LOCAL_FITTABLE per group with
``init`` a number, a list of starts or None, OTHER_CONSTANTS and the module's
other numbers written as numbers, helper functions inlined, np.maximum/clip/where
kept as max/min/clip/where and reported as a numerical guard or a branch of the
law); what cannot be converted is reported (file, line, reason). The official
rubric is kept verbatim (``eval/validity_rubrics.json``); a sentence becomes an
executable item only where it converts exactly, the others are for the LLM
judge. Kept as published: caps, priors, reference labels and measured metrics,
declared input ranges and discrete values, dtype, unseen_group_strategy, the
split's structure (``official`` in metadata.yaml); text-valued inputs are coded
0..k-1 with their names kept. Reference metrics are also recomputed under
lawlab's protocol, and the result is validated like a built task. The Parallel
world of an imported task is not calibrated here (the converted law is written
to ``eval/imported_hidden_law.json``); worlds come from ``lawlab tasks build``.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from lawlab.fitting import FitError, fit_expression
from lawlab.judging import metrics
from lawlab.law.contract import fold, read_module
from lawlab.law.expr import Expression
from lawlab.law.predict import CONSTANT_DICTS, PredictWalker
from lawlab.tasks.library import GROUP_COL, Task
from lawlab_ops.taskbuild import rubric_sentences

GROUP_ALIASES = ("group_id", "cluster", "group", "cluster_id")


class Unconvertible(ValueError):
    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")


@dataclass
class Converted:
    expr: str
    used_inputs: list[str]
    constants: dict[str, float]
    local: dict[str, float]  # LOCAL_FITTABLE name -> init (1.0 where the module gives None)
    local_starts: dict[str, list[float]] = field(default_factory=dict)  # every start given
    notes: list[str] = field(default_factory=list)  # guards and branches kept, with lines


@dataclass
class ImportReport:
    task_id: str
    source: str = ""
    converted: list[str] = field(default_factory=list)
    unconvertible: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # validation after import
    notes: list[str] = field(default_factory=list)  # kept as is, worth knowing
    error: str = ""  # what stopped the import (file and line)
    references_total: int = 0
    rubric_executable: int = 0
    rubric_llm: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems and not self.error

    @property
    def references_converted(self) -> int:
        return sum(1 for c in self.converted if c.startswith("reference "))


class _ToExpr(PredictWalker[str]):
    """predict()'s body -> restricted-expression text (the walker's rules)."""

    def __init__(self, path: str, used: list[str], names: set[str],
                 fixed: dict[str, float] | None = None,
                 helpers: dict[str, ast.FunctionDef] | None = None,
                 dict_names: set[str] | None = None) -> None:
        super().__init__(used, helpers, sorted(dict_names or CONSTANT_DICTS))
        self.path = path
        self.names = names  # constants and local parameters
        self.fixed = dict(fixed or {})  # OTHER_CONSTANTS and module numbers: written as numbers
        self.notes: list[str] = []  # guards and branches kept, with their lines

    def fail(self, node: ast.AST | None, reason: str) -> Unconvertible:
        return Unconvertible(f"{self.path}:{getattr(node, 'lineno', '?')}", reason)

    def number(self, value: float, node: ast.AST) -> str:
        literal = node.value if isinstance(node, ast.Constant) else value
        return repr(literal) if value >= 0 else f"({literal!r})"

    def integer(self, value: int) -> str:
        return str(value)

    def declared(self, name: str, node: ast.AST) -> str:
        if name in self.names:
            return name
        if name in self.fixed:
            value = self.fixed[name]
            return repr(value) if value >= 0 else f"({value!r})"
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

    # ---- clamps and branches ----------------------------------------------------------
    def _arg(self, node: ast.AST | None) -> str | None:
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return None
        if isinstance(node, ast.Attribute) and node.attr in ("nan", "NaN", "inf", "Inf"):
            raise self.fail(node, f"np.{node.attr} in a branch (a value outside the numbers a "
                                  "law returns) cannot be written as a law")
        return self.expr(node)

    def _kind(self, bounds: list[ast.AST | None]) -> str:
        """'guard' when a bound is a tiny or huge literal (1e-12, 700: numerics, not
        physics), else 'branch' (the clamp or switch is part of the law)."""
        for b in bounds:
            v = fold(b, {}) if b is not None else None
            if isinstance(v, float) and (0 < abs(v) <= 1e-6 or abs(v) >= 100):
                return "guard"
        return "branch"

    def branch(self, name: str, node: ast.Call) -> str:
        kw = {k.arg: k.value for k in node.keywords}
        args: list[ast.AST | None] = list(node.args)
        where = f"{self.path}:{node.lineno}"
        shown = ast.unparse(node)
        shown = shown if len(shown) <= 70 else shown[:67] + "..."
        if name in ("maximum", "minimum", "fmax", "fmin") and len(args) == 2 and not kw:
            a, b = self._arg(args[0]), self._arg(args[1])
            if a is None or b is None:
                raise self.fail(node, f"np.{name} of None")
            text = f"{'max' if name in ('maximum', 'fmax') else 'min'}({a}, {b})"
            bounds = args
        elif name == "clip" and 1 <= len(args) <= 3:
            x = self._arg(args[0])
            lo_node = args[1] if len(args) > 1 else kw.get("a_min", kw.get("min"))
            hi_node = args[2] if len(args) > 2 else kw.get("a_max", kw.get("max"))
            lo, hi = self._arg(lo_node), self._arg(hi_node)
            if x is None or (lo is None and hi is None):
                raise self.fail(node, "np.clip without bounds")
            text = (f"clip({x}, {lo}, {hi})" if lo is not None and hi is not None
                    else f"max({x}, {lo})" if lo is not None else f"min({x}, {hi})")
            bounds = [lo_node, hi_node]
        elif name == "where" and len(args) == 3 and not kw and any(
                _is_nan(a) for a in args[1:]) and not all(_is_nan(a) for a in args[1:]):
            # np.where(M > 0, M, np.nan): a domain guard (no value where the law is not
            # defined); the law is the other branch
            kept = args[2] if _is_nan(args[1]) else args[1]
            self.notes.append(f"{where}: {shown} read as its non-NaN branch - a domain guard "
                              "(NaN where the condition fails), dropped")
            return self.expr(kept)  # type: ignore[arg-type]
        elif name == "where" and len(args) == 3 and not kw:
            cond = args[0]
            ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
            if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1
                    and type(cond.ops[0]) in ops):
                raise self.fail(node, "np.where's condition is not one comparison (<, <=, >, "
                                      ">=); it cannot be written as a law")
            left, right = self.expr(cond.left), self.expr(cond.comparators[0])
            a, b = self._arg(args[1]), self._arg(args[2])
            if a is None or b is None:
                raise self.fail(node, "np.where with None")
            text = f"where({left} {ops[type(cond.ops[0])]} {right}, {a}, {b})"
            bounds = [cond.comparators[0], cond.left, args[1], args[2]]
        else:
            return super().branch(name, node)
        kind = self._kind(bounds)
        self.notes.append(f"{where}: {shown} kept as {text.split('(')[0]}() - "
                          + ("a numerical guard (a tiny or huge literal bound)" if kind == "guard"
                             else "not a recognisable numerical guard, so kept as part of "
                             "the law"))
        return text


def _is_nan(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id in ("np", "numpy", "math") and node.attr in ("nan", "NaN")


def convert_module(source: str, path: str, inputs: list[str]) -> Converted:
    """One reference module's ``predict`` (or ``formula``/``law``...) as a restricted
    expression. LAW_CONSTANTS (and CONSTANTS/PARAMS) stay named constants; LOCAL_FITTABLE
    names are per-group parameters; OTHER_CONSTANTS and the module's other numbers
    (aliases, arithmetic in constant definitions) are written as numbers; the module's
    helper functions called from ``predict`` are inlined."""
    module = read_module(source)
    fn = module.function("predict", "formula", "law", "f", "model")
    if fn is None:
        raise Unconvertible(path, "no predict (or formula/law) function")
    used = module.used_inputs(inputs)
    constants = module.constants(("LAW_CONSTANTS", "CONSTANTS", "PARAMS"))
    other = module.constants(("OTHER_CONSTANTS",))
    starts = module.local_starts()
    local = {k: v[0] for k, v in starts.items()}
    for k in local:
        constants.pop(k, None)
    params = [a.arg for a in fn.args.args[1:]] + [a.arg for a in fn.args.kwonlyargs]
    defaults = fn.args.defaults
    for a, d in zip(fn.args.args[len(fn.args.args) - len(defaults):], defaults):
        if a.arg in local or a.arg in constants:
            continue
        value = fold(d, module.values)
        if isinstance(value, float):
            if a.arg in other:
                continue
            constants[a.arg] = value
    missing = [p for p in params if p not in constants and p not in local and p not in other]
    if missing:
        raise Unconvertible(f"{path}:{fn.lineno}", f"parameters without values: {missing}")
    clash = [n for n in [*constants, *local] if n in used]
    if clash:
        raise Unconvertible(path, f"constant names clash with inputs: {clash}")
    fixed = {k: float(v) for k, v in module.values.items()
             if isinstance(v, float) and k not in ("USED_INPUTS",)}
    fixed.update(other)
    for k in [*constants, *local]:
        fixed.pop(k, None)
    # predict's **kwargs is where the harness passes the constants, whatever its name
    # (``**law_constants`` in an official viscosity module)
    kwarg = [fn.args.kwarg.arg] if fn.args.kwarg is not None else []
    dict_names = set(CONSTANT_DICTS) | set(kwarg) | {
        k for k, v in module.top.items() if isinstance(v, ast.Name) and v.id in CONSTANT_DICTS}
    helpers = {k: v for k, v in module.top.items()
               if isinstance(v, ast.FunctionDef) and k not in (fn.name, "fit")}
    tr = _ToExpr(path, used, set(constants) | set(local), fixed, helpers, dict_names)
    text = ast.unparse(ast.parse(tr.read(fn), mode="eval"))  # minimal parentheses
    expr = Expression(text)  # must be a valid restricted expression
    # only what the expression uses: a declared constant it never reads is not a parameter
    constants = {k: v for k, v in constants.items() if k in expr.names}
    local = {k: v for k, v in local.items() if k in expr.names}
    return Converted(text, used, constants, local,
                     {k: starts[k] for k in local}, tr.notes)


# ---- the official rubric --------------------------------------------------------------

def convert_rubric_item(item: Any, inputs: list[str], target: str = "", target_symbol: str = "",
                        target_unit: str = "", index: int = 0) -> dict[str, Any] | None:
    """One rubric sentence (or legacy ``{id, description}`` item) as an executable item,
    only where it converts exactly (:mod:`lawlab_ops.taskbuild.rubric_sentences`), else None."""
    text = _sentence(item)
    reading = rubric_sentences.read(text, inputs, target, target_symbol, target_unit)
    if reading is None:
        return None
    rid = (item.get("id") if isinstance(item, dict) else None) \
        or rubric_sentences.item_id(text, index)
    return {"id": str(rid), **reading, "description": text}


def _sentence(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        return str(item.get("description") or item.get("text") or item.get("criterion")
                   or item.get("rubric") or "")
    return str(item)


def _official_rubric(src: Path, raw: dict[str, Any]) -> tuple[list[Any], str]:
    """The official rubric sentences and where they were read."""
    if isinstance(raw.get("validity_rubrics"), list):
        return list(raw["validity_rubrics"]), "metadata.yaml validity_rubrics"
    for rel in ("eval/validity_rubrics.json", "eval/validity_rubrics.yaml"):
        p = src / rel
        if p.exists():
            loaded = json.loads(p.read_text()) if rel.endswith("json") else yaml.safe_load(
                p.read_text())
            if isinstance(loaded, dict):
                loaded = loaded.get("validity_rubrics", loaded.get("items", []))
            return list(loaded or []), rel
    for rel in ("eval/rubric.json", "eval/rubric.yaml", "eval/rubric.yml"):
        p = src / rel
        if p.exists():
            loaded = json.loads(p.read_text()) if rel.endswith("json") else yaml.safe_load(
                p.read_text())
            return list(loaded.get("items", []) if isinstance(loaded, dict) else loaded or []), rel
    return [], ""


# ---- the task --------------------------------------------------------------------

class ImportFailure(Exception):
    """The task cannot be imported; ``where`` names the file (and line)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where, self.reason = where, reason


def _meta_value(raw: dict[str, Any], *keys: str, default: Any = "") -> Any:
    for k in keys:
        if k in raw and raw[k] not in (None, ""):
            return raw[k]
    return default


def _line(text: str, key: str) -> str:
    """``metadata.yaml:N`` for the first line that sets ``key``."""
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*-?\s*{re.escape(key)}\s*:", line):
            return f"metadata.yaml:{i}"
    return "metadata.yaml"


def _variable(v: Any, where: str) -> dict[str, Any]:
    if isinstance(v, str):
        return {"name": v, "symbol": v, "unit": "", "description": ""}
    if not isinstance(v, dict) or "name" not in v:
        raise ImportFailure(where, f"a variable without a name: {v!r}")
    out: dict[str, Any] = {"name": str(v["name"]), "symbol": str(v.get("symbol", v["name"])),
                           "unit": str(v.get("unit", v.get("units", "")) or ""),
                           "description": str(v.get("description", "") or "").strip()}
    for key in ("range", "values", "dtype"):
        if v.get(key) is not None:
            out[key] = v[key]
    return out


def _numeric_range(v: dict[str, Any]) -> tuple[float, float] | None:
    r = v.get("range")
    if isinstance(r, (list, tuple)) and len(r) == 2:
        try:
            return float(r[0]), float(r[1])
        except (TypeError, ValueError):
            return None
    vals = v.get("values")
    if isinstance(vals, (list, tuple)) and vals:
        try:
            nums = [float(x) for x in vals]
        except (TypeError, ValueError):
            return None
        return min(nums), max(nums)
    return None


def _read(path: Path, src: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise ImportFailure(str(path.relative_to(src)), f"cannot read: {err}") from None
    for alias in GROUP_ALIASES:
        # an alias names the group only where there is no group_id: a column called
        # ``group`` beside group_id is an input (an official battery task's design group)
        if GROUP_COL in frame.columns:
            break
        if alias in frame.columns:
            frame = frame.rename(columns={alias: GROUP_COL})
            break
    if GROUP_COL in frame.columns:
        frame[GROUP_COL] = frame[GROUP_COL].astype(str)
    return frame


def _reference_files(src: Path, raw: dict[str, Any], formulas: Path | None = None,
                     task_id: str = "") -> list[tuple[str, Path | None, dict[str, Any]]]:
    """(id, file, official entry) of each reference: the metadata's ``references`` list
    where it has one, else every module under formulas/ (or eval/baselines...). A
    listed module the folder lacks is looked for under ``formulas`` (the release has
    no formulas/): ``<formulas>/<task id or folder>/formulas/<id>.py``."""
    listed = raw.get("references")
    if isinstance(listed, list) and listed:
        out: list[tuple[str, Path | None, dict[str, Any]]] = []
        for entry in listed:
            if not isinstance(entry, dict):
                continue
            rel = str(entry.get("formula_file") or f"formulas/{entry.get('id')}.py")
            rid = str(entry.get("id") or Path(rel).stem)
            if not _safe_name(rid) or not _inside(src / rel, src):
                # a name that climbs out (``../``) or is absolute reads nothing
                out.append((rid, None, entry))
                continue
            path = src / rel
            if not path.exists() and formulas is not None:
                for name in dict.fromkeys([task_id or src.name, src.name]):
                    candidate = formulas / name / rel
                    if _safe_name(name) and _inside(candidate, formulas) and candidate.exists():
                        path = candidate
                        break
            out.append((rid, path, entry))
        return out
    for base in [src, *([formulas / (task_id or src.name)] if formulas is not None else [])]:
        for sub in ("formulas", "eval/baselines", "eval/references", "baselines"):
            files = sorted(p for p in (base / sub).glob("*.py") if not p.name.startswith("_"))
            if files:
                return [(p.stem, p, {}) for p in files]
    return []


STAGING = ".importing"  # where a task is written before it replaces the earlier import
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def _safe_name(name: str) -> bool:
    """A task or reference id usable as a file name: no separators, no ``..``."""
    return bool(_NAME.fullmatch(name)) and ".." not in name


def _inside(path: Path, base: Path) -> bool:
    return path.resolve().is_relative_to(base.resolve())


def _official_anchors(src: Path, metric: str, report: ImportReport) -> dict[str, float]:
    """Each baseline's held-out metric in the official ``eval/reference_metrics.json``
    (the harness's: ``baselines.<id>.metrics`` for Type I, the mean over
    ``per_cluster`` for Type II); empty where the file is absent."""
    path = src / "eval" / "reference_metrics.json"
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        report.unconvertible.append(f"eval/reference_metrics.json:{err.lineno}: not JSON")
        return {}
    out: dict[str, float] = {}
    baselines = doc.get("baselines") if isinstance(doc, dict) else None
    for rid, b in (baselines or {}).items():
        if not isinstance(b, dict):
            continue
        flat = b.get("metrics") if isinstance(b.get("metrics"), dict) else None
        if flat and isinstance(flat.get(metric), (int, float)):
            out[str(rid)] = float(flat[metric])
            continue
        per = b.get("per_cluster")
        values = [float(m[metric]) for m in (per.values() if isinstance(per, dict) else [])
                  if isinstance(m, dict) and isinstance(m.get(metric), (int, float))]
        if values:
            out[str(rid)] = float(np.mean(values))
    return out


def _is_type_ii(raw: dict[str, Any], train: pd.DataFrame) -> bool:
    kind = str(raw.get("type", "")).strip().lower().replace("type", "").replace("_", "")
    if kind in ("ii", "2"):
        return True
    if kind in ("i", "1"):
        return False
    return bool(raw.get("has_group_id")) or GROUP_COL in train.columns


def _split(raw: dict[str, Any]) -> tuple[dict[str, str], Any]:
    """lawlab's split (kind, rationale) and the official structure, kept as it is."""
    split = raw.get("split")
    if isinstance(split, dict):
        kind = str(split.get("kind") or split.get("type") or split.get("strategy")
                   or split.get("method") or "as published")
        rest = {k: v for k, v in split.items() if k not in ("kind", "type", "strategy", "method")}
        rationale = str(split.get("rationale") or "; ".join(f"{k}: {v}" for k, v in rest.items())
                        or "official split")
        return {"kind": kind, "rationale": rationale}, split
    kind = str(_meta_value(raw, "split_kind", "split", default="as published"))
    return {"kind": kind, "rationale": str(_meta_value(raw, "split_rationale",
                                                      default="the official split"))}, split


def import_task(src: Path, out: Path, formulas: Path | None = None) -> ImportReport:
    """One official task folder into ``out/<task_id>``; never raises for the task's
    content: what stops the import is the report's ``error`` (with file and line).
    ``formulas``: where the published reference modules are when the folder has none
    (the release's layout): ``formulas/<task>/formulas/<id>.py``."""
    report = ImportReport(task_id=src.name, source=str(src))
    try:
        _import(src, out, report, formulas)
    except ImportFailure as err:
        report.error = str(err)
    except Exception as err:  # noqa: BLE001  (one task's surprise must not stop the rest)
        frame = traceback.extract_tb(err.__traceback__)[-1]
        report.error = (f"unexpected {type(err).__name__}: {err} (in lawlab's importer at "
                        f"{Path(frame.filename).name}:{frame.lineno}; please report)")
    finally:
        staging = out / STAGING
        if staging.exists():  # a task that stopped half-written leaves nothing behind
            shutil.rmtree(staging / report.task_id, ignore_errors=True)
            if not any(staging.iterdir()):
                staging.rmdir()
    return report


def _load_yaml(path: Path, rel: str) -> tuple[dict[str, Any], str]:
    text = path.read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{rel}:{mark.line + 1}" if mark is not None else rel
        raise ImportFailure(where, f"not valid YAML: {getattr(err, 'problem', err)}") from None
    if not isinstance(raw, dict):
        raise ImportFailure(rel, "not a mapping")
    return raw, text


def _import(src: Path, out: Path, report: ImportReport, formulas: Path | None = None) -> None:
    raw, text = _load_yaml(src / "metadata.yaml", "metadata.yaml")
    full_path = src / "eval" / "metadata_full.yaml"
    if full_path.exists():
        # the release: the grader's fields (references, rubric, anchors) live here
        full, _ = _load_yaml(full_path, "eval/metadata_full.yaml")
        frozen = (src / "eval" / "validity_rubrics.json").exists()  # the harness's rubric
        added = [k for k in full if k not in raw and not (frozen and k == "validity_rubrics")]
        raw = {**raw, **{k: full[k] for k in added}}
        if added:
            report.notes.append(f"eval/metadata_full.yaml adds {', '.join(added)}")
    task_id = str(_meta_value(raw, "task_id", "id", default=src.name))
    if not _safe_name(task_id):
        raise ImportFailure(_line(text, "task_id"), f"task_id {task_id!r} is not a plain name "
                            "(letters, digits, _ . -): it names the imported folder")
    report.task_id = task_id
    if not raw.get("target"):
        raise ImportFailure("metadata.yaml", "no target")
    target = _variable(_meta_value(raw, "target", "target_name"), _line(text, "target"))
    raw_inputs = _meta_value(raw, "inputs", "input_columns", "features", default=[])
    if not isinstance(raw_inputs, list) or not raw_inputs:
        raise ImportFailure(_line(text, "inputs"), "no inputs list")
    inputs = [_variable(v, _line(text, "inputs")) for v in raw_inputs]
    names = [v["name"] for v in inputs]
    metric = str(_meta_value(raw, "metric", "primary_metric", default="rmse")).lower()
    if metric not in metrics.METRICS:
        report.unconvertible.append(f"{_line(text, 'metric')}: metric {metric!r} unknown to "
                                    "lawlab; using rmse")
        metric = "rmse"
    files = raw.get("data_files") if isinstance(raw.get("data_files"), dict) else {}
    paths = {str(k): src / str(v) for k, v in files.items()} if files else {
        p.stem: p for p in sorted((src / "data").glob("*.csv"))}
    if "train" not in paths or not paths["train"].exists():
        raise ImportFailure(f"{paths.get('train', src / 'data/train.csv')}".replace(
            str(src) + "/", ""), "the training data is missing")
    data = {name: _read(p, src) for name, p in paths.items() if p.exists()}
    for p in paths.values():
        if not p.exists():
            report.unconvertible.append(f"{p.relative_to(src)}: listed in data_files, missing")
    multi = _is_type_ii(raw, data["train"])
    needed = ["test_fit", "test_test"] if multi else ["test"]
    absent = [n for n in needed if n not in data]
    if absent:
        raise ImportFailure("data/", f"Type {'II' if multi else 'I'} needs {absent}.csv")
    for name, frame in data.items():
        missing = [c for c in [target["name"], *names] if c not in frame.columns]
        if missing:
            raise ImportFailure(f"{paths[name].relative_to(src)}", f"lacks columns {missing}")
        if multi and GROUP_COL not in frame.columns:
            raise ImportFailure(f"{paths[name].relative_to(src)}",
                                f"Type II data without a group column ({', '.join(GROUP_ALIASES)})")

    # text-valued inputs (a region's name): lawlab's inputs are numbers, so the text
    # is coded 0..k-1 in the imported data, the codes' meaning kept in the metadata
    pooled = pd.concat(list(data.values()), ignore_index=True)
    for v in inputs:
        col = pooled[v["name"]]
        if not pd.api.types.is_numeric_dtype(col):
            declared = [str(x) for x in v.get("values") or []]
            seen = sorted({str(x) for x in col.dropna()})
            cats = declared + [c for c in seen if c not in declared]
            v["dtype"] = v.get("dtype", "category")
            v["categories"] = cats
            for frame in data.values():
                frame[v["name"]] = frame[v["name"]].astype(str).map(
                    {c: i for i, c in enumerate(cats)}).astype(float)
            report.notes.append(f"input {v['name']!r} is text ({len(cats)} values); coded "
                                "0..k-1 in the imported data, the names in metadata.yaml "
                                "inputs[].categories")

    # built in a staging folder and moved into place only when the whole task is
    # written: a failed re-import leaves the earlier import as it was
    final = out / task_id
    root = out / STAGING / task_id
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "eval" / "references").mkdir(parents=True)
    cols = [target["name"], *names, *([GROUP_COL] if multi else [])]
    for name, frame in data.items():
        frame[cols].to_csv(root / "data" / f"{name}.csv", index=False)
    train = data["train"]

    # references
    refs: list[tuple[str, Converted, str, dict[str, Any]]] = []
    listed = _reference_files(src, raw, formulas, task_id)
    if listed and not any(path is not None and path.exists() for _, path, _ in listed):
        where = (f"{formulas}/{task_id}/formulas/" if formulas is not None
                 else f"{src.name}/formulas/")
        raise ImportFailure(
            "formulas/", f"none of the {len(listed)} published reference modules "
            f"({', '.join(rid for rid, _, _ in listed)}) is in {where}; the Hugging Face "
            "release ships no formulas/: give a folder holding <task>/formulas/<id>.py with "
            "`lawlab tasks import --formulas DIR` (docs/tasks.md)")
    for rid, path, entry in listed:
        if path is None:
            report.unconvertible.append(f"reference {rid!r}: its id or formula_file leaves the "
                                        "task folder; not read")
            continue
        rel = str(path.relative_to(src)) if path.is_relative_to(src) else str(path)
        if not path.exists():
            report.unconvertible.append(f"reference {rid}: {rel} is missing")
            continue
        source = path.read_text(encoding="utf-8")
        try:
            conv = convert_module(source, rel, names)
        except (Unconvertible, SyntaxError, ValueError) as err:
            where = f"{rel}:{err.lineno}: " if isinstance(err, SyntaxError) else ""
            report.unconvertible.append(f"reference {rid}: {where}{err}")
            continue
        refs.append((rid, conv, source, entry))
        report.converted.append(f"reference {rid} ({rel}) -> {conv.expr}")
        report.notes += [f"reference {rid}: {n}" for n in conv.notes]
    report.references_total = len(listed)
    if not refs:
        report.problems.append("no reference formula could be converted")

    ref_json, ref_scores = [], {}
    official_anchors = _official_anchors(src, metric, report)
    for name, conv, source, entry in refs:
        (root / "eval" / "references" / f"{name}.py").write_text(source, encoding="utf-8")
        label = str(entry.get("label") or raw.get("reference_citation") or rel_source(src))
        ref_json.append({"name": name, "citation": label, "expr": conv.expr,
                         "global": sorted(conv.constants), "local": sorted(conv.local),
                         "init": {**conv.constants, **conv.local},
                         "constants": conv.constants, "local_starts": conv.local_starts,
                         "formula_file": str(entry.get("formula_file", "")),
                         "official": {k: v for k, v in entry.items() if k != "id"},
                         "kept_branches": conv.notes})
        ref_scores[name] = {"heldout_metric": _heldout(conv, data, target["name"], metric, multi),
                            "train_r2_residual_space": float("nan"),
                            "official_measured": entry.get("measured", {})}
        anchor = official_anchors.get(name)
        if anchor is not None:
            ref_scores[name]["official_anchor"] = anchor
            mine = ref_scores[name]["heldout_metric"]
            if np.isfinite(mine) and abs(mine - anchor) > 0.05 * max(abs(anchor), 1e-12):
                report.notes.append(
                    f"reference {name}: lawlab's held-out {metric} {mine:.4g} differs from the "
                    f"official anchor {anchor:.4g} (eval/reference_metrics.json) by more than 5%")
    finite = {k: v for k, v in ref_scores.items() if np.isfinite(v["heldout_metric"])}
    best = (max if metric == "r2" else min)(finite, key=lambda k: finite[k]["heldout_metric"]) \
        if finite else (refs[0][0] if refs else "")
    naive = _naive(data, target["name"], metric, multi)
    (root / "eval" / "references.json").write_text(_json(ref_json), encoding="utf-8")
    (root / "eval" / "reference_metrics.json").write_text(_json(
        {"best_reference": best, "naive_baseline": naive, "references": ref_scores,
         "official_best_baseline": raw.get("best_baseline"),
         "official_reference_baseline_id": raw.get("reference_baseline_id")}),
        encoding="utf-8")

    # the official rubric, verbatim; executable items only where exact
    sentences, rubric_where = _official_rubric(src, raw)
    items, official, prose = [], [], []
    for i, sentence in enumerate(sentences):
        conv_item = convert_rubric_item(sentence, names, target["name"], target["symbol"],
                                        target["unit"], i)
        text_i = _sentence(sentence)
        if conv_item is not None:
            conv_item["citation"] = f"{rubric_where}[{i}]"
            items.append(conv_item)
        else:
            prose.append(sentence)
            report.unconvertible.append(f"rubric {rubric_where}[{i}] {text_i[:70]!r}: no exact "
                                        "executable reading; for the LLM judge")
        official.append({"index": i, "text": text_i,
                         "judge": "executable" if conv_item is not None else "llm",
                         "item_id": conv_item["id"] if conv_item is not None else None})
    report.rubric_executable, report.rubric_llm = len(items), len(prose)
    if not sentences:
        report.notes.append("no official validity rubric (validity_rubrics) in this task")
    (root / "eval" / "rubric.json").write_text(_json(items), encoding="utf-8")
    (root / "eval" / "rubric_prose.json").write_text(_json(prose), encoding="utf-8")
    (root / "eval" / "validity_rubrics.json").write_text(_json(
        {"source": rubric_where, "sentences": official}), encoding="utf-8")

    _official_world(src, root, report, names, multi,
                    {v["name"]: _numeric_range(v) or
                     ((0.0, float(len(v["categories"]) - 1)) if "categories" in v else
                      (float(train[v["name"]].min()), float(train[v["name"]].max())))
                     for v in inputs},
                    next(((n, c) for n, c, _, _ in refs if n == best), None),
                    {"task_id": task_id,
                     "pooled": pd.concat([data[k] for k in data], ignore_index=True),
                     "target": target["name"], "inputs": inputs, "metric": metric,
                     "multi": multi, "rubric": items,
                     "caps": {"max_law_constants": 99, "max_local_params": 99}})

    official_caps = raw.get("caps") if isinstance(raw.get("caps"), dict) else None
    n_train = len(train)
    caps = {"max_law_constants": max([len(c.constants) for _, c, _, _ in refs] or [0]) + 2,
            "max_local_params": (max([len(c.local) for _, c, _, _ in refs] or [0]) + 1)
            if multi else 0,
            "fit_timeout_seconds": 10.0, "max_experiment_calls": 10,
            "max_points_per_call": max(10, n_train // 10), "min_samples_per_point": 1,
            "max_samples_per_point": 3, "max_turns": 30}
    if official_caps is not None:
        for key in ("max_law_constants", "max_local_params"):
            if official_caps.get(key) is not None:
                caps[key] = int(official_caps[key])
        if official_caps.get("max_init_size_per_param") is not None:
            caps["max_init_size_per_param"] = max(1, int(official_caps["max_init_size_per_param"]))
        if official_caps.get("fit_timeout_seconds") is not None:
            caps["fit_timeout_seconds"] = float(official_caps["fit_timeout_seconds"])
        else:
            report.notes.append("official caps: fit_timeout_seconds is null (no limit); "
                                "lawlab applies its 10 s")
    else:
        report.notes.append("no official caps in metadata.yaml: caps computed from the "
                            "references")
    y = train[target["name"]].to_numpy(float)

    def bounds(v: dict[str, Any], values: pd.Series) -> dict[str, Any]:
        declared = _numeric_range(v)
        if declared is None and "categories" in v:
            return {**v, "min": 0.0, "max": float(len(v["categories"]) - 1)}
        if declared is None:
            report.notes.append(f"{v['name']}: no declared range; the training min/max")
            declared = (float(values.min()), float(values.max()))
        return {**v, "min": declared[0], "max": declared[1]}

    split, official_split = _split(raw)
    official_block: dict[str, Any] = {k: raw[k] for k in ("caps", "priors", "unseen_group_strategy",
                                          "best_baseline", "reference_baseline_id",
                                          "has_group_id", "data_files", "type", "domain")
                      if k in raw}
    if official_split is not None:
        official_block["split"] = official_split
    if isinstance(raw.get("priors"), list):
        report.notes.append(f"{len(raw['priors'])} candidate priors kept (official.priors)")
    meta = {
        "task_id": task_id, "title": str(_meta_value(raw, "title", "name", default=task_id)),
        "discipline": str(_meta_value(raw, "discipline", "domain", "field", default="")),
        "context": str(_meta_value(raw, "context", "description", "background")).strip(),
        "type": "II" if multi else "I",
        "target": bounds(target, pd.Series(y)),
        "inputs": [bounds(v, train[v["name"]]) for v in inputs],
        "group_description": str(_meta_value(raw, "group_description", "cluster_description",
                                             default="group" if multi else "")),
        "metric": metric, "caps": caps, "split": split,
        "source": str(_meta_value(raw, "source", "citation", "dataset_source",
                                  default=f"official SciLaws-Bench task {src.name}")),
        "license": str(_meta_value(raw, "license", "licence", default="see the official task")),
        "official": official_block,
    }
    (root / "metadata.yaml").write_text(
        yaml.safe_dump(meta, sort_keys=False, width=100, allow_unicode=True), encoding="utf-8")

    from lawlab_ops.taskbuild.validate import validate_task

    report.problems += validate_task(Task(root)).problems
    if final.exists():
        shutil.rmtree(final)
    root.rename(final)


def _official_world(src: Path, root: Path, report: ImportReport, names: list[str], multi: bool,
                    declared: dict[str, tuple[float, float]],
                    base: tuple[str, Converted] | None, builder_args: dict[str, Any]) -> None:
    """The official Parallel world (lawlab_ops.taskbuild.official_world): the state
    file read in a sandbox box, the hidden law converted like a reference, and
    lawlab's world files written; or why not (the import goes on without it)."""
    from lawlab_ops.taskbuild import official_world as ow

    states = sorted((src / "simulator").glob("**/state.joblib"))
    formula = src / "simulator" / "formula.py"
    doc: dict[str, Any] | None = None
    if states:
        try:
            doc = ow.read_state(states[0])
        except ow.StateError as err:
            report.unconvertible.append(f"Parallel world {states[0].relative_to(src)}: {err}; "
                                        "the world is not served")
    source, where = "", ""
    if doc is not None and isinstance(doc.get("formula_source"), str) and doc["formula_source"]:
        source, where = doc["formula_source"], "simulator/state.joblib formula_source"
    elif formula.exists():
        source, where = formula.read_text(encoding="utf-8"), "simulator/formula.py"
    if not source:
        if not states:
            report.notes.append("no simulator/: lawlab serves no Parallel world for this task "
                                "(its builder makes worlds for its own tasks only)")
        elif doc is not None:
            report.unconvertible.append("Parallel world: the state has no formula_source and "
                                        "there is no simulator/formula.py")
        return
    try:
        conv = convert_module(source, where, names)
    except (Unconvertible, SyntaxError, ValueError) as err:
        report.unconvertible.append(f"hidden law: {err}")
        return
    (root / "eval" / "imported_hidden_law.json").write_text(_json(
        {"expr": conv.expr, "constants": conv.constants, "local": conv.local,
         "source": where}), encoding="utf-8")
    report.converted.append(f"hidden law {where} -> {conv.expr}")
    law = ow.Law(conv.expr, {**conv.constants, **conv.local}, list(conv.local))
    ref = None if base is None else (base[0], ow.Law(base[1].expr, {**base[1].constants,
                                                                     **base[1].local},
                                                     list(base[1].local)))
    if doc is None:
        if states:
            return  # the state could not be read: said above
        try:
            spec, arrays = ow.built_world(**builder_args, law=law, base=ref)
        except (ow.StateError, ValueError, FloatingPointError) as err:
            report.unconvertible.append(f"Parallel world from simulator/formula.py: {err}; "
                                        "the world is not served")
            return
        ow.write_world(root, spec, arrays)
        report.converted.append("Parallel world from simulator/formula.py (no state.joblib) "
                                "-> made by lawlab's builder: the law fitted on the imported "
                                "records, lawlab's calibrated noise")
        return
    law = ow.Law(conv.expr, dict(conv.constants), list(conv.local))
    try:
        spec, arrays = ow.build_world(doc, law, names, multi, declared, ref)
    except ow.StateError as err:
        report.unconvertible.append(f"Parallel world {states[0].relative_to(src)}: {err}; the "
                                    "world is not served")
        return
    ow.write_world(root, spec, arrays)
    report.converted.append(
        f"Parallel world {states[0].relative_to(src)} (read in a sandbox box) -> served as "
        f"published, {len(arrays['residuals'])} residuals"
        + (f", {len(spec['groups'])} groups" if spec["groups"] else ""))


def _json(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, default=float) + "\n"


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


RELEASE_REPO = "RealSR/SciLaws-Bench"


class FetchError(Exception):
    """The release could not be fetched; the message says what to do instead."""


def fetch_release(out: Path, repo: str = RELEASE_REPO, revision: str | None = None
                  ) -> tuple[Path, int]:
    """The release's task folders copied to ``out/tasks`` from the Hugging Face hub (a
    dataset repository), or from the local hub cache where ``HF_HUB_OFFLINE=1``:
    (that folder, the number of tasks). Only ``tasks/`` is fetched."""
    from huggingface_hub import snapshot_download

    try:
        snapshot = Path(str(snapshot_download(repo, repo_type="dataset", revision=revision,
                                              allow_patterns=["tasks/*"])))
    except Exception as err:  # noqa: BLE001  (the hub's errors are many; each is reported)
        raise FetchError(
            f"cannot fetch the dataset {repo} ({revision or 'main'}): {type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}. On a machine that reaches "
            f"huggingface.co: hf download {repo} --repo-type dataset --local-dir DIR "
            "--include 'tasks/*', then copy DIR here and run lawlab tasks import "
            "DIR/tasks") from None
    src = snapshot / "tasks"
    if not src.is_dir():
        raise FetchError(f"the dataset {repo} ({revision or 'main'}) has no tasks/ folder: "
                         "is it the SciLaws-Bench release?")
    dst = Path(out) / "tasks"
    staging = Path(out) / ".tasks-fetching"
    if staging.exists():
        shutil.rmtree(staging)
    shutil.copytree(src, staging)  # the cache's symlinks become files
    if dst.exists():  # another revision's tasks would linger beside this one's
        shutil.rmtree(dst)
    staging.rename(dst)
    count = len({p.parent for p in dst.rglob("metadata.yaml")})
    return dst, count


def import_all(src: Path, out: Path, formulas: Path | None = None) -> list[ImportReport]:
    """``src`` is one task folder or a folder of task folders (at any depth, e.g. the
    release's ``tasks/typeI/<task>``); every task is tried, a failing one reported.
    ``formulas``: the published reference modules where the folders have none."""
    out.mkdir(parents=True, exist_ok=True)
    if (src / "metadata.yaml").exists():
        return [import_task(src, out, formulas)]
    folders = sorted({p.parent for p in src.rglob("metadata.yaml")
                      if p.parent.name != "eval"})
    return [import_task(d, out, formulas) for d in folders]


__all__ = ["import_all", "import_task", "convert_module", "convert_rubric_item",
           "fetch_release"]
