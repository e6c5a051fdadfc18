import numpy as np
import pytest

from lawlab.judging import metrics


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


def test_perfect_reference_tolerance_is_free_of_units():
    """Issue #17: an absolute 1e-4 called an RMSE of 5e-5 'perfect' whatever the
    units. The tolerance is now relative to the group's spread: the same data in
    grams and in tonnes get the same verdict."""
    rng = np.random.default_rng(3)
    grams = rng.normal(500.0, 50.0, 40)
    rmse_g = 0.004  # 1e-4 of a 50 g spread is 0.005: perfect
    assert metrics.reference_is_perfect("rmse", rmse_g, grams)
    assert metrics.reference_is_perfect("rmse", rmse_g * 1e-6, grams * 1e-6)  # tonnes
    # a tiny absolute error on a tiny scale is not perfect when it is large relative
    # to the spread (the old rule said perfect)
    tonnes = grams * 1e-6
    assert not metrics.reference_is_perfect("rmse", 5e-5, tonnes)
    assert not metrics.reference_is_perfect("mse", 1e-5, tonnes)
    # scale-free metrics keep the plain tolerance
    assert metrics.reference_is_perfect("smape", 5e-5, grams)
    assert not metrics.reference_is_perfect("log_mae", 2e-4, grams)


def test_best_reference_never_anchors_on_a_failed_group():
    """Issue #17: the anchor was chosen by the nanmean of its group metrics, so a
    reference that failed on one group (NaN) but was excellent elsewhere became
    the anchor and every S_N on that group was NaN."""
    per_group = {
        "flaky": {"g1": 0.1, "g2": float("nan"), "g3": 0.1},  # best mean, fails g2
        "solid": {"g1": 0.5, "g2": 0.6, "g3": 0.4},
    }
    assert metrics.best_reference("rmse", per_group) == "solid"
    assert metrics.best_reference("r2", {"a": {"g": 0.9}, "b": {"g": 0.95}}) == "b"
    # if none scores every group: the one that scores the most
    assert metrics.best_reference("rmse", {"a": {"g1": float("nan"), "g2": 0.1},
                                            "b": {"g1": float("nan"), "g2": float("nan")}}) == "a"
