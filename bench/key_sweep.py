"""The key sweep (issue #35): the default tier's outcome must not depend on the
world key a machine happens to draw. Builds the whole library with several fresh
keys, runs `lawlab tasks validate` on each and the key-dependent tests (marker
`world_key`) against it, and prints per key: worlds, the smallest expected and
sampled world R^2 and their margin over the 0.9 floor, noise lowered for
identifiability, build and test time.

    .venv/bin/python bench/key_sweep.py [--keys 5] [--out var/keys] [--quick]

``make test-keys`` runs it with 5 keys (about 5 min a key on 2 cores: 25 min); ``--quick``
builds three fast tasks per key (the bench smoke test).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["mammal_running_speed", "brain_body_allometry", "island_species_area"]


def sweep_one(out: Path, only: list[str] | None, run_tests: bool = True) -> dict:
    from lawlab.tasks.library import TaskLibrary
    from lawlab.worlds import worldkey
    from lawlab_ops.taskbuild.build import build_all
    from lawlab_ops.taskbuild.validate import sampled_r2, validate_library

    if out.exists():
        shutil.rmtree(out)
    tasks = out / "tasks"
    key, _ = worldkey.load_or_create(out / "world-key")  # a fresh key: random bytes
    start = time.perf_counter()
    build_all(tasks, only, key=key)
    built = time.perf_counter() - start
    reports, manifest = validate_library(tasks)
    library = TaskLibrary(tasks)
    real = [t for t in library if t.meta.suite == "real"]
    worlds = [t for t in real if t.has_world()]
    expected, sampled, lowered, deep = [], [], 0, 0
    for t in worlds:
        spec = t.world_spec()
        lowered += float(spec.get("noise_scale_for_identifiability", 1.0)) < 1.0
        deep += len(spec["law"]["pieces"]) >= 2
        for g, checks in sampled_r2(t).items():
            s = spec["s"].get(g, spec["s"].get("_all", 1.0))
            if s >= 1:
                continue
            for c in checks.values():
                expected.append(c.expected)
                sampled.append(c.sampled)
    failed = {r.task_id: r.problems for r in reports if not r.ok}
    env = {**os.environ, "LAWLAB_TASKS_DIR": str(tasks), "LAWLAB_WORLD_KEY_FILE":
           str(out / "world-key")}
    t0 = time.perf_counter()
    if run_tests:
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "world_key",
                                "-p", "no:cacheprovider", "tests"], cwd=ROOT, env=env,
                               capture_output=True, text=True)
        tail = (tests.stdout.strip().splitlines()[-1] if tests.stdout.strip()
                else tests.stderr[-300:])
        ok = tests.returncode == 0
    else:  # a partial library (--quick): the whole-library tests do not apply
        tail, ok = "not run (--quick)", True
    return {"fingerprint": key.fingerprint, "release": library.release,
            "real": len(real), "worlds": len(worlds), "deep": deep, "lowered": lowered,
            "min_expected": min(expected) if expected else float("nan"),
            "min_sampled": min(sampled) if sampled else float("nan"),
            "validate_failures": failed, "manifest": manifest,
            "build_s": built, "tests": tail, "tests_ok": ok,
            "tests_s": time.perf_counter() - t0}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "var" / "keys"))
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    rows = []
    for k in range(a.keys):
        print(f"key {k + 1} of {a.keys}: building ...", flush=True)
        row = sweep_one(Path(a.out) / f"key{k + 1}", QUICK if a.quick else None, not a.quick)
        rows.append(row)
        print(json.dumps(row, default=str), flush=True)
    print("\n| key fingerprint | worlds | with >= 2 pieces | noise lowered | min expected R^2 "
          "(margin) | min sampled R^2 (margin) | validate | key-dependent tests | build |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| `{r['fingerprint']}` | {r['worlds']}/{r['real']} | {r['deep']} | {r['lowered']} "
              f"| {r['min_expected']:.4f} ({r['min_expected'] - 0.9:+.4f}) | "
              f"{r['min_sampled']:.4f} ({r['min_sampled'] - 0.9:+.4f}) | "
              f"{'ok' if not r['validate_failures'] and not r['manifest'] else 'FAIL'} | "
              f"{r['tests']} | {r['build_s'] / 60:.1f} min |")
    bad = [r for r in rows if r["validate_failures"] or r["manifest"] or not r["tests_ok"]]
    for r in bad:
        print(f"key {r['fingerprint']}: {r['validate_failures'] or r['manifest'] or r['tests']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
