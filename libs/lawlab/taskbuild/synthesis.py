"""Hidden-law synthesis: structural variants of a published reference.

A grammar of scientifically plausible edits generates candidates from the
selected reference; each is fitted to the real training records and screened
(execution, predictive adequacy, the task's rubric, integrity); the admissible
candidate with the lowest BIC wins, ties going to the smaller expression.
Everything is deterministic: the same inputs give the same law.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lawlab.fitting import FitResult, to_residual_space
from lawlab.world import is_multi_decade

EDIT_CONSTANT = "h"


@dataclass
class Variant:
    edit: str  # grammar rule
    expr: str
    added_term: str  # what differs from the reference, as text
    neutral: float  # value of the edit constant that restores the reference
    init: float
    fit: FitResult | None = None
    screen: dict[str, str] = field(default_factory=dict)
    bic: float = float("inf")
    effect: float = 0.0

    @property
    def admissible(self) -> bool:
        return bool(self.screen) and all(v == "pass" for v in self.screen.values())

    def size(self) -> int:
        return sum(1 for _ in ast.walk(ast.parse(self.expr, mode="eval")))


def _substitute(expr: str, name: str, replacement: str) -> str:
    tree = ast.parse(expr, mode="eval")
    new = ast.parse(replacement, mode="eval").body

    class _Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return new if node.id == name else node

    return ast.unparse(_Sub().visit(tree))


def generate(base: str, inputs: Sequence[str], train: Mapping[str, np.ndarray]) -> list[Variant]:
    """The grammar: added term, multiplicative correction, freed exponent,
    attenuation factor and saturation, in each input where they apply."""
    h = EDIT_CONSTANT
    out: list[Variant] = []
    for x in inputs:
        term = f"log({x})" if is_multi_decade(train[x]) else x
        out.append(Variant("added_term", f"({base}) + {h} * {term}", f"{h} * {term}", 0.0, 0.01))
        out.append(Variant("multiplicative_correction", f"({base}) * (1 + {h} * {term})",
                           f"(1 + {h} * {term})", 0.0, 0.01))
        out.append(Variant("attenuation", f"({base}) * exp(-{h} * {x})", f"exp(-{h} * {x})",
                           0.0, 0.001))
        if float(np.min(train[x])) > 0:
            out.append(Variant("freed_exponent", _substitute(base, x, f"{x} ** {h}"),
                               f"{x} ** {h}", 1.0, 1.0))
    out.append(Variant("saturation", f"({base}) / (1 + {h} * ({base}))",
                       f"1 / (1 + {h} * F)", 0.0, 0.001))
    return out


def screen_and_choose(
    variants: list[Variant],
    fit_variant: Callable[[Variant], FitResult],
    predict: Callable[[Variant, Mapping[str, float]], np.ndarray],
    y: np.ndarray,
    space: str,
    ref_r2: float,
    rubric_ok: Callable[[Variant], tuple[bool, str]],
) -> Variant:
    """Fit and screen every variant; return the chosen one (raises if none is admissible)."""
    y_t = to_residual_space(y, space)
    for v in variants:
        try:
            v.fit = fit_variant(v)
        except ValueError as err:
            v.screen = {"execution": f"fail: {err}"}
            continue
        pred = predict(v, v.fit.constants)
        if not np.all(np.isfinite(pred)):
            v.screen = {"execution": "fail: non-finite predictions on the records"}
            continue
        v.screen["execution"] = "pass"
        n, p = len(y_t), len(v.fit.constants) + sum(len(t) for t in v.fit.local.values())
        v.bic = float(n * np.log(max(v.fit.rss, 1e-300) / n) + p * np.log(n))
        v.screen["adequacy"] = (
            "pass" if v.fit.r2 >= ref_r2 - 0.01
            else f"fail: R2 {v.fit.r2:.4f} below reference {ref_r2:.4f} - 0.01"
        )
        neutral = dict(v.fit.constants)
        neutral[EDIT_CONSTANT] = v.neutral
        pred_neutral = predict(v, neutral)
        resid_sd = float(np.sqrt(v.fit.rss / n))
        diff = to_residual_space(pred, space) - to_residual_space(pred_neutral, space)
        v.effect = float(np.sqrt(np.nanmean(diff**2)) / max(resid_sd, 1e-300))
        v.screen["integrity"] = (
            "pass" if v.effect >= 0.5
            else f"fail: the edit moves predictions by {v.effect:.2f} residual SD (< 0.5)"
        )
        ok, why = rubric_ok(v)
        v.screen["rubric"] = "pass" if ok else f"fail: {why}"
    admissible = [v for v in variants if v.admissible]
    if not admissible:
        raise ValueError("no admissible variant: " + "; ".join(
            f"{v.edit}: {v.screen}" for v in variants))
    return min(admissible, key=lambda v: (round(v.bic, 6), v.size(), v.expr))
