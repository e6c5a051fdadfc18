"""Campaign results: the row model, aggregates, leaderboards, concordance, best-of-N.

Pure functions over rows (one per trial) so every number is unit-testable; the
agent's pages and the operator's reports (lawlab_ops.report) both read them.

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
from dataclasses import dataclass
from itertools import combinations
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
    (lawlab.results.prices) the cost in US dollars, None for a model the list does not price."""
    from lawlab.results.prices import cost

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
SCORE_TITLES = {"s_n": "S_N (Real): fit on held-out data", "s_v": "S_V (Real): validity",
                "s_s": "S_S (Parallel): hidden structure recovered"}


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

def fmt(x: object) -> str:
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
                f"{fmt(e[f'{score}_strict_all'])} ({fmt(e[f'{score}_ci_low'])}-"
                f"{fmt(e[f'{score}_ci_high'])}) | {fmt(e[f'{score}_scored_all'])} | "
                f"{fmt(e[f'{score}_strict_single'])} | {fmt(e[f'{score}_strict_multi'])} | "
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
