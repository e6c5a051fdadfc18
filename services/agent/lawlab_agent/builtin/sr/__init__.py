"""The ``sr`` agent: symbolic regression, offline (a feature library, then pyoperon).

It acts only through tool blocks. Parallel: three space-filling experiment
calls (log-spaced for multi-decade inputs, covering the groups for Type II),
a first symbolic regression, one refinement call placed around the points
with the largest residuals, then the final regression. Real: one regression
over the training data. The regression runs inside the sandbox
(``sr/fit.py``: the method and the stated selection criterion are there); the
chosen model becomes a contract module here: a library model arrives with its
constants named, a genetic program is put in canonical form (numbers folded,
``0 +`` and ``1 *`` gone, rounding-level departures from simple fractions
removed) and its numbers named; for Type II, a per-group scale (and offset
when the caps allow) is fitted by ``fit()``.
"""

from __future__ import annotations

import ast
import json
from typing import cast

import numpy as np
import sympy

from lawlab.law.contract import law_module
from lawlab.law.expr import Expression, ExpressionError
from lawlab_agent.builtin.kit import design, fallback, last_result, script
from lawlab_agent.policy import PolicyDefaults, TrialContext

FIT_SOURCE = script("sr")
DESIGN_CALLS = 3
HOTSPOTS = 5
# genetic programming's budget per regression call, in evaluations (reproducible,
# unlike seconds): about 20 s on the reference machine; the sandbox allows 100 s
GP_EVALUATIONS = 2_500_000


def parameterise(expr: str) -> tuple[str, dict[str, float]]:
    """Numbers in ``expr`` -> named constants c0, c1, ... (safe: parsed, never evaluated)."""
    Expression(expr)  # validates: only arithmetic, allowed functions and names
    tree = ast.parse(expr, mode="eval")
    values: dict[str, float] = {}

    class Lift(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
                if float(node.value) in (0.0, 1.0, 2.0, 0.5):
                    return node
                name = f"c{len(values)}"
                values[name] = float(cast(float, node.value))
                return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)
            return node

        def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
            if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
                lifted = self.visit_Constant(ast.Constant(-float(cast(float, node.operand.value))))
                return ast.copy_location(lifted, node)
            return self.generic_visit(node)

    text = ast.unparse(Lift().visit(tree))
    Expression(text)
    return text, values


# a number this close (relative) to a simple fraction is that fraction: folding
# a genetic program's constants (2.999999999998 * x) leaves rounding, not fit
SNAP = 1e-9
REWRITE_OPS = 80


def canonical(expr: str) -> str:
    """A genetic program's text in sympy's canonical form: numbers folded
    (``0.5 * (2.0 * x)`` is ``x``), ``0 +`` and ``1 *`` gone, numbers within
    SNAP of a simple fraction written as it; the text unchanged if the
    canonical form is not a restricted expression. Built through lawlab's own
    translator (the text is never passed to sympify)."""
    try:
        e = Expression(expr).to_sympy()
        repl = {}
        for f in e.atoms(sympy.Float):
            nice = sympy.Rational(float(f)).limit_denominator(12)
            gap = abs(float(nice) - float(f))
            # integers always; a fraction only to remove rounding (0.3 stays 0.3)
            if gap <= SNAP * max(1.0, abs(float(f))) and (nice.q == 1 or gap > 0):
                repl[f] = nice
        e = e.xreplace(repl) if repl else e
        forms = [e]
        if sympy.count_ops(e) <= REWRITE_OPS:  # small enough to rewrite at once
            forms += [sympy.cancel(e), sympy.factor_terms(e), sympy.together(e)]
        text = ""
        for form in sorted(forms, key=lambda f: (_numbers(f), sympy.count_ops(f))):
            text = sympy.sstr(form).replace("Abs(", "abs(")
            try:
                Expression(text)
                return text
            except (ExpressionError, SyntaxError, ValueError):
                continue
        return expr
    except (ExpressionError, SyntaxError, ValueError, TypeError):
        return expr


def _numbers(e: sympy.Expr) -> int:
    """How many numbers a written form holds, exponents aside (each is a constant
    to the symbolic-accuracy judge, which frees every literal)."""
    count = 0
    for node in sympy.preorder_traversal(e):
        if isinstance(node, sympy.Pow) and isinstance(node.exp, sympy.Number) and \
                node.exp not in (sympy.S.One, sympy.S.NegativeOne):
            count -= 1  # the exponent is counted below, and is structure
        if isinstance(node, sympy.Number) and node not in (sympy.S.One, sympy.S.NegativeOne):
            count += 1
    return count


