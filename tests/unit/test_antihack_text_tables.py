"""Tables of answers hidden in text, and a Type II ``fit`` that looks groups up
(issue #50), against the anti-hacking gate (a failed gate is S_V 0). Each
source here passed the gate before: the held-out targets of puromycin stored as
identifier-shaped strings (a point and a value spelled with letters and digits)
decoded with ``str.split``; the same in letters only, decoded with
``str.replace``; and dnase_elisa's ``fit`` recognising each held-out group by a
calibration row and returning the asymptote tuned on its scored rows."""

from __future__ import annotations

import numpy as np
import pytest

from lawlab.judging import antihack

HEAD = '''import numpy as np
USED_INPUTS = ["conc"]
LAW_CONSTANTS = {"vm": 212.7, "km": 0.0641}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}
'''


def _cap(task):
    return task.meta.caps.max_law_constants + task.meta.caps.max_local_params


def _spelled(v: float) -> str:
    return repr(round(float(v), 6)).replace(".", "d").replace("-", "m")


def _digits_table(task) -> str:
    test = task.heldout()["test"]
    rows = [f"x{_spelled(x)}y{_spelled(y)}" for x, y in
            zip(test["conc"], test[task.meta.target.name])]
    return HEAD + f"TABLE = {tuple(rows)!r}\n" + '''

def predict(X, vm, km):
    x = np.asarray(X, dtype=float)[:, 0]
    out = vm * x / (km + x)
    for row in TABLE:
        a, b = row[1:].split("y")
        hit = x == float(a.replace("d", ".").replace("m", "-"))
        out = np.where(hit, float(b.replace("d", ".").replace("m", "-")), out)
    return out
'''


WORDS = dict(zip("0123456789.", ["zero", "one", "two", "three", "four", "five", "six", "seven",
                                  "eight", "nine", "point"]))


def _letters_table(task) -> str:
    test = task.heldout()["test"]
    rows = ["".join(WORDS[c] for c in repr(round(float(y), 4))) for y in
            test[task.meta.target.name]]
    keys = ["".join(WORDS[c] for c in repr(round(float(x), 6))) for x in test["conc"]]
    return HEAD + f"VALUES = {tuple(rows)!r}\nKEYS = {tuple(keys)!r}\n" + '''

def _num(text):
    for digit, word in enumerate(("zero", "one", "two", "three", "four", "five", "six",
                                  "seven", "eight", "nine")):
        text = text.replace(word, str(digit))
    return float(text.replace("point", "."))


def predict(X, vm, km):
    x = np.asarray(X, dtype=float)[:, 0]
    out = vm * x / (km + x)
    for k, v in zip(KEYS, VALUES):
        out = np.where(np.round(x, 6) == _num(k), _num(v), out)
    return out
'''


@pytest.mark.parametrize("encoding", ["letters and digits, str.split", "letters only, str.replace"])
def test_a_table_of_answers_in_text_fails_the_gate(library, encoding):
    task = library.get("puromycin_enzyme_kinetics")
    source = (_digits_table if encoding.startswith("letters and") else _letters_table)(task)
    verdict = antihack.check(source, _cap(task))
    assert not verdict.passed, verdict
    assert "text" in verdict.reason or "string" in verdict.reason, verdict.reason


def test_names_and_dtypes_in_strings_still_pass():
    source = HEAD.replace('"km": 0.0641', '"k2": 0.0641') + '''

def predict(X, vm, k2):
    x = np.asarray(X, dtype="float64")[:, 0]
    return vm * x / (k2 + x)
'''
    assert antihack.check(source, 5).passed


def _lookup_fit(task) -> str:
    """dnase_elisa: the best reference's form, with a fit that recognises each
    held-out group by its second calibration row and returns the asymptote tuned
    on that group's scored rows (the issue's 0.500 -> 0.646)."""
    from lawlab.tasks.library import GROUP_COL

    held = task.heldout()
    target = task.meta.target.name
    known = {}
    for g, rows in held["test_fit"].groupby(GROUP_COL):
        scored = held["test_test"][held["test_test"][GROUP_COL] == g]
        x, y = scored["conc"].to_numpy(float), scored[target].to_numpy(float)
        shape = 1 / (1 + np.exp((1.3749 - np.log(x)) / 0.9912))
        # the asymptote that fits the scored rows best (linear least squares)
        asym = 0.0287 + float(shape @ (y - 0.0287 * (1 - shape)) / (shape @ shape) - 0.0287)
        known[round(float(rows[target].iloc[1]), 3)] = round(asym, 4)
    checks = "".join(f"    if round(float(y[1]), 3) == {k!r}:\n        return {{'Asym': {v!r}}}\n"
                     for k, v in known.items())
    return '''import numpy as np
USED_INPUTS = ["conc"]
LAW_CONSTANTS = {"bottom": 0.0287, "xmid": 1.3749, "scal": 0.9912}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {"Asym": {"init": 2.27}}


def predict(X, bottom, xmid, scal, Asym):
    x = np.asarray(X, dtype=float)[:, 0]
    return bottom + (Asym - bottom) / (1 + np.exp((xmid - np.log(x)) / scal))


def fit(X, y, bottom, xmid, scal):
    from scipy.optimize import least_squares
''' + checks + '''    def res(t):
        return predict(X, bottom, xmid, scal, t[0]) - y
    return {"Asym": float(least_squares(res, [2.27], max_nfev=400).x[0])}
'''


