"""Scoring under attack (issue #31), as an outside team with the repository would
attack it, beside the sandbox's red-team suite (test_redteam.py): one test per
finding. Each reproduces the attack against real services and shows it gains
nothing."""

from __future__ import annotations

import numpy as np
import pytest

from lawlab.common.v1 import common_pb2
from lawlab.fitting import fit_expression, fit_grouped
from lawlab.law.contract import law_module
from lawlab.law.expr import Expression
from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
from lawlab.tasks.library import GROUP_COL
from lawlab.worlds.world import residual_space


@pytest.fixture(scope="module")
def scorer(cluster):
    channel = cluster.channel("scorer")
    yield scorer_pb2_grpc.ScorerServiceStub(channel)
    channel.close()


def _score(scorer, task_id: str, source: str):
    return scorer.ScoreSubmission(scorer_pb2.ScoreRequest(
        task_id=task_id, submission=common_pb2.Submission(source=source)), timeout=600)


def _best(task):
    import json

    name = json.loads((task.root / "eval" / "reference_metrics.json").read_text())["best_reference"]
    return next(r for r in task.references() if r.name == name)


def _fit_on(task, ref, frame):
    """The reference's constants fitted on ``frame`` (the rebuilt held-out split)."""
    inputs, target = task.meta.input_names, task.meta.target.name
    y = frame[target].to_numpy(float)
    space = residual_space(task.meta.metric, task.train[target].to_numpy(float))
    data = {n: frame[n].to_numpy(float) for n in inputs}
    init = {**ref.init, **ref.constants}
    if task.meta.multi_group:
        res = fit_grouped(Expression(ref.expr), data, y, frame[GROUP_COL].astype(str).to_numpy(),
                          list(ref.global_names), list(ref.local_names), init, space=space,
                          n_starts=4)
        local = {n: float(np.median(list(t.values()))) for n, t in res.local.items()}
        return law_module(title="tuned on the test split", expr=ref.expr,
                          used_inputs=[i for i in inputs if i in Expression(ref.expr).names],
                          constants=res.constants, local_init=local, space=space)
    res = fit_expression(Expression(ref.expr), data, y, list(ref.global_names), init,
                         space=space, n_starts=8)
    return law_module(title="tuned on the test split", expr=ref.expr,
                      used_inputs=[i for i in inputs if i in Expression(ref.expr).names],
                      constants=res.constants, space=space)


# finding 1 (HIGH): the held-out targets are rebuildable from the public data, and a
# published form fitted on them bought S_N 1.000 on puromycin (0.939 steam, 0.749 mercury)
@pytest.mark.attacks
@pytest.mark.parametrize("task_id", ["puromycin_enzyme_kinetics", "steam_saturation_pressure",
                                     "dnase_elisa"])
def test_constants_fitted_on_the_rebuilt_test_split_gain_nothing(scorer, library, task_id):
    task = library.get(task_id)
    ref = _best(task)
    honest = _score(scorer, task_id, ref.module)
    held = task.heldout()
    frame = held["test"] if "test" in held else \
        __import__("pandas").concat([held["test_fit"], held["test_test"]], ignore_index=True)
    tuned = _score(scorer, task_id, _fit_on(task, ref, frame))
    assert honest.status == common_pb2.RUN_STATUS_OK and tuned.status == common_pb2.RUN_STATUS_OK
    # the attack still works as submitted ...
    assert tuned.s_n_submitted > honest.s_n_submitted + 0.01, (tuned, honest)
    # ... and gains nothing once the constants are refitted on the training split
    assert tuned.s_n <= honest.s_n + 0.005, (tuned.s_n, honest.s_n, tuned.message)
    assert "refitted on the training split" in tuned.message
    # an honest submission scores as before the refit rule (the best reference is 0.5)
    assert honest.s_n == pytest.approx(honest.s_n_submitted, abs=0.005)
    assert honest.s_n == pytest.approx(0.5, abs=0.005)


