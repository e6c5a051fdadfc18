"""Agent-service benchmarks (issue: agent). Prints a Markdown section for bench/RESULTS.md.

    .venv/bin/python bench/agent_bench.py [--quick]

1. Harness overhead per turn: a 30-turn trial with a scripted instant model
   (real HTTP) whose every turn runs `pass` in the sandbox. Overhead = the
   turn's wall time (between consecutive trajectory events) minus the model's
   time minus the code's time in the box (as the sandbox reports it): block
   parsing, the gRPC round trips, formatting, bookkeeping and the trajectory
   write.
2. Trials per minute with the scripted instant model (3 turns: inspect, then
   submit; scored by scorer and judge), as a campaign at concurrency 1 and 8.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc  # noqa: E402
from lawlab.common.v1 import common_pb2  # noqa: E402
from lawlab_ops.launcher import Cluster  # noqa: E402
from tests.support.scripted_llm import SUBMISSION, ScriptedLLM  # noqa: E402

REAL_TASKS = ["mercury_vapour_pressure", "dnase_elisa", "brain_body_allometry",
              "puromycin_enzyme_kinetics", "newton_cooling", "capacitor_discharge",
              "car_stopping_distance", "forbes_boiling_point"]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def overhead(stub) -> dict:
    trial = stub.RunTrial(agent_pb2.RunTrialRequest(
        task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_REAL, agent="openai",
        model="instant-pass", seed=1), timeout=600)
    events = [json.loads(e) for e in stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(
        trial_id=trial.trial_id)).events]
    per_turn = []
    previous = None
    for e in events:
        if e["type"] == "turn" and previous is not None:
            wall = e["ts"] - previous
            per_turn.append(wall - e["model_seconds"] - e.get("code_seconds", 0.0))
        if e["type"] in ("prompt", "turn"):
            previous = e["ts"]
    return {"turns": len(per_turn), "p50_ms": 1000 * statistics.median(per_turn),
            "p95_ms": 1000 * pct(per_turn, 0.95),
            "model_ms": 1000 * statistics.median(e["model_seconds"] for e in events
                                                 if e["type"] == "turn"),
            "code_ms": 1000 * statistics.median(e.get("code_seconds", 0.0) for e in events
                                                if e["type"] == "turn")}


def throughput(stub, concurrency: int, repeats: int) -> dict:
    name = f"bench-c{concurrency}-{os.getpid()}-{time.time_ns()}"
    spec = agent_pb2.CampaignSpec(
        name=name, agents=[agent_pb2.AgentModel(agent="openai", model="instant")],
        tasks=REAL_TASKS, settings=[common_pb2.SETTING_REAL], repeats=repeats,
        concurrency=concurrency, seed=time.time_ns() % 10**6)
    start = time.perf_counter()
    stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec))
    *_, snap = stub.WatchCampaign(agent_pb2.GetCampaignRequest(campaign_id=name))
    wall = time.perf_counter() - start
    t = snap.totals
    return {"trials": t.total, "ok": t.completed, "failed": t.failed, "wall_s": wall,
            "per_min": 60 * t.total / wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()

    def respond(body):
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if body["model"] == "instant-pass":
            return "<python>pass</python>"
        return ("<python>print(train_df.shape)</python>" if turn == 0
                else "<final_formula>\n" + SUBMISSION + "</final_formula>")

    data = Path(tempfile.mkdtemp(prefix="lawlab-agent-bench-"))
    with ScriptedLLM(respond=respond) as llm:
        cluster = Cluster(ROOT / "var" / "tasks", data, log_dir=data / "logs")
        cluster.start(extra_env={"LAWLAB_LLM_BASE_URL": llm.base_url,
                                 "LAWLAB_LLM_API_KEY": "bench", "LAWLAB_AGENT_WORKERS": "16"})
        try:
            with cluster.channel("agent") as channel:
                stub = agent_pb2_grpc.AgentServiceStub(channel)
                ov = overhead(stub)
                rows = [(c, throughput(stub, c, 1 if args.quick else 2)) for c in (1, 8)]
        finally:
            cluster.stop()
    print(f"### Agent service ({time.strftime('%Y-%m-%d')}, {platform.node() or 'vm'}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()})\n")
    print("Command: `.venv/bin/python bench/agent_bench.py`. Real services on loopback, a "
          "scripted OpenAI-compatible model over real HTTP that answers instantly.\n")
    print("| harness overhead per turn | turns | p50 | p95 | (model p50) | (code in box p50) |")
    print("|---|---|---|---|---|---|")
    print(f"| 30-turn trial, `pass` each turn | {ov['turns']} | {ov['p50_ms']:.1f} ms | "
          f"{ov['p95_ms']:.1f} ms | {ov['model_ms']:.1f} ms | {ov['code_ms']:.1f} ms |\n")
    print("| concurrent trials | trials | completed | failed | wall | trials per minute |")
    print("|---|---|---|---|---|---|")
    for c, r in rows:
        print(f"| {c} | {r['trials']} | {r['ok']} | {r['failed']} | {r['wall_s']:.1f} s | "
              f"{r['per_min']:.1f} |")


if __name__ == "__main__":
    main()
