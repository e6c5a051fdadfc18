"""Hidden laws a domain scientist would sign (issue #29): the catalogue's schema and
the builder's screens, each shown refusing what the grammar-only builder of 77f343b
accepted (an inverted saturation, a pole inside the support widened tenfold, a
law that fits the records worse than its base)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lawlab.worlds import mechanisms, worldkey
from lawlab.worlds.mechanisms import CatalogueError, parse_variant
from lawlab_ops.taskbuild import worlds

REFS = {"mm": ["Vm", "K"]}
KEY = worldkey.WorldKey(b"lawlab mechanisms test key.......")


def _variant(**over):
    raw = {"id": "sat", "mechanism": "input saturation", "rationale": "transport saturates",
           "citation": "a textbook", "base": "mm", "edit": {"substitute": {"x": "x / (1 + a * x)"}},
           "constants": {"a": {"init": 0.01, "neutral": 0.0, "min": 0.0}}}
    raw.update(over)
    return parse_variant(raw, "t", ["x"], REFS)


@pytest.mark.parametrize("over, field", [
    ({"edit": {"sideways": "x"}}, "edit must be one of"),
    ({"base": "hill"}, "base 'hill' is not a reference"),
    ({"constants": {"K": {"init": 1.0, "neutral": 0.0}}}, "constants.K"),
    ({"constants": {"a": {"init": 0.0, "neutral": 0.0}}}, "init equals neutral"),
    ({"constants": {"a": {"init": 0.1, "neutral": -1.0, "min": 0.0}}}, "within|lie in"),
    ({"edit": {"add": "q * x"}}, "unknown names"),
    ({"predicts": ["wobble"]}, "predicts"),
    ({"citation": ""}, "'citation' is required"),
])
def test_catalogue_errors_name_the_task_variant_and_field(over, field):
    with pytest.raises(CatalogueError, match=field) as err:
        _variant(**over)
    assert "t: variant sat" in str(err.value) or "variant" in str(err.value)


def test_edits_compose_in_a_fixed_order_and_neutral_gives_the_base():
    sat = _variant()
    add = parse_variant({"id": "bg", "mechanism": "background", "rationale": "r", "citation": "c",
                         "base": "mm", "edit": {"add": "b * x"},
                         "constants": {"b": {"init": 1.0, "neutral": 0.0, "min": 0.0}}},
                        "t", ["x"], REFS)
    expr = mechanisms.compose("Vm * x / (K + x)", [add, sat])
    # the substitution touches the base's x only, never the added term's
    assert expr == "Vm * (x / (1 + a * x)) / (K + x / (1 + a * x)) + b * x".replace(
        "Vm * (x / (1 + a * x)) / (K + x / (1 + a * x)) + b * x",
        "(Vm * (x / (1 + a * x)) / (K + x / (1 + a * x))) + (b * x)")
    x = np.linspace(0.1, 5, 20)
    env = {"x": x, "Vm": 2.0, "K": 0.5}
    assert mechanisms.neutral_failure(expr, "Vm * x / (K + x)", {"a": 0.0, "b": 0.0}, env) == ""
    assert "differs from the base" in mechanisms.neutral_failure(
        expr, "Vm * x / (K + x)", {"a": 0.0, "b": 0.1}, env)
    assert not mechanisms.compatible([sat, sat])


def test_an_arbitrary_origin_is_refused():
    celsius = parse_variant({"id": "h", "mechanism": "m", "rationale": "r", "citation": "c",
                             "base": "mm", "edit": {"multiply": "(1 + g * x)"},
                             "constants": {"g": {"init": 0.01, "neutral": 0.0}}},
                            "t", ["x"], REFS)
    assert "absolute scale" in mechanisms.origin_failure(celsius, {"x": "degC"})
    kelvin = parse_variant({"id": "h", "mechanism": "m", "rationale": "r", "citation": "c",
                            "base": "mm", "edit": {"multiply": "(1 + g * (x + 273.15))"},
                            "constants": {"g": {"init": 0.01, "neutral": 0.0}}},
                           "t", ["x"], REFS)
    assert mechanisms.origin_failure(kelvin, {"x": "degC"}) == ""
    assert "reference year" in mechanisms.origin_failure(celsius, {"x": "year"},
                                                         {"x": (1790.0, 1970.0)})
    # an age in years has a meaningful zero
    assert mechanisms.origin_failure(celsius, {"x": "year"}, {"x": (0.0, 17.0)}) == ""
    assert mechanisms.widened(0.0, 17.0, "year") == (0.0, 170.0)


def test_the_shape_screen_sees_poles_sign_changes_and_new_extrema_only_past_the_data():
    base = lambda e: 2.0 * e["x"] / (0.5 + e["x"])  # noqa: E731
    box, units = {"x": (0.1, 5.0)}, {"x": "mM"}
    pole = lambda e: 2.0 * e["x"] / (0.5 + e["x"]) / (1 - 0.05 * e["x"])  # noqa: E731  (x = 20)
    assert "not finite" in mechanisms.shape_failure(pole, base, box, units, frozenset()) or \
        "sign" in mechanisms.shape_failure(pole, base, box, units, frozenset())
    hump = lambda e: 2.0 * e["x"] / (0.5 + e["x"] + 0.05 * e["x"] ** 2)  # noqa: E731
    assert "new maximum" in mechanisms.shape_failure(hump, base, box, units, frozenset())
    # substrate inhibition predicts its maximum
    assert mechanisms.shape_failure(hump, base, box, units, frozenset({"maximum"})) == ""
    # an input saturation that saturates is fine
    s = lambda e: e["x"] / (1 + 0.02 * e["x"])  # noqa: E731
    sat = lambda e: 2.0 * s(e) / (0.5 + s(e))  # noqa: E731
    assert mechanisms.shape_failure(sat, base, box, units, frozenset()) == ""
    # ... but dividing the whole law by it makes the curve turn over beyond the data
    turn = lambda e: base(e) / (1 + 0.02 * e["x"])  # noqa: E731
    assert "new maximum" in mechanisms.shape_failure(turn, base, box, units, frozenset())


def _accelerating_builder() -> worlds.WorldBuilder:
    """Records that rise faster than Michaelis-Menten (a saturation of the input would
    have to be inverted to follow them)."""
    rng = np.random.default_rng(5)
    x = np.linspace(0.05, 2.0, 60)
    y = 200 * x / (0.3 + x) * (1 + 0.25 * x) + rng.normal(0, 2.0, x.size)
    frame = pd.DataFrame({"y": y, "x": x})
    caps = {"max_law_constants": 4, "max_local_params": 0, "max_experiment_calls": 10,
            "max_points_per_call": 10, "max_samples_per_point": 3}
    rubric = [{"id": "positive", "kind": "positive", "description": "d", "citation": "c"}]
    b = worlds.WorldBuilder("synthetic", frame, "y", [{"name": "x", "unit": "mM"}], "rmse",
                            False, rubric, caps, KEY)
    return b


def _mm() -> worlds.Reference:
    return worlds.Reference("mm", "Vm * x / (K + x)", ["Vm", "K"], [], {"Vm": 200.0, "K": 0.3})


def _linear():
    """A non-saturable uptake term added to Michaelis-Menten: what the records support."""
    return parse_variant({"id": "lin", "mechanism": "non-saturable uptake", "rationale": "r",
                          "citation": "c", "base": "mm", "edit": {"add": "q * x"},
                          "constants": {"q": {"init": 1.0, "neutral": 0.0, "min": 0.0}}},
                         "synthetic", ["x"], REFS)


def _screen(builder, variant, magnitude=1.0):
    base = _mm()
    chosen, fit, _ = builder.select_base([base])
    cand = worlds.compose(chosen, [variant])
    builder.screen(cand, chosen, fit, [base], magnitude)
    return cand


def test_an_inverted_saturation_is_refused():
    # (x -> x / (1 + a x) inside Michaelis-Menten only rescales K: the integrity screen's
    # case; here the response saturates as a whole)
    b = _accelerating_builder()
    meant = _variant(edit={"multiply": "1 / (1 + a * x)"})  # a saturation saturates: a >= 0
    cand = _screen(b, meant)
    assert cand.screen["support"].startswith("fail"), cand.screen
    # the grammar's unsigned version takes a < 0: a pole at x = -1/a, refused by shape
    unsigned = _variant(edit={"multiply": "1 / (1 + a * x)"},
                        constants={"a": {"init": 0.01, "neutral": 0.0}})
    cand = _screen(b, unsigned)
    assert cand.constants["a"] < 0
    assert cand.screen["shape"].startswith("fail"), cand.screen


def test_a_pole_within_the_widened_support_is_refused():
    b = _accelerating_builder()
    accelerating = _variant(id="acc", edit={"multiply": "1 / (1 - a * x)"})
    cand = _screen(b, accelerating)
    assert cand.constants["a"] > 0 and 1 / cand.constants["a"] < 20  # inside 10 x 2.0
    assert cand.screen["shape"].startswith("fail"), cand.screen


def test_a_law_that_fits_worse_than_its_base_is_refused():
    b = _accelerating_builder()
    linear = _linear()
    supported = _screen(b, linear)
    assert supported.admissible, supported.screen
    # three times the departure the records support: clearly worse than the base
    overdone = _screen(b, linear, magnitude=3.0)
    assert overdone.screen["adequacy"].startswith("fail"), overdone.screen
    # the ladder the key draws from keeps it about as good as the base with its
    # published constants' meaning, and ends at the first factor that loses either
    chosen, fit, _ = b.select_base([_mm()])
    ladder = b.factors(supported, chosen, fit, [_mm()])
    assert 1.0 in ladder and 3.0 not in ladder
    for m in ladder:
        assert _screen(b, linear, magnitude=m).screen["adequacy"] == "pass"
    beyond = next(m for m in worlds.MAGNITUDE_LADDER if m > max(ladder))
    screen = _screen(b, linear, magnitude=beyond).screen
    assert screen["adequacy"].startswith("fail") or \
        screen["non_degenerate"].startswith("fail: the published constant"), screen


def test_a_mechanism_the_records_push_to_its_cap_is_refused():
    """22 of 58 hidden mechanisms once sat at their physical cap (issue #48): the
    records wanted more than the physics allows. Capped at a tenth of what the
    records want, the linear term is refused with the reason."""
    b = _accelerating_builder()
    capped = parse_variant({"id": "lin", "mechanism": "non-saturable uptake", "rationale": "r",
                            "citation": "c", "base": "mm", "edit": {"add": "q * x"},
                            "constants": {"q": {"init": 1.0, "neutral": 0.0, "min": 0.0,
                                                "max": 5.0}}}, "synthetic", ["x"], REFS)
    free = _screen(b, _linear())
    assert free.constants["q"] > 20  # what the records want
    cand = _screen(b, capped)
    assert cand.screen["support"].startswith("fail: the records push q to 5"), cand.screen


def test_a_rival_structure_offered_twice_is_screened_once():
    """The identifiability screen asks every rival structure to lose in most
    budgets. A structure offered twice (a catalogued mechanism that is also the
    two-piece law without its other piece) once had both fits pooled in one list,
    so that twins passed on half the budgets; it counts once, by its better fit in
    each budget."""
    b = _accelerating_builder()
    linear = _linear()
    cand = _screen(b, linear)
    chosen, fit, _ = b.select_base([_mm()])
    rival, twin = worlds.compose(chosen, []), worlds.compose(chosen, [])
    rival.constants = dict(fit.constants)
    twin.constants = {"Vm": 1.0, "K": 50.0}  # a poor start: its fit can only be worse or equal
    twin.public = {"Vm": 1.0, "K": 50.0}
    _, _, world = b.make_world(cand.expr, cand.constants, cand.local)
    _, once = b.identifiable(cand, [rival], world, fit, full=True)
    ok, twice = b.identifiable(cand, [rival, twin], world, fit, full=True)
    assert list(twice) == ["base"] and len(twice["base"]) == worlds.IDENTIFY_REPS
    assert all(t <= o + 1e-9 for t, o in zip(twice["base"], once["base"]))
    assert ok == (sum(g >= worlds.IDENTIFY_BIC for g in twice["base"]) >= worlds.IDENTIFY_PASS)


def test_a_rival_that_needs_a_second_start_is_fitted_as_well_as_the_hidden_law():
    """One policy for every fit of the screen (issue #48): the hidden law and each
    rival start from the public start and from their own fit to the records. The
    rival here is the hidden law itself, reparametrised, whose public start
    overflows (exp(800)): from that start alone it loses by a wide margin, and the
    screen would call the world identifiable; with its second start it ties."""
    b = _accelerating_builder()
    cand = _screen(b, _linear())
    chosen, fit, _ = b.select_base([_mm()])
    twin = worlds.Candidate([], "exp(lvm) * x / (K + x) + q2 * x", ["lvm", "K", "q2"], [], {},
                            name="reparametrised", public={"lvm": 800.0, "K": 1.0, "q2": 0.0})
    _, _, world = b.make_world(cand.expr, cand.constants, cand.local)
    one_start, gaps_one = b.identifiable(cand, [twin], world, fit)
    assert one_start and min(gaps_one["reparametrised"]) > 100, gaps_one
    twin.records_fit = {"lvm": float(np.log(cand.constants["Vm"])), "K": cand.constants["K"],
                        "q2": cand.constants["q"]}
    ok, gaps = b.identifiable(cand, [twin], world, fit)
    assert not ok and max(abs(g) for g in gaps["reparametrised"]) < 1.0, gaps


def test_the_hidden_law_is_never_fitted_from_its_true_constants_alone():
    """Its starts are the public one and its fit at the departure the records
    support, not the constants the world serves."""
    b = _accelerating_builder()
    cand = _screen(b, _linear(), magnitude=1.5)
    chosen, fit, _ = b.select_base([_mm()])
    starts = b.starts(cand, fit)
    assert starts[0]["q"] == 1.0 and starts[0]["Vm"] == fit.constants["Vm"]  # catalogue, base
    assert all(s["q"] != cand.constants["q"] for s in starts)
