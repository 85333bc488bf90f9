"""Quantities over time mean what they say: mean(x) is the time average by the trapezoid rule,
a window's ends between output times are interpolated, and runs stored when mean() was the
average of the points are not reused as if they were its new number."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STUDIES, run_cli, write_study
from scipy.integrate import solve_ivp, trapezoid

import studyrun
from studyrun.blocks.quantities import Quantities, parse_quantity
from studyrun.core.batch import ModelOutput, SeriesGroup

# x = t on a grid crowded near 0: t_k = 10 (k / 25)^4, 26 points over [0, 10], the first after
# 0.05 being 0.0615
RAMP = 10 * np.linspace(0, 1, 26) ** 4


def reduce(definitions: dict[str, str], time=RAMP, y=None) -> dict[str, float]:
    out = ModelOutput(1, groups=[SeriesGroup(np.array([0]), time,
                                             {"x": np.array([time if y is None else y])})])
    values = Quantities(definitions).evaluate(out, {})
    assert out.errors == [None], out.errors
    return {name: float(value[0]) for name, value in values.items()}


def test_a_ramp_on_a_crowded_grid_has_the_time_average_of_a_ramp():
    got = reduce({"mean": "mean(x)", "points": "mean_points(x)", "area": "integral(x)",
                  "window": "integral(x, 0.05, 10)", "window_mean": "mean(x, 0.05, 10)"})
    assert got["mean"] == pytest.approx(5, rel=1e-15)  # not 2.12, the average of the points
    assert got["points"] == pytest.approx(np.mean(RAMP), rel=1e-15)
    assert got["points"] == pytest.approx(2.120512, rel=1e-6)
    assert got["area"] == pytest.approx(50, rel=1e-15)
    assert got["window"] == pytest.approx(50 - 0.05 ** 2 / 2, rel=1e-15)  # 49.99875
    assert got["window_mean"] == pytest.approx((0.05 + 10) / 2, rel=1e-15)


def test_every_windowed_reduction_takes_the_window_ends_between_output_times():
    got = reduce({"top": "max(x, 0, 0.05)", "low": "min(x, 0.05, 7)", "first": "initial(x, 0.05, 7)",
                  "between": "integral(x, 0.04, 0.05)", "mean_between": "mean(x, 0.04, 0.05)",
                  "instant": "mean(x, 0.05, 0.05)", "past": "mean(x, 5, 20)"})
    assert got["top"] == pytest.approx(0.05) and got["low"] == pytest.approx(0.05)
    assert got["first"] == pytest.approx(0.05)
    assert got["between"] == pytest.approx((0.05 ** 2 - 0.04 ** 2) / 2)  # no output time inside
    assert got["mean_between"] == pytest.approx(0.045)
    assert got["instant"] == pytest.approx(0.05)  # a window of one instant: the value then
    assert got["past"] == pytest.approx(7.5)  # a window past the series is cut to it


def test_mean_points_keeps_the_grid_points_of_its_window():
    got = reduce({"points": "mean_points(x, 0.05, 10)"})
    assert got["points"] == pytest.approx(np.mean(RAMP[RAMP >= 0.05]))


@pytest.mark.parametrize("text", ["mean(x)", "mean(x, 10, 50)", "mean_points(x, 10, 50)",
                                  "integral(x, 10.1, 40)", "integral(x)", "mean_points(x)"])
def test_a_runs_reduction_does_not_depend_on_the_runs_in_its_batch(text):
    """The same series reduced alone and among six others, and handed in as a transposed view,
    give the same bits: numpy sums a strided row in another order, and a window's columns, cut
    by fancy indexing, were strided (a sweep's means changed with its batch size)."""
    time = np.arange(0, 50.0001, 0.25)
    series = np.random.default_rng(1).random((7, len(time))) * 10
    quantity = parse_quantity(text)
    together = quantity({"x": series, "time": np.broadcast_to(time, series.shape)})
    strided = quantity({"x": np.asfortranarray(series), "time": np.broadcast_to(time, series.shape)})
    alone = [quantity({"x": series[i:i + 1], "time": time[None]})[0] for i in range(len(series))]
    assert np.array_equal(together, alone) and np.array_equal(strided, alone)


@pytest.mark.parametrize("text, message", [
    ("mean(x, 3, 2)", "the window [3, 2] ends before it starts"),
    ("integral(x, 11, 12)", "the window [11, 12] holds no output time (outputs run from 0 to 10)"),
    ("mean_points(x, 0.04, 0.05)", "the window [0.04, 0.05] holds no output time"),
])
def test_a_window_that_cannot_be_reduced_fails_the_run_saying_why(text, message):
    out = ModelOutput(1, groups=[SeriesGroup(np.array([0]), RAMP, {"x": np.array([RAMP])})])
    values = Quantities({"q": text}).evaluate(out, {})
    assert np.isnan(values["q"][0]) and message in out.errors[0]


SIR = """
name: sir-mean
model: {file: models/sir.yaml}
parameters:
  beta: {bounds: [0.2, 0.4]}
  gamma: {bounds: [0.05, 0.15]}
quantities:
  mean_infected: mean(infected, 10, 60)
  mean_off_grid: mean(infected, 10.5, 60.25)
analysis: {type: sweep, cases: [{beta: 0.3, gamma: 0.1}]}
execution: {scheduler: sync}
"""


def fine_time_average(t0: float, t1: float) -> float:
    """The SIR model's infected averaged over [t0, t1]: scipy's trapezoid on a solve at 1/100
    day, the window's ends interpolated on it."""
    def rates(t, x, beta=0.3, gamma=0.1, population=1000):
        s, i, _ = x
        infection = beta * s * i / population
        return [-infection, infection - gamma * i, gamma * i]

    fine = np.linspace(0, 365, 36501)
    infected = solve_ivp(rates, (0, 365), [999, 1, 0], t_eval=fine, rtol=1e-11, atol=1e-12).y[1]
    inside = (fine > t0) & (fine < t1)
    times = np.r_[t0, fine[inside], t1]
    values = np.r_[np.interp(t0, fine, infected), infected[inside], np.interp(t1, fine, infected)]
    return trapezoid(values, times) / (t1 - t0)


def test_sir_mean_infected_is_its_time_average(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "sir.yaml").write_text((STUDIES / "models" / "sir.yaml").read_text())
    results = studyrun.run(write_study(tmp_path, SIR), tmp_path / "out", report=False).results
    # the model's grid is a day: the trapezoid rule on it is within 1e-4 of the fine solve's,
    # where the average of its 51 points was 1.3% low
    assert results["mean_infected"]["values"][0] == pytest.approx(fine_time_average(10, 60),
                                                                  rel=2e-4)
    assert results["mean_off_grid"]["values"][0] == pytest.approx(
        fine_time_average(10.5, 60.25), rel=2e-4)


DECAY = """
name: decay-mean
model: {type: python, function: "decay:decay"}
parameters: {k: {bounds: [0.2, 0.8]}}
quantities:
  QUANTITIES
analysis: {type: sweep, levels: 3}
execution: {scheduler: sync}
"""


def test_runs_stored_under_the_old_meaning_of_mean_are_made_again(tmp_path, monkeypatch):
    """A store whose runs were identified without the reductions' version (as before it) is
    not reused by a study calling mean(); one that calls neither mean() nor a window keeps
    its runs."""
    import studyrun.plan.study

    (tmp_path / "decay.py").write_text(
        "import numpy as np\nT = np.linspace(0, 10, 11) ** 2 / 10\n"
        "def decay(k):\n    return {'time': T, 'y': np.exp(-k * T)}\n")
    for quantities, reused in (("average: mean(y)", 0), ("end: final(y)", 3)):
        path = write_study(tmp_path, DECAY.replace("QUANTITIES", quantities))
        out = tmp_path / quantities.split(":")[0]
        with monkeypatch.context() as old:
            old.setattr(studyrun.plan.study, "meaning", lambda quantities: None, raising=False)
            studyrun.run(path, out, report=False)
        plan = run_cli("plan", path, "--out", out)
        assert plan.returncode == 0, plan.stderr
        if not reused:
            assert "what mean() and windowed reductions compute changed" in plan.stdout
        result = studyrun.run(path, out, report=False)
        assert result.analysis["runs"]["reused"] == reused
