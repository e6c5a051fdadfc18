"""S_N from constants the scorer chose (issue #50): every number a Real
prediction depends on that the submitter chose is refitted on the training
split, wherever it is written. The attacks of the issue, in process: the best
published form with its constants fitted on the rebuilt held-out split, written
as literals in ``predict``, in ``OTHER_CONSTANTS``, built with ``dict(...)``, at
module level, and a law that gets worse when its constants move (a refit
detector). None may score more than the same form fitted on the training split
(+0.01). The runner here executes the (trusted, test-written) modules in
process the way the sandbox's job loop does; the scorer's own code
(``score_refitted``, the rewrite, the refit) is what is tested.
tests/integration/test_scoring_attacks.py replays them through the real
sandbox and scorer."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from lawlab.fitting import fit_expression
from lawlab.judging.submission_runs import RunResult
from lawlab.law.expr import Expression
from lawlab.law.literals import rewrite, structural
from lawlab.worlds.world import residual_space
from lawlab_scorer import numeric
from lawlab_scorer.scoring import score_refitted


def run_local(source, jobs, cap=99):
    """The sandbox's job loop (lawlab_sandbox.runner.run_submission), in process."""
    mod: dict = {"__name__": "submission"}
    exec(compile(source, "<submission>", "exec"), mod)
    assert len(mod["LAW_CONSTANTS"]) <= cap
    preds, errors = {}, {}
    for job in jobs:
        try:
            law = dict(mod["LAW_CONSTANTS"])
            for k, v in (job.law_constants or {}).items():
                assert k in law
                law[k] = float(v)
            X = job.x[list(mod["USED_INPUTS"])].to_numpy(float)
            local = {}
            if job.fit_x is not None:
                fx = job.fit_x[list(mod["USED_INPUTS"])].to_numpy(float)
                local = {k: float(v) for k, v in mod["fit"](fx, job.fit_y, **law).items()}
            p = np.asarray(mod["predict"](X, **law, **mod["OTHER_CONSTANTS"], **local), float)
            assert p.shape == (len(X),) and np.all(np.isfinite(p))
            preds[job.job_id] = p
        except Exception as err:  # noqa: BLE001
            preds[job.job_id] = None
            errors[job.job_id] = type(err).__name__
    return RunResult("ok", "", preds, errors)


async def _runner(source, jobs, cap):
    return run_local(source, jobs, cap)


def _refs(task):
    jobs = numeric.build_jobs(task)
    return {r.name: numeric.group_metrics(task, run_local(r.module, jobs))
            for r in task.references()}


def s_n(task, source, refs):
    """(S_N as submitted, S_N the scorer gives, the refit's message)."""
    outcome = numeric.score(task, run_local(source, numeric.build_jobs(task)), refs)
    got = asyncio.run(score_refitted(task, source, outcome, refs, _runner))
    assert got is not None
    return outcome.s_n, min(outcome.s_n, got.s_n), got.message


def _best(task):
    name = json.loads((task.root / "eval" / "reference_metrics.json").read_text())["best_reference"]
    return next(r for r in task.references() if r.name == name)


def _tuned(task, ref):
    """The reference's constants fitted on the rebuilt held-out split."""
    frame = task.heldout()["test"]
    target = task.meta.target.name
    res = fit_expression(Expression(ref.expr), {n: frame[n].to_numpy(float)
                                                for n in task.meta.input_names},
                         frame[target].to_numpy(float), list(ref.global_names),
                         {**ref.init, **ref.constants},
                         space=residual_space(task.meta.metric, task.train[target].to_numpy(float)),
                         n_starts=8)
    return res.constants


HILL = '''import numpy as np
USED_INPUTS = ["conc"]
{decl}
LOCAL_FITTABLE = {{}}


def predict(X, **c):
    x = np.asarray(X, dtype=float)[:, 0]
{body}
'''


def _forms(c):
    vm, k, n = c["Vm"], c["K"], c["n"]
    law = "    return c['Vm'] * x ** c['n'] / (c['K'] ** c['n'] + x ** c['n'])"
    return {
        "literals in predict": HILL.format(
            decl="LAW_CONSTANTS = {}\nOTHER_CONSTANTS = {}",
            body=f"    return {vm!r} * x ** {n!r} / ({k!r} ** {n!r} + x ** {n!r})"),
        "OTHER_CONSTANTS": HILL.format(
            decl=f"LAW_CONSTANTS = {{}}\nOTHER_CONSTANTS = {{'Vm': {vm!r}, 'K': {k!r}, 'n': {n!r}}}",
            body=law),
        "dict(...)": HILL.format(
            decl=f"LAW_CONSTANTS = dict(Vm={vm!r}, K={k!r}, n={n!r})\nOTHER_CONSTANTS = {{}}",
            body=law),
        "module-level arithmetic and a helper's default": HILL.format(
            decl=f"VM = {vm / 100!r} * 100\nLAW_CONSTANTS = {{}}\nOTHER_CONSTANTS = {{}}\n\n\n"
                 f"def hill(x, k={k!r}, n={n!r}):\n    return x ** n / (k ** n + x ** n)",
            body="    return VM * hill(x)"),
        "a refit detector": HILL.format(
            decl=f"LAW_CONSTANTS = {{'Vm': {vm!r}, 'K': {k!r}, 'n': {n!r}}}\nOTHER_CONSTANTS = {{}}",
            body=f"    off = abs(c['Vm'] - {vm!r}) + abs(c['K'] - {k!r}) + abs(c['n'] - {n!r})\n"
                 f"{law} * (1 + 1e3 * off)"),
    }


