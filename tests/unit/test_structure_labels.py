"""The structure judge against a labelled set of (hidden law, submission, level) cases.

The expected levels were assigned by reading each pair with the protocol's
five levels (C.5): 1 the full hidden structure up to algebra and
reparameterisation, including which parameters are shared and which per group;
0.75 the published form plus the most important added pieces, or the hidden
structure with extra terms or extra per-group freedom, or with the wrong
sharing (a level lost); 0.5 the published base form; 0.25 relevant variables
and trend; 0 unrelated. The labels were written before running the judge on
them. The test reports exact agreement and quadratic-weighted kappa; the bar is
the published LLM judge's agreement with human experts (0.84).
"""

from __future__ import annotations

import numpy as np
import pytest

from lawlab.judging import structure
from lawlab.law.contract import law_module
from lawlab.law.expr import Expression

LEVELS = [0.0, 0.25, 0.5, 0.75, 1.0]

# name: (input, support, hidden expr, hidden constants, pieces [(description, neutral,
#        importance)], space)
FAMILIES = {
    "enzyme": ("c", (0.02, 1.1), "Vm * c / (K + c) + h * c", {"Vm": 200.0, "K": 0.06, "h": 30.0},
               [("h * c", {"h": 0.0}, 1.0)], "linear"),
    "decay": ("t", (0.0, 10.0), "A * exp(-k * t) + h", {"A": 5.0, "k": 0.4, "h": 0.7},
              [("h", {"h": 0.0}, 1.0)], "linear"),
    "allometry": ("m", (0.01, 1000.0), "a * m ** h", {"a": 3.4, "h": 0.69},
                  [("m ** h", {"h": 0.75}, 1.0)], "log10"),
    "growth": ("t", (0.0, 30.0), "K / (1 + exp(-r * (t - t0))) * exp(-h * t)",
               {"K": 10.0, "r": 0.5, "t0": 12.0, "h": 0.01}, [("exp(-h * t)", {"h": 0.0}, 1.0)],
               "linear"),
    # two pieces: a linear term (the more important) and an attenuation
    "enzyme2": ("c", (0.02, 1.1), "(Vm * c / (K + c) + h * c) * exp(-g * c)",
                {"Vm": 200.0, "K": 0.06, "h": 60.0, "g": 0.25},
                [("h * c", {"h": 0.0}, 0.7), ("exp(-g * c)", {"g": 0.0}, 0.3)], "linear"),
    # issue #49: a near-null piece (an offset 0.3 % of the curve's spread): the tolerance
    # sits under it, so the base is not swallowed
    "nearnull": ("t", (0.0, 10.0), "A * exp(-k * t) + h", {"A": 5.0, "k": 0.4, "h": 0.005},
                 [("h", {"h": 0.0}, 1.0)], "linear"),
    # issue #30: a growth term with a freed exponent (linear growth is the base)
    "rat": ("t", (0.0, 100.0), "W0 + g * t ** eta", {"W0": 50.0, "g": 2.0, "eta": 1.47},
            [("t ** eta", {"eta": 1.0}, 1.0)], "linear"),
    # issue #30: a gamma-variate whose power of x was freed (the base has x ** 1)
    "gamma": ("x", (0.1, 10.0), "a * x ** h * exp(-k * x)", {"a": 3.0, "h": 0.75, "k": 0.4},
              [("x ** h", {"h": 1.0}, 1.0)], "linear"),
}

