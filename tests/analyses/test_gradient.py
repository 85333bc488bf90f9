"""The `gradient` analysis end to end (study file -> pipeline -> analysis.json, report) against
analytic gradients: a linear chain of first-order reactions (Bateman's solution, differentiated)
and logistic growth; the three methods agree; a model with a lookup falls back and says why."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp
import yaml
from conftest import STUDIES, run_cli, write_study

import studyrun
import studyrun.analyses.gradient.objective as objective_module
from studyrun.analyses.gradient.objective import Objective, parse_objective

CHAIN = """
name: chain
model: {file: models/chain.yaml}
parameters:
  k1: {bounds: [0.5, 1.5]}
  k2: {bounds: [0.4, 1.2]}
  k3: {bounds: [0.3, 0.9]}
  k4: {bounds: [0.25, 0.75]}
  k5: {bounds: [0.2, 0.6]}
  k6: {bounds: [0.15, 0.45]}
  a1: {bounds: [0.5, 1.5]}
  a2: {bounds: [0.25, 0.75]}
  a3: {bounds: [0.1, 0.4]}
analysis: {type: gradient, objective: "OBJECTIVE", method: METHOD}
execution: {scheduler: sync}
"""

LOGISTIC = """
name: logistic
model: {file: models/logistic.yaml}
parameters:
  rate: {bounds: [0.3, 0.5]}
  capacity: {bounds: [800, 1200]}
  initial_population: {bounds: [5, 20]}
analysis: {type: gradient, objective: "OBJECTIVE", method: METHOD}
execution: {scheduler: sync}
"""


def study(folder, text, model, objective, method, name="study.yaml"):
    (folder / "models").mkdir(exist_ok=True)
    (folder / "models" / f"{model}.yaml").write_text((STUDIES / "models" / f"{model}.yaml")
                                                     .read_text())
    return write_study(folder, text.replace("OBJECTIVE", objective).replace("METHOD", method),
                       name)


def run(folder, *args, **kwargs):
    path = study(folder, *args, **kwargs)
    return studyrun.run(path, folder / path.stem, report=False)


def constants(model):
    return yaml.safe_load((STUDIES / "models" / f"{model}.yaml").read_text())["constants"]


def grid(model):
    time = yaml.safe_load((STUDIES / "models" / f"{model}.yaml").read_text())["time"]
    return np.arange(time["start"], time["stop"] + time["step"] / 2, time["step"])


def bateman_last():
    """x6(t) of the chain, from Bateman's solution with distinct rates: the amount a_s that
    starts in stage s reaches stage 6 as a_s prod_{j=s}^{5} k_j sum_{i=s}^{6} exp(-k_i t) /
    prod_{j=s..6, j != i} (k_j - k_i)."""
    t = sp.Symbol("t")
    k = sp.symbols("k1:7")
    a = sp.symbols("a1:4")
    x6 = 0
    for s in range(3):
        reach = sp.Mul(*k[s:5])
        x6 += a[s] * reach * sum(sp.exp(-k[i] * t) / sp.Mul(*[k[j] - k[i] for j in range(s, 6)
                                                              if j != i])
                                 for i in range(s, 6))
    return t, [*k, *a], x6


def logistic_population():
    t, r, K, x0 = sp.symbols("t rate capacity initial_population")
    return t, [r, K, x0], K / (1 + (K / x0 - 1) * sp.exp(-r * t))


def closed_form(formula, model):
    """The model's grid, its parameters' names and, from the closed form on that grid, the
    output and its derivative by each parameter: (1 + m, T)."""
    t, symbols, y = formula()
    values = constants(model)
    point = [values[str(s)] for s in symbols]
    times = grid(model)
    at = sp.lambdify([t, *symbols], [y, *[sp.diff(y, s) for s in symbols]], "numpy")
    series = np.array([np.broadcast_to(v, times.shape) for v in at(times, *point)])  # (1+m, T)
    return times, list(map(str, symbols)), series


def analytic(formula, model, objective):
    """J and dJ/dp of the objective, from the closed form on the model's grid: J is the
    weighted sum of the output on the grid the quantity computes (trapezoid rule, ...)."""
    times, names, series = closed_form(formula, model)
    weights = parse_objective(objective).weights(series[0], times)
    return float(weights @ series[0]), dict(zip(names, series[1:] @ weights))


def time_average(times, y, t0, t1):
    """y's time average over [t0, t1] by the trapezoid rule on the grid, each end between two
    grid times interpolated linearly: written out here, apart from studyrun's reductions."""
    inside = (times > t0) & (times < t1)
    ends = np.interp([t0, t1], times, y)
    return np.trapezoid(np.r_[ends[0], y[inside], ends[1]], np.r_[t0, times[inside], t1]) / (t1 - t0)


