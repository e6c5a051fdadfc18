"""Runs the built-in agents over the whole task library, both settings, as one
campaign through real services, and writes docs/baselines.md (the table users
compare LLMs to) with docs/baselines.png, and docs/tasks.md and docs/worlds.md
from the same library: the public development release (`lawlab tasks build
--public`, built into var/baselines/tasks when missing), which anyone can
rebuild byte for byte and re-run; every doc names its release.

    .venv/bin/python bench/baselines.py [--agents template sr experimenter data-blind] [--seed 1]
        [--tasks all] [--out-dir docs] [--data-dir var/baselines]

State lives in var/baselines: an interrupted run resumes where it stopped
(finished trials are kept), a finished one is only re-tabulated. The smoke
run (`make test-bench`) uses two tasks, one agent and temporary directories.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.cli.campaign import render, watch
from lawlab.common.v1 import common_pb2
from lawlab.convert import enum_name
from lawlab.launcher import Cluster
from lawlab.tasks import TaskLibrary

ROOT = Path(__file__).resolve().parents[1]
REAL, PARALLEL = common_pb2.SETTING_REAL, common_pb2.SETTING_PARALLEL
DONE = {agent_pb2.TRIAL_STATUS_COMPLETED, agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL}


def val(t, name: str, missing: float = 0.0) -> float:
    return getattr(t.scores, name) if t.scores.HasField(name) else missing


def strict_mean(trials: list, name: str) -> float:
    return sum(val(t, name) for t in trials) / len(trials) if trials else float("nan")


def median_of(trials: list, name: str) -> float:
    return sorted(val(t, name, float("inf")) for t in trials)[len(trials) // 2]


def fmt(t, name: str) -> str:
    return f"{getattr(t.scores, name):.3f}" if t is not None and t.scores.HasField(name) else "-"


CONTROLS = ("constant", "lookup_table", "aggregate_constant", "best_reference")
BEATS = 0.5005


def score_controls(cluster: Cluster, library: TaskLibrary, only: list[str]
                   ) -> dict[str, list[tuple[float, float]]]:
    """S_N and S_V of the controls (lawlab.taskbuild.controls) on every real-data task,
    through the real scorer and judge (the sandbox runs each like any submission)."""
    import json

    from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
    from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
    from lawlab.taskbuild import controls

    judge = judge_pb2_grpc.JudgeServiceStub(cluster.channel("judge"))
    scorer = scorer_pb2_grpc.ScorerServiceStub(cluster.channel("scorer"))
    out: dict[str, list[tuple[float, float]]] = {c: [] for c in CONTROLS}
    tasks = [t for t in library if t.meta.suite == "real"
             and (only == ["all"] or t.task_id in only)]
    for i, task in enumerate(tasks, 1):
        best = json.loads((task.root / "eval" / "reference_metrics.json").read_text())
        sources = {c: controls.CONTROLS[c](task) for c in CONTROLS if c in controls.CONTROLS}
        sources["best_reference"] = next(r.module for r in task.references()
                                         if r.name == best["best_reference"])
        for name, source in sources.items():
            sub_ = common_pb2.Submission(source=source)
            s_n = scorer.ScoreSubmission(scorer_pb2.ScoreRequest(task_id=task.task_id,
                                                                 submission=sub_), timeout=600)
            v = judge.JudgeValidity(judge_pb2.JudgeRequest(task_id=task.task_id, submission=sub_),
                                    timeout=600)
            # NumericScore.s_n is always set (0 for a failed submission); S_V may be null
            out[name].append((s_n.s_n, v.s_v if v.HasField("s_v") else 0.0))
        print(f"\rcontrols: {i}/{len(tasks)} tasks", end="", flush=True)
    print()
    return out


# agents whose answer on problems without a literature is another agent's: they
# run on the real-data tasks only (the experimenter hands LSR problems to sr)
REAL_DATA_ONLY = {"experimenter"}


def _campaign(stub, name: str, agents: list[str], tasks: list[str], args) -> list:
    spec = agent_pb2.CampaignSpec(
        name=name, tasks=tasks, settings=[REAL, PARALLEL], seed=args.seed,
        concurrency=args.concurrency, max_attempts=2,
        agents=[agent_pb2.AgentModel(agent=a) for a in agents])
    snap = stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec))
    print(f"campaign {snap.campaign_id}: {snap.totals.total} trials", flush=True)
    last = watch(stub, snap.campaign_id, out=sys.stdout)
    print(render(last))
    return list(stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=snap.campaign_id)).trials)


def public_library(path: Path, as_is: bool = False) -> TaskLibrary:
    """The public development release at ``path``, built with lawlab's published key
    when it is missing or was built with another key (``as_is``: the library at
    ``path`` whatever its key, for the smoke run)."""
    if as_is:
        return TaskLibrary(path)
    from lawlab import worldkey
    from lawlab.taskbuild.build import build_all

    key = worldkey.public()
    suite = path / "SUITE.json"
    import json

    if not (path / "MANIFEST.json").exists() or not suite.exists() or \
            json.loads(suite.read_text()).get("world_fingerprint") != key.fingerprint:
        print(f"building the public development release into {path} ...", flush=True)
        worldkey.write_public(worldkey.default_path(path))
        build_all(path, key=key)
    return TaskLibrary(path)


def run(args: argparse.Namespace) -> tuple[list, dict]:
    library = public_library(Path(args.library), args.as_is)
    data = Path(args.data_dir)
    cluster = Cluster(library.root, data, log_dir=data / "logs")
    cluster.start()
    everywhere = [a for a in args.agents if a not in REAL_DATA_ONLY]
    real_only = [a for a in args.agents if a in REAL_DATA_ONLY]
    real_tasks = ["suite:real"] if args.tasks == ["all"] else [
        t for t in args.tasks if library.get(t).meta.suite == "real"]
    try:
        with cluster.channel("agent") as channel:
            stub = agent_pb2_grpc.AgentServiceStub(channel)
            trials = _campaign(stub, args.name, everywhere, list(args.tasks), args) \
                if everywhere else []
            if real_only and real_tasks:
                trials += _campaign(stub, f"{args.name}-real", real_only, real_tasks, args)
        return trials, score_controls(cluster, TaskLibrary(library.root), list(args.tasks))
    finally:
        cluster.stop()


def figure(trials: list, agents: list[str], library: TaskLibrary, out: Path) -> None:
    """S_N and S_V per trial as box plots with every trial drawn beside its box
    (coincident values side by side, so ties show); S_S, a five-level score, as the
    share of tasks at each level. n (trials) under every agent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lawlab.report import agent_colours

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


