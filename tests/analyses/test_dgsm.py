"""DGSM in the parameters' own units, bounded by each distribution's Poincare constant: exact
answers for normal and uniform inputs, convergence in N, SALib on the same runs, refusals."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from conftest import context_of, run_cli, write_study

from studyrun.analyses.dgsm import Dgsm, poincare_constant
from studyrun.blocks.params import Normal, Uniform
from studyrun.blocks.params.continuous import (
    Beta,
    Gamma,
    LogNormal,
    LogUniform,
    Triangular,
    TruncNormal,
)
from studyrun.core.design import Outcome

A, B = 2.0, 3.0
LOW, HIGH = -1.0, 2.0


def quadratic(x):
    """y = a x1 + b x2^2."""
    return A * x[:, 0] + B * x[:, 1] ** 2


def measures(parameters, samples, model=quadratic, delta=1e-4):
    spec = Dgsm(type="dgsm", samples=samples, delta=delta)
    design = spec.design(context_of(parameters), np.random.SeedSequence(5))
    y = model(design.matrix)
    result = spec.analyse(Outcome(design, {"y": y}, np.ones(len(y), bool)), context_of(parameters))["y"]
    json.dumps(result, allow_nan=False)
    return result, design


def test_normal_and_uniform_inputs_give_the_exact_measures_and_bounds():
    """x1 ~ N(1, 2^2), x2 ~ U(-1, 2): nu1 = a^2, nu2 = 4 b^2 E[x2^2]; dgsm_i = C_i nu_i / V
    with C1 = sigma^2, C2 = (high - low)^2 / pi^2; each is at least the total index."""
    sigma = 2.0
    parameters = {"x1": Normal(mean=1.0, std=sigma), "x2": Uniform(low=LOW, high=HIGH)}
    result, _ = measures(parameters, 4096)
    second = (LOW ** 2 + LOW * HIGH + HIGH ** 2) / 3
    fourth = (HIGH ** 5 - LOW ** 5) / (5 * (HIGH - LOW))
    variance = A ** 2 * sigma ** 2 + B ** 2 * (fourth - second ** 2)
    total = {"x1": A ** 2 * sigma ** 2 / variance, "x2": B ** 2 * (fourth - second ** 2) / variance}
    nu = {"x1": A ** 2, "x2": 4 * B ** 2 * second}
    constant = {"x1": sigma ** 2, "x2": (HIGH - LOW) ** 2 / math.pi ** 2}
    for name in parameters:
        assert result["poincare"][name] == pytest.approx(constant[name], rel=1e-12)
        assert result["vi"][name] == pytest.approx(nu[name], rel=1e-3)
        assert result["dgsm"][name] == pytest.approx(constant[name] * nu[name] / variance, rel=5e-3)
        assert result["dgsm"][name] >= total[name] * (1 - 5e-3)
    assert result["dgsm"]["x1"] == pytest.approx(total["x1"], rel=5e-3)  # tight for linear terms


def test_a_normal_parameter_converges_as_n_grows():
    """y = x1^2 + x2, x1 ~ N(0.5, 1): nu1 = 4 E[x1^2] = 5. Derivatives in quantile coordinates
    grew without limit here (7.4e3 at N = 1024, 1.0e5 at 65536)."""
    parameters = {"x1": Normal(mean=0.5, std=1.0), "x2": Uniform(low=0.0, high=1.0)}

    def model(x):
        return x[:, 0] ** 2 + x[:, 1]

    small, _ = measures(parameters, 1024, model)
    large, _ = measures(parameters, 16384, model)
    assert small["vi"]["x1"] == pytest.approx(large["vi"]["x1"], rel=0.01)
    assert large["vi"]["x1"] == pytest.approx(5.0, rel=0.01)
    assert small["dgsm"]["x1"] == pytest.approx(large["dgsm"]["x1"], rel=0.02)


def test_vi_and_its_interval_are_salibs_on_the_same_runs():
    from SALib.analyze import dgsm

    parameters = {"x1": Uniform(low=0.0, high=2.0), "x2": Uniform(low=LOW, high=HIGH)}
    result, design = measures(parameters, 512, delta=0.01)
    problem = {"num_vars": 2, "names": ["x1", "x2"], "bounds": [[0.0, 2.0], [LOW, HIGH]]}
    np.random.seed(design.info["analysis_seed"])
    reference = dgsm.analyze(problem, design.matrix, quadratic(design.matrix), num_resamples=100)
    for j, name in enumerate(parameters):
        assert result["vi"][name] == pytest.approx(reference["vi"][j], rel=1e-12)
        assert result["vi_std"][name] == pytest.approx(reference["vi_std"][j], rel=1e-12)
        assert result["vi_conf"][name] == pytest.approx(reference["dgsm_conf"][j], rel=1e-12)
        assert result["dgsm"][name] == pytest.approx(reference["dgsm"][j], rel=1e-12)  # uniform
    steps = design.matrix[1::3, 0] - design.matrix[0::3, 0]
    assert np.allclose(np.abs(steps), 0.02) and (design.matrix[:, 0] <= 2.0).all()


def test_poincare_constants_of_the_other_distributions():
    assert poincare_constant(Gamma(shape=1, scale=2)) == pytest.approx(16)  # exponential: 4 theta^2
    assert poincare_constant(TruncNormal(mean=0, std=1, low=-5, high=5)) == pytest.approx(1)
    assert poincare_constant(TruncNormal(mean=0, std=1, low=0, high=1)) == pytest.approx(
        1 / math.pi ** 2)
    assert poincare_constant(Triangular(low=0, high=1, mode=0.5)) == pytest.approx(
        1 / math.pi ** 2)  # 1 / rho(median)^2 = 1/4 is larger
    assert poincare_constant(Beta(alpha=50, beta=50)) == pytest.approx(
        1 / Beta(alpha=50, beta=50)._dist().pdf(0.5) ** 2)
    for refused in (LogNormal(mu=0, sigma=1), LogUniform(low=1, high=10),
                    Beta(alpha=0.5, beta=2), Gamma(shape=0.5, scale=1)):
        assert poincare_constant(refused) is None


MODEL = '''
import numpy as np

def quadratic(x1, x2):
    return 2.0 * np.asarray(x1) + 3.0 * np.asarray(x2) ** 2
'''

STUDY = """
name: dgsm-quadratic
model: {type: python, function: quadratic:quadratic, vectorized: true}
parameters:
  x1: {distribution: normal, mean: 1, std: 2}
  x2: X2
