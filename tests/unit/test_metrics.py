import numpy as np
import pytest

from lawlab import metrics


def test_reference_scores_half_perfect_one_double_error_zero():
    assert metrics.s_n("rmse", 2.0, 2.0) == 0.5
    assert metrics.s_n("rmse", 0.0, 2.0) == 1.0
    assert metrics.s_n("rmse", 4.0, 2.0) == 0.0
    assert metrics.s_n("rmse", 8.0, 2.0) == 0.0  # clipped
    assert metrics.s_n("rmse", 1.0, 2.0) == 0.75


def test_r2_variant():
    assert metrics.s_n("r2", 0.8, 0.8) == 0.5
    assert metrics.s_n("r2", 1.0, 0.8) == 1.0
    assert metrics.s_n("r2", 0.9, 0.8) == pytest.approx(0.75)
    assert metrics.s_n("r2", -5.0, 0.8) == 0.0


def test_non_finite_submission_scores_zero():
    assert metrics.s_n("rmse", float("nan"), 1.0) == 0.0
    assert np.isnan(metrics.compute("rmse", np.ones(3), np.array([1, np.inf, 1])))


def test_metric_values():
    y = np.array([1.0, 10.0, 100.0])
    p = np.array([1.0, 10.0, 1000.0])
    assert metrics.compute("log_mae", y, p) == pytest.approx(1 / 3)
    assert metrics.compute("rmse", y, y) == 0
    assert metrics.compute("smape", np.array([1.0]), np.array([3.0])) == pytest.approx(1.0)
    assert metrics.compute("r2", y, y) == 1.0
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.compute("nope", y, y)


def test_perfect_reference_groups_are_detected():
    assert metrics.reference_is_perfect("rmse", 5e-5)
    assert not metrics.reference_is_perfect("rmse", 1e-3)
    assert metrics.reference_is_perfect("r2", 0.99995)
