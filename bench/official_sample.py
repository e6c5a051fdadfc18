"""The importer against the official SciLaws-Bench task folders (issue #51).

The official release's data (Hugging Face ``RealSR/SciLaws-Bench``) cannot be
reached from lawlab's machines, but every task's ``metadata.yaml`` and
``formulas/*.py`` are public. Point this at a folder holding those, one
sub-folder per official task, exactly as published:

    .venv/bin/python bench/official_sample.py --src /path/to/scilaws118 \
        [--out var/official_sample] [--rows 80] [--json out.json]

Each task gets synthetic data files where the release has real ones (the files
``data_files`` names, or the official defaults: Type I ``train``/``test``, Type II
``train``/``test_fit``/``test_test`` with ``group_id``): every input drawn inside its
declared range (its discrete ``values`` where it has them, text where its dtype is
text), the target from the task's first reference formula that the importer
converts (per-group constants moved 10 % per group), plus 1 % noise; where no
reference converts, the target is drawn inside its declared range. Then the whole
folder goes through ``lawlab_ops.taskbuild.importer.import_all`` (what ``lawlab tasks
import`` runs) and the table says per task: imported, validated, references
converted of the total, rubric sentences executable and left to the LLM judge,
and the first reason for each failure. Only the conversion and validation are
measured: the data is not the release's.

The official files themselves are not part of lawlab (the index's licence terms
are the release's); bench/RESULTS.md records the figures and the source commit.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from lawlab.law.expr import Expression
from lawlab_ops.taskbuild.importer import import_all

ROOT = Path(__file__).resolve().parents[1]
GROUPS = 5


def _range(v: dict[str, Any]) -> tuple[float, float] | None:
    r = v.get("range")
    if isinstance(r, (list, tuple)) and len(r) == 2:
        try:
            lo, hi = float(r[0]), float(r[1])
        except (TypeError, ValueError):
            return None
        if np.isfinite(lo) and np.isfinite(hi):
            return (min(lo, hi), max(lo, hi))
    for a, b in (("min", "max"), ("low", "high")):
        if v.get(a) is not None and v.get(b) is not None:
            return (float(v[a]), float(v[b]))
    return None


def _column(v: dict[str, Any], n: int, rng: np.random.Generator) -> np.ndarray:
    values = v.get("values")
    if isinstance(values, list) and values:
        return np.asarray([values[i] for i in rng.integers(0, len(values), n)], dtype=object)
    if str(v.get("dtype", "")).lower() in ("str", "string", "text", "category", "categorical"):
        return np.asarray([f"level_{i}" for i in rng.integers(0, 4, n)], dtype=object)
    r = _range(v) or (0.0, 1.0)
    lo, hi = r
    if lo > 0 and hi / lo > 100:  # decades: log-uniform, as such inputs are measured
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    return rng.uniform(lo, hi, n)


def _files(meta: dict[str, Any]) -> dict[str, str]:
    files = meta.get("data_files")
    if isinstance(files, dict) and files:
        return {str(k): str(v) for k, v in files.items()}
    kind = str(meta.get("type", "")).lower()
    if "ii" in kind or meta.get("has_group_id"):
        return {"train": "data/train.csv", "test_fit": "data/test_fit.csv",
                "test_test": "data/test_test.csv"}
    return {"train": "data/train.csv", "test": "data/test.csv"}


def synthesize(src: Path, dst: Path, rows: int, rng: np.random.Generator,
               reference: dict[str, Any] | None) -> None:
    """``dst``: the official folder's metadata and formulas, and data files."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    meta = yaml.safe_load((src / "metadata.yaml").read_text(encoding="utf-8")) or {}
    inputs = [v for v in meta.get("inputs") or [] if isinstance(v, dict)]
    target = meta.get("target") if isinstance(meta.get("target"), dict) else {}
    tname = str(target.get("name", "y"))
    multi = "ii" in str(meta.get("type", "")).lower() or bool(meta.get("has_group_id"))
    for key, rel in sorted(_files(meta).items()):
        frame = pd.DataFrame({str(v["name"]): _column(v, rows, rng) for v in inputs})
        groups = rng.integers(0, GROUPS, rows) + (0 if key == "train" else GROUPS)
        y = None
        if reference is not None:
            try:
                env = {c: frame[c].to_numpy(float) for c in reference["used"]}
                env.update(reference["constants"])
                y = np.zeros(rows)
                for g in np.unique(groups):
                    rows_g = groups == g
                    local = {k: float(val) * (1 + 0.1 * ((g % 3) - 1))
                             for k, val in reference["local"].items()}
                    sub = {k: (a[rows_g] if isinstance(a, np.ndarray) else a)
                           for k, a in {**env, **local}.items()}
                    with np.errstate(all="ignore"):
                        y[rows_g] = np.broadcast_to(
                            np.asarray(Expression(reference["expr"]).evaluate(sub), float),
                            (int(rows_g.sum()),))
                if not np.all(np.isfinite(y)):
                    y = None
            except Exception:  # noqa: BLE001  (a reference that will not evaluate here)
                y = None
        if y is None:
            lo, hi = _range(target) or (0.0, 1.0)
            y = rng.uniform(lo, hi, rows)
        else:
            y = y + 0.01 * (float(np.std(y)) or 1.0) * rng.standard_normal(rows)
        frame.insert(0, tname, y)
        if multi:
            frame["group_id"] = groups
        path = dst / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)