# (family, submission expression, its constants, expected level)
CASES = [
    # enzyme kinetics with an added linear term
    ("enzyme", "Vm * c / (K + c) + h * c", {"Vm": 190.0, "K": 0.05, "h": 20.0}, 1.0),
    ("enzyme", "(a * c + b * c ** 2) / (K + c)", {"a": 191.0, "b": 20.0, "K": 0.05}, 1.0),
    ("enzyme", "c * (Vm / (K + c) + h)", {"Vm": 190.0, "K": 0.05, "h": 20.0}, 1.0),
    ("enzyme", "h * c + Vm / (1 + K / c)", {"Vm": 190.0, "K": 0.05, "h": 20.0}, 1.0),
    ("enzyme", "Vm * c / (K + c) + h * c + q * c ** 2",
     {"Vm": 190.0, "K": 0.05, "h": 20.0, "q": 1.0}, 0.75),
    ("enzyme", "Vm * c / (K + c) + h * c + q", {"Vm": 190.0, "K": 0.05, "h": 20.0, "q": 1.0}, 0.75),
    ("enzyme", "Vm * c / (K + c)", {"Vm": 200.0, "K": 0.06}, 0.5),
    ("enzyme", "1 / (a + b / c)", {"a": 0.005, "b": 0.0003}, 0.5),
    ("enzyme", "Vm * c / (K + c) + q * c ** 2", {"Vm": 200.0, "K": 0.06, "q": 5.0}, 0.5),
    ("enzyme", "a * c ** b", {"a": 200.0, "b": 0.3}, 0.25),
    ("enzyme", "a * (1 - exp(-b * c))", {"a": 220.0, "b": 8.0}, 0.25),
    ("enzyme", "Vm * c ** 2 / (K ** 2 + c ** 2)", {"Vm": 200.0, "K": 0.06}, 0.25),
    # constants are placeholders (C.5): a law and its sign-flipped twin are one structure,
    # and a law in the right input whose refit follows the trend is "relevant variables"
    ("enzyme", "a - b * c", {"a": 200.0, "b": 20.0}, 0.25),
    ("enzyme", "a * exp(-b * c)", {"a": 200.0, "b": 2.0}, 0.25),
    ("enzyme", "a + b * (2 * c - 1) ** 2", {"a": 100.0, "b": 50.0}, 0.0),
    # exponential decay to an offset
    ("decay", "A * exp(-k * t) + h", {"A": 4.0, "k": 0.3, "h": 1.0}, 1.0),
    ("decay", "exp(a - k * t) + h", {"a": 1.5, "k": 0.3, "h": 1.0}, 1.0),
    ("decay", "h + A * b ** t", {"A": 4.0, "b": 0.7, "h": 1.0}, 1.0),
    ("decay", "A * exp(-k * t) + h + q * t", {"A": 4.0, "k": 0.3, "h": 1.0, "q": 0.01}, 0.75),
    ("decay", "A * exp(-k * t)", {"A": 5.0, "k": 0.3}, 0.5),
    ("decay", "A * exp(-k * t) + q * t", {"A": 5.0, "k": 0.3, "q": 0.01}, 0.5),
    ("decay", "A * exp(-k * t) * cos(w * t)", {"A": 5.0, "k": 0.3, "w": 0.01}, 0.5),
    ("decay", "A / (1 + k * t)", {"A": 5.0, "k": 0.5}, 0.25),
    ("decay", "a - b * t", {"a": 5.0, "b": 0.4}, 0.25),
    ("decay", "a + b * t", {"a": 1.0, "b": 0.4}, 0.25),
    ("decay", "a + 0 * t", {"a": 2.0}, 0.0),
    # allometric scaling with a freed exponent (the base fixes Kleiber's 3/4)
    ("allometry", "a * m ** b", {"a": 3.0, "b": 0.7}, 1.0),
    ("allometry", "exp(c + b * log(m))", {"c": 1.1, "b": 0.7}, 1.0),
    ("allometry", "10 ** (c + b * log10(m))", {"c": 0.5, "b": 0.7}, 1.0),
    ("allometry", "a * m ** 0.75", {"a": 3.0}, 0.5),
    ("allometry", "a * m ** (3 / 4)", {"a": 3.0}, 0.5),
    ("allometry", "a * m ** b + q", {"a": 3.0, "b": 0.7, "q": 0.1}, 0.75),
    ("allometry", "a * log(m) + q", {"a": 3.0, "q": 20.0}, 0.25),
    ("allometry", "a * m", {"a": 1.0}, 0.25),
    ("allometry", "a * m ** 2", {"a": 1.0}, 0.25),
    ("allometry", "a / m", {"a": 1.0}, 0.0),
    # logistic growth with an attenuation factor
    ("growth", "K / (1 + exp(-r * (t - t0))) * exp(-h * t)",
     {"K": 9.5, "r": 0.4, "t0": 11.0, "h": 0.02}, 1.0),
    ("growth", "K * exp(-h * t) / (1 + b * exp(-r * t))",
     {"K": 9.5, "b": 100.0, "r": 0.4, "h": 0.02}, 1.0),
    ("growth", "K / (1 + exp(-r * (t - t0)))", {"K": 9.0, "r": 0.45, "t0": 12.0}, 0.5),
    ("growth", "K / (1 + b * exp(-r * t))", {"K": 9.0, "b": 200.0, "r": 0.45}, 0.5),
    ("growth", "K / (1 + exp(-r * (t - t0))) * exp(-h * t) + q * t",
     {"K": 9.5, "r": 0.4, "t0": 11.0, "h": 0.02, "q": 0.01}, 0.75),
    ("growth", "K / (1 + exp(-r * (t - t0))) * (1 + q * t)",
     {"K": 9.0, "r": 0.45, "t0": 12.0, "q": -0.001}, 0.5),
    ("growth", "K * (1 - exp(-r * t))", {"K": 9.0, "r": 0.1}, 0.25),
    ("growth", "a + b * t", {"a": 0.0, "b": 0.3}, 0.25),
    ("growth", "K / (1 + exp(-r * (t - t0))) ** 2", {"K": 9.0, "r": 0.45, "t0": 12.0}, 0.25),
    ("growth", "a * exp(-b * t)", {"a": 9.0, "b": 0.1}, 0.25),
    # two added pieces: the most important one recovered is 0.75, the lesser one alone 0.5
    ("enzyme2", "(Vm * c / (K + c) + h * c) * exp(-g * c)",
     {"Vm": 190.0, "K": 0.05, "h": 50.0, "g": 0.2}, 1.0),
    ("enzyme2", "Vm * c * exp(-g * c) / (K + c) + h * c * exp(-g * c)",
     {"Vm": 190.0, "K": 0.05, "h": 50.0, "g": 0.2}, 1.0),
    ("enzyme2", "Vm * c / (K + c) + h * c", {"Vm": 190.0, "K": 0.05, "h": 50.0}, 0.75),
    ("enzyme2", "c * (Vm / (K + c) + h)", {"Vm": 190.0, "K": 0.05, "h": 50.0}, 0.75),
    ("enzyme2", "Vm * c / (K + c) * exp(-g * c)", {"Vm": 190.0, "K": 0.05, "g": 0.2}, 0.5),
    ("enzyme2", "Vm * c / (K + c)", {"Vm": 190.0, "K": 0.05}, 0.5),
    ("enzyme2", "(Vm * c / (K + c) + h * c) * exp(-g * c) + q",
     {"Vm": 190.0, "K": 0.05, "h": 50.0, "g": 0.2, "q": 1.0}, 0.75),
    ("enzyme2", "a * c ** b", {"a": 200.0, "b": 0.3}, 0.25),
    ("enzyme2", "a - b * c", {"a": 200.0, "b": 20.0}, 0.25),
    ("enzyme2", "a + 0 * c", {"a": 200.0}, 0.0),
    # issue #49, written before the judge ran: a near-null piece is still structure, and
    # another family that follows the curve within any real noise is not the hidden one
    ("nearnull", "A * exp(-k * t) + h", {"A": 4.0, "k": 0.3, "h": 0.01}, 1.0),
    ("nearnull", "A * exp(-k * t)", {"A": 5.0, "k": 0.4}, 0.5),
    ("nearnull", "A * exp(-k * t) + h + q * t", {"A": 4.0, "k": 0.3, "h": 0.01, "q": 0.001},
     0.75),
    ("enzyme", "a * (1 - exp(-b * c)) + h * c", {"a": 190.0, "b": 10.0, "h": 20.0}, 0.25),
    ("decay", "A / (1 + k * t) ** n + h", {"A": 4.0, "k": 0.1, "n": 3.0, "h": 1.0}, 0.25),
    # issue #30, written from C.5 before the judge ran: literal exponents are coefficients
    ("rat", "W0 + g * t ** 1.5", {"W0": 50.0, "g": 2.0}, 1.0),
    ("rat", "W0 + g * t ** eta", {"W0": 50.0, "g": 2.0, "eta": 1.4}, 1.0),
    ("rat", "W0 + g * t", {"W0": 50.0, "g": 2.0}, 0.5),
    ("rat", "W0 + g * t ** 1.0", {"W0": 50.0, "g": 2.0}, 0.5),
    ("rat", "W0 + g * t ** 2", {"W0": 50.0, "g": 0.1}, 0.25),
    ("rat", "W0 * exp(r * t)", {"W0": 50.0, "r": 0.02}, 0.25),
    ("rat", "W0 + g * t ** 1.5 + q * t", {"W0": 50.0, "g": 2.0, "q": 0.1}, 0.75),
    ("gamma", "a * x ** 0.8 * exp(-k * x)", {"a": 3.0, "k": 0.4}, 0.75),
    ("gamma", "exp(la + 0.75 * log(x) - k * x)", {"la": 1.1, "k": 0.4}, 1.0),
    ("gamma", "a * x ** h * exp(-k * x)", {"a": 3.0, "h": 0.7, "k": 0.4}, 1.0),
    ("gamma", "a * x * exp(-k * x)", {"a": 3.0, "k": 0.4}, 0.5),
    ("gamma", "a * sqrt(x) * exp(-k * x)", {"a": 3.0, "k": 0.4}, 0.25),
]

