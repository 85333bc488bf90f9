"""method: mcmc through the pipeline: a linear model whose posterior is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import write_study

import studyrun

pytestmark = pytest.mark.slow  # MCMC chains (a module fixture of seconds)

MODEL = '''
import numpy as np

def series(a=1.0, b=1.0):
    t = np.linspace(0, 4, 5)
    a, b = np.asarray(a, float)[..., None], np.asarray(b, float)[..., None]
    return {"time": t, "A": a * t, "B": b * t ** 2}
'''
DATA = "name,time,value,sd\nA,0.5,1.0,0.5\nA,2,1.5,1\nA,3.5,3,2\nB,1.5,2,1\nB,3,10,2\n"
STUDY = """
name: linear-mcmc
seed: 12
model: {type: python, function: "linear_model:series", vectorized: true}
parameters:
  a: {bounds: [-3, 5], nominal: 1}
  b: {distribution: normal, mean: 2, std: 0.05}
analysis:
  type: calibrate
  method: mcmc
  data: {file: obs.csv, err: sd}
  mcmc: {iterations: 600, burnin: 150, chains: 4, prediction_draws: 50}
execution: {scheduler: sync}
"""


def truncated_normal(mean, sd, lo, hi):
    from scipy.stats import truncnorm

    dist = truncnorm((lo - mean) / sd, (hi - mean) / sd, loc=mean, scale=sd)
    return dist.mean(), dist.std()


@pytest.fixture(scope="session")  # once per test process, however pytest-xdist splits the module
def posterior(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mcmc")
    (folder / "linear_model.py").write_text(MODEL)
    (folder / "obs.csv").write_text(DATA)
    path = write_study(folder, STUDY)
    return studyrun.run(path, folder / "out"), path, folder


def test_the_posterior_matches_the_closed_form(posterior):
    result, _, _ = posterior
    mc = result.results["mcmc"]
    assert mc["error_variance"] == "fixed"  # every point has its error
    # A = a t with weights 1/sd^2: precision sum t^2/sd^2, mean sum t obs / sd^2 / precision
    precision_a = 0.25 / 0.25 + 4 / 1 + 12.25 / 4
    mean_a = (0.5 * 1 / 0.25 + 2 * 1.5 + 3.5 * 3 / 4) / precision_a
    a = mc["intervals"]["a"]
    assert a["mean"] == pytest.approx(mean_a, abs=0.08)
    assert a["sd"] == pytest.approx(1 / math.sqrt(precision_a), rel=0.15)
    # B = b t^2: the data's precision and the prior N(2, 0.05) combine; the box truncates
    precision_data = 6.25 / 1 + 81 / 4
    b_data = (2.5 * 2 + 9 * 10 / 4) / precision_data
    precision = precision_data + 1 / 0.05 ** 2
    mean = (precision_data * b_data + 2 / 0.05 ** 2) / precision
    lo, hi = 2 + 0.05 * np.array([-3.090232306, 3.090232306])  # the 0.1% and 99.9% quantiles
    expected_mean, expected_sd = truncated_normal(mean, 1 / math.sqrt(precision), lo, hi)
    b = mc["intervals"]["b"]
    assert b["mean"] == pytest.approx(expected_mean, abs=0.01)
    assert b["sd"] == pytest.approx(expected_sd, rel=0.15)
    assert b["lower"] < b["median"] < b["upper"]
    assert all(s["rhat"] < 1.1 for s in mc["intervals"].values())
    assert 0.1 < mc["acceptance_rate"] < 0.95


def test_traces_band_and_report(posterior):
    result, _, folder = posterior
    mc = result.results["mcmc"]
    assert len(mc["trace"]["a"]) == 4 and len(mc["trace"]["a"][0]) == 600 // mc["thin"]
    band = mc["prediction"]["B"]
    assert all(lo <= mid <= hi for lo, mid, hi in zip(band["lower"], band["median"], band["upper"]))
    assert band["median"][-1] == pytest.approx(16 * mc["intervals"]["b"]["median"], rel=0.01)
    report = (folder / "out" / "report.md").read_text()
    assert "### Posterior (MCMC)" in report and "mcmc-trace.png" in report and "mcmc-pairs.png" in report
    samples = (folder / "out" / "mcmc-samples.csv").read_text().splitlines()
    assert samples[0] == "chain,iteration,burnin,a,b" and len(samples) == 1 + 4 * 600 // mc["thin"]


def test_the_same_study_gives_the_same_chains_and_reuses_every_run(posterior):
    result, path, folder = posterior
    again = studyrun.run(path, folder / "out", report=False)
    assert again.analysis["runs"]["reused"] == again.analysis["runs"]["planned"]
    assert again.results["mcmc"]["intervals"] == result.results["mcmc"]["intervals"]
