"""Builds the task library: data, splits, fitted references, rubric, hidden law, world.

``lawlab tasks build --out DIR`` runs :func:`build_all`. The output is the
on-disk layout of docs/protocol.md section 1; a MANIFEST.json records a content
hash per file so that a rebuild can be checked to be identical.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import logging
import math
import multiprocessing
import os
import shutil
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from threadpoolctl import threadpool_limits

from lawlab.fitting import FitResult, fit_expression, fit_grouped, to_residual_space
from lawlab.judging import metrics, rubric
from lawlab.law.contract import law_module
from lawlab.law.expr import Expression
from lawlab.tasks.library import GROUP_COL
from lawlab.tasks.specs import SPECS, TaskSpec
from lawlab.worlds import mechanisms, worldkey
from lawlab.worlds import world as world_mod
from lawlab_ops.taskbuild import arithmetic, llm_variants, report, synthesis, worlds

log = logging.getLogger("lawlab_ops.taskbuild")
MIN_GROUP_ROWS = 8


def _columns(df: pd.DataFrame, names: list[str]) -> dict[str, np.ndarray]:
    return {n: df[n].to_numpy(float) for n in names}


def _fit(spec: TaskSpec, expr: str, global_names: list[str], local_names: list[str],
         init: Mapping[str, float], train: pd.DataFrame, space: str, n_starts: int = 8,
         max_nfev: int = 1000) -> FitResult:
    e = Expression(expr)
    inputs = [v["name"] for v in spec.inputs]
    data = _columns(train, inputs)
    y = train[spec.target["name"]].to_numpy(float)
    if spec.multi_group:
        return fit_grouped(e, data, y, train[GROUP_COL].to_numpy(str), global_names, local_names,
                           init, space=space, n_starts=n_starts, max_nfev=max_nfev)
    return fit_expression(e, data, y, global_names, init, space=space, n_starts=n_starts,
                          max_nfev=max_nfev)


def _predict(expr: str, frame: pd.DataFrame, inputs: list[str], constants: Mapping[str, float],
             local: Mapping[str, Mapping[str, float]] | None = None) -> np.ndarray:
    env: dict[str, Any] = _columns(frame, inputs)
    env.update(constants)
    for name, table in (local or {}).items():
        env[name] = np.array([table[g] for g in frame[GROUP_COL].astype(str)])
    return np.broadcast_to(np.asarray(Expression(expr).evaluate(env), float), (len(frame),)).copy()


def _heldout_metrics(spec: TaskSpec, module: str, parts: dict[str, pd.DataFrame]) -> dict[str, float]:
    """The reference's held-out metric per group, by the scorer's protocol: its
    contract module predicts, and for Type II the module's own ``fit`` calibrates
    the local parameters on each held-out group's test_fit rows. The module is
    the builder's own (generated from the task specification), so it runs
    in-process; a submission never does."""
    target = spec.target["name"]
    namespace: dict[str, Any] = {}
    exec(compile(module, "<reference module>", "exec"), namespace)  # noqa: S102 - our own code
    used = list(namespace["USED_INPUTS"])
    consts = dict(namespace["LAW_CONSTANTS"])

    def predict(rows: pd.DataFrame, local: Mapping[str, float]) -> np.ndarray:
        return np.asarray(namespace["predict"](rows[used].to_numpy(float), **consts, **local),
                          dtype=float)

    if not spec.multi_group:
        test = parts["test"]
        return {"test": metrics.compute(spec.metric, test[target].to_numpy(float),
                                        predict(test, {}))}
    out = {}
    for g, fit_rows in parts["test_fit"].groupby(GROUP_COL):
        rows = parts["test_test"][parts["test_test"][GROUP_COL] == g]
        try:
            local = namespace["fit"](fit_rows[used].to_numpy(float),
                                     fit_rows[target].to_numpy(float), **consts)
            value = metrics.compute(spec.metric, rows[target].to_numpy(float), predict(rows, local))
        except (ValueError, FloatingPointError, np.linalg.LinAlgError):
            value = float("nan")
        out[str(g)] = value
    return out


def _mean_finite(values: Mapping[str, float]) -> float:
    finite = [v for v in values.values() if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def _coords_and_groups(
    spec: TaskSpec, train: pd.DataFrame
) -> tuple[world_mod.Coordinates, np.ndarray, np.ndarray]:
    inputs = [v["name"] for v in spec.inputs]
    coords = world_mod.Coordinates.fit(_columns(train, inputs), inputs)
    x = coords.transform(_columns(train, inputs))
    groups = (train[GROUP_COL].to_numpy(str) if spec.multi_group
              else np.full(len(train), world_mod.GLOBAL_GROUP))
    return coords, x, groups


def _structure(x: np.ndarray, residuals: np.ndarray, groups: np.ndarray) -> float:
    """B_b; for Type II the median over (at most 40) groups."""
    labels = sorted(set(groups))[:40]
    values = [world_mod.structure_ratio(x[groups == g], residuals[groups == g]) for g in labels]
    return float(np.median(values))


def _write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """An .npz with fixed timestamps (byte-identical rebuilds) and no pickled objects."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def _dump_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=False, default=float) + "\n")