@pytest.mark.attacks
def test_a_law_that_breaks_off_its_submitted_constants_cannot_dodge_the_refit(scorer, library):
    """The refit needs the law at other values of its constants; a law that refuses
    them keeps nothing of its tuned score."""
    task = library.get("puromycin_enzyme_kinetics")
    tuned = _fit_on(task, _best(task), task.heldout()["test"])
    guarded = tuned.replace(
        "    X = np.asarray(X, dtype=float)\n",
        "    X = np.asarray(X, dtype=float)\n"
        "    if any(constants[k] != LAW_CONSTANTS[k] for k in LAW_CONSTANTS):\n"
        "        raise ValueError('only the submitted values')\n", 1)
    assert guarded != tuned
    s = _score(scorer, "puromycin_enzyme_kinetics", guarded)
    # the scorer's rewrite (issue #50) moves LAW_CONSTANTS' values with the
    # constants, so this guard compares the refit's values with themselves and the
    # law is scored from the refit: the same form fitted on the training split
    assert s.s_n_submitted > 0.6 and s.s_n <= 0.51, s
    # a guard against literal copies of the values breaks when one of them moves
    import re

    values = dict(re.findall(r"'(\w+)': ([-0-9.e+]+)", tuned.split("LAW_CONSTANTS = ", 1)[1]
                             .split("\n", 1)[0]))
    literal = tuned.replace(
        "    X = np.asarray(X, dtype=float)\n",
        "    X = np.asarray(X, dtype=float)\n"
        + "".join(f"    if constants[{k!r}] != {v}:\n        raise ValueError('no')\n"
                  for k, v in values.items()), 1)
    s = _score(scorer, "puromycin_enzyme_kinetics", literal)
    assert s.s_n_submitted > 0.6 and s.s_n == 0.0, s
    assert "cannot be refitted" in s.refit_message


# issue #50: the same held-out-tuned constants moved out of a literal LAW_CONSTANTS
# dict (literals in predict 1.000, OTHER_CONSTANTS 0.749, dict(...) 0.939 on
# puromycin, mercury, steam), and a law that gets worse when its constants move
@pytest.mark.attacks
@pytest.mark.parametrize("task_id", ["puromycin_enzyme_kinetics", "mercury_vapour_pressure",
                                     "steam_saturation_pressure"])
def test_held_out_tuned_numbers_written_anywhere_gain_nothing(scorer, library, task_id):
    from tests.unit.test_refit_every_number import _moved, _tuned

    task = library.get(task_id)
    ref = _best(task)
    honest = _score(scorer, task_id, ref.module)
    assert honest.s_n == pytest.approx(0.5, abs=0.005), honest
    for form, source in _moved(ref.module, _tuned(task, ref)).items():
        s = _score(scorer, task_id, source)
        assert s.status == common_pb2.RUN_STATUS_OK, (form, s)
        assert s.s_n_submitted > honest.s_n + 0.05, (form, s)
        assert s.s_n <= honest.s_n + 0.01, (form, s.s_n, s.message)


# issue #50 at scale: the best published reference fitted on the rebuilt held-out
# split, written in OTHER_CONSTANTS, on every Type I Real task of the served library
# (the issue: mean S_N 0.714 as submitted, every one above the honest 0.5)
TYPE_I_REAL = 25