def _moved(module: str, c: dict[str, float]) -> dict[str, str]:
    """A published-form module (lawlab.law.contract.law_module) with constants ``c``
    moved out of LAW_CONSTANTS."""
    import re

    decl = re.search(r"^LAW_CONSTANTS = \{.*\}$", module, re.M)
    assert decl is not None
    base = module.replace("OTHER_CONSTANTS = {}\n", "")
    literal = base.replace(decl.group(0), "LAW_CONSTANTS = {}\nOTHER_CONSTANTS = {}")
    for k, v in c.items():
        literal = literal.replace(f"constants[{k!r}]", repr(v))
    assert "constants[" not in literal
    return {
        "literals in predict": literal,
        "OTHER_CONSTANTS": base.replace(
            decl.group(0), f"LAW_CONSTANTS = {{}}\nOTHER_CONSTANTS = {c!r}"),
        "dict(...)": base.replace(decl.group(0), "LAW_CONSTANTS = dict(" + ", ".join(
            f"{k}={v!r}" for k, v in c.items()) + ")\nOTHER_CONSTANTS = {}"),
    }


@pytest.mark.parametrize("task_id", ["mercury_vapour_pressure", "steam_saturation_pressure"])
def test_the_issues_three_tasks_gain_nothing_from_moved_constants(library, task_id):
    task = library.get(task_id)
    ref = _best(task)
    refs = _refs(task)
    honest = s_n(task, ref.module, refs)
    assert honest[1] == pytest.approx(0.5, abs=0.005)
    for form, source in _moved(ref.module, _tuned(task, ref)).items():
        submitted, scored, message = s_n(task, source, refs)
        assert submitted > honest[1] + 0.05, (form, submitted)
        assert scored <= honest[1] + 0.01, (form, submitted, scored, message)


@pytest.fixture(scope="module")
def puromycin(library):
    task = library.get("puromycin_enzyme_kinetics")
    ref = _best(task)
    refs = _refs(task)
    honest = s_n(task, ref.module, refs)
    return task, ref, refs, honest


@pytest.mark.parametrize("form", list(_forms({"Vm": 1.0, "K": 1.0, "n": 1.0})))
def test_held_out_tuned_numbers_gain_nothing_wherever_they_are_written(puromycin, form):
    task, ref, refs, honest = puromycin
    assert honest[1] == pytest.approx(0.5, abs=0.005)  # the best reference, fitted on train
    source = _forms(_tuned(task, ref))[form]
    submitted, scored, message = s_n(task, source, refs)
    assert submitted > honest[1] + 0.05, (form, submitted)  # the attack works as submitted
    assert scored <= honest[1] + 0.01, (form, submitted, scored, message)


def test_a_refit_detector_is_named_and_gets_nothing(puromycin):
    task, ref, refs, _ = puromycin
    _, scored, message = s_n(task, _forms(_tuned(task, ref))["a refit detector"], refs)
    assert scored == 0.0 and "gets worse when its constants move" in message, message
    assert "on line" in message


def test_structural_numbers_stay_and_the_rest_are_refitted():
    assert all(structural(v) for v in (2, -1, 0.5, 1 / 3, 0.75, 2.5, 12, 273.15, 9.81, 8.314,
                                       1e-12, 1000, 6.02214076e23))
    assert not any(structural(v) for v in (13, 0.7, 212.7, 0.0641, 1.23, 3.7e-7))
    law = rewrite("import numpy as np\nUSED_INPUTS = ['x']\nLAW_CONSTANTS = {}\n"
                  "OTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\nA = 2 * 100 + 12 + 0.7\n\n\n"
                  "def predict(X, **c):\n    return A * X[:, 0] ** 2 / (X[:, 0] + 273.15)\n")
    assert list(law.values.values()) == [pytest.approx(212.7)]  # folded: one number
    assert list(law.lines.values()) == [6]
