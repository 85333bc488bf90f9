"""Reliability's FORM with the model's own gradients (`gradient: auto | adjoint | forward |
differences`): logistic growth whose rate is a sum of normal parameters has an analytic design
point, which the adjoint finds as differences do, with fewer runs, and with as many runs per
iteration at 50 parameters as at 5; the chain rule through correlated marginals; the SIR example's
peak against its analytic answer; batch sizes and SIGKILL; located refusals."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from conftest import STUDIES, killed_and_resumed, run_cli, write_study
from pydantic import TypeAdapter
from scipy.optimize import brentq

import studyrun
from studyrun.analyses.reliability.space import Transform
from studyrun.blocks.params.union import ParameterSpec

RHO = 0.5  # the correlation of rate and e1


def logistic(k: int, gradient: str, extra: str = "", correlated: bool = True,
             quantity: str = "final(population)", rate: str = "") -> str:
    """Logistic growth to t = 10 whose rate is rate + e1 + ... + ek (rate ~ N(0.4, 0.04), each e
    ~ N(0, 0.03 / sqrt(k))); it fails where the population ends above 700."""
    es = [f"e{i}" for i in range(1, k + 1)]
    return (f"""
name: logistic-reliability
model:
  type: ode
  time: {{start: 0, stop: 10, step: 0.5}}
  rtol: 1.0e-10
  atol: 1.0e-8
  states: {{population: initial_population}}
  rates: {{population: "({rate or ' + '.join(['rate'] + es)}) * population * (1 - population / capacity)"}}
  constants: {{rate: 0.4, capacity: 1000, initial_population: 10, {', '.join(e + ': 0' for e in es)}}}
parameters:
  rate: {{distribution: normal, mean: 0.4, std: 0.04}}
""" + "".join(f"  {e}: {{distribution: normal, mean: 0, std: {0.03 / math.sqrt(k)!r}}}\n" for e in es)
        + (f"correlation: [[rate, e1, {RHO}]]\n" if correlated else "")
        + f"""quantities: {{final_population: "{quantity}"}}
analysis:
  type: reliability
  method: form
  failure: "final_population > 700"
  gradient: {gradient}
  check_runs: 0
  max_runs: 5000{extra}
execution: {{scheduler: sync}}
""")


def analytic(k: int, correlated: bool = True) -> tuple[float, np.ndarray]:
    """beta and u* of the logistic study: the population ends above 700 where the summed rate
    R exceeds R* = ln((K / x0 - 1) / (K / 700 - 1)) / T; R = 0.4 + (L^T s) . u."""
    target = math.log((1000 / 10 - 1) / (1000 / 700 - 1)) / 10
    s = np.array([0.04] + [0.03 / math.sqrt(k)] * k)
    c = np.eye(k + 1)
    if correlated:
        c[0, 1] = c[1, 0] = RHO
    direction = np.linalg.cholesky(c).T @ s
    beta = (target - 0.4) / np.linalg.norm(direction)
    return beta, beta * direction / np.linalg.norm(direction)


def run(folder, text: str, **execution) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    path = write_study(folder, text)
    return studyrun.run(path, folder / "out", report=False, **execution).results


def standard(results: dict) -> np.ndarray:
    return np.array(list(results["design_point"]["standard"].values()))


def per_iteration(results: dict) -> list[int]:
    """The runs each iteration of the first search added."""
    return np.diff([r["runs"] for r in results["convergence"]]).tolist()


@pytest.mark.parametrize("exact", ["adjoint", "forward"])
def test_form_by_the_models_gradient_finds_the_analytic_design_point(tmp_path, exact):
    """Correlated rate and e1: the gradient goes through the Nataf transform's Cholesky factor."""
    beta, point = analytic(5)
    by = run(tmp_path / exact, logistic(5, exact))
    fd = run(tmp_path / "fd", logistic(5, "differences"))
    assert by["gradient"]["method"] == exact and fd["gradient"] == {"method": "differences"}
    # FORM stops at |g| <= 1e-6 |g(0)|: beta within 1e-5 of the answer (1.6e-3 low when it
    # stopped at 1e-3 |g(0)|), both alike
    assert by["beta"] == pytest.approx(beta, abs=1e-5) and fd["beta"] == pytest.approx(beta, abs=1e-5)
    assert by["beta"] == pytest.approx(fd["beta"], abs=2e-5)
    assert standard(by) == pytest.approx(standard(fd), abs=1e-4)
    assert standard(by) / np.linalg.norm(standard(by)) == pytest.approx(
        point / np.linalg.norm(point), abs=1e-5)
    assert by["converged"] and "warnings" not in by
    assert by["runs"] * 4 < fd["runs"], (by["runs"], fd["runs"])
    assert by["gradient"]["fallbacks"] == 0