def _first_reference(imported: Path) -> dict[str, Any] | None:
    path = imported / "eval" / "references.json"
    if not path.exists():
        return None
    for ref in json.loads(path.read_text(encoding="utf-8")):
        expr = Expression(ref["expr"])
        return {"expr": ref["expr"], "constants": ref.get("constants", {}),
                "local": {k: float(ref["init"].get(k) or 1.0) for k in ref.get("local", [])},
                "used": sorted(expr.free(set(ref.get("constants", {}))
                                         | set(ref.get("local", []))))}
    return None


def _reason(report: Any) -> str:
    text = report.error or (report.problems[0] if report.problems else "")
    return re.sub(r"\s+", " ", text)[:140]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=ROOT / "var" / "official_sample")
    ap.add_argument("--rows", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    folders = sorted({p.parent for p in args.src.rglob("metadata.yaml")})
    if not folders:
        print(f"no metadata.yaml under {args.src}", file=sys.stderr)
        return 2
    staged, imported = args.out / "release", args.out / "imported"
    rng = np.random.default_rng(args.seed)
    for src in folders:  # pass 1: a target drawn in range, to convert the references
        synthesize(src, staged / src.name, args.rows, rng, None)
    import_all(staged, imported)
    for src in folders:  # pass 2: the target from the first converted reference
        meta = yaml.safe_load((src / "metadata.yaml").read_text(encoding="utf-8")) or {}
        task_id = str(meta.get("task_id", src.name))
        try:
            ref = _first_reference(imported / task_id)
        except Exception:  # noqa: BLE001
            ref = None
        synthesize(src, staged / src.name, args.rows, rng, ref)
    shutil.rmtree(imported, ignore_errors=True)
    reports = import_all(staged, imported)
    rows = []
    print("| task | type | imported | validated | references | rubric exec / LLM | why not |")
    print("|---|---|---|---|---|---|---|")
    for r in reports:
        meta = yaml.safe_load((staged / Path(r.source).name / "metadata.yaml").read_text(
            encoding="utf-8")) or {}
        kind = "II" if "ii" in str(meta.get("type", "")).lower() else "I"
        row = {"task": r.task_id, "type": kind, "imported": not r.error, "validated": r.ok,
               "references": r.references_converted, "references_total": r.references_total,
               "rubric_executable": r.rubric_executable, "rubric_llm": r.rubric_llm,
               "error": r.error, "problems": r.problems,
               "unconvertible": r.unconvertible}
        rows.append(row)
        print(f"| {r.task_id} | {kind} | {'yes' if not r.error else 'NO'} | "
              f"{'yes' if r.ok else 'NO'} | {r.references_converted}/{r.references_total} | "
              f"{r.rubric_executable} / {r.rubric_llm} | {_reason(r)} |")
    n = len(rows)
    refs = sum(r["references"] for r in rows), sum(r["references_total"] for r in rows)
    sentences = (sum(r["rubric_executable"] for r in rows),
                 sum(r["rubric_llm"] for r in rows))
    print(f"\n{n} tasks: {sum(r['imported'] for r in rows)} imported, "
          f"{sum(r['validated'] for r in rows)} validated; references converted "
          f"{refs[0]}/{refs[1]}; rubric sentences executable {sentences[0]}, "
          f"for the LLM judge {sentences[1]}")
    why = Counter(re.sub(r"[\d.]+", "N", u.split(": ", 1)[-1])[:70]
                  for r in rows for u in r["unconvertible"] if u.startswith("reference "))
    if why:
        print("\nreferences not converted, by reason:")
        for text, count in why.most_common(15):
            print(f"  {count:3d}  {text}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