# Type II: a dose-response curve per assay run; Asym varies per run, the shape and the
# added term are shared (the hidden law's sharing pattern)
RUNS = {"r1": 1.6, "r2": 2.1, "r3": 2.6, "r4": 1.9}
SHARED = {"xmid": 1.4, "scal": 0.9, "h": 0.08}
TYPE_II = "Asym / (1 + exp((xmid - log(c)) / scal)) + h * log(c)"
GROUP_CASES = [
    # (submission expression, shared constants, per-group parameters, expected level)
    (TYPE_II, {"xmid": 1.5, "scal": 1.0, "h": 0.1}, {"Asym": 2.0}, 1.0),
    ("Asym / (1 + b * c ** (-1 / scal)) + h * log(c)", {"b": 4.7, "scal": 1.0, "h": 0.1},
     {"Asym": 2.0}, 1.0),
    # the wrong sharing of issue #15: Asym shared, h per group
    (TYPE_II, {"xmid": 1.5, "scal": 1.0, "Asym": 2.0}, {"h": 0.1}, 0.75),
    # extra per-group freedom: the shape varies per run too
    (TYPE_II, {"h": 0.1}, {"Asym": 2.0, "xmid": 1.5, "scal": 1.0}, 0.75),
    ("Asym / (1 + exp((xmid - log(c)) / scal))", {"xmid": 1.5, "scal": 1.0}, {"Asym": 2.0}, 0.5),
    ("Asym / (1 + exp((xmid - log(c)) / scal))", {"xmid": 1.5, "scal": 1.0, "Asym": 2.0}, {},
     0.25),
    ("a + b * log(c)", {"b": 0.4}, {"a": 1.0}, 0.25),
    # issue #30: the trend is judged with the constants refitted, not as submitted
    ("a + b * log(c)", {"b": -5.0}, {"a": 1.0}, 0.25),
    ("a - b * c", {"a": 2.0}, {"b": 0.1}, 0.25),
    ("a + 0 * c", {}, {"a": 1.0}, 0.0),
]

