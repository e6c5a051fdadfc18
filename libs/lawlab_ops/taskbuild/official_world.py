"""An official SciLaws-Bench Parallel world (``simulator/state.joblib``) served as published.

The official release keeps each task's world in ``simulator/state.joblib``: a
joblib pickle of a dict holding the hidden law's source (``formula_source``),
its constants (``law_constants``; per group ``groups[g]["params"]`` for Type
II), the input support, the residual space, a noise scale and a residual
bootstrap (the harness's ``ResidualBootstrap``: standardised input coordinates
``_Xs`` with their ``_mean``/``_std`` and log10 axes, and the residuals
``_res``). Reading a pickle runs code, so the file is read only inside a
sandbox box (the runner's ``state`` mode: namespaces, seccomp, rlimits, no
network) and only JSON of numbers and text leaves it; this module checks that
JSON and writes lawlab's own world files (``simulator/world.json`` and
``residuals.npz``), which the simulator and the judge read as they read
lawlab's worlds.

What is kept as published: the hidden law (converted to the restricted
expression language like the references), its constants per group, the
support, the residual space, the noise scale, the residual pools with their
coordinates and the draw: a uniformly chosen residual of one of the k nearest
records, k = clip(round(0.15 n), 8, 64), each Type II group from its own pool
(``"draw": "resample"`` in world.json; lawlab's own worlds draw a smoothed,
debiased residual instead, docs/protocol.md section 5). What differs: a Type II
world's groups share one standardisation of the coordinates (the harness
standardises each group's own), so a group's nearest records can differ where
its spread differs from the pooled one. The budget is lawlab's (the task's caps), not the
harness's ``fetch_budget_rows``, which is kept in ``world.json`` for reference.

A task folder with ``simulator/formula.py`` (the hidden law) and no state gets
its world from lawlab's own builder (:func:`built_world`): the hidden law's
constants fitted on every record of the imported splits, and lawlab's
residual-calibrated noise (docs/protocol.md section 5), as its own tasks' worlds
have. A task without a hidden law gets no world: lawlab's structural variants
need a task's catalogue of mechanisms, which an imported task does not have.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lawlab.vocab import ExecStatus

STATE_UID = 62990  # the importer's box runs as this uid when the importer is root
STATE_SECONDS = 120.0
MAX_STATE_BYTES = 512 * 1024**2
GLOBAL = "_all"
JUDGE_POINTS, JUDGE_SALT = 80, 7  # the judge's probes, as lawlab's builder sets them


class StateError(ValueError):
    """The state file could not be read, or does not hold a world lawlab can serve."""


@dataclass
class Law:
    """The hidden law as the importer converted it: its expression, the constants
    its module declares (defaults) and its per-group parameters."""

    expr: str
    constants: dict[str, float]
    local: list[str] = field(default_factory=list)


def read_state(path: Path, timeout: float = STATE_SECONDS) -> dict[str, Any]:
    """``path`` (a pickle) read inside a sandbox box; its content as plain JSON."""
    from lawlab_sandbox import box

    size = path.stat().st_size
    if size > MAX_STATE_BYTES:
        raise StateError(f"{size:,} bytes; at most {MAX_STATE_BYTES:,}")
    request = json.dumps({"state": base64.b64encode(path.read_bytes()).decode()}).encode()
    uid = STATE_UID if os.geteuid() == 0 else None
    try:
        result = asyncio.run(box.run_box("state", request, None, timeout, box.RESULT_BYTES,
                                         uid=uid))
    except box.SandboxUnavailable as err:
        raise StateError(f"the sandbox that reads it is unavailable ({err})") from None
    if result.status != ExecStatus.OK:
        tail = result.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise StateError(f"reading it in the sandbox ended with {result.status}: {tail[0][:300]}")
    try:
        doc = json.loads(result.stdout)
    except json.JSONDecodeError as err:
        raise StateError(f"the sandbox's reading is not JSON ({err.msg})") from None
    if not isinstance(doc, dict):
        raise StateError("the sandbox's reading is not a dict")
    return doc


def _array(value: Any, where: str, ndim: int) -> np.ndarray:
    if isinstance(value, dict) and "__unsupported__" in value:
        raise StateError(f"{where} is a {value['__unsupported__']}, not numbers")
    try:
        out = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise StateError(f"{where} is not numbers") from None
    if out.ndim != ndim:
        raise StateError(f"{where} has {out.ndim} dimensions, {ndim} expected")
    if not np.all(np.isfinite(out)):
        raise StateError(f"{where} holds non-finite values")
    return out


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise StateError(f"{where} is not a finite number: {value!r}"[:200])
    return float(value)


@dataclass
class _Pool:
    axes: list[str]
    log_axes: list[str]
    raw: np.ndarray       # (n, d): each axis in its own space (log10 where it is log)
    residuals: np.ndarray  # (n,)


def _pool(bs: Any, where: str, axes_candidates: Sequence[Sequence[str]]) -> _Pool:
    if not isinstance(bs, dict) or not bs.get("__bootstrap__"):
        raise StateError(f"{where} is not the harness's ResidualBootstrap")
    xs = _array(bs.get("_Xs"), f"{where}._Xs", 2)
    res = _array(bs.get("_res"), f"{where}._res", 1)
    mean = _array(bs.get("_mean"), f"{where}._mean", 1)
    std = _array(bs.get("_std"), f"{where}._std", 1)
    d = xs.shape[1]
    if len(res) != len(xs) or len(mean) != d or len(std) != d or len(res) == 0:
        raise StateError(f"{where}: {len(xs)} coordinates, {len(res)} residuals, "
                         f"{len(mean)} means, {len(std)} scales do not agree")
    axes = next((list(a) for a in axes_candidates if len(a) == d), None)
    if axes is None:
        raise StateError(f"{where}: {d} coordinate axes, and neither the used inputs nor all "
                         "inputs are that many")
    kinds = bs.get("x_axes")
    if isinstance(kinds, dict):
        kinds = [kinds.get(a, "linear") for a in axes]
    if not isinstance(kinds, list) or len(kinds) != d or \
            not all(k in ("log10", "linear") for k in kinds):
        raise StateError(f"{where}.x_axes: expected 'log10' or 'linear' per axis, got {kinds!r}"
                         [:300])
    return _Pool(axes, [a for a, k in zip(axes, kinds) if k == "log10"],
                 xs * np.where(std > 0, std, 1.0) + mean, res)


def _support(raw: Any, names: Sequence[str], declared: Mapping[str, tuple[float, float]],
             where: str) -> dict[str, list[float]]:
    out = {}
    for n in names:
        entry = raw.get(n) if isinstance(raw, dict) else None
        if isinstance(entry, dict) and "min" in entry and "max" in entry:
            lo, hi = _number(entry["min"], f"{where}.{n}.min"), _number(entry["max"],
                                                                       f"{where}.{n}.max")
        else:
            lo, hi = declared[n]
        if not lo <= hi:
            raise StateError(f"{where}.{n}: min {lo:g} above max {hi:g}")
        out[n] = [lo, hi]
    return out


def _values(law: Law, given: Any, where: str) -> dict[str, float]:
    given = given if isinstance(given, dict) else {}
    out = {}
    for name in [*law.constants, *law.local]:
        if name in given:
            out[name] = _number(given[name], f"{where}.{name}")
        elif name in law.constants:
            out[name] = float(law.constants[name])
        else:
            raise StateError(f"{where}: no value for the hidden law's parameter {name!r}")
    return out


def _base_fields(base: tuple[str, Law] | None) -> dict[str, Any]:
    """world.json's statement of the published base a world without pieces varies
    (structure.hidden_law_of reads it)."""
    if base is None:
        return {}
    name, ref = base
    return {"base_reference": name, "base_expr": ref.expr, "base_constants": dict(ref.constants),
            "base_local": list(ref.local),
            "base_global": sorted(set(ref.constants) - set(ref.local))}


def build_world(doc: Mapping[str, Any], law: Law, inputs: Sequence[str], multi: bool,
                declared: Mapping[str, tuple[float, float]],
                base: tuple[str, Law] | None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """lawlab's world files (world.json's content, residuals.npz's arrays) from the
    sandbox's reading ``doc`` of an official state; ``base``: the published
    reference (name, law) the judge's rungs measure from (docs/judges.md)."""
    used = [str(u) for u in doc.get("used_inputs") or []]
    every = [str(u) for u in doc.get("all_input_cols") or inputs]
    unknown = sorted(set(used + every) - set(inputs))
    if unknown:
        raise StateError(f"inputs {unknown} are not the task's inputs {list(inputs)}")
    space_raw = str(doc.get("residual_space", "linear")).lower()
    space = "log10" if space_raw in ("log", "log10") else "linear"
    top_scale = doc.get("noise_scale", 1.0)
    axes_candidates = [used, every, list(inputs)]
    if multi:
        groups_raw = doc.get("groups")
        if not isinstance(groups_raw, dict) or not groups_raw:
            raise StateError("a Type II state without groups")
        groups = sorted(groups_raw)
        pools = {g: _pool(groups_raw[g].get("bootstrap"), f"groups[{g}].bootstrap",
                          axes_candidates) for g in groups}
        per_group = {g: _values(law, groups_raw[g].get("params"), f"groups[{g}].params")
                     for g in groups}
        names = [*law.constants, *law.local]
        shared = {n for n in names if len({per_group[g][n] for g in groups}) == 1}
        constants = {n: per_group[groups[0]][n] for n in names if n in shared}
        local = {n: {g: per_group[g][n] for g in groups} for n in names if n not in shared}
        s = {g: _number(groups_raw[g].get("noise_scale", top_scale), f"groups[{g}].noise_scale")
             for g in groups}
        supports = {g: _support(groups_raw[g].get("support"), inputs, declared,
                                f"groups[{g}].support") for g in groups}
        support = {n: [min(supports[g][n][0] for g in groups),
                       max(supports[g][n][1] for g in groups)] for n in inputs}
        judge_support = supports
    else:
        groups = []
        pools = {GLOBAL: _pool(doc.get("bootstrap"), "bootstrap", axes_candidates)}
        constants = _values(law, doc.get("law_constants"), "law_constants")
        local = {}
        s = {GLOBAL: _number(top_scale, "noise_scale")}
        support = _support(doc.get("support"), inputs, declared, "support")
        judge_support = {GLOBAL: support}
    first = next(iter(pools.values()))
    if any(p.axes != first.axes or p.log_axes != first.log_axes for p in pools.values()):
        raise StateError("the groups' bootstraps have different coordinate axes")
    raw = np.concatenate([p.raw for p in pools.values()])
    center = raw.mean(axis=0)
    scale = raw.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    arrays = {"coords": (raw - center) / scale,
              "residuals": np.concatenate([p.residuals for p in pools.values()]),
              "groups": np.concatenate([np.full(len(p.residuals), g) for g, p in pools.items()])
              .astype(str)}
    law_doc: dict[str, Any] = {
        "expr": law.expr, "constants": constants, "local": local,
        "global": sorted(constants), "local_names": sorted(local), "pieces": [],
        "added_terms": [],
        "rationale": "the official SciLaws-Bench world, as published (simulator/state.joblib)"}
    law_doc.update(_base_fields(base))
    spec = {
        "official": {"source": "simulator/state.joblib", "read": "in a sandbox box",
                     **{k: doc[k] for k in ("schema_version", "formula_id", "form_id",
                                            "fetch_budget_rows", "metric", "p_min_floor")
                        if isinstance(doc.get(k), (str, int, float))}},
        "law": law_doc, "space": space, "inputs": list(inputs), "coord_inputs": first.axes,
        "support": support, "groups": groups, "s": s, "log_inputs": first.log_axes,
        "draw": "resample",
        "center": center.tolist(), "scale": scale.tolist(),
        "judge": {"groups": groups or [GLOBAL], "points": JUDGE_POINTS, "salt": JUDGE_SALT,
                  "support": judge_support},
    }
    return spec, arrays