def test_runs_per_iteration_do_not_grow_with_the_parameters(tmp_path):
    """5 and 50 parameters: one run per iteration (the line search's accepted trial) and one
    forward and one backward solve per gradient; differences need a run per parameter more."""
    found = {k + 1: run(tmp_path / str(k), logistic(k, "adjoint", "\n  design_points: false",
                                                    correlated=False)) for k in (4, 49)}
    for m, results in found.items():
        assert results["beta"] == pytest.approx(analytic(m - 1, False)[0], abs=1e-5)
        assert set(per_iteration(results)) == {1}, per_iteration(results)
        used = results["gradient"]
        assert used["integrations"] == 2 * used["gradients"] == 2 * results["iterations"]
    assert found[50]["runs"] == found[5]["runs"] <= 6
    fd = run(tmp_path / "fd", logistic(4, "differences", "\n  design_points: false",
                                       correlated=False))
    assert min(per_iteration(fd)) >= 5 + 1


def test_the_transform_carries_the_gradient_through_correlated_marginals():
    """dg/du = L^T (dg/dx * dx/dz) against central differences of g(x(u)), for five kinds of
    marginal and a full correlation."""
    parameters = {name: TypeAdapter(ParameterSpec).validate_python(spec) for name, spec in {
        "a": {"distribution": "lognormal", "mu": 0.3, "sigma": 0.4},
        "b": {"distribution": "uniform", "low": -1, "high": 2},
        "c": {"distribution": "triangular", "low": 0, "mode": 1, "high": 3},
        "d": {"distribution": "gamma", "shape": 2.5, "scale": 0.7},
        "e": {"distribution": "normal", "mean": 1, "std": 2}}.items()}
    rng = np.random.default_rng(4)
    root = rng.standard_normal((5, 5))
    covariance = root @ root.T + np.eye(5)
    correlation = covariance / np.sqrt(np.outer(np.diag(covariance), np.diag(covariance)))
    transform = Transform(parameters, correlation)

    def g(x):
        return x[:, 0] ** 2 * x[:, 1] + np.sin(x[:, 2]) * x[:, 3] - np.exp(0.1 * x[:, 4])

    for u in (np.array([0.3, -1.2, 0.8, 1.5, -0.4]), np.array([2.0, 1.0, -2.5, 0.2, 1.1])):
        x = transform.to_physical(u)[0]
        dgdx = np.array([2 * x[0] * x[1], x[0] ** 2, np.cos(x[2]) * x[3], np.sin(x[2]),
                         -0.1 * np.exp(0.1 * x[4])])
        h = 1e-6
        numeric = [(g(transform.to_physical(u + h * e)) - g(transform.to_physical(u - h * e)))[0]
                   / (2 * h) for e in np.eye(5)]
        assert transform.pull_back(u, dgdx) == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def sir_answer() -> tuple[float, np.ndarray]:
    """The SIR example's beta and u*: the peak is N - (N / R0)(1 + ln(R0 S0 / N)) and ln R0 =
    ln beta - ln gamma is normal, linear in u."""
    target = brentq(lambda r: 1000 - 1000 / r * (1 + math.log(r * 999 / 1000)) - 350, 1.5, 10)
    lower = np.linalg.cholesky(np.array([[1, 0.3], [0.3, 1]]))
    direction = lower.T @ np.array([0.2, -0.1])
    beta = math.log(target / 2) / np.linalg.norm(direction)
    return beta, beta * direction / np.linalg.norm(direction)


def sir_example(folder, change: tuple[str, str] = ("", ""), execution: str = ""):
    folder.mkdir(parents=True, exist_ok=True)
    text = (STUDIES / "sir-hospital-reliability.yaml").read_text().replace(*change)
    text = text.replace("  max_runs: 500", "  max_runs: 500\n  check_runs: 0")  # runs of FORM alone
    assert "check_runs: 0" in text
    return write_study(folder, text + execution)