def assert_agrees(results, value, gradient, tolerance):
    """The value, and each p dJ/dp relative to the largest |p dJ/dp| (a component near 0 is
    known to that absolute accuracy only)."""
    nominal = {p: results["normalised"][p] * results["value"] / g if g else 0
               for p, g in results["gradient"].items()}
    assert results["value"] == pytest.approx(value, rel=1e-7)
    largest = max(abs(g * nominal[p]) for p, g in gradient.items())
    for p, g in gradient.items():
        assert abs(results["gradient"][p] - g) * abs(nominal[p]) <= tolerance * largest, p


@pytest.mark.parametrize("objective", ["final(x6)", "integral(x6)", "at(x6, 7.1)",
                                       "mean(x6, 2, 10)"])
@pytest.mark.parametrize("method", ["adjoint", "forward", "fd"])
def test_chain_of_reactions_against_its_analytic_gradient(tmp_path, method, objective):
    results = run(tmp_path, CHAIN, "chain", objective, method).results
    assert results["method"] == method and not any("used" in n for n in results["notes"])
    value, gradient = analytic(bateman_last, "chain", objective)
    assert_agrees(results, value, gradient, 1e-6)
    assert results["ranking"][0] == max(gradient, key=lambda p: abs(gradient[p] * constants(
        "chain")[p]))
    cost = results["cost"]
    assert cost["runs"] == (19 if method == "fd" else 1)
    if method == "adjoint":
        assert cost["backward_steps"] > 0 and cost["backward_seconds"] > 0
        # one backward solve from each weighted point of the grid to the one before, and to 0
        assert cost["integrations"] == 1 + {"final(x6)": 1, "integral(x6)": 80,
                                            "at(x6, 7.1)": 2, "mean(x6, 2, 10)": 33}[objective]


@pytest.mark.parametrize("objective", ["final(population)", "integral(population, 5, 15)",
                                       "max(population)"])
def test_logistic_growth_against_its_analytic_gradient_by_every_method(tmp_path, objective):
    value, gradient = analytic(logistic_population, "logistic", objective)
    found = {}
    for method in ("adjoint", "forward", "fd"):
        results = run(tmp_path, LOGISTIC, "logistic", objective, method,
                      f"{method}.yaml").results
        assert results["method"] == method
        assert_agrees(results, value, gradient, 1e-6)
        found[method] = np.array(list(results["gradient"].values()))
    scale = np.abs(found["forward"]) + 1e-12
    assert np.max(np.abs(found["adjoint"] - found["forward"]) / scale) < 1e-6


@pytest.mark.parametrize("method", ["adjoint", "forward", "fd"])
def test_a_mean_over_a_window_off_the_grid_is_the_time_average_and_so_is_its_gradient(
        tmp_path, method):
    """mean(x6, 2.1, 9.9) on a grid of 0.25: the time average with both ends interpolated;
    adjoint, forward and differences all give its derivative."""
    results = run(tmp_path, CHAIN, "chain", "mean(x6, 2.1, 9.9)", method).results
    times, names, series = closed_form(bateman_last, "chain")
    value, *derivatives = (time_average(times, row, 2.1, 9.9) for row in series)
    assert_agrees(results, value, dict(zip(names, derivatives)), 1e-6)


@pytest.mark.parametrize("method", ["adjoint", "forward", "fd"])
def test_the_maximum_over_a_window_off_the_grid_is_at_its_interpolated_end(tmp_path, method):
    """The logistic population grows: its largest value over [3.3, 7.7] (a grid of 0.5) is
    the one at 7.7, between two output times, and so is the derivative."""
    results = run(tmp_path, LOGISTIC, "logistic", "max(population, 3.3, 7.7)", method).results
    times, names, series = closed_form(logistic_population, "logistic")
    value, *derivatives = (float(np.interp(7.7, times, row)) for row in series)
    assert_agrees(results, value, dict(zip(names, derivatives)), 1e-6)


