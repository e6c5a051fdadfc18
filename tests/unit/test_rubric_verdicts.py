"""Rubric verdicts on degenerate predictions: a zero, a NaN or an infinity at a
probe is a failed item with its evidence, never an exception (the judge serves
S_V on any submission, and the task builder screens keyed worlds with the same
code: a ZeroDivisionError here stopped `make install` for some world keys)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lawlab.judging import rubric

CONTRAST = {"kind": "contrast", "input": "x", "a": 1.0, "b": 2.0, "lo": 1.5, "hi": 3.0}
PROBES = pd.DataFrame({"x": [1.0, 2.0]})


@pytest.mark.parametrize("pred", [[0.0, 1.0], [0.0, 0.0], [np.inf, 1.0]])
def test_a_contrast_ratio_over_zero_or_infinity_fails_with_evidence(pred):
    ok, why = rubric.verdict(CONTRAST, PROBES, np.array(pred))
    assert ok is False and ("f(b) / f(a)" in why or "non-finite" in why), why


def test_a_contrast_is_still_judged_on_ordinary_predictions():
    assert rubric.verdict(CONTRAST, PROBES, np.array([1.0, 2.0]))[0] is True
    assert rubric.verdict(CONTRAST, PROBES, np.array([1.0, 4.0]))[0] is False
    diff = dict(CONTRAST, **{"as": "difference", "lo": 0.5, "hi": 1.5})
    assert rubric.verdict(diff, PROBES, np.array([0.0, 1.0]))[0] is True


def test_every_kind_is_one_class_in_the_table():
    """Issue #53: a rubric kind is one unit (its checks, probes and verdict), and the
    sets the rest of lawlab reads are derived from the table."""
    from lawlab.vocab import RubricKind

    assert set(rubric.KIND_TABLE) == set(RubricKind)
    assert all(k == c.kind for k, c in rubric.KIND_TABLE.items())
    assert len({type(c) for c in rubric.KIND_TABLE.values()}) == len(RubricKind)
    assert rubric.ONE_INPUT == {"monotone", "depends_on", "limit", "curvature", "slope",
                                "ratio", "contrast", "level", "peak", "periodic", "linear"}
    assert rubric.WEIGHTS == {"level": 0.5}
    with pytest.raises(ValueError, match="unknown kind 'nope'"):
        rubric.verdict({"id": "x", "kind": "nope"}, None, np.array([1.0]))
