"""The simulator's public API through its servicer, hosted in this process
(tests/support/inprocess.py: the server lawlab serve builds, behind the standard
interceptors): caps, errors, and no leaks. Its health service, which the process's
server adds, is probed with every other service's in test_authz."""

from __future__ import annotations

import re
import uuid

import grpc
import numpy as np
import pytest

from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import sync_channel
from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.simulator.v1 import simulator_pb2_grpc
from tests.support.inprocess import in_process

TASK_I = "mercury_vapour_pressure"
TASK_II = "dnase_elisa"


@pytest.fixture(scope="module")
def sim(tasks_dir, tmp_path_factory):
    with in_process(tasks_dir, tmp_path_factory.mktemp("simulator"), ("simulator",)) as \
            (addresses, _), sync_channel(addresses["simulator"]) as channel:
        yield simulator_pb2_grpc.SimulatorServiceStub(channel)


def _open(sim, task, setting=common_pb2.SETTING_PARALLEL, trial_id=None):
    """A session of lawlab's own (the internal token): one budget per trial id."""
    return sim.OpenSession(pb.OpenSessionRequest(task_id=task, setting=setting,
                                                 trial_id=trial_id or uuid.uuid4().hex),
                           timeout=10)


def _query(sim, session, n=5, rid="", task=TASK_I, samples=1, **extra):
    req = pb.QueryRequest(session_id=session.session_id, request_id=rid, n_samples=samples)
    req.inputs["temperature"].values.extend(np.linspace(10, 250, n).tolist())
    for k, v in extra.items():
        req.inputs[k].values.extend(v)
    return sim.Query(req, timeout=10)


def _code(call):
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details()


def test_eleventh_call_is_refused_and_over_cap_calls_are_free(sim):
    session = _open(sim, TASK_I)
    cap = session.budget.max_points_per_call
    code, msg = _code(lambda: _query(sim, session, n=cap + 1))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "exceed the cap" in msg
    code, msg = _code(lambda: _query(sim, session, n=3, samples=4))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "n_samples" in msg
    assert sim.GetSession(pb.GetSessionRequest(session_id=session.session_id),
                          timeout=5).budget.calls_used == 0
    for i in range(10):
        resp = _query(sim, session, n=3, rid=f"r{i}")
        assert resp.budget.calls_used == i + 1
    code, msg = _code(lambda: _query(sim, session, n=3, rid="r10"))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "10" in msg
    # a retried request id is replayed, not charged and not refused
    again = _query(sim, session, n=3, rid="r4")
    assert again.replayed and again.budget.calls_used == 10


def test_observations_continue_the_trial_budget_and_are_clipped(sim):
    trial = uuid.uuid4().hex
    a = _open(sim, TASK_I, trial_id=trial)
    ra = _query(sim, a, n=4, rid="x")
    b = _open(sim, TASK_I, trial_id=trial)  # a retried attempt: the same budget
    assert b.budget.calls_used == 1
    assert _query(sim, b, n=4, rid="x").replayed  # request ids are unique per budget
    rb = _query(sim, b, n=4, rid="y")
    assert rb.budget.calls_used == 2
    # the next call of the budget draws new noise; another trial draws its own
    rc = _query(sim, _open(sim, TASK_I), n=4, rid="x")
    ya, yb, yc = (list(r.observations.columns[0].values) for r in (ra, rb, rc))
    assert ya != yb and ya != yc and yb != yc
    bought = sim.GetObservations(pb.GetObservationsRequest(session_id=a.session_id), timeout=10)
    assert list(bought.call_index) == [0] * 4 + [1] * 4
    assert list(bought.observations.columns[0].values) == ya + yb
    req = pb.QueryRequest(session_id=a.session_id, request_id="clip", n_samples=2)
    req.inputs["temperature"].values.extend([-500.0, 100.0])
    resp = sim.Query(req, timeout=10)
    assert list(resp.clipped) == [True, True, False, False]
    assert list(resp.point_index) == [0, 0, 1, 1]
    temps = list(resp.observations.columns[1].values)
    assert temps[0] == temps[1] == pytest.approx(0.0)


