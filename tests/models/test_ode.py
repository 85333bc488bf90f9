"""The ode model and the shared equations core: accuracy against analytic solutions, ensemble
independence, per-member failures, validation problems."""

from __future__ import annotations

import pickle
import time as clock
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from studyrun.core.batch import RunContext
from studyrun.core.errors import StudyError
from studyrun.models.base import HasEquations
from studyrun.models.command import Command
from studyrun.models.ode import Ode
from studyrun.models.python import Python

MODELS = Path(__file__).resolve().parents[2] / "studies" / "models"


def load(name: str, **changes) -> Ode:
    data = yaml.safe_load((MODELS / f"{name}.yaml").read_text())
    data.update(changes)
    return Ode.model_validate(data)


def spec(**fields) -> Ode:
    data = {"type": "ode", "time": {"start": 0, "stop": 1, "step": 0.1}}
    data.update(fields)
    return Ode.model_validate(data)


def messages(model: Ode) -> dict[str, str]:
    return {p.path: p.message for p in model.check(Path("."))}


def logistic_exact(t, x0, r, k):
    return k / (1 + (k / x0 - 1) * np.exp(-r * t))


# ---------------------------------------------------------------- accuracy


@pytest.mark.parametrize("method, tol", [("RK45", 1e-5), ("DOP853", 1e-5), ("LSODA", 1e-4),
                                         ("Radau", 1e-4), ("BDF", 1e-3), ("rk4", 1e-4)])
def test_logistic_matches_analytic_solution(method, tol):
    model = load("logistic", method=method)
    rates = np.array([0.2, 0.4, 0.8])
    out = model.build(Path(".")).integrate({"rate": rates})
    exact = logistic_exact(out.time[None, :], 10.0, rates[:, None], 1000.0)
    assert out.errors == [None] * 3
    np.testing.assert_allclose(out.series["population"], exact, rtol=tol, atol=tol * 1000)
    np.testing.assert_allclose(out.series["growth"],
                               rates[:, None] * exact * (1 - exact / 1000), rtol=50 * tol,
                               atol=tol * 1000)


def test_damped_mass_spring_matches_analytic_solution():
    model = load("mass_spring")
    damping = np.array([0.1, 0.4, 1.0])
    out = model.build(Path(".")).integrate({"damping": damping})
    t = out.time[None, :]
    w0, zeta = 2.0, damping[:, None] / (2 * 2.0)
    wd = w0 * np.sqrt(1 - zeta**2)
    exact = np.exp(-zeta * w0 * t) * (np.cos(wd * t) + zeta * w0 / wd * np.sin(wd * t))
    np.testing.assert_allclose(out.series["position"], exact, atol=1e-7)
    assert np.all(np.diff(out.series["energy"], axis=1) <= 1e-9)  # damping only removes energy


def test_sir_final_size_relation():
    model = load("sir")
    beta = np.array([0.2, 0.3, 0.5])
    out = model.build(Path(".")).integrate({"beta": beta})
    n, s0 = 1000.0, 999.0
    r0 = beta / 0.1
    s, i, r = (out.series[k] for k in ("susceptible", "infected", "recovered"))
    # along the whole trajectory: log(S0 / S) = R0 R / N; at the end I is gone
    np.testing.assert_allclose(np.log(s0 / s), r0[:, None] * r / n, rtol=1e-6, atol=1e-9)
    assert np.all(i[:, -1] < 1e-3)
    s_inf = s[:, -1]
    np.testing.assert_allclose(np.log(s0 / s_inf), r0 * (n - s_inf) / n, rtol=1e-5)
    np.testing.assert_allclose(s + i + r, n, rtol=1e-9)
    np.testing.assert_allclose(out.series["basic_reproduction_number"][:, 0], r0)


def test_lotka_volterra_conserves_its_invariant():
    out = load("lotka_volterra").build(Path(".")).integrate({})
    conserved = out.series["conserved"][0]
    np.testing.assert_allclose(conserved, conserved[0], rtol=1e-6)
    assert out.series["prey"].min() > 0 and np.ptp(out.series["prey"]) > 10  # it oscillates


