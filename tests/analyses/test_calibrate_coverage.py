"""Confidence intervals of fitted parameters cover the truth at about their nominal rate
(at the fit level, with a fast analytic model instead of the whole pipeline)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import t as student

from studyrun.analyses.calibrate.calibration import summariser
from studyrun.analyses.calibrate.cost import CostFunction
from studyrun.analyses.calibrate.data import DataBlock, Observations, Variable
from studyrun.analyses.search.batching import Evaluations, lockstep
from studyrun.analyses.search.fit import Box, Settings, fit, jacobian, statistics
from studyrun.core.design import Design, Outcome

TIME = np.linspace(0, 10, 101)
TRUTH = np.array([100.0, 0.3])  # y0, k of y = y0 exp(-k t)
X = np.arange(0.5, 10, 0.5)


def decay(matrix):
    """An analytic 'model run' for each row of (y0, k)."""
    y0, k = matrix[:, :1], matrix[:, 1:]
    return Outcome(design=Design(["y0", "k"], matrix), values={}, ok=np.ones(len(matrix), bool),
                   series={"y": y0 * np.exp(-k * TIME)}, time=TIME)


def observations(rng, sigma):
    obs = TRUTH[0] * np.exp(-TRUTH[1] * X) + rng.normal(0, sigma, len(X))
    variable = Variable("y", "y", (1, 1), X, obs, None, [(1, 1)] * len(X))
    return [Observations(DataBlock(file="synthetic.csv"), 0, [variable])]


def fitted_interval(data, method="lm"):
    costs = CostFunction(data)
    box = Box(["y0", "k"], np.array([1.0, 0.01]), np.array([500.0, 3.0]), np.array([50.0, 1.0]))
    settings = Settings(method=method)
    evaluations = Evaluations(decay, summariser(costs))
    result = fit(evaluations, box.start, box, settings)
    J, r = jacobian(evaluations, result.estimate, box, settings)
    stats = statistics(J, r, result.estimate, box.names)
    half = student.ppf(0.975, stats["df"]) * stats["std_error"]
    return result.estimate, result.estimate - half, result.estimate + half, evaluations


@pytest.mark.slow
def test_95_percent_intervals_cover_the_truth_at_about_95_percent():
    seeds = 300
    covered = np.zeros(2)
    for seed in range(seeds):
        _, lower, upper, _ = fitted_interval(observations(np.random.default_rng(seed), sigma=3.0))
        covered += (lower <= TRUTH) & (TRUTH <= upper)
    rate = covered / seeds
    # binomial sd at 95% over 300 fits is 1.3%: allow about three of them either way
    assert np.all((0.91 <= rate) & (rate <= 0.99)), rate


def test_noise_free_data_are_fitted_exactly_and_the_jacobian_goes_out_as_one_batch():
    data = observations(np.random.default_rng(0), sigma=0.0)
    estimate, lower, upper, evaluations = fitted_interval(data)
    assert estimate == pytest.approx(TRUTH, rel=1e-7)
    assert evaluations.runs > evaluations.calls  # m + 1 rows per Jacobian batch


def test_multistart_fits_run_in_lockstep_batches():
    data = observations(np.random.default_rng(1), sigma=1.0)
    costs = CostFunction(data)
    box = Box(["y0", "k"], np.array([1.0, 0.01]), np.array([500.0, 3.0]), np.array([50.0, 1.0]))
    starts = [box.start, np.array([300.0, 0.05]), np.array([10.0, 2.5])]
    calls = []

    def counted(matrix):
        calls.append(len(matrix))
        return decay(matrix)

    evaluations = Evaluations(counted, summariser(costs))
    results = lockstep([lambda ask, s=s: fit(ask, s, box, Settings("trf")) for s in starts],
                       evaluations)
    alone = [fit(Evaluations(decay, summariser(costs)), s, box, Settings("trf")) for s in starts]
    for together, single in zip(results, alone):
        assert together.estimate.tolist() == single.estimate.tolist()  # batching changes nothing
    assert max(calls) > 3  # rows of several fits in one batch
    assert len(calls) < sum(len(r.progress) for r in results)