# issue #30: a world whose only piece is a sharing change (the base lets xmid vary per
# run; the hidden law shares it): the published base is 0.5, not 0.75
SHARING_ONLY = "Asym / (1 + exp((xmid - log(c)) / scal))"
SHARING_CASES = [
    (SHARING_ONLY, {"scal": 1.0}, {"Asym": 2.0, "xmid": 1.5}, 0.5),
    (SHARING_ONLY, {"xmid": 1.5, "scal": 1.0}, {"Asym": 2.0}, 1.0),
    ("a + b * log(c)", {"b": 0.4}, {"a": 1.0}, 0.25),
    # issue #49: the hidden sharing plus a shared extra term is the hidden structure plus
    # extra terms; the published sharing (freer) plus the same term is still the base
    (SHARING_ONLY + " + e * c", {"xmid": 1.5, "scal": 1.0, "e": 0.01}, {"Asym": 2.0}, 0.75),
    (SHARING_ONLY + " + e * c", {"scal": 1.0, "e": 0.01}, {"Asym": 2.0, "xmid": 1.5}, 0.5),
]


def _judge(family: str, expr: str, consts: dict) -> float:
    name, (lo, hi), h_expr, h_consts, pieces, space = FAMILIES[family]
    x = np.geomspace(lo, hi, 150) if space == "log10" else np.linspace(lo, hi, 150)
    hidden = structure.HiddenLaw(
        Expression(h_expr), h_consts, {}, [structure.Piece(d, "piece", n, w) for d, n, w in pieces],
        [name], space, {"": {name: x}})
    source = law_module(title="case", expr=expr, used_inputs=[name], constants=consts)
    return structure.judge_structure(source, hidden).level


def _judge_groups(expr: str, shared: dict, local: dict) -> float:
    c = np.geomspace(0.05, 12.5, 60)
    hidden = structure.HiddenLaw(
        Expression(TYPE_II), dict(SHARED), {"Asym": dict(RUNS)},
        [structure.Piece("h * log(c)", "added_term", {"h": 0.0})], ["c"], "linear",
        {run: {"c": c} for run in RUNS})
    source = law_module(title="case", expr=expr, used_inputs=["c"], constants=shared,
                        local_init=local or None)
    return structure.judge_structure(source, hidden).level


