"""studyrun's delta bootstrap against SALib's own (1.6): the same resamples, the same indices to
rounding, the same notes and errors, and numbers that do not depend on the threads."""

from __future__ import annotations

import numpy as np
import pytest
from SALib.analyze import delta as salib_delta
from scipy.stats import gaussian_kde

from studyrun.analyses.delta_bootstrap import calc_delta, density, in_threads, patched


def problem(d):
    return {"num_vars": d, "names": [f"x{i}" for i in range(d)], "bounds": [[0, 1]] * d}


def both(x, y, **options):
    """SALib's analyze as it is, and with studyrun's bootstrap."""
    plain = salib_delta.analyze(problem(x.shape[1]), x, y, seed=3, **options)
    with patched():
        fast = salib_delta.analyze(problem(x.shape[1]), x, y, seed=3, **options)
    return plain, fast


def test_indices_equal_salibs_to_rounding_with_tied_inputs():
    """A discrete input (ties, whose order decides the classes at their edges) and a
    continuous one: every index and half-width as SALib's, to 1e-13."""
    rng = np.random.default_rng(5)
    x = np.column_stack([rng.integers(0, 7, 400) / 7, rng.uniform(size=400)])
    y = x[:, 0] * 3 + np.sin(6 * x[:, 1]) + rng.normal(scale=0.1, size=400)
    plain, fast = both(x, y, num_resamples=4)
    for key in ("delta_balanced", "delta_balanced_conf", "delta_raw", "delta_raw_conf", "S1",
                "S1_conf"):
        np.testing.assert_allclose(fast[key], plain[key], rtol=1e-13, atol=1e-15)
    assert fast["notes"] == plain["notes"]


def test_a_class_of_equal_outputs_is_skipped_and_warned_of_as_salib_does():
    """Classes whose outputs are all equal are skipped; past 35% of them, SALib's warning."""
    rng = np.random.default_rng(2)
    x = rng.uniform(size=(300, 1))
    y = np.where(x[:, 0] < 0.6, 1.0, x[:, 0])
    with pytest.warns(UserWarning) as plain_warnings:
        plain = salib_delta.analyze(problem(1), x, y, seed=3, num_resamples=3)
    with pytest.warns(UserWarning) as fast_warnings, patched():
        fast = salib_delta.analyze(problem(1), x, y, seed=3, num_resamples=3)
    assert any("bins skipped" in str(w.message) for w in fast_warnings)
    assert {str(w.message) for w in fast_warnings} == {str(w.message) for w in plain_warnings}
    np.testing.assert_allclose(fast["delta_raw"], plain["delta_raw"], rtol=1e-13)


def test_a_resample_of_equal_outputs_fails_as_salibs():
    """Resamples that miss the one different output leave no spread to estimate a density
    from: SALib's error, not a division by zero."""
    x = np.linspace(0, 1, 100)[:, None]
    y = np.zeros(100)
    y[0] = 1.0
    with pytest.raises(ValueError, match="Singular matrix") as plain:
        salib_delta.analyze(problem(1), x, y, seed=3, num_resamples=20, method="delta")
    with pytest.raises(ValueError, match="Singular matrix") as fast, patched():
        salib_delta.analyze(problem(1), x, y, seed=3, num_resamples=20, method="delta")
    assert str(fast.value) == str(plain.value)


def test_density_and_delta_equal_scipys_and_salibs():
    rng = np.random.default_rng(4)
    y, x = rng.lognormal(size=1500), rng.uniform(size=1500)
    grid = np.linspace(y.min(), y.max(), 100)
    np.testing.assert_allclose(density(y, grid), gaussian_kde(y, "silverman")(grid),
                               rtol=1e-12, atol=1e-16)
    m = np.linspace(0, 1500, 12)
    value, warning = calc_delta(y, grid, x, m)
    assert value == pytest.approx(salib_delta.calc_delta(y, grid, x, m), rel=1e-13)
    assert warning is None


def test_numbers_do_not_depend_on_the_threads():
    rng = np.random.default_rng(6)
    x, y = rng.uniform(size=2000), rng.normal(size=2000)
    draws = [rng.integers(0, 2000, 2000) for _ in range(6)]
    grid, m = np.linspace(y.min(), y.max(), 100), np.linspace(0, 2000, 15)
    assert in_threads(draws, y, grid, x, m, threads=1) == in_threads(draws, y, grid, x, m,
                                                                       threads=3)
