"""Results in the paper's shapes: Table 2 (one row per model, S_N / S_V / S_S by
single-group, multi-group and all tasks, with ranks), Figure 4a (tie-aware
fit-validity concordance against the fit margin, with a task-bootstrap band)
and Figure 4b (the top three models per score in each of six domains, ties
sharing a rank).

Every comparison is over the tasks every compared model attempted in that
setting (lawlab.results.aggregate.common_tasks); the coverage is printed beside it.

The six domains: the paper names five (Astronomy, Biology, Ecology & Hydrology,
Materials & Engineering, Social Sciences); the sixth is taken here as Physics &
Chemistry. Each task's discipline maps to one of them in ``DISCIPLINE_DOMAIN``
(a discipline not listed there is reported under its own name, never dropped).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations
from typing import Any

from lawlab.results.aggregate import (
    BOOTSTRAP_SEED,
    Row,
    common_tasks,
    competition_ranks,
    finite,
    is_error,
    mean,
    or_zero,
    scored,
    task_means,
)
from lawlab.vocab import Setting

DOMAINS = ("Physics & Chemistry", "Astronomy", "Biology", "Ecology & Hydrology",
           "Materials & Engineering", "Social Sciences")
DISCIPLINE_DOMAIN = {
    "physics": "Physics & Chemistry", "physical chemistry": "Physics & Chemistry",
    "chemistry": "Physics & Chemistry", "astronomy": "Astronomy", "astrophysics": "Astronomy",
    "biology": "Biology", "biochemistry": "Biology", "cell biology": "Biology",
    "medicine": "Biology", "pharmacology": "Biology", "physiology": "Biology",
    "exercise physiology": "Biology", "reproductive physiology": "Biology",
    "plant physiology": "Biology", "animal science": "Biology", "biomechanics": "Biology",
    "ecology": "Ecology & Hydrology", "ecotoxicology": "Ecology & Hydrology",
    "environmental microbiology": "Ecology & Hydrology", "agronomy": "Ecology & Hydrology",
    "forestry": "Ecology & Hydrology", "weed science": "Ecology & Hydrology",
    "earth science": "Ecology & Hydrology", "seismology": "Ecology & Hydrology",
    "hydrology": "Ecology & Hydrology", "materials science": "Materials & Engineering",
    "electrical engineering": "Materials & Engineering", "engineering": "Materials & Engineering",
    "economics": "Social Sciences", "demography": "Social Sciences",
    "sports science": "Social Sciences",
}
SCORE_SETTING = {"s_n": "real", "s_v": "real", "s_s": "parallel"}
SCORE_NAMES = {"s_n": "S_N", "s_v": "S_V", "s_s": "S_S"}
MARGINS = tuple(round(0.05 * i, 2) for i in range(11))  # 0 .. 0.5, as Figure 4a


def domain_of(discipline: str) -> str:
    return DISCIPLINE_DOMAIN.get(discipline.strip().lower(), discipline or "unknown")


def _models(rows: Sequence[Row]) -> list[Row]:
    """The rows a per-model table compares: the full context (the paper's main setting)."""
    return [r for r in rows if r.context == "full"]


def table2(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One entry per agent (agent/model): strict means of S_N and S_V (Real) and S_S
    (Parallel), each for single-group, multi-group and all tasks, over the tasks
    every agent attempted in that setting, and the rank by each score's All (ties
    share a rank); sorted by the S_N rank, then S_S."""
    rows = _models(rows)
    errors = {a: sum(1 for r in rows if r.agent == a and is_error(r)) for a in
              {r.agent for r in rows}}
    agents = sorted({r.agent for r in rows})
    rows = scored(rows)  # a trial in error is no score (counted in "errors")
    common = common_tasks(rows)
    out = []
    for agent in agents:
        entry: dict[str, Any] = {"agent": agent, "errors": errors[agent]}
        for score, setting in SCORE_SETTING.items():
            mine = [r for r in rows if r.agent == agent and r.setting == setting]
            entry[f"{setting}_attempted"] = len({r.task_id for r in mine})
            entry[f"{setting}_compared"] = len(common.get(setting, set()))
            mine = [r for r in mine if r.task_id in common.get(setting, set())]
            for subset, pick in (("single", lambda r: not r.multi_group),
                                 ("multi", lambda r: r.multi_group), ("all", lambda r: True)):
                entry[f"{score}_{subset}"] = mean(list(task_means(
                    [r for r in mine if pick(r)], score, strict=True).values()))
        out.append(entry)
    for score in SCORE_SETTING:
        ranks = competition_ranks({e["agent"]: e[f"{score}_all"] for e in out})
        for e in out:
            e[f"rank_{score}"] = ranks[e["agent"]]
    big = 10**9
    return sorted(out, key=lambda e: (e["rank_s_n"] or big, e["rank_s_s"] or big, e["agent"]))


def _frac(x: float) -> str:
    return "-" if not finite(x) else f"{x:.3f}"


def table2_markdown(table: list[dict[str, Any]]) -> str:
    """Table 2's layout, the best value of each column in bold; scores as fractions
    (0 to 1) like every other table of the report (the paper prints percent: a
    reader comparing multiplies by 100)."""
    cols = [f"{s}_{sub}" for s in SCORE_SETTING for sub in ("single", "multi", "all")]
    best = {c: max((e[c] for e in table if finite(e[c])), default=float("nan")) for c in cols}
    lines = ["| model | S_N single | S_N multi | S_N all | S_V single | S_V multi | S_V all | "
             "S_S single | S_S multi | S_S all | rank S_N/S_V/S_S | errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in table:
        cells = [(f"**{_frac(e[c])}**" if finite(e[c]) and round(e[c], 6) == round(best[c], 6)
                  else _frac(e[c])) for c in cols]
        ranks = "/".join(str(e[f"rank_{s}"]) if e[f"rank_{s}"] else "-" for s in SCORE_SETTING)
        lines.append(f"| {e['agent']} | " + " | ".join(cells)
                     + f" | {ranks} | {e.get('errors', 0)} |")
    if table:
        e = table[0]
        lines += ["", f"Compared over the tasks every model attempted: Real "
                      f"{e['real_compared']}, Parallel {e['parallel_compared']} "
                      "(per model attempted: " + "; ".join(
                          f"{x['agent']} {x['real_attempted']} Real, {x['parallel_attempted']} "
                          "Parallel" for x in table) + "). Strict means (0 to 1; the paper prints "
                      "percent) over the "
                      "trials scored (a trial in error has no score: its own column); "
                      "ranks by All, ties sharing a rank."]
    return "\n".join(lines)


def concordance_curve(rows: Sequence[Row], margins: Sequence[float] = MARGINS,
                      draws: int = 2000) -> list[dict[str, Any]]:
    """Figure 4a (Appendix C.4): within each task, every pair of Real trials with
    unequal S_N, oriented so the first fits better, kept when the S_N gap is at
    least the margin; h = 1 when the better fit is more valid, 1/2 on an S_V tie,
    0 otherwise. The mean of h over kept pairs, with a task-bootstrap 95% interval
    (all kept pairs of each drawn task)."""
    real = [r for r in rows if r.setting == Setting.REAL and finite(r.s_n) and finite(r.s_v)]
    by_task: dict[str, list[Row]] = defaultdict(list)
    for r in real:
        by_task[r.task_id].append(r)
    pairs: dict[str, list[tuple[float, float]]] = {}
    for task, rs in by_task.items():
        kept = []
        for a, b in combinations(rs, 2):
            dn = or_zero(a.s_n) - or_zero(b.s_n)
            if dn == 0:
                continue
            dv = (or_zero(a.s_v) - or_zero(b.s_v)) * (1 if dn > 0 else -1)
            kept.append((abs(dn), 1.0 if dv > 0 else 0.5 if dv == 0 else 0.0))
        if kept:
            pairs[task] = kept
    out = []
    tasks = sorted(pairs)
    for m in margins:
        per = {t: [h for gap, h in pairs[t] if gap >= m - 1e-12] for t in tasks}
        per = {t: hs for t, hs in per.items() if hs}
        n = sum(len(hs) for hs in per.values())
        rate = sum(sum(hs) for hs in per.values()) / n if n else float("nan")
        lo = hi = float("nan")
        keys = list(per)
        if len(keys) >= 2:
            rng = random.Random(BOOTSTRAP_SEED)
            stats = []
            for _ in range(draws):
                pick = [per[rng.choice(keys)] for _ in keys]
                k = sum(len(hs) for hs in pick)
                stats.append(sum(sum(hs) for hs in pick) / k)
            stats.sort()
            lo, hi = stats[int(0.025 * draws)], stats[int(0.975 * draws) - 1]
        out.append({"margin": m, "pairs": n, "tasks": len(per), "concordance": rate,
                    "ci_low": lo, "ci_high": hi})
    return out


def domain_top3(rows: Sequence[Row]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Figure 4b: domain -> score -> the models ranked 1 to 3 (ties share a rank, so a
    list may hold more than three), each with its strict mean over the domain's tasks
    that every model attempted, and that task count."""
    rows = _models(rows)
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    domains = sorted({domain_of(r.discipline) for r in rows},
                     key=lambda d: (DOMAINS.index(d) if d in DOMAINS else len(DOMAINS), d))
    for dom in domains:
        here = [r for r in rows if domain_of(r.discipline) == dom]
        out[dom] = {}
        for score, setting in SCORE_SETTING.items():
            sub = [r for r in here if r.setting == setting]
            tasks = common_tasks(sub).get(setting, set())
            if not tasks:
                continue
            means = {a: mean(list(task_means([r for r in sub if r.agent == a
                                                and r.task_id in tasks], score,
                                               strict=True).values()))
                     for a in sorted({r.agent for r in sub})}
            ranks = competition_ranks(means)
            out[dom][score] = sorted(
                ({"rank": ranks[a], "agent": a, "mean": v, "tasks": len(tasks)}
                 for a, v in means.items() if (ranks[a] or 99) <= 3),
                key=lambda x: (x["rank"], x["agent"]))
    return out


def domain_top3_markdown(top: dict[str, dict[str, list[dict[str, Any]]]]) -> str:
    lines = ["| domain | " + " | ".join(SCORE_NAMES[s] for s in SCORE_SETTING) + " |",
             "|---|---|---|---|"]
    for dom, by in top.items():
        cells = []
        for score in SCORE_SETTING:
            entries = by.get(score, [])
            cells.append("<br>".join(f"{x['rank']}. {x['agent']} {x['mean']:.3f}"
                                     for x in entries) + (f" (n={entries[0]['tasks']})"
                                                          if entries else "-"))
        lines.append(f"| {dom} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure_4a(curve: list[dict[str, Any]]) -> Any:
    import matplotlib.pyplot as plt

    pts = [c for c in curve if finite(c["concordance"])]
    if not pts:
        return None
    x = [c["margin"] for c in pts]
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    band = [c for c in pts if finite(c["ci_low"])]
    if band:
        ax.fill_between([c["margin"] for c in band], [c["ci_low"] for c in band],
                        [c["ci_high"] for c in band], color="#0072B2", alpha=0.2, lw=0,
                        label="95% task bootstrap")
    ax.plot(x, [c["concordance"] for c in pts], "o-", color="#0072B2", ms=4,
            label="tie-aware concordance")
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.text(x[-1], 0.5, "no association ", color="dimgrey", fontsize=7, ha="right", va="bottom")
    # the pairs behind the first and last points, along the top (never on the ticks)
    ax.text(x[0], 0.98, f"{pts[0]['pairs']} pairs", fontsize=7, ha="left", va="top")
    if len(pts) > 1:
        ax.text(x[-1], 0.98, f"{pts[-1]['pairs']} pairs", fontsize=7, ha="right", va="top")
    ax.set_xlabel("fit margin: pairs with S_N gap >= this")
    ax.set_ylabel("P(better fit is more valid)")
    ax.set_ylim(0, 1)
    ax.set_title(f"Fit-validity concordance (Real, {pts[0]['tasks']} tasks)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def figure_4b(top: dict[str, dict[str, list[dict[str, Any]]]],
              colours: dict[str, str]) -> Any:
    """A grid, domains by scores: each cell lists its top three with their means;
    a model keeps its report colour."""
    import matplotlib.pyplot as plt

    if not top:
        return None
    doms = list(top)
    fig, ax = plt.subplots(figsize=(8.4, 0.95 * len(doms) + 1.0))
    ax.set_xlim(0, 3)
    ax.set_ylim(len(doms), 0)
    ax.set_axis_off()
    for j, score in enumerate(SCORE_SETTING):
        ax.text(j + 0.5, -0.08, SCORE_NAMES[score], ha="center", va="bottom", fontsize=9,
                weight="bold")
    for i, dom in enumerate(doms):
        ax.axhline(i, color="#dddddd", lw=0.8)
        ax.text(-0.03, i + 0.5, dom, ha="right", va="center", fontsize=8)
        for j, score in enumerate(SCORE_SETTING):
            entries = top[dom].get(score, [])
            if not entries:
                ax.text(j + 0.5, i + 0.5, "no common tasks", ha="center", va="center",
                        fontsize=7, color="grey")
                continue
            # n at the cell's top right, the entries below it (a long model name
            # never runs into it)
            ax.text(j + 0.92, i + 0.13, f"n={entries[0]['tasks']}", fontsize=6, ha="right",
                    va="center", color="grey")
            for k, x in enumerate(entries[:5]):
                ax.text(j + 0.08, i + 0.31 + 0.15 * k,
                        f"{x['rank']}. {x['agent']}  {x['mean']:.2f}", fontsize=7, va="center",
                        color=colours.get(x["agent"], "black"))
    ax.set_title("Top three per score and domain (strict means over the domain's common "
                 "tasks; ties share a rank)", fontsize=9, pad=18)
    fig.subplots_adjust(left=0.22, right=0.98, top=0.86, bottom=0.02)
    return fig
