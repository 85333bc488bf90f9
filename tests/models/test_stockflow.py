"""The stockflow model: the handbook's flowers and sales-force results, Euler semantics,
lookups, validation problems, and every model file in studies/models."""

from __future__ import annotations

import pickle
import time as clock
from pathlib import Path

import numpy as np
import pytest
import yaml

from studyrun.models.ode import Ode
from studyrun.models.stockflow import Stockflow

MODELS = Path(__file__).resolve().parents[2] / "studies" / "models"


def load(name: str, **changes) -> Stockflow:
    data = yaml.safe_load((MODELS / f"{name}.yaml").read_text())
    data.update(changes)
    return Stockflow.model_validate(data)


def spec(**fields) -> Stockflow:
    data = {"type": "stockflow", "time": {"start": 0, "stop": 2, "step": 0.5}}
    data.update(fields)
    return Stockflow.model_validate(data)


def messages(model: Stockflow) -> dict[str, str]:
    return {p.path: p.message for p in model.check(Path("."))}


def test_flowers_settle_at_800_acres_with_growth_equal_to_decay():
    out = load("flowers").build(Path(".")).integrate({})
    assert out.time.tolist() == list(range(21))
    assert set(out.series) == {"area", "growth", "decay", "fraction_occupied"}
    assert out.series["area"][0, 0] == 10
    assert out.series["area"][0, -1] == pytest.approx(800, abs=0.5)
    assert out.series["growth"][0, -1] == pytest.approx(160, abs=0.1)
    assert out.series["decay"][0, -1] == pytest.approx(160, abs=0.1)
    net = out.series["growth"][0] - out.series["decay"][0]
    assert 4 <= int(np.argmax(net)) <= 6  # rapid growth for about 5 years
    assert out.series["area"][0, 10] > 750  # then equilibrium


def test_flowers_euler_is_the_textbook_loop():
    model = load("flowers")
    out = model.build(Path(".")).integrate({"decay_rate": np.array([0.2, 0.3])})
    for m, decay_rate in enumerate([0.2, 0.3]):
        area, saved = 10.0, [10.0]
        for k in range(160):
            growth = area * 1.0 * np.interp(area / 1000, [0, 1], [1, 0])
            area = area + 0.125 * (growth - area * decay_rate)
            if (k + 1) % 8 == 0:
                saved.append(area)
        np.testing.assert_allclose(out.series["area"][m], saved, rtol=1e-12)


def test_flowers_10000_runs_in_one_batch_are_fast():
    evaluator = load("flowers").build(Path("."))
    rng = np.random.default_rng(1)
    n = 10_000
    inputs = {"intrinsic_growth_rate": rng.uniform(0.8, 1.2, n),
              "decay_rate": rng.normal(0.2, 0.02, n), "suitable_area": rng.uniform(800, 1200, n)}
    evaluator.integrate(inputs)
    start = clock.thread_time()
    out = evaluator.integrate(inputs)
    elapsed = clock.thread_time() - start
    assert out.series["area"].shape == (n, 21) and all(e is None for e in out.errors)
    assert elapsed < 0.5  # about 0.02 s on a laptop core (CPU time: a busy machine does not count)


def test_half_step_and_rk4_agree_with_euler():
    evaluator = load("flowers").build(Path("."))
    euler = evaluator.integrate({})
    half = evaluator.integrate({}, step=0.0625)
    rk4 = evaluator.integrate({}, method="rk4")
    assert half.time.tolist() == euler.time.tolist()
    # Euler's error halves with the step: euler -> half-step -> rk4 approach the solution
    error_full = np.abs(euler.series["area"] - rk4.series["area"]).max()
    error_half = np.abs(half.series["area"] - rk4.series["area"]).max()
    assert error_half == pytest.approx(error_full / 2, rel=0.1)
    with pytest.raises(ValueError, match="does not fit"):
        evaluator.integrate({}, step=0.3)
    adaptive = evaluator.integrate({}, method="RK45")
    np.testing.assert_allclose(adaptive.series["area"], rk4.series["area"], rtol=1e-5)


def test_sales_force_settles_near_750_with_150_hires():
    out = load("sales_force").build(Path(".")).integrate({})
    size, hires = out.series["sales_force"][0], out.series["new_hires"][0]
    assert size[0] == 50 and out.series["budgeted_size"][0, 0] == pytest.approx(73)
    assert size[-1] == pytest.approx(750, abs=10)
    assert hires[-1] == pytest.approx(150, abs=5)
    assert out.series["departures"][0, -1] == pytest.approx(150, abs=5)
    nine = int(np.searchsorted(out.time, 9))
    assert size[nine] > 400 and size[nine] < 0.8 * size[-1]  # still growing fast at 9 years