@pytest.mark.slow
def test_the_sir_example_finds_the_analytic_peak_answer_by_the_adjoint(tmp_path):
    """The peak is the largest of the grid's values (a fiftieth of a day apart), a piecewise
    smooth function of the parameters: FORM by the adjoint lands within 1e-4 of beta and 0.005
    of u*."""
    beta, point = sir_answer()
    by = sir_by_the_adjoint(tmp_path)
    assert (tmp_path / "adjoint" / "out" / "report.md").read_text().count(
        "Gradients: the model's adjoint") == 1
    assert by["gradient"]["method"] == "adjoint" and by["converged"]
    assert by["beta"] == pytest.approx(beta, abs=1e-4)
    assert standard(by) == pytest.approx(point, abs=5e-3)


@pytest.mark.thorough
def test_differences_on_the_sir_example_agree_with_the_adjoint_in_twice_the_runs(tmp_path):
    """Differences (with a step of 1e-4 standard deviations) need more than twice the runs
    (81 against 34: the peak's kinks, where the grid's largest value moves from one point to the
    next, take the adjoint's search two more steps to |g| <= 1e-6 |g(0)| than to 1e-3)."""
    by = sir_by_the_adjoint(tmp_path)
    fd = studyrun.run(sir_example(tmp_path / "fd", ("gradient: auto ", "step: 0.0001\n  gradient: differences ")),
                      tmp_path / "fd" / "out", report=False).results
    assert fd["beta"] == pytest.approx(by["beta"], abs=1e-3)
    assert standard(fd) == pytest.approx(standard(by), abs=5e-3)
    assert 2 * by["runs"] <= fd["runs"]


def sir_by_the_adjoint(tmp_path) -> dict:
    """The SIR example's results by the adjoint, run from the command line."""
    done = run_cli("run", sir_example(tmp_path / "adjoint"), "--out", tmp_path / "adjoint" / "out",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / "adjoint" / "out" / "analysis.json").read_text())["results"]


def test_results_do_not_depend_on_the_batch_size(tmp_path):
    found = [run(tmp_path / str(size), logistic(5, "adjoint").replace(
        "execution: {scheduler: sync}", f"execution: {{scheduler: sync, batch_size: {size}}}"))
        for size in (1, "auto", 64)]
    dumped = [json.dumps(r, sort_keys=True) for r in found]
    assert dumped[0] == dumped[1] == dumped[2]
    assert found[0]["gradient"]["method"] == "adjoint"


@pytest.mark.slow
def test_the_adjoint_form_resumes_after_sigkill_with_the_same_result(tmp_path):
    path = write_study(tmp_path, logistic(5, "adjoint").replace(
        "execution: {scheduler: sync}", "execution: {scheduler: sync, batch_size: 1}"))
    stored, analysis = killed_and_resumed(path, tmp_path / "out", 6)
    assert 6 <= stored < analysis["results"]["runs"] - 1, stored
    assert analysis["runs"]["reused"] >= stored
    fresh = studyrun.run(path, tmp_path / "fresh", report=False)
    assert analysis["results"] == json.loads(json.dumps(fresh.results))


def test_auto_says_why_it_uses_differences_and_the_report_escapes_it(tmp_path):
    """The note quotes the study's quantity, written here with a '<': report.html escapes it."""
    path = write_study(tmp_path, logistic(2, "auto", quantity="final(population) + (1 < 2) - 1"))
    results = studyrun.run(path, tmp_path / "out").results
    assert results["gradient"] == {"method": "differences"}
    assert any("adjoint gradients are not available (quantity 'final_population' = "
               "final(population) + (1 < 2) - 1 is not one reduction" in n
               for n in results["notes"]), results["notes"]
    assert results["beta"] == pytest.approx(analytic(2)[0], abs=2e-3)
    html = (tmp_path / "out" / "report.html").read_text()
    assert "(1 &lt; 2) - 1 is not one reduction" in html and "(1 < 2)" not in html


def test_a_model_that_gives_no_value_stops_form_without_a_traceback(tmp_path):
    """sqrt of a negative rate: every run fails; the adjoint is never asked."""
    results = run(tmp_path, logistic(2, "adjoint", rate="sqrt(rate - 0.45 + e1 + e2)").replace(
        "scheduler: sync", "scheduler: sync, on_failure: continue"))
    assert results["pf"] is None and results["error"].startswith("the run at the median point")
    assert results["gradient"] == {"method": "adjoint", "gradients": 0, "integrations": 0,
                                   "fallbacks": 0}


