"""A trial worker: leases trial attempts of one campaign from the agent
service, runs each against the simulator, sandbox, scorer and judge, and
reports it. Exits 0 when the campaign has nothing left for it, 3 on a
configuration problem of its own (Kubernetes does not retry those).

    python -m lawlab_agent.worker --campaign ID --agent-addr HOST:PORT [--worker-id NAME]

Service addresses come from LAWLAB_<SERVICE>_ADDR, the internal token from
LAWLAB_INTERNAL_TOKEN, the LLM endpoint from LAWLAB_LLM_* (as for the agent
service).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import socket
import sys
from collections.abc import Callable
from typing import Any

from lawlab import config, tempdirs
from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import FAST_CALL, aio_channel
from lawlab.rpc.convert import from_enum
from lawlab.rpc.log import setup as setup_logging
from lawlab.rpc.settings import Settings, SettingsError
from lawlab.vocab import Cause, Setting
from lawlab_agent import attempt
from lawlab_agent.builtin import builtin_agents
from lawlab_agent.campaigns import grid as camp
from lawlab_agent.server import make_clients
from lawlab_agent.store import Trajectory, TrialRecord
from lawlab_agent.wire import cause_pb, decoding_doc, record_to_proto

log = logging.getLogger("lawlab.agent.worker")
CONFIG_EXIT = 3
SCRATCH_PREFIX = "lawlab-worker-"  # trajectories being written (lawlab.tempdirs)


async def heartbeat(agent: agent_pb2_grpc.AgentServiceStub, args: argparse.Namespace,
                    trial_id: str, attempt_no: int, lease_seconds: float) -> None:
    """Renews the lease every third of its length while the attempt runs."""
    while True:
        await asyncio.sleep(max(lease_seconds / 3, 0.2))
        try:
            reply = await agent.LeaseTrial(agent_pb2.LeaseTrialRequest(
                campaign_id=args.campaign, worker_id=args.worker_id, renew_trial_id=trial_id,
                renew_attempt=attempt_no), timeout=FAST_CALL)
        except Exception as err:  # noqa: BLE001  (the next beat tries again)
            log.warning("heartbeat failed", extra={"error": str(err)[:200]})
            continue
        if not reply.renewed:
            log.warning("lease lost; the result will be refused", extra={"trial_id": trial_id})
            return


def turn_reporter(agent: agent_pb2_grpc.AgentServiceStub, args: argparse.Namespace,
                  trial_id: str, attempt_no: int) -> Callable[[int], None]:
    """After each turn, a renewal that carries the turns taken (the pages show them
    live); sent in the background, a failed one only logged."""
    pending: set[asyncio.Task[Any]] = set()

    async def send(turns: int) -> None:
        try:
            await agent.LeaseTrial(agent_pb2.LeaseTrialRequest(
                campaign_id=args.campaign, worker_id=args.worker_id, renew_trial_id=trial_id,
                renew_attempt=attempt_no, renew_turns=turns), timeout=FAST_CALL)
        except Exception as err:  # noqa: BLE001  (a live count is not worth a trial)
            log.warning("turn report failed", extra={"error": str(err)[:200]})

    def report(turns: int) -> None:
        task = asyncio.get_running_loop().create_task(send(turns))
        pending.add(task)
        task.add_done_callback(pending.discard)

    return report


async def work(args: argparse.Namespace, settings: Settings) -> int:
    policies = builtin_agents(settings.agent.llm)
    channels, clients = make_clients(settings.agent.simulator_ca or None)
    scratch = tempdirs.owned(SCRATCH_PREFIX)
    tempdirs.reap(SCRATCH_PREFIX)  # a worker killed mid-trial: its trial is leased again
    done = 0
    try:
        async with aio_channel(args.agent_addr) as channel:
            agent = agent_pb2_grpc.AgentServiceStub(channel)
            while True:
                lease = await agent.LeaseTrial(agent_pb2.LeaseTrialRequest(
                    campaign_id=args.campaign, worker_id=args.worker_id), timeout=FAST_CALL)
                if lease.done:
                    log.info("nothing left; exiting", extra={"trials": done})
                    return 0
                if not lease.HasField("cell"):
                    await asyncio.sleep(lease.retry_after_seconds or 1.0)
                    continue
                c = lease.cell
                record = TrialRecord(c.trial_id, c.task_id,
                                     Setting(from_enum(Setting, common_pb2.Setting, c.setting,
                                                       "cell.setting")), c.agent, c.model, c.seed,
                                     context=c.context or "full", attempts=lease.attempt,
                                     turns=lease.turns_used,
                                     decoding=camp.decoding_json(decoding_doc(
                                         c.decoding, "cell.decoding", None)))
                path = scratch / f"{c.trial_id}.attempt{lease.attempt}.jsonl"
                trajectory = Trajectory(path, {
                    "trial_id": c.trial_id, "task_id": c.task_id, "setting": record.setting,
                    "agent": c.agent, "model": c.model, "seed": c.seed, "context": record.context,
                    "attempt": lease.attempt, "worker": args.worker_id},
                    on_turn=turn_reporter(agent, args, c.trial_id, lease.attempt))
                beat = asyncio.create_task(heartbeat(agent, args, c.trial_id, lease.attempt,
                                                     lease.lease_seconds))
                try:
                    record, cause, error = await attempt.execute(record, policies, clients,
                                                                 trajectory)
                finally:
                    beat.cancel()
                    trajectory.close()
                reply = await agent.CompleteTrial(agent_pb2.CompleteTrialRequest(
                    worker_id=args.worker_id, trial_id=c.trial_id, attempt=lease.attempt,
                    result=record_to_proto(record), cause=cause_pb(cause), error=error,
                    trajectory=path.read_text(encoding="utf-8").splitlines()), timeout=FAST_CALL)
                path.unlink(missing_ok=True)
                done += 1
                if not reply.accepted:
                    log.warning("result refused: the lease had expired",
                                extra={"trial_id": c.trial_id})
                if cause == Cause.CONFIG:
                    return CONFIG_EXIT
    finally:
        for ch in channels.values():
            await ch.close()
        shutil.rmtree(scratch, ignore_errors=True)  # a trajectory is sent, then unlinked


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lawlab_agent.worker", description=__doc__)
    ap.add_argument("--campaign", required=True)
    ap.add_argument("--agent-addr", default=config.service_address("agent"))
    ap.add_argument("--worker-id", default=f"{socket.gethostname()}-{os.getpid()}")
    args = ap.parse_args(argv)
    setup_logging("agent-worker")
    try:
        settings = Settings.from_env()
    except SettingsError as err:
        print(f"lawlab_agent.worker: {err}", file=sys.stderr)
        return CONFIG_EXIT
    return asyncio.run(work(args, settings))


if __name__ == "__main__":
    sys.exit(main())
