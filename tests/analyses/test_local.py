"""The `local` analysis end to end (study file -> pipeline -> analysis.json, report), against
analytic sensitivities: exponential decay, logistic growth, a damped mass and spring, the
equation-model library (exact against central differences), and a product of parameters that
no output can split."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from conftest import STUDIES, run_cli, write_study

import studyrun

DECAY = """
name: decay-local
model:
  type: ode
  time: {start: 0, stop: 10, step: 0.5}
  states: {y: y0}
  rates: {y: -k * y}
  constants: {k: 0.3, y0: 2.0}
parameters:
  k: {bounds: [0.1, 0.5]}
  y0: {bounds: [1, 3]}
analysis: {type: local, outputs: [y], method: METHOD}
execution: {scheduler: sync, batch_size: 16}
"""


def run(folder, text, name="study.yaml"):
    return studyrun.run(write_study(folder, text, name), folder / name.replace(".yaml", ""), report=False)


def functions(entry):
    return {p: np.array(v, dtype=float) for p, v in entry["functions"]["normalised"].items()}


@pytest.mark.slow
@pytest.mark.parametrize("method, tolerance", [("central", 1e-6), ("forward", 1e-3),
                                               ("exact", 1e-7)])
def test_exponential_decay_has_sensitivities_minus_k_t_and_one(tmp_path, method, tolerance):
    result = run(tmp_path, DECAY.replace("METHOD", method))
    entry = result.results["y"]
    t = np.array(entry["functions"]["time"])
    s = functions(entry)
    assert entry["method"] == method
    assert np.allclose(s["k"], -0.3 * t, rtol=tolerance, atol=tolerance)
    assert np.allclose(s["y0"], 1.0, rtol=tolerance)
    assert entry["L1"]["k"] == pytest.approx(0.3 * t.mean(), rel=tolerance)
    assert entry["L2"]["k"] == pytest.approx(0.3 * math.sqrt(np.mean(t ** 2)), rel=tolerance)
    assert entry["min"]["k"] == pytest.approx(-3.0, rel=tolerance)
    assert entry["mean"]["y0"] == pytest.approx(1.0, rel=tolerance)
    assert entry["ranking"] == ["k", "y0"] == result.results["ranking"]
    assert entry["points"] == len(t) == 21  # the start is included
    runs = {"central": 5, "forward": 3, "exact": 1}[method]
    assert result.analysis["runs"]["planned"] == runs
    assert result.analysis["design"]["nominal"] == {"k": 0.3, "y0": 2.0}


LOGISTIC = """
name: logistic-local
model: {file: models/logistic.yaml}
parameters:
  rate: {bounds: [0.3, 0.5]}
  capacity: {bounds: [800, 1200]}
  initial_population: {bounds: [5, 20]}
analysis: {type: local, outputs: [population], method: exact, compare: [central]}
execution: {scheduler: sync, batch_size: 16}
"""


def test_logistic_growth_against_its_analytic_sensitivities(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "logistic.yaml").write_text((STUDIES / "models" / "logistic.yaml")
                                                       .read_text())
    result = run(tmp_path, LOGISTIC)
    entry = result.results["population"]
    t = np.array(entry["functions"]["time"])
    r, K, x0 = 0.4, 1000.0, 10.0
    e = np.exp(-r * t)
    a = K / x0 - 1
    x = K / (1 + a * e)
    expected = {"rate": r / x * K * a * t * e / (1 + a * e) ** 2,
                "capacity": K / x * (1 / (1 + a * e) - K * e / x0 / (1 + a * e) ** 2),
                "initial_population": x0 / x * K * K / x0 ** 2 * e / (1 + a * e) ** 2}
    for p, s in functions(entry).items():
        assert np.allclose(s, expected[p], rtol=1e-7, atol=1e-9), p
    agreement = result.results["agreement"]["exact vs central"]
    assert agreement["M"] == agreement["Tr"] == 100.0
    gaps = agreement["outputs"]["population"]["max_relative_difference"]
    assert max(gaps.values()) < 1e-5
    assert any("rtol=1e-10" in note for note in result.results["notes"])  # solver tightened


SPRING = """
name: spring-local
model:
  type: ode
  time: {start: 0, stop: 8, step: 0.1}
  rtol: 1.0e-9
  atol: 1.0e-12
  states: {position: initial_position, velocity: 0}
  rates:
    position: velocity
    velocity: -(damping * velocity + stiffness * position) / mass
  constants: {mass: 1.0, stiffness: 4.0, damping: 0.4, initial_position: 1.0}
