"""What every verb group shares: the library and state flags, number formatting."""

from __future__ import annotations

import argparse

from lawlab import config


def fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)



def with_dirs(p: argparse.ArgumentParser) -> None:
    """--tasks-dir and --data-dir, resolved from the environment or the project."""
    p.add_argument("--tasks-dir", "--tasks", default=str(config.tasks_dir()),
                   help="the task library (env LAWLAB_TASKS_DIR; default var/tasks)")
    p.add_argument("--data-dir", default=str(config.data_dir()),
                   help="durable state and trajectories (env LAWLAB_DATA_DIR; default var/run)")