UPPER_BOUND = {"experimenter"}  # knows the generator's space: reported apart


def _validity_labels(library: TaskLibrary) -> list[str]:
    """S_V of the labelled wrong-mechanism and right-but-weak laws (issue #30),
    each fitted on its task's training split, in-process with the judge's plan."""
    from lawlab.taskbuild import validity_labels

    results = validity_labels.score_all(library)
    out = ["", "## Does S_V grade the science? Labelled laws", "",
           "Laws whose verdict is known in advance (`libs/lawlab/taskbuild/"
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


def _numeric_not_symbolic(trials: list) -> str:
    """How many problems were solved to Acc_0.1 in and out of domain without the judge
    finding the same equation (a numerically equivalent but different form)."""
    n = sum(1 for t in trials if val(t, "acc_tau_id") == 1.0 and val(t, "acc_tau_ood") == 1.0
            and val(t, "symbolic_accuracy") != 1.0)
    return f"{n} of {len(trials)} fit within 10% in and out of domain but not symbolically"


def _goals(trials: list, agents: list[str], library: TaskLibrary, args: argparse.Namespace,
           errors: int) -> list[str]:
    """Issue #18's goals against this run: each met or missed, with the figure."""
    def share(ts: list, name: str, test) -> tuple[int, int]:
        return sum(1 for t in ts if test(val(t, name))), len(ts)

    def suite(agent: str, name: str) -> list:
        return [t for t in trials if t.agent == agent and library.get(t.task_id).meta.suite == name]

    real = {a: [t for t in trials if t.agent == a and t.setting == REAL
                and library.get(t.task_id).meta.suite == "real"] for a in agents}
    par = {a: [t for t in trials if t.agent == a and t.setting == PARALLEL] for a in agents}
    rows: list[tuple[str, str, bool, str]] = []
    if "sr" in agents:
        lsrt, lsrs = suite("sr", "lsr-transform"), suite("sr", "lsr-synth")
        k, n = share(lsrt, "symbolic_accuracy", lambda v: v == 1.0)
        rows.append(("sr: LSR-Transform symbolic accuracy >= 0.315", f"{k}/{n} = {k / max(n, 1):.3f}",
                     k / max(n, 1) >= 0.315, _numeric_not_symbolic(lsrt)))
        k, n = share(lsrt, "acc_tau_id", lambda v: v == 1.0)
        rows.append(("sr: LSR-Transform Acc_0.1 in domain >= 0.5", f"{k / max(n, 1):.3f}",
                     k / max(n, 1) >= 0.5, ""))
        k, n = share(lsrs, "symbolic_accuracy", lambda v: v == 1.0)
        rows.append(("sr: LSR-Synth symbolic accuracy >= 0.281", f"{k}/{n} = {k / max(n, 1):.3f}",
                     k / max(n, 1) >= 0.281, _numeric_not_symbolic(lsrs)))
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
    cpu = {a: sum(t.wall_seconds for t in trials if t.agent == a) / 60 for a in agents}
    rows.append(("make baselines <= 30 min on this machine", f"{args.minutes:.1f} min",
                 args.minutes <= 30,
                 f"{len(trials)} trials, {args.concurrency} at a time; trial minutes per agent: "
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


def write(trials: list, control_scores: dict, args: argparse.Namespace) -> None:
    from lawlab.cli.campaign import rows_from_trials
    from lawlab.report import write_report
    from lawlab.taskbuild.catalogue import catalogue, worlds_catalogue

    library = TaskLibrary(Path(args.library))
    docs = Path(args.out_dir)
    # one release for every doc: the catalogue and the mechanisms come from the very
    # library the agents ran on
    (docs / "tasks.md").write_text(catalogue(library.root))
    (docs / "worlds.md").write_text(worlds_catalogue(library.root))
    write_report(rows_from_trials(trials, library.root), docs / "baselines-report",
                 f"built-in agents ({', '.join(args.agents)}), seed {args.seed}"
                 + ("; experimenter: the generator's upper bound, not a discovery baseline"
                    if any(a in UPPER_BOUND for a in args.agents) else ""))
    agents = [a for a in args.agents if a not in UPPER_BOUND]
    bound = [a for a in args.agents if a in UPPER_BOUND]
    by = {(t.agent, t.task_id, t.setting): t for t in trials}
    errors = [t for t in trials if t.status == agent_pb2.TRIAL_STATUS_ERROR]
    walls = defaultdict(list)
    for t in trials:
        walls[t.agent].append(t.wall_seconds)
    lines = [
        "# Built-in agent baselines",
        "",
        f"Generated by `make baselines` ({time.strftime('%Y-%m-%d')}, seed {args.seed}, commit "
        f"{args.commit}, release `{library.release}`: the public development release, "
        "which `lawlab tasks build --public` rebuilds byte for byte; docs/tasks.md and "
        f"docs/worlds.md come from the same library, {args.minutes:.1f} min of wall time on "
        f"{os.cpu_count()} cores): every "
        f"task of the library ({len(library)}), both settings where the task has them, through "
        "real services on loopback, two trials at a time; the experimenter on the real-data "
        "tasks only (it hands problems without a literature to sr). Unsubmitted or failed "
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
                     f"{strict_mean(real, 's_n'):.3f} | {strict_mean(real, 's_v'):.3f} | "
                     f"{strict_mean(par, 's_s'):.3f} | {beats} of {len(real)} | "
                     f"{full} of {len(par)} | {med:.1f} s | "
                     f"{per_hour:.0f} |")
    for a in bound:
        par = [t for t in trials if t.agent == a and t.setting == PARALLEL]
        real = [t for t in trials if t.agent == a and t.setting == REAL
                and library.get(t.task_id).meta.suite == "real"]
        full = sum(1 for t in par if val(t, "s_s") == 1.0)
        lines += ["", f"## The generator's upper bound: `{a}`", "",
                  f"`{a}` is handed the published forms and the task's public catalogue of "
                  "mechanisms, the very space the world builder draws from; it enumerates it "
                  "with designed experiments. Its Parallel score measures what knowing the "
                  "generator buys, not discovery, so it is reported apart from the discovery "
                  "baselines above and excluded from their goals; against an operator's "
                  "private variants it cannot recover a world (tests/unit/"
                  "test_private_variants.py).", "",
                  "| agent | mean S_S (Parallel) | S_S = 1 | mean S_N (Real) | mean S_V (Real) |",
                  "|---|---|---|---|---|",
                  f"| {a} | {strict_mean(par, 's_s'):.3f} | {full} of {len(par)} | "
                  f"{strict_mean(real, 's_n'):.3f} | {strict_mean(real, 's_v'):.3f} |"]
    lines += _validity_labels(library)
    labels = {"constant": "constant (training mean, 3 significant figures)",
              "lookup_table": "lookup table (binned training means, np.interp)",
              "aggregate_constant": "training mean declared as a constant",
              "best_reference": "best published reference"}
    lines += ["", "## Controls", "",
              "Laws whose right score is known in advance, scored through the same scorer and "
              "judge services on the 41 real-data tasks (`libs/lawlab/taskbuild/controls.py`, "
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
    lines += ["", "## LLM-SRBench-style problems", "",
              "Scores here are not comparable with published LLM-SRBench numbers: the suites "
              "are reconstructions by method, not LLM-SRBench's problems. Acc_0.1 (share of "
              "problems whose every prediction is within 10%), median NMSE, "
              "in domain and out of domain, and symbolic accuracy; an unsubmitted or failed "
              "trial counts as Acc 0 and NMSE infinite.", "",
              "| agent | suite | problems | Acc_0.1 ID | Acc_0.1 OOD | median NMSE ID | "
              "median NMSE OOD | symbolic accuracy |", "|---|---|---|---|---|---|---|---|"]
    for a in agents:
        for suite in ("lsr-transform", "lsr-synth"):
            ts = [t for t in trials if t.agent == a and library.get(t.task_id).meta.suite == suite]
            if not ts:
                continue
            n = len(ts)
            lines.append(
                f"| {a} | {suite} | {n} | {sum(val(t, 'acc_tau_id') for t in ts) / n:.3f} | "
                f"{sum(val(t, 'acc_tau_ood') for t in ts) / n:.3f} | {median_of(ts, 'nmse_id'):.3g} | "
                f"{median_of(ts, 'nmse_ood'):.3g} | "
                f"{sum(val(t, 'symbolic_accuracy') for t in ts) / n:.3f} |")
    lines += ["", "## Every task", "",
              "S_N / S_V in Real, S_S in Parallel; `-` where the setting does not apply.", "",
              "| task | suite | type | " + " | ".join(
                  f"{a} Real S_N / S_V | {a} Parallel S_S" for a in agents) + " |",
              "|---|---|---|" + "---|---|" * len(agents)]
    for task in library:
        cells = []
        for a in agents:
            r, p = by.get((a, task.task_id, REAL)), by.get((a, task.task_id, PARALLEL))
            cells.append(f"{fmt(r, 's_n')} / {fmt(r, 's_v')}")
            cells.append(fmt(p, "s_s"))
        lines.append(f"| {task.task_id} | {task.meta.suite} | {task.meta.type_label} | "
                     + " | ".join(cells) + " |")
    lines += _goals(trials, agents, library, args, len(errors))
    lines += ["", f"Harness errors (every attempt failed): {len(errors)} of {len(trials)} trials"
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
                    default=["template", "sr", "experimenter", "data-blind"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--name", default="baselines")
    ap.add_argument("--tasks", nargs="+", default=["all"], help="task ids (default: all)")
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
    trials, control_scores = run(a)
    a.minutes = spent_minutes(Path(a.data_dir), time.monotonic() - began)
    write(trials, control_scores, a)
