"""Runs the built-in agents through real services and writes docs/baselines.md (the
table users compare LLMs to) with docs/baselines.png, and docs/tasks.md and
docs/worlds.md from the same library: the public development release (`lawlab
tasks build --public`, built into var/baselines/tasks when missing or built from
other sources), which anyone can rebuild byte for byte and re-run; every doc names
its release.

Three parts, in one cluster (issue #33: intervals, and seeds where an agent draws
at random):

1. Every real-data task, both settings, seed 1: template, sr, scientist,
   data-blind; the experimenter (the generator's upper bound) in Parallel.
   Task-bootstrap intervals.
2. A seeded sample of 10 real-data tasks again at seeds 2 and 3, for the agents and
   settings that draw at random: sr in both settings, template, scientist and
   data-blind in Parallel (their experiment designs). In Real, template, scientist
   and data-blind draw nothing, so a seed cannot move them (tests/integration/test_rerun.py re-runs
   trials and requires the same scores).
3. A seeded sample of 16 problems per rebuilt LLM-SRBench suite: sr at seeds 1 and
   2, template and data-blind once (Real setting only: no random draw); the
   scientist and the experimenter hand these problems to sr, so they do not run.

    .venv/bin/python bench/baselines.py [--agents template sr scientist experimenter data-blind]
        [--tasks all] [--sample 10] [--sample-seeds 2 3] [--lsr-sample 16]
        [--lsr-seeds 1 2] [--out-dir docs] [--data-dir var/baselines]

State lives in var/baselines: an interrupted run resumes where it stopped
(finished trials are kept), a finished one is only re-tabulated; a rebuilt library
starts a fresh run. The smoke run (`make test-bench`) uses two tasks, one agent,
small samples and temporary directories.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.rpc.convert import enum_name
from lawlab.tasks.library import TaskLibrary
from lawlab_ops.cli.campaign import render, watch
from lawlab_ops.launcher import Cluster

ROOT = Path(__file__).resolve().parents[1]
REAL, PARALLEL = common_pb2.SETTING_REAL, common_pb2.SETTING_PARALLEL
DONE = {agent_pb2.TRIAL_STATUS_COMPLETED, agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL}


def val(t, name: str, missing: float = 0.0) -> float:
    return getattr(t.scores, name) if t.scores.HasField(name) else missing


def strict_mean(trials: list, name: str) -> float:
    return sum(val(t, name) for t in trials) / len(trials) if trials else float("nan")


def fmt(t, name: str) -> str:
    return f"{getattr(t.scores, name):.3f}" if t is not None and t.scores.HasField(name) else "-"


CONTROLS = ("constant", "lookup_table", "aggregate_constant", "best_reference")
BEATS = 0.5005


def score_controls(cluster: Cluster, library: TaskLibrary, only: list[str]
                   ) -> dict[str, list[tuple[float, float]]]:
    """S_N and S_V of the controls (lawlab_ops.taskbuild.controls) on every real-data task,
    through the real scorer and judge (the sandbox runs each like any submission), two
    tasks at a time as the campaigns run trials."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
    from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
    from lawlab_ops.taskbuild import controls

    judge = judge_pb2_grpc.JudgeServiceStub(cluster.channel("judge"))
    scorer = scorer_pb2_grpc.ScorerServiceStub(cluster.channel("scorer"))
    tasks = [t for t in library if t.meta.suite == "real"
             and (only == ["all"] or t.task_id in only)]
    done = [0]

    def one(task) -> dict[str, tuple[float, float]]:
        best = json.loads((task.root / "eval" / "reference_metrics.json").read_text())
        sources = {c: controls.CONTROLS[c](task) for c in CONTROLS if c in controls.CONTROLS}
        sources["best_reference"] = next(r.module for r in task.references()
                                         if r.name == best["best_reference"])
        out = {}
        for name, source in sources.items():
            sub_ = common_pb2.Submission(source=source)
            s_n = scorer.ScoreSubmission(scorer_pb2.ScoreRequest(task_id=task.task_id,
                                                                 submission=sub_), timeout=600)
            v = judge.JudgeValidity(judge_pb2.JudgeRequest(task_id=task.task_id, submission=sub_),
                                    timeout=600)
            # NumericScore.s_n is always set (0 for a failed submission); S_V may be null
            out[name] = (s_n.s_n, v.s_v if v.HasField("s_v") else 0.0)
        done[0] += 1
        print(f"\rcontrols: {done[0]}/{len(tasks)} tasks", end="", flush=True)
        return out

    with ThreadPoolExecutor(2) as pool:
        per_task = list(pool.map(one, tasks))
    print()
    return {c: [t[c] for t in per_task if c in t] for c in CONTROLS}


def score_parallel_controls(cluster: Cluster, library: TaskLibrary, only: list[str]
                            ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, str]]]:
    """S_S of the Parallel zero-data controls (lawlab_ops.taskbuild.controls:
    PARALLEL_CONTROLS: a straight line, the published base, the public-catalogue sink)
    on every world, through the real judge service (bench/parallel_controls.py)."""
    from parallel_controls import score, service_judge

    worlds = [t for t in library if t.meta.suite == "real" and t.has_world()
              and (only == ["all"] or t.task_id in only)]
    return score(worlds, service_judge(cluster), progress=sys.stdout)


