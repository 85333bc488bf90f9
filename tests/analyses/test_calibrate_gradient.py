"""Gradient matching on logistic growth: truthful convergence, the documented objective, and
parameters that only set an initial state (methods docs, gradient matching)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import STUDIES, run_cli, write_study

import studyrun

pytestmark = pytest.mark.slow  # calibration fits, the CLI in a subprocess

TIMES = np.arange(0, 31, 1.0)
STUDY = """
name: logistic-gm
seed: 3
model: {file: MODELS/logistic.yaml}
parameters:
  initial_population: X0
  rate: {bounds: [0.05, 5], nominal: RATE}
  capacity: {bounds: [1, 1000], nominal: 10}
analysis:
  type: calibrate
  method: METHOD
  data: {file: logistic.csv, format: long, x: time, y: value, window: WINDOW}
execution: {scheduler: sync}
"""


def logistic(t, K=100.0, r=0.5, x0=0.1):
    return K / (1 + (K / x0 - 1) * np.exp(-r * t))


def write(folder, method="gradient-matching", x0="0.1", window="[0, 30]", rate="0.1"):
    folder.mkdir(exist_ok=True)
    (folder / "logistic.csv").write_text("name,time,value\n" + "".join(
        f"population,{t:g},{v:.17g}\n" for t, v in zip(TIMES, logistic(TIMES))))
    text = (STUDY.replace("MODELS", str(STUDIES / "models")).replace("METHOD", method)
            .replace("X0", x0).replace("WINDOW", window).replace("RATE", rate))
    return write_study(folder, text)


def test_converged_at_the_optimum_with_the_documented_objective(tmp_path):
    """From rate 0.1, capacity 10 the last barrier stage cannot move (L-BFGS-B says ABNORMAL):
    that is the optimum, not a failure. The objective is sum_k ((f - dx~/dt) / scale)^2."""
    from scipy.interpolate import make_smoothing_spline

    results = studyrun.run(write(tmp_path), tmp_path / "out", report=False).results
    gm = results["gradient_matching"]
    assert results["converged"] is True, results["message"]
    assert results["message"].startswith("gradient matching converged: the mismatch is at its "
                                         "minimum within the bounds")
    assert "ABNORMAL" not in results["message"]
    assert gm["estimate"]["rate"] == pytest.approx(0.5, rel=1e-3)
    assert gm["estimate"]["capacity"] == pytest.approx(100, rel=1e-3)
    spline = make_smoothing_spline(TIMES, logistic(TIMES))
    x, slope = spline(TIMES), spline.derivative()(TIMES)
    r, K = gm["estimate"]["rate"], gm["estimate"]["capacity"]
    scale = np.sqrt(np.mean(slope ** 2))
    assert gm["objective"] == pytest.approx(np.sum(((r * x * (1 - x / K) - slope) / scale) ** 2),
                                            rel=1e-9)


def test_an_initial_state_parameter_is_taken_from_the_data_at_the_start(tmp_path):
    """initial_population only sets x(0): the right-hand side never reads it. It comes from the
    smoothed data at t = 0 and agrees with a trajectory fit's estimate."""
    x0 = "{bounds: [0.01, 1], nominal: 0.5}"
    matched = studyrun.run(write(tmp_path / "gm", x0=x0), tmp_path / "gm" / "out").results
    fitted = studyrun.run(write(tmp_path / "lm", "lm", x0=x0, rate="2"),
                          tmp_path / "lm" / "out", report=False).results
    gm = matched["gradient_matching"]
    assert gm["from_data_at_start"] == {"initial_population": ["population"]}
    assert matched["converged"] is True
    assert "initial_population from the smoothed data of population at time 0" in matched["message"]
    trajectory = fitted["parameters"]["initial_population"]["estimate"]
    assert trajectory == pytest.approx(0.1, rel=1e-5)
    assert gm["estimate"]["initial_population"] == pytest.approx(trajectory, rel=1e-4)
    estimate = matched["parameters"]["initial_population"]
    assert estimate["std_error"] < 1e-3 * estimate["estimate"]
    report = (tmp_path / "gm" / "out" / "report.md").read_text()
    assert "initial_population only sets the initial value of population" in report


def test_an_initial_state_parameter_without_data_at_the_start_is_refused(tmp_path):
    path = write(tmp_path, x0="{bounds: [0.01, 1], nominal: 0.5}", window="[2, 30]")
    done = run_cli("run", "--no-report", path, "--out", tmp_path / "out", "--quiet")
    assert done.returncode == 2, done.stderr
    assert re.search(r"study\.yaml:\d+:\d+: analysis\.method: gradient matching fits the "
                     r"right-hand side, which never reads 'initial_population'.*begin at time 2; "
                     r".*method: lm or trf", done.stderr), done.stderr
    assert "Traceback" not in done.stderr
