"""S_N cannot go NaN (issue #17): a failed anchor group is excluded, in-process
against the scorer's own numeric code and a real task's held-out groups."""

from __future__ import annotations

import numpy as np

from lawlab.judging.submission_runs import RunResult
from lawlab_scorer import numeric


def test_a_failed_anchor_group_is_excluded_not_nan(library):
    task = library.get("chick_growth")
    keys = [job.job_id for job in numeric.build_jobs(task)]
    y = numeric.group_targets(task)
    # the submission predicts the group means: finite everywhere
    run = RunResult("ok", "", {k: np.full(len(y[k]), y[k].mean()) for k in keys})
    good = {k: float(np.std(y[k])) * 0.5 for k in keys}
    failed_group = keys[0].split("/", 1)[1]
    flaky = {k: (float("nan") if k.endswith("/" + failed_group) else v * 0.5)
             for k, v in good.items()}
    out = numeric.score(task, run, {"flaky": flaky, "solid": good})
    assert out.best_reference == "solid" and np.isfinite(out.s_n)
    # only the flaky reference: its failed group is excluded in every seed
    out = numeric.score(task, run, {"flaky": flaky})
    assert np.isfinite(out.s_n) and np.isfinite(out.m_ref)
    assert all(s.excluded == 1 for s in out.seeds)