parameters:
  stiffness: {bounds: [3, 5]}
  damping: {bounds: [0.2, 0.6]}
  initial_position: {bounds: [0.5, 1.5]}
analysis:
  type: local
  outputs: [position]
  method: METHOD
  output_scale: {position: 1.0}   # the position crosses zero
execution: {scheduler: sync, batch_size: 16}
"""


def spring_position(t, k, c, x0, m=1.0):
    """The underdamped solution with v0 = 0; analytic in k, c and x0 (complex arguments too)."""
    w0 = np.sqrt(k / m)
    zeta = c / (2 * np.sqrt(k * m))
    wd = w0 * np.sqrt(1 - zeta ** 2)
    return np.exp(-zeta * w0 * t) * (x0 * np.cos(wd * t) + zeta * w0 * x0 / wd * np.sin(wd * t))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["exact", "central"])
def test_damped_mass_spring_against_analytic_sensitivities(tmp_path, method):
    result = run(tmp_path, SPRING.replace("METHOD", method))
    entry = result.results["position"]
    t = np.array(entry["functions"]["time"])
    nominal = {"stiffness": 4.0, "damping": 0.4, "initial_position": 1.0}
    for p, s in functions(entry).items():
        args = dict(k=4.0, c=0.4, x0=1.0)
        key = {"stiffness": "k", "damping": "c", "initial_position": "x0"}[p]
        args[key] = args[key] + 1e-30j  # complex step: the analytic derivative to rounding
        exact = nominal[p] * spring_position(t, **args).imag / 1e-30  # output_scale 1: p dy/dp
        assert np.max(np.abs(s - exact)) < 1e-5 * np.max(np.abs(exact)), p
    assert entry["excluded_points"] == 0


LIBRARY = ["logistic", "lotka_volterra", "mass_spring", "sir", "flowers", "sales_force",
           "daisyworld"]


@pytest.mark.slow
@pytest.mark.parametrize("name", LIBRARY)
def test_exact_agrees_with_central_differences_on_the_model_library(tmp_path, name):
    spec = yaml.safe_load((STUDIES / "models" / f"{name}.yaml").read_text())
    states = list(spec.get("states") or spec["stocks"])
    numbers = [(k, v) for k, v in spec["constants"].items()
               if isinstance(v, (int, float)) and v][:4]
    study = {"name": name, "model": spec,
             "parameters": {k: {"bounds": [0.5 * v, 1.5 * v]} for k, v in numbers},
             "analysis": {"type": "local", "outputs": states, "method": "exact",
                          "compare": ["central"], "delta": 1e-5, "partition": False},
             "execution": {"scheduler": "sync", "batch_size": 16}}
    result = run(tmp_path, yaml.safe_dump(study))
    differentiable = name not in ("flowers", "sales_force", "daisyworld")  # lookups, max()
    assert result.results[states[0]]["method"] == ("exact" if differentiable else "central")
    if not differentiable:
        assert any("exact sensitivities are not available" in n for n in result.results["notes"])
        return
    compared = result.results["agreement"]["exact vs central"]
    worst = max(v for entry in compared["outputs"].values()
                for v in entry["max_relative_difference"].values())
    assert worst < 1e-5
    assert compared["Tr"] == 100.0


STOCKFLOW = """
name: euler-local
model:
  type: stockflow
  time: {start: 0, stop: 30, step: 0.25, save_every: 1}
  stocks: {population: {initial: initial_population, inflows: [births], outflows: [deaths]}}
  flows:
    births: rate * population * (1 - population / capacity)
    deaths: mortality * population
  constants: {rate: 0.5, capacity: 500, mortality: 0.1, initial_population: 20}
