"""SandboxService: sessions of agent code, and batched submission runs."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pandas as pd
from prometheus_client import Counter, Gauge, Histogram

from lawlab.common.v1 import common_pb2
from lawlab.rpc import convert
from lawlab.rpc.convert import enum_value
from lawlab.rpc.errors import InvalidArgument, NotFound, ResourceExhausted
from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from lawlab.tasks.library import GROUP_COL
from lawlab.vocab import ExecStatus, RunStatus
from lawlab_sandbox import box
from lawlab_sandbox.runner import TOOL_IMPORTS
from lawlab_sandbox.slots import SubmissionSlots

if TYPE_CHECKING:
    from lawlab_sandbox.docker_backend import DockerBackend

log = logging.getLogger("lawlab.sandbox")

BOX_RUNS = Counter("lawlab_sandbox_runs_total", "Boxes run, by mode and outcome.",
                   ["mode", "outcome"])
BOX_SECONDS = Histogram("lawlab_sandbox_run_seconds", "Wall time of one box.", ["mode"],
                        buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 100, 130))
SESSIONS = Gauge("lawlab_sandbox_sessions", "Open sandbox sessions.")

MAX_CODE_BYTES = 1_000_000
# a submission batch of at least SPLIT_JOBS seeded jobs runs in up to SPLIT_BOXES boxes at once
SPLIT_JOBS = 64
SPLIT_BOXES = 4


@dataclass
class Session:
    session_id: str
    directory: Path
    target_col: str
    input_cols: list[str]
    multi_group: bool
    frame: pd.DataFrame
    lock: asyncio.Lock
    uid: int
    zygote: box.Zygote | None = None
    extra_imports: list[str] = field(default_factory=list)

    @property
    def data_file(self) -> Path:
        return self.directory / "train.csv"


def _cap_text(raw: bytes, limit: int = box.MODEL_OUTPUT_CHARS) -> tuple[str, bool]:
    text = raw.decode("utf-8", errors="replace")
    if len(text) > limit:
        return text[:limit] + f"\n... [output truncated at {limit} characters]", True
    return text, False


class LocalBackend:
    """Boxes are bubblewrap jails on this host (box.py)."""

    name = "local"

    def zygote(self, uid: int | None, data_file: Path | None) -> box.Zygote:
        return box.Zygote(uid, data_file)

    async def run_box(self, mode: str, request: bytes, data_file: Path | None = None,
                      timeout: float = box.DEFAULT_TIMEOUT, output_cap: int = box.HARD_OUTPUT_BYTES,
                      uid: int | None = None, idle: bool = False) -> box.BoxResult:
        return await box.run_box(mode, request, data_file, timeout, output_cap, uid, idle)


class SandboxServicer(sandbox_pb2_grpc.SandboxServiceServicer):
    def __init__(self, work_dir: Path | None = None, max_boxes: int = 8,
                 mode: str = "zygote", backend: LocalBackend | DockerBackend | None = None,
                 submission_seconds: float = box.DEFAULT_TIMEOUT) -> None:
        if mode not in ("zygote", "cold"):
            raise ValueError(f"sandbox mode must be zygote or cold, not {mode!r}")
        self.mode = mode
        self.submission_seconds = min(float(submission_seconds), box.DEFAULT_TIMEOUT)
        self.backend = backend or LocalBackend()
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="lawlab-sandbox-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.sessions: dict[str, Session] = {}
        self._session_uids = list(range(box.SESSION_UID_BASE,
                                        box.SESSION_UID_BASE + box.SESSION_UIDS))
        self.running = asyncio.Semaphore(max_boxes)  # boxes executing at once
        # Root switches every box to its slot's or session's own uid. A service
        # that is not root (a container's non-root user, a restricted pod)
        # cannot: its boxes keep its uid, and sessions stay apart by their
        # namespaces (each box sees only its own data file) and the container's
        # pids limit (docs/sandbox.md).
        self.distinct_uids = os.geteuid() == 0
        # submission runs: a slot per box at once, in zygote mode each with a warm box
        # that serves one submission source (slots.py)
        self.slots = SubmissionSlots(
            [box.SLOT_UID_BASE + k for k in range(max_boxes)],
            (lambda uid: self.backend.zygote(self._box_uid(uid), None))
            if mode == "zygote" else None)

    def _box_uid(self, uid: int) -> int | None:
        return uid if self.distinct_uids else None

    async def close(self) -> None:
        for session in list(self.sessions.values()):
            if session.zygote is not None:
                await session.zygote.stop()
        await self.slots.close()

    async def _submission_box(self, payload: dict, timeout: float) -> box.BoxResult:
        """One submission run in a slot, as that slot's uid (one box per uid at a
        time): a call of the slot's warm box, which serves only this submission's
        source (slots.py), or a cold box in cold mode. Each call is a fresh fork
        that alone reads its request, and scratch is wiped after it."""
        async with self.slots.slot(payload["source"]) as (uid, zygote):
            # a submission box is stopped when it waits instead of computing (box.idle_watch)
            if zygote is None:
                return await self.backend.run_box("submission", json.dumps(payload).encode(),
                                                  None, timeout, box.RESULT_BYTES,
                                                  uid=self._box_uid(uid), idle=True)
            request = json.dumps({**payload, "_mode": "submission"}).encode()
            return await zygote.execute(request, timeout, box.RESULT_BYTES, idle=True)

    def _session(self, session_id: str) -> Session:
        if not session_id:
            raise InvalidArgument("session_id", "is required")
        try:
            return self.sessions[session_id]
        except KeyError:
            raise NotFound(f"sandbox session {session_id!r} not found") from None

    async def CreateSession(self, request: sandbox_pb2.CreateSessionRequest,
                            context: grpc.aio.ServicerContext) -> sandbox_pb2.SandboxSession:
        if not request.target_col:
            raise InvalidArgument("target_col", "is required")
        if not request.input_cols:
            raise InvalidArgument("input_cols", "at least one input column is required")
        extra = list(request.extra_imports)
        unknown = sorted(set(extra) - set(TOOL_IMPORTS))
        if unknown:
            raise InvalidArgument("extra_imports", f"{unknown} are not available; only "
                                  f"{list(TOOL_IMPORTS)} may be added to the import list")
        frame = convert.table_to_frame(request.data, "data")
        expected = [request.target_col, *request.input_cols]
        if len(frame.columns):
            missing = [c for c in expected if c not in frame.columns]
            if missing:
                raise InvalidArgument("data.columns", f"missing columns {missing}")
        else:
            frame = pd.DataFrame({c: pd.Series(dtype=float) for c in expected})
            if request.multi_group:
                frame[GROUP_COL] = pd.Series(dtype=str)
        if not self._session_uids:
            raise ResourceExhausted(f"all {box.SESSION_UIDS} sandbox sessions are in use")
        sid = uuid.uuid4().hex
        directory = self.work_dir / sid
        directory.mkdir()
        directory.chmod(0o711)  # the box uid may open the known file name, not list
        session = Session(sid, directory, request.target_col, list(request.input_cols),
                          request.multi_group, frame, asyncio.Lock(), self._session_uids.pop(),
                          extra_imports=extra)
        session.frame.to_csv(session.data_file, index=False)
        session.data_file.chmod(0o644)
        self.sessions[sid] = session
        SESSIONS.set(len(self.sessions))
        return sandbox_pb2.SandboxSession(session_id=sid, n_rows=len(frame))

    async def AppendRows(self, request: sandbox_pb2.AppendRowsRequest,
                         context: grpc.aio.ServicerContext) -> sandbox_pb2.SandboxSession:
        session = self._session(request.session_id)
        rows = convert.table_to_frame(request.rows, "rows")
        missing = [c for c in session.frame.columns if c not in rows.columns]
        if missing:
            raise InvalidArgument("rows.columns", f"missing columns {missing}")
        async with session.lock:
            session.frame = pd.concat([session.frame, rows[list(session.frame.columns)]],
                                      ignore_index=True)
            session.frame.to_csv(session.data_file, index=False)
        return sandbox_pb2.SandboxSession(session_id=session.session_id, n_rows=len(session.frame))

    async def CloseSession(self, request: sandbox_pb2.CloseSessionRequest,
                           context: grpc.aio.ServicerContext) -> sandbox_pb2.SandboxSession:
        session = self._session(request.session_id)
        self.sessions.pop(session.session_id, None)
        async with session.lock:
            if session.zygote is not None:
                await session.zygote.stop()
        self._session_uids.append(session.uid)
        shutil.rmtree(session.directory, ignore_errors=True)
        SESSIONS.set(len(self.sessions))
        return sandbox_pb2.SandboxSession(session_id=session.session_id, n_rows=len(session.frame))

    async def Execute(self, request: sandbox_pb2.ExecuteRequest,
                      context: grpc.aio.ServicerContext) -> sandbox_pb2.ExecuteResponse:
        session = self._session(request.session_id)
        if len(request.code.encode()) > MAX_CODE_BYTES:
            raise InvalidArgument("code", f"longer than {MAX_CODE_BYTES} bytes")
        if "\x00" in request.code:
            raise InvalidArgument("code", "contains a NUL byte")
        timeout = request.timeout_seconds or box.DEFAULT_TIMEOUT
        if not 0 < timeout <= box.DEFAULT_TIMEOUT:
            raise InvalidArgument("timeout_seconds", f"must be in (0, {box.DEFAULT_TIMEOUT}]")
        payload = json.dumps({"code": request.code, "target_col": session.target_col,
                              "input_cols": session.input_cols,
                              "multi_group": session.multi_group,
                              "extra_imports": session.extra_imports}).encode()
        async with session.lock, self.running:
            if self.mode == "zygote":
                if session.zygote is None:
                    session.zygote = self.backend.zygote(self._box_uid(session.uid), session.data_file)
                result = await session.zygote.execute(payload, timeout)
            else:
                result = await self.backend.run_box("exec", payload, session.data_file, timeout,
                                           uid=self._box_uid(session.uid))
        BOX_RUNS.labels("exec", result.status).inc()
        BOX_SECONDS.labels("exec").observe(result.wall_seconds)
        stdout, t1 = _cap_text(result.stdout)
        stderr, t2 = _cap_text(result.stderr)
        if result.status == ExecStatus.TIMEOUT:
            stderr += f"\nTimeoutError: the call exceeded {timeout:g} s and was stopped"
        elif result.status == ExecStatus.OUTPUT_LIMIT:
            stderr += "\nOutputLimit: the call flooded its output and was stopped"
        elif result.status == ExecStatus.KILLED:
            stderr += f"\nKilled: the process ended with status {result.exit_code} (a resource limit)"
        return sandbox_pb2.ExecuteResponse(
            status=enum_value(sandbox_pb2.ExecStatus, result.status), stdout=stdout,
            stderr=stderr, truncated=t1 or t2,
            wall_seconds=result.wall_seconds, exit_code=result.exit_code)

    async def RunSubmission(self, request: sandbox_pb2.RunSubmissionRequest,
                            context: grpc.aio.ServicerContext) -> sandbox_pb2.RunSubmissionResponse:
        if not request.submission.source.strip():
            raise InvalidArgument("submission.source", "is empty")
        if len(request.submission.source.encode()) > MAX_CODE_BYTES:
            raise InvalidArgument("submission.source", f"longer than {MAX_CODE_BYTES} bytes")
        c = request.contract
        if c.type not in (common_pb2.TASK_TYPE_SINGLE_GROUP, common_pb2.TASK_TYPE_MULTI_GROUP):
            raise InvalidArgument("contract.type", "must be single- or multi-group")
        multi = c.type == common_pb2.TASK_TYPE_MULTI_GROUP
        jobs = []
        for i, job in enumerate(request.jobs):
            x = convert.table_to_frame(job.x, f"jobs[{i}].x")
            entry = {"job_id": job.job_id or str(i), "seed": job.seed,
                     "x": {"columns": {k: x[k].tolist() for k in x.columns if k != GROUP_COL}}}
            if job.law_constants:
                bad = [k for k, v in job.law_constants.items() if not math.isfinite(v)]
                if bad:
                    raise InvalidArgument(f"jobs[{i}].law_constants", f"non-finite {bad}")
                entry["law_constants"] = dict(job.law_constants)
            if multi:
                fx = convert.table_to_frame(job.fit_x, f"jobs[{i}].fit_x")
                if len(fx) != len(job.fit_y):
                    raise InvalidArgument(f"jobs[{i}].fit_y",
                                          f"{len(job.fit_y)} targets for {len(fx)} rows")
                entry["fit_x"] = {"columns": {k: fx[k].tolist() for k in fx.columns if k != GROUP_COL}}
                entry["fit_y"] = list(job.fit_y)
            jobs.append(entry)
        contract = {"type": "II" if multi else "I", "max_law_constants": c.max_law_constants,
                    "max_local_params": c.max_local_params,
                    "fit_timeout_seconds": c.fit_timeout_seconds or 10.0,
                    "max_init_size_per_param": c.max_init_size_per_param or 1}
        timeout = min(request.timeout_seconds or self.submission_seconds, box.DEFAULT_TIMEOUT)
        # A large batch of seeded jobs (each job reseeds the RNGs, so results do not depend
        # on which box runs it) is spread over one box per core; each box is a full box.
        parts = 1
        if len(jobs) >= SPLIT_JOBS and all(j["seed"] for j in jobs):
            parts = max(1, min(SPLIT_BOXES, os.cpu_count() or 1))
        chunks = [jobs[k::parts] for k in range(parts)]

        async def run(chunk: list[dict]) -> box.BoxResult:
            payload = {"source": request.submission.source, "contract": contract, "jobs": chunk}
            async with self.running:
                result = await self._submission_box(payload, timeout)
            BOX_RUNS.labels("submission", result.status).inc()
            BOX_SECONDS.labels("submission").observe(result.wall_seconds)
            return result

        boxes = await asyncio.gather(*(run(chunk) for chunk in chunks))
        wall = max(r.wall_seconds for r in boxes)
        cpu = sum(r.cpu_seconds or 0.0 for r in boxes)
        docs = []
        for result in boxes:
            if result.status != ExecStatus.OK:
                tail = result.stderr.decode(errors="replace")[-2000:].strip()
                idle = ("was idle (waiting, not computing: it used less than "
                        f"{box.IDLE_CPU_FRACTION:.0%} of a core after "
                        f"{box.IDLE_GRACE:g} s) and was stopped: scoring is counted in CPU "
                        "time, and a submission may not hold a slot by waiting")
                why = {"timeout": idle if result.idle else
                       f"ran past its limit of {timeout:g} s of CPU time (all of its "
                                  "jobs together; at most "
                                  f"{box.WALL_FACTOR * timeout:g} s of wall time) and was "
                                  "stopped: a loop that never ends, or fits too slow for "
                                  "the limit",
                       "output_limit": "printed more output than the sandbox keeps and was "
                                       "stopped",
                       "killed": f"was killed by a resource limit (memory, processes or CPU "
                                 f"time; exit status {result.exit_code})"}.get(
                                     result.status, f"ended with status {result.status}")
                return sandbox_pb2.RunSubmissionResponse(
                    status=sandbox_pb2.SUBMISSION_STATUS_EXEC_ERROR,
                    message=f"submission run {result.status}: the submission {why}"
                            + (f"; its last output: {tail}" if tail else ""),
                    wall_seconds=wall, cpu_seconds=cpu)
            docs.append(json.loads(result.stdout))
        doc = next((d for d in docs if d["status"] != ExecStatus.OK), docs[0])
        order = {j["job_id"]: i for i, j in enumerate(jobs)}
        merged = sorted((r for d in docs for r in d["results"]),
                        key=lambda r: order.get(r["job_id"], len(order)))
        return sandbox_pb2.RunSubmissionResponse(
            # the runner's word (an unknown one is the runner's bug: INTERNAL)
            status=enum_value(sandbox_pb2.SubmissionStatus, RunStatus(doc["status"])),
            message=doc["message"],
            used_inputs=doc["used_inputs"],
            results=[sandbox_pb2.JobResult(job_id=r["job_id"], ok=r["ok"], error=r["error"],
                                           predictions=r["predictions"],
                                           local_params=r["local_params"])
                     for r in merged],
            wall_seconds=wall, cpu_seconds=cpu)