@pytest.mark.attacks
def test_no_held_out_fit_on_any_type_i_real_task_beats_the_literature(scorer, library):
    from concurrent.futures import ThreadPoolExecutor

    from tests.unit.test_refit_every_number import _moved, _tuned

    tasks = [t for t in library if t.meta.suite == "real" and not t.meta.multi_group]
    assert len(tasks) == TYPE_I_REAL, [t.task_id for t in tasks]

    def both(task):
        ref = _best(task)
        tuned = _moved(ref.module, _tuned(task, ref))["OTHER_CONSTANTS"]
        return task.task_id, _score(scorer, task.task_id, ref.module), \
            _score(scorer, task.task_id, tuned)

    with ThreadPoolExecutor(2) as pool:
        rows = list(pool.map(both, tasks))
    table = "\n".join(f"{tid:28s} honest {h.s_n:.3f}  tuned as submitted "
                      f"{t.s_n_submitted:.3f}  tuned {t.s_n:.3f}  {t.message[:80]}"
                      for tid, h, t in rows)
    failures = [tid for tid, h, t in rows
                if h.status != common_pb2.RUN_STATUS_OK
                or h.s_n != pytest.approx(0.5, abs=0.005)
                or t.s_n > h.s_n + 0.01 or t.s_n > 0.51]
    # the attack is real (the held-out fit beats the literature as submitted) ...
    bought = [tid for tid, h, t in rows if t.s_n_submitted > h.s_n + 0.01]
    mean = {k: float(np.mean([getattr(t, k) for _, _, t in rows]))
            for k in ("s_n_submitted", "s_n")}
    said = (f"mean S_N {mean['s_n_submitted']:.3f} as submitted, {mean['s_n']:.3f} as "
            f"scored; {len(bought)} of {len(rows)} above the honest score as submitted\n"
            + table)
    assert len(bought) >= TYPE_I_REAL - 2, said
    # ... and on no task does it score more than the same form fitted on the training
    # split (the best reference: 0.5) once its numbers are refitted there
    assert not failures, f"{failures}\n{said}"
    print(said)


@pytest.mark.attacks
def test_a_refit_detector_is_scored_zero_through_the_sandbox(scorer, library):
    from tests.unit.test_refit_every_number import _forms, _tuned

    task = library.get("puromycin_enzyme_kinetics")
    s = _score(scorer, task.task_id, _forms(_tuned(task, _best(task)))["a refit detector"])
    assert s.s_n_submitted > 0.9 and s.s_n == 0.0, s
    assert "gets worse when its constants move" in s.refit_message


# issue #50: tables of answers (any encoding) and a Type II fit that looks each
# held-out group up, through the real sandbox, scorer and judge
@pytest.mark.attacks
def test_tables_and_a_lookup_fit_get_s_n_0_and_s_v_0(cluster, scorer, library):
    from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
    from tests.unit.test_antihack_text_tables import _digits_table, _letters_table, _lookup_fit, _opaque_table

    channel = cluster.channel("judge")
    judge = judge_pb2_grpc.JudgeServiceStub(channel)
    try:
        puromycin, dnase = library.get("puromycin_enzyme_kinetics"), library.get("dnase_elisa")
        cases = [(puromycin, f(puromycin)) for f in (_digits_table, _letters_table,
                                                    _opaque_table)]
        cases.append((dnase, _lookup_fit(dnase)))
        for task, source in cases:
            s = _score(scorer, task.task_id, source)
            assert s.s_n == 0.0, (task.task_id, s)
            v = judge.JudgeValidity(judge_pb2.JudgeRequest(
                task_id=task.task_id, submission=common_pb2.Submission(source=source)),
                timeout=600)
            assert v.s_v == 0.0 and not v.anti_hacking_passed, (task.task_id, v)
        # the published laws keep their scores
        for task in (puromycin, dnase):
            assert _score(scorer, task.task_id, _best(task).module).s_n == pytest.approx(
                0.5, abs=0.005)
    finally:
        channel.close()


# ---- through the public port, as outside teams ---------------------------------------

import json as _json  # noqa: E402
import os  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import grpc  # noqa: E402

from lawlab_ops.client import SimulatorClient  # noqa: E402
from lawlab_ops.launcher import Cluster  # noqa: E402
from tests.support.stopping import stop_cleanly  # noqa: E402

