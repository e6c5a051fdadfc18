"""Campaign reports: aggregates, leaderboards, concordance, best-of-N, figures.

Pure functions over rows (one per trial) so every number is unit-testable;
``lawlab report CAMPAIGN`` fetches the rows from the agent service and writes
everything into one folder.

Definitions (docs/protocol.md section 4). Per-task means first (repeats of a task
are averaged), then over tasks. ``strict_mean`` counts a missing, failed or
non-finite score as 0; ``mean_scored`` averages finite scores only. A trial
that ended in error (given up after an infrastructure failure: an endpoint
down, a service unreachable) is no score: it is counted in its own column and
kept out of every mean, rank, table and figure (errors are not scores). Intervals
are task-bootstrap 95% percentile intervals (tasks resampled with
replacement, 2,000 draws, a fixed seed so reports are reproducible).
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from lawlab.vocab import RunStatus, Setting, SubmissionState, TrialStatus, Unset, coerce

BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 20260514


@dataclass(frozen=True)
class Row:
    agent: str  # agent or agent/model
    setting: Setting
    context: str
    task_id: str
    seed: int
    status: TrialStatus | SubmissionState  # a trial's, or a team's submission's
    score_status: RunStatus | Unset  # how the scored module ran; '' when unscored
    s_n: float | None
    s_v: float | None
    s_s: float | None
    discipline: str = ""
    multi_group: bool = False
    suite: str = "real"
    trial_id: str = ""
    world_fingerprint: str = ""  # the release of the Parallel worlds (key fingerprint + worlds)
    prompt_tokens: int = 0  # the model's usage over every attempt of the trial
    completion_tokens: int = 0

    def __post_init__(self) -> None:
        coerce(self)


class MixedSuites(ValueError):
    """Parallel scores from worlds built with different keys cannot be compared."""


def is_error(r: Row) -> bool:
    """A trial given up after its attempts failed: an infrastructure error, no score."""
    return r.status == TrialStatus.ERROR


def scored(rows: Iterable[Row]) -> list[Row]:
    """The trials the protocol scores (every one but those in error)."""
    return [r for r in rows if not is_error(r)]


def errors_banner(rows: Sequence[Row]) -> str:
    """One line naming the trials in error per agent, or '' when there are none."""
    per: dict[str, int] = defaultdict(int)
    for r in rows:
        if is_error(r):
            per[r.agent] += 1
    if not per:
        return ""
    total = sum(per.values())
    return (f"**{total} of {len(rows)} trials ended in error** (given up after their attempts: "
            "an endpoint or a service failed), so they have no score and are kept out of "
            "every mean, rank and figure: " + ", ".join(f"{a} {n}" for a, n in sorted(per.items()))
            + ". An agent with only errors is not ranked.")


def token_usage(rows: Sequence[Row], prices: dict[str, Any] | None = None
                ) -> list[dict[str, Any]]:
    """Per agent (agent/model): trials, prompt and completion tokens in all and per
    trial, over every trial, errors included (they cost tokens too); with ``prices``
    (lawlab.prices) the cost in US dollars, None for a model the list does not price."""
    from lawlab.prices import cost

    per: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        per[r.agent].append(r)
    out = []
    for agent, rs in sorted(per.items()):
        p, c = sum(r.prompt_tokens for r in rs), sum(r.completion_tokens for r in rs)
        out.append({"agent": agent, "trials": len(rs), "prompt_tokens": p,
                    "completion_tokens": c, "total_tokens": p + c,
                    "tokens_per_trial": (p + c) / len(rs),
                    "cost_usd": cost(prices, agent, p, c) if prices else None})
    return out


def suite_of(rows: Sequence[Row]) -> str:
    """The one world-key fingerprint of the rows' Parallel trials ('' if none);
    MixedSuites when they come from several suites."""
    prints = {r.world_fingerprint for r in rows if r.setting == Setting.PARALLEL and r.world_fingerprint}
    if len(prints) > 1:
        raise MixedSuites(f"Parallel trials from {len(prints)} world suites ({', '.join(sorted(prints))}): "
                          "their S_S measure different hidden laws; report each suite on its own")
    return prints.pop() if prints else ""


def _strict(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def strict_json(value: Any) -> str:
    """JSON every parser reads: NaN and infinities become null."""
    return json.dumps(_strict(value), indent=2, default=str, allow_nan=False) + "\n"


def finite(x: float | None) -> bool:
    return x is not None and not math.isnan(x) and not math.isinf(x)


def or_zero(x: float | None) -> float:
    """The score, or 0 where it is missing or not finite (the strict convention)."""
    return x if x is not None and finite(x) else 0.0


def task_means(rows: Iterable[Row], score: str, strict: bool) -> dict[str, float]:
    """task -> mean over its trials (strict: missing counts 0; else finite only)."""
    per: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        v = getattr(r, score)
        if finite(v):
            per[r.task_id].append(float(v))
        elif strict:
            per[r.task_id].append(0.0)
        else:
            per.setdefault(r.task_id, [])
    return {t: sum(v) / len(v) for t, v in per.items() if v}


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def bootstrap_ci(per_task: dict[str, float], draws: int = BOOTSTRAP_DRAWS,
                 seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    values = list(per_task.values())
    if len(values) < 2:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    stats = sorted(mean([rng.choice(values) for _ in values]) for _ in range(draws))
    return stats[int(0.025 * draws)], stats[int(0.975 * draws) - 1]


SCORES = {"real": ("s_n", "s_v"), "parallel": ("s_s",)}


def competition_ranks(values: dict[str, float], digits: int = 4) -> dict[str, int | None]:
    """Rank by value, highest first; equal values (to ``digits``) share the better rank
    (1, 2, 2, 4); a missing value has no rank."""
    ok = {k: round(v, digits) for k, v in values.items() if finite(v)}
    ordered = sorted(ok.values(), reverse=True)
    return {k: (1 + ordered.index(ok[k]) if k in ok else None) for k in values}


def common_tasks(rows: Sequence[Row]) -> dict[str, set[str]]:
    """setting -> the tasks every (agent, context) of that setting attempted: the set
    a ranking compares on, so no row's mean is over tasks another row did not try."""
    per: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for r in rows:
        per[(r.setting, r.agent, r.context)].add(r.task_id)
    out: dict[str, set[str]] = {}
    for (setting, _, _), tasks in per.items():
        out[setting] = out[setting] & tasks if setting in out else set(tasks)
    return out


