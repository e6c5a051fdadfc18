"""The world report of a task (answer key: it names the hidden law).

Written to ``<task>/simulator/report.md`` and ``world.png`` by the builder:
the chosen reference and why, the hidden law and how it was chosen, the
residual space, the calibration per group, and a figure of the real records
against samples drawn from the world at the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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


def markdown(task_id: str, spec: dict, ref_scores: dict, variants: list[dict]) -> str:
    law = spec["law"]
    lines = [
        f"# World report: {task_id}",
        "",
        "ANSWER KEY: this file names the hidden law. It stays with the simulator, scorer and judge.",
        "",
        "## Reference selection",
        "",
        "| reference | residual-space R^2 (train) | B_b (residual structure) | held-out metric |",
        "|---|---|---|---|",
    ]
    for name, sc in ref_scores.items():
        mark = " (chosen)" if name == law["base_reference"] else ""
        lines.append(f"| {name}{mark} | {sc['train_r2_residual_space']:.4f} | "
                     f"{sc['structure_B_b']:.3f} | {sc['heldout_metric']:.4g} |")
    lines += [
        "",
        "The world's base is the reference with the least residual structure among those with "
        "a non-negative residual-space R^2.",
        "",
        "## Hidden law",
        "",
        f"    {law['expr']}",
        "",
        f"Edit: **{law['edit']}** (added: `{', '.join(law['added_terms'])}`). {law['rationale']}.",
        "",
        "| candidate | screen | BIC |",
        "|---|---|---|",
    ]
    for v in variants:
        screen = ", ".join(f"{k}: {val}" for k, val in v["screen"].items())
        lines.append(f"| `{v['expr']}` | {screen} | {v['bic']:.2f} |")
    lines += [
        "",
        f"## Calibration (residual space: {spec['space']})",
        "",
        "| group | s | world R^2 |",
        "|---|---|---|",
    ]
    for g, s in spec["s"].items():
        lines.append(f"| {g} | {s:.3f} | {spec['world_r2'][g]:.4f} |")
    lines += ["", "s = min(1, sqrt((1 - rho)/rho * v_f / v_r)), rho = 0.9; where s = 1 the real "
              "noise is already small and the world R^2 is recorded as is.", "",
              "![real records against world samples](world.png)", ""]
    return "\n".join(lines)
