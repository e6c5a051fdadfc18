"""The structure judge is right both ways on worlds of the public release (issue #49).

Three worlds as the public release (`lawlab tasks build --public`) serves them
(tests/fixtures/judge_worlds: the law, its pieces and the judge's probes, with the
task's published references):

- metal_biosensor_induction (Type II, per-group values far apart): the hidden law
  with every declared start 15 % off scored 0.5 ("recovers the published base"),
  because every group's fit started from one declared value;
- heart_rate_baroreflex (Type I, six constants): the same scored 0.25, its fit from
  15 % off ending in another minimum;
- forbes_boiling_point: the unmodified published base (Clausius-Clapeyron) scored
  1.0, "equivalent up to reparameterisation": its 459.67 (the rankine offset) was
  read as a free constant, which makes it Antoine's three-constant family, and the
  hidden piece (a hydrostatic head, 3.7e-4 of the law's spread) fitted under the
  tolerance.

And three of this machine's library (the key c5a0eccf; their structure does not
depend on the key, only mare_follicles' h2s does):

- mare_follicles (Type II, a second harmonic `4 pi`, abs(A)) and mauna_loa_co2 (five
  `1958` origins): the hidden law as written, or from 15 % off, scored 0.75 ("plus
  extra terms"): the written reading frees those literals and the refit lost;
  the symbolic test (`structure.renamings`) finds the hidden expression itself;
- heart_rate_baroreflex under a fresh key of the key sweep (a3a3390a): from 15 % off
  the numerical refit ends at the base (0.5), and the first symbolic test (by
  signatures) gave up: with every other constant one symbol, (d - c) cancels and nine
  of eleven constants looked alike;
- spruce_growth, a world whose only piece is a change of sharing (y0 per group):
  the hidden law plus a shared extra term scored 0.5; a form freeing more
  parameters per group still must.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from lawlab.judging import structure
from lawlab.law.contract import law_module
from lawlab.law.expr import Expression

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "judge_worlds"
OFF = 0.15


def _world(name: str) -> tuple[dict, structure.HiddenLaw]:
    spec = json.loads((FIXTURES / f"{name}.json").read_text())
    return spec, structure.hidden_law_of(spec, spec["inputs"])


def _exact_off(spec: dict) -> str:
    """The hidden law as a submission whose declared starts are 15 % off: shared
    constants up, per-group starts (one value for every group) down."""
    law = spec["law"]
    local = {n: float(np.median(list(t.values()))) * (1 - OFF) for n, t in law["local"].items()}
    shared = {k: float(v) * (1 + OFF) for k, v in law["constants"].items() if k not in local}
    names = Expression(law["expr"]).names
    return law_module(title="the hidden law, starts 15% off", expr=law["expr"],
                      used_inputs=[n for n in spec["inputs"] if n in names],
                      constants=shared, local_init=local or None, space=spec["space"])


WORLDS = ["metal_biosensor_induction", "heart_rate_baroreflex", "forbes_boiling_point",
          "mare_follicles", "mauna_loa_co2", "spruce_growth", "heart_rate_baroreflex_fresh_key"]


@pytest.mark.parametrize("name", WORLDS)
def test_the_hidden_law_with_starts_15_percent_off_scores_1(name):
    spec, hidden = _world(name)
    outcome = structure.judge_structure(_exact_off(spec), hidden)
    assert outcome.level == 1.0, outcome.explanation


@pytest.mark.parametrize("name", WORLDS)
def test_no_published_reference_scores_above_the_base(name):
    spec, hidden = _world(name)
    for ref, source in spec["references"].items():
        outcome = structure.judge_structure(source, hidden)
        assert outcome.level <= 0.5, (ref, outcome.level, outcome.explanation)
        if ref == spec["law"]["base_reference"]:
            assert outcome.level == 0.5, (ref, outcome.explanation)


def test_the_tolerance_is_below_the_smallest_piece():
    """forbes's only piece moves the law by 3.7e-4 of its spread after a refit; the
    judge's tolerance is a tenth of that, not the fixed 1e-4."""
    _, hidden = _world("forbes_boiling_point")
    effects = hidden.piece_effects()
    assert len(effects) == 1 and 1e-4 < effects[0] < 1e-3
    assert hidden.tolerance() == pytest.approx(structure.PIECE_FRACTION * effects[0])