# agents whose answer on problems without a literature is another agent's: they
# run on the real-data tasks only (experimenter and scientist hand LSR problems to sr); and
# the generator's upper bound is measured where it means something, in Parallel
REAL_DATA_ONLY = {"experimenter", "scientist"}
UPPER_BOUND = {"experimenter"}  # knows the generator's space: reported apart
# (agent, setting) pairs whose trial draws nothing at random: the seed cannot move
# them (their Real path fits fixed data with fixed starts), so they run once
DETERMINISTIC = {("template", REAL), ("data-blind", REAL), ("scientist", REAL)}


def _campaign(stub, name: str, agents: list[str], tasks: list[str], settings: list,
              seed: int, args) -> list:
    if not agents or not tasks:
        return []
    spec = agent_pb2.CampaignSpec(
        name=name, tasks=tasks, settings=settings, seed=seed,
        concurrency=args.concurrency, max_attempts=2,
        agents=[agent_pb2.AgentModel(agent=a) for a in agents])
    snap = stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec))
    print(f"campaign {name} ({snap.campaign_id}): {snap.totals.total} trials", flush=True)
    last = watch(stub, snap.campaign_id, out=sys.stdout)
    print(render(last))
    return list(stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=snap.campaign_id)).trials)


def builder_sources() -> set[Path]:
    """What the task builder is made of: its own folder (code and data), the task
    specifications it reads (the core's task_specs) and every lawlab module it imports
    (the world model, the nearest-records search and the fitting engine shape a release
    as much), and sr's regression script, which the LSR-Synth screen runs. The
    Makefile's TASK_SOURCES must name them all (a test holds it to this)."""
    lib, ops = ROOT / "libs" / "lawlab", ROOT / "libs" / "lawlab_ops"
    paths = {p for folder in (ops / "taskbuild", lib / "tasks" / "task_specs") for p in folder.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    # in a fresh interpreter on this checkout's sources, so that only the builder's
    # own imports count, whatever the virtualenv's editable install points at
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "libs"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, lawlab_ops.taskbuild.build\n"
         "for m in list(sys.modules.values()):\n"
         "    print(getattr(m, '__file__', None) or '')"],
        check=True, capture_output=True, text=True, cwd=ROOT, env=env).stdout.splitlines()
    modules = {Path(f).resolve() for f in loaded if f}
    modules = {p for p in modules if (p.is_relative_to(lib) or p.is_relative_to(ops))
               and "taskbuild" not in p.parts}
    if not any(p.name == "world.py" for p in modules):
        raise RuntimeError(f"the task builder did not import lawlab.worlds.world from {lib}: "
                           "check PYTHONPATH and the virtualenv's lawlab install")
    # read, not imported: LSR-Synth's novelty check runs sr's regression script
    # (lawlab_ops/taskbuild/stock_sr.py)
    return paths | modules | {ROOT / "services" / "agent" / "lawlab_agent" / "builtin" / "sr" / "fit.py"}