LAWLAB = str(Path(sys.executable).parent / "lawlab")
MM = '''import numpy as np
USED_INPUTS = ["conc"]
LAW_CONSTANTS = {"vm": 212.7, "km": 0.0641}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}


def predict(X, vm, km):
    x = X[:, 0]
    return vm * x / (km + x)
'''
LOOPS = MM.replace("    x = X[:, 0]\n", "    while True:\n        pass\n")
TOWER = '''import numpy as np
USED_INPUTS = ["temperature"]
LAW_CONSTANTS = {"a": 1e-6}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}


def predict(X, a):
    return a * X[:, 0] ** 3 ** 3 ** 3 ** 3
'''
LEAKY = MM.replace("    x = X[:, 0]\n", "    x = X[:, 0]\n    raise ValueError(f'bad input {x[:3]}')\n")
SUBMISSION_SECONDS = 20


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LAWLAB, *args, "--data-dir", str(data)], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def public(tasks_dir, tmp_path_factory):
    """The simulator's public port with team tokens (a short submission limit, so
    that a law that never returns costs seconds here, not 100 s)."""
    data = tmp_path_factory.mktemp("attacks")
    cluster = Cluster(tasks_dir, data, log_dir=data / "logs")
    cluster.start(extra_env={"LAWLAB_SANDBOX_SUBMISSION_SECONDS": str(SUBMISSION_SECONDS)},
                  names=("sandbox", "scorer", "judge", "simulator"))
    tokens = {}
    for team, owner, qps in (("alpha", "dana@example.org", "20"),
                             ("alpha2", "Dana@example.org", "20"),
                             ("beta", "", "20"), ("gamma", "", "20"), ("slow", "", "2")):
        made = _cli(data, "token", "create", "--team", team, "--qps", qps,
                    *(["--owner", owner] if owner else []))
        assert made.returncode == 0, made.stderr
        tokens[team] = made.stdout.strip()
    assert _cli(data, "epoch", "open", "round1", "--development", "--release", "immediate",
                "--release-real", "immediate").returncode == 0
    yield {"cluster": cluster, "tokens": tokens, "data": data,
           "address": cluster.address("simulator")}
    stop_cleanly(cluster)


def _team(public, team: str) -> SimulatorClient:
    return SimulatorClient(public["address"], token=public["tokens"][team])


def _real(public, team: str, task: str, source: str) -> str:
    with _team(public, team) as sim:
        sid = sim.open(task, "real")["session_id"]
        return sim.submit(sid, source)["submission_id"]


def _scored_at(public, team: str, sub_id: str, timeout: float = 240) -> tuple[dict, float]:
    with _team(public, team) as sim:
        status = sim.wait_scored(sub_id, timeout=timeout, poll=0.5)
    return status, time.monotonic()


# finding 2 (HIGH): one submission froze the structure judge and all scoring
@pytest.mark.attacks
def test_a_power_tower_gets_a_verdict_and_the_queue_moves_on(public):
    with _team(public, "alpha") as sim:
        sid = sim.open("mercury_vapour_pressure", "parallel")["session_id"]
        sim.query(sid, {"temperature": [10.0, 100.0, 200.0]})
        tower = sim.submit(sid, TOWER)["submission_id"]
    start = time.monotonic()
    canary = _real(public, "gamma", "puromycin_enzyme_kinetics", MM)
    canary_status, when = _scored_at(public, "gamma", canary)
    assert canary_status["state"] == "SUBMISSION_STATE_SCORED", canary_status
    assert when - start < 60, f"the canary waited {when - start:.0f} s"
    tower_status, _ = _scored_at(public, "alpha", tower)
    assert tower_status["state"] in ("SUBMISSION_STATE_SCORED", "SUBMISSION_STATE_FAILED")
    assert tower_status["scores"].get("s_s", 0.0) == 0.0
    with grpc.insecure_channel(public["cluster"].address("judge")) as ch:
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        assert health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                    timeout=5).status == 1


def test_a_twenty_thousand_term_sum_is_refused_naming_the_limit(public):
    deep = MM.replace("vm * x / (km + x)", "vm * x / (km + x)" + " + x" * 20000)
    with _team(public, "beta") as sim:
        sid = sim.open("puromycin_enzyme_kinetics", "real")["session_id"]
        with pytest.raises(grpc.RpcError) as err:
            sim.submit(sid, deep)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "submission.source" in err.value.details() and "5,000" in err.value.details()


