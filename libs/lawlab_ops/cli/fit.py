"""``lawlab fit``: an expression's constants fitted to CSV data, honestly."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from lawlab_ops.tables import table as _table

# above this |correlation| between two fitted constants, ``lawlab fit`` says so
RIDGE = 0.9999


def cmd_fit(args: argparse.Namespace) -> int:
    """Nonlinear least squares of an expression to CSV columns (the world builder's engine)."""
    import pandas as pd

    from lawlab.fitting import FitError, fit_expression
    from lawlab.law.expr import Expression, ExpressionError

    try:
        expr = Expression(args.expr)
    except ExpressionError as err:
        print(f"error: --expr: {err}", file=sys.stderr)
        return 2
    try:
        frame = pd.read_csv(args.data)
    except (OSError, ValueError) as err:
        print(f"error: --data: cannot read {args.data}: {err}", file=sys.stderr)
        return 2
    if args.target not in frame.columns:
        print(f"error: --target: no column {args.target!r} in {args.data}; columns are "
              f"{list(frame.columns)}", file=sys.stderr)
        return 2
    if args.inputs:
        inputs = [n.strip() for n in args.inputs.split(",") if n.strip()]
        missing = [n for n in inputs if n not in frame.columns]
        unused = [n for n in inputs if n not in expr.names]
        if missing or unused:
            print(f"error: --inputs: {missing or unused} "
                  f"{'are not columns of ' + args.data if missing else 'do not appear in --expr'}"
                  f"; columns are {list(frame.columns)}", file=sys.stderr)
            return 2
    else:
        inputs = sorted(n for n in expr.names if n in frame.columns and n != args.target)
    constants = sorted(expr.free(inputs))  # an unbound e or pi is the number, not fitted
    if args.target in expr.names:
        print(f"error: --expr uses the target column {args.target!r}", file=sys.stderr)
        return 2
    if not inputs:
        print(f"error: --expr uses no column of {args.data} (columns {list(frame.columns)}); "
              "the names that are columns are the inputs, the others are fitted", file=sys.stderr)
        return 2
    import difflib

    matches = {c: difflib.get_close_matches(c, [str(x) for x in frame.columns], n=1, cutoff=0.75)
               for c in constants}
    lookalikes = {c: m[0] for c, m in matches.items() if m and m[0] != args.target}
    if lookalikes and not args.inputs:
        pairs = ", ".join(f"{c!r} (column {m!r}?)" for c, m in lookalikes.items())
        print(f"error: {pairs} would be fitted as constants but look like misspelt columns; "
              "fix the names, or say which names are inputs with --inputs", file=sys.stderr)
        return 2
    init: dict[str, float] = {}
    for item in filter(None, (args.init or "").split(",")):
        name, _, value = item.partition("=")
        if name.strip() not in constants:
            print(f"error: --init: {name.strip()!r} is not a constant of the expression "
                  f"(constants: {constants})", file=sys.stderr)
            return 2
        try:
            init[name.strip()] = float(value)
        except ValueError:
            print(f"error: --init: {item!r} is not name=number", file=sys.stderr)
            return 2
    data, texts = {}, {}
    for name in [*inputs, args.target]:
        numeric = pd.to_numeric(frame[name], errors="coerce").to_numpy(float)
        texts[name] = int((frame[name].notna() & np.isnan(numeric)).sum())
        data[name] = numeric
    y = data.pop(args.target)
    all_text = [n for n in [*inputs, args.target] if texts[n] == len(frame) and len(frame)]
    if all_text:
        print(f"error: column(s) {all_text} of {args.data} hold no numbers", file=sys.stderr)
        return 2
    keep = np.all([np.isfinite(v) for v in [*data.values(), y]], axis=0)
    dropped = int((~keep).sum())
    if int(keep.sum()) <= len(constants):
        print(f"error: {int(keep.sum())} usable rows for {len(constants)} constants in "
              f"{args.data}" + (f" ({dropped} rows dropped: missing or non-numeric values)"
                                if dropped else ""), file=sys.stderr)
        return 2
    if dropped:
        detail = ", ".join(f"{n}: {k} non-numeric" for n, k in texts.items() if k)
        print(f"[dropped {dropped} of {len(frame)} rows with missing or non-numeric values"
              + (f" ({detail})" if detail else "") + "]", file=sys.stderr)
    try:
        result = fit_expression(expr, {k: v[keep] for k, v in data.items()}, y[keep], constants,
                                init, space=args.space, n_starts=args.starts)
    except FitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    stderrs = [result.stderr.get(n, float("nan")) for n in constants]
    failed = (not result.success or not result.converged or not np.isfinite(result.r2)
              or result.r2 < 0 or not all(np.isfinite(s) and s > 0 for s in stderrs))
    if args.json:
        print(json.dumps({"expr": expr.text, "inputs": inputs, **result.as_dict(),
                          "rows_used": int(keep.sum()), "converged": not failed}, indent=2,
                         default=float))
        return 1 if failed else 0
    if failed:
        why = ("still moving when its evaluations ran out" if not result.converged
               else result.message or "standard errors undefined")
        print(f"error: the fit did not converge to a usable result (R^2 {result.r2:.4g}, "
              f"{why}); give starting values with "
              f"--init (e.g. --init {','.join(f'{c}=1' for c in constants[:2])}), more --starts, "
              "or check the expression against the data", file=sys.stderr)
        return 1
    print(f"{expr.text}   ({int(keep.sum())} rows; inputs {', '.join(inputs)}; "
          f"{args.space} residuals)")
    rows = [[n, f"{result.constants[n]:.6g}", f"{result.stderr[n]:.3g}"] for n in constants]
    print(_table(rows, ["constant", "value", "std error"]))
    print(f"RSS {result.rss:.6g}   R^2 {result.r2:.6f}")
    corr, a, b = result.ridge
    if corr > RIDGE:
        print(f"{a} and {b} are correlated at {corr:.6f}: the data determine little more "
              f"than a combination of the two (their standard errors say how little)")
    starts = "your --init and " if init else ""
    print(f"{result.agreeing_starts} of {args.starts} starts ({starts}"
          f"{'scattered around it' if init else 'chosen from the data'}) reached this optimum"
          + ("; a single one is weak evidence that no better one exists: try more --starts "
             "or starting values with --init" if result.agreeing_starts < 2 else ""))
    return 0



def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("fit", help="fit an expression's constants to CSV data")
    p.add_argument("--expr", required=True, help='e.g. "b1*(1-exp(-b2*x))"')
    p.add_argument("--data", required=True, help="CSV with the inputs and the target")
    p.add_argument("--target", required=True)
    p.add_argument("--init", help="starting values, e.g. b1=500,b2=1e-4")
    p.add_argument("--inputs", help="the input columns, comma separated (default: the names of "
                                    "the expression that are CSV columns)")
    p.add_argument("--space", choices=["linear", "log10"], default="linear",
                   help="residual space (log10 for multi-decade positive targets)")
    p.add_argument("--starts", type=int, default=24, help="multi-start count")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_fit)
