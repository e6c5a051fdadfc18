"""Client-side helpers for running a submission through the sandbox service.

Scorer and judge never execute a submission themselves: they build jobs here
and send them to SandboxService.RunSubmission in one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lawlab.common.v1 import common_pb2
from lawlab.rpc import convert
from lawlab.rpc.client import SCORING_CALL
from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from lawlab.tasks.library import TaskMeta
from lawlab.vocab import RunStatus, coerce


@dataclass
class Job:
    job_id: str
    x: pd.DataFrame
    fit_x: pd.DataFrame | None = None
    fit_y: np.ndarray | None = None
    seed: int = 0
    law_constants: dict[str, float] | None = None  # run with these LAW_CONSTANTS values


@dataclass
class RunResult:
    status: RunStatus
    message: str
    predictions: dict[str, np.ndarray | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    local_params: dict[str, dict[str, float]] = field(default_factory=dict)
    cpu_seconds: float = 0.0  # the sandbox's CPU time for the run (0: not counted)

    def __post_init__(self) -> None:
        coerce(self)


def contract_for(meta: TaskMeta, max_law_constants: int | None = None) -> sandbox_pb2.Contract:
    """``max_law_constants``: another cap, for a module the scorer rewrote
    (lawlab.law.literals: every number of the submission is a LAW_CONSTANT there)."""
    return sandbox_pb2.Contract(
        type=(common_pb2.TASK_TYPE_MULTI_GROUP if meta.multi_group
              else common_pb2.TASK_TYPE_SINGLE_GROUP),
        max_law_constants=(meta.caps.max_law_constants if max_law_constants is None
                           else max_law_constants),
        max_local_params=meta.caps.max_local_params,
        fit_timeout_seconds=meta.caps.fit_timeout_seconds,
        max_init_size_per_param=(meta.caps.max_init_size_per_param
                                 if meta.caps.max_init_size_per_param != 1 else 0),
    )


async def run_jobs(stub: sandbox_pb2_grpc.SandboxServiceStub, meta: TaskMeta, source: str,
                   jobs: Sequence[Job], timeout_seconds: float = 0.0,
                   max_law_constants: int | None = None) -> RunResult:
    """``timeout_seconds``: the run's limit (0: the sandbox's limit for submissions);
    ``max_law_constants``: contract_for's."""
    inputs = meta.input_names
    request = sandbox_pb2.RunSubmissionRequest(
        submission=common_pb2.Submission(source=source), contract=contract_for(meta, max_law_constants),
        timeout_seconds=timeout_seconds)
    for job in jobs:
        pb = sandbox_pb2.SubmissionJob(job_id=job.job_id, x=convert.frame_to_table(job.x, inputs),
                                       seed=job.seed, law_constants=job.law_constants or {})
        if job.fit_x is not None and job.fit_y is not None:
            pb.fit_x.CopyFrom(convert.frame_to_table(job.fit_x, inputs))
            pb.fit_y.extend(np.asarray(job.fit_y, dtype=float).tolist())
        request.jobs.append(pb)
    response = await stub.RunSubmission(request, timeout=SCORING_CALL)
    result = RunResult(convert.from_enum(RunStatus, sandbox_pb2.SubmissionStatus, response.status,
                                         "status") or RunStatus.EXEC_ERROR, response.message,
                       cpu_seconds=response.cpu_seconds)
    for r in response.results:
        result.predictions[r.job_id] = np.asarray(r.predictions, dtype=float) if r.ok else None
        if not r.ok:
            result.errors[r.job_id] = r.error
        result.local_params[r.job_id] = dict(r.local_params)
    return result
