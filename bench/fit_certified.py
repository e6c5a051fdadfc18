"""The fitting engine (libs/lawlab/fitting.py) on NIST's certified nonlinear
regression problems: how many significant digits it gets right.

For each of the 27 StRD problems (tests/data/nist_strd, NIST's own files) it
fits from NIST's Start 1 and Start 2 (one start each, as the certification
intends) and from no start at all (the engine's own starts, as ``lawlab fit``
without --init does), and prints NIST's log relative error (LRE: agreeing
significant digits, at most 11) of the worst parameter, the worst standard
deviation and the residual sum of squares, with the wall time. Prints a
Markdown section for bench/RESULTS.md.

    .venv/bin/python bench/fit_certified.py [--quick]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lawlab.fitting import fit_expression  # noqa: E402
from lawlab.law.expr import Expression  # noqa: E402
from tests.support import nist_strd  # noqa: E402

QUICK = ["MGH09", "ENSO", "Thurber"]


def digits(problem: nist_strd.Problem, start: int | None) -> tuple[float, float, float, float]:
    init = None if start is None else dict(zip(problem.params, problem.starts[start]))
    began = time.perf_counter()
    fit = fit_expression(Expression(problem.expr), problem.inputs, problem.y,
                         list(problem.params), init, n_starts=1 if init else 24)
    seconds = time.perf_counter() - began
    params = min(nist_strd.lre(fit.constants[k], c)
                 for k, c in zip(problem.params, problem.certified))
    sds = min(nist_strd.lre(fit.stderr[k], c)
              for k, c in zip(problem.params, problem.certified_sd))
    return params, sds, nist_strd.lre(fit.rss, problem.certified_rss), seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    args = ap.parse_args()
    names = QUICK if args.quick else nist_strd.names()
    rows, solved_blind = [], 0
    for name in names:
        p = nist_strd.load(name)
        s1 = digits(p, 0)
        s2 = digits(p, 1)
        blind = digits(p, None)
        solved_blind += blind[0] >= 6
        rows.append(f"| {name} | {p.difficulty} | {len(p.params)} | {s1[0]:.1f} | {s1[1]:.1f} | "
                    f"{s1[2]:.1f} | {s2[0]:.1f} | {blind[0]:.1f} | {blind[3]:.2f} s |")
        print(f"[{len(rows)}/{len(names)}] {name}", file=sys.stderr)
    print(f"### Fitting engine on NIST StRD nonlinear regression ({date.today()}, "
          f"{platform.node()}, Python {platform.python_version()})\n")
    print("Significant digits agreeing with NIST's certified values (LRE, at most 11): "
          "the worst parameter, the worst standard deviation, the residual sum of "
          "squares; from Start 1, from Start 2, and from no start (the engine's own 24).\n")
    print("| problem | difficulty | constants | Start 1: values | Start 1: SDs | Start 1: RSS "
          "| Start 2: values | no start: values | no start: time |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nNo start given: {solved_blind} of {len(names)} reach 6 digits.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