def test_save_every_defaults_to_the_step():
    model = spec(stocks={"s": {"initial": 1, "inflows": "inflow"}}, flows={"inflow": "1"})
    out = model.build(Path(".")).integrate({})
    assert out.time.tolist() == [0, 0.5, 1, 1.5, 2]
    np.testing.assert_allclose(out.series["s"][0], [1, 1.5, 2, 2.5, 3])


def test_stock_without_flows_stays_put_and_both_flow_lists_count():
    model = spec(stocks={"a": {"initial": 5}, "b": {"initial": 0, "inflows": ["i1", "i2"],
                                                     "outflows": ["o"]}},
                 flows={"i1": "1", "i2": "2", "o": "0.5"})
    out = model.build(Path(".")).integrate({})
    np.testing.assert_allclose(out.series["a"][0], 5)
    np.testing.assert_allclose(out.series["b"][0, -1], 2 * 2.5)


@pytest.mark.parametrize("extrapolate, expected", [(False, [0, 0, 1, 2, 2]),
                                                   (True, [-1, 0, 1, 2, 3])])
def test_lookups_clamp_unless_extrapolating(extrapolate, expected):
    model = spec(stocks={"s": {"initial": 0}},
                 auxiliaries={"v": "table(time - 0.5)"},
                 lookups={"table": {"x": [0, 1], "y": [0, 2], "extrapolate": extrapolate}})
    out = model.build(Path(".")).integrate({})
    np.testing.assert_allclose(out.series["v"][0], expected)


def test_unknown_flow_names_and_expression_problems_have_paths():
    model = spec(stocks={"area": {"initial": "initial_aera", "inflows": ["growht"]}},
                 flows={"growth": "area * rate", "decay": "area * rat"},
                 auxiliaries={"a": "b", "b": "a"},
                 constants={"initial_area": 1, "rate": 0.1})
    found = messages(model)
    assert "did you mean 'growth'?" in found["stocks.area.inflows[0]"]
    assert "did you mean 'initial_area'?" in found["stocks.area.initial"]
    assert "did you mean 'rate'?" in found["flows.decay"]
    assert found["auxiliaries.a"] == "circular definition: a -> b -> a"


def test_every_output_and_constant_is_exposed():
    model = load("flowers")
    assert model.input_names() == {"initial_area", "suitable_area", "intrinsic_growth_rate",
                                   "decay_rate"}
    assert model.output_names() == {"area", "growth", "decay", "fraction_occupied"}
    assert model.defaults()["suitable_area"] == 1000


def test_stockflow_evaluator_pickles():
    evaluator = load("flowers").build(Path("."))
    clone = pickle.loads(pickle.dumps(evaluator))
    inputs = {"decay_rate": np.array([0.1, 0.2])}
    np.testing.assert_array_equal(clone.integrate(inputs).series["growth"],
                                  evaluator.integrate(inputs).series["growth"])


@pytest.mark.parametrize("path", sorted(MODELS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_model_file_validates_and_runs(path):
    data = yaml.safe_load(path.read_text())
    model = {"ode": Ode, "stockflow": Stockflow}[data["type"]].model_validate(data)
    assert model.check(path.parent) == []
    out = model.build(path.parent).integrate({}, n=2)
    assert out.errors == [None, None]
    assert set(out.series) == model.output_names()
    for series in out.series.values():
        assert series.shape == (2, len(out.time)) and np.isfinite(series).all()


@pytest.mark.parametrize("x, y", [([0, 1], [1, 0]), ([0.3, 3], [0.3, 0.7]),
                                  ([1e-3, 7.1], [-5.3, 1e6]), ([-2, -1], [3, 3])])
def test_two_point_lookups_equal_np_interp_bit_for_bit(x, y):
    from studyrun.models.equations import Lookup

    table = Lookup(x, y)
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.uniform(x[0] - 1, x[1] + 1, 5000), np.linspace(*x, 1001),
                             [np.nan, np.inf, -np.inf, x[0], x[1]]])
    np.testing.assert_array_equal(table(values), np.interp(values, x, y))  # large batch
    np.testing.assert_array_equal([table(v) for v in values[:50]], np.interp(values[:50], x, y))