def test_auto_falls_back_to_differences_for_a_lookup_and_says_so(tmp_path):
    text = (STUDIES / "flowers-local.yaml").read_text().split("analysis:")[0] + (
        "analysis: {type: gradient, objective: integral(area)}\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "flowers.yaml").write_text((STUDIES / "models" / "flowers.yaml")
                                                      .read_text())
    result = studyrun.run(write_study(tmp_path, text), tmp_path / "out")
    results = result.results
    assert results["method"] == "fd" and result.analysis["runs"]["planned"] == 9
    assert any("adjoint gradients are not available" in n and "growth_multiplier" in n
               and "central differences used" in n for n in results["notes"]), results["notes"]
    assert results["gradient"]["suitable_area"] > 0 > results["gradient"]["decay_rate"]
    assert "central differences used" in (tmp_path / "out" / "report.md").read_text()


STIFF = """
name: stiff
model:
  type: ode
  time: {start: 0, stop: 5, step: 0.1}
  method: METHOD
  states: {a: 1, b: 0, c: 0}
  rates: {a: -fast * a + slow * c, b: fast * a - medium * b, c: medium * b - slow * c}
  constants: {fast: 1.0e+4, medium: 1.0, slow: 0.05}
parameters:
  fast: {bounds: [5.0e+3, 2.0e+4]}
  medium: {bounds: [0.5, 2]}
  slow: {bounds: [0.01, 0.1]}
analysis: {type: gradient, objective: "OBJECTIVE", method: GRADIENT}
execution: {scheduler: sync}
"""


@pytest.mark.parametrize("method", ["Radau", "LSODA"])
def test_a_stiff_model_gives_the_same_gradient_by_adjoint_and_forward(tmp_path, method):
    text = STIFF.replace("METHOD", method).replace("OBJECTIVE", "integral(c)")
    adjoint = studyrun.run(write_study(tmp_path, text.replace("GRADIENT", "auto"), "a.yaml"),
                           tmp_path / "a", report=False).results
    forward = studyrun.run(write_study(tmp_path, text.replace("GRADIENT", "forward"), "f.yaml"),
                           tmp_path / "f", report=False).results
    assert adjoint["method"] == "adjoint" and forward["method"] == "forward"
    for p, g in forward["gradient"].items():
        assert adjoint["gradient"][p] == pytest.approx(g, rel=1e-6), p


def test_a_fixed_step_model_gets_forward_sensitivities_from_auto(tmp_path):
    text = LOGISTIC.replace("{file: models/logistic.yaml}", yaml.safe_dump(
        {**yaml.safe_load((STUDIES / "models" / "logistic.yaml").read_text()), "method": "rk4"},
        default_flow_style=True, width=1000).strip())
    auto = studyrun.run(write_study(tmp_path, text.replace("OBJECTIVE", "final(population)")
                                    .replace("METHOD", "auto"), "auto.yaml"), tmp_path / "a", report=False)
    fd = studyrun.run(write_study(tmp_path, text.replace("OBJECTIVE", "final(population)")
                                  .replace("METHOD", "fd"), "fd.yaml"), tmp_path / "f", report=False)
    assert auto.results["method"] == "forward"
    assert any("discrete solution exactly" in n for n in auto.results["notes"])
    for p, g in fd.results["gradient"].items():  # the derivative of the rk4 solution itself
        assert auto.results["gradient"][p] == pytest.approx(g, rel=1e-5), p


@pytest.mark.parametrize("text", ["final(y)", "initial(y, 0.3, 1)", "at(y, 0.35)", "at(y, 2)",
                                  "integral(y)", "integral(y, 0.25, 1.5)", "mean(y, 0.5, 2)",
                                  "max(y)", "min(y, 0.6, 2)", "max(y, 0, 0.2)"])