def test_a_unit_offset_is_not_a_free_constant_in_either_reading():
    source = law_module(title="cc", expr="p0 * exp(-L / (bp + 459.67))", used_inputs=["bp"],
                        constants={"p0": 2e7, "L": 9000.0})
    for free in (False, True):
        form = structure.translate(source, free_literals=free, free_exponents=free)
        assert len(form.params) == 2, (free, form.expr)


def test_a_law_with_erf_is_evaluated_and_differentiated():
    """sympy prints erf, which numpy lacks: a probit law crashed every refit with a
    TypeError (issue #48's probit family found it; a submission would have too)."""
    import numpy as np

    from lawlab.judging import structure
    from lawlab.law.expr import Expression

    form = structure.form_from_expression(
        Expression("c + (d - c) * (1 - erf(b * log(x / e50))) / 2"),
        {"c": 0.1, "d": 1.0, "b": 1.0, "e50": 2.0}, ["x"], [])
    x = {"x": np.array([0.5, 2.0, 5.0])}
    assert np.allclose(form.evaluate(x, form.init), [0.9775290, 0.55, 0.1877652], atol=1e-6)
    assert form.gradient(x, form.init) is not None


def test_a_piece_neutral_at_a_removable_singularity_is_its_limit():
    """cycling_oxygen_uptake's diffusion limit F (1 - exp(-1 / (kd F))) is the base F at
    kd = 0, where sympy's substitution gives nan: every judgement of that world
    raised KeyError('ComplexInfinity') in the judge (found by the Parallel
    controls, issue #48)."""
    import numpy as np

    from lawlab.judging import structure
    from lawlab.law.expr import Expression

    form = structure.form_from_expression(
        Expression("(a + b * w) * (1 - exp(-1 / (kd * (a + b * w))))"),
        {"a": 0.5, "b": 0.01, "kd": 0.02}, ["w"], [])
    frozen = structure._freeze(form, ["a", "b", "kd"], {"kd": 0.0})
    w = {"w": np.linspace(50, 300, 6)}
    assert np.allclose(frozen.evaluate(w, [0.5, 0.01]), 0.5 + 0.01 * w["w"], rtol=1e-12)


def _spruce(expr: str, shared: dict, local: dict) -> str:
    return law_module(title="spruce case", expr=expr, used_inputs=["days"], constants=shared,
                      local_init=local or None, space="log10")


def test_the_hidden_law_as_written_scores_1_without_a_fit():
    """The symbolic test decides the exact law (and any renaming of its constants)
    before any refit: no start can lose it."""
    for name in ("mare_follicles", "mauna_loa_co2"):
        spec, hidden = _world(name)
        law = spec["law"]
        local = {n: float(np.median(list(t.values()))) for n, t in law["local"].items()}
        shared = {f"renamed_{k}": float(v) for k, v in law["constants"].items()
                  if k not in local}
        expr = law["expr"]
        for k in law["constants"]:
            if k not in local:
                expr = re.sub(rf"\b{k}\b", f"renamed_{k}", expr)
        names = Expression(expr).names
        source = law_module(title="renamed", expr=expr,
                            used_inputs=[n for n in spec["inputs"] if n in names],
                            constants=shared, local_init=local or None, space=spec["space"])
        outcome = structure.judge_structure(source, hidden)
        assert outcome.level == 1.0 and "no fit" in outcome.explanation, (name, outcome)


def test_a_literal_far_from_the_hidden_one_is_not_decided_symbolically():
    """mauna_loa_co2's law with its origin 1958 written as 1900: the same tree with
    every literal a placeholder, but a literal 3 % off is not the hidden law's (the
    numerical comparison decides, and it is not 1.0 as written)."""
    spec, hidden = _world("mauna_loa_co2")
    law = spec["law"]
    source = law_module(title="origin moved", expr=law["expr"].replace("1958", "1900"),
                        used_inputs=["t"], constants=law["constants"], space=spec["space"])
    free = structure.translate(source, free_literals=True, free_exponents=True)
    assert structure.renamings(free, hidden.placeholder_form())  # the same tree
    outcome = structure.judge_structure(source, hidden)
    assert "no fit" not in outcome.explanation, outcome