def _diagnostic(obj: Any, digits: int = 9) -> Any:
    """A diagnostic record's floats to ``digits`` significant figures: refits of the
    same data differ in the last bits from run to run (measured: 1e-15 relative in
    identifiability BIC deltas), which must not change the library's MANIFEST."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {k: _diagnostic(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_diagnostic(v, digits) for v in obj]
    if isinstance(obj, np.floating):
        return _diagnostic(float(obj), digits)
    return obj


def build_task(spec: TaskSpec, out: Path, proposer: llm_variants.Proposer | None = None,
               key: worldkey.WorldKey | None = None,
               private: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Build one task. ``key`` decides its Parallel world (by default the key
    file beside ``out``'s library); ``private`` are the operator's private
    variants of this task (the catalogue's schema), which join the draw.
    ``proposer`` (optional) lets an LLM add candidate hidden laws to the
    catalogue's; they face the same screens.

    One BLAS thread, whoever calls: the fits polish to the last digits double
    precision holds, and a multi-threaded BLAS sums in an order that depends on
    its thread count, so the bytes of a world would depend on the machine."""
    with threadpool_limits(1):
        return _build_task(spec, out, proposer, key, private)


def _build_task(spec: TaskSpec, out: Path, proposer: llm_variants.Proposer | None,
                key: worldkey.WorldKey | None,
                private: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if key is None:
        key, _ = worldkey.load_or_create(worldkey.default_path(out))
    parts = split_parts(spec)
    df = pd.concat(list(parts.values()), ignore_index=True)
    train = parts["train"]
    inputs = [v["name"] for v in spec.inputs]
    target = spec.target["name"]
    y = train[target].to_numpy(float)
    space = world_mod.residual_space(spec.metric, y)
    coords, x, groups = _coords_and_groups(spec, train)

    # -- references: fitted on the training split only ------------------------
    refs_out, ref_fits, ref_scores = [], {}, {}
    per_group: dict[str, dict[str, float]] = {}
    for ref in spec.references:
        fit = _fit(spec, ref.expr, ref.global_names, ref.local_names, ref.init, train, space)
        ref_fits[ref.name] = fit
        local_init = {n: float(np.median(list(fit.local[n].values()))) for n in ref.local_names}
        module = law_module(title=f"{ref.name}: {ref.citation}", expr=ref.expr,
                            used_inputs=[i for i in inputs if i in Expression(ref.expr).names],
                            constants=fit.constants, local_init=local_init or None, space=space)
        per_group[ref.name] = _heldout_metrics(spec, module, parts)
        pred = _predict(ref.expr, train, inputs, fit.constants, fit.local)
        resid = to_residual_space(y, space) - to_residual_space(pred, space)
        ref_scores[ref.name] = {
            "train_r2_residual_space": fit.r2,
            "heldout_metric": _mean_finite(per_group[ref.name]),
            "heldout_groups_failed": sum(not np.isfinite(v) for v in per_group[ref.name].values()),
            "structure_B_b": _structure(x, resid, groups),
        }
        refs_out.append({"name": ref.name, "citation": ref.citation, "expr": ref.expr,
                         "global": ref.global_names, "local": ref.local_names,
                         "init": {**ref.init, **local_init}, "constants": fit.constants,
                         "module": module})
    # the scorer's rule (metrics.best_reference): the best of those that score every group
    best_name = metrics.best_reference(spec.metric, per_group)
    best = next(r for r in spec.references if r.name == best_name)
    naive = _naive_metric(spec, parts)
    if not ref_scores[best.name]["heldout_metric"] < naive:
        raise ValueError(f"{spec.task_id}: best reference {best.name} does not beat the naive "
                         f"baseline ({ref_scores[best.name]['heldout_metric']:.4g} vs {naive:.4g})")

    # -- the Parallel world: all Real splits pooled, the hidden law drawn by the key --
    builder, refs = world_builder(spec, parts, key)
    caps = builder.caps
    names = {r.name: [*r.global_names, *r.local_names] for r in spec.references}
    catalogue = [*mechanisms.parse_catalogue(spec.variants, spec.task_id, inputs, names),
                 *mechanisms.parse_catalogue(private or [], spec.task_id, inputs, names,
                                             private=True)]
    llm_record: dict[str, Any] | None = None
    if proposer is not None:
        base_guess = min(spec.references, key=lambda r: ref_scores[r.name]["structure_B_b"])
        new_constant = synthesis.NameAllocator(
            {*builder.inputs, *(n for r in spec.references
                                for n in (*r.global_names, *r.local_names))}).new()
        req = llm_variants.ProposalRequest(spec.task_id, spec.context, target, inputs,
                                           base_guess.expr,
                                           [*base_guess.global_names, *base_guess.local_names],
                                           new_constant)
        try:
            reply = proposer(req)
        except (OSError, ValueError, KeyError, IndexError) as err:
            reply, llm_record = "", {"error": f"{type(err).__name__}: {err}"}
        proposed, rejected = llm_variants.parse(reply, req) if reply else ([], [])
        catalogue += [llm_variants.as_variant(p, base_guess.name, i)
                      for i, p in enumerate(proposed)]
        llm_record = {**(llm_record or {}), "base": base_guess.name,
                      "proposed": [p.description for p in proposed], "rejected": rejected}
    try:
        built: worlds.BuiltWorld | None = worlds.synthesize(builder, refs, catalogue)
        no_world, no_world_record = "", {}
    except worlds.NoWorld as err:
        built, no_world, no_world_record = None, str(err), err.record
        log.warning("no Parallel world", extra={"task_id": spec.task_id, "reason": no_world})

    # -- write ------------------------------------------------------------------
    root = out / spec.task_id
    if root.exists():
        shutil.rmtree(root)
    for sub in ("data", "eval/references", "simulator"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for name, frame in parts.items():
        frame[[target, *inputs, *([GROUP_COL] if spec.multi_group else [])]].to_csv(
            root / "data" / f"{name}.csv", index=False, float_format="%.10g")
    meta = {
        "task_id": spec.task_id, "title": spec.title, "discipline": spec.discipline,
        "context": spec.context, "type": "II" if spec.multi_group else "I",
        "target": {**spec.target, "min": float(y.min()), "max": float(y.max())},
        "inputs": [{**v, "min": float(train[v["name"]].min()), "max": float(train[v["name"]].max())}
                   for v in spec.inputs],
        "group_description": spec.group_description,
        "metric": spec.metric, "caps": caps,
        "split": {"kind": spec.split_kind, "rationale": spec.split_rationale},
        "source": spec.source, "license": spec.license,
    }
    (root / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False, width=100))
    for r in refs_out:
        (root / "eval" / "references" / f"{r['name']}.py").write_text(str(r.pop("module")))
    _dump_json(root / "eval" / "references.json", refs_out)
    _dump_json(root / "eval" / "rubric.json", spec.rubric)
    _dump_json(root / "eval" / "validity.json",
               {"use_range": spec.use_range, "rationale": spec.use_range_rationale})
    if spec.multi_group:  # per-group constants of each reference, fitted on the training groups
        _dump_json(root / "eval" / "reference_local.json",
                   {r.name: ref_fits[r.name].local for r in spec.references})
    _dump_json(root / "eval" / "reference_metrics.json",
               {"best_reference": best.name, "naive_baseline": naive, "references": ref_scores})
    synthesis_record: dict[str, Any] = (built.record if built is not None
                                        else {"no_world": no_world, **no_world_record})
    if llm_record is not None:
        screened = {row["id"]: row["screen"] for row in synthesis_record.get("catalogue", [])
                    if row["id"].startswith("llm_")}
        synthesis_record["llm_proposals"] = {**llm_record, "screened": screened}
    _dump_json(root / "eval" / "synthesis.json", _diagnostic(synthesis_record))
    if built is not None:
        _dump_json(root / "simulator" / "world.json", built.spec)
        _write_npz(root / "simulator" / "residuals.npz", built.arrays)
        best_fit = ref_fits[best.name]

        def reference_curve(rows: pd.DataFrame) -> np.ndarray:
            if spec.multi_group and str(rows[GROUP_COL].iloc[0]) not in next(
                    iter(best_fit.local.values()), {}):
                return np.full(len(rows), np.nan)  # a held-out group: not fitted on it
            return _predict(best.expr, rows, inputs, best_fit.constants, best_fit.local)

        report.figure(built.world, built.frame, target, inputs, root / "simulator" / "world.png",
                      spec.title, reference=(best.name, reference_curve))
        (root / "simulator" / "report.md").write_text(
            report.markdown(spec.task_id, built.spec, ref_scores, synthesis_record))
    r2_values = ([min(v.values()) for v in built.spec["world_r2"].values()]
                 if built is not None else [])
    return {"task_id": spec.task_id, "type": meta["type"], "rows": len(df),
            "best_reference": best.name,
            "hidden_edit": (" + ".join(p["id"] for p in built.spec["law"]["pieces"])
                            if built is not None else "(no world)"),
            "pieces": len(built.spec["law"]["pieces"]) if built is not None else 0,
            "world_r2": float(min(r2_values)) if r2_values else float("nan")}


def task_caps(spec: TaskSpec, n_train: int) -> dict[str, Any]:
    """The task's caps (docs/protocol.md sections 2-3): constants a law may fit, the
    experiment budget."""
    return {
        "max_law_constants": max(len(r.global_names) for r in spec.references) + 2,
        "max_local_params": (max(len(r.local_names) for r in spec.references) + 1
                             if spec.multi_group else 0),
        "fit_timeout_seconds": 10.0,
        "max_experiment_calls": 10,
        "max_points_per_call": max(10, n_train // 10),
        "min_samples_per_point": 1,
        "max_samples_per_point": 3,
        "max_turns": 30,
    }


def split_parts(spec: TaskSpec) -> dict[str, pd.DataFrame]:
    df = spec.load().reset_index(drop=True)
    return {k: v.reset_index(drop=True) for k, v in spec.split(df).items()}


def world_builder(spec: TaskSpec, parts: Mapping[str, pd.DataFrame], key: worldkey.WorldKey
                  ) -> tuple[worlds.WorldBuilder, list[worlds.Reference]]:
    """The task's world builder over every Real split pooled (A.1), and its references."""
    inputs = [v["name"] for v in spec.inputs]
    pooled = pd.concat([parts[k] for k in parts], ignore_index=True)
    builder = worlds.WorldBuilder(spec.task_id, pooled, spec.target["name"], spec.inputs,
                                  spec.metric, spec.multi_group, spec.rubric,
                                  task_caps(spec, len(parts["train"])), key,
                                  rubric.use_ranges(pooled, inputs, spec.use_range))
    refs = [worlds.Reference(r.name, r.expr, list(r.global_names), list(r.local_names),
                             dict(r.init)) for r in spec.references]
    return builder, refs


def _naive_metric(spec: TaskSpec, parts: dict[str, pd.DataFrame]) -> float:
    """A constant predictor: the training mean (Type I) or the calibration-rows mean (Type II)."""
    target = spec.target["name"]
    if not spec.multi_group:
        test = parts["test"][target].to_numpy(float)
        return metrics.compute(spec.metric, test,
                               np.full(len(test), parts["train"][target].mean()))
    values = []
    for g, rows in parts["test_test"].groupby(GROUP_COL):
        fit_rows = parts["test_fit"][parts["test_fit"][GROUP_COL] == g]
        pred = np.full(len(rows), fit_rows[target].mean())
        values.append(metrics.compute(spec.metric, rows[target].to_numpy(float), pred))
    return float(np.mean(values))


# The answer keys of a built library (issue #50): a Parallel world (its law, residuals,
# report and plot), the draw that chose it, and the held-out test rows. Readable by
# their owner only (the services run as the user that built or copied the library).
ANSWER_KEYS = ("*/simulator/*", "*/eval/synthesis.json", "*/data/test*.csv")


def protect_answer_keys(out: Path) -> int:
    """Mode 0600 on every answer key under ``out`` (0700 on its simulator folder);
    returns how many files."""
    n = 0
    for pattern in ANSWER_KEYS:
        for path in Path(out).glob(pattern):
            if path.is_file():
                path.chmod(0o600)
                n += 1
    for folder in Path(out).glob("*/simulator"):
        if folder.is_dir():
            folder.chmod(0o700)
    return n


def manifest(out: Path) -> dict[str, str]:
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name not in {"MANIFEST.json", ".stamp"})
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def build_all(out: Path, only: list[str] | None = None,
              proposer: llm_variants.Proposer | None = None,
              key: worldkey.WorldKey | None = None, processes: int | None = None,
              progress: Callable[[dict[str, Any]], None] | None = None,
              variants: Path | None = None,
              initializer: Callable[..., None] | None = None,
              initargs: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Build every task (or ``only`` those) into ``out`` with the world key
    (by default the operator's key file, created on first use) and the operator's
    private ``variants`` (by default ``world-variants.yaml`` beside the key, when
    it exists), on ``processes`` processes (default: the cores).

    Tasks and problems are built in fresh worker processes started with the pinned
    arithmetic of :mod:`lawlab_ops.taskbuild.arithmetic`, so the bytes do not depend on
    the machine, the process count or the order; ``initializer(*initargs)`` runs
    in each worker first (a bench's instrumentation). A build with an LLM
    ``proposer`` runs in this process: its variants are the model's, not canonical."""
    processes = max(1, processes or os.cpu_count() or 1)
    out.mkdir(parents=True, exist_ok=True)
    if key is None:
        key, _ = worldkey.load_or_create(worldkey.default_path(out))
    suite = out / "SUITE.json"
    previous = json.loads(suite.read_text()).get("world_fingerprint") if suite.exists() else None
    if previous and previous != key.fingerprint and only:
        raise ValueError(f"{out} was built with world key {previous}; rebuilding some tasks with "
                         f"key {key.fingerprint} would mix two suites (rebuild all of them)")
    _dump_json(suite, {"world_fingerprint": key.fingerprint})
    ids = [s.task_id for s in SPECS if not only or s.task_id in only]
    private = mechanisms.load_private(
        variants if variants is not None else private_variants_path(out))
    tasks = [(t, str(out), key, private.get(t, [])) for t in ids]
    summary: list[dict[str, Any]] = []

    def done(result: dict[str, Any]) -> None:
        summary.append(result)
        if progress:
            progress(result)

    if proposer is not None:
        for job in tasks:
            done(_build_one(job, proposer))
        problems, funnels = _lsr_listing(only)
        for problem in problems:
            done(_build_problem(problem, str(out)))
    else:
        with pinned_pool(processes, initializer, initargs) as pool:
            # which LLM-SRBench problems pass their screens is decided by fits too: in a
            # pinned worker, beside the tasks
            listing = pool.apply_async(_lsr_listing, (only,))
            for result in pool.imap(_build_one, tasks):
                done(result)
            problems, funnels = listing.get()
            for result in pool.imap(functools.partial(_build_problem, out=str(out)), problems):
                done(result)
    if not only:
        _dump_json(out / "lsr_funnel.json", funnels)
        # a task or problem no longer in the library (an older build's) must not linger
        built = {r["task_id"] for r in summary}
        for stale in sorted(p.parent for p in out.glob("*/metadata.yaml")
                            if p.parent.name not in built):
            log.info("removing a task no longer in the library", extra={"task_id": stale.name})
            shutil.rmtree(stale)
    protect_answer_keys(out)
    files = manifest(out)
    _dump_json(suite, {"world_fingerprint": key.fingerprint,
                       "release": release_id(key.fingerprint, files)})
    _dump_json(out / "MANIFEST.json", manifest(out))
    return summary


@contextlib.contextmanager
def pinned_pool(processes: int, initializer: Callable[..., None] | None = None,
                initargs: tuple[Any, ...] = ()) -> Iterator[Any]:
    """Worker processes started (``spawn``: numpy and OpenBLAS read their settings
    when they load) with the pinned arithmetic in their environment; this process's
    environment is restored once they are up."""
    saved = dict(os.environ)
    os.environ.update(arithmetic.environment())
    try:
        pool = multiprocessing.get_context("spawn").Pool(
            processes, initializer=_worker_start, initargs=(initializer, initargs),
            maxtasksperchild=None)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        yield pool
        pool.close()
        pool.join()
    finally:
        pool.terminate()


_IN_POOL = False


def _worker_start(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    global _IN_POOL
    _IN_POOL = True
    if initializer is not None:
        initializer(*initargs)


def _require_pinned() -> None:
    """In a builder worker, refuse to build with the machine's own arithmetic (a
    worker the pool replaced after this process's environment was restored)."""
    if not _IN_POOL:
        return
    not_pinned = [k for k, ok in arithmetic.pinned().items() if not ok]
    if not_pinned:
        raise RuntimeError(f"a builder process does not compute with the pinned arithmetic "
                           f"({', '.join(not_pinned)}); the library's bytes would be this "
                           f"machine's")


def _lsr_listing(only: list[str] | None) -> tuple[list[Any], dict[str, Any]]:
    """The LLM-SRBench problems to build (``only`` those) and the suites' funnels."""
    from lawlab_ops.taskbuild import lsr

    _require_pinned()
    if only and all(any(s.task_id == name for s in SPECS) for name in only):
        return [], {}  # real-data tasks only: no suite to screen
    with threadpool_limits(1):
        return lsr.problems(only), (lsr.funnels() if not only else {})


def _build_problem(problem: Any, out: str) -> dict[str, Any]:
    from lawlab_ops.taskbuild import lsr_build

    _require_pinned()
    log.info("building problem", extra={"task_id": problem.problem_id})
    with threadpool_limits(1):
        return lsr_build.build_problem(problem, Path(out))


def release_id(fingerprint: str, files: Mapping[str, str]) -> str:
    """A library's release: its world key's fingerprint and every world it serves
    (the hashes of each task's simulator/ files), in 16 hex digits."""
    h = hashlib.sha256(fingerprint.encode())
    for name in sorted(files):
        if "/simulator/" in f"/{name}":
            h.update(f"{name}={files[name]}\n".encode())
    return f"{fingerprint[:8]}-{h.hexdigest()[:16]}"


def private_variants_path(out: Path) -> Path:
    """Where the operator keeps private variants: beside the world key."""
    return worldkey.default_path(out).with_name("world-variants.yaml")


def _build_one(args: tuple[str, str, worldkey.WorldKey, list[dict[str, Any]]],
               proposer: llm_variants.Proposer | None = None) -> dict[str, Any]:
    task_id, out, key, private = args
    _require_pinned()
    spec = next(s for s in SPECS if s.task_id == task_id)
    log.info("building task", extra={"task_id": task_id})
    start = time.perf_counter()
    result = build_task(spec, Path(out), proposer, key, private)
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result