parameters:
  rate: {bounds: [0.4, 0.6]}
  capacity: {bounds: [400, 600]}
  mortality: {bounds: [0.05, 0.15]}
analysis: {type: local, outputs: [population, births], method: exact, compare: [central]}
execution: {scheduler: sync, batch_size: 16}
"""


@pytest.mark.slow
@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_exact_sensitivities_of_a_fixed_step_stockflow_are_those_of_its_discrete_solution(
        tmp_path, method):
    result = run(tmp_path, STOCKFLOW.replace("save_every: 1}", f"save_every: 1}}\n  method: {method}"))
    compared = result.results["agreement"]["exact vs central"]
    for output in ("population", "births"):
        assert max(compared["outputs"][output]["max_relative_difference"].values()) < 1e-6
    assert result.results["population"]["method"] == "exact"


PRODUCT = """
name: product
model:
  type: ode
  time: {start: 0, stop: 5, step: 0.25}
  states: {y: 1, u: 1, v: 1}
  rates: {y: a * b, u: a, v: b}
  constants: {a: 2.0, b: 3.0}
parameters:
  a: {bounds: [1, 3]}
  b: {bounds: [2, 4]}
analysis: {type: local, outputs: OUTPUTS, method: METHOD}
execution: {scheduler: sync, batch_size: 16}
"""


@pytest.mark.slow
@pytest.mark.parametrize("method", ["exact", "central"])
def test_parameters_entering_only_as_a_product_are_not_identifiable(tmp_path, method):
    product = run(tmp_path, PRODUCT.replace("OUTPUTS", "[y]").replace("METHOD", method), "y.yaml")
    collinearity = product.results["collinearity"]
    index = collinearity["subsets"][0]["index"]
    assert index is None or index > 1e4  # None: infinite
    assert collinearity["largest_identifiable_size"] == 1
    apart = run(tmp_path, PRODUCT.replace("OUTPUTS", "[u, v]").replace("METHOD", method), "uv.yaml")
    assert apart.results["collinearity"]["subsets"][0]["index"] == pytest.approx(1.0, abs=1e-6)
    assert apart.results["collinearity"]["identifiable"] == [["a", "b"]]


PYTHON = '''
import numpy as np

def growth(a, b):
    if a > 1.00005:  # the run with a + h fails
        raise ValueError("a is too large")
    t = np.linspace(0.0, 2.0, 11)
    return {"time": t, "y": a * np.exp(b * t)}
'''

PYTHON_STUDY = """
name: python-local
model: {type: python, function: "growthmodel:growth"}
parameters:
  a: {bounds: [0.5, 1.5], nominal: 1.0}
  b: {bounds: [0.1, 0.5], nominal: 0.3}