class SRAgent(PolicyDefaults):
    name = "sr"
    extra_imports = ("pyoperon",)

    def __init__(self) -> None:
        self._experiments = 0
        self._fits = 0
        self._refined = False
        self.notes: list[str] = []

    def _fit_call(self, ctx: TrialContext, hotspots: int) -> str:
        caps = ctx.task.caps
        multi = ctx.task.multi_group
        local = min(2, caps.max_local_params) if multi else 0
        cap = max(1, caps.max_law_constants) if not multi else max(1, caps.max_law_constants)
        self._fits += 1
        call = (f"main(cap_constants={cap}, local_params={local}, hotspots={hotspots}, "
                f"gp_evaluations={GP_EVALUATIONS}, seed={ctx.seed % 1000 + 1})")
        return ("I will run symbolic regression (a sparse feature library, then genetic "
                "programming if no model is exact) and choose the model with the fewest "
                f"constants within noise of the best.\n<python>\n{FIT_SOURCE}\n{call}\n</python>")

    def _refinement(self, ctx: TrialContext, hotspots: list[dict]) -> dict:
        """Points around the worst-fitted observations, within the declared ranges."""
        rng = np.random.default_rng([ctx.seed % 2**32, 99])
        n = ctx.task.caps.max_points_per_call
        payload: dict = {v.name: [] for v in ctx.task.inputs}
        groups = []
        for i in range(n):
            centre = hotspots[i % len(hotspots)]
            for v in ctx.task.inputs:
                width = 0.05 * (v.max - v.min)
                x = float(np.clip(centre[v.name] + rng.normal(0, width), v.min, v.max))
                payload[v.name].append(x)
            if "group_id" in centre:
                groups.append(centre["group_id"])
        if groups:
            payload["group_id"] = groups
        payload["n_samples"] = 1
        return payload

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        result = last_result(ctx)
        if result and result.get("gp_capped") and not self.notes:
            # recorded on the trial: its law came from a time-bounded search
            spent = ", ".join(f"{a:,} of {b:,}" for a, b in result["gp_capped"])
            self.notes = ["sr: the genetic programming stopped at its wall-clock safety cap "
                          f"before spending its evaluations ({spent}), so this trial may not "
                          "re-run to the same law on another machine"]
        parallel = ctx.parallel
        if forced:
            return self._final(ctx, result) if result and result.get("ok") else \
                fallback(ctx)
        if parallel and self._experiments < DESIGN_CALLS:
            payload = design(ctx.task, self._experiments, ctx.seed)
            self._experiments += 1
            return ("I will measure the system over a space-filling design.\n"
                    f"<experiment>{json.dumps(payload)}</experiment>")
        if self._fits == 0:
            return self._fit_call(ctx, HOTSPOTS if parallel else 0)
        if result is None or not result.get("ok"):
            if self._fits < 2:
                return self._fit_call(ctx, 0)
            return fallback(ctx)
        if parallel and not self._refined and result.get("hotspots"):
            self._refined = True
            payload = self._refinement(ctx, result["hotspots"])
            return ("The largest residuals are concentrated; I will measure around them.\n"
                    f"<experiment>{json.dumps(payload)}</experiment>")
        if parallel and self._refined and self._fits < 2:
            return self._fit_call(ctx, 0)
        return self._final(ctx, result)

    @staticmethod
    def _final(ctx: TrialContext, result: dict) -> str:
        multi = ctx.task.multi_group
        log_space = bool(result.get("log_space"))
        try:
            if result.get("search") == "library":  # its constants are named already
                core, constants = result["expr"], dict(result["constants"])
                Expression(core)
            else:
                core, constants = parameterise(canonical(result["expr"]))
        except (ExpressionError, SyntaxError, ValueError, KeyError):
            return fallback(ctx)
        local: dict[str, float] | None = None
        if multi:
            n_local = min(2, ctx.task.caps.max_local_params)
            if n_local >= 2 and not log_space:
                core, local = f"a_g + b_g * ({core})", {"a_g": 0.0, "b_g": 1.0}
            else:
                core, local = f"b_g * ({core})", {"b_g": 1.0}
        used = [v.name for v in ctx.task.inputs if v.name in Expression(core).names]
        if not used:
            used = [ctx.task.inputs[0].name]
        module = law_module(
            title=(f"symbolic regression ({result.get('search', 'genetic programming')}): "
                   f"{len(constants)} constants, validation MSE {result['val_mse']:.4g}"
                   + (" in log space" if log_space else "")),
            expr=core, used_inputs=used, constants=constants, local_init=local,
            space="log10" if log_space else "linear")
        return ("The chosen model has the fewest constants among those within one standard "
                "error of the best validation error.\n"
                f"<final_formula>\n{module}</final_formula>")