def test_objective_weights_give_the_quantity_a_run_reports(text, monkeypatch):
    """evaluate() is the quantities' own reduction; J = w @ y must give the same numbers, and
    the weights are the same whether the identity is evaluated whole or two rows at a time."""
    times = np.array([0.0, 0.1, 0.3, 0.5, 0.9, 1.4, 2.0])
    rng = np.random.default_rng(3)
    y = rng.normal(size=(4, len(times)))
    objective = parse_objective(text)
    assert np.allclose(objective.evaluate(y, times), [objective.weights(row, times) @ row
                                                      for row in y])
    whole = [objective.weights(row, times) for row in y]
    monkeypatch.setattr(objective_module, "IDENTITY_ROWS", 2)
    Objective._linear.cache_clear()
    Objective._points.cache_clear()
    assert all(np.array_equal(w, objective.weights(row, times)) for w, row in zip(whole, y))


@pytest.mark.parametrize("objective, message", [
    ("final(y) + 1", "one reduction of one output"),
    ("integral(2 * y)", "of one output of the model, by name"),
    ("at(y, capacity)", "are numbers"),
    ("final(popluation)", "the model has no output 'popluation'; did you mean 'population'?"),
    ("at(population, 50)", "outside the outputs' time span"),
    ("integral(population, 41, 50)", "holds no output time"),
])
def test_mistakes_are_reported_where_they_are(tmp_path, objective, message):
    path = study(tmp_path, LOGISTIC, "logistic", objective, "auto")
    with pytest.raises(studyrun.StudyError) as error:
        studyrun.load(path)
    assert message in str(error.value) and "analysis.objective" in str(error.value)


@pytest.mark.slow
def test_example_study_runs_from_the_command_line_and_resumes(tmp_path):
    out = tmp_path / "out"
    done = run_cli("run", STUDIES / "chain-gradient.yaml", "--out", out, "--quiet")
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "analysis.json").read_text())["results"]
    assert results["method"] == "adjoint" and results["ranking"][0] == "k6"
    value, gradient = analytic(bateman_last, "chain", "integral(x6)")
    assert_agrees(results, value, gradient, 1e-6)
    report = (out / "report.md").read_text()
    assert "## Gradient of J = integral(x6)" in report and "figures/gradient.png" in report
    again = studyrun.run(STUDIES / "chain-gradient.yaml", out)
    assert again.analysis["runs"]["reused"] == 1
    assert again.results["gradient"] == pytest.approx(results["gradient"], rel=1e-12)


# Gradient-driven fits: optimize and calibrate with method lbfgsb and `gradient:`

FIT = """
name: logistic-lbfgsb
seed: 3
model: {file: models/logistic.yaml}
parameters:
  initial_population: 0.1
  rate: {bounds: [0.05, 5], nominal: 2}
  capacity: {bounds: [1, 1000], nominal: 10}
analysis:
  type: calibrate
  method: lbfgsb
  gradient: GRADIENT
  data: {file: logistic.csv, format: long, x: time, y: value}
execution: {scheduler: sync}
"""


def logistic_fit(folder, gradient, name):
    t = np.arange(0, 31, 1.0)
    y = 100 / (1 + (100 / 0.1 - 1) * np.exp(-0.5 * t))
    (folder / "logistic.csv").write_text("name,time,value\n" + "".join(
        f"population,{a:g},{b:.17g}\n" for a, b in zip(t, y)))
    return study(folder, FIT.replace("GRADIENT", gradient), "logistic", "", "", name)


@pytest.mark.slow
def test_calibrate_with_adjoint_gradients_fits_in_far_fewer_runs(tmp_path):
    fits = {g: studyrun.run(logistic_fit(tmp_path, g, f"{g}.yaml"), tmp_path / g, report=False).results
            for g in ("adjoint", "forward", "fd")}
    for gradient, results in fits.items():
        estimate = {p: v["estimate"] for p, v in results["parameters"].items()}
        assert estimate == {"rate": pytest.approx(0.5, rel=1e-5),
                            "capacity": pytest.approx(100, rel=1e-5)}, gradient
        assert results["converged"] and results["gradient"]["method"] == gradient
        assert results["notes"] == []
    adjoint, fd = fits["adjoint"], fits["fd"]
    # the fit's runs: one per point L-BFGS-B asks for (and the statistics' Jacobian), against
    # three per point with forward differences
    assert adjoint["evaluations"]["runs"] < fd["evaluations"]["runs"] / 2
    assert adjoint["gradient"]["gradients"] == adjoint["evaluations"]["batches"] - 1
    assert adjoint["gradient"]["integrations"] > adjoint["gradient"]["gradients"]  # 1 + one back
    # from each observation time
    assert fits["forward"]["gradient"]["integrations"] == fits["forward"]["gradient"]["gradients"]