analysis: {type: local, outputs: [y], method: exact, partition: false}
execution: {scheduler: sync, on_failure: continue}
"""


@pytest.mark.slow
def test_python_model_falls_back_to_differences_and_a_failed_run_leaves_a_gap(tmp_path):
    (tmp_path / "growthmodel.py").write_text(PYTHON)
    result = run(tmp_path, PYTHON_STUDY)
    entry = result.results["y"]
    assert entry["method"] == "central"
    assert entry["L1"]["a"] is None and entry["ranking"] == ["b", "a"]
    t = np.linspace(0, 2, 11)
    assert entry["L1"]["b"] == pytest.approx(np.mean(0.3 * t), rel=1e-6)
    notes = " ".join(result.results["notes"])
    assert "need an ode or stockflow model" in notes and "failed for a" in notes
    assert "partition" not in result.results


@pytest.mark.parametrize("analysis, message", [
    ("{type: local, outputs: [popluation]}", "the model has no output 'popluation'; did you mean "
                                             "'population'?"),
    ("{type: local, outputs: [ranking]}", "an output cannot be called 'ranking'"),
    ("{type: local, outputs: [population], output_scale: {growth: 1}}", "not one of the outputs"),
    ("{type: local, outputs: [population, population]}", "each output once"),
    ("{type: local, outputs: [population], delta: 2}", "less than 1"),
])
def test_mistakes_are_reported_where_they_are(tmp_path, analysis, message):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "logistic.yaml").write_text((STUDIES / "models" / "logistic.yaml")
                                                       .read_text())
    text = LOGISTIC.replace("{type: local, outputs: [population], method: exact, "
                            "compare: [central]}", analysis)
    with pytest.raises(studyrun.StudyError) as error:
        studyrun.load(write_study(tmp_path, text))
    assert message in str(error.value) and "analysis" in str(error.value)


@pytest.mark.slow
def test_example_study_runs_from_the_command_line_and_resumes(tmp_path):
    out = tmp_path / "out"
    done = run_cli("run", STUDIES / "logistic-local.yaml", "--out", out, "--quiet")
    assert done.returncode == 0, done.stderr
    analysis = json.loads((out / "analysis.json").read_text())
    results = analysis["results"]
    assert {"population", "growth", "ranking", "collinearity", "partition", "agreement",
            "notes"} <= set(results)
    for key in ("L1", "L2", "mean", "min", "max", "ranking"):
        assert key in results["population"]
    assert results["population"]["method"] == "exact"
    report = (out / "report.md").read_text()
    assert "figures/local-population.png" in report and "Collinearity" in report
    # initial_population only sets x(0): its partition coefficient is 0 by definition, and says so
    assert results["partition"]["full"]["model"]["initial_population"] == 0.0
    assert results["partition"]["initial_state_only"] == {"initial_population": ["population"]}
    l1 = results["population"]["L1"]["initial_population"]
    assert l1 > 0.1
    note = next(n for n in results["notes"] if n.startswith("partition: initial_population"))
    assert "coefficients are 0" in note and f"population {l1:.4g}" in note
    assert note in report and "Parameters that only set initial states (initial_population)" in report
    again = studyrun.run(STUDIES / "logistic-local.yaml", out)
    assert again.analysis["runs"]["reused"] == 7
    assert again.results["population"]["L1"] == results["population"]["L1"]


def test_quantities_get_their_normalised_derivatives_by_differences(tmp_path):
    text = DECAY.replace("METHOD", "central").replace(
        "analysis:", "quantities: {final_y: final(y), peak: max(y)}\nanalysis:")
    quantities = run(tmp_path, text).results["quantities"]
    assert quantities["final_y"]["value"] == pytest.approx(2 * math.exp(-3), rel=1e-8)
    assert quantities["final_y"]["normalised"]["k"] == pytest.approx(-3.0, rel=1e-6)  # -k T
    assert quantities["final_y"]["derivative"]["y0"] == pytest.approx(math.exp(-3), rel=1e-6)
    assert quantities["peak"]["normalised"] == {"k": pytest.approx(0.0, abs=1e-9),
                                                "y0": pytest.approx(1.0)}
    assert quantities["peak"]["ranking"] == ["y0", "k"]
    exact_only = run(tmp_path, text.replace("central", "exact"), "exact.yaml")
    assert "quantities" not in exact_only.results  # no difference runs to take them from
    assert any("compare: [central]" in n for n in exact_only.results["notes"])


def test_flowers_example_reaches_the_equilibrium_sensitivities(tmp_path):
    # equilibrium area = SA (1 - d / ig): S = 1 for SA, d / (ig - d) for ig, -d / (ig - d) for d
    result = studyrun.run(STUDIES / "flowers-local.yaml", tmp_path / "out", report=False)
    area = functions(result.results["area"])
    assert area["suitable_area"][-1] == pytest.approx(1.0, abs=1e-3)  # nearly settled at 20
    assert area["intrinsic_growth_rate"][-1] == pytest.approx(0.25, abs=1e-3)
    assert area["decay_rate"][-1] == pytest.approx(-0.25, abs=1e-3)
    assert abs(area["initial_area"][-1]) < 1e-3
    assert result.results["area"]["method"] == "central"
    partition = result.results["partition"]
    assert partition["clustering"]["points"] < partition["full"]["points"] == 161
    assert result.results["agreement"]["full vs clustering"]["Tr"] >= 80