# finding 3 (MEDIUM): one FIFO queue; one team's endless laws blocked everyone
@pytest.mark.attacks
def test_slow_submissions_of_two_teams_interleave_with_a_third_teams_fast_ones(public):
    slow_tasks = ["calcium_uptake", "alga_cadmium"]
    slow = [(team, _real(public, team, task, LOOPS.replace('"conc"', f'"{col}"')))
            for task, col in zip(slow_tasks, ("time", "conc")) for team in ("alpha2", "beta")]
    fast_ids = [_real(public, "gamma", t, MM) for t in ("mysid_effluent", "ryegrass_ferulic_acid")]
    for team, sid in slow:
        status, _ = _scored_at(public, team, sid)
        assert status["state"] == "SUBMISSION_STATE_FAILED" and "exec_error" in status["message"] \
            or status["state"] == "SUBMISSION_STATE_SCORED", status
    for sid in fast_ids:
        status, _ = _scored_at(public, "gamma", sid)
        assert status["state"] == "SUBMISSION_STATE_SCORED", status
    # the order scoring started in (the simulator's log): the third team's first
    # submission, queued after all four slow ones, started before either slow team's
    # second one (round robin across teams, not first in, first out)
    started = [e["submission_id"] for e in map(_json.loads, (public["data"] / "logs" /
                                                              "simulator.log").read_text()
                                                .splitlines())
               if e.get("msg") == "submission scoring started"]
    ours = [sid for sid in started if sid in {s for _, s in slow} | set(fast_ids)]
    seconds = [sid for team, sid in slow[2:]]  # each slow team's second submission
    assert ours.index(fast_ids[0]) < min(ours.index(sid) for sid in seconds), ours


# finding 4 (MEDIUM): a second team for the same person, unlinkable by the operator
def test_teams_sharing_an_owner_or_an_address_are_shown_together(public):
    for team in ("alpha", "alpha2"):
        with _team(public, team) as sim:
            sim.open("puromycin_enzyme_kinetics", "real")
    listed = _cli(public["data"], "token", "list")
    assert listed.returncode == 0, listed.stderr
    assert "shared owner 'dana@example.org': teams alpha, alpha2" in listed.stdout
    assert "shared client address ipv4:127.0.0.1: teams" in listed.stdout
    audit = [_json.loads(line) for line in _cli(public["data"], "token", "audit", "--team",
                                                "alpha2").stdout.splitlines()]
    assert any(a["action"] == "open_session" and a["client"].startswith("ipv4:127.0.0.1")
               for a in audit)


# finding 5 (LOW): the small ones
def test_every_public_call_is_rate_limited(public):
    with _team(public, "slow") as sim:
        codes = []
        for _ in range(10):
            try:
                sim.task("puromycin_enzyme_kinetics")
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as err:
                codes.append(err.code())
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes


def test_a_huge_identifier_is_cut_in_the_error_and_the_log(public):
    huge = "x" * 100_000
    with _team(public, "beta") as sim:
        with pytest.raises(grpc.RpcError) as err:
            sim.task(huge)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert len(err.value.details()) < 1000 and "100,000 characters" in err.value.details()
    log = (public["data"] / "logs" / "simulator.log").read_text()
    assert max(len(line) for line in log.splitlines()) < 5000


def test_a_real_runs_error_text_reaches_the_team_without_data_values(public):
    sub = _real(public, "beta", "terbuthylazin_growth_rate", LEAKY.replace('"conc"', '"dose"'))
    status, _ = _scored_at(public, "beta", sub)
    # the exception class only (issue #50: a fit spelled held-out targets out in
    # letters in an exception message; masking digits did not stop that)
    assert "ValueError" in status["message"], status["message"]
    assert "bad input" not in status["message"], status["message"]


def test_state_files_are_readable_by_their_owner_only(public):
    ledger = public["data"] / "simulator" / "ledger.sqlite"
    assert stat.S_IMODE(os.stat(ledger).st_mode) == 0o600


# issue #50: a module reaching time.sleep through warnings.sys.modules held a scoring
# slot for 255 s without using CPU
SLEEPS = MM.replace("import numpy as np\n", "import numpy as np\nimport warnings\n").replace(
    "    x = X[:, 0]\n", "    warnings.sys.modules['time'].sleep(200)\n    x = X[:, 0]\n")


