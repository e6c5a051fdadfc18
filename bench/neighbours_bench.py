"""The nearest-records search alone (lawlab.worlds.neighbours) beside scipy's cKDTree, CPU
per 100-point query, on four pools shaped like the worlds': one input with
distinct records (mauna_loa_co2's size and k), one input with replicates at a few
levels (a dose-response design), one input with runs of replicates longer than k
(spruce_growth's 13 ages of 79 trees), two inputs (the largest two-input pool).

    .venv/bin/python bench/neighbours_bench.py [--calls 1000] [--quick]

The two do not return the same records where distances tie: the tree breaks ties
in its own order, lawlab.worlds.neighbours takes the lowest pool row (docs/protocol.md,
section 5); the timing is of the same work.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.spatial import cKDTree

from lawlab.worlds.neighbours import Neighbours


def cpu_ms(fn, calls: int) -> float:
    fn()
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="20 calls per figure (a smoke run)")
    args = ap.parse_args()
    calls = 20 if args.quick else args.calls
    rng = np.random.default_rng(0)
    pools = [
        ("1 input, 2,225 distinct records, k = 64", rng.uniform(-2, 2, (2225, 1)), 64, "window"),
        ("1 input, 400 records at 40 levels, k = 60",
         np.repeat(rng.normal(size=40), 10)[:, None], 60, "window"),
        ("1 input, 1,027 records at 13 levels (a longitudinal design), k = 64",
         np.repeat(np.linspace(-1.5, 1.5, 13), 79)[:, None], 64, "window"),
        ("2 inputs, 120 records, k = 18", rng.normal(size=(120, 2)), 18, "exhaustive"),
    ]
    print(f"### Nearest-records search ({time.strftime('%Y-%m-%d')}, CPU per 100-point query, "
          f"{calls} calls)\n")
    print("Command: `.venv/bin/python bench/neighbours_bench.py`.\n")
    print("| pool | cKDTree | lawlab.worlds.neighbours |")
    print("|---|---|---|")
    for name, coords, k, path in pools:
        points = rng.normal(size=(100, coords.shape[1]))
        tree, search = cKDTree(coords), Neighbours(coords)
        a = cpu_ms(lambda: tree.query(points, k=k), calls)  # noqa: B023
        b = cpu_ms(lambda: search.query(points, k), calls)  # noqa: B023
        print(f"| {name} | {a:.3f} ms | {b:.3f} ms ({path}) |")


if __name__ == "__main__":
    main()