def test_daisyworld_regulates_temperature():
    model = load("daisyworld")
    out = model.build(Path(".")).integrate({"luminosity": np.array([0.8, 1.0, 1.2])})
    final = out.series["planet_temperature_c"][:, -1]
    assert np.all(np.abs(final - 22.5) < 4)  # regulated near the daisies' optimum
    # a bare planet would warm by about 30 degrees over this range of luminosity
    bare = (917 * np.array([0.8, 1.2]) * 0.5 / 5.67e-8) ** 0.25
    assert bare[1] - bare[0] > 25 and abs(final[2] - final[0]) < 6
    assert np.all(out.series["white"][:, -1] > 0.05) and np.all(out.series["black"][:, -1] > 0.05)


def test_rk45_agrees_with_scipy_solve_ivp():
    from scipy.integrate import solve_ivp

    model = load("mass_spring", rtol=1e-6, atol=1e-9)
    out = model.build(Path(".")).integrate({})
    ref = solve_ivp(lambda t, y: [y[1], -(0.4 * y[1] + 4 * y[0])], (0, 20), [1.0, 0.0],
                    method="RK45", t_eval=out.time, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(out.series["position"][0], ref.y[0], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- ensembles


@pytest.mark.slow
@pytest.mark.parametrize("method", ["RK45", "euler", "rk4", "LSODA"])
def test_ensemble_results_equal_one_at_a_time(method):
    model = load("logistic", method=method, time={"start": 0, "stop": 20, "step": 0.5})
    evaluator = model.build(Path("."))
    rng = np.random.default_rng(7)
    count = 12 if method == "LSODA" else 64
    inputs = {"rate": rng.uniform(0.1, 2.0, count), "capacity": rng.uniform(500, 1500, count),
              "initial_population": rng.uniform(1, 100, count)}
    whole = evaluator.integrate(inputs)
    for m in range(count):
        alone = evaluator.integrate({k: v[m: m + 1] for k, v in inputs.items()})
        for name in whole.series:
            np.testing.assert_array_equal(whole.series[name][m], alone.series[name][0])
    half = evaluator.integrate({k: v[count // 2:] for k, v in inputs.items()})
    np.testing.assert_array_equal(whole.series["population"][count // 2:],
                                  half.series["population"])


def test_ensemble_of_a_large_system_equals_one_at_a_time():
    # nine states: error norms over states must not depend on the number of members
    names = [f"x{i}" for i in range(9)]
    rates = {n: f"-k * {n} + {i} * sin(time) + 0.01 * {names[i - 1]} ** 2"
             for i, n in enumerate(names)}
    model = spec(states={n: 1 for n in names}, rates=rates, constants={"k": 1.0},
                 time={"start": 0, "stop": 5, "step": 0.5})
    evaluator = model.build(Path("."))
    k = np.linspace(0.5, 2.0, 7)
    whole = evaluator.integrate({"k": k})
    for m in range(len(k)):
        alone = evaluator.integrate({"k": k[m:m + 1]})
        for name in names:
            np.testing.assert_array_equal(whole.series[name][m], alone.series[name][0])


@pytest.mark.slow
def test_a_failing_member_does_not_fail_the_batch():
    model = spec(states={"x": "x0"}, rates={"x": "x ** 2"}, constants={"x0": 1.0},
                 time={"start": 0, "stop": 2, "step": 0.5})
    x0 = np.array([0.1, 2.0, 0.2])  # x0 = 2 blows up at t = 0.5
    for method in ["RK45", "euler", "LSODA"]:
        out = model.build(Path(".")).integrate({"x0": x0}, method=method,
                                              step=0.001 if method == "euler" else None)
        assert out.errors[0] is None and out.errors[2] is None, method
        assert out.errors[1] and method in out.errors[1], (method, out.errors[1])
        np.testing.assert_allclose(out.series["x"][0], 0.1 / (1 - 0.1 * out.time), rtol=1e-3)


def test_evaluator_pickles_and_is_called_with_a_context():
    evaluator = load("logistic").build(Path("."))
    clone = pickle.loads(pickle.dumps(evaluator))
    context = RunContext(run_ids=np.arange(3, dtype=np.int64))
    inputs = {"rate": np.array([0.1, 0.2, 0.3])}
    a, b = evaluator(inputs, context), clone(inputs, context)
    assert a.n == 3 and a.series["population"].shape == (3, len(a.time))
    np.testing.assert_array_equal(a.series["population"], b.series["population"])
    assert clone(inputs, context).errors == [None] * 3


def test_batch_without_inputs_takes_its_size_from_the_context():
    out = load("logistic").build(Path("."))({}, RunContext(run_ids=np.arange(4)))
    assert out.series["population"].shape[0] == 4


def test_inputs_override_constants_and_reach_initial_values():
    model = spec(states={"x": "2 * x0"}, rates={"x": "-k * x"}, constants={"x0": 1.0, "k": 1.0},
                 method="rk4")
    out = model.build(Path(".")).integrate({"x0": np.array([1.0, 3.0])})
    np.testing.assert_allclose(out.series["x"][:, 0], [2.0, 6.0])
    np.testing.assert_allclose(out.series["x"][:, -1], [2 * np.exp(-1), 6 * np.exp(-1)],
                               rtol=1e-4)
    with pytest.raises(ValueError, match="unknown model input 'kk'"):
        model.build(Path(".")).integrate({"kk": np.ones(2)})
    with pytest.raises(ValueError, match="3 values for a batch of 2"):
        model.build(Path(".")).integrate({"x0": np.ones(2), "k": np.ones(3)})


def test_spec_reports_defaults_inputs_and_outputs():
    model = load("sir")
    assert model.defaults()["beta"] == 0.3
    assert model.input_names() == {"population", "initial_infected", "beta", "gamma"}
    assert model.output_names() == {"susceptible", "infected", "recovered", "infection",
                                    "recovery", "basic_reproduction_number"}


def test_fixed_step_ode_uses_dt_and_converges_when_halved():
    model = spec(states={"x": 1}, rates={"x": "-x"}, method="euler",
                 time={"start": 0, "stop": 1, "step": 0.5, "dt": 0.01})
    evaluator = model.build(Path("."))
    full, half = evaluator.integrate({}), evaluator.integrate({}, step=0.005)
    assert full.time.tolist() == [0.0, 0.5, 1.0]
    error_full = abs(full.series["x"][0, -1] - np.exp(-1))
    error_half = abs(half.series["x"][0, -1] - np.exp(-1))
    assert error_half == pytest.approx(error_full / 2, rel=0.05)


def test_time_dependent_forcing_and_lookups_in_an_ode():
    model = spec(states={"x": 0}, rates={"x": "step(1, 0.5) + table(time)"},
                 lookups={"table": {"x": [0, 1], "y": [0, 2]}},
                 time={"start": 0, "stop": 1, "step": 0.25, "dt": 0.001}, method="rk4")
    out = model.build(Path(".")).integrate({})
    # integral of step(1, 0.5) + 2t over [0, 1] = 0.5 + 1
    assert out.series["x"][0, -1] == pytest.approx(1.5, abs=2e-3)


def test_method_names_are_case_insensitive_and_checked():
    assert spec(states={"x": 1}, rates={"x": "-x"}, method="lsoda").method == "LSODA"
    with pytest.raises(ValidationError):
        spec(states={"x": 1}, rates={"x": "-x"}, method="leapfrog")


# ---------------------------------------------------------------- validation problems


def test_unknown_names_with_did_you_mean():
    model = spec(states={"x": 1}, rates={"x": "-decay_rat * x"}, constants={"decay_rate": 1})
    found = messages(model)
    assert "did you mean 'decay_rate'?" in found["rates.x"]


def test_circular_auxiliaries_name_the_loop_in_order():
    model = spec(states={"x": 1}, rates={"x": "a"},
                 auxiliaries={"a": "b + x", "b": "c * 2", "c": "a"})
    found = messages(model)
    assert found["auxiliaries.a"] == "circular definition: a -> b -> c -> a"
    with pytest.raises(StudyError, match="circular definition"):
        model.build(Path("."))


def test_state_without_initial_value_and_rate_problems():
    model = spec(states={"x": None, "y": 1}, rates={"x": "1", "z": "1"})
    found = messages(model)
    assert found["states.x"] == "state 'x' has no initial value"
    assert "not a state" in found["rates.z"]
    assert found["states.y"] == "state 'y' has no rate"


def test_initial_values_may_use_only_constants():
    found = messages(spec(states={"x": "y", "y": 1}, rates={"x": "1", "y": "1"}))
    assert "only constants" in found["states.x"]


def test_expression_errors_carry_their_key_path():
    model = spec(states={"x": 1}, rates={"x": "x.__class__"},
                 auxiliaries={"a": "exp(1, 2)", "b": "g + 1"},
                 lookups={"g": {"x": [0, 1], "y": [0, 1]}})
    found = messages(model)
    assert "attribute" in found["rates.x"]
    assert "exp() takes 1 argument" in found["auxiliaries.a"]
    assert "call it as g(x)" in found["auxiliaries.b"]


def test_duplicate_reserved_names_and_bad_grids():
    model = spec(states={"x": 1}, rates={"x": "1"}, auxiliaries={"x": "1", "time": "2"},
                 time={"start": 0, "stop": 1, "step": 0.3})
    found = messages(model)
    assert "defined twice" in found["auxiliaries.x"]
    assert "not a valid name" in found["auxiliaries.time"]
    assert "multiple" in found["time.stop"]


def test_constants_hidden_functions_and_empty_models():
    found = messages(spec(states={"x": 1}, rates={"x": "1"}, constants={"lambda": 1, "None": 2},
                          lookups={"max": {"x": [0, 1], "y": [0, 1]}}))
    assert "constants.lambda" not in found  # a keyword is a name like any other
    assert "not a valid name" in found["constants.None"]
    assert "hide the function max()" in found["lookups.max"]
    assert "at least one state" in messages(spec(states={}, rates={}))["states"]


def test_bad_lookup_tables_are_schema_errors():
    with pytest.raises(ValidationError, match="strictly increasing"):
        spec(states={"x": 1}, rates={"x": "1"}, lookups={"g": {"x": [0, 0], "y": [1, 2]}})


def test_adaptive_ensemble_of_10000_logistic_members_is_fast():
    evaluator = load("logistic").build(Path("."))
    rng = np.random.default_rng(3)
    inputs = {"rate": rng.uniform(0.2, 0.6, 10_000), "capacity": rng.uniform(800, 1200, 10_000)}
    start = clock.thread_time()
    out = evaluator.integrate(inputs)
    elapsed = clock.thread_time() - start
    assert all(e is None for e in out.errors)
    assert elapsed < 15  # CPU time: a busy machine does not count


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_fixed_steps_equal_the_plain_loop_with_states_as_rates_and_constant_auxiliaries(method):
    # x' = -c y, y' = x: a rate is another state, updated in place; c reads constants only
    model = spec(states={"x": 1, "y": 0}, rates={"x": "-c * y", "y": "x"},
                 auxiliaries={"c": "k * k", "energy": "y ** 2 + c * x ** 2"},
                 constants={"k": 2.0}, method=method, time={"start": 0, "stop": 1, "step": 0.25,
                                                              "dt": 0.125})
    k = np.array([1.0, 2.0, 3.0])
    out = model.build(Path(".")).integrate({"k": k})

    def rates(s):
        return np.array([-(k * k) * s[1], s[0]])

    s, dt, saved = np.array([np.ones(3), np.zeros(3)]), 0.125, []
    for step in range(9):
        if step % 2 == 0:
            saved.append(s.copy())
        a = rates(s)
        if method == "euler":
            s = s + dt * a
        else:
            b = rates(s + 0.5 * dt * a)
            c = rates(s + 0.5 * dt * b)
            d = rates(s + dt * c)
            s = s + (dt / 6.0) * (a + 2.0 * (b + c) + d)
    saved = np.array(saved)  # (T, 2, 3)
    np.testing.assert_array_equal(out.series["x"], saved[:, 0].T)
    np.testing.assert_array_equal(out.series["y"], saved[:, 1].T)
    np.testing.assert_array_equal(out.series["c"], np.repeat((k * k)[:, None], 5, axis=1))
    np.testing.assert_array_equal(out.series["energy"],
                                  (saved[:, 1] ** 2 + k * k * saved[:, 0] ** 2).T)


def test_equation_models_and_only_they_have_equations():
    assert isinstance(spec(states={"x": 1}, rates={"x": "-x"}), HasEquations)
    assert not isinstance(Python(type="python", function="m:f"), HasEquations)
    assert not isinstance(Command(type="command", run=["sim"]), HasEquations)
