"""The pieces of the `local` analysis against hand-made answers: rankings and their agreement,
FME's collinearity index, summaries of sensitivity functions, clustering and partitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from conftest import STUDIES

from studyrun.analyses.local.agreement import (
    compare_rankings,
    interval_coincidence,
    order_preservation,
    rank,
)
from studyrun.analyses.local.collinearity import analyse_collinearity, subset_count
from studyrun.analyses.local.partition import analyse_partition, cluster
from studyrun.analyses.local.sensitivity import (
    difference_quotients,
    difference_rows,
    normalise,
    perturbation_steps,
    summarise,
)


def test_rank_puts_largest_first_and_unknown_last():
    assert rank({"a": 1.0, "b": 3.0, "c": None, "d": 2.0, "e": float("nan")}) == \
        ["b", "d", "a", "c", "e"]
    assert rank({"a": 1.0, "b": 1.0}) == ["a", "b"]  # ties keep the study's order


def test_interval_coincidence_and_order_preservation_on_hand_made_rankings():
    p, q = ["a", "b", "c", "d"], ["b", "a", "d", "c"]
    assert interval_coincidence(p, q, 1) == 0.0
    assert interval_coincidence(p, q, 2) == 100.0
    assert interval_coincidence(p, q, 3) == pytest.approx(200 / 3)
    assert order_preservation(p, q) == pytest.approx(100 * 4 / 6)  # (a,b) and (c,d) swapped
    assert order_preservation(p, list(reversed(p))) == 0.0
    same = compare_rankings(p, p)
    assert same["M"] == same["Tr"] == 100.0 and same["top"] == 2
    assert compare_rankings(p, q, top=3)["M_by_top"] == {"1": 0.0, "2": 100.0,
                                                         "3": pytest.approx(200 / 3), "4": 100.0}
    with pytest.raises(ValueError):
        compare_rankings(p, ["a", "b", "c", "x"])


def fme_collin(matrix: np.ndarray, members: tuple[int, ...]) -> float:
    """FME's collin, written out: unit-length columns, 1 / sqrt(min eigenvalue of S^T S)."""
    s = matrix[:, members] / np.sqrt((matrix[:, members] ** 2).sum(axis=0))
    return 1 / math.sqrt(np.linalg.eigvalsh(s.T @ s).min())


def test_collinearity_index_matches_fme_by_hand():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(50, 4))
    matrix = np.column_stack([base[:, :3], base[:, 0] + 0.01 * base[:, 3]])  # d nearly a
    names = ["a", "b", "c", "d"]
    result = analyse_collinearity(matrix, names, None, 20.0)
    assert len(result["subsets"]) == subset_count(4, None) == 11
    for subset in result["subsets"]:
        members = tuple(names.index(p) for p in subset["parameters"])
        assert subset["index"] == pytest.approx(fme_collin(matrix, members), rel=1e-9)
    assert result["largest_identifiable_size"] == 3
    assert ["a", "b", "c"] in result["identifiable"] and ["a", "c", "d"] not in result["identifiable"]


def test_collinear_columns_are_not_identifiable_and_orthogonal_ones_are():
    t = np.linspace(0, 1, 20)
    collinear = analyse_collinearity(np.column_stack([t, 2 * t]), ["a", "b"], None, 20.0)
    assert collinear["subsets"][0]["index"] > 1e6
    assert collinear["identifiable"] == [["a"], ["b"]] and collinear["largest_identifiable_size"] == 1
    orthogonal = np.column_stack([np.r_[t, 0 * t], np.r_[0 * t, t]])
    assert analyse_collinearity(orthogonal, ["a", "b"], None, 20.0)["subsets"][0]["index"] == \
        pytest.approx(1.0)
    flat = analyse_collinearity(np.column_stack([t, 0 * t]), ["a", "b"], None, 20.0)
    assert flat["subsets"][0]["index"] == math.inf and flat["unresponsive"] == ["b"]


def test_subsets_stop_at_the_size_asked_for():
    matrix = np.random.default_rng(0).normal(size=(30, 6))
    result = analyse_collinearity(matrix, list("abcdef"), 3, 20.0)
    assert {s["size"] for s in result["subsets"]} == {2, 3}
    assert len(result["subsets"]) == math.comb(6, 2) + math.comb(6, 3)


def test_differences_and_summaries_of_a_known_function():
    # y(t; a, b) = a * t + b^2, at a = 2, b = 3: dy/da = t, dy/db = 2b = 6
    t = np.linspace(0, 4, 5)
    nominal = np.array([2.0, 3.0])
    steps = perturbation_steps(nominal, 1e-4)
    rows = difference_rows(nominal, steps, central=True)
    assert rows.shape == (5, 2) and np.allclose(rows[0], nominal)
    series = rows[:, :1] * t + rows[:, 1:] ** 2
    central = difference_quotients(series, steps, "central")
    assert np.allclose(central[:, 0], t) and np.allclose(central[:, 1], 6.0)
    forward = difference_quotients(series[:3], steps, "forward")
    assert np.allclose(forward[:, 1], 6.0, rtol=1e-3)
    normalised, excluded = normalise(central, series[0], nominal)
    assert excluded == 0
    expected_a = 2 * t / (2 * t + 9)
    entry = summarise(normalised, ["a", "b"])
    assert entry["L1"]["a"] == pytest.approx(np.mean(expected_a))
    assert entry["L2"]["a"] == pytest.approx(np.sqrt(np.mean(expected_a ** 2)))
    assert entry["max"]["b"] == pytest.approx(18 / 9) and entry["ranking"] == ["b", "a"]