def _sources_digest() -> str:
    """A library built from other sources than :func:`builder_sources` now reads is
    stale, even under the same world key (a rebuilt suite keeps the key)."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted(builder_sources()):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def clear_old_run(path: Path) -> None:
    """Remove what a run left beside the library at ``path`` (its trials, its
    services' state), keeping the world key; nothing to do on a fresh clone."""
    import shutil

    if not path.parent.is_dir():
        return
    for stale in path.parent.iterdir():
        if stale != path and stale.name != "world-key":
            print(f"  clearing the old run's {stale}", flush=True)
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()


def public_library(path: Path, as_is: bool = False) -> TaskLibrary:
    """The public development release at ``path``, built with lawlab's published key
    when it is missing or was built with another key or from other sources
    (``as_is``: the library at ``path`` whatever its key, for the smoke run). A
    rebuild clears the run's state beside it: its trials belong to the old library."""
    if as_is:
        return TaskLibrary(path)
    import json

    from lawlab.worlds import worldkey
    from lawlab_ops.taskbuild.build import build_all

    key = worldkey.public()
    suite, stamp = path / "SUITE.json", path / ".built-from"
    digest = _sources_digest()
    if not (path / "MANIFEST.json").exists() or not suite.exists() or \
            json.loads(suite.read_text()).get("world_fingerprint") != key.fingerprint or \
            not stamp.exists() or stamp.read_text().strip() != digest:
        print(f"building the public development release into {path} ...", flush=True)
        clear_old_run(path)
        worldkey.write_public(worldkey.default_path(path))
        build_all(path, key=key)
        stamp.write_text(digest + "\n")
    return TaskLibrary(path)


def _sample(ids: list[str], n: int) -> list[str]:
    rng = np.random.default_rng(0)
    return [ids[i] for i in sorted(rng.choice(len(ids), min(n, len(ids)), replace=False))]


@dataclass
class Run:
    main: list            # seed 1: every real-data task
    seeded: list          # the sample again at the other seeds
    lsr: list             # the LSR sample, every seed
    sample: list[str]
    lsr_sample: list[str]
    controls: dict
    # {control: {task: S_S}} of the Parallel zero-data controls (issue #48)
    parallel_controls: dict = field(default_factory=dict)
    # {control: {task: the judge's explanation}}: a verdict the judge stopped is named
    parallel_reasons: dict = field(default_factory=dict)


def run(args: argparse.Namespace) -> Run:
    from baselines_lsr import sample as lsr_sample

    library = public_library(Path(args.library), args.as_is)
    data = Path(args.data_dir)
    cluster = Cluster(library.root, data, log_dir=data / "logs")
    cluster.start()
    both = [REAL, PARALLEL]
    real_ids = sorted(t.task_id for t in library if t.meta.suite == "real"
                      and (args.tasks == ["all"] or t.task_id in args.tasks))
    sample = _sample(real_ids, args.sample)
    lsr = lsr_sample(library, args.lsr_sample) if args.lsr_sample else []
    agents = [a for a in args.agents if a not in UPPER_BOUND]  # the bound runs apart
    try:
        with cluster.channel("agent") as channel:
            stub = agent_pb2_grpc.AgentServiceStub(channel)
            main = _campaign(stub, args.name, agents, real_ids, both, args.seed, args)
            main += _campaign(stub, f"{args.name}-bound", [a for a in args.agents
                                                           if a in UPPER_BOUND],
                              real_ids, [PARALLEL], args.seed, args)
            seeded = []
            for seed in args.sample_seeds:
                for setting, label in ((REAL, "real"), (PARALLEL, "parallel")):
                    drawn = [a for a in agents if (a, setting) not in DETERMINISTIC]
                    seeded += _campaign(stub, f"{args.name}-seed{seed}-{label}", drawn, sample,
                                        [setting], seed, args)
            lsr_trials = []
            for seed in args.lsr_seeds:
                drawn = [a for a in agents if a not in REAL_DATA_ONLY
                         and (seed == args.seed or (a, REAL) not in DETERMINISTIC)]
                lsr_trials += _campaign(stub, f"{args.name}-lsr-seed{seed}", drawn, lsr, [REAL],
                                        seed, args)
        fresh = TaskLibrary(library.root)
        return Run(main, seeded, lsr_trials, sample, lsr,
                   score_controls(cluster, fresh, list(args.tasks)),
                   *score_parallel_controls(cluster, fresh, list(args.tasks)))
    finally:
        cluster.stop()


def figure(trials: list, agents: list[str], library: TaskLibrary, out: Path) -> None:
    """S_N and S_V per trial as box plots with every trial drawn beside its box
    (coincident values side by side, so ties show); S_S, a five-level score, as the
    share of tasks at each level. n (trials) under every agent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lawlab_ops.report import agent_colours

    colours = agent_colours(agents)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.9))
    for ax, (setting, score, title) in zip(axes, [
            (REAL, "s_n", "S_N (Real, real-data tasks)"), (REAL, "s_v", "S_V (Real)"),
            (PARALLEL, "s_s", "S_S (Parallel): share of tasks at each level")]):
        data = [[val(t, score) for t in trials if t.agent == a and t.setting == setting
                 and library.get(t.task_id).meta.suite == "real"] for a in agents]
        labels = [f"{a}\nn={len(d)}" for a, d in zip(agents, data)]
        if score == "s_s":
            levels = (0.0, 0.25, 0.5, 0.75, 1.0)
            shades = plt.get_cmap("Greens")([0.15, 0.35, 0.55, 0.75, 0.95])
            for i, d in enumerate(data):
                left = 0.0
                for level, shade in zip(levels, shades):
                    share = sum(abs(v - level) < 1e-9 for v in d) / max(len(d), 1)
                    ax.barh(i, share, left=left, color=shade, edgecolor="white",
                            label=f"S_S = {level:g}" if i == 0 else None)
                    if share >= 0.06:
                        ax.text(left + share / 2, i, f"{share:.0%}", ha="center", va="center",
                                fontsize=7, color="white" if level >= 0.75 else "black")
                    left += share
            ax.set_yticks(range(len(agents)), labels, fontsize=8)
            ax.invert_yaxis()
            ax.set_xlim(0, 1)
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        else:
            box = ax.boxplot(data, showmeans=True, patch_artist=True, widths=0.35,
                             positions=[i - 0.2 for i in range(1, len(agents) + 1)],
                             showfliers=False)
            for patch, agent in zip(box["boxes"], agents):
                patch.set_facecolor(colours[agent])
                patch.set_alpha(0.5)
            for i, d in enumerate(data, start=1):
                most = max(Counter(round(v, 2) for v in d).values(), default=1)
                step = min(0.035, 0.6 / most)  # a tie steps right, within the agent's slot
                seen: dict[float, int] = defaultdict(int)
                xs = []
                for v in d:
                    key = round(v, 2)
                    xs.append(i + 0.1 + step * seen[key])
                    seen[key] += 1
                ax.scatter(xs, d, s=7, color=colours[agents[i - 1]], edgecolor="black", lw=0.2,
                           zorder=3)
            ax.set_xticks(range(1, len(agents) + 1), labels, fontsize=8)
            ax.set_xlim(0.4, len(agents) + 0.9)
            ax.set_ylim(-0.05, 1.05)
        ax.set_title(title, fontsize=9)
        if score == "s_n":
            ax.axhline(0.5, color="grey", lw=0.8, ls="--")
            ax.text(0.995, 0.505, "best published", color="dimgrey", fontsize=7, ha="right",
                    va="bottom", transform=ax.get_yaxis_transform(),
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def sandbox_timeouts(data_dir: Path) -> list[str]:
    """Trajectories with a <python> call the sandbox killed at its wall-clock limit."""
    hits = []
    for path in sorted((data_dir / "trajectories").glob("*.jsonl")):
        if 'status=\\"timeout\\"' in path.read_text():
            hits.append(path.name.split(".attempt")[0])
    return hits


NOTES = ROOT / "bench" / "baselines_notes.md"


def spent_minutes(data_dir: Path, seconds: float) -> float:
    """Wall minutes over every invocation on this data dir: a resumed or re-tabulated
    run reports the whole run's time, not only its own (each adds a line)."""
    log = data_dir / "wall-seconds"
    with log.open("a") as f:
        f.write(f"{seconds:.1f}\n")
    return sum(float(x) for x in log.read_text().split()) / 60



def _validity_labels(library: TaskLibrary) -> list[str]:
    """S_V of the labelled wrong-mechanism and right-but-weak laws (issue #30),
    each fitted on its task's training split, in-process with the judge's plan."""
    from lawlab_ops.taskbuild import validity_labels

    results = validity_labels.score_all(library)
    out = ["", "## Does S_V grade the science? Labelled laws", "",
           "Laws whose verdict is known in advance (`libs/lawlab_ops/taskbuild/"
           "validity_labels.yaml`, each with the reason), fitted on the training split and "
           "judged with the task's rubric on its use range (docs/judges.md): *wrong* "
           "mechanisms that fit the data must fail, *weak* but right ones must pass.", "",
           "| set | laws | disciplines | mean S_V | S_V = 1 | mean S_N |", "|---|---|---|---|---|---|"]
    for label in ("wrong", "weak"):
        rs = [r for r in results if r.law.label == label]
        if rs:
            out.append(f"| {label} | {len(rs)} | {len({r.discipline for r in rs})} | "
                       f"{statistics.mean(r.s_v for r in rs):.3f} | "
                       f"{sum(r.s_v >= 1.0 for r in rs)} | "
                       f"{statistics.mean(r.s_n for r in rs):.3f} |")
    return out


def _notes(commit: str) -> list[str]:
    """The hand-written reading of a run (bench/baselines_notes.md), kept apart from the
    generated tables; its first line names the run's commit it was written for, and a
    run at another commit says so above it."""
    if not NOTES.exists():
        return []
    text = NOTES.read_text()
    first = text.splitlines()[0] if text else ""
    written_for = first.removeprefix("<!-- run:").removesuffix("-->").strip()
    out = ["", "## Reading this run (written by hand, not generated)", ""]
    if written_for != commit:
        out += [f"*Written for the run at commit {written_for}; this run is {commit}: "
                "the figures quoted below may be stale.*", ""]
    return out + [text.split("\n", 1)[1].strip() if first.startswith("<!--") else text.strip()]


def _goals(trials: list, every: list, agents: list[str], library: TaskLibrary,
           args: argparse.Namespace, errors: int) -> list[str]:
    """Issue #18's goals against this run (``trials``: seed 1 on the real-data tasks;
    ``every``: every trial of the run): each met or missed, with the figure. Its goals
    on the LLM-SRBench suites compared with published numbers on other problems, so
    they are gone (docs/baselines.md's LLM-SRBench section says why)."""
    def share(ts: list, name: str, test) -> tuple[int, int]:
        return sum(1 for t in ts if test(val(t, name))), len(ts)

    real = {a: [t for t in trials if t.agent == a and t.setting == REAL
                and library.get(t.task_id).meta.suite == "real"] for a in agents}
    par = {a: [t for t in trials if t.agent == a and t.setting == PARALLEL] for a in agents}
    rows: list[tuple[str, str, bool, str]] = []
    best_par = max(agents, key=lambda a: strict_mean(par[a], "s_s") if par[a] else -1)
    k, n = share(par[best_par], "s_s", lambda v: v == 1.0)
    levels = Counter(val(t, "s_s") for t in par[best_par])
    spread = "S_S levels: " + ", ".join(f"{v:g}: {levels[v]}" for v in sorted(levels, reverse=True))
    rows.append((f"Parallel: full recovery on >= 25% of worlds ({best_par})",
                 f"{k}/{n} = {k / max(n, 1):.3f}", k / max(n, 1) >= 0.25, spread))
    m = strict_mean(par[best_par], "s_s")
    rows.append((f"Parallel: mean S_S >= 0.5 ({best_par})", f"{m:.3f}", m >= 0.5, ""))
    best_real = max(agents, key=lambda a: share(real[a], "s_n", lambda v: v >= BEATS)[0])
    k, n = share(real[best_real], "s_n", lambda v: v >= BEATS)
    ties = sum(1 for t in real[best_real] if abs(val(t, "s_n") - 0.5) < BEATS - 0.5)
    below = sum(1 for t in real[best_real] if val(t, "s_n") <= 0.5 - (BEATS - 0.5))
    rows.append((f"Real: S_N >= {BEATS} on >= 50% of the tasks ({best_real})",
                 f"{k}/{n} = {k / max(n, 1):.3f}", k / max(n, 1) >= 0.5,
                 f"{ties} tie the reference (S_N within 0.0005 of 0.5), {below} below it"))
    cpu = {a: sum(t.wall_seconds for t in every if t.agent == a) / 60 for a in args.agents}
    rows.append(("make baselines in about an hour on this machine (issue #33)",
                 f"{args.minutes:.1f} min", args.minutes <= 65,
                 f"{len(every)} trials, {args.concurrency} at a time; trial minutes per agent: "
                 + ", ".join(f"{a} {v:.0f}" for a, v in cpu.items())))
    rows.append(("0 harness errors", str(errors), errors == 0, ""))
    timeouts = sandbox_timeouts(Path(args.data_dir))
    rows.append(("no sandbox timeouts", f"{len(timeouts)}" + (f" ({', '.join(timeouts[:6])})"
                                                              if timeouts else ""),
                 not timeouts, ""))
    out = ["", "## Issue #18's goals, against this run", "",
           "| goal | measured | | why (measured in this run) |", "|---|---|---|---|"]
    out += [f"| {g} | {v} | {'met' if ok else '**missed**'} | {why if not ok else ''} |"
            for g, v, ok, why in rows]
    return out


def _interval(values: list[float]) -> str:
    """95% bootstrap interval of the mean over tasks (2000 resamples, seed 0)."""
    if not values:
        return "-"
    rng = np.random.default_rng(0)
    v = np.asarray(values, float)
    lo, hi = np.percentile([rng.choice(v, len(v)).mean() for _ in range(2000)], [2.5, 97.5])
    return f"{lo:.3f}-{hi:.3f}"


def _rate(values: list[float]) -> str:
    full = sum(1 for v in values if v >= 1.0)
    return f"{full} of {len(values)} = {full / len(values):.3f}" if values else "-"


def _full(values: list[float]) -> list[float]:
    return [float(v >= 1.0) for v in values]


def parallel_section(agent_s_s: dict[str, list[float]],
                     control_s_s: dict[str, dict[str, float]],
                     reasons: dict[str, dict[str, str]] | None = None) -> list[str]:
    """docs/baselines.md's Parallel table (issue #48): each agent's S_S per world
    (``agent_s_s``, seed 1) beside the zero-data controls' (``control_s_s``, by
    control then task), through the same judge: the full-recovery rate (S_S = 1) and
    the mean S_S, each with its task-bootstrap interval, and one sentence naming the
    agents that beat every control on both figures. The generator's upper bound is
    not passed here: it is reported apart."""
    from lawlab_ops.taskbuild.controls import PARALLEL_LABELS

    controls = {PARALLEL_LABELS.get(n, n): list(v.values()) for n, v in control_s_s.items() if v}
    lines = ["", "## Parallel: the agents against zero-data controls", "",
             "Every world's S_S (seed 1) beside three laws submitted with no observation, judged "
             "by the same structure judge (`libs/lawlab_ops/taskbuild/controls.py`, "
             "`bench/parallel_controls.py`; each reads public information only, never the "
             "world): a straight line in every input (the intercept per group on Type II), the "
             "published base the world is built on (docs/worlds.md names it), and the "
             "public-catalogue sink, the base with every admissible public mechanism of "
             "docs/worlds.md composed (the largest compatible set). The base alone reaches "
             "at most 0.5 on a world with an added mechanism; the sink contains the hidden "
             "law where the draw took compatible public mechanisms and kept the base's "
             "sharing, which the judge grades 0.75 (extra terms), or 1 where the draw took "
             "the whole sink. Intervals: 95% bootstrap over worlds.", "",
             "| law | worlds | S_S = 1 (full recovery) | rate 95% interval | mean S_S | "
             "mean 95% interval | S_S levels 1 / 0.75 / 0.5 / 0.25 / 0 |",
             "|---|---|---|---|---|---|---|"]

    def row(name: str, values: list[float]) -> str:
        levels = " / ".join(str(sum(abs(v - lv) < 1e-9 for v in values))
                            for lv in (1.0, 0.75, 0.5, 0.25, 0.0))
        mean = f"{statistics.mean(values):.3f}" if values else "-"
        return (f"| {name} | {len(values)} | {_rate(values)} | {_interval(_full(values))} | "
                f"{mean} | {_interval(values)} | {levels} |")

    for a, values in agent_s_s.items():
        lines.append(row(a, values))
    for name, values in controls.items():
        lines.append(row(name, values))
    if not controls:
        return lines + ["", "The zero-data controls were not scored in this run."]

    def figures(values: list[float]) -> tuple[float, float]:
        return (statistics.mean(_full(values)), statistics.mean(values)) if values else (0.0, 0.0)

    best_rate = max(figures(v)[0] for v in controls.values())
    best_mean = max(figures(v)[1] for v in controls.values())
    winners = [a for a, v in agent_s_s.items()
               if figures(v)[0] > best_rate and figures(v)[1] > best_mean]
    bar = (f"the best control's full-recovery rate is {best_rate:.3f} and its best mean S_S "
           f"{best_mean:.3f}")
    if winners:
        sentence = (f"Beating every control on both figures (point estimates; {bar}): "
                    + ", ".join(f"`{a}`" for a in winners) + ".")
    else:
        sentence = f"No agent beats every control on both figures (point estimates; {bar})."
    return lines + ["", sentence] + _stopped(reasons or {})


def _stopped(reasons: dict[str, dict[str, str]]) -> list[str]:
    """The control verdicts the judge stopped at its time limit, named: such a verdict
    is the judge's rule (no structural credit), not the law's structure, and another
    machine may finish the comparison."""
    from lawlab_ops.taskbuild.controls import PARALLEL_LABELS

    stopped = [f"{PARALLEL_LABELS.get(c, c)} on {task}" for c, per_task in reasons.items()
               for task, why in sorted(per_task.items()) if "longer than its limit" in why]
    if not stopped:
        return []
    return ["", "The judge stopped " + ", ".join(stopped) + " at its time limit for one "
            "comparison and gave it no structural credit (docs/judges.md); the same law "
            "judged in one process without the limit (`bench/parallel_controls.py "
            "--in-process`) may score higher, and bench/RESULTS.md gives both."]


def _seeds_section(r: Run, agents: list[str], args: argparse.Namespace) -> list[str]:
    """The 10-task sample at every seed: how much the seed moves each score."""
    from baselines_lsr import summary

    if not r.seeded:
        return []
    rng = np.random.default_rng(0)
    seeds = [args.seed, *args.sample_seeds]
    pool = [t for t in r.main if t.task_id in set(r.sample)] + r.seeded
    lines = ["", "## Seeds: how much the seed moves a score", "",
             f"A sample of {len(r.sample)} real-data tasks drawn with a fixed seed (0): "
             + ", ".join(f"`{t}`" for t in r.sample) + f", run at seeds "
             f"{', '.join(map(str, seeds))} by the agents that draw at random there: sr in "
             "both settings (its genetic programming, its validation split and, in Parallel, "
             "its experiment design) and the others in Parallel (their designs). In Real, "
             + ", ".join(sorted(a for a, s in DETERMINISTIC if s == REAL and a in agents))
             + " draw nothing, so they ran once (seed "
             f"{args.seed}). Per-seed means show the seed's effect; the interval resamples "
             "tasks of the seed-averaged score.", "",
             "| agent | setting | tasks | seeds | score | mean over seeds | per-seed means | "
             "95% task bootstrap |", "|---|---|---|---|---|---|---|---|"]
    for a in agents:
        for setting, label, names in ((REAL, "Real", ("s_n", "s_v")),
                                      (PARALLEL, "Parallel", ("s_s",))):
            ts = [t for t in pool if t.agent == a and t.setting == setting]
            if not ts:
                continue
            ran = sorted({t.seed for t in ts})
            for name in names:
                mean, spread, interval = summary(ts, name, seeds, rng)
                lines.append(f"| {a} | {label} | {len({t.task_id for t in ts})} | "
                             f"{' '.join(map(str, ran))} | {name.upper()} | {mean} | {spread} "
                             f"| {interval} |")
    return lines


def _lsr_section(r: Run, agents: list[str], library: TaskLibrary,
                 args: argparse.Namespace) -> list[str]:
    from baselines_lsr import SUITES, against_published, table

    if not r.lsr:
        return []
    counts = {s: sum(1 for t in library if t.meta.suite == s) for s in SUITES}
    failed = [t for t in r.lsr if not t.scores.HasField("acc_tau_id")]
    return ["", "## LLM-SRBench-style problems", "",
            "The suites are LLM-SRBench's two suites rebuilt by its published method "
            "(docs/tasks.md shows the funnels and what differs); the construction does not "
            "match LLM-SRBench's own problems, so these scores are not compared with its "
            "published numbers as scores. What the published figures do tell is how hard the "
            "suites are: the second table sets sr, lawlab's PySR-like baseline, beside them.",
            "",
            f"A sample of {args.lsr_sample} problems per suite drawn with a fixed seed (0) from "
            f"the {counts[SUITES[0]]} LSR-Transform and {counts[SUITES[1]]} LSR-Synth problems "
            "(the whole suites take hours for `sr`, whose genetic programming spends 2.5 "
            "million evaluations on each problem its library does not solve): "
            + ", ".join(f"`{t}`" for t in r.lsr_sample) + f". sr ran at seeds "
            f"{', '.join(map(str, args.lsr_seeds))}; template and data-blind draw nothing on "
            f"these problems (Real setting only) and ran once. Symbolic accuracy is the "
            "structure judge's verdict against the ground truth with constants as "
            "placeholders; Acc_0.1 is 1 when every prediction is within 10%; an unsubmitted or "
            "failed trial counts as Acc 0 and NMSE infinite.", "",
            *table(r.lsr, agents, {t: library.get(t).meta.suite for t in r.lsr_sample},
                   list(args.lsr_seeds)),
            "", "Difficulty against the published figures (symbolic accuracy):", "",
            *(against_published(r.lsr, "sr", {t: library.get(t).meta.suite
                                              for t in r.lsr_sample}, list(args.lsr_seeds))
              if "sr" in agents else []),
            "", f"LSR trials: {len(r.lsr)}; without a score (failed or unsubmitted): "
            f"{len(failed)}" + (": " + ", ".join(f"{t.agent} {t.task_id} seed {t.seed}"
                                               for t in failed) if failed else ".")]


def write(r: Run, args: argparse.Namespace) -> None:
    from lawlab_ops.cli.campaign import rows_from_trials
    from lawlab_ops.report import write_report
    from lawlab_ops.taskbuild.catalogue import catalogue, worlds_catalogue

    library = TaskLibrary(Path(args.library))
    docs = Path(args.out_dir)
    trials, control_scores = r.main, r.controls
    every = r.main + r.seeded + r.lsr
    # one release for every doc: the catalogue and the mechanisms come from the very
    # library the agents ran on
    (docs / "tasks.md").write_text(catalogue(library.root))
    (docs / "worlds.md").write_text(worlds_catalogue(library.root))
    agents = [a for a in args.agents if a not in UPPER_BOUND]
    bound = [a for a in args.agents if a in UPPER_BOUND]
    write_report(rows_from_trials([t for t in trials if t.agent in agents], library.root),
                 docs / "baselines-report",
                 f"built-in agents ({', '.join(agents)}), seed {args.seed}")
    by = {(t.agent, t.task_id, t.setting): t for t in trials}
    errors = [t for t in every if t.status == agent_pb2.TRIAL_STATUS_ERROR]
    walls = defaultdict(list)
    for t in every:
        walls[t.agent].append(t.wall_seconds)
    lines = [
        "# Built-in agent baselines",
        "",
        f"Generated by `make baselines` ({time.strftime('%Y-%m-%d')}, seed {args.seed}, commit "
        f"{args.commit}, release `{library.release}`: the public development release, "
        "which `lawlab tasks build --public` rebuilds byte for byte; docs/tasks.md and "
        f"docs/worlds.md come from the same library, {args.minutes:.1f} min of wall time on "
        f"{os.cpu_count()} cores, {len(every)} trials): every real-data task "
        f"({len({t.task_id for t in trials})}), both settings, seed {args.seed}, "
        "through real services on loopback, two trials at a time, with task-bootstrap "
        "intervals; a 10-task sample again at two more seeds for the agents that draw at "
        "random (section Seeds); a sample of each rebuilt LLM-SRBench suite, sr at seeds "
        f"{', '.join(map(str, args.lsr_seeds))} (section LLM-SRBench-style problems); the "
        "experimenter, the generator's upper bound, in Parallel only (section below). Unsubmitted or failed "
        "trials count as 0 in the means (strict mean). S_N counts as beating the best "
        f"published reference at {BEATS} or more: the metric at least 0.1% better (S_N - 0.5 "
        "= 0.5 (1 - m_sub / m_ref)), so that the reference refitted to rounding is not a win.",
        "",
        "![score distributions](baselines.png)",
        "",
        "The campaign's report (`lawlab report`, written by the same run into "
        "[baselines-report/](baselines-report/report.md)): strict means over the tasks every "
        "agent attempted, with task-bootstrap intervals and n, one panel per score; S_N per "
        "domain; fit against validity per trial; the paper's Table 2 layout "
        "([table2.md](baselines-report/table2.md)), Figure 4a (fit-validity concordance by fit "
        "margin) and Figure 4b (the top three per score and domain).",
        "",
        "![scores by agent](baselines-report/scores_by_agent.png)",
        "",
        "![S_N per domain](baselines-report/discipline_heatmap.png)",
        "",
        "![fit against validity](baselines-report/fit_vs_validity.png)",
        "",
        "![Figure 4a: concordance](baselines-report/fig4a_concordance.png)",
        "",
        "![Figure 4b: top three per domain](baselines-report/fig4b_domains.png)",
        "",
        "## Means over the real-data tasks",
        "",
        "Seed 1, every real-data task; in brackets, 95% bootstrap intervals over tasks.",
        "",
        "| agent | trials | mean S_N (Real) | mean S_V (Real) | mean S_S (Parallel) | "
        f"S_N >= {BEATS} (beats best published) | S_S = 1 (full hidden law) | "
        "median trial time | trials per hour (1 worker) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for a in agents:
        real = [t for t in trials if t.agent == a and t.setting == REAL
                and library.get(t.task_id).meta.suite == "real"]
        par = [t for t in trials if t.agent == a and t.setting == PARALLEL]
        beats = sum(1 for t in real if val(t, "s_n") >= BEATS)
        full = sum(1 for t in par if val(t, "s_s") == 1.0)
        med = statistics.median(walls[a]) if walls[a] else float("nan")
        per_hour = 3600 * len(walls[a]) / sum(walls[a]) if walls[a] else float("nan")
        lines.append(f"| {a} | {len([t for t in trials if t.agent == a])} | "
                     f"{strict_mean(real, 's_n'):.3f} ({_interval([val(t, 's_n') for t in real])}) | "
                     f"{strict_mean(real, 's_v'):.3f} ({_interval([val(t, 's_v') for t in real])}) | "
                     f"{strict_mean(par, 's_s'):.3f} ({_interval([val(t, 's_s') for t in par])}) | "
                     f"{beats} of {len(real)} | "
                     f"{full} of {len(par)} | {med:.1f} s | "
                     f"{per_hour:.0f} |")
    lines += parallel_section(
        {a: [val(t, "s_s") for t in trials if t.agent == a and t.setting == PARALLEL]
         for a in agents}, getattr(r, "parallel_controls", {}) or {},
        getattr(r, "parallel_reasons", {}) or {})
    lines += _seeds_section(r, agents, args)
    for a in bound:
        par = [t for t in trials if t.agent == a and t.setting == PARALLEL]
        s_s = [val(t, "s_s") for t in par]
        lines += ["", f"## The generator's upper bound: `{a}`", "",
                  f"`{a}` is handed the published forms and the task's public catalogue of "
                  "mechanisms, the very space the world builder draws from; it enumerates it "
                  "with designed experiments. Its Parallel score measures what knowing the "
                  "generator buys, not discovery, so it is reported apart from the discovery "
                  "baselines above and excluded from their goals, and it runs in Parallel only "
                  "(seed 1); against an operator's private variants it cannot recover a world "
                  "(tests/unit/test_private_variants.py).", "",
                  "| agent | mean S_S (Parallel) | 95% task bootstrap | S_S = 1 | "
                  "rate 95% interval |",
                  "|---|---|---|---|---|",
                  f"| {a} | {strict_mean(par, 's_s'):.3f} | "
                  f"{_interval(s_s)} | {_rate(s_s)} | {_interval(_full(s_s))} |"]
    lines += _validity_labels(library)
    labels = {"constant": "constant (training mean, 3 significant figures)",
              "lookup_table": "lookup table (binned training means, np.interp)",
              "aggregate_constant": "training mean declared as a constant",
              "best_reference": "best published reference"}
    lines += ["", "## Controls", "",
              "Laws whose right score is known in advance, scored through the same scorer and "
              "judge services on the 41 real-data tasks (`libs/lawlab_ops/taskbuild/controls.py`, "
              "docs/judges.md): the rubric must fail a constant, the anti-hacking gate must stop "
              "the two hacks (S_V = 0 on every task), the best reference anchors S_N = 0.5 and "
              "satisfies its own literature's rubric.", "",
              "| control | tasks | mean S_N | mean S_V | S_V = 0 on | S_V = 1 on |",
              "|---|---|---|---|---|---|"]
    for name in CONTROLS:
        rows = control_scores.get(name, [])
        if rows:
            lines.append(f"| {labels[name]} | {len(rows)} | "
                         f"{statistics.mean(r[0] for r in rows):.3f} | "
                         f"{statistics.mean(r[1] for r in rows):.3f} | "
                         f"{sum(r[1] == 0 for r in rows)} | {sum(r[1] == 1 for r in rows)} |")
    lines += _lsr_section(r, agents, library, args)
    # the scientist at three seeds on two libraries (bench/scientist.py's records)
    from scientist import load_records, section

    scientist_runs = section(load_records())
    lines += ["", *scientist_runs] if scientist_runs else []
    lines += ["", "## Every task", "",
              "S_N / S_V in Real, S_S in Parallel; `-` where the setting does not apply.", "",
              "| task | suite | type | " + " | ".join(
                  f"{a} Real S_N / S_V | {a} Parallel S_S" for a in agents) + " |",
              "|---|---|---|" + "---|---|" * len(agents)]
    for task in (t for t in library if any(x.task_id == t.task_id for x in trials)):
        cells = []
        for a in agents:
            r, p = by.get((a, task.task_id, REAL)), by.get((a, task.task_id, PARALLEL))
            cells.append(f"{fmt(r, 's_n')} / {fmt(r, 's_v')}")
            cells.append(fmt(p, "s_s"))
        lines.append(f"| {task.task_id} | {task.meta.suite} | {task.meta.type_label} | "
                     + " | ".join(cells) + " |")
    lines += _goals(trials, every, agents, library, args, len(errors))
    lines += ["", f"Harness errors (every attempt failed): {len(errors)} of {len(every)} trials"
              + (": " + ", ".join(f"{t.agent} {t.task_id} "
                                  f"({enum_name(agent_pb2.FailureCause, t.cause)}: {t.error[:80]})"
                                  for t in errors) if errors else ".")]
    lines += _notes(args.commit)
    out = docs / "baselines.md"
    out.write_text("\n".join(lines) + "\n")
    figure(trials, agents, library, docs / "baselines.png")
    print(f"wrote {out}, {docs / 'baselines.png'} and {docs / 'baselines-report'}/")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", nargs="+",
                    default=["template", "sr", "scientist", "experimenter", "data-blind"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--name", default="baselines")
    ap.add_argument("--tasks", nargs="+", default=["all"],
                    help="real-data task ids (default: all)")
    ap.add_argument("--sample", type=int, default=10,
                    help="real-data tasks re-run at --sample-seeds")
    ap.add_argument("--sample-seeds", type=int, nargs="*", default=[2, 3])
    ap.add_argument("--lsr-sample", type=int, default=16,
                    help="problems per LLM-SRBench suite")
    ap.add_argument("--lsr-seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out-dir", default=str(ROOT / "docs"))
    ap.add_argument("--data-dir", default=str(ROOT / "var" / "baselines"))
    ap.add_argument("--library", default=str(ROOT / "var" / "baselines" / "tasks"),
                    help="the public development release (built there when missing)")
    ap.add_argument("--as-is", action="store_true",
                    help="use --library whatever its key (smoke runs; docs then describe it)")
    a = ap.parse_args()
    began = time.monotonic()
    a.commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True).stdout.strip() or "unknown"
    result = run(a)
    a.minutes = spent_minutes(Path(a.data_dir), time.monotonic() - began)
    write(result, a)
