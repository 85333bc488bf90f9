"""Morris screening against known rankings (Sobol' G function), with real SALib."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import context_of
from pydantic import ValidationError

from studyrun.analyses.morris import Morris
from studyrun.blocks.params import Discrete, Uniform
from studyrun.core.design import Outcome
from studyrun.core.errors import StudyError

G_A = [0.0, 0.5, 3.0, 9.0, 27.0, 99.0]  # smaller a_i: more important input


def sobol_g(x, a=G_A):
    a = np.asarray(a)
    return np.prod((np.abs(4 * x - 2) + a) / (1 + a), axis=1)


def g_parameters():
    return {f"x{i + 1}": Uniform(low=0.0, high=1.0) for i in range(len(G_A))}


def run(spec, parameters, model, seed=7):
    design = spec.design(context_of(parameters), np.random.SeedSequence(seed))
    y = model(design.matrix)
    return Outcome(design=design, values={"y": y}, ok=np.ones(len(y), bool))


def test_morris_ranks_sobol_g_inputs_by_their_a():
    parameters = g_parameters()
    spec = Morris(type="morris", trajectories=50)
    outcome = run(spec, parameters, sobol_g)
    assert outcome.design.matrix.shape == (50 * 7, 6)
    result = spec.analyse(outcome, context_of(parameters))["y"]
    stars = [result["mu_star"][name] for name in parameters]
    assert stars == sorted(stars, reverse=True)
    assert set(result) >= {"mu", "mu_star", "sigma", "mu_star_conf", "effective_N"}
    json.dumps(result, allow_nan=False)


def test_linear_model_elementary_effects_are_coefficients_times_range():
    parameters = {"a": Uniform(low=0.0, high=2.0), "b": Uniform(low=10.0, high=11.0)}
    spec = Morris(type="morris", trajectories=10)
    result = spec.analyse(run(spec, parameters, lambda x: 3 * x[:, 0] - 5 * x[:, 1]),
                          context_of(parameters))["y"]
    # each step moves 2/3 of the range: effect / delta = coefficient * range
    assert result["mu"]["a"] == pytest.approx(6.0)
    assert result["mu"]["b"] == pytest.approx(-5.0)
    assert result["mu_star"]["b"] == pytest.approx(5.0)
    assert result["sigma"]["a"] == pytest.approx(0.0, abs=1e-9)


def test_failed_runs_drop_whole_trajectories():
    parameters = g_parameters()
    spec = Morris(type="morris", trajectories=50)
    outcome = run(spec, parameters, sobol_g)
    outcome.values["y"][[0, 3, 6, 7, 100]] = np.nan  # trajectories 0, 0, 0, 1, 14
    outcome.ok[200] = False  # trajectory 28
    result = spec.analyse(outcome, context_of(parameters))["y"]
    assert result["dropped_blocks"] == 4 and result["effective_N"] == 46
    assert any("dropped" in w for w in result["warnings"])
    stars = [result["mu_star"][name] for name in parameters]
    assert stars == sorted(stars, reverse=True)


def test_too_many_failures_give_an_error_entry():
    parameters = g_parameters()
    spec = Morris(type="morris", trajectories=4)
    outcome = run(spec, parameters, sobol_g)
    outcome.values["y"][0] = np.nan
    assert "error" in spec.analyse(outcome, context_of(parameters))["y"]


def test_optimal_trajectories_and_validation():
    parameters = g_parameters()
    spec = Morris(type="morris", trajectories=20, optimal_trajectories=5)
    design = spec.design(context_of(parameters), np.random.SeedSequence(1))
    assert design.matrix.shape == (5 * 7, 6) and design.info["trajectories"] == 5
    with pytest.raises(ValidationError, match="between 2 and trajectories"):
        Morris(type="morris", trajectories=5, optimal_trajectories=5)
    with pytest.raises(ValidationError, match="must be even for morris; got 5"):
        Morris(type="morris", levels=5)


def test_coarse_discrete_parameter_is_refused():
    parameters = {"a": Uniform(low=0.0, high=1.0), "d": Discrete(values=[1.0, 2.0], weights=[1, 19])}
    with pytest.raises(StudyError, match="same value of d"):
        Morris(type="morris", levels=6).design(context_of(parameters), np.random.SeedSequence(1))


def test_report_has_table_and_mu_star_sigma_plot(tmp_path):
    from studyrun.results.report.figures import Figures

    parameters = g_parameters()
    spec = Morris(type="morris", trajectories=10)
    outcome = run(spec, parameters, sobol_g)
    text = spec.report({"results": spec.analyse(outcome, context_of(parameters))}, outcome,
                       Figures(tmp_path / "figures"))
    assert "| x1 |" in text and "figures/morris-y.png" in text
    assert (tmp_path / "figures" / "morris-y.png").exists()
