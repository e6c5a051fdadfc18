"""JudgeService: validity rubric (S_V) and structure (S_S) verdicts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import grpc
from prometheus_client import Counter, Histogram

from lawlab import isolate
from lawlab.common.v1 import common_pb2
from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
from lawlab.judging import antihack, jumps, structure, validity
from lawlab.judging.submission_runs import Job, RunResult, run_jobs
from lawlab.rpc.convert import enum_value, from_enum
from lawlab.rpc.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab.tasks.library import Task, TaskLibrary
from lawlab.vocab import JudgeBackend
from lawlab_judge import llm_judge

T = TypeVar("T")
VERDICTS = Counter("lawlab_judge_verdicts_total", "Verdicts given, by kind and status.",
                   ["kind", "status"])
S_V = Histogram("lawlab_judge_s_v", "S_V of judged submissions.",
                buckets=(0, 0.25, 0.5, 0.75, 1.0))
S_S = Histogram("lawlab_judge_s_s", "S_S of judged submissions.",
                buckets=(0, 0.25, 0.5, 0.75, 1.0))
OK, MALFORMED = common_pb2.RUN_STATUS_OK, common_pb2.RUN_STATUS_LLM_MALFORMED
LLM, DETERMINISTIC = judge_pb2.JUDGE_BACKEND_LLM, judge_pb2.JUDGE_BACKEND_DETERMINISTIC


class JudgeServicer(judge_pb2_grpc.JudgeServiceServicer):
    def __init__(self, library: TaskLibrary, sandbox: sandbox_pb2_grpc.SandboxServiceStub,
                 llm: llm_judge.LLMConfig | None = None) -> None:
        self.library = library
        self.sandbox = sandbox
        self.llm = llm

    def _backend(self, request: judge_pb2.JudgeRequest) -> JudgeBackend:
        # the zero value is the default, the deterministic judge
        backend = from_enum(JudgeBackend, judge_pb2.JudgeBackend, request.backend,
                            "backend") or JudgeBackend.DETERMINISTIC
        if backend == JudgeBackend.LLM and self.llm is None:
            raise FailedPrecondition("this judge has no LLM backend: set LAWLAB_JUDGE_LLM_BASE_URL "
                                     "and LAWLAB_JUDGE_LLM_MODEL in its environment")
        return backend

    async def _ask(self, prompt: str, parse: Callable[[str], T]) -> tuple[T | None, list[str]]:
        if self.llm is None:  # _backend refuses "llm" without one first
            raise FailedPrecondition("this judge has no LLM backend")
        try:
            return await llm_judge.ask_json(self.llm, prompt, parse)
        except llm_judge.LLMJudgeUnavailable as err:
            raise Unavailable(str(err)) from None

    async def _llm_validity(self, task: Task, source: str,
                            gate: antihack.GateVerdict) -> judge_pb2.ValidityVerdict:
        prompt, item_ids = llm_judge.validity_prompt(task, source)
        parsed, raws = await self._ask(prompt, lambda text: llm_judge.parse_validity(text, item_ids))
        if parsed is None:
            VERDICTS.labels("validity", "llm_malformed").inc()
            return judge_pb2.ValidityVerdict(
                anti_hacking_passed=gate.passed, anti_hacking_reason=gate.reason,
                status=MALFORMED, backend=LLM,
                message="the judge model's replies were not valid verdicts (twice): "
                        + " | ".join(r[:300] for r in raws))
        # the one S_V rule (lawlab.judging.validity.s_v), weights included; the gate is never the
        # model's call
        verdict = validity.assess_replies(task, parsed, gate)
        VERDICTS.labels("validity", "ok").inc()
        S_V.observe(verdict.s_v)
        return _validity_message(verdict, LLM)

    async def _llm_structure(self, task: Task, source: str) -> judge_pb2.StructureVerdict:
        prompt = llm_judge.structure_prompt(task, source)
        parsed, raws = await self._ask(prompt, llm_judge.parse_structure)
        if parsed is None:
            VERDICTS.labels("structure", "llm_malformed").inc()
            return judge_pb2.StructureVerdict(
                status=MALFORMED, backend=LLM, confidence=judge_pb2.CONFIDENCE_LOW,
                explanation="the judge model's replies were not valid verdicts (twice): "
                            + " | ".join(r[:300] for r in raws))
        VERDICTS.labels("structure", "ok").inc()
        S_S.observe(parsed["level"])
        return judge_pb2.StructureVerdict(
            s_s=parsed["level"], matched=parsed["matched"], missed=parsed["missed"],
            confidence=judge_pb2.CONFIDENCE_LLM, explanation=parsed["explanation"], status=OK,
            backend=LLM)

    def _request(self, request: judge_pb2.JudgeRequest) -> tuple[Task, str]:
        if not request.task_id:
            raise InvalidArgument("task_id", "is required")
        if request.task_id not in self.library:
            raise NotFound(f"task {request.task_id!r} not found")
        if not request.submission.source.strip():
            raise InvalidArgument("submission.source", "is empty")
        return self.library.get(request.task_id), request.submission.source

    async def JudgeValidity(self, request: judge_pb2.JudgeRequest,
                            context: grpc.aio.ServicerContext) -> judge_pb2.ValidityVerdict:
        task, source = self._request(request)
        backend = self._backend(request)
        def run(jobs: Sequence[Job]) -> Awaitable[RunResult]:
            return run_jobs(self.sandbox, task.meta, source, jobs)

        if backend == JudgeBackend.LLM:
            gate = validity.gate(task, source)
            if gate.passed and task.meta.suite == "real":  # the same dynamic table test
                extra, probes = jumps.jobs(task)
                table = jumps.verdict(task, probes, await run(extra))
                if table:
                    gate = antihack.GateVerdict(False, table, gate.fitted_numbers)
            return await self._llm_validity(task, source, gate)

        verdict = await validity.assess(task, source, run)
        VERDICTS.labels("validity", verdict.status).inc()
        S_V.observe(verdict.s_v)
        return _validity_message(verdict, DETERMINISTIC)

    async def JudgeStructure(self, request: judge_pb2.JudgeRequest,
                             context: grpc.aio.ServicerContext) -> judge_pb2.StructureVerdict:
        task, source = self._request(request)
        if self._backend(request) == "llm":
            if not task.has_world():
                raise FailedPrecondition("the LLM judge compares with a hidden law; this task "
                                         "has none (its symbolic accuracy is deterministic)")
            return await self._llm_structure(task, source)
        if task.meta.suite == "real" and not task.has_world():
            raise NotFound(f"task {task.task_id!r} has no hidden law")
        step = symbolic_step if task.meta.suite != "real" else structure_step
        try:
            # a killable child with time and memory limits: a pathological expression
            # stops there, never in this service's event loop (issue #31)
            outcome = await asyncio.to_thread(isolate.run_limited, step,
                                              (str(task.root), source), STRUCTURE_SECONDS)
        except isolate.LimitExceeded as err:
            VERDICTS.labels("structure", "exec_error").inc()
            S_S.observe(0.0)
            return judge_pb2.StructureVerdict(
                s_s=0.0, backend=DETERMINISTIC, confidence=judge_pb2.CONFIDENCE_LOW,
                status=common_pb2.RUN_STATUS_EXEC_ERROR,
                explanation=f"comparing the structure {err}: the submitted expression is too "
                            "large to compare, so it gets no structural credit")
        VERDICTS.labels("structure", "ok").inc()
        S_S.observe(outcome.level)
        return judge_pb2.StructureVerdict(
            s_s=outcome.level, matched=outcome.matched, missed=outcome.missed,
            backend=DETERMINISTIC,
            confidence=enum_value(judge_pb2.Confidence, outcome.confidence, "confidence"),
            explanation=outcome.explanation, status=OK)


def _validity_message(verdict: validity.Assessment, backend: judge_pb2.JudgeBackend
                      ) -> judge_pb2.ValidityVerdict:
    return judge_pb2.ValidityVerdict(
        s_v=verdict.s_v, backend=backend,
        items=[judge_pb2.RubricVerdict(item_id=v.item_id, description=v.description,
                                       passed=v.passed, evidence=v.evidence)
               for v in verdict.verdicts],
        anti_hacking_passed=verdict.gate.passed, anti_hacking_reason=verdict.gate.reason,
        status=enum_value(common_pb2.RunStatus, verdict.status, "status"),
        message=verdict.message)


STRUCTURE_SECONDS = 60.0  # a structure comparison's CPU-time limit (its child is then killed)


def symbolic_step(root: str, source: str) -> structure.StructureOutcome:
    """Problems with a known ground truth: symbolic accuracy (0 or 1), probed at
    the training records (their inputs need not be independent). Every literal
    constant of either side is a placeholder (LLM-SRBench). Runs in a killable
    child (lawlab.isolate)."""
    task = Task(Path(root))
    truth = next(r for r in task.references() if r.name == "ground_truth")
    form = structure.translate(truth.module, free_literals=True)
    rows = task.train.iloc[:: max(1, len(task.train) // 160)]
    probes = {n: rows[n].to_numpy(float) for n in task.meta.input_names}
    return _plain(structure.symbolic_match(source, form, probes))


def structure_step(root: str, source: str) -> structure.StructureOutcome:
    """The structure judge against the task's hidden law, in a killable child."""
    task = Task(Path(root))
    hidden = structure.hidden_law_of(task.world_spec(), task.meta.input_names)
    return _plain(structure.judge_structure(source, hidden))


def _plain(outcome: structure.StructureOutcome) -> structure.StructureOutcome:
    outcome.against = None  # compiled forms stay in the child
    return outcome