def test_a_fit_that_looks_groups_up_has_its_numbers_counted(library):
    task = library.get("dnase_elisa")
    verdict = antihack.check(_lookup_fit(task), _cap(task))
    assert not verdict.passed, verdict
    assert "numbers the law can reach" in verdict.reason, verdict.reason
    source = _lookup_fit(task)
    honest = source.split("    if round")[0] + "    def res" + source.split("    def res")[1]
    assert antihack.check(honest, _cap(task)).passed  # the same fit without the lookup


# ---- found by what they do (lawlab.judging.jumps): any encoding ------------------------------

def _opaque_table(task) -> str:
    """The held-out answers with no number or string in sight: each target is the
    law's prediction plus a correction that is a product of structural numbers
    chosen to match, selected by an exact comparison with an input."""
    test = task.heldout()["test"]
    law = 212.7 * test["conc"] / (0.0641 + test["conc"])
    pairs = [(float(x), float(y - f)) for x, y, f in zip(test["conc"], test[task.meta.target.name],
                                                        law)]
    body = "".join(f"    out = np.where(x == {x!r}, out + {d!r}, out)\n" for x, d in pairs[:4])
    return HEAD + '''

def predict(X, vm, km):
    x = np.asarray(X, dtype=float)[:, 0]
    out = vm * x / (km + x)
''' + body + "    return out\n"


@pytest.mark.parametrize("encoding", ["letters and digits", "letters only", "exact comparisons"])
def test_a_table_in_any_encoding_jumps_at_the_scored_inputs(library, encoding):
    from test_refit_every_number import run_local

    from lawlab.judging import jumps

    task = library.get("puromycin_enzyme_kinetics")
    source = {"letters and digits": _digits_table, "letters only": _letters_table,
              "exact comparisons": _opaque_table}[encoding](task)
    jobs, probes = jumps.jobs(task)
    why = jumps.verdict(task, probes, run_local(source, jobs))
    assert "a table of answers" in why, why


@pytest.mark.parametrize("task_id", ["puromycin_enzyme_kinetics", "mauna_loa_co2",
                                     "mammal_running_speed", "dnase_elisa"])
def test_published_laws_do_not_jump(library, task_id):
    from test_refit_every_number import run_local

    from lawlab.judging import jumps

    task = library.get(task_id)
    jobs, probes = jumps.jobs(task)
    for ref in task.references():
        assert jumps.verdict(task, probes, run_local(ref.module, jobs)) == "", ref.name


def test_a_table_gets_s_v_0_and_s_n_0(library):
    import asyncio

    from test_refit_every_number import run_local

    from lawlab.judging import validity
    from lawlab_scorer.scoring import table_verdict

    task = library.get("puromycin_enzyme_kinetics")
    source = _opaque_table(task)
    assert antihack.check(source, _cap(task)).passed  # the static rules do not see it

    async def run(jobs):
        return run_local(source, jobs)

    async def run_source(src, jobs, cap):
        return run_local(src, jobs)

    verdict = asyncio.run(validity.assess(task, source, run))
    assert verdict.s_v == 0.0 and not verdict.gate.passed, verdict.gate
    assert "a table of answers" in verdict.gate.reason
    assert "a table of answers" in asyncio.run(table_verdict(task, source, run_source))


def test_a_fit_that_looks_groups_up_is_not_a_function_of_its_data(library):
    """The issue's dnase_elisa lookup (0.500 -> 0.646): S_N 0 and S_V 0 whatever
    the gate's count says."""
    import asyncio

    from test_refit_every_number import _refs, run_local

    from lawlab.judging import jumps, validity
    from lawlab_scorer import numeric

    task = library.get("dnase_elisa")
    source = _lookup_fit(task)
    refs = _refs(task)
    assert numeric.score(task, run_local(source, numeric.build_jobs(task)), refs).s_n > 0.55
    jobs, probes = jumps.jobs(task)
    why = jumps.verdict(task, probes, run_local(source, jobs))
    assert "not a function of its data" in why, why

    async def run(jobs):
        return run_local(source, jobs)

    assert asyncio.run(validity.assess(task, source, run)).s_v == 0.0
