"""Official-format Parallel worlds for the fixtures: ``simulator/state.joblib`` laid
out as the SciLaws-Bench harness reads it (harness/sim_runtime.py: a joblib pickle
of a dict; the residual bootstrap an object of the class
``data_aug.sim2.bootstrap.ResidualBootstrap`` with ``x_axes``, ``_Xs``, ``_res``,
``_mean``, ``_std``; Type II ``groups[g]`` with ``params``, ``bootstrap``,
``noise_scale``, ``support``), made here from lawlab's own fixture tasks. The hidden
laws are variants of the fixtures' references, as the official worlds vary a
published law."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
from scipy.optimize import least_squares

ORBIT = "orbit_distance_demo__r_mean_km"
CULTURE = "culture_growth_demo__od"

# the hidden laws: the time average with a fourth-order term; the logistic on a baseline
HIDDEN = {
    ORBIT: '''"""Hidden law (fixture): the time-averaged distance with a fourth-order term."""
import numpy as np

USED_INPUTS = ["a_AU", "e"]
OTHER_CONSTANTS = {"AU_KM": 1.495978707e8}
LAW_CONSTANTS = {"c2": 0.5, "c4": 0.0}
LOCAL_FITTABLE = {}


def predict(X, c2, c4):
    a = np.asarray(X[:, 0], dtype=float)
    ecc = np.asarray(X[:, 1], dtype=float)
    return OTHER_CONSTANTS["AU_KM"] * a * (1.0 + c2 * ecc ** 2 + c4 * ecc ** 4)
''',
    CULTURE: '''"""Hidden law (fixture): the modified logistic on a shared baseline b."""
import numpy as np

USED_INPUTS = ["time_h"]
LAW_CONSTANTS = {"b": 0.0}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {"A": {"init": 0.5}, "mu": {"init": 0.05}, "lam": {"init": 3.0}}


def fit(X_fit, y_fit, b):
    return {"A": 0.5, "mu": 0.05, "lam": 3.0}


def predict(X, b, A, mu, lam):
    t = X[:, 0]
    return b + A / (1.0 + np.exp(4.0 * mu / A * (lam - t) + 2.0))
''',
}
STATE_CONSTANTS = {ORBIT: {"c2": 0.5, "c4": 0.375}}  # the published world's values
BASELINE = 0.02  # the culture world's shared b
NOISE_SCALE = 0.5


class ResidualBootstrap:
    """The harness's class, by name: only its fields matter to a reader."""

    def __init__(self, frame: pd.DataFrame, cols: list[str], residuals: np.ndarray) -> None:
        raw = frame[cols].to_numpy(float)
        self.x_axes = ["log10" if np.all(raw[:, i] > 0) and raw[:, i].max() / raw[:, i].min()
                       >= 100 else "linear" for i in range(len(cols))]
        for i, kind in enumerate(self.x_axes):
            if kind == "log10":
                raw[:, i] = np.log10(raw[:, i])
        self.k_frac, self.k_min, self.k_max = 0.15, 8, 64
        self._mean = raw.mean(axis=0)
        self._std = np.where(raw.std(axis=0) > 0, raw.std(axis=0), 1.0)
        self._Xs = (raw - self._mean) / self._std
        self._res = np.asarray(residuals, dtype=float)
        self._tree = None


_MODULE = "data_aug.sim2.bootstrap"
for _name in ("data_aug", "data_aug.sim2", _MODULE):
    sys.modules.setdefault(_name, types.ModuleType(_name))
ResidualBootstrap.__module__ = _MODULE
sys.modules[_MODULE].ResidualBootstrap = ResidualBootstrap  # type: ignore[attr-defined]


def hidden_predict(task: str, X: np.ndarray, **constants: float) -> np.ndarray:
    ns: dict[str, Any] = {}
    exec(compile(HIDDEN[task], f"<hidden {task}>", "exec"), ns)  # noqa: S102 (test code)
    return np.asarray(ns["predict"](X, **constants), dtype=float)


def _support(frame: pd.DataFrame, cols: list[str]) -> dict[str, dict[str, float]]:
    return {c: {"min": float(frame[c].min()), "max": float(frame[c].max())} for c in cols}


def culture_params(train: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Each culture's A, mu, lam fitted on its training rows with b = BASELINE."""
    out = {}
    for g, rows in train.groupby("group_id"):
        t, y = rows["time_h"].to_numpy(float), rows["od"].to_numpy(float)

        def resid(p: np.ndarray, t: np.ndarray = t, y: np.ndarray = y) -> np.ndarray:
            return hidden_predict(CULTURE, t[:, None], b=BASELINE, A=p[0], mu=p[1], lam=p[2]) - y

        fit = least_squares(resid, [max(y.max(), 0.1), 0.05, 3.0],
                            bounds=([1e-3, 1e-4, -50.0], [10.0, 5.0, 100.0]))
        out[str(g)] = {"b": BASELINE, "A": float(fit.x[0]), "mu": float(fit.x[1]),
                       "lam": float(fit.x[2])}
    return out


def write_state(task: str, task_dir: Path) -> dict[str, Any]:
    """``task_dir/simulator/state.joblib`` (and formula.py) for ``task``; the state."""
    train = pd.read_csv(task_dir / "data" / "train.csv", dtype={"group_id": str})
    sim = task_dir / "simulator"
    sim.mkdir(exist_ok=True)
    (sim / "formula.py").write_text(HIDDEN[task], encoding="utf-8")
    if task == ORBIT:
        cols, target = ["a_AU", "e"], "r_mean_km"
        law = STATE_CONSTANTS[ORBIT]
        pred = hidden_predict(task, train[cols].to_numpy(float), **law)
        state: dict[str, Any] = {
            "schema_version": "sim2.typeI.v1", "formula_source": HIDDEN[task],
            "formula_id": "time_average_e4", "law_constants": dict(law), "used_inputs": cols,
            "all_input_cols": cols, "target": target, "metric": "rmse",
            "support": _support(train, cols), "fetch_budget_rows": 600,
            "residual_space": "linear", "noise_scale": NOISE_SCALE,
            "bootstrap": ResidualBootstrap(train, cols, train[target].to_numpy(float) - pred),
            "real_rows": train.to_dict("records")}
    else:
        cols, target = ["time_h"], "od"
        params = culture_params(train)
        groups = {}
        for g, rows in train.groupby("group_id"):
            pred = hidden_predict(task, rows[cols].to_numpy(float), **params[str(g)])
            groups[str(g)] = {"params": params[str(g)], "n": len(rows),
                              "noise_scale": NOISE_SCALE, "support": _support(rows, cols),
                              "bootstrap": ResidualBootstrap(rows, cols,
                                                             rows[target].to_numpy(float) - pred),
                              "real_rows": rows.to_dict("records")}
        state = {"schema_version": "sim2.typeII.v1", "formula_source": HIDDEN[task],
                 "form_id": "logistic_baseline", "used_inputs": cols, "all_input_cols": cols,
                 "target": target, "fetch_budget_rows": 600, "residual_space": "linear",
                 "noise_scale": NOISE_SCALE, "groups": groups}
    joblib.dump(state, sim / "state.joblib")
    return state