quantities:
  y: value
analysis: {type: dgsm, samples: 256, delta: 1.0e-4}
execution: {scheduler: sync}
"""


@pytest.mark.slow
def test_from_the_command_line_and_refused_without_a_constant(tmp_path):
    (tmp_path / "quadratic.py").write_text(MODEL)
    path = write_study(tmp_path, STUDY.replace("X2", f"{{distribution: uniform, low: {LOW}, "
                                                      f"high: {HIGH}}}"))
    done = run_cli("run", path, "--out", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stderr
    analysis = json.loads((tmp_path / "out" / "analysis.json").read_text())
    entry = analysis["results"]["y"]
    assert entry["vi"]["x1"] == pytest.approx(A ** 2, rel=1e-9)
    assert entry["poincare"] == {"x1": 4.0, "x2": pytest.approx(9 / math.pi ** 2)}
    assert analysis["design"]["poincare"]["x1"] == 4.0
    assert "| parameter | vi | vi_std | vi_conf | poincare | dgsm | dgsm_conf |" in (
        tmp_path / "out" / "report.md").read_text()
    path = write_study(tmp_path, STUDY.replace("X2", "{distribution: lognormal, mu: 0, sigma: 1}"),
                       "lognormal.yaml")
    done = run_cli("run", path, "--out", tmp_path / "refused", "--quiet")
    assert done.returncode == 2
    assert re.search(r"lognormal\.yaml:\d+:\d+: analysis\.type: dgsm bounds each total index by "
                     r"C nu / V.*uniform, bounds, normal, truncnormal.*not for parameters\.x2 "
                     r"\(lognormal\).*type: sobol", done.stderr), done.stderr
