"""The tool router: the first tool block of a reply goes to one handler per tool
(``python`` to the sandbox, ``experiment`` to the simulator, ``final_formula``
to the submission), under the protocol's rules (docs/protocol.md section 2: a forced
final turn takes only a submission; Parallel submissions need an experiment;
one retry of an unreadable forced submission)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
import numpy as np

from lawlab.law.contract import read_module
from lawlab.rpc import convert
from lawlab.rpc.client import EXECUTE_CALL, FAST_CALL
from lawlab.sandbox.v1 import sandbox_pb2
from lawlab.simulator.v1 import simulator_pb2
from lawlab_agent import prompts
from lawlab_agent.blocks import Block
from lawlab_agent.contexts import View
from lawlab_agent.payloads import PayloadError, parse_experiment
from lawlab_agent.trial.opening import Clients, OpenTrial, solver_table

PREVIEW_ROWS = 10
OUTPUT_CHARS = 16_000
# refusals a model's own request can cause: they cost the turn, not the attempt
MODEL_REFUSALS = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED,
                  grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.OUT_OF_RANGE)


@dataclass
class ToolResult:
    tool: str  # python | experiment | final_formula | invalid | model_error
    text: str  # what the model reads next
    code_seconds: float = 0.0  # the code's own run time inside the box
    seconds: float = 0.0  # the whole tool call


def fmt_exec(resp: sandbox_pb2.ExecuteResponse) -> str:
    status = sandbox_pb2.ExecStatus.Name(resp.status).removeprefix("EXEC_STATUS_").lower()
    text = resp.stdout
    if resp.stderr:
        text += ("\n" if text else "") + resp.stderr
    return f"<python_output status=\"{status}\">\n{text[:OUTPUT_CHARS]}\n</python_output>"


def experiment_request(payload: str, session_id: str, request_id: str,
                       view: View) -> simulator_pb2.QueryRequest:
    """The simulator query for a model's payload; PayloadError if unreadable."""
    exp = parse_experiment(payload, view.task.input_names, view.task.multi_group)
    req = simulator_pb2.QueryRequest(session_id=session_id, request_id=request_id,
                                     n_samples=exp.n_samples or 0)
    if exp.group_ids is not None:
        req.group_ids.extend(exp.group_ids)
    for name, values in exp.inputs.items():
        req.inputs[view.task_name(name)].values.extend(values)
    return req


def unreadable(source: str) -> str:
    """Why a submission cannot be read as a module ('' if it can): a syntax error or
    no predict function. Whether it honours the contract is the scorer's business."""
    try:
        module = read_module(source)
    except SyntaxError as err:
        return f"line {err.lineno}: {err.msg}"
    return "" if module.predict is not None else "it defines no predict function"


def preview(resp: simulator_pb2.QueryResponse, target: str) -> str:
    df = convert.table_to_frame(resp.observations)
    df["clipped"] = list(resp.clipped)
    y = df[target].to_numpy(float)
    return "\n".join([
        f"<experiment_output>\n{len(df)} observations appended to train_df "
        f"(calls used {resp.budget.calls_used}/{resp.budget.calls_max}; "
        f"{int(np.sum(resp.clipped))} clipped to the supported range).",
        df.head(PREVIEW_ROWS).to_string(index=False),
        f"batch {target}: mean {np.mean(y):.6g}, sd {np.std(y):.6g}, min {np.min(y):.6g}, "
        f"max {np.max(y):.6g}\n</experiment_output>",
    ])


