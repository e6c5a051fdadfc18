import numpy as np

from lawlab.judging import antihack, structure
from lawlab.law.contract import law_module, static_check
from lawlab.law.expr import Expression

HIDDEN = "Vm * c / (K + c) + h * c"
BASE = "Vm * c / (K + c)"


def _module(expr, consts, inputs=("c",)):
    return law_module(title="t", expr=expr, used_inputs=list(inputs), constants=consts)


def _judge(source):
    probes = {"c": np.linspace(0.02, 1.1, 80)}
    hidden = structure.HiddenLaw(Expression(HIDDEN), {"Vm": 200.0, "K": 0.06, "h": 30.0}, {},
                                 [structure.Piece("h * c", "added_term", {"h": 0.0})], ["c"],
                                 "linear", {"": probes})
    return structure.judge_structure(source, hidden)


def test_generated_modules_pass_the_static_contract():
    src = _module(BASE, {"Vm": 200.0, "K": 0.06})
    report = static_check(src, ["c"], multi_group=False)
    assert report.ok and report.used_inputs == ["c"]
    typed2 = law_module(title="t", expr=BASE, used_inputs=["c"], constants={"K": 0.06},
                        local_init={"Vm": 200.0})
    assert static_check(typed2, ["c"], multi_group=True).ok
    assert not static_check(typed2, ["c"], multi_group=False).ok  # fit in Type I


def test_structure_levels():
    assert _judge(_module(HIDDEN, {"Vm": 190.0, "K": 0.05, "h": 20.0})).level == 1.0
    # a reparameterisation: same structure, different constants layout
    reparam = _module("(a * c + b * c * (K + c)) / (K + c)", {"a": 190.0, "b": 20.0, "K": 0.05})
    assert _judge(reparam).level == 1.0
    extra = _module(HIDDEN + " + q * c ** 2", {"Vm": 190.0, "K": 0.05, "h": 20.0, "q": 1.0})
    assert _judge(extra).level == 0.75
    assert _judge(_module(BASE, {"Vm": 200.0, "K": 0.06})).level == 0.5
    assert _judge(_module("a + b * log(c)", {"a": 200.0, "b": 20.0})).level == 0.25
    # constants are refitted before the trend is read: a falling line refits to a rising one
    assert _judge(_module("a - b * c", {"a": 200.0, "b": 20.0})).level == 0.25
    assert _judge(_module("a + 0 * c", {"a": 200.0})).level == 0.0


def test_untranslatable_predict_gets_low_confidence_zero():
    src = "USED_INPUTS=['c']\nLAW_CONSTANTS={}\nOTHER_CONSTANTS={}\nLOCAL_FITTABLE={}\n" \
          "def predict(X, **k):\n    for i in range(3):\n        pass\n    return X[:, 0]\n"
    out = _judge(src)
    assert out.level == 0.0 and out.confidence == "low"


def test_anti_hacking_gate():
    honest = _module("c0 + c1 * t + c2 * t ** 2 + a1 * sin(2 * pi * t) + b1 * cos(2 * pi * t)",
                     {"c0": 315.0, "c1": 0.8, "c2": 0.01, "a1": 1.2, "b1": -0.7}, ["t"])
    assert antihack.check(honest, cap=7).passed
    table = honest.replace("OTHER_CONSTANTS = {}", "OTHER_CONSTANTS = {}\nTABLE = "
                           + repr([float(i) * 1.7 for i in range(40)]))
    verdict = antihack.check(table, cap=7)
    assert not verdict.passed and "literal array" in verdict.reason
    lookup = honest.replace("OTHER_CONSTANTS = {}", "OTHER_CONSTANTS = {}\nLOOKUP = "
                            "{1.5: 2.0, 2.5: 3.1, 3.5: 4.2, 4.5: 5.3, 5.5: 6.4}")
    assert not antihack.check(lookup, cap=7).passed
    many = _module(" + ".join(f"k{i} * t ** {i}" for i in range(12)),
                   {f"k{i}": 1.1 + i for i in range(12)}, ["t"])
    assert not antihack.check(many, cap=5).passed
    copied = honest.replace("out = ", "out = 0 * 123.456789 + ")
    assert not antihack.check(copied, cap=7, aggregates=[123.456789]).passed