def _judge_sharing_only(expr: str, shared: dict, local: dict) -> float:
    c = np.geomspace(0.05, 12.5, 60)
    hidden = structure.HiddenLaw(
        Expression(SHARING_ONLY), {"xmid": 1.4, "scal": 0.9}, {"Asym": dict(RUNS)},
        [structure.Piece("xmid shared by all runs", "shared_parameter", {}, 1.0, True)],
        ["c"], "linear", {run: {"c": c} for run in RUNS})
    source = law_module(title="case", expr=expr, used_inputs=["c"], constants=shared,
                        local_init=local or None)
    return structure.judge_structure(source, hidden).level


def quadratic_kappa(expected: list[float], got: list[float]) -> float:
    k = len(LEVELS)
    idx = {v: i for i, v in enumerate(LEVELS)}
    observed = np.zeros((k, k))
    for e, g in zip(expected, got):
        observed[idx[e], idx[g]] += 1
    weights = np.array([[(i - j) ** 2 / (k - 1) ** 2 for j in range(k)] for i in range(k)])
    expected_m = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    return float(1 - (weights * observed).sum() / (weights * expected_m).sum())


def test_labelled_set_has_enough_cases():
    assert len(CASES) + len(GROUP_CASES) + len(SHARING_CASES) >= 70
    assert {c[3] for c in CASES} == set(LEVELS)
    assert {c[3] for c in GROUP_CASES} >= {0.0, 0.5, 0.75, 1.0}


def test_structure_judge_agrees_with_the_labels():
    expected = ([c[3] for c in CASES] + [c[3] for c in GROUP_CASES]
                + [c[3] for c in SHARING_CASES])
    got = ([_judge(f, e, k) for f, e, k, _ in CASES]
           + [_judge_groups(e, s, loc) for e, s, loc, _ in GROUP_CASES]
           + [_judge_sharing_only(e, s, loc) for e, s, loc, _ in SHARING_CASES])
    exact = float(np.mean([a == b for a, b in zip(expected, got)]))
    kappa = quadratic_kappa(expected, got)
    labels = ([(c[0], c[1]) for c in CASES]
              + [("type-II", c[0] + f" local={sorted(c[2])}") for c in GROUP_CASES]
              + [("sharing-only", c[0] + f" local={sorted(c[2])}") for c in SHARING_CASES])
    disagreements = [(lab, e, g) for lab, e, g in zip(labels, expected, got) if e != g]
    print(f"\nstructure judge: {len(CASES)} cases, exact agreement {exact:.3f}, "
          f"quadratic-weighted kappa {kappa:.3f}")
    for d in disagreements:
        print("  disagreement:", d)
    assert kappa >= 0.84, disagreements
    # sharing is part of the structure: the wrong pattern never scores 1.0
    wrong_sharing = [g for c, g in zip(GROUP_CASES, got[len(CASES):]) if c[3] == 0.75]
    assert all(g < 1.0 for g in wrong_sharing)


@pytest.mark.parametrize("family, expr, consts, floor", [
    # issue #30's acceptance, each a case that failed before it
    ("rat", "W0 + g * t ** 1.5", {"W0": 50.0, "g": 2.0}, 0.75),
    ("gamma", "a * x ** 0.8 * exp(-k * x)", {"a": 3.0, "k": 0.4}, 0.75),
    ("gamma", "exp(la + 0.75 * log(x) - k * x)", {"la": 1.1, "k": 0.4}, 1.0),
])
def test_literal_numbers_are_not_structure(family, expr, consts, floor):
    assert _judge(family, expr, consts) >= floor


def test_a_right_trend_type_ii_law_scores_its_trend_whatever_its_submitted_values():
    assert _judge_groups("a + b * log(c)", {"b": -5.0}, {"a": 1.0}) == 0.25


def test_the_published_base_scores_half_on_a_sharing_only_world():
    assert _judge_sharing_only(SHARING_ONLY, {"scal": 1.0}, {"Asym": 2.0, "xmid": 1.5}) == 0.5


def test_quadratic_kappa_arithmetic():
    assert quadratic_kappa([0.0, 0.5, 1.0], [0.0, 0.5, 1.0]) == pytest.approx(1.0)
    assert quadratic_kappa([0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0]) < 0
