"""The residual study that the ``scientist`` agent runs INSIDE the sandbox.

Sent after the model comparison (``experimenter/fit.py``, whose ``main`` returns
its result) as ``study(main(CANDIDATES, ...), CANDIDATES, LOG_SPACE)``: the law
the comparison ranks first is refitted on all data so far and its residuals (in
the residual space) are read for what a correction must explain: for each input,
a trend (Spearman's rank correlation with the input) and a curvature (with the
input's squared distance from its median); across groups (Type II), whether
the groups' mean residuals differ (Kruskal-Wallis). Each p-value is printed
with a sentence and returned on one ``LAWLAB_STUDY`` line. Standalone, like the
comparison: numpy, scipy and the preloaded ``train_df``.
"""

import numpy as np
from scipy import stats

ALPHA = 0.01  # a residual pattern below this p-value is reported as evidence


def _p(test, *args):
    try:
        with np.errstate(all="ignore"):
            value = test(*args)
        p = float(value.pvalue)
        return p if np.isfinite(p) else 1.0
    except (ValueError, FloatingPointError):
        return 1.0


def study(result, candidates, log_space=False):
    if not result or not result.get("ok"):
        print("LAWLAB_STUDY " + repr({"ok": False}))
        return
    df = train_df.dropna(subset=[target_col, *input_cols])  # noqa: F821 (preloaded)
    y = df[target_col].to_numpy(float)  # noqa: F821
    cols = {c: df[c].to_numpy(float) for c in input_cols}  # noqa: F821
    groups = df["group_id"].astype(str).to_numpy() if "group_id" in df.columns \
        else np.array(["all"] * len(df))
    name = result["ranking"][0]["name"]
    cand = next(c for c in candidates if c["name"] == name)
    fitted = fit(cand, cols, y, groups, log_space)  # noqa: F821 (the comparison's)
    if fitted is None:
        print("LAWLAB_STUDY " + repr({"ok": False}))
        return
    params = dict(fitted["constants"])
    for local, per_group in fitted["local"].items():
        params[local] = np.array([per_group[g] for g in groups])
    pred = evaluate(compile(cand["expr"], "<law>", "eval"), cols, params)  # noqa: F821
    r = to_space(pred, log_space) - to_space(y, log_space)  # noqa: F821
    ok = np.isfinite(r)
    inputs = {}
    print(f"residuals of {name} ({int(ok.sum())} observations):")
    for c, x in cols.items():
        xs, rs = x[ok], r[ok]
        if np.ptp(xs) == 0:
            continue
        trend = _p(stats.spearmanr, xs, rs)
        curve = _p(stats.spearmanr, (xs - np.median(xs)) ** 2, rs)
        inputs[c] = {"trend": trend, "curve": curve}
        said = [w for w, p in (("trend", trend), ("curvature", curve)) if p < ALPHA]
        print(f"  {c}: trend p={trend:.2g}, curvature p={curve:.2g}"
              + (f"  <- {' and '.join(said)} left unexplained" if said else ""))
    labels = sorted(set(groups[ok]))
    by_group = 1.0
    if len(labels) > 1:
        by_group = _p(stats.kruskal, *[r[ok][groups[ok] == g] for g in labels])
        print(f"  groups: their mean residuals differ with p={by_group:.2g}")
    print("LAWLAB_STUDY " + repr({"ok": True, "law": name, "inputs": inputs,
                                  "groups": by_group}))