def test_renamings_keep_sharing_and_do_not_claim_a_difference():
    x = ["x"]
    a = structure.translate(law_module(title="a", expr="k * exp(-r * x) + c", used_inputs=x,
                                       constants={"r": 0.5, "c": 1.0}, local_init={"k": 2.0}))
    b = structure.translate(law_module(title="b", expr="c2 + a1 * exp(-x * r1)", used_inputs=x,
                                       constants={"r1": 0.4, "c2": 0.9}, local_init={"a1": 3.0}))
    (mapping,) = structure.renamings(a, b)
    assert all(b.names[j] == {"k": "a1", "r": "r1", "c": "c2"}[a.names[i]]
               for i, j in mapping.items())
    shared_k = b.with_local([False] * len(b.params))
    assert structure.renamings(a, shared_k) == []  # k per group there, shared here
    # the same function written as another tree: not found, and not claimed different
    c = structure.translate(law_module(title="c", expr="k * b / (b + x)", used_inputs=x,
                                       constants={"k": 1.0, "b": 2.0}))
    d = structure.translate(law_module(title="d", expr="k / (1 + x / b)", used_inputs=x,
                                       constants={"k": 1.0, "b": 2.0}))
    assert structure.renamings(c, d) == []


def test_symmetric_parameters_are_renamed_either_way():
    x = ["x"]
    a = structure.translate(law_module(title="a", expr="p * x + q * x ** 2 + r * x ** 2",
                                       used_inputs=x, constants={"p": 1.0, "q": 2.0, "r": 3.0}))
    assert len(structure.renamings(a, a)) == 2  # q and r trade places


def test_a_sharing_world_credits_its_sharing_plus_extra_terms_and_nothing_freer():
    """spruce_growth's hidden law is the published base with y0 per group."""
    spec, hidden = _world("spruce_growth")
    law = spec["law"]
    k = float(law["constants"]["k"])
    A, y0 = (float(np.median(list(law["local"][n].values()))) for n in ("Asym", "y0"))
    base = "Asym - (Asym - y0) * exp(-k * days)"
    extra = base + " + e * days"
    cases = {
        "hidden sharing plus a shared extra term": (_spruce(extra, {"k": k, "e": 1e-3},
                                                            {"Asym": A, "y0": y0}), 0.75),
        "every parameter per group": (_spruce(base, {}, {"Asym": A, "y0": y0, "k": k}), 0.5),
        "every parameter per group plus an extra term": (
            _spruce(extra, {"e": 1e-3}, {"Asym": A, "y0": y0, "k": k}), 0.5),
        "the published sharing plus an extra term": (
            _spruce(extra, {"k": k, "y0": y0, "e": 1e-3}, {"Asym": A}), 0.5),
        "the hidden law written another way, starts 15% off": (
            _spruce("Asym + (y0 - Asym) * exp(-days * k)", {"k": k * 1.15},
                    {"Asym": A * 0.85, "y0": y0 * 0.85}), 1.0),
    }
    for label, (source, level) in cases.items():
        outcome = structure.judge_structure(source, hidden)
        assert outcome.level == level, (label, outcome.level, outcome.explanation)


def test_a_renaming_is_found_where_constants_cancel_when_alike():
    """heart_rate_baroreflex's law `c + (d - c) / (1 + exp(...))`: replacing every other
    constant by one symbol cancels (d - c), so a search by per-constant signatures saw
    nine of eleven constants as alike and gave up; walking the two trees together
    finds the renaming."""
    spec, hidden = _world("heart_rate_baroreflex_fresh_key")
    free = structure.translate(_exact_off(spec), free_literals=True, free_exponents=True)
    assert len(free.params) == 11
    assert structure.renamings(free, hidden.placeholder_form())
    outcome = structure.judge_structure(_exact_off(spec), hidden)
    assert outcome.level == 1.0 and "no fit" in outcome.explanation, outcome
