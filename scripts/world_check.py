"""Build one task's Parallel world from the working copy and say why it is (not) there.

    .venv/bin/python scripts/world_check.py TASK_ID [--key TEXT] [--private FILE.yaml]

Builds the task (data, references, rubric, world) into a temporary folder with
a key made from TEXT (default: a fixed development key), then prints the
selected base, every catalogued mechanism's screens and the departure the
records support, every draw's screens and, for a drawn combination that
reached the identifiability screen, each noise scale tried with the rivals it
could not be told apart from (median BIC gap; IDENTIFY_BIC is needed). A
maintainer's tool for writing a task's `variants:`; `lawlab tasks build` is
the real thing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from lawlab.tasks.specs import SPECS
from lawlab.worlds import worldkey
from lawlab_ops.taskbuild import worlds
from lawlab_ops.taskbuild.build import build_task


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("--key", default="lawlab world_check development key")
    ap.add_argument("--private", help="private variants of this task (a list, catalogue schema)")
    a = ap.parse_args()
    spec = next((s for s in SPECS if s.task_id == a.task), None)
    if spec is None:
        print(f"no task {a.task!r}", file=sys.stderr)
        return 2
    private = yaml.safe_load(Path(a.private).read_text()) if a.private else None
    if isinstance(private, dict):
        private = private.get("variants", private.get(a.task))
    key = worldkey.WorldKey(a.key.encode().ljust(32, b"."))
    out = Path(tempfile.mkdtemp(prefix="world-check-"))
    start = time.perf_counter()
    build_task(spec, out, key=key, private=private)
    rec = json.loads((out / a.task / "eval" / "synthesis.json").read_text())
    print(f"{a.task}: base {rec.get('base')}; built in {time.perf_counter() - start:.0f} s")
    print(f"world: {'yes' if (out / a.task / 'simulator' / 'world.json').exists() else 'NO'} "
          f"{rec.get('no_world', '')}")
    for c in rec.get("catalogue", []):
        bad = {k: v for k, v in c["screen"].items() if v != "pass"}
        dep = ", ".join(f"{k} {v:.4g}" for k, v in (c.get("supported") or {}).items())
        print(f"  {'ok  ' if not bad else 'FAIL'} {c['id']:<36} supported: {dep or '-'}")
        for k, v in bad.items():
            print(f"         {k}: {v[:300]}")
    for d in rec.get("draws", []):
        bad = {k: v for k, v in d["screen"].items() if v != "pass"}
        print(f"  draw {' + '.join(d['mechanisms'])} (magnitude {d['magnitude']:.2f}): "
              + ("pass" if not bad else ""))
        for k, v in bad.items():
            print(f"         {k}: {v[:300]}")
        for e in d.get("identifiability", []):
            low = {r: g for r, g in e["min_bic_gap"].items() if g < worlds.IDENTIFY_BIC}
            print(f"         noise x{e['noise_scale']:g}: {'pass' if e['passed'] else 'fail'}"
                  + ("" if e["passed"] else
                     "; not told apart from " + ", ".join(f"{r} ({g:.1f})"
                                                         for r, g in sorted(low.items(),
                                                                            key=lambda x: x[1]))))
    print(f"(the built task is in {out / a.task}; simulator/report.md is its world report)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