def leaderboard(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One entry per (agent, setting, context), ranked within its setting: strict and
    scored means of each score over the tasks every row of the setting attempted
    (``tasks_compared`` of the row's ``tasks``), for single-group, multi-group and all
    tasks, with intervals, the rank by each score (ties share a rank) and counts of
    each status over all its trials."""
    groups: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r.agent, r.setting, r.context)].append(r)
    common = common_tasks(scored(rows))
    out = []
    for (agent, setting, context), rs in sorted(groups.items()):
        compared = [r for r in scored(rs) if r.task_id in common.get(setting, set())]
        entry: dict[str, Any] = {"agent": agent, "setting": setting, "context": context,
                                 "tasks": len({r.task_id for r in rs}),
                                 "tasks_compared": len({r.task_id for r in compared}),
                                 "trials": len(rs), "errors": sum(map(is_error, rs))}
        for score in SCORES[setting]:
            for subset, pick in (("all", lambda r: True), ("single", lambda r: not r.multi_group),
                                 ("multi", lambda r: r.multi_group)):
                sub = [r for r in compared if pick(r)]
                strict = task_means(sub, score, strict=True)
                entry[f"{score}_strict_{subset}"] = mean(list(strict.values()))
                entry[f"{score}_scored_{subset}"] = mean(list(
                    task_means(sub, score, strict=False).values()))
                if subset == "all":
                    lo, hi = bootstrap_ci(strict)
                    entry[f"{score}_ci_low"], entry[f"{score}_ci_high"] = lo, hi
        counts: dict[str, int] = defaultdict(int)
        for r in rs:
            counts[r.status] += 1
            if r.score_status and r.score_status != RunStatus.OK:
                counts[r.score_status] += 1
        entry["status_counts"] = dict(sorted(counts.items()))
        out.append(entry)
    for setting in {e["setting"] for e in out}:
        mine = [e for e in out if e["setting"] == setting]
        for score in SCORES[setting]:
            ranks = competition_ranks({str(i): e[f"{score}_strict_all"]
                                       for i, e in enumerate(mine)})
            for i, e in enumerate(mine):
                e[f"rank_{score}"] = ranks[str(i)]
    primary = {"real": "rank_s_n", "parallel": "rank_s_s"}
    return sorted(out, key=lambda e: (e["setting"], e[primary[e["setting"]]] or 10**9,
                                      e["agent"], e["context"]))


def per_discipline(rows: Sequence[Row], score: str) -> dict[str, dict[str, float]]:
    """agent -> discipline -> strict mean of ``score``."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    by: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        if score in SCORES[r.setting]:
            by[(r.agent, r.discipline or "unknown")].append(r)
    for (agent, disc), rs in sorted(by.items()):
        out[agent][disc] = mean(list(task_means(rs, score, strict=True).values()))
    return dict(out)


def concordance(rows: Sequence[Row], margins: Sequence[float] = (0.0, 0.05, 0.1, 0.2),
                draws: int = BOOTSTRAP_DRAWS) -> list[dict[str, Any]]:
    """Fit-validity concordance over within-task pairs of Real trials whose S_N
    differ by more than the margin: concordant when the better-fitting law is
    also at least as valid (S_V higher), discordant when strictly less valid,
    tied when S_V is equal. Rate = concordant / (concordant + discordant), with a
    task-bootstrap interval."""
    real = [r for r in rows if r.setting == Setting.REAL and finite(r.s_n) and finite(r.s_v)]
    by_task: dict[str, list[Row]] = defaultdict(list)
    for r in real:
        by_task[r.task_id].append(r)
    out = []
    for m in margins:
        per_task: dict[str, tuple[int, int, int]] = {}
        for task, rs in by_task.items():
            c = d = t = 0
            for a, b in combinations(rs, 2):
                dn = or_zero(a.s_n) - or_zero(b.s_n)  # finite here: filtered above
                if abs(dn) <= m or dn == 0:
                    continue
                dv = (or_zero(a.s_v) - or_zero(b.s_v)) * (1 if dn > 0 else -1)
                if dv > 0:
                    c += 1
                elif dv < 0:
                    d += 1
                else:
                    t += 1
            if c + d + t:
                per_task[task] = (c, d, t)
        c, d, t = (sum(x[i] for x in per_task.values()) for i in range(3))
        rate = c / (c + d) if c + d else float("nan")
        lo = hi = float("nan")
        tasks = list(per_task)
        if len(tasks) >= 2:
            rng = random.Random(BOOTSTRAP_SEED)
            stats = []
            for _ in range(draws):
                pick = [per_task[rng.choice(tasks)] for _ in tasks]
                cc, dd = sum(p[0] for p in pick), sum(p[1] for p in pick)
                if cc + dd:
                    stats.append(cc / (cc + dd))
            stats.sort()
            if stats:
                lo, hi = stats[int(0.025 * len(stats))], stats[int(0.975 * len(stats)) - 1]
        out.append({"margin": m, "pairs": c + d + t, "concordant": c, "discordant": d,
                    "tied": t, "rate": rate, "ci_low": lo, "ci_high": hi})
    return out


def expected_max_of_subsets(values: Sequence[float], n: int) -> float:
    """E[max] over all n-subsets of ``values`` (exact, by order statistics)."""
    k = len(values)
    if n > k or n < 1:
        return float("nan")
    s = sorted(values)
    total = math.comb(k, n)
    return sum(s[i] * math.comb(i, n - 1) for i in range(n - 1, k)) / total


def best_of_n(rows: Sequence[Row], ns: Sequence[int] = (1, 2, 3, 5)
              ) -> list[dict[str, Any]]:
    """Oracle best-of-N on S_N (Real): per (agent, task) with at least N repeats,
    the expected maximum over N-subsets of its trials, averaged over tasks,
    with a task-bootstrap interval; beside it, the expected score of one
    trial (N = 1), so the gap is the value of perfect selection."""
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r.setting == Setting.REAL:
            by[(r.agent, r.task_id)].append(or_zero(r.s_n))
    out = []
    for agent in sorted({a for a, _ in by}):
        for n in ns:
            per_task = {t: expected_max_of_subsets(v, n) for (a, t), v in by.items()
                        if a == agent and len(v) >= n}
            if not per_task:
                continue
            lo, hi = bootstrap_ci(per_task)
            out.append({"agent": agent, "n": n, "tasks": len(per_task),
                        "oracle_mean_s_n": mean(list(per_task.values())),
                        "ci_low": lo, "ci_high": hi})
    return out


# ---- selection: knockout self-selection and Pareto analyses (paper, appendix B.4) ----------

def pareto_dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """a dominates b: no lower on either score and strictly higher on one."""
    return a[0] >= b[0] and a[1] >= b[1] and (a[0] > b[0] or a[1] > b[1])


def on_front(point: tuple[float, float], pool: Sequence[tuple[float, float]]) -> bool:
    return not any(pareto_dominates(q, point) for q in pool)


def joint_balance(pool: Sequence[tuple[float, float]]) -> list[float]:
    """min of the pool-normalised S_N and S_V of each candidate (1 when a score is flat)."""
    out = []
    lo = [min(p[i] for p in pool) for i in (0, 1)]
    hi = [max(p[i] for p in pool) for i in (0, 1)]
    for p in pool:
        norm = [(p[i] - lo[i]) / (hi[i] - lo[i]) if hi[i] > lo[i] else 1.0 for i in (0, 1)]
        out.append(min(norm))
    return out


Selector = Callable[[list[int]], int]


def knockout(candidates: Sequence[int], select: Selector, group: int = 5
             ) -> tuple[list[int], int]:
    """Disjoint groups of ``group`` in order; ``select(indices) -> chosen index`` picks a
    winner per group, then one among the winners. Returns (group winners, final)."""
    winners = []
    for start in range(0, len(candidates), group):
        chunk = list(candidates[start:start + group])
        winners.append(chunk[0] if len(chunk) == 1 else select(chunk))
    final = winners[0] if len(winners) == 1 else select(winners)
    return winners, final


def selection_study(rows: Sequence[Row], select: Any = None, group: int = 5
                    ) -> dict[str, Any]:
    """Per (agent, task) pool of Real candidates (its repeats): oracle best-of-group and
    best-of-pool on S_N, S_V and joint balance; with ``select(agent, task_id,
    candidates: list[Row]) -> index``, knockout self-selection in groups of ``group``;
    Pareto statistics of the winners against the pool and of random choice."""
    pools: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        if r.setting == Setting.REAL:
            pools[(r.agent, r.task_id)].append(r)
    per_agent: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (agent, task), pool in sorted(pools.items()):
        pool = sorted(pool, key=lambda r: r.seed)
        if len(pool) < group:
            continue
        pts = [(or_zero(r.s_n), or_zero(r.s_v)) for r in pool]
        jb = joint_balance(pts)
        a = per_agent[agent]
        a["tasks"].append(1.0)
        for name, vals in (("s_n", [p[0] for p in pts]), ("s_v", [p[1] for p in pts]),
                           ("joint", jb)):
            a[f"oracle_{group}_{name}"].append(expected_max_of_subsets(vals, group))
            a[f"oracle_pool_{name}"].append(max(vals))
            a[f"random_{name}"].append(mean(vals))
        a["random_on_front"].append(mean([float(on_front(p, pts)) for p in pts]))
        if select is not None:
            def pick(indices: list[int]) -> int:
                chosen = select(agent, task, [pool[i] for i in indices])
                return indices[chosen] if 0 <= chosen < len(indices) else indices[0]

            winners, final = knockout(list(range(len(pool))), pick, group)
            for name, vals in (("s_n", [p[0] for p in pts]), ("s_v", [p[1] for p in pts]),
                               ("joint", jb)):
                a[f"self_{group}_{name}"].append(mean([vals[w] for w in winners]))
                a[f"self_pool_{name}"].append(vals[final])
            dominated = []
            for gi, w in enumerate(winners):
                members = range(gi * group, min(len(pool), (gi + 1) * group))
                dominated.append(float(any(pareto_dominates(pts[m], pts[w]) for m in members)))
            a["winners_dominated_in_group"].append(mean(dominated))
            a["final_on_front"].append(float(on_front(pts[final], pts)))
    out = {}
    for agent, stats in per_agent.items():
        entry: dict[str, Any] = {"tasks": len(stats.pop("tasks")), "group": group}
        for key, vals in stats.items():
            per_task = {str(i): v for i, v in enumerate(vals)}
            lo, hi = bootstrap_ci(per_task)
            entry[key] = {"mean": mean(vals), "ci_low": lo, "ci_high": hi}
        out[agent] = entry
    return out


# ---- writing ---------------------------------------------------------------------------

def _fmt(x: object) -> str:
    if isinstance(x, float):
        return "-" if math.isnan(x) else f"{x:.3f}"
    return str(x)


def leaderboard_markdown(board: list[dict[str, Any]]) -> str:
    """One table per score (S_N and S_V in Real, S_S in Parallel), each ranked by
    its own score (ties share a rank; an agent with only errors has none and comes
    last); means over the tasks every row of the setting has a score on."""
    head = ["| rank | agent | setting | context | tasks compared / attempted | trials | errors | "
            "score | strict mean (95% CI) | mean scored | single-group | multi-group | statuses |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    blocks = []
    for score in ("s_n", "s_v", "s_s"):
        entries = sorted((e for e in board if score in SCORES[e["setting"]]),
                         key=lambda e: (e.get(f"rank_{score}") or 10**9, e["agent"],
                                        e["context"]))
        if not entries:
            continue
        lines = [f"{SCORE_TITLES[score]}", "", *head]
        for e in entries:
            rank = e.get(f"rank_{score}")
            lines.append(
                f"| {rank if rank is not None else '-'} | {e['agent']} | {e['setting']} | "
                f"{e['context']} | {e.get('tasks_compared', e['tasks'])} / {e['tasks']} | "
                f"{e['trials']} | {e.get('errors', 0)} | {score.upper()} | "
                f"{_fmt(e[f'{score}_strict_all'])} ({_fmt(e[f'{score}_ci_low'])}-"
                f"{_fmt(e[f'{score}_ci_high'])}) | {_fmt(e[f'{score}_scored_all'])} | "
                f"{_fmt(e[f'{score}_strict_single'])} | {_fmt(e[f'{score}_strict_multi'])} | "
                + ", ".join(f"{k} {v}" for k, v in e["status_counts"].items()) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def leaderboard_csv(board: list[dict[str, Any]]) -> str:
    keys = sorted({k for e in board for k in e if k != "status_counts"})
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*keys, "status_counts"])
    for e in board:
        w.writerow([e.get(k, "") for k in keys] + [json.dumps(e["status_counts"])])
    return buf.getvalue()


# one colour per agent, the same in every figure (colour-blind safe, Okabe-Ito)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000")
SCORE_TITLES = {"s_n": "S_N (Real): fit on held-out data", "s_v": "S_V (Real): validity",
                "s_s": "S_S (Parallel): hidden structure recovered"}


# the built-in agents keep their slot in every report
FIXED_COLOURS = {"template": 0, "sr": 1, "data-blind": 2, "experimenter": 3}


def agent_colours(agents: Iterable[str]) -> dict[str, str]:
    """A colour per agent, the same in every report: the built-in agents' fixed slots,
    any other name's one of the other four from a hash of the name, the next free slot
    only where two names of one report would share one (and a slot over again past
    eight agents)."""
    import hashlib

    names = sorted(set(agents), key=lambda a: (a not in FIXED_COLOURS, a))
    out: dict[str, str] = {}
    used: set[int] = set()
    for a in names:
        slot = FIXED_COLOURS.get(a)
        if slot is None:  # among the slots no built-in agent holds
            free = len(PALETTE) - len(FIXED_COLOURS)
            slot = len(FIXED_COLOURS) + int(hashlib.sha256(a.encode()).hexdigest(), 16) % free
        for step in range(len(PALETTE)):
            if (slot + step) % len(PALETTE) not in used:
                slot = (slot + step) % len(PALETTE)
                break
        used.add(slot)
        out[a] = PALETTE[slot]
    return out


def figures(rows: Sequence[Row], board: list[dict[str, Any]], out: Path) -> list[str]:
    """The report's figures: one panel per score with a bar per agent (its colour
    throughout, n under each bar), S_N per domain on a diverging scale centred at the
    best published 0.5 with n in each cell, fit against validity with coincident
    trials drawn larger, and the paper's Figure 4a and 4b (lawlab.paper)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lawlab import paper

    colours = agent_colours([*(e["agent"] for e in board), *(r.agent for r in rows)])
    written = []
    for name, fig in (("scores_by_agent.png", scores_figure(board)),
                      ("discipline_heatmap.png", heatmap_figure(rows)),
                      ("fit_vs_validity.png", validity_figure(rows, board)),
                      ("fig4a_concordance.png", paper.figure_4a(paper.concordance_curve(rows))),
                      ("fig4b_domains.png", paper.figure_4b(paper.domain_top3(rows), colours))):
        if fig is not None:
            fig.savefig(out / name, dpi=130)
            plt.close(fig)
            written.append(name)
    return written


def scores_figure(board: list[dict[str, Any]]) -> Any:
    import matplotlib.pyplot as plt

    colours = agent_colours(e["agent"] for e in board)
    panels = [s for s in ("s_n", "s_v", "s_s") if any(s in SCORES[e["setting"]] for e in board)]
    if not panels:
        return None
    # each bar's slot as wide as its longest label line (7 pt: about 0.075 in a character)
    names = [e["agent"].replace("/", "/\n") for e in board]
    longest = max((len(part) for n in names for part in n.split("\n")), default=8)
    bars = max((sum(1 for e in board if p in SCORES[e["setting"]]) for p in panels), default=1)
    panel = max(4.2, bars * max(0.8, 0.075 * longest + 0.2) + 1.0)
    fig, axes = plt.subplots(1, len(panels), figsize=(panel * len(panels), 4.0), squeeze=False)
    for ax, score in zip(axes[0], panels):
        entries = sorted((e for e in board if score in SCORES[e["setting"]]),
                         key=lambda e: (e.get(f"rank_{score}") or 10**9, e["agent"]))
        # a provider/model name on two lines: long model names stay apart
        labels = [e["agent"].replace("/", "/\n") + ("" if e["context"] == "full"
                                                     else f"\n({e['context']})")
                  + f"\nn={e.get('tasks_compared', e['tasks'])}"
                  + (f"\n{e['errors']} in error" if e.get("errors") else "") for e in entries]
        vals = [e[f"{score}_strict_all"] for e in entries]
        lo = [max(0.0, v - e[f"{score}_ci_low"]) if finite(e[f"{score}_ci_low"]) else 0.0
              for e, v in zip(entries, vals)]
        hi = [max(0.0, e[f"{score}_ci_high"] - v) if finite(e[f"{score}_ci_high"]) else 0.0
              for e, v in zip(entries, vals)]
        x = list(range(len(entries)))
        ax.bar(x, vals, yerr=[lo, hi], capsize=3,
               color=[colours[e["agent"]] for e in entries], edgecolor="black", lw=0.5)
        for i, v in enumerate(vals):
            # the value at the foot of its bar, where no error bar runs
            ax.text(i, 0.015, f"{v:.2f}" if finite(v) else "no score", ha="center", va="bottom", fontsize=8,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.85})
        ax.set_xticks(x, labels, fontsize=7)
        # headroom above 1.0: an interval that reaches 1 shows its cap
        ax.set_ylim(0, 1.08)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
        ax.set_title(SCORE_TITLES[score], fontsize=9)
        if score == "s_n":
            ax.axhline(0.5, color="grey", lw=0.8, ls="--")
            ax.text(0.99, 0.5, "best published = 0.5", color="dimgrey", fontsize=7,
                    ha="right", va="bottom", transform=ax.get_yaxis_transform())
    axes[0][0].set_ylabel("strict mean over common tasks\n(task bootstrap 95% CI; n = tasks)")
    fig.tight_layout()
    return fig


def heatmap_figure(rows: Sequence[Row]) -> Any:
    """Strict mean S_N per agent and domain (the paper's six; lawlab.paper), on a
    diverging scale centred at the best published formula's 0.5, n tasks per cell."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    from lawlab.paper import DOMAINS, domain_of

    real = [r for r in rows if r.setting == Setting.REAL]
    if not real:
        return None
    agents = sorted({r.agent for r in real})
    doms = sorted({domain_of(r.discipline) for r in real},
                  key=lambda d: (DOMAINS.index(d) if d in DOMAINS else len(DOMAINS), d))
    grid, counts = [], []
    for a in agents:
        line, ns = [], []
        for d in doms:
            per = task_means([r for r in real if r.agent == a and domain_of(r.discipline) == d],
                             "s_n", strict=True)
            line.append(mean(list(per.values())))
            ns.append(len(per))
        grid.append(line)
        counts.append(ns)
    fig, ax = plt.subplots(figsize=(max(5.5, 1.3 * len(doms) + 2.5), 0.6 * len(agents) + 2.2))
    im = ax.imshow(grid, cmap="RdBu", norm=TwoSlopeNorm(vmin=0.0, vcenter=0.5, vmax=1.0),
                   aspect="auto")
    for i, line in enumerate(grid):
        for j, v in enumerate(line):
            if finite(v):
                ax.text(j, i, f"{v:.2f}\nn={counts[i][j]}", ha="center", va="center",
                        fontsize=7, color="white" if abs(v - 0.5) > 0.3 else "black")
    ax.set_xticks(range(len(doms)), [d.replace(" & ", " &\n") for d in doms], fontsize=7)
    ax.set_yticks(range(len(agents)), agents, fontsize=8)
    ax.set_title("strict mean S_N per domain (Real; n = tasks)", fontsize=9)
    fig.colorbar(im, ax=ax, label="S_N (0.5 = best published)")
    fig.tight_layout()
    return fig


def validity_figure(rows: Sequence[Row], board: list[dict[str, Any]]) -> Any:
    """One marker per distinct (S_N, S_V) of an agent, its area growing with the trials
    that share it (ties stay visible); agents side by side by a small fixed offset;
    the legend outside the axes."""
    import matplotlib.pyplot as plt

    pts = [r for r in rows if r.setting == Setting.REAL and finite(r.s_n) and finite(r.s_v)]
    if not pts:
        return None
    colours = agent_colours([*(e["agent"] for e in board), *(r.agent for r in pts)])
    agents = sorted({r.agent for r in pts})
    # a lone trial's marker big enough to see; smaller where hundreds crowd the square
    base = 60.0 if len(pts) < 20 else 30.0 if len(pts) < 200 else 14.0
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for k, agent in enumerate(agents):
        shift = 0.012 * (k - (len(agents) - 1) / 2)
        tally: dict[tuple[float, float], int] = defaultdict(int)
        mine = [r for r in pts if r.agent == agent]
        for r in mine:
            tally[(round(or_zero(r.s_n), 3), round(or_zero(r.s_v), 3))] += 1
        keys = sorted(tally)
        ax.scatter([p[0] + shift for p in keys], [p[1] + shift for p in keys],
                   s=[base * tally[p] for p in keys], alpha=0.6, color=colours[agent],
                   edgecolor="black", lw=0.3, label=f"{agent} (n={len(mine)} trials)")
    ax.axvline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("S_N (fit; 0.5 = best published)")
    ax.set_ylabel("S_V (validity)")
    ax.set_title(f"fit against validity, n={len(pts)} trials (area = trials at the point)",
                 fontsize=8)
    ax.set_xlim(-0.04, 1.04)
    ax.set_ylim(-0.04, 1.04)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              markerscale=0.7)
    fig.tight_layout()
    return fig


def write_report(rows: Sequence[Row], out: Path, title: str, select: Any = None,
                 prices: dict[str, Any] | None = None) -> list[str]:
    """Everything into ``out``; returns the file names written. ``select`` (see
    :func:`selection_study`) adds knockout self-selection; ``prices``
    (lawlab.prices) the cost of the tokens."""
    suite = suite_of(rows)
    out.mkdir(parents=True, exist_ok=True)
    # S_N, S_V and S_S are defined on real-data tasks; LLM-SRBench-style problems are
    # scored by Acc_tau and NMSE (their S_N is 0 by convention): pooled, they would
    # drag every mean down, so every table and figure here is over real-data tasks
    all_rows, rows = rows, [r for r in rows if r.suite == "real"]
    board = leaderboard(rows)  # counts the trials in error, ranks on the rest
    banner = errors_banner(rows)
    from lawlab import paper

    t2 = paper.table2(rows)  # likewise
    rows = scored(rows)  # every other table and figure: errors are not scores
    conc = concordance(rows)
    bon = best_of_n(rows)
    study = selection_study(rows, select)
    disc = {s: per_discipline(rows, s) for s in ("s_n", "s_v", "s_s")}
    curve, top = paper.concordance_curve(rows), paper.domain_top3(rows)
    (out / "table2.md").write_text((banner + "\n\n" if banner else "")
                                   + paper.table2_markdown(t2) + "\n")
    (out / "table2.json").write_text(strict_json(t2))
    (out / "concordance_curve.json").write_text(strict_json(curve))
    (out / "domains_top3.json").write_text(strict_json(top))
    files = ["report.md", "leaderboard.md", "leaderboard.csv", "leaderboard.json",
             "trials.csv", "per_discipline.json", "concordance.json", "best_of_n.json",
             "selection.json", "table2.md", "table2.json", "concordance_curve.json",
             "domains_top3.json", "tokens.json"]
    (out / "selection.json").write_text(strict_json(study))
    (out / "leaderboard.md").write_text((banner + "\n\n" if banner else "")
                                        + leaderboard_markdown(board) + "\n")
    (out / "leaderboard.csv").write_text(leaderboard_csv(board))
    (out / "leaderboard.json").write_text(strict_json(board))
    (out / "per_discipline.json").write_text(strict_json(disc))
    (out / "concordance.json").write_text(strict_json(conc))
    (out / "best_of_n.json").write_text(strict_json(bon))
    (out / "tokens.json").write_text(strict_json(token_usage(all_rows, prices)))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(list(asdict(all_rows[0]).keys()) if all_rows else [])
    for r in all_rows:
        w.writerow(list(asdict(r).values()))
    (out / "trials.csv").write_text(buf.getvalue())
    pictures = figures(rows, board, out)
    others = len(all_rows) - len(rows)
    md = [f"# Report: {title}", "", *([banner, ""] if banner else []),
          (f"{others} trials on LLM-SRBench-style problems are in trials.csv but not in "
           "these tables (they are scored by Acc_tau and NMSE, not S_N/S_V/S_S). "
           if others else "") + f"{len(rows)} trials, "
          f"{len({r.task_id for r in rows})} tasks, agents: "
          + ", ".join(sorted({r.agent for r in rows})) + ".", "",
          "Strict means count a missing, failed or non-finite score as 0; 'mean scored' "
          "averages finite scores only. Intervals: task bootstrap, 95%."
          + (f" Parallel worlds: release `{suite}` (the world key's fingerprint and a hash of "
             "every world served)." if suite else ""),
          "",
          "## Leaderboard", "", "Ranked within each setting; every mean is over the tasks "
          "all rows of the setting attempted (compared / attempted).", "",
          leaderboard_markdown(board), "",
          "## Table 2 layout", "", paper.table2_markdown(t2), ""]
    md += [f"![{p}]({p})" for p in pictures] + [""]
    md += ["## Figure 4a: fit-validity concordance by fit margin (Real)", "",
           "Appendix C.4: within-task pairs with unequal S_N, oriented so the first fits "
           "better; h = 1 if it is also more valid, 1/2 on an S_V tie, 0 otherwise; the mean "
           "of h over pairs whose S_N gap is at least the margin, task-bootstrap 95%.", "",
           "| margin | pairs | tasks | concordance (95% CI) |", "|---|---|---|---|"]
    md += [f"| {c['margin']:.2f} | {c['pairs']} | {c['tasks']} | {_fmt(c['concordance'])} "
           f"({_fmt(c['ci_low'])}-{_fmt(c['ci_high'])}) |" for c in curve]
    md += ["", "## Figure 4b: the top three per score and domain", "",
           paper.domain_top3_markdown(top), ""]
    usage = token_usage(all_rows, prices)
    if any(u["total_tokens"] for u in usage):
        from lawlab.prices import dollars

        priced = [u["cost_usd"] for u in usage if u["cost_usd"] is not None]
        md += ["## Tokens", "", "The model's usage over every attempt of every trial (errors "
               "included: they cost tokens too); built-in agents use none. "
               + ("Cost from the price list given (US dollars; a dash: no price for that "
                  "model)." if prices else "Cost: pass a price list (`lawlab report "
                  "--prices FILE`, lawlab.prices)."), "",
               "| agent | trials | prompt | completion | total | per trial | cost |",
               "|---|---|---|---|---|---|---|"]
        md += [f"| {u['agent']} | {u['trials']} | {u['prompt_tokens']:,} | "
               f"{u['completion_tokens']:,} | {u['total_tokens']:,} | "
               f"{u['tokens_per_trial']:,.0f} | {dollars(u['cost_usd'])} |" for u in usage]
        md += [f"| all | {sum(u['trials'] for u in usage)} | "
               f"{sum(u['prompt_tokens'] for u in usage):,} | "
               f"{sum(u['completion_tokens'] for u in usage):,} | "
               f"{sum(u['total_tokens'] for u in usage):,} | | "
               f"{dollars(sum(priced)) if priced else '-'}"
               f"{' (priced models only)' if priced and len(priced) < len(usage) else ''} |", ""]
        # (the margin table of concordance.json says what Figure 4a says: the file only)
    md += ["## Best-of-N (Real, oracle selection)", ""]
    if any(b["n"] >= 2 for b in bon):
        md += ["Expected S_N of the best of N trials of the same agent on the same task "
               "(exact over all N-subsets of its repeats), averaged over tasks with at least N "
               "repeats. N = 1 is the expected single trial, for reference.", "",
               "| agent | N | tasks | oracle mean S_N (95% CI) |", "|---|---|---|---|"]
        md += [f"| {b['agent']} | {b['n']} | {b['tasks']} | {_fmt(b['oracle_mean_s_n'])} "
               f"({_fmt(b['ci_low'])}-{_fmt(b['ci_high'])}) |" for b in bon]
    else:
        md += ["Not computed: no agent has two or more trials of one task (`lawlab campaign "
               "run --repeats N` gives them)."]
    if not study:
        md += ["", "## Selection", "", "Not computed: it needs pools of at least five "
               "scored trials of one agent on one task (`--repeats 5`)."]
    if study:
        md += ["", "## Selection (Real pools of at least five repeats per task)", "",
               "Oracle: the exact expected best of a random five-candidate group, and the best "
               "of the whole pool; random: the expected score of one random pick. Joint "
               "balance: the worse of a candidate's two pool-normalised scores."
               + (" Self: knockout self-selection by the selector model (groups of five, then "
                  "one among the group winners)." if select is not None else
                  " No selector model was given (`--selector-model`), so no self-selection."),
               "", "| agent | tasks | score | random | oracle best of 5 | oracle best of pool"
               + (" | self, groups of 5 | self, whole pool |" if select is not None else " |"),
               "|---|---|---|---|---|---" + ("|---|---|" if select is not None else "|")]
        for agent, e in sorted(study.items()):
            for name in ("s_n", "s_v", "joint"):
                cells = [e[f"random_{name}"], e[f"oracle_5_{name}"], e[f"oracle_pool_{name}"]]
                if select is not None:
                    cells += [e[f"self_5_{name}"], e[f"self_pool_{name}"]]
                md.append(f"| {agent} | {e['tasks']} | {name} | " + " | ".join(
                    f"{_fmt(c['mean'])} ({_fmt(c['ci_low'])}-{_fmt(c['ci_high'])})"
                    for c in cells) + " |")
            md.append(f"| {agent} | | on the Pareto front (random pick) | "
                      f"{_fmt(e['random_on_front']['mean'])} |")
            if select is not None:
                md.append(f"| {agent} | | group winners Pareto-dominated in their group | "
                          f"{_fmt(e['winners_dominated_in_group']['mean'])} |")
                md.append(f"| {agent} | | final winner on the pool's Pareto front | "
                          f"{_fmt(e['final_on_front']['mean'])} |")
    md += ["", "## Per discipline (strict mean S_N)", "",
           "| agent | " + " | ".join(sorted({d for a in disc['s_n'].values() for d in a}))
           + " |"]
    discs = sorted({d for a in disc["s_n"].values() for d in a})
    md.append("|---|" + "---|" * len(discs))
    for agent, by in sorted(disc["s_n"].items()):
        md.append(f"| {agent} | " + " | ".join(_fmt(by.get(d, float("nan"))) for d in discs)
                  + " |")
    (out / "report.md").write_text("\n".join(md) + "\n")
    return files + pictures
