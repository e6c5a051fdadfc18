"""Opening a trial: the task, its solver-facing view, the simulator session (a
retried attempt continues the trial's budget), the data the solver starts with,
the sandbox session and the first two messages."""

from __future__ import annotations

from dataclasses import dataclass, field

from lawlab.common.v1 import common_pb2
from lawlab.judge.v1 import judge_pb2_grpc
from lawlab.rpc import convert
from lawlab.rpc.client import FAST_CALL
from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2_grpc
from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc
from lawlab.tasks.library import SolverTask, Variable
from lawlab.vocab import Setting
from lawlab_agent import prompts
from lawlab_agent.contexts import View, make_view
from lawlab_agent.policy import Policy, TrialContext
from lawlab_agent.store import TrialRecord


@dataclass
class Clients:
    simulator: simulator_pb2_grpc.SimulatorServiceStub
    sandbox: sandbox_pb2_grpc.SandboxServiceStub
    scorer: scorer_pb2_grpc.ScorerServiceStub
    judge: judge_pb2_grpc.JudgeServiceStub


@dataclass
class OpenTrial:
    """An attempt's open sessions and what the loop needs from its start."""

    task: SolverTask  # as the simulator serves it
    view: View  # the task as the solver sees it (context ablations rename columns)
    parallel: bool
    session_id: str
    box_id: str
    calls_used: int  # experiment calls already made by earlier attempts
    turn: int  # turns already spent by earlier attempts
    turns_max: int
    ctx: TrialContext
    resumed: bool = False  # the trial continues an earlier attempt
    heldout: list[Variable] = field(default_factory=list)


def solver_table(view: View, table: common_pb2.Table) -> common_pb2.Table:
    """A table in the task's column names, in the solver's (context ablations)."""
    if not view.to_task:
        return table
    out = common_pb2.Table()
    out.CopyFrom(table)
    names = view.to_solver
    for col in out.columns:
        col.name = names.get(col.name, col.name)
    return out


async def _starting_data(clients: Clients, view: View, session: simulator_pb2.Session,
                         parallel: bool) -> tuple[common_pb2.Table, list[Variable], str]:
    """(the solver's first table, held-out input ranges, a note when the trial resumes)."""
    if not parallel:
        train = await clients.simulator.GetTrainingData(
            simulator_pb2.GetTrainingDataRequest(session_id=session.session_id), timeout=FAST_CALL)
        heldout = [convert.variable_from_proto(v).renamed(view.to_solver.get(v.name, v.name))
                   for v in train.heldout_input_ranges]
        return solver_table(view, train.train), heldout, ""
    if not session.budget.calls_used:
        return common_pb2.Table(), [], ""
    bought = await clients.simulator.GetObservations(simulator_pb2.GetObservationsRequest(
        session_id=session.session_id), timeout=FAST_CALL)
    return solver_table(view, bought.observations), [], (
        f"This trial resumes after an infrastructure failure: {session.budget.calls_used} of "
        f"your {session.budget.calls_max} experiment calls were already made, and their "
        f"{len(bought.point_index)} observations are in train_df.")


async def open_trial(record: TrialRecord, policy: Policy, clients: Clients,
                     max_turns: int | None) -> OpenTrial:
    parallel = record.setting == Setting.PARALLEL
    task = convert.solver_task_from_proto((await clients.simulator.GetTask(
        simulator_pb2.GetTaskRequest(task_id=record.task_id), timeout=FAST_CALL)).task)
    view = make_view(task, record.context)
    seen = view.task
    # the trial's budget: a retried attempt continues it (calls used, data bought)
    session = await clients.simulator.OpenSession(simulator_pb2.OpenSessionRequest(
        task_id=task.task_id,
        setting=common_pb2.SETTING_PARALLEL if parallel else common_pb2.SETTING_REAL,
        trial_id=record.trial_id), timeout=FAST_CALL)
    record.world_fingerprint = session.world_fingerprint
    data, heldout, resumed = await _starting_data(clients, view, session, parallel)
    box = await clients.sandbox.CreateSession(sandbox_pb2.CreateSessionRequest(
        data=data, target_col=seen.target.name, input_cols=[v.name for v in seen.inputs],
        multi_group=task.multi_group,
        extra_imports=list(policy.extra_imports)), timeout=FAST_CALL)
    turns_max = max_turns or task.caps.max_turns
    turn = min(record.turns, turns_max - 1)  # turns spent by earlier attempts stay spent
    if turn:
        resumed += (f" {turn} of your {turns_max} turns were used by the interrupted attempt; "
                    f"{turns_max - turn} remain.")
    user = prompts.user_prompt(seen, parallel, heldout)
    ctx = TrialContext(task=seen, parallel=parallel, seed=record.seed, heldout=tuple(heldout),
                       messages=[
                           {"role": "system", "content": prompts.system_prompt(seen, parallel)},
                           {"role": "user",
                            "content": user + ("\n\n" + resumed.strip() if resumed else "")}])
    return OpenTrial(task=task, view=view, parallel=parallel, session_id=session.session_id,
                     box_id=box.session_id, calls_used=session.budget.calls_used, turn=turn,
                     turns_max=turns_max, ctx=ctx, resumed=bool(resumed),
                     heldout=heldout)


async def close_trial(clients: Clients, trial: OpenTrial) -> None:
    await clients.sandbox.CloseSession(sandbox_pb2.CloseSessionRequest(
        session_id=trial.box_id), timeout=FAST_CALL)
    await clients.simulator.CloseSession(simulator_pb2.CloseSessionRequest(
        session_id=trial.session_id), timeout=FAST_CALL)
