"""Model comparison that the ``experimenter`` agent runs INSIDE the sandbox.

Sent as the code of a ``<python>`` call, followed by ``main(CANDIDATES,
DESIGN, LOG_SPACE)``; standalone: it uses only the preloaded ``train_df``,
``input_cols``, ``target_col``, numpy and scipy. ``CANDIDATES`` is a list of
candidate laws, each ``{"name", "expr", "globals", "locals", "init"}`` (its
text in the inputs and named constants; per-group constants in ``locals``).

Every candidate is fitted by least squares in the residual space (log10 for a
positive multi-decade response scored relatively, else the response itself),
globals shared and locals per group (a Jacobian by groups of independent
columns), from its starting values and two rescaled ones, and ranked by BIC
(n log(RSS / n) + k log n, k counting every per-group value). When ``DESIGN``
is given (``{"points", "samples", "ranges", "log_inputs", "groups"}``), the
next experiment is proposed: from a pool of random points over the declared
ranges, those where the leading candidates (within 10 BIC of the best,
weighted by exp(-dBIC / 2)) disagree most relative to the noise, each new
point penalised by its closeness to those already chosen, a third of them
space-filling; for Type II the groups with the fewest observations first.
When ``VALIDATE`` is given (Real), the leading candidates by BIC and the
published forms are also scored on rows held out the way the task holds out
its test data (whole groups calibrated on alternate rows; the edge of an input
toward the held-out range; or five random folds). Prints one
``LAWLAB_RESULT`` line and returns it (the scientist's residual study reads it).
"""

import warnings

import numpy as np
from scipy.optimize import least_squares

ENV = {"exp": np.exp, "log": np.log, "log10": np.log10, "log2": np.log2, "sqrt": np.sqrt,
       "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "sinh": np.sinh,
       "cosh": np.cosh, "atan": np.arctan, "asin": np.arcsin, "abs": np.abs, "pi": np.pi,
       "e": np.e}
LOO_ROWS = 30  # at most this many rows: leave-one-out instead of five folds
WITHIN = 10.0  # BIC units: candidates this close to the best take part in the design
POOL = 600


def evaluate(code, cols, params):
    env = dict(ENV)
    env.update(cols)
    env.update(params)
    n = len(next(iter(cols.values())))
    with np.errstate(all="ignore"):
        return np.broadcast_to(np.asarray(eval(code, {"__builtins__": {}}, env), float), (n,))  # noqa: S307


def to_space(v, log_space):
    with np.errstate(all="ignore"):
        return np.log10(np.clip(v, 1e-300, None)) if log_space else v


def _jacobian(resid, n_global, index, n_groups, n_local):
    """Forward differences by groups: each residual depends on the globals and its
    own group's locals, so one evaluation moves local j of every group."""
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
            mine = n_global + index * n_local + j
            out[rows, mine] = (resid(t) - f0) / steps[mine]
        return out

    return jac


def fit(cand, cols, y, groups, log_space):
    """The candidate's least-squares fit: RSS, BIC, constants (None if it fails)."""
    code = compile(cand["expr"], "<law>", "eval")
    glob, loc = list(cand["globals"]), list(cand["locals"])
    labels = sorted(set(groups)) if loc else []
    index = np.array([labels.index(g) for g in groups]) if loc else np.zeros(len(y), int)
    yt = to_space(y, log_space)
    init = cand["init"]

    def unpack(theta):
        p = dict(zip(glob, theta[:len(glob)]))
        if loc:
            block = theta[len(glob):].reshape(len(labels), len(loc))
            for j, name in enumerate(loc):
                p[name] = block[index, j]
        return p

    def resid(theta):
        r = to_space(evaluate(code, cols, unpack(theta)), log_space) - yt
        return np.where(np.isfinite(r), r, 1e3)

    x0 = np.concatenate([[float(init.get(n, 1.0)) for n in glob],
                         np.tile([float(init.get(n, 1.0)) for n in loc], len(labels))])
    jac = _jacobian(resid, len(glob), index, len(labels), len(loc)) if loc else "2-point"
    best = None
    for factor in (1.0, 0.5, 2.0):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sol = least_squares(resid, x0 * factor, jac=jac, x_scale="jac",
                                    max_nfev=100 * (len(x0) + 1))
        except (ValueError, np.linalg.LinAlgError):
            continue
        if np.all(np.abs(sol.fun) < 1e3) and (best is None or sol.cost < best.cost):
            best = sol
    if best is None or len(x0) >= len(y):
        return None
    n, k = len(y), len(x0)
    rss = float(2 * best.cost)
    out = {"name": cand["name"], "rss": rss, "k": k,
           "bic": n * np.log(max(rss, 1e-300) / n) + k * np.log(n),
           "constants": dict(zip(glob, map(float, best.x[:len(glob)]))), "local": {}}
    if loc:
        block = best.x[len(glob):].reshape(len(labels), len(loc))
        out["local"] = {name: {g: float(block[i, j]) for i, g in enumerate(labels)}
                        for j, name in enumerate(loc)}
    return out


