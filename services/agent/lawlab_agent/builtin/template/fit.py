"""Family fitting that the ``template`` agent runs INSIDE the sandbox.

This file is sent as the code of a ``<python>`` call (followed by a call of
:func:`main`), so it must be standalone: it uses only the preloaded names
``np``, ``pd``, ``scipy``, ``train_df``, ``input_cols``, ``target_col`` and the
allowed imports. It fits a library of scientific functional families by
nonlinear least squares, in log space when the target is positive and spans
decades, chooses by cross-validated error (leave-groups-out for Type II, with
the local parameter chosen the same way) and prints one ``LAWLAB_RESULT`` line (a Python literal).
"""

import warnings

import numpy as np
from scipy.optimize import least_squares

FAMILIES = {
    # name: (expression in the primary input {x}, parameter names)
    "linear": ("a + b * {x}", ["a", "b"]),
    "quadratic": ("a + b * {x} + c * {x} ** 2", ["a", "b", "c"]),
    "power": ("a * {x} ** b", ["a", "b"]),
    "exponential": ("a * exp(b * {x})", ["a", "b"]),
    "saturating_exponential": ("a * (1 - exp(-b * {x}))", ["a", "b"]),
    "asymptotic": ("a + (b - a) * exp(-c * {x})", ["a", "b", "c"]),
    "logistic": ("a / (1 + exp((b - {x}) / c))", ["a", "b", "c"]),
    "logistic_log": ("a / (1 + exp((b - log({x})) / c))", ["a", "b", "c"]),
    "four_pl_log": ("d + (a - d) / (1 + exp((b - log({x})) / c))", ["a", "b", "c", "d"]),
    "gompertz": ("a * exp(-b * exp(-c * {x}))", ["a", "b", "c"]),
    "michaelis_menten": ("a * {x} / (b + {x})", ["a", "b"]),
    "hill": ("a * {x} ** c / (b ** c + {x} ** c)", ["a", "b", "c"]),
    "antoine": ("10 ** (a - b / (c + {x}))", ["a", "b", "c"]),
    "arrhenius_celsius": ("a * exp(-b / ({x} + 273.15))", ["a", "b"]),
    "bateman": ("a * (exp(-b * {x}) - exp(-c * {x}))", ["a", "b", "c"]),
    "log_linear": ("a + b * log({x})", ["a", "b"]),
    "quadratic_annual": ("a + b * ({x} - {x0}) + c * ({x} - {x0}) ** 2 + d * sin(2 * pi * {x}) "
                         "+ e * cos(2 * pi * {x})", ["a", "b", "c", "d", "e"]),
}
FUNCS = {"exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "pi": np.pi}


def _guesses(name, x, y):
    ay = float(np.max(np.abs(y))) or 1.0
    xm = float(np.median(x))
    xs = float(np.ptp(x)) or 1.0
    lx = np.log(np.clip(x, 1e-300, None))
    g = {
        "linear": [float(np.mean(y)), 0.0],
        "quadratic": [float(np.mean(y)), 0.0, 0.0],
        "power": [ay, 1.0],
        "exponential": [ay, 1.0 / xs],
        "saturating_exponential": [ay, 3.0 / xs],
        "asymptotic": [ay, float(y[np.argmin(x)]), 3.0 / xs],
        "logistic": [ay, xm, xs / 5],
        "logistic_log": [ay, float(np.median(lx)), 1.0],
        "four_pl_log": [ay, float(np.median(lx)), 1.0, float(np.min(y))],
        "gompertz": [ay, 2.0, 3.0 / xs],
        "michaelis_menten": [ay, xm],
        "hill": [ay, xm, 1.0],
        "antoine": [float(np.log10(ay)) + 3, 1500.0, 250.0],
        "arrhenius_celsius": [ay * 1e3, 3000.0],
        "bateman": [ay * 2, 0.1 * 3 / xs, 3.0 / xs * 3],
        "log_linear": [float(np.mean(y)), 1.0],
        "quadratic_annual": [float(np.mean(y)), 0.0, 0.0, 0.0, 0.0],
    }
    return np.array(g[name], dtype=float)


def _evaluate(expr, env):
    # the expressions above are our own fixed strings; names resolve to arrays/numbers
    with np.errstate(all="ignore"):
        return eval(expr, {"__builtins__": {}}, {**FUNCS, **env})  # noqa: S307


class Model:
    """A family in one primary input, times power factors of the other inputs."""

    def __init__(self, family, primary, others, x0_shift, local):
        self.family = family
        self.primary = primary
        self.others = others
        self.x0 = x0_shift
        base, names = FAMILIES[family]
        self.names = list(names) + [f"e_{o}" for o in others]
        self.local = list(local)
        self.base = base

    def expression(self):
        expr = self.base.format(x=self.primary, x0=repr(self.x0))
        if self.others:
            expr = "(" + expr + ")" + "".join(f" * {o} ** e_{o}" for o in self.others)
        return expr

    def predict(self, cols, params):
        env = dict(cols)
        env.update(params)
        n = len(cols[self.primary])
        return np.broadcast_to(np.asarray(_evaluate(self.expression(), env), float), (n,))


def _space(v, log_space):
    return np.log10(np.clip(v, 1e-300, None)) if log_space else v


SPARSE = True  # Type II: a Jacobian by groups of independent columns (bench/template_sparsity.py)


def _grouped_jacobian(resid, n_global, index, n_groups, n_local):
    """Forward differences that use the problem's structure: each residual depends on
    every global and on its own group's locals only, so one evaluation perturbs local
    j of every group at once. A Jacobian costs 1 + n_global + n_local evaluations
    instead of 1 + n_global + n_groups * n_local; the result is the same dense matrix
    scipy's own differences give (the exact trust-region solver is kept)."""
    rows = np.arange(len(index))

    def jac(theta):
        f0 = resid(theta)
        out = np.zeros((len(f0), len(theta)))
        steps = 1.49e-8 * np.maximum(1.0, np.abs(theta))
        for k in range(n_global):
            t = theta.copy()
            t[k] += steps[k]
            out[:, k] = (resid(t) - f0) / steps[k]
        for j in range(n_local):
            cols = n_global + np.arange(n_groups) * n_local + j
            t = theta.copy()
            t[cols] += steps[cols]
            mine = n_global + index * n_local + j  # each row's own column
            out[rows, mine] = (resid(t) - f0) / steps[mine]
        return out

    return jac


def fit_model(model, cols, y, groups, log_space, init, factors=(1.0, 0.3, 3.0)):
    """Least squares with global parameters and per-group local ones, from ``init``
    scaled by each of ``factors``."""
    glob = [n for n in model.names if n not in model.local]
    labels = sorted(set(groups)) if model.local else []
    index = np.array([labels.index(g) for g in groups]) if model.local else None
    yt = _space(y, log_space)
    nl = len(model.local)

    def unpack(theta):
        p = dict(zip(glob, theta[:len(glob)]))
        if nl:
            loc = theta[len(glob):].reshape(len(labels), nl)
            for j, n in enumerate(model.local):
                p[n] = loc[index, j]
        return p

    def resid(theta):
        r = _space(model.predict(cols, unpack(theta)), log_space) - yt
        return np.where(np.isfinite(r), r, 1e3)

    x0 = np.concatenate([[init[n] for n in glob], np.tile([init[n] for n in model.local], len(labels))])
    jac = (_grouped_jacobian(resid, len(glob), index, len(labels), nl)
           if SPARSE and nl and len(labels) > 1 else "2-point")
    # evaluations bounded by the parameters' kinds (each global, each local name), as
    # the grouped Jacobian's cost is: 300 per parameter of the 47 chicks' locals let
    # fits crawl along flat valleys for 15,000 evaluations and 100 s (bench/RESULTS.md)
    cap = 300 * (len(glob) + nl)
    best = None
    for factor in factors:
        start = x0 * factor if factor != 1.0 else x0
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sol = least_squares(resid, start, jac=jac, x_scale="jac", max_nfev=cap)
        except ValueError:
            continue
        if best is None or sol.cost < best.cost:
            best = sol
    if best is None:
        return None
    theta = best.x
    out = {"global": dict(zip(glob, map(float, theta[:len(glob)]))), "local": {}}
    if nl:
        loc = theta[len(glob):].reshape(len(labels), nl)
        out["local"] = {n: {g: float(loc[i, j]) for i, g in enumerate(labels)}
                        for j, n in enumerate(model.local)}
    out["cost"] = float(best.cost)
    return out


def fit_local_only(model, cols, y, fitted_global, log_space, init):
    names = model.local
    yt = _space(y, log_space)

    def resid(theta):
        p = dict(fitted_global)
        p.update(zip(names, theta))
        r = _space(model.predict(cols, p), log_space) - yt
        return np.where(np.isfinite(r), r, 1e3)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = least_squares(resid, np.array([init[n] for n in names]), x_scale="jac", max_nfev=500)
    return dict(zip(names, sol.x))


def _subset(cols, mask):
    return {k: v[mask] for k, v in cols.items()}


def cv_error(model, cols, y, groups, log_space, init, multi, folds=5):
    """Cross-validated RMS error in residual space (leave-groups-out for Type II).
    ``init`` is the fit to all rows: each fold starts there, once (a fold's optimum
    is near it; three rescaled starts per fold made a Type II trial take 200 s)."""
    n = len(y)
    errs = []
    if multi:
        labels = sorted(set(groups))
        for k in range(min(folds, len(labels))):
            held = set(labels[k::min(folds, len(labels))])
            tr = np.array([g not in held for g in groups])
            res = fit_model(model, _subset(cols, tr), y[tr], groups[tr], log_space, init,
                            factors=(1.0,))
            if res is None:
                return np.inf
            for g in held:
                rows = np.flatnonzero(groups == g)
                fit_rows, test_rows = rows[::2], rows[1::2]
                if len(test_rows) == 0:
                    continue
                loc_init = {m: float(np.median(list(res["local"][m].values()))) for m in model.local}
                loc = fit_local_only(model, _subset(cols, fit_rows), y[fit_rows], res["global"],
                                     log_space, loc_init)
                p = dict(res["global"])
                p.update(loc)
                pred = model.predict(_subset(cols, test_rows), p)
                errs.append(_space(pred, log_space) - _space(y[test_rows], log_space))
    else:
        rng = np.random.default_rng(0)
        order = rng.permutation(n)
        for k in range(folds):
            te = order[k::folds]
            tr = np.setdiff1d(np.arange(n), te)
            res = fit_model(model, _subset(cols, tr), y[tr], groups[tr], log_space, init,
                            factors=(1.0,))
            if res is None:
                return np.inf
            pred = model.predict(_subset(cols, te), res["global"])
            errs.append(_space(pred, log_space) - _space(y[te], log_space))
    e = np.concatenate(errs) if errs else np.array([np.inf])
    return float(np.sqrt(np.mean(e ** 2))) if np.all(np.isfinite(e)) else np.inf


def _medians(res):
    return {n: float(np.median(list(v.values()))) for n, v in res["local"].items()}


def _validated(screened, primary, others, x, cols, y, groups, log_space, multi):
    """Each screened family with each choice of its per-group parameter, fitted to
    all rows from the screening fit's values, then cross-validated from there."""
    candidates = []
    for _, family, names, init in screened:
        for local in ([[]] if not multi else [[n] for n in names]):
            model = Model(family, primary, others, float(np.floor(np.min(x))), local)
            full = fit_model(model, cols, y, groups, log_space, init, factors=(1.0,))
            if full is None:
                continue
            warm = {**init, **full["global"], **_medians(full)}
            err = cv_error(model, cols, y, groups, log_space, warm, multi)
            if np.isfinite(err):
                candidates.append((err, len(model.names), family, local, model, init))
    return candidates


def main(max_local=1):
    df = train_df.dropna()  # noqa: F821  (preloaded in the sandbox)
    target = target_col  # noqa: F821
    inputs = list(input_cols)  # noqa: F821
    y = df[target].to_numpy(float)
    multi = "group_id" in df.columns and df["group_id"].nunique() > 1
    groups = df["group_id"].astype(str).to_numpy() if multi else np.array(["all"] * len(df))
    cols = {c: df[c].to_numpy(float) for c in inputs}
    log_space = bool(np.all(y > 0) and y.max() / y.min() > 100)
    # the primary input: the strongest monotone association with the target
    varying = [c for c in inputs if np.ptp(cols[c]) > 0]
    if multi:  # the primary input must vary within groups (not a per-group setting)
        within = [c for c in varying if df.groupby("group_id")[c].nunique().max() > 1]
        varying = within or varying
    score = {c: abs(pd.Series(cols[c]).corr(pd.Series(y), method="spearman"))  # noqa: F821
             for c in varying}
    primary = max(score, key=lambda c: (np.nan_to_num(score[c]), c))
    others = [c for c in inputs if c != primary and np.all(cols[c] > 0) and np.ptp(cols[c]) > 0]
    x = cols[primary]
    # screen: one full fit per family (first parameter local for Type II), keep the best few
    screened = []
    for family, (expr, names) in FAMILIES.items():
        if ("log({x})" in expr or "** b" in expr or "** c" in expr) and np.min(x) <= 0:
            continue
        if family == "quadratic_annual" and np.ptp(x) < 3:
            continue
        init = dict(zip(names, _guesses(family, x, y)))
        init.update({f"e_{o}": 1.0 for o in others})
        model = Model(family, primary, others, float(np.floor(np.min(x))), names[:1] if multi else [])
        res = fit_model(model, cols, y, groups, log_space, init)
        if res is not None and np.isfinite(res["cost"]):
            # the screening fit's values start every later fit of the family
            fitted = {**init, **res["global"], **_medians(res)}
            screened.append((res["cost"], family, names, fitted))
    screened.sort(key=lambda c: (c[0], c[1]))
    candidates = _validated(screened[:4], primary, others, x, cols, y, groups, log_space, multi)
    candidates.sort(key=lambda c: (c[0], c[1], c[2]))
    err, _, family, local, model, init = candidates[0]
    final = fit_model(model, cols, y, groups, log_space, init)
    result = {
        "family": family,
        "expr": model.expression(),
        "constants": final["global"],
        "local_init": {n: float(np.median(list(final["local"][n].values()))) for n in local},
        "used_inputs": [c for c in inputs if c == primary or c in others],
        "space": "log10" if log_space else "linear",
        "cv_rmse": err,
        "ranking": [(c[2], c[3], round(c[0], 6)) for c in candidates[:5]],
    }
    print("candidates (cv rmse):")
    for c in candidates[:5]:
        print(f"  {c[2]:<24} local={c[3]}  {c[0]:.5g}")
    print("LAWLAB_RESULT " + repr(result))
