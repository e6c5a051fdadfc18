"""Trajectory logs: one JSONL file per trial attempt, a header line (format
version, trial fields), then one event per turn (model output, tool call, tool
result, timings, token usage)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

TRAJECTORY_VERSION = 1


class Trajectory:
    """Append-only JSONL log of one trial attempt."""

    def __init__(self, path: Path, header: dict,
                 on_turn: Callable[[int], None] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.on_turn = on_turn  # told each turn's number as it is written
        self._fh = open(path, "w", encoding="utf-8")
        self.write({"type": "header", "version": TRAJECTORY_VERSION, **header})

    def write(self, event: dict) -> None:
        event.setdefault("ts", time.time())
        self._fh.write(json.dumps(event, default=str) + "\n")
        self._fh.flush()
        if self.on_turn is not None and event.get("type") == "turn":
            self.on_turn(int(event.get("turn", 0)))

    def close(self) -> None:
        self._fh.close()
