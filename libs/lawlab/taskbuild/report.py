"""The world report of a task (answer key: it names the hidden law).

Written to ``<task>/simulator/report.md`` and ``world.png`` by the builder:
the chosen reference and why, the hidden law and how it was chosen, the
residual space, the calibration per group, and a figure of the real records
against samples drawn from the world at the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from lawlab.tasks import GROUP_COL  # noqa: E402
from lawlab.world import World, is_multi_decade  # noqa: E402


def figure(world: World, train: pd.DataFrame, target: str, inputs: list[str], out: Path,
           title: str,
           reference: tuple[str, Callable[[pd.DataFrame], np.ndarray]] | None = None) -> None:
    """Real records, the best published reference's fit, and one world sample per
    record with the hidden law's mean (Figure 3 of the paper)."""
    primary = inputs[0]
    groups = sorted(train[GROUP_COL].astype(str).unique())[:6] if GROUP_COL in train else [None]
    groups = [g for g in groups if g is None or g in world.groups] or [None]
    ncols = min(3, len(groups))
    nrows = -(-len(groups) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), squeeze=False)
    rng = np.random.default_rng(0)
    for ax, g in zip(axes.ravel(), groups):
        rows = train if g is None else train[train[GROUP_COL].astype(str) == g]
        data = {n: rows[n].to_numpy(float) for n in inputs}
        clipped, _ = world.clip(data)
        labels = None if g is None else [g] * len(rows)
        sample = world.sample(clipped, labels, rng)
        order = np.argsort(data[primary])
        ax.scatter(data[primary], rows[target], s=14, color="black", label="real records")
        ax.scatter(data[primary], sample, s=14, marker="x", color="tab:red", label="world sample")
        ax.plot(data[primary][order], world.mean(clipped, labels)[order], color="tab:red", lw=1,
                alpha=0.6, label="hidden law")
        if reference is not None:
            with np.errstate(all="ignore"):
                ref = np.asarray(reference[1](rows), float)
            ax.plot(data[primary][order], ref[order], color="tab:blue", lw=1, ls="--",
                    label=f"reference: {reference[0]}")
        if is_multi_decade(data[primary]):
            ax.set_xscale("log")
        if world.space == "log10":
            ax.set_yscale("log")
        ax.set_xlabel(primary)
        ax.set_title(title if g is None else f"{g}", fontsize=9)
    for row in axes:
        row[0].set_ylabel(target)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90, metadata={"Software": None})
    plt.close(fig)


def markdown(task_id: str, spec: dict[str, Any], ref_scores: dict[str, Any],
             record: dict[str, Any]) -> str:
    law = spec["law"]
    base_scores = record.get("base_scores", {})
    lines = [
        f"# World report: {task_id}",
        "",
        "ANSWER KEY: this file names the hidden law. It stays with the simulator, scorer and judge.",
        "",
        "## Base selection (all Real splits pooled)",
        "",
        "| reference | residual-space R^2 (pooled) | B_b (residual structure) | degenerate | "
        "held-out metric |",
        "|---|---|---|---|---|",
    ]
    for name, sc in ref_scores.items():
        pooled = base_scores.get(name, {})
        mark = " (chosen)" if name == law["base_reference"] else ""
        lines.append(f"| {name}{mark} | {pooled.get('r2_residual_space', float('nan')):.4f} | "
                     f"{pooled.get('structure_B_b', float('nan')):.3f} | "
                     f"{pooled.get('degenerate') or 'no'} | {sc['heldout_metric']:.4g} |")
    combos = record.get("combinations", {})
    lines += [
        "",
        "The base is the non-degenerate reference with the least residual structure among "
        "those with a non-negative residual-space R^2.",
        "",
        "## Hidden law",
        "",
        f"    {law['expr']}",
        "",
        f"Shared: {', '.join(law.get('global', []))}; per group: "
        f"{', '.join(law.get('local_names', [])) or '-'}. {law['rationale']}.",
        "",
        "| piece | kind | importance (residual SD) | plausibility | rationale |",
        "|---|---|---|---|---|",
    ]
    for p in law.get("pieces", []):
        lines.append(f"| `{p['description']}` | {p['kind']} | {p['importance']:.2f} | "
                     f"{p['plausibility']:.2f} | {p['rationale']} |")
    lines += [
        "",
        f"The key chose among {sum(combos.values())} combinations "
        f"({', '.join(f'{v} of {k} piece(s)' for k, v in combos.items())}) of "
        f"{record.get('admissible_pieces', 0)} admissible single pieces; each drawn "
        "combination is screened as a whole.",
        "",
        "| single piece | kind | R^2 | effect (SD) | screen |",
        "|---|---|---|---|---|",
    ]
    for row in record.get("singles", []):
        screen = ", ".join(f"{k}: {val}" for k, val in row["screen"].items())
        effect = "-" if row.get("effect") is None else f"{row['effect']:.2f}"
        r2 = row.get("r2")
        lines.append(f"| `{row['piece']}` | {row['kind']} | "
                     f"{'-' if r2 is None or r2 != r2 else f'{r2:.4f}'} | {effect} | {screen} |")
    lines += ["", "| draw | pieces | screens |", "|---|---|---|"]
    for i, d in enumerate(record.get("draws", []), 1):
        screen = ", ".join(f"{k}: {val}" for k, val in d.get("screen", {}).items())
        lines.append(f"| {i} | {'; '.join(d['pieces'])} | {screen} |")
    lines += [
        "",
        f"## Calibration (residual space: {spec['space']})",
        "",
        "| group | s | sampled R^2 at the records | sampled R^2 on a support grid |",
        "|---|---|---|---|",
    ]
    for g, s in spec["s"].items():
        r2 = spec["world_r2"][g]
        lines.append(f"| {g} | {s:.3f} | {r2['records']:.4f} | {r2['grid']:.4f} |")
    lines += ["", "s = min(1, sqrt((1 - rho)/rho * v_f / v_r)) with rho = 0.92 (aiming above 0.9 "
              "so that the sampled R^2 stays >= 0.9), v_r the variance of the noise draws "
              "themselves, the smaller s of the records and the grid. Where s = 1 the real "
              "noise is already small.", "",
              "![real records against world samples](world.png)", ""]
    return "\n".join(lines)
