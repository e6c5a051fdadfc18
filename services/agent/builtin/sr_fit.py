"""Symbolic regression that the ``sr`` agent runs INSIDE the sandbox.

Sent as the code of a ``<python>`` call (followed by ``main(CAP, HOTSPOTS)``);
standalone: it uses the preloaded ``train_df``, ``input_cols``, ``target_col``
(and ``group_ids_train`` for Type II) and imports pyoperon, which the
sandbox admits only in sessions of built-in agents.

Method. Genetic programming with pyoperon (add, sub, mul, div, exp, log,
sqrt, powers; constants tuned by Levenberg-Marquardt every generation), in log
space when the target is positive and spans two decades or more. The data are
split 75/25 (by whole groups for Type II). Among the Pareto front
(complexity vs error), models with more constants than the cap are dropped;
the chosen model is the least complex one whose validation error is within 5%
of the best validation error on the front (the stated criterion). Under 50
observations a holdout is too noisy: the search uses all of them, with shorter
models, and the front is ranked by BIC (n log MSE + k log n, k constants). Type II: the
chosen structure gets a per-group scale (and offset, when the cap allows),
fitted by linear least squares per group. Prints one ``LAWLAB_RESULT`` line.
"""

import warnings

import numpy as np


def _split(n, groups, rng):
    if groups is not None:
        names = np.unique(groups)
        rng.shuffle(names)
        val_groups = set(names[: max(1, len(names) // 4)]) if len(names) > 1 else set()
        val = np.array([g in val_groups for g in groups])
    else:
        val = np.zeros(n, dtype=bool)
        val[rng.permutation(n)[: max(1, n // 4)]] = True
    if val.all() or not val.any():
        val = np.zeros(n, dtype=bool)
        val[rng.permutation(n)[: max(1, n // 4)]] = True
    return ~val, val


def _constants(expr):
    """How many numeric literals ``expr`` holds (``re`` is not importable here)."""
    count, i, prev = 0, 0, " "
    while i < len(expr):
        ch = expr[i]
        if ch.isdigit() and not (prev.isalnum() or prev in "_."):
            count += 1
            while i < len(expr) and (expr[i].isdigit() or expr[i] in ".eE" or (
                    expr[i] in "+-" and expr[i - 1] in "eE")):
                i += 1
            prev = "0"
            continue
        prev = ch
        i += 1
    return count


def _predict(expr, X, names):
    env = {n: X[:, i] for i, n in enumerate(names)}
    env.update({"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs})
    with np.errstate(all="ignore"):
        return np.asarray(eval(expr, {"__builtins__": {}}, env), dtype=float) * np.ones(len(X))  # noqa: S307


def search(X, t, train, val, names, small, time_limit=40, seed=1):
    """The Pareto front (complexity vs error) of one pyoperon run: every model that
    is finite on the validation rows, as (complexity, val MSE, constants, expr)."""
    from pyoperon.sklearn import SymbolicRegressor

    reg = SymbolicRegressor(
        allowed_symbols="add,sub,mul,div,exp,log,sqrt,constant,variable",
        optimizer_iterations=10, max_length=15 if small else 25, max_depth=8, generations=1000,
        population_size=500, n_threads=1, random_state=seed, max_time=int(time_limit),
        max_evaluations=1_000_000, objectives=["r2", "length"], epsilon=1e-5)
    reg.fit(X[train], t[train])
    front = []
    for m in reg.pareto_front_:
        expr = reg.get_model_string(m["tree"], 6, names).replace("^", "**")
        pred = _predict(expr, X[val], names)
        if not np.all(np.isfinite(pred)):
            continue
        front.append((m["complexity"], float(np.mean((pred - t[val]) ** 2)), _constants(expr),
                      expr))
    return front


def select(front, cap_constants, n, small):
    """The stated criterion: models within the constant cap; then the least complex
    one within 5% of the best validation error (under 50 rows: the least BIC)."""
    allowed = [f for f in front if f[2] <= cap_constants]
    if not allowed:
        return None
    if small:
        return min(allowed, key=lambda f: n * np.log(max(f[1], 1e-300)) + f[2] * np.log(n))
    best = min(e for _, e, _, _ in allowed)
    return min(f for f in allowed if f[1] <= best * 1.05 + 1e-300)


def main(cap_constants=6, local_params=0, hotspots=0, time_limit=40, seed=1):
    warnings.filterwarnings("ignore")
    df = train_df.dropna(subset=[target_col, *input_cols])  # noqa: F821 (preloaded)
    names = list(input_cols)  # noqa: F821
    X = df[names].to_numpy(float)
    y = df[target_col].to_numpy(float)  # noqa: F821
    groups = df["group_id"].astype(str).to_numpy() if local_params else None
    log_space = bool(np.all(y > 0) and np.max(y) / np.min(y) >= 100)
    t = np.log(y) if log_space else y
    rng = np.random.default_rng(seed)
    small = len(y) < 50
    if small:
        train = val = np.ones(len(y), dtype=bool)
    else:
        train, val = _split(len(y), groups, rng)
    front = search(X, t, train, val, names, small, time_limit, seed)
    chosen = select(front, cap_constants, len(y), small)
    if chosen is None:
        print("LAWLAB_RESULT " + repr({"ok": False, "reason": "no finite model within the cap"}))
        return
    complexity, err, k, expr = chosen
    front = [f for f in front if f[2] <= cap_constants]
    out = {"ok": True, "expr": expr, "log_space": log_space, "complexity": int(complexity),
           "val_mse": err, "n_constants": k, "front": [(int(c), e, kk) for c, e, kk, _ in
                                                        sorted(front)][:12]}
    if hotspots:
        resid = np.abs(_predict(expr, X, names) - t)
        worst = np.argsort(-np.nan_to_num(resid, nan=np.inf))[:hotspots]
        out["hotspots"] = [{n: float(X[i, j]) for j, n in enumerate(names)}
                           | ({"group_id": str(groups[i])} if groups is not None else {})
                           for i in worst]
    print("LAWLAB_RESULT " + repr(out))
