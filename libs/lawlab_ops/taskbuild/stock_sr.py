"""The stock symbolic regressions an LSR-Synth target must defeat to count as novel.

LLM-SRBench keeps a synthetic problem only when its target is new, beyond what a
stock method lists. Two stock regressions stand for that here; a candidate either
recovers *exactly* from its own training records (NMSE below ``EXACT``) is refused:

- **sr's library** (``sr_library``): the feature library of lawlab's ``sr`` agent
  (monomials, fixed and parametric factors, transforms of the target, up to four
  terms, fitted by variable projection), run from the agent's own source file with
  its genetic programming switched off. What it recovers, ``sr`` solves at once.
- **A standard dictionary** (``dictionary_nmse``): the unary forms of every input
  (powers -2 to 3 and 1/2, 3/2, log, exp(x), exp(-x), sin, cos, tanh, |x|, x|x|),
  the products of two of them on different inputs and a constant, searched by
  forward orthogonal least squares (a beam of ``BEAM`` supports) up to
  ``DICTIONARY_TERMS`` terms (the sparse
  regression of SINDy-style methods, with unit scales inside the functions).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

EXACT = 1e-10  # sr's own bound for exact to rounding (a share of the variance)
DICTIONARY_TERMS = 6
BEAM = 8

UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    # text ({} is the input): (function, where it is defined: all | nonzero | positive)
    "{}": (lambda x: x, "all"), "{}**2": (lambda x: x ** 2, "all"),
    "{}**3": (lambda x: x ** 3, "all"), "1/{}": (lambda x: 1 / x, "nonzero"),
    "1/{}**2": (lambda x: 1 / x ** 2, "nonzero"), "sqrt({})": (np.sqrt, "positive"),
    "{}**1.5": (lambda x: x ** 1.5, "positive"), "log({})": (np.log, "positive"),
    "exp({})": (np.exp, "all"), "exp(-{})": (lambda x: np.exp(-x), "all"),
    "sin({})": (np.sin, "all"), "cos({})": (np.cos, "all"), "tanh({})": (np.tanh, "all"),
    "abs({})": (np.abs, "all"), "{}*abs({})": (lambda x: x * np.abs(x), "all"),
}


def _unary(x: np.ndarray) -> dict[str, np.ndarray]:
    ok = {"all": True, "nonzero": bool(np.all(x != 0)), "positive": bool(np.all(x > 0))}
    out = {}
    with np.errstate(all="ignore"):
        for name, (f, where) in UNARY.items():
            if ok[where]:
                v = f(x)
                if np.all(np.isfinite(v)) and np.ptp(v) > 0:
                    out[name] = v
    return out


def dictionary(frame: pd.DataFrame, inputs: list[str]) -> tuple[list[str], np.ndarray]:
    """The standard dictionary's columns (names, matrix) on the records."""
    per = {c: _unary(frame[c].to_numpy(float)) for c in inputs}
    names, cols = ["1"], [np.ones(len(frame))]
    for c in inputs:
        for k, v in per[c].items():
            names.append(k.replace("{}", c))
            cols.append(v)
    for a, b in itertools.combinations(inputs, 2):
        for (ka, va), (kb, vb) in itertools.product(per[a].items(), per[b].items()):
            names.append(f"{ka.replace('{}', a)}*{kb.replace('{}', b)}")
            cols.append(va * vb)
    return names, np.column_stack(cols)


def dictionary_nmse(frame: pd.DataFrame, target: str, inputs: list[str],
                    max_terms: int = DICTIONARY_TERMS, beam: int = BEAM) -> float:
    """The least NMSE a sparse regression reaches on the standard dictionary with up to
    ``max_terms`` terms: forward selection by orthogonal least squares (each step adds
    the column that most reduces the residual once projected), keeping the ``beam``
    best supports of each size."""
    _, F = dictionary(frame, inputs)
    with np.errstate(all="ignore"):  # columns to unit norm (a fit is the same on them)
        scale = np.max(np.abs(F), axis=0)
        F = F / np.where(scale > 0, scale, 1.0)
        F = F[:, np.all(np.isfinite(F), axis=0) & (scale > 0) & np.isfinite(scale)]
        F = F / np.linalg.norm(F, axis=0)
    y = frame[target].to_numpy(float)
    var = float(np.var(y)) or 1.0
    supports: list[tuple[int, ...]] = [()]
    best = float(np.mean((y - y.mean()) ** 2)) / var
    for _ in range(max_terms):
        grown: dict[tuple[int, ...], float] = {}
        for S in supports:
            if S:
                Q, _r = np.linalg.qr(F[:, list(S)])
                r = y - Q @ (Q.T @ y)
                Fp = F - Q @ (Q.T @ F)
            else:
                r, Fp = y, F
            norm = np.sum(Fp ** 2, axis=0)
            gain = np.where(norm > 1e-12 * np.sum(F ** 2, axis=0) + 1e-300,
                            (Fp.T @ r) ** 2 / np.maximum(norm, 1e-300), -np.inf)
            gain[list(S)] = -np.inf
            rss = float(r @ r)
            for j in np.argsort(-gain)[:beam]:
                key = tuple(sorted((*S, int(j))))
                grown[key] = min(grown.get(key, np.inf), max(rss - float(gain[j]), 0.0))
        supports = [k for k, _v in sorted(grown.items(), key=lambda kv: kv[1])[:beam]]
        for S in supports[:1]:
            coef, *_ = np.linalg.lstsq(F[:, list(S)], y, rcond=None)
            best = min(best, float(np.mean((y - F[:, list(S)] @ coef) ** 2)) / var)
        if best < EXACT:
            break
    return best


def sr_source() -> Path:
    """The ``sr`` agent's regression script (``services/agent``), read as a file: the
    builder never imports the agent service."""
    spec = importlib.util.find_spec("lawlab_agent")
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    roots.append(Path(__file__).resolve().parents[3] / "services" / "agent" / "lawlab_agent")
    for root in roots:
        path = root / "builtin" / "sr" / "fit.py"
        if path.exists():
            return path
    raise FileNotFoundError("sr's fit.py (services/agent/lawlab_agent/builtin/sr/fit.py) "
                            "is not in this checkout: the LSR-Synth novelty check runs it")


@cache
def _sr_code() -> Any:
    path = sr_source()
    return compile(path.read_text(), str(path), "exec")


def sr_library(frame: pd.DataFrame, target: str, inputs: list[str],
               cap_constants: int = 10) -> dict[str, Any]:
    """sr's library search on the records (seed 1, no genetic programming): its result
    record; ``exact`` says whether it recovered the target to rounding."""
    namespace: dict[str, Any] = {"__name__": "lawlab_sr_fit", "train_df": frame,
                                 "target_col": target, "input_cols": list(inputs)}
    exec(_sr_code(), namespace)  # noqa: S102  (lawlab's own agent script, not a submission)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        namespace["main"](cap_constants=cap_constants, gp_evaluations=0, seed=1)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("LAWLAB_RESULT "))
    import ast

    result: dict[str, Any] = ast.literal_eval(line.removeprefix("LAWLAB_RESULT "))
    return result
