"""optimize end to end: the flowers model's decay rate for a target area, and the objective terms."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import STUDIES, run_cli, write_study

import studyrun

FLOWERS = """
name: flowers-opt
seed: 5
model: {file: MODELS/flowers.yaml}
parameters:
  decay_rate: {bounds: [0.05, 0.8], nominal: 0.2}
quantities: {final_area: final(area), peak_growth: max(growth)}
analysis: {type: optimize, METHOD}
execution: {scheduler: sync}
"""


def flowers(folder, analysis):
    return write_study(folder, FLOWERS.replace("MODELS", str(STUDIES / "models"))
                       .replace("METHOD", analysis))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["nelder-mead", "lbfgsb", "differential-evolution"])
def test_optimize_finds_the_decay_rate_of_a_target_area(tmp_path, method):
    path = flowers(tmp_path, f"target: {{final_area: 600}}, method: {method}, generations: 30")
    result = studyrun.run(path, tmp_path / "out", report=False).results
    # equilibrium area = suitable_area * (1 - decay / growth rate): 600 acres at decay 0.4
    assert result["parameters"]["decay_rate"]["optimum"] == pytest.approx(0.4, abs=2e-3)
    assert result["quantities"]["final_area"]["final"] == pytest.approx(600, abs=0.5)
    assert result["quantities"]["final_area"]["initial"] == pytest.approx(800, abs=0.5)
    assert result["parameters"]["decay_rate"]["initial"] == 0.2
    assert result["objective"]["final"] < 0.25 < 1e4 < result["objective"]["initial"]
    assert result["evaluations"] >= result["batches"] > 1


def test_minimize_and_maximize_end_at_the_bounds(tmp_path):
    low = studyrun.run(flowers(tmp_path, "minimize: final_area"), tmp_path / "low", report=False).results
    high = studyrun.run(flowers(tmp_path, "maximize: [final_area]"), tmp_path / "high", report=False).results
    assert low["parameters"]["decay_rate"]["optimum"] == pytest.approx(0.8, abs=1e-3)
    assert high["parameters"]["decay_rate"]["optimum"] == pytest.approx(0.05, abs=1e-3)
    assert high["objective"]["final"] == pytest.approx(-high["quantities"]["final_area"]["final"])


@pytest.mark.slow
def test_an_unknown_quantity_is_a_located_error(tmp_path):
    path = flowers(tmp_path, "target: {final_aera: 600}")
    done = run_cli("validate", path)
    assert done.returncode == 2
    assert "analysis.target.final_aera" in done.stderr and "did you mean 'final_area'" in done.stderr


def test_rerun_reuses_every_run_and_gives_the_same_numbers(tmp_path):
    path = flowers(tmp_path, "target: {final_area: 600}")
    first = studyrun.run(path, tmp_path / "out", report=False)
    again = studyrun.run(path, tmp_path / "out", report=False)
    assert again.analysis["runs"]["reused"] == again.analysis["runs"]["planned"]
    assert again.results == first.results


@pytest.mark.slow
def test_example_study_runs_from_the_command_line(tmp_path):
    done = run_cli("run", STUDIES / "flowers-optimize.yaml", "--out", tmp_path, "--quiet")
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "analysis.json").read_text())["results"]
    assert results["parameters"]["decay_rate"]["optimum"] == pytest.approx(0.4, abs=2e-3)
    assert "## Optimization" in (tmp_path / "report.md").read_text()


def test_lbfgsb_never_runs_outside_the_box_near_an_upper_bound(tmp_path):
    """Near an upper bound the difference step points down (into the box); its central partner
    must then not be taken above the bound: every run's value stays within its bounds."""
    (tmp_path / "peak.py").write_text("def f(x):\n    return {'y': (x - 0.999) ** 2}\n")
    path = write_study(tmp_path, """
name: near-the-bound
model: {type: python, function: "peak:f"}
parameters:
  x: {bounds: [0, 1], nominal: 0.9}
quantities: {y: y}
analysis: {type: optimize, minimize: [y], method: lbfgsb, step: 0.01}
execution: {scheduler: sync}
""")
    studyrun.run(path, tmp_path / "out", report=False)
    import csv

    with open(tmp_path / "out" / "runs.csv") as handle:
        values = [float(row["x"]) for row in csv.DictReader(handle)]
    assert len(values) > 3 and max(values) <= 1.0


ROSENBROCK = "def f(x, y):\n    return {'f': (1 - x) ** 2 + 100 * (y - x ** 2) ** 2}\n"


def test_lbfgsb_reaches_rosenbrocks_minimum_and_a_python_model_earns_no_note(tmp_path):
    """Rosenbrock's valley from its classic start (-1.2, 1): the minimum is 0 at (1, 1). For a
    python model `gradient: auto` is differences, its default there, so no note says so."""
    (tmp_path / "rosen.py").write_text(ROSENBROCK)
    path = write_study(tmp_path, """
name: rosenbrock
model: {type: python, function: "rosen:f"}
parameters:
  x: {bounds: [-2, 2], nominal: -1.2}
  y: {bounds: [-1, 3], nominal: 1}
quantities: {f: f}
analysis: {type: optimize, minimize: [f], method: lbfgsb}
execution: {scheduler: sync}
""")
    result = studyrun.run(path, tmp_path / "out", report=False).results
    assert result["parameters"]["x"]["optimum"] == pytest.approx(1, abs=1e-4)
    assert result["parameters"]["y"]["optimum"] == pytest.approx(1, abs=1e-4)
    assert result["objective"]["final"] < 1e-8
    assert result["gradient"]["method"] == "fd"
    assert result["notes"] == []


def test_differential_evolution_finds_branins_global_minimum(tmp_path):
    """Branin-Hoo on [-5, 10] x [0, 15]: its three global minima are 0.397887 (Dixon and Szegő
    1978), one of them at (pi, 2.275)."""
    (tmp_path / "branin.py").write_text(
        "import numpy as np\n"
        "def f(x1, x2):\n"
        "    b, c, t = 5.1 / (4 * np.pi ** 2), 5 / np.pi, 1 / (8 * np.pi)\n"
        "    return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * np.cos(x1) + 10\n")
    path = write_study(tmp_path, """
name: branin
seed: 3
model: {type: python, function: "branin:f", vectorized: true}
parameters:
  x1: {bounds: [-5, 10]}
  x2: {bounds: [0, 15]}
quantities: {f: value}
analysis: {type: optimize, minimize: [f], method: differential-evolution}
execution: {scheduler: sync}
""")
    result = studyrun.run(path, tmp_path / "out", report=False).results
    assert result["objective"]["final"] == pytest.approx(0.397887, abs=1e-6)
    optimum = (result["parameters"]["x1"]["optimum"], result["parameters"]["x2"]["optimum"])
    minima = [(-np.pi, 12.275), (np.pi, 2.275), (9.42478, 2.475)]
    assert min(np.hypot(optimum[0] - a, optimum[1] - b) for a, b in minima) < 1e-3