def resistance_load(folder, change: tuple[str, str]):
    shutil.copy(STUDIES / "resistance_load.py", folder / "resistance_load.py")
    return write_study(folder, (STUDIES / "resistance-load-reliability.yaml").read_text()
                       .replace(*change))


@pytest.mark.parametrize("study, words", [
    (lambda f: resistance_load(f, ("max_runs: 2000", "gradient: adjoint\n  max_runs: 2000")),
     "analysis.gradient: adjoint gradients are not available: they need an ode or stockflow "
     "model; this one is python"),
    (lambda f: resistance_load(f, ("method: sorm", "method: subset\n  gradient: differences")),
     "analysis.gradient: gradient applies to method: form | sorm | importance, not subset"),
    (lambda f: write_study(f, logistic(2, "forward", quantity="final(population) - 1")),
     "analysis.gradient: forward gradients are not available: quantity 'final_population' = "
     "final(population) - 1 is not one reduction of one model output"),
    (lambda f: write_study(f, logistic(2, "adjoint", rate="max(rate, e1 + e2)")),
     "analysis.gradient: adjoint gradients are not available: the rate of 'population' has a "
     "kink (max) in a state or a parameter"),
])
def test_an_exact_gradient_that_cannot_be_had_is_refused_located(tmp_path, study, words):
    path = study(tmp_path)
    done = run_cli("validate", path)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, \
        done.stderr
    assert f"{path}:" in done.stderr and "use gradient: differences (or auto)" in done.stderr \
        or "gradient applies" in words


def test_sorm_takes_its_hessian_from_the_models_gradients_without_runs(tmp_path):
    """A lognormal rate bends the limit state; the curvatures from differences of adjoint
    gradients match those of the same surface written analytically (sum of the rates = R*),
    and cost no runs, where differences of g cost 2 d^2."""
    from studyrun.analyses.reliability.form import form

    text = logistic(2, "adjoint", "\n  design_points: false").replace(
        "method: form", "method: sorm").replace(
        "rate: {distribution: normal, mean: 0.4, std: 0.04}",
        "rate: {distribution: lognormal, mean: 0.4, std: 0.04}")
    by = run(tmp_path / "adjoint", text)
    fd = run(tmp_path / "fd", text.replace("gradient: adjoint", "gradient: differences"))
    target = math.log((1000 / 10 - 1) / (1000 / 700 - 1)) / 10
    path = write_study(tmp_path, text)
    transform = Transform(dict(studyrun.load(path).parameters),
                          np.array([[1, RHO, 0], [RHO, 1, 0], [0, 0, 1]]))
    reference = form(lambda u: target - transform.to_physical(u).sum(axis=1),
                     ["rate", "e1", "e2"], transform.named, 1e-6, 10_000, False, True)
    kappa = reference["sorm"]["curvatures"]
    assert min(map(abs, kappa)) < 1e-6 < max(map(abs, kappa))  # one direction bends
    assert by["sorm"]["curvatures"] == pytest.approx(kappa, abs=3e-3 * max(map(abs, kappa)))
    assert fd["sorm"]["curvatures"] == pytest.approx(kappa, abs=3e-3 * max(map(abs, kappa)))
    assert by["pf"] == pytest.approx(reference["pf"], rel=2e-2)
    assert by["runs"] == by["convergence"][-1]["runs"]  # the last step's, no Hessian's
    assert fd["runs"] >= fd["convergence"][-1]["runs"] + 2 * 3 ** 2


@pytest.mark.thorough
@pytest.mark.slow
def test_sorm_on_a_peak_takes_its_hessian_from_runs(tmp_path):
    """The gradient of a peak jumps where the grid point of the maximum changes, so differences
    of adjoint gradients would bend a flat limit state (curvature 0.027 here, pf 4% low):
    for a max or min SORM differences the runs instead, and finds it flat."""
    from scipy.special import ndtr

    beta, _ = sir_answer()
    path = sir_example(tmp_path, ("method: form", "method: sorm"))
    results = studyrun.run(path, tmp_path / "out", report=False).results
    assert results["gradient"]["method"] == "adjoint"
    assert abs(results["sorm"]["curvatures"][0]) < 3e-3
    assert results["pf"] == pytest.approx(float(ndtr(-beta)), rel=1e-2)
    assert results["runs"] >= results["convergence"][-1]["runs"] + 2 * 2 ** 2