@pytest.mark.attacks
def test_a_sleeping_submission_fails_fast_and_holds_no_slot(public):
    start = time.monotonic()
    sub = _real(public, "beta", "mysid_effluent", SLEEPS)
    status, when = _scored_at(public, "beta", sub)
    assert status["state"] == "SUBMISSION_STATE_FAILED", status
    assert "idle" in status["message"], status["message"]
    assert when - start < 90, f"the sleeper held scoring for {when - start:.0f} s"


# issue #50 (4): four new teams' judge-stalling submissions held an established
# team's law for 111 s (new teams, cheap to make, went first in the queue). Two
# kinds of stall: a law that never returns holds a scoring slot for one sandbox
# limit (about 25 s here: the scorer's and the judge's runs at once); a law that
# returns, slowly (4 s of CPU a call), holds one for about a minute, since the
# table check, the refit and the validity judge all run it again
SLOW = MM.replace("    x = X[:, 0]\n",
                  "    s = 0\n    for i in range(40_000_000):\n        s += i\n    x = X[:, 0]\n")


def _started(public) -> list[str]:
    """Submission ids in the order the simulator started scoring them (its log)."""
    return [e["submission_id"] for e in map(_json.loads, (public["data"] / "logs" /
                                                          "simulator.log").read_text()
                                            .splitlines())
            if e.get("msg") == "submission scoring started"]


@pytest.mark.attacks
def test_an_established_teams_law_is_scored_within_60_s_behind_four_new_teams_stalls(public):
    # teams of this test alone (the module's other tests serve alpha, beta, gamma ...)
    established, new = "q50-established", [f"q50-new{i}" for i in range(4)]
    for team in (established, *new):
        made = _cli(public["data"], "token", "create", "--team", team, "--qps", "20")
        assert made.returncode == 0, made.stderr
        public["tokens"][team] = made.stdout.strip()
    # the established team has been served: one law scored to completion
    first = _real(public, established, "mysid_effluent", MM)
    status, _ = _scored_at(public, established, first)
    assert status["state"] == "SUBMISSION_STATE_SCORED", status
    # four new teams queue stalling laws: the first two take both scoring slots
    # (a running job is not pre-empted, so the established team's law waits for one
    # of them whatever the order); the other two wait, and they would take a slot
    # each for about a minute if they went first
    stalls = {team: _real(public, team, task, law.replace('"conc"', f'"{col}"'))
              for team, (task, col, law) in zip(new, [
                  ("calcium_uptake", "time", LOOPS), ("alga_cadmium", "conc", LOOPS),
                  ("ryegrass_ferulic_acid", "conc", SLOW),
                  ("puromycin_enzyme_kinetics", "conc", SLOW)])}
    # ... and at once the established team its honest law
    start = time.monotonic()
    honest = _real(public, established, "puromycin_enzyme_kinetics", MM)
    status, when = _scored_at(public, established, honest, timeout=300)
    waited = when - start
    verdicts = {team: _scored_at(public, team, sid, timeout=400)
                for team, sid in stalls.items()}
    stalled = {team: (v["state"], round(at - start)) for team, (v, at) in verdicts.items()}
    names = {honest: established, **{sid: team for team, sid in stalls.items()}}
    order = [names[sid] for sid in _started(public) if sid in names]
    said = (f"the established team's law waited {waited:.0f} s; the new teams' laws "
            f"(state, seconds after it was submitted): {stalled}; scoring started in the "
            f"order {order}")
    assert status["state"] == "SUBMISSION_STATE_SCORED", (status, said)
    assert status["scores"]["s_n"] > 0, (status, said)
    # every stalling law got its verdict (none is left queued for another test)
    assert all(v["state"] != "SUBMISSION_STATE_QUEUED" for v, _ in verdicts.values()), said
    # the acceptance of issue #50: scored within 60 s of its submission ...
    assert waited < 60, said
    # ... because it was taken before the new teams' laws still waiting (after at
    # most the two already running)
    assert order.index(established) <= 2, said
    print(said)