def test_points_where_the_output_is_zero_are_left_out():
    y = np.array([0.0, 1.0, 2.0])
    normalised, excluded = normalise(np.array([[1.0], [1.0], [1.0]]), y, np.array([1.0]))
    assert excluded == 1 and np.isnan(normalised[0, 0])
    entry = summarise(normalised, ["a"])
    assert entry["points"] == 2 and entry["L1"]["a"] == pytest.approx(0.75)
    scaled, excluded = normalise(np.ones((3, 1)), y, np.array([2.0]), scale=4.0)
    assert excluded == 0 and np.allclose(scaled, 0.5)


def test_one_pass_clustering_by_hand():
    points = np.array([[0.0], [0.01], [0.02], [1.0], [1.01]])
    centres, weights, clocks, labels = cluster(points, np.arange(5.0), radius=0.05)
    assert weights.tolist() == [3.0, 2.0] and labels.tolist() == [0, 0, 0, 1, 1]
    assert centres[:, 0] == pytest.approx([0.01, 1.005])
    assert clocks == pytest.approx([1.0, 3.5])


def equation_system(name: str):
    from studyrun.models.ode import Ode
    from studyrun.models.stockflow import Stockflow

    spec = yaml.safe_load((STUDIES / "models" / f"{name}.yaml").read_text())
    return (Ode if spec["type"] == "ode" else Stockflow)(**spec).to_system()


@pytest.mark.parametrize("name, parameters", [
    ("flowers", ["intrinsic_growth_rate", "decay_rate", "suitable_area", "initial_area"]),
    ("logistic", ["rate", "capacity", "initial_population"]),
    ("lotka_volterra", ["alpha", "beta", "delta", "gamma"]),
    ("daisyworld", ["luminosity", "death_rate", "optimum_temperature", "albedo_white"]),
    ("sales_force", ["hiring_fraction", "exit_rate", "saturation_size", "price"]),
])
def test_partitions_agree_with_the_full_trajectory(name, parameters):
    result = analyse_partition(equation_system(name), {}, parameters, 1e-4, True, 4, 0.05, 0.05)
    full = result["full"]
    for method in ("uniform", "clustering"):
        entry = result[method]
        assert entry["points"] < full["points"]
        assert entry["saved"] == full["evaluations"] - entry["evaluations"] > 0
        agreement = compare_rankings(full["ranking"], entry["ranking"])
        assert agreement["Tr"] >= 80 and agreement["M"] == 100
        for p in parameters:
            assert entry["model"][p] == pytest.approx(full["model"][p], rel=0.1, abs=1e-9)
    assert result["uniform"]["converged"]


def test_rate_coefficients_of_logistic_growth_by_hand():
    # f = r x (1 - x / K): r df/dr = f, K df/dK = r x^2 / K; x0 enters no rate
    system = equation_system("logistic")
    result = analyse_partition(system, {}, ["rate", "capacity", "initial_population"], 1e-6,
                               True, 4, 0.05, 0.05)
    t = system.grid.times
    x = 1000 / (1 + 99 * np.exp(-0.4 * t))
    full = result["full"]["coefficients"]["population"]
    assert full["rate"] == pytest.approx(np.mean(0.4 * x * (1 - x / 1000)), rel=1e-4)
    assert full["capacity"] == pytest.approx(np.mean(0.4 * x ** 2 / 1000), rel=1e-4)
    assert full["initial_population"] == 0.0
    assert result["initial_state_only"] == {"initial_population": ["population"]}


def test_time_varying_inputs_join_the_extended_trajectory():
    from studyrun.models.ode import Ode

    model = Ode(type="ode", time={"start": 0, "stop": 20, "step": 0.1},
                states={"x": 1.0}, rates={"x": "forcing - k * x"},
                auxiliaries={"forcing": "amplitude * (1 + sin(time))", "scaled": "2 * x"},
                constants={"amplitude": 1.0, "k": 0.5})
    result = analyse_partition(model.to_system(), {}, ["amplitude", "k"], 1e-6, True, 4, 0.05,
                               0.05)
    assert result["coordinates"] == ["x", "forcing"]  # not `scaled`: it depends on the state
    t = np.arange(0, 20.05, 0.1)
    forcing = 1 + np.sin(t)
    assert result["full"]["coefficients"]["x"]["amplitude"] == pytest.approx(forcing.mean(),
                                                                              rel=1e-5)
    clustered = result["clustering"]
    assert clustered["model"]["amplitude"] == pytest.approx(forcing.mean(), rel=0.05)
    assert clustered["points"] < len(t)
