import numpy as np
import pytest

from lawlab.worlds import world


def _synthetic_world(s: float = 1.0) -> world.World:
    """y = 2 x on [0, 10] with heavy-tailed, locally offset residuals (200 records)."""
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(0, 10, 200))
    resid = rng.standard_t(3, 200) * (0.5 + 0.3 * x) + 0.4 * np.sin(x)
    coords = world.Coordinates.fit({"x": x}, ["x"])
    spec = {"law": {"expr": "a * x", "constants": {"a": 2.0}}, "space": "linear",
            "inputs": ["x"], "support": {"x": [0.0, 10.0]}, "groups": [], "s": {"_all": s},
            "log_inputs": [], "center": coords.center.tolist(), "scale": coords.scale.tolist()}
    arrays = {"coords": coords.transform({"x": x}), "residuals": resid,
              "groups": np.full(200, "_all")}
    return world.World(spec, arrays)


def test_expected_r2_is_what_sampling_measures():
    """The exact moments of the smoothed bootstrap give the R^2 that sampling
    converges to (a world calibrated on them cannot sit at the edge by chance)."""
    w = _synthetic_world(0.6)
    points = {"x": np.linspace(0, 10, 50)}
    expected = w.expected_r2(points, None)
    sampled = [w.sampled_r2(points, None, np.random.default_rng(k), draws=400) for k in range(5)]
    assert abs(np.mean(sampled) - expected) < 0.003, (expected, sampled)
    assert 0.3 < expected < 0.99  # a case where the noise matters


def test_calibrated_scale_reaches_the_target_exactly_and_never_amplifies():
    w = _synthetic_world()
    points = {"x": np.linspace(0, 10, 50)}
    f = 2.0 * points["x"]
    m, v = w.noise_moments(points, None)
    s = world.calibrated_scale(f, m, v)
    assert 0 < s < 1
    assert world.expected_r2(f, s * m, s**2 * v) == pytest.approx(world.RHO_TARGET, abs=1e-9)
    # small noise is kept as it is
    assert world.calibrated_scale(f, 1e-6 * m, 1e-12 * v) == 1.0
    # a mean offset in the draws would count as error: with one the scale is smaller
    assert world.calibrated_scale(f, m + np.sqrt(v.mean()), v) < s


def test_the_world_regression_function_is_the_hidden_law():
    """The noise has mean zero at every point (issue #48: a neighbourhood's mean
    served as it was put a systematic wiggle into the world that a flexible rival
    fitted better than the hidden law)."""
    w = _synthetic_world(0.6)
    points = {"x": np.linspace(0, 10, 7)}
    m, v = w.noise_moments(points, None)
    assert np.all(m == 0) and np.all(v > 0)
    reps = 4000
    rep = {"x": np.repeat(points["x"], reps)}
    y = w.sample(rep, None, np.random.default_rng(3)).reshape(len(points["x"]), reps)
    f = w.mean(points, None)
    se = y.std(axis=1) / np.sqrt(reps)
    assert np.all(np.abs(y.mean(axis=1) - f) < 5 * se), (y.mean(axis=1) - f, se)


def test_structure_ratio_separates_structured_from_white_residuals():
    rng = np.random.default_rng(0)
    x = np.linspace(0, 1, 400)[:, None]
    white = rng.normal(size=400)
    structured = np.sin(6 * x[:, 0]) + 0.1 * rng.normal(size=400)
    assert world.structure_ratio(x, structured) > 0.8
    assert world.structure_ratio(x, white) < 0.2


def test_residual_space_choice():
    assert world.residual_space("log_mae", np.array([1.0, 2.0])) == "log10"
    assert world.residual_space("smape", np.array([0.1, 100.0])) == "log10"
    assert world.residual_space("smape", np.array([1.0, 2.0])) == "linear"
    assert world.residual_space("rmse", np.array([0.1, 1000.0])) == "linear"


def test_noise_neighbourhood_is_clipped():
    assert world.noise_k(10) == 8
    assert world.noise_k(200) == 30
    assert world.noise_k(10_000) == 64


def test_observe_repeats_each_point_clips_it_onto_the_support_and_draws_from_the_stream():
    """World.observe, the query path's sampling: n_samples rows per point in point
    order, a point outside the support evaluated on its edge and flagged, and the
    draws those of World.sample on the repeated, clipped inputs with the same stream."""
    w = _synthetic_world()
    asked = {"x": np.array([2.0, 12.0, 5.0])}
    seen = w.observe(asked, None, 4, np.random.default_rng(7))
    assert seen.point_index.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert seen.clipped.tolist() == [False] * 4 + [True] * 4 + [False] * 4
    assert seen.inputs["x"].tolist() == [2.0] * 4 + [10.0] * 4 + [5.0] * 4
    assert seen.groups is None
    again = w.sample({"x": seen.inputs["x"]}, None, np.random.default_rng(7))
    assert np.array_equal(seen.y, again)
    # the same point's samples differ (noise), and a different stream gives other draws
    assert len(set(seen.y[:4].tolist())) == 4
    other = w.observe(asked, None, 4, np.random.default_rng(8))
    assert not np.array_equal(seen.y, other.y)