def _rows(mask, cols, y, groups):
    return {k: v[mask] for k, v in cols.items()}, y[mask], groups[mask]


def _calibrated_error(cand, fitted, cols, y, groups, log_space):
    """Held-out groups as the scorer treats them: each group's per-group values
    fitted on alternate rows with the globals fixed, the other rows predicted."""
    errs = []
    code = compile(cand["expr"], "<law>", "eval")
    for g in sorted(set(groups)):
        rows = np.flatnonzero(groups == g)
        calib, test = rows[::2], rows[1::2]
        if not len(test):
            continue
        loc = list(cand["locals"])
        start = {n: float(np.median(list(fitted["local"][n].values()))) for n in loc}

        def resid(theta, calib=calib):
            p = dict(fitted["constants"])
            p.update(zip(loc, theta))
            sub = {k: v[calib] for k, v in cols.items()}
            r = to_space(evaluate(code, sub, p), log_space) - to_space(y[calib], log_space)
            return np.where(np.isfinite(r), r, 1e3)

        try:
            theta = least_squares(resid, np.array([start[n] for n in loc]), x_scale="jac",
                                  max_nfev=200).x
        except (ValueError, np.linalg.LinAlgError):
            return np.inf
        p = dict(fitted["constants"])
        p.update(zip(loc, theta))
        sub = {k: v[test] for k, v in cols.items()}
        errs.append(to_space(evaluate(code, sub, p), log_space) - to_space(y[test], log_space))
    return errs


def validation(cand, cols, y, groups, log_space, plan):
    """RMS error in residual space on rows held out the way the task holds out its
    test data: whole groups (calibrated on alternate rows), the edge of an input
    toward the held-out range (three forward folds), or five random folds
    (leave-one-out for LOO_ROWS rows or fewer)."""
    n = len(y)
    errs = []
    if plan["kind"] == "groups":
        labels = sorted(set(groups))
        k = min(5, len(labels))
        for f in range(k):
            held = set(labels[f::k])
            train = np.array([g not in held for g in groups])
            fitted = fit(cand, *_rows(train, cols, y, groups), log_space)
            if fitted is None:
                return np.inf
            errs += _calibrated_error(cand, fitted, *_rows(~train, cols, y, groups), log_space)
    else:
        if plan["kind"] == "edge":
            x = cols[plan["input"]] * (1 if plan["side"] == "high" else -1)
            rank = np.argsort(np.argsort(x, kind="stable"), kind="stable") / max(n - 1, 1)
            folds = [(rank <= q, (rank > q) & (rank <= q + 0.15)) for q in (0.55, 0.7, 0.85)]
        else:  # five random folds; one row at a time when there are few
            k = n if n <= LOO_ROWS else 5
            order = np.random.default_rng(0).permutation(n)
            folds = []
            for f in range(k):
                test = np.zeros(n, bool)
                test[order[f::k]] = True
                folds.append((~test, test))
        for train, test in folds:
            if train.sum() <= len(cand["globals"]) or not test.any():
                continue
            fitted = fit(cand, *_rows(train, cols, y, groups), log_space)
            if fitted is None:
                return np.inf
            sub = {k: v[test] for k, v in cols.items()}
            pred = evaluate(compile(cand["expr"], "<law>", "eval"), sub, fitted["constants"])
            errs.append(to_space(pred, log_space) - to_space(y[test], log_space))
    e = np.concatenate(errs) if errs else np.array([np.inf])
    return float(np.sqrt(np.mean(e ** 2))) if np.all(np.isfinite(e)) else np.inf


def _pool(design, rng, counts):
    """Random points over the declared ranges (log-uniform for log inputs)."""
    pts = {}
    for name, (lo, hi) in design["ranges"].items():
        u = rng.random(POOL)
        pts[name] = lo * (hi / lo) ** u if name in design["log_inputs"] and lo > 0 \
            else lo + (hi - lo) * u
    groups = design.get("groups") or []
    if groups:  # the least observed groups first, every group reachable
        order = sorted(groups, key=lambda g: (counts.get(g, 0), g))
        pts["group_id"] = [order[i % len(order)] for i in range(POOL)]
    return pts


def _unit(pts, design):
    cols = []
    for name, (lo, hi) in design["ranges"].items():
        v = np.asarray(pts[name], float)
        if name in design["log_inputs"] and lo > 0:
            v, lo, hi = np.log(v), np.log(lo), np.log(hi)
        cols.append((v - lo) / ((hi - lo) or 1.0))
    return np.column_stack(cols)