class ToolRouter:
    """Runs each turn's first tool block; holds what the tools change: experiments
    that succeeded, and the submission once one is accepted."""

    def __init__(self, clients: Clients, trial: OpenTrial, request_prefix: str) -> None:
        self.clients = clients
        self.trial = trial
        self.request_prefix = request_prefix  # trial:attempt, for idempotent queries
        self.experiments = trial.calls_used if trial.parallel else 0
        self.submission: str | None = None
        self.forced_submission = False
        self.python_timeouts = 0  # <python> calls the sandbox's wall-clock limit stopped
        self._handlers: dict[str, Callable[[str, bool, int], Awaitable[ToolResult]]] = {
            "python": self.python, "experiment": self.experiment,
            "final_formula": self.final_formula}

    async def route(self, block: Block, forced: bool, turn: int) -> ToolResult:
        start = time.perf_counter()
        if block.tool is None:
            result = ToolResult("invalid", f"<error>{block.error}</error>")
        elif forced and block.tool != "final_formula":
            result = ToolResult(block.tool, f"<error>{prompts.FORCED}</error>")
        else:
            result = await self._handlers[block.tool](block.content, forced, turn)
        if block.ignored and result.text:
            result.text += (f"\n<note>only the first tool block ran; {block.ignored} later "
                            f"block{'s' if block.ignored > 1 else ''} ignored</note>")
        result.seconds = time.perf_counter() - start
        return result

    async def python(self, code: str, forced: bool, turn: int) -> ToolResult:
        resp = await self.clients.sandbox.Execute(sandbox_pb2.ExecuteRequest(
            session_id=self.trial.box_id, code=code), timeout=EXECUTE_CALL)
        if resp.status == sandbox_pb2.EXEC_STATUS_TIMEOUT:
            self.python_timeouts += 1
        return ToolResult("python", fmt_exec(resp), code_seconds=resp.wall_seconds)

    def notes(self) -> list[str]:
        """What the trial record says about time bounds that shaped this attempt: a
        call stopped by the sandbox's wall-clock limit did less work than it would on
        a faster or idle machine, so the trial may not re-run the same."""
        if not self.python_timeouts:
            return []
        n = self.python_timeouts
        return [f"{n} <python> call{'s' if n > 1 else ''} stopped at the sandbox's wall-clock "
                "limit, so this trial may not re-run the same on another machine"]

    async def experiment(self, payload: str, forced: bool, turn: int) -> ToolResult:
        if not self.trial.parallel:
            return ToolResult("experiment", "<error>experiments are available in the Parallel "
                                            "setting only</error>")
        view = self.trial.view
        try:
            req = experiment_request(payload, self.trial.session_id,
                                     f"{self.request_prefix}:{turn}", view)
            resp = await self.clients.simulator.Query(req, timeout=FAST_CALL)
        except PayloadError as err:
            return ToolResult("experiment", f"<error>{err} (no experiment call was used)</error>")
        except grpc.aio.AioRpcError as err:
            if err.code() not in MODEL_REFUSALS:
                raise  # the simulator is unreachable or broken: infrastructure
            return ToolResult("experiment", f"<error>experiment refused: {err.details()}</error>")
        self.experiments += 1
        rows = solver_table(view, resp.observations)
        await self.clients.sandbox.AppendRows(sandbox_pb2.AppendRowsRequest(
            session_id=self.trial.box_id, rows=rows), timeout=FAST_CALL)
        resp.observations.CopyFrom(rows)
        return ToolResult("experiment", preview(resp, view.task.target.name))

    async def final_formula(self, source: str, forced: bool, turn: int) -> ToolResult:
        if self.trial.parallel and self.experiments == 0:
            return ToolResult("final_formula", "<error>run at least one successful "
                                               "<experiment> before submitting</error>")
        if not source.strip():
            return ToolResult("final_formula", "<error>the submission is empty</error>")
        problem = unreadable(source)
        if problem:
            # B.2: a reply that does not produce a parseable submission is not final
            return ToolResult("final_formula",
                              f"<error>{prompts.FORCED_RETRY.format(error=problem)}</error>"
                              if forced else f"<error>the submission cannot be read as a "
                              f"Python module: {problem}</error>")
        self.submission, self.forced_submission = source, forced
        return ToolResult("final_formula", "")
