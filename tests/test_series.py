"""Every run's series are its own: runs whose grids differ (a simulation that stops on an event)
are reduced on their own grid, whatever the batch size, workers, scheduler or hash seed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pandas
import pytest
from conftest import REPO, STUDIES, hash_seeds_that_reorder, run_cli, write_study

from studyrun.blocks.quantities import Quantities
from studyrun.core.batch import ModelOutput, SeriesGroup


def run_env(*args, seed: int, cwd=None) -> subprocess.CompletedProcess:
    """`python -m studyrun ARGS` in a real subprocess with its own PYTHONHASHSEED."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "studyrun", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def results_text(folder) -> str:
    """analysis.json's `results` exactly as written."""
    return json.dumps(json.loads((folder / "analysis.json").read_text())["results"])


def hex_id(run_id: int) -> str:
    return f"{int(run_id) & (2**64 - 1):016x}"


# --- the projectile example: a command model whose flights end when they land ----------------

def projectile_study(folder, batch_size, scheduler, workers, samples=24):
    text = (STUDIES / "projectile-montecarlo.yaml").read_text()
    text = text.replace('"{study_dir}/sim/', f'"{STUDIES}/sim/').replace("samples: 64", f"samples: {samples}")
    text = text.replace("python3", sys.executable)
    text = text.replace("  range: final(distance)\n", "  range: final(distance)\n"
                        "  mean_height: mean(height)\n  area: integral(height, 0, 2)\n")
    text = text.replace("  scheduler: threads\n  workers: 2\n",
                        f"  scheduler: {scheduler}\n  workers: {workers}\n  batch_size: {batch_size}\n")
    path = folder / f"projectile-{batch_size}-{scheduler}-{workers}.yaml"
    path.write_text(text)
    return path