@pytest.mark.parametrize("mutate, code, field", [
    (lambda r: r.inputs["bogus"].values.extend([1.0]), grpc.StatusCode.INVALID_ARGUMENT, "bogus"),
    (lambda r: r.inputs["temperature"].values.extend([float("nan")]),
     grpc.StatusCode.INVALID_ARGUMENT, "temperature"),
    (lambda r: r.group_ids.extend(["run1"]), grpc.StatusCode.INVALID_ARGUMENT, "group_ids"),
])
def test_malformed_queries_name_the_field(sim, mutate, code, field):
    session = _open(sim, TASK_I)
    req = pb.QueryRequest(session_id=session.session_id, n_samples=1)
    req.inputs["temperature"].values.extend([50.0])
    mutate(req)
    got, msg = _code(lambda: sim.Query(req, timeout=5))
    assert got == code and field in msg
    assert _query(sim, session, n=2).budget.calls_used == 1  # still serving, nothing charged


def test_other_malformed_requests(sim):
    code, msg = _code(lambda: _open(sim, "no_such_task"))
    assert code == grpc.StatusCode.NOT_FOUND and "no_such_task" in msg
    code, msg = _code(lambda: sim.GetTask(pb.GetTaskRequest(task_id=""), timeout=5))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "task_id" in msg
    s2 = _open(sim, TASK_II)
    req = pb.QueryRequest(session_id=s2.session_id, n_samples=1)
    req.inputs["conc"].values.extend([1.0, 2.0])
    req.group_ids.extend(["run1", "no_such_run"])
    code, msg = _code(lambda: sim.Query(req, timeout=5))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "group_ids[1]" in msg
    req = pb.QueryRequest(session_id=s2.session_id, n_samples=1)
    req.inputs["conc"].values.extend([1.0, 2.0])
    req.group_ids.extend(["run1"])
    code, msg = _code(lambda: sim.Query(req, timeout=5))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "group_ids" in msg
    real = _open(sim, TASK_I, common_pb2.SETTING_REAL)
    code, _ = _code(lambda: _query(sim, real, n=2))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    code, _ = _code(lambda: sim.GetTrainingData(
        pb.GetTrainingDataRequest(session_id=s2.session_id), timeout=5))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    code, _ = _code(lambda: sim.GetSession(pb.GetSessionRequest(session_id="nope"), timeout=5))
    assert code == grpc.StatusCode.NOT_FOUND
    assert len(sim.ListTasks(pb.ListTasksRequest(), timeout=5).tasks) >= 4  # still serving


def _numbers(blob: bytes) -> set[str]:
    return set(re.findall(rb"[-+]?\d+\.\d+(?:[eE][-+]?\d+)?", blob))


