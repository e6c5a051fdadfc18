"""The built-in agents on the rebuilt LLM-SRBench suites, with seeds and intervals: a
larger sample than `make baselines` runs (its LLM-SRBench section uses this module's
sample and table), written to var/baselines-lsr/baselines-lsr.md.

A seeded sample of N problems per suite (LSR-Transform, LSR-Synth: the whole
suites take hours for `sr`, whose genetic programming spends 2.5 million
evaluations on each problem its library does not solve), every agent on every
sampled problem once per seed, through real services (one campaign per seed,
Real setting: these problems have no Parallel world). Per agent and suite: the
mean over seeds, the range of the per-seed means (zero for a deterministic
agent) and a 95% bootstrap interval over problems of the seed-averaged score.

    .venv/bin/python bench/baselines_lsr.py [--sample 10] [--seeds 1 2 3]
        [--agents template sr data-blind] [--tasks-dir var/tasks]
        [--data-dir var/baselines-lsr] [--out var/baselines-lsr/baselines-lsr.md]
        [--tabulate-only]

``--tabulate-only`` re-reads a finished run from its data dir (nothing re-runs);
the wall time reported is the run's own, kept in the data dir.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.tasks.library import TaskLibrary
from lawlab_ops.cli.campaign import render, watch
from lawlab_ops.launcher import Cluster

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("lsr-transform", "lsr-synth")
# LLM-SRBench's published symbolic accuracy (Shojaee et al. 2025, as issue #54 quotes
# it): the best system's, and PySR's (the method sr stands in for) where it is stated
PUBLISHED = {
    "lsr-transform": {"best system": (0.315, "31.5%, the paper's best symbolic accuracy"),
                      "PySR": None},
    "lsr-synth": {"best system": (0.281, "28.1%"),
                  "PySR": ((0.0, 0.045), "0% on chemistry, biology and materials science, "
                                         "4.5% on physics")},
}
SCORES = (("symbolic_accuracy", "symbolic accuracy"), ("acc_tau_id", "Acc_0.1 ID"),
          ("acc_tau_ood", "Acc_0.1 OOD"), ("nmse_id", "median NMSE ID"))


def sample(library: TaskLibrary, n: int) -> list[str]:
    rng = np.random.default_rng(0)
    out = []
    for suite in SUITES:
        pool = sorted(t.task_id for t in library if t.meta.suite == suite)
        out += [pool[i] for i in sorted(rng.choice(len(pool), min(n, len(pool)),
                                                   replace=False))]
    return out


def score(t, name: str) -> float:
    if t.scores.HasField(name):
        return float(getattr(t.scores, name))
    return float("inf") if name.startswith("nmse") else 0.0  # unsubmitted or failed


def campaign(stub, seed: int, agents: list[str], tasks: list[str]) -> list:
    spec = agent_pb2.CampaignSpec(
        name=f"lsr-baselines-seed{seed}", tasks=tasks, settings=[common_pb2.SETTING_REAL],
        seed=seed, concurrency=2, max_attempts=2,
        agents=[agent_pb2.AgentModel(agent=a) for a in agents])
    snap = stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec))
    print(f"seed {seed}: campaign {snap.campaign_id}, {snap.totals.total} trials", flush=True)
    last = watch(stub, snap.campaign_id, out=sys.stdout)
    print(render(last))
    return list(stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=snap.campaign_id)).trials)


def summary(ts: list, name: str, seeds: list[int], rng: np.random.Generator
            ) -> tuple[str, str, str]:
    """One score over trials of several seeds: the mean over seeds, the range of the
    per-seed means (one value for an agent run once), and a 95% bootstrap interval
    over tasks of the seed-averaged score. NMSE is summarised by its median (infinite
    for failed trials), so its interval is an order statistic, never an interpolation
    between infinities."""
    nmse = name.startswith("nmse")
    stat = np.median if nmse else np.mean
    fmt = "{:.3g}" if nmse else "{:.3f}"
    ids = sorted({t.task_id for t in ts})
    per_seed = [float(stat([score(t, name) for t in ts if t.seed == s])) for s in seeds
                if any(t.seed == s for t in ts)]
    per_task = np.array([stat([score(t, name) for t in ts if t.task_id == i]) for i in ids])
    boot = [float(stat(rng.choice(per_task, len(per_task)))) for _ in range(2000)]
    lo, hi = np.percentile(boot, [2.5, 97.5], method="nearest" if nmse else "linear")
    return (fmt.format(float(stat(per_seed))),
            f"{fmt.format(min(per_seed))}-{fmt.format(max(per_seed))}",
            f"{fmt.format(lo)}-{fmt.format(hi)}")


def against_published(trials: list, agent: str, suite_of: dict[str, str],
                      seeds: list[int]) -> list[str]:
    """``agent``'s symbolic accuracy on each suite beside the published figures, and
    whether the suite is as hard for it as the paper's is for PySR."""
    rng = np.random.default_rng(0)
    lines = ["| suite | problems | " + agent + "'s symbolic accuracy (95% task bootstrap) | "
             "published: best system | published: PySR | as hard as the paper's? |",
             "|---|---|---|---|---|---|"]
    for suite in SUITES:
        ts = [t for t in trials if t.agent == agent and suite_of[t.task_id] == suite]
        if not ts:
            continue
        mean, _, interval = summary(ts, "symbolic_accuracy", seeds, rng)
        lo = float(interval.split("-")[0])
        best, pysr = PUBLISHED[suite]["best system"], PUBLISHED[suite]["PySR"]
        if pysr is None:
            verdict = ("no published PySR figure to compare; " +
                       ("below" if float(mean) < best[0] else "at or above") +
                       " the best system's")
        else:
            (p_lo, p_hi), _ = pysr
            verdict = ("yes: within the published PySR range" if float(mean) <= p_hi else
                       "near: the interval reaches the published PySR range" if lo <= p_hi else
                       "no: easier than the paper's for a PySR-like method")
        lines.append(f"| {suite} | {len({t.task_id for t in ts})} | {mean} ({interval}) | "
                     f"{best[1]} | {pysr[1] if pysr else 'not stated here'} | {verdict} |")
    return lines


