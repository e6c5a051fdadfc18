"""Campaign reports: a folder of tables and figures for ``lawlab report CAMPAIGN``.

The numbers are lawlab.results.aggregate' (the row model and its aggregates, which the agent's
pages read too); this module draws and writes them: one panel per score, S_N per
domain, fit against validity, the paper's Figures 4a and 4b (lawlab_ops.paper), and
the report's markdown, CSV and JSON.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lawlab.results.aggregate import (
    SCORE_TITLES,
    SCORES,
    Row,
    best_of_n,
    concordance,
    errors_banner,
    finite,
    fmt,
    leaderboard,
    leaderboard_csv,
    leaderboard_markdown,
    mean,
    or_zero,
    per_discipline,
    scored,
    selection_study,
    strict_json,
    suite_of,
    task_means,
    token_usage,
)
from lawlab.vocab import Setting

# one colour per agent, the same in every figure (colour-blind safe, Okabe-Ito)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000")


# the built-in agents keep their slot in every report
FIXED_COLOURS = {"template": 0, "sr": 1, "data-blind": 2, "experimenter": 3, "scientist": 4}


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
    trials drawn larger, and the paper's Figure 4a and 4b (lawlab_ops.paper)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lawlab_ops import paper

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
    """Strict mean S_N per agent and domain (the paper's six; lawlab_ops.paper), on a
    diverging scale centred at the best published formula's 0.5, n tasks per cell."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    from lawlab_ops.paper import DOMAINS, domain_of

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
    (lawlab.results.prices) the cost of the tokens."""
    suite = suite_of(rows)
    out.mkdir(parents=True, exist_ok=True)
    # S_N, S_V and S_S are defined on real-data tasks; LLM-SRBench-style problems are
    # scored by Acc_tau and NMSE (their S_N is 0 by convention): pooled, they would
    # drag every mean down, so every table and figure here is over real-data tasks
    all_rows, rows = rows, [r for r in rows if r.suite == "real"]
    board = leaderboard(rows)  # counts the trials in error, ranks on the rest
    banner = errors_banner(rows)
    from lawlab_ops import paper

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
    md += [f"| {c['margin']:.2f} | {c['pairs']} | {c['tasks']} | {fmt(c['concordance'])} "
           f"({fmt(c['ci_low'])}-{fmt(c['ci_high'])}) |" for c in curve]
    md += ["", "## Figure 4b: the top three per score and domain", "",
           paper.domain_top3_markdown(top), ""]
    usage = token_usage(all_rows, prices)
    if any(u["total_tokens"] for u in usage):
        from lawlab.results.prices import dollars

        priced = [u["cost_usd"] for u in usage if u["cost_usd"] is not None]
        md += ["## Tokens", "", "The model's usage over every attempt of every trial (errors "
               "included: they cost tokens too); built-in agents use none. "
               + ("Cost from the price list given (US dollars; a dash: no price for that "
                  "model)." if prices else "Cost: pass a price list (`lawlab report "
                  "--prices FILE`, lawlab.results.prices)."), "",
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
        md += [f"| {b['agent']} | {b['n']} | {b['tasks']} | {fmt(b['oracle_mean_s_n'])} "
               f"({fmt(b['ci_low'])}-{fmt(b['ci_high'])}) |" for b in bon]
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
                    f"{fmt(c['mean'])} ({fmt(c['ci_low'])}-{fmt(c['ci_high'])})"
                    for c in cells) + " |")
            md.append(f"| {agent} | | on the Pareto front (random pick) | "
                      f"{fmt(e['random_on_front']['mean'])} |")
            if select is not None:
                md.append(f"| {agent} | | group winners Pareto-dominated in their group | "
                          f"{fmt(e['winners_dominated_in_group']['mean'])} |")
                md.append(f"| {agent} | | final winner on the pool's Pareto front | "
                          f"{fmt(e['final_on_front']['mean'])} |")
    md += ["", "## Per discipline (strict mean S_N)", "",
           "| agent | " + " | ".join(sorted({d for a in disc['s_n'].values() for d in a}))
           + " |"]
    discs = sorted({d for a in disc["s_n"].values() for d in a})
    md.append("|---|" + "---|" * len(discs))
    for agent, by in sorted(disc["s_n"].items()):
        md.append(f"| {agent} | " + " | ".join(fmt(by.get(d, float("nan"))) for d in discs)
                  + " |")
    (out / "report.md").write_text("\n".join(md) + "\n")
    return files + pictures