def _predict(cand, result, pts, log_space):
    """Predictions at the pool's points, in residual space; a group without data of
    its own gets the median of the fitted per-group values."""
    params = dict(result["constants"])
    groups = pts.get("group_id")
    for name, per_group in result["local"].items():
        median = float(np.median(list(per_group.values())))
        params[name] = np.array([per_group.get(g, median) for g in groups]) \
            if groups is not None else median
    cols = {k: np.asarray(v, float) for k, v in pts.items() if k != "group_id"}
    return to_space(evaluate(compile(cand["expr"], "<law>", "eval"), cols, params), log_space)


def propose(cands, results, design, log_space, counts, seed):
    rng = np.random.default_rng(seed)
    pts = _pool(design, rng, counts)
    best = min(r["bic"] for r in results)
    lead = sorted((r for r in results if r["bic"] - best <= WITHIN), key=lambda r: r["bic"])[:6]
    by_name = {c["name"]: c for c in cands}
    preds, weights = [], []
    for r in lead:
        p = _predict(by_name[r["name"]], r, pts, log_space)
        if np.all(np.isfinite(p)):
            preds.append(p)
            weights.append(np.exp(-(r["bic"] - best) / 2))
    n = design["points"]
    unit = _unit(pts, design)
    if len(preds) >= 2:
        P, w = np.array(preds), np.array(weights) / np.sum(weights)
        mean = w @ P
        noise = lead[0]["rss"] / max(1, sum(counts.values()))
        score = (w @ (P - mean) ** 2) / max(noise, 1e-300)
    else:
        score = np.ones(POOL)
    chosen = []
    spread = max(1, n // 3)  # a third space-filling: coverage, not only disagreement
    for i in range(n):
        if chosen:
            d2 = np.min([np.sum((unit - unit[j]) ** 2, axis=1) for j in chosen], axis=0)
        else:
            d2 = np.full(POOL, np.inf)
        if i < n - spread:
            value = score * (1 - np.exp(-d2 / (2 * 0.05 ** 2)))
        else:
            value = d2
        value[chosen] = -np.inf
        chosen.append(int(np.argmax(value)))
    payload = {name: [float(pts[name][j]) for j in chosen] for name in design["ranges"]}
    if "group_id" in pts:
        payload["group_id"] = [pts["group_id"][j] for j in chosen]
    payload["n_samples"] = design["samples"]
    return payload, len(preds)


def main(candidates, design=None, log_space=False, seed=1, validate=None):
    warnings.filterwarnings("ignore")
    df = train_df.dropna(subset=[target_col, *input_cols])  # noqa: F821 (preloaded)
    inputs = list(input_cols)  # noqa: F821
    y = df[target_col].to_numpy(float)  # noqa: F821
    cols = {c: df[c].to_numpy(float) for c in inputs}
    groups = df["group_id"].astype(str).to_numpy() if "group_id" in df.columns \
        else np.array(["all"] * len(df))
    results = []
    for cand in candidates:
        try:
            r = fit(cand, cols, y, groups, log_space)
        except Exception:  # noqa: BLE001  (a candidate that cannot be evaluated is dropped)
            r = None
        if r is not None and np.isfinite(r["bic"]):
            results.append(r)
    results.sort(key=lambda r: r["bic"])
    if validate:  # the leading candidates by BIC, and every published form
        by_name = {c["name"]: c for c in candidates}
        chosen = results[:validate.get("top", 8)] + [
            r for r in results[validate.get("top", 8):] if r["name"] in validate.get("always", [])]
        for r in chosen:
            try:
                r["cv"] = validation(by_name[r["name"]], cols, y, groups, log_space, validate)
            except Exception:  # noqa: BLE001
                r["cv"] = np.inf
    shown = results[:12] + [r for r in results[12:] if "cv" in r]
    out = {"ok": bool(results), "n": int(len(y)), "log_space": log_space,
           "ranking": [{"name": r["name"], "bic": round(float(r["bic"]), 3), "k": r["k"],
                        **({"cv": min(float(r["cv"]), 1e300)} if "cv" in r else {})}
                       for r in shown],
           "fits": {r["name"]: {"constants": r["constants"],
                                "local": {k: float(np.median(list(v.values())))
                                          for k, v in r["local"].items()}}
                    for r in shown}}
    if design is not None and results:
        counts = {g: int(np.sum(groups == g)) for g in set(groups)}
        out["next"], out["compared"] = propose(candidates, results, design, log_space, counts,
                                               seed)
    print("candidates (BIC" + (", validation RMSE" if validate else "") + "):")
    for r in results[:8]:
        cv = f"  cv {r['cv']:.5g}" if "cv" in r else ""
        print(f"  {r['bic']:12.3f}  k={r['k']:<3}{cv}  {r['name']}")
    print("LAWLAB_RESULT " + repr(out))
    return out
