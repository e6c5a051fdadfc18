import numpy as np
import pytest

from lawlab import world


def test_calibration_factor_hits_rho_and_never_amplifies():
    # constructed: signal variance 9, residual variance 4
    s = world.calibration_factor(9.0, 4.0, rho=0.9)
    assert s == pytest.approx(np.sqrt(0.1 / 0.9 * 9 / 4))
    r2 = 9.0 / (9.0 + s * s * 4.0)
    assert r2 == pytest.approx(0.9)
    # the default aims at 0.92, so that the sampled R^2 stays >= 0.9
    s = world.calibration_factor(9.0, 4.0)
    assert 9.0 / (9.0 + s * s * 4.0) == pytest.approx(0.92)
    assert world.calibration_factor(100.0, 1e-6) == 1.0  # small noise is kept as is


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
