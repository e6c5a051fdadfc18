"""The submission contract (PROTOCOL.md section 3): generating and reading modules.

Reading here is static (AST only): names, literals and structure. Executing a
submission happens only in the sandbox service.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lawlab.expr import Expression

REQUIRED_NAMES = ("USED_INPUTS", "LAW_CONSTANTS", "OTHER_CONSTANTS", "LOCAL_FITTABLE", "predict")
FINAL_RE = re.compile(r"<final_formula>(.*?)</final_formula>", re.S)


def law_module(
    *,
    title: str,
    expr: str,
    used_inputs: Sequence[str],
    constants: Mapping[str, float],
    local_init: Mapping[str, float] | None = None,
    space: str = "linear",
) -> str:
    """A contract-valid module for ``expr`` (Type II when ``local_init`` is given).

    Global constants go into LAW_CONSTANTS; local ones into LOCAL_FITTABLE with
    a ``fit`` that solves for them by least squares in the task's residual space.
    """
    e = Expression(expr)
    unknown = e.names - set(used_inputs) - set(constants) - set(local_init or {})
    if unknown:
        raise ValueError(f"names without a value in {expr!r}: {sorted(unknown)}")
    body = e.to_numpy_source()
    lines = [
        f'"""{title}"""',
        "import numpy as np",
        *(["import scipy.special"] if "erf" in e.functions else []),
        "",
        f"USED_INPUTS = {json.dumps(list(used_inputs))}",
        f"LAW_CONSTANTS = {{{', '.join(f'{k!r}: {float(v)!r}' for k, v in constants.items())}}}",
        "OTHER_CONSTANTS = {}",
        "LOCAL_FITTABLE = {"
        + ", ".join(f"{k!r}: {{'init': {float(v)!r}}}" for k, v in (local_init or {}).items())
        + "}",
        "",
        "",
        "def predict(X, **constants):",
        "    X = np.asarray(X, dtype=float)",
    ]
    for i, name in enumerate(used_inputs):
        lines.append(f"    {name} = X[:, {i}]")
    for name in list(constants) + list(local_init or {}):
        lines.append(f"    {name} = constants[{name!r}]")
    lines += [
        "    with np.errstate(all='ignore'):",
        f"        out = {body}",
        "    return np.broadcast_to(np.asarray(out, dtype=float), (X.shape[0],)).copy()",
    ]
    if local_init:
        transform = "np.log10(np.maximum(v, 1e-300))" if space == "log10" else "v"
        lines += [
            "",
            "",
            "def fit(X, y, **law_constants):",
            "    from scipy.optimize import least_squares",
            "    X = np.asarray(X, dtype=float)",
            "    y = np.asarray(y, dtype=float)",
            "    names = list(LOCAL_FITTABLE)",
            "    x0 = np.array([LOCAL_FITTABLE[n]['init'] for n in names], dtype=float)",
            "",
            "    def space(v):",
            f"        return {transform}",
            "",
            "    def residuals(theta):",
            "        p = predict(X, **law_constants, **dict(zip(names, theta)))",
            "        r = space(p) - space(y)",
            "        return np.where(np.isfinite(r), r, 1e6)",
            "",
            "    best = None",
            "    for factor in (1.0, 0.3, 3.0, -1.0):",
            "        try:",
            "            sol = least_squares(residuals, x0 * factor, x_scale='jac', max_nfev=400)",
            "        except ValueError:",
            "            continue",
            "        if best is None or sol.cost < best.cost:",
            "            best = sol",
            "    theta = best.x if best is not None else x0",
            "    return {n: float(v) for n, v in zip(names, theta)}",
        ]
    return "\n".join(lines) + "\n"


def extract_final_formula(text: str) -> str | None:
    m = FINAL_RE.search(text)
    return m.group(1).strip("\n") if m else None


@dataclass
class StaticReport:
    """What can be read from a submission without running it."""

    ok: bool
    problems: list[str] = field(default_factory=list)
    used_inputs: list[str] = field(default_factory=list)
    has_fit: bool = False


def static_check(source: str, inputs: Sequence[str], multi_group: bool) -> StaticReport:
    """Names, USED_INPUTS and Type I/II shape, from the AST alone."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return StaticReport(False, [f"syntax error: {err.msg} (line {err.lineno})"])
    top: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    top[t.id] = node.value
    problems = [f"missing {name}" for name in REQUIRED_NAMES if name not in top]
    used: list[str] = []
    if "USED_INPUTS" in top:
        try:
            used = list(ast.literal_eval(top["USED_INPUTS"]))
        except ValueError:
            problems.append("USED_INPUTS must be a literal list of input names")
        unknown = [u for u in used if u not in inputs]
        if unknown:
            problems.append(f"USED_INPUTS names unknown inputs {unknown}; inputs are {list(inputs)}")
    has_fit = "fit" in top
    if multi_group and not has_fit:
        problems.append("Type II submissions must define fit(X, y, **LAW_CONSTANTS)")
    if not multi_group and has_fit:
        problems.append("Type I submissions must not define fit")
    return StaticReport(not problems, problems, used, has_fit)