def the_programs_own_flights():
    spec = importlib.util.spec_from_file_location("projectile_sim", STUDIES / "sim" / "projectile_sim.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.thorough
@pytest.mark.slow
def test_projectile_quantities_are_the_programs_own_whatever_the_batching(tmp_path):
    """Batch size 1, automatic and 64; one and two workers; threads, sync and a LocalCluster;
    a different hash seed each: the same bytes, and each run's apex, flight time and range are
    those of its own series."""
    configs = [(1, "threads", 2), (64, "local", 2), ("auto", "sync", 1)]
    texts = []
    for seed, (batch, scheduler, workers) in enumerate(configs):
        out = tmp_path / f"out-{seed}"
        done = run_env("run", projectile_study(tmp_path, batch, scheduler, workers), "--out", out,
                       "--quiet", "--no-report", seed=seed)
        assert done.returncode == 0, done.stderr
        analysis = json.loads((out / "analysis.json").read_text())
        assert analysis["runs"]["failed"] == 0
        texts.append(results_text(out))
    assert texts == [texts[0]] * len(configs)
    runs = pandas.read_csv(tmp_path / "out-0" / "runs.csv")
    sim = the_programs_own_flights()
    flights = [sim.fly(speed, angle, 9.81, 0.05) for speed, angle in zip(runs["speed"], runs["angle"])]
    assert runs["apex"].tolist() == [max(f["height"]) for f in flights]
    assert runs["flight_time"].tolist() == [f["time"][-1] for f in flights]
    assert runs["range"].tolist() == [f["distance"][-1] for f in flights]
    np.testing.assert_allclose(runs["mean_height"], [  # the time average over each run's flight
        np.trapezoid(f["height"], f["time"]) / f["time"][-1] for f in flights], rtol=1e-13)
    durations = [f["time"][-1] for f in flights]
    assert min(durations) < 1 and max(durations) > 5  # the grids do differ, widely
    apex = json.loads(texts[0])["apex"]
    assert apex["mean"] == pytest.approx(runs["apex"].mean(), rel=1e-12)
    assert apex["max"] == runs["apex"].max()


# --- series(y) chooses its output by name, never by a set's order ------------------------------

LINE = "import numpy as np\n\ndef line(a, b):\n    t = np.linspace(0, 2, 5)\n    return {'time': t, 'y': a * t + b}\n"

LINE_SOBOL = """
name: line
seed: 5
model: {type: python, function: "line:line"}
parameters:
  a: {bounds: [1, 2]}
  b: {bounds: [0, 1]}
quantities:
  trajectory: series(y)
analysis: {type: sobol, samples: 32}
execution: {scheduler: sync}
"""


@pytest.mark.slow
def test_series_quantity_results_do_not_depend_on_the_hash_seed(tmp_path):
    (tmp_path / "line.py").write_text(LINE)
    path = write_study(tmp_path, LINE_SOBOL)
    texts = []
    # two seeds under which a set of the study's names iterates in different orders
    seeds = hash_seeds_that_reorder("a", "b", "time", "y", "trajectory")
    for seed in seeds:
        done = run_env("run", path, "--out", tmp_path / f"out-{seed}", "--quiet", "--no-report",
                       seed=seed)
        assert done.returncode == 0, done.stderr
        texts.append(results_text(tmp_path / f"out-{seed}"))
    assert texts == [texts[0]] * len(seeds)
    resolved = json.loads(texts[0])["trajectory"]
    # y = a t + b: b alone at t = 0 (y varies), a dominates later; never None after the start
    assert all(v is not None for v in resolved["S1"]["a"][1:])
    assert resolved["S1"]["a"][-1] > 0.5 > resolved["S1"]["b"][-1]


# --- the time axis is a series like any other ---------------------------------------------------

def test_time_reduces_like_any_series_in_each_group():
    out = ModelOutput(3, groups=[
        SeriesGroup(np.array([0, 2]), np.array([0.0, 1.0, 2.0]), {"y": np.array([[1.0, 3, 2], [4, 5, 6]])}),
        SeriesGroup(np.array([1]), np.array([0.5, 4.0]), {"y": np.array([[7.0, 1.0]])})])
    values = Quantities({"end": "final(time)", "top": "max(time)", "area": "integral(time)",
                        "peak": "max(y)", "late": "at(y, 1.5)", "speed": "max(y) / final(time)"}
                        ).evaluate(out, {"k": np.array([1.0, 2.0, 3.0])})
    assert out.errors == [None, None, None]
    assert values["end"].tolist() == [2.0, 4.0, 2.0] and values["top"].tolist() == [2.0, 4.0, 2.0]
    assert values["area"].tolist() == [2.0, 7.875, 2.0]
    assert values["peak"].tolist() == [3.0, 7.0, 6.0]
    assert values["late"].tolist() == [2.5, 7 - 6 / 3.5, 5.5]
    assert values["speed"].tolist() == [1.5, 1.75, 3.0]


def test_a_window_or_time_outside_one_runs_grid_fails_that_run_alone():
    out = ModelOutput(2, groups=[
        SeriesGroup(np.array([0]), np.array([0.0, 1.0, 2.0]), {"y": np.array([[1.0, 3, 2]])}),
        SeriesGroup(np.array([1]), np.array([0.0, 5.0]), {"y": np.array([[7.0, 1.0]])})])
    values = Quantities({"q": "at(y, 4)"}).evaluate(out, {})
    assert out.errors[0].startswith("quantity 'q': at(x, 4) lies outside the outputs' time span [0, 2]")
    assert out.errors[1] is None
    assert np.isnan(values["q"][0]) and values["q"][1] == pytest.approx(7 - 6 * 4 / 5)


@pytest.mark.slow
@pytest.mark.parametrize("text, message", [
    ("time", "'time' is the time axis, a series like any other output: reduce it"),
    ("2 * time + final(y)", "'time' is the time axis"),
    ("series(2 * y)", "series() keeps one output whole: write series(NAME)"),
])
def test_time_or_series_misused_is_refused_at_validate_with_its_place(tmp_path, text, message):
    (tmp_path / "line.py").write_text(LINE)
    study = LINE_SOBOL.replace("  trajectory: series(y)\n", f"  peak: max(y)\n  bad: {text}\n")
    path = write_study(tmp_path, study)
    done = run_cli("validate", path)
    assert done.returncode == 2
    line = next(line for line in done.stderr.splitlines() if "quantities.bad" in line)
    assert line.startswith(f"{path}:9:") and message in line


@pytest.mark.slow
def test_final_and_max_of_time_validate(tmp_path):
    (tmp_path / "line.py").write_text(LINE)
    study = LINE_SOBOL.replace("  trajectory: series(y)\n",
                               "  end: final(time)\n  top: max(time)\n  keep: series(time)\n")
    done = run_cli("validate", write_study(tmp_path, study))
    assert done.returncode == 0, done.stderr


# --- analyses that need one grid ------------------------------------------------------------

STRETCHED = """import numpy as np

def stretched(a, b):
    '''y = a t + b on a grid that ends at 2 + a: every run stops at its own time.'''
    t = np.linspace(0, 2 + a, 9)
    return {"time": t, "y": a * t + b}
"""


@pytest.mark.slow
def test_time_resolved_sobol_names_the_runs_that_stop_before_the_common_grid(tmp_path):
    (tmp_path / "stretched.py").write_text(STRETCHED)
    text = LINE_SOBOL.replace("line:line", "stretched:stretched").replace(
        "trajectory: series(y)", "stop: final(time)").replace("samples: 32", "samples: 32, outputs: [y]")
    done = run_cli("run", "--no-report", write_study(tmp_path, text), "--out", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stderr
    runs = pandas.read_csv(tmp_path / "out" / "runs.csv").sort_values("run.index")
    assert runs["stop"].tolist() == (2 + runs["a"]).tolist()  # each run's own end
    first = runs["stop"].iloc[0]
    short = runs[runs["stop"] < first]
    warning = json.loads((tmp_path / "out" / "analysis.json").read_text())["results"]["y"]["warnings"][0]
    assert warning.startswith(f"{len(short)} run(s) stop before or start after the common time "
                              f"grid [0, {first:g}]")
    assert all(hex_id(i) in warning for i in short["run.id"].head(5))


def test_local_sensitivity_interpolates_onto_the_nominal_runs_grid(tmp_path):
    (tmp_path / "stretched.py").write_text(STRETCHED)
    text = """
    name: local
    model: {type: python, function: "stretched:stretched"}
    parameters:
      a: {bounds: [1, 2], nominal: 1.5}
      b: {bounds: [0, 1], nominal: 0.5}
    analysis: {type: local, outputs: [y], method: forward, partition: false}
    execution: {scheduler: sync}
    """
    result = json.loads(json.dumps(run_study(tmp_path, text)))
    functions = result["y"]["functions"]
    t = np.array(functions["time"])
    np.testing.assert_allclose(t, np.linspace(0, 3.5, 9))
    y = 1.5 * t + 0.5
    # S = (p / y) dy/dp: a t / y and b / y, exactly for this linear model
    np.testing.assert_allclose(functions["normalised"]["a"], 1.5 * t / y, rtol=1e-6)
    np.testing.assert_allclose(functions["normalised"]["b"], 0.5 / y, rtol=1e-6)


def run_study(folder, text):
    import studyrun

    return studyrun.run(write_study(folder, text), folder / "out", report=False).results


def test_calibration_compares_runs_that_stop_at_different_times_at_the_observations(tmp_path):
    (tmp_path / "stretched.py").write_text(STRETCHED)
    (tmp_path / "observed.csv").write_text("time,y\n" + "".join(
        f"{t},{1.7 * t + 0.2}\n" for t in (0.0, 0.5, 1.0, 2.0, 2.5)))
    text = """
    name: fit
    model: {type: python, function: "stretched:stretched"}
    parameters:
      a: {bounds: [1, 2], nominal: 1.2}
      b: {bounds: [0, 1], nominal: 0.5}
    analysis:
      type: calibrate
      data: {file: observed.csv, format: wide, x: time}
    execution: {scheduler: sync, batch_size: 64}
    """
    results = run_study(tmp_path, text)
    assert results["fitted"]["a"] == pytest.approx(1.7, abs=1e-6)
    assert results["fitted"]["b"] == pytest.approx(0.2, abs=1e-6)