OPTIMIZE = """
name: logistic-optimize
seed: 3
model: {file: models/logistic.yaml}
parameters:
  rate: {bounds: [0.3, 0.5]}
  capacity: {bounds: [800, 1200]}
quantities: {middle: "at(population, 10.5)", last: final(population), both: QUANTITY}
analysis:
  type: optimize
  method: lbfgsb
  TERMS
  gradient: GRADIENT
execution: {scheduler: sync}
"""


def optimize(folder, terms, gradient, name, quantity="final(population) - at(population, 10)"):
    text = OPTIMIZE.replace("TERMS", terms).replace("GRADIENT", gradient).replace(
        "QUANTITY", f'"{quantity}"')
    path = study(folder, text, "logistic", "", "", name)
    return studyrun.run(path, folder / path.stem, report=False)


@pytest.mark.parametrize("terms", ["target: {middle: 400, last: 1000}",
                                   "target: {last: 900}\n  maximize: [middle]\n"
                                   "  weights: {middle: 0.01}"])
def test_optimize_with_adjoint_gradients_finds_the_optimum_differences_find(tmp_path, terms):
    adjoint = optimize(tmp_path, terms, "adjoint", "adjoint.yaml").results
    fd = optimize(tmp_path, terms, "fd", "fd.yaml").results
    assert adjoint["gradient"]["method"] == "adjoint" and adjoint["notes"] == []
    assert adjoint["gradient"]["gradients"] >= 2 and fd["gradient"] == {"method": "fd"}
    for p, entry in fd["parameters"].items():
        assert adjoint["parameters"][p]["optimum"] == pytest.approx(entry["optimum"], rel=1e-4), p
    assert adjoint["objective"]["final"] <= fd["objective"]["final"] + 1e-6 * abs(
        fd["objective"]["initial"])
    assert adjoint["evaluations"] * 2 < fd["evaluations"]


def test_optimize_falls_back_to_differences_for_a_quantity_of_two_reductions(tmp_path):
    result = optimize(tmp_path, "target: {both: 300}", "auto", "auto.yaml")
    assert result.results["gradient"] == {"method": "fd"}
    assert any("quantity 'both'" in n and "not one reduction" in n and "central differences" in n
               for n in result.results["notes"]), result.results["notes"]
    assert result.results["quantities"]["both"]["final"] == pytest.approx(300, abs=1e-3)


def test_a_resumed_optimization_with_adjoint_gradients_reuses_every_run(tmp_path):
    first = optimize(tmp_path, "target: {middle: 400, last: 1000}", "auto", "resume.yaml")
    again = optimize(tmp_path, "target: {middle: 400, last: 1000}", "auto", "resume.yaml")
    assert first.results["gradient"]["method"] == "adjoint"
    assert again.analysis["runs"]["reused"] == again.analysis["runs"]["planned"]
    assert again.analysis["runs"]["executed"] == 0
    same = ("parameters", "objective", "quantities", "evaluations", "progress")
    assert {k: again.results[k] for k in same} == {k: first.results[k] for k in same}


@pytest.mark.parametrize("analysis", [
    "{type: optimize, target: {last: 900}, gradient: adjoint}",
    "{type: calibrate, method: lm, gradient: adjoint, data: {file: logistic.csv}}",
])
def test_gradient_is_a_key_of_lbfgsb_only(tmp_path, analysis):
    text = LOGISTIC.replace('{type: gradient, objective: "OBJECTIVE", method: METHOD}', analysis)
    path = study(tmp_path, "quantities: {last: final(population)}\n" + text, "logistic", "", "")
    with pytest.raises(studyrun.StudyError) as error:
        studyrun.load(path)
    assert "gradient applies to method: lbfgsb" in str(error.value)