def table(trials: list, agents: list[str], suite_of: dict[str, str],
          seeds: list[int]) -> list[str]:
    rng = np.random.default_rng(0)
    lines = ["| agent | suite | problems | seeds | score | mean over seeds | per-seed means | "
             "95% task bootstrap |", "|---|---|---|---|---|---|---|---|"]
    for agent in agents:
        for suite in SUITES:
            ts = [t for t in trials if t.agent == agent and suite_of[t.task_id] == suite]
            if not ts:
                continue
            ran = sorted({t.seed for t in ts})
            for name, label in SCORES:
                mean, spread, interval = summary(ts, name, seeds, rng)
                lines.append(f"| {agent} | {suite} | {len({t.task_id for t in ts})} | "
                             f"{' '.join(map(str, ran))} | {label} | {mean} | {spread} | "
                             f"{interval} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=10, help="problems per suite")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--agents", nargs="+", default=["template", "sr", "data-blind"])
    ap.add_argument("--tasks-dir", default=str(ROOT / "var" / "tasks"))
    ap.add_argument("--data-dir", default=str(ROOT / "var" / "baselines-lsr"))
    ap.add_argument("--out", default=str(ROOT / "var" / "baselines-lsr" / "baselines-lsr.md"))
    ap.add_argument("--tabulate-only", action="store_true",
                    help="re-read a finished run from --data-dir; run nothing")
    args = ap.parse_args()
    began = time.monotonic()
    library = TaskLibrary(Path(args.tasks_dir))
    tasks = sample(library, args.sample)
    suite_of = {t: library.get(t).meta.suite for t in tasks}
    data = Path(args.data_dir)
    if data.exists() and not args.tabulate_only:
        shutil.rmtree(data)  # one run, one set of campaigns
    cluster = Cluster(library.root, data, log_dir=data / "logs")
    cluster.start()
    trials: list = []
    try:
        with cluster.channel("agent") as channel:
            stub = agent_pb2_grpc.AgentServiceStub(channel)
            if args.tabulate_only:
                names = {f"lsr-baselines-seed{s}" for s in args.seeds}
                for c in stub.ListCampaigns(agent_pb2.ListCampaignsRequest()).campaigns:
                    if c.spec.name in names:
                        trials += stub.ListTrials(agent_pb2.ListTrialsRequest(
                            campaign_id=c.campaign_id)).trials
            else:
                for seed in args.seeds:
                    trials += campaign(stub, seed, args.agents, tasks)
    finally:
        cluster.stop()
    wall = data / "wall-seconds"
    if not args.tabulate_only:
        wall.write_text(f"{time.monotonic() - began:.1f}\n")
    minutes = float(wall.read_text()) / 60
    ran_at = data / "commit"  # the run's commit, not a later re-tabulation's
    if not args.tabulate_only:
        ran_at.write_text(subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                         capture_output=True, text=True).stdout.strip()
                          or "unknown")
    commit = ran_at.read_text().strip()
    failed = [t for t in trials if not t.scores.HasField("acc_tau_id")]
    lines = [
        "# Baselines on the rebuilt LLM-SRBench suites",
        "",
        f"Generated by `.venv/bin/python bench/baselines_lsr.py --sample {args.sample} --seeds "
        f"{' '.join(map(str, args.seeds))}` at commit `{commit}` in {minutes:.1f} min on "
        "this machine (2 cores), through real services. The suites are LLM-SRBench's two "
        "suites rebuilt by its published method (docs/tasks.md shows how); scores here are "
        "not comparable with published LLM-SRBench numbers, because the problems are "
        "reconstructions, not LLM-SRBench's own.",
        "",
        f"Sample: {args.sample} problems per suite, drawn with a fixed seed (0) from the "
        f"{sum(1 for t in library if t.meta.suite == SUITES[0])} LSR-Transform and "
        f"{sum(1 for t in library if t.meta.suite == SUITES[1])} LSR-Synth problems: "
        + ", ".join(f"`{t}`" for t in tasks) + ". Each agent ran each problem once per seed "
        "(the trial seed drives `sr`'s genetic programming and its validation split). "
        "Symbolic accuracy is the structure judge's verdict against the ground truth with "
        "constants as placeholders; Acc_0.1 is 1 when every prediction is within 10%; an "
        "unsubmitted or failed trial counts as Acc 0 and NMSE infinite. Per-seed means show "
        "how much the seed moves the score (a single value: the agent is deterministic); "
        "the bootstrap interval resamples problems.",
        "",
        *table(trials, args.agents, suite_of, args.seeds),
        "",
        "Against the published figures (sr is lawlab's PySR-like baseline: a feature "
        "library, then genetic programming):",
        "",
        *against_published(trials, "sr", suite_of, args.seeds),
        "",
        f"Trials: {len(trials)}; without a score (failed or unsubmitted): {len(failed)}"
        + (": " + ", ".join(f"{t.agent} {t.task_id} seed {t.seed}" for t in failed)
           if failed else "."),
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out} ({minutes:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
