"""NIST's Statistical Reference Datasets for nonlinear regression, read from
their own files (tests/data/nist_strd/*.dat, as NIST publishes them).

Each file states the model, two starting points ("Start 1" far from the
solution, "Start 2" nearer), the certified parameter values (to 11 significant
digits), the certified residual sum of squares, and the data. The model is
read from the file and rewritten in lawlab's expression syntax (``exp[...]``
-> ``exp(...)``, ``arctan`` -> ``atan``), so nothing about a problem is retyped
here. Precision is measured as NIST's log relative error (LRE): the number of
significant digits on which a fitted value agrees with the certified one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "nist_strd"


@dataclass(frozen=True)
class Problem:
    name: str
    difficulty: str  # Lower, Average, Higher
    expr: str  # the right-hand side in lawlab's syntax
    log_target: bool  # the model is for log(y) (Nelson)
    params: tuple[str, ...]
    starts: tuple[tuple[float, ...], tuple[float, ...]]
    certified: tuple[float, ...]
    certified_sd: tuple[float, ...]  # the parameters' certified standard deviations
    certified_rss: float
    columns: dict[str, np.ndarray]  # y and the predictors (x, or x1 and x2)

    @property
    def y(self) -> np.ndarray:
        return np.log(self.columns["y"]) if self.log_target else self.columns["y"]

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        return {k: v for k, v in self.columns.items() if k != "y"}


def lre(value: float, certified: float) -> float:
    """NIST's log relative error: -log10(|value - c| / |c|), capped at 11 (the
    certified digits), 0 when not even the first digit agrees."""
    if not math.isfinite(value):
        return 0.0
    if value == certified:
        return 11.0
    err = abs(value - certified) / abs(certified)
    return max(0.0, min(11.0, -math.log10(err)))


def _model(lines: list[str]) -> tuple[str, bool]:
    model_at = next(i for i, ln in enumerate(lines) if ln.startswith("Model:"))
    # the equation starts at "y =" or "log[y] =" (Roszman1 defines pi first) and
    # runs to the next blank line
    start = next(i for i in range(model_at, len(lines))
                 if re.match(r"\s*(y|log\[y\])\s*=", lines[i]))
    text = []
    for ln in lines[start:]:
        if not ln.strip():
            break
        text.append(ln.strip())
    model = " ".join(text)
    lhs, _, rhs = model.partition("=")
    rhs = re.sub(r"\+\s*e\s*$", "", rhs.strip()).strip()
    rhs = rhs.replace("[", "(").replace("]", ")").replace("arctan", "atan")
    return rhs, lhs.strip().startswith("log")


def load(name: str) -> Problem:
    lines = (DATA_DIR / f"{name}.dat").read_text().splitlines()
    expr, log_target = _model(lines)
    difficulty = next(ln.split()[0] for ln in lines if "Level of Difficulty" in ln)
    params, s1, s2, cert, sd = [], [], [], [], []
    for ln in lines:
        m = re.match(r"\s*(b\d+)\s*=\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", ln)
        if m:
            params.append(m[1])
            s1.append(float(m[2]))
            s2.append(float(m[3]))
            cert.append(float(m[4]))
            sd.append(float(m[5]))
    rss = next(float(ln.split(":")[1]) for ln in lines if ln.startswith("Residual Sum of Squares"))
    data_at = next(i for i, ln in enumerate(lines) if ln.startswith("Data:") and "y" in ln
                   and "Response" not in ln)
    header = lines[data_at].split(":", 1)[1].split()
    rows = [[float(v) for v in ln.split()] for ln in lines[data_at + 1:] if ln.strip()]
    table = np.array(rows)
    columns = {h: table[:, j] for j, h in enumerate(header)}
    return Problem(name, difficulty, expr, log_target, tuple(params), (tuple(s1), tuple(s2)),
                   tuple(cert), tuple(sd), rss, columns)


def names() -> list[str]:
    return sorted(p.stem for p in DATA_DIR.glob("*.dat"))
