"""The `sr` agent's search and selection (services/agent/builtin/sr_fit.py, the file
it sends to the sandbox), run in-process on a real LSR-Transform problem."""

from __future__ import annotations

import io
import runpy
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pandas as pd

FIT = Path(__file__).resolve().parents[2] / "services" / "agent" / "builtin" / "sr_fit.py"


def test_select_applies_the_cap_then_the_five_percent_rule_or_bic():
    ns = runpy.run_path(str(FIT))
    front = [(3, 1.00, 1, "a"), (7, 0.100, 3, "b"), (9, 0.098, 4, "c"), (15, 0.097, 9, "d")]
    assert ns["select"](front, 0, 100, False) is None  # nothing within the cap
    assert ns["select"](front, 1, 100, False)[3] == "a"
    # within 5% of the best allowed error (0.097): b, c, d; the least complex is b
    assert ns["select"](front, 10, 100, False)[3] == "b"
    # under 50 rows: least BIC, n log MSE + k log n
    n = 40
    bic = {f[3]: n * np.log(f[1]) + f[2] * np.log(n) for f in front}
    assert ns["select"](front, 10, n, True)[3] == min(bic, key=bic.get)


def test_the_search_finds_admissible_models_on_an_lsr_transform_problem(tasks_dir):
    ns = runpy.run_path(str(FIT))
    task = tasks_dir / "lsrt_i_6_2"
    g = ns["main"].__globals__
    g["train_df"] = pd.read_csv(task / "data" / "train.csv")
    g["input_cols"], g["target_col"] = ["f", "sigma"], "theta"
    with redirect_stdout(io.StringIO()) as out:
        ns["main"](cap_constants=10, time_limit=3, seed=1)
    doc = eval(out.getvalue().split("LAWLAB_RESULT ", 1)[1])  # noqa: S307  (its own repr)
    assert doc["ok"] and doc["n_constants"] <= 10
    assert all(k <= 10 for _, _, k in doc["front"])
    # a useful model, not a constant: validation MSE well under the target's variance
    assert doc["val_mse"] < 0.2 * float(np.var(g["train_df"]["theta"]))