def test_no_response_leaks_answer_keys(sim, library):
    """Drive full sessions and scan every response for hidden material: as text, and
    every number each response carries (decoded field by field, not as raw bytes,
    where round numbers such as 8.0 match unrelated bytes by chance)."""

    # a held-out target may coincide with a value solvers legitimately see: any
    # task's public training data or metadata (ListTasks returns every task)
    public: set[float] = set()
    for other in library:
        om = other.meta
        public |= set(other.train[[om.target.name, *om.input_names]].to_numpy(float).ravel())
        public |= {om.target.min, om.target.max}
        public |= {v for var in om.inputs for v in (var.min, var.max)}
        # Real sessions show the held-out *input* ranges
        public |= {v for var in other.heldout_input_ranges() for v in (var.min, var.max)}
    listing = sim.ListTasks(pb.ListTasksRequest(), timeout=5)
    for task in library:
        responses = [listing]
        meta = task.meta
        responses.append(sim.GetTask(pb.GetTaskRequest(task_id=task.task_id), timeout=5))
        real = _open(sim, task.task_id, common_pb2.SETTING_REAL)
        train = sim.GetTrainingData(pb.GetTrainingDataRequest(session_id=real.session_id),
                                    timeout=5)
        responses.append(train)
        secrets: list[float] = []
        expressions = [r.expr for r in task.references()]
        if task.has_world():
            par = _open(sim, task.task_id)
            responses.append(par)
            rng = np.random.default_rng(0)
            observed: list[float] = []
            for call in range(10):
                req = pb.QueryRequest(session_id=par.session_id, request_id=f"c{call}",
                                      n_samples=3)
                n = par.budget.max_points_per_call
                for v in meta.inputs:
                    req.inputs[v.name].values.extend(rng.uniform(v.min, v.max, n).tolist())
                if meta.multi_group:
                    req.group_ids.extend(rng.choice(task.group_ids, n).tolist())
                resp = sim.Query(req, timeout=10)
                responses.append(resp)
                observed.extend(resp.observations.columns[0].values)
            assert len(observed) == 10 * 3 * par.budget.max_points_per_call
            law = task.hidden_law()
            expressions += [law.expr, law.base_expr, *(p["description"] for p in law.pieces)]
            # a constant held at a bound of its range is no secret: the catalogue's
            # ranges are public (docs/worlds.md)
            at_bounds = {float(x) for p in law.pieces for lohi in p.get("bounds", {}).values()
                         for x in lohi}
            secrets += [v for v in (*law.constants.values(),
                                    *(v for table in law.local.values() for v in table.values()))
                        if v not in at_bounds]
        else:  # no world: Parallel sessions are refused, not improvised
            code, _ = _code(lambda: _open(sim, task.task_id))
            assert code == grpc.StatusCode.FAILED_PRECONDITION
        blob = b"\n".join(m.SerializeToString() for m in responses)
        text = blob.decode("latin-1")
        numbers = _doubles(responses)
        for expr in expressions:
            assert expr not in text, f"{task.task_id}: an answer-key expression leaked"
        # fitted constants never appear: as a float64 field, or written out (6 significant
        # digits) in a string field. A constant whose written form is short (112.0003 ->
        # "112") is checked as a number only: three digits match counts, ids and units.
        words = _strings(responses)
        for value in secrets:
            assert value not in numbers, f"constant {value} leaked for {task.task_id}"
            written = f"{value:.6g}"
            if len(re.sub(r"[^0-9]", "", written.split("e")[0]).lstrip("0")) >= 4:
                pattern = re.compile(rf"(?<![\d.]){re.escape(written)}(?!\d)")
                hit = next((w for w in words if pattern.search(w)), None)
                assert hit is None, f"constant {value} written in {hit!r} for {task.task_id}"
        if task.has_world():
            # (a pool value equal to a public one, e.g. a residual of exactly 8.0, is chance)
            pool = {float(v) for v in task.world_arrays()["residuals"] if v != 0} - public
            assert not pool & numbers, f"{task.task_id}: residual-pool values {sorted(pool & numbers)[:5]}"
        frames = list(task.heldout().values())
        if task.heldout_ood() is not None:
            frames.append(task.heldout_ood())
        held = np.concatenate([f[meta.target.name].to_numpy(float) for f in frames])
        leaked = {float(v) for v in held} & numbers - public
        assert not leaked, f"{task.task_id}: held-out targets {sorted(leaked)[:5]} in responses"


def _leaves(messages: list) -> list:
    """Every scalar value the response messages carry (map keys included), walked
    field by field rather than read from the raw bytes."""
    out: list = []

    def walk(msg) -> None:
        for field, value in msg.ListFields():
            repeated = field.is_repeated if hasattr(field, "is_repeated") \
                else field.label == field.LABEL_REPEATED
            if field.type == field.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
                out.extend(value.keys())
                items = list(value.values())
            else:
                items = list(value) if repeated else [value]
            for item in items:
                if hasattr(item, "ListFields"):
                    walk(item)
                else:
                    out.append(item)

    for msg in messages:
        walk(msg)
    return out


def _strings(messages: list) -> list[str]:
    """Every string value carried by the response messages (map keys included)."""
    return [v for v in _leaves(messages) if isinstance(v, str)]


def _doubles(messages: list) -> set[float]:
    """Every float/double value carried by the response messages."""
    return {float(v) for v in _leaves(messages) if isinstance(v, float)}


def test_columns_of_different_lengths_name_the_column(sim):
    s = _open(sim, "theophylline_pk")
    req = pb.QueryRequest(session_id=s.session_id, n_samples=1)
    req.inputs["time"].values.extend([1.0, 2.0, 3.0])
    req.inputs["dose"].values.extend([4.0, 4.0])
    req.group_ids.extend(["subject01"] * 3)
    code, msg = _code(lambda: sim.Query(req, timeout=5))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "dose" in msg and "3" in msg
    assert sim.GetSession(pb.GetSessionRequest(session_id=s.session_id),
                          timeout=5).budget.calls_used == 0