def built_world(task_id: str, pooled: Any, target: str, inputs: Sequence[Mapping[str, Any]],
                metric: str, multi: bool, rubric: Sequence[dict[str, Any]],
                caps: Mapping[str, float], law: Law, base: tuple[str, Law] | None
                ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A world from lawlab's builder for a hidden law given without its state
    (module docstring): fitted on ``pooled`` (every imported record), its noise the
    builder's. The noise streams are seeded by the simulator's key at serve time;
    the build's own randomness by a key derived from the task id."""
    import hashlib

    from lawlab.worlds.worldkey import WorldKey
    from lawlab_ops.taskbuild.worlds import WorldBuilder

    key = WorldKey(hashlib.sha256(f"lawlab imported world\0{task_id}".encode()).digest())
    builder = WorldBuilder(task_id, pooled, target, inputs, metric, multi, rubric, caps, key)
    local = [n for n in law.local]
    fitted = builder.fit(law.expr, [n for n in law.constants if n not in local], local,
                         {**law.constants}, n_starts=4)
    if not np.isfinite(fitted.rss):
        raise StateError("the hidden law could not be fitted to the imported records")
    spec, arrays, _ = builder.make_world(law.expr, fitted.constants, fitted.local)
    spec["law"].update({"global": sorted(fitted.constants), "local_names": sorted(fitted.local),
                        "pieces": [], "added_terms": [],
                        "rationale": "the hidden law of simulator/formula.py, fitted on the "
                                     "imported records; lawlab's residual-calibrated noise"})
    spec["law"].update(_base_fields(base))
    spec["official"] = {"source": "simulator/formula.py",
                        "noise": "lawlab's builder (no simulator/state.joblib)"}
    return spec, arrays


def write_world(root: Path, spec: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """``root/simulator/world.json`` and ``residuals.npz``, readable by the owner only."""
    folder = root / "simulator"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    (folder / "world.json").write_text(json.dumps(spec, indent=1, allow_nan=False),
                                       encoding="utf-8")
    from lawlab_ops.taskbuild.build import _write_npz  # no pickled objects, fixed times

    _write_npz(folder / "residuals.npz", arrays)
    for name in ("world.json", "residuals.npz"):
        (folder / name).chmod(0o600)
