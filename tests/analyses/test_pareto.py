"""optimize with nsga2 / nsga3: known fronts (ZDT1, Binh and Korn, DTLZ2), a robust front in
closed form, constraints, resume after SIGKILL, determinism, validation and the report."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yaml
from conftest import STUDIES, killed_and_resumed, run_cli, run_example, write_study

import studyrun


def objectives(front, names=("f1", "f2")) -> np.ndarray:
    return np.array([[p["objectives"][n] for n in names] for p in front])


@pytest.mark.slow
def test_zdt1_front_lies_on_the_true_one_with_its_hypervolume(tmp_path):
    """ZDT1, 5 variables, 100 generations of 60: every front point within 0.02 of
    f2 = 1 - sqrt(f1), and a hypervolume against (1, 1) of at least 0.64 (the true one's: 2/3)."""
    results = run_example(tmp_path, "zdt1-nsga2", report=False).results
    f = objectives(results["pareto"])
    assert len(f) >= 30
    assert np.abs(f[:, 1] - (1 - np.sqrt(f[:, 0]))).max() < 0.02
    assert np.all(np.diff(f[:, 0]) >= 0)  # sorted by the first objective
    assert results["hypervolume"][-1] >= 0.64 and results["hypervolume"][-1] <= 2 / 3
    assert len(results["hypervolume"]) == results["generations"] == 100
    assert results["evaluations"] == results["candidates"] <= 6000
    assert results["reference"] == {"f1": 1.0, "f2": 1.0}
    assert results["converged"] is (abs(results["hypervolume_change"]) < 1e-3)
    point = results["pareto"][0]
    assert point["quantities"] == point["objectives"]  # without scenarios: a run's quantities


BINH_KORN = """
name: binh-korn
seed: 4
model: {type: python, function: zdt:binh_korn, vectorized: true}
parameters:
  x: {bounds: [0, 5]}
  y: {bounds: [0, 3]}
quantities: {f1: f1, f2: f2, c1: c1, c2: c2}
analysis:
  type: optimize
  method: nsga2
  objectives: {minimize: [f1, f2]}
  constraints: ["c1 <= 25", "c2 >= 7.7"]
  population: 60
  generations: 60
execution: {scheduler: sync}
"""


def binh_korn_front() -> np.ndarray:
    """The Binh and Korn front, densely: x = y = t in [0, 3], then y = 3 with x in [3, 5]."""
    t, x = np.linspace(0, 3, 30001), np.linspace(3, 5, 20001)
    return np.r_[np.c_[8 * t**2, 2 * (t - 5) ** 2], np.c_[4 * x**2 + 36, (x - 5) ** 2 + 4]]


def distance_to(curve: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Each point's distance to the nearest of the curve's, objectives scaled to [0, 1]."""
    low, span = curve.min(axis=0), np.ptp(curve, axis=0)
    a, b = (curve - low) / span, (points - low) / span
    return np.sqrt(((b[:, None, :] - a[None, :, :]) ** 2).sum(axis=2)).min(axis=1)


@pytest.mark.slow
def test_binh_and_korn_front_meets_its_constraints_and_the_known_curve(tmp_path):
    (tmp_path / "zdt.py").write_text((STUDIES / "zdt.py").read_text())
    results = studyrun.run(write_study(tmp_path, BINH_KORN), tmp_path / "out", report=False).results
    front = results["pareto"]
    f = objectives(front)
    assert len(front) >= 30 and f[:, 0].max() > 100  # both branches of the front reached
    assert distance_to(binh_korn_front(), f).max() < 0.01
    assert all(p["quantities"]["c1"] <= 25 and p["quantities"]["c2"] >= 7.7 for p in front)
    for p in results["infeasible"]:
        q = p["quantities"]
        assert p["violation"] == pytest.approx(max(q["c1"] - 25, 0) + max(7.7 - q["c2"], 0))


@pytest.mark.slow
def test_a_constraint_that_cuts_the_front_leaves_infeasible_candidates_apart(tmp_path):
    """f1 <= 40 cuts the Binh and Korn front at f1 = 40; candidates beyond are infeasible."""
    (tmp_path / "zdt.py").write_text((STUDIES / "zdt.py").read_text())
    text = BINH_KORN.replace('"c2 >= 7.7"]', '"c2 >= 7.7", "f1 <= 40"]').replace(
        "generations: 60", "generations: 25")
    results = studyrun.run(write_study(tmp_path, text), tmp_path / "out", report=False).results
    f = objectives(results["pareto"])
    assert f[:, 0].max() <= 40 and f[:, 0].max() > 35
    seen = results["evaluated"]
    assert not all(seen["feasible"]) and any(seen["feasible"])
    for p in results["infeasible"]:
        assert p["violation"] > 0 and not p["failed"]


@pytest.mark.slow
def test_nsga3_on_dtlz2_finds_the_sphere_and_draws_parallel_coordinates(tmp_path):
    text = (STUDIES / "zdt1-nsga2.yaml").read_text().replace("zdt:zdt1", "zdt:dtlz2")
    text = text.replace("quantities:\n  f1: f1\n  f2: f2", "quantities:\n  f1: f1\n  f2: f2\n  f3: f3")
    text = re.sub(r"  objectives:\n    minimize: \[f1, f2\]", "  objectives:\n    minimize: [f1, f2, f3]", text)
    text = text.replace("method: nsga2 ", "method: nsga3 ").replace("population: 60", "population: 92")
    text = text.replace("generations: 100", "generations: 60").replace(
        "reference: {f1: 1, f2: 1}", "reference: {f1: 1.1, f2: 1.1, f3: 1.1}")
    (tmp_path / "zdt.py").write_text((STUDIES / "zdt.py").read_text())
    path = write_study(tmp_path, text + "execution: {scheduler: sync}\n")
    results = studyrun.run(path, tmp_path / "out").results
    f = objectives(results["pareto"], ("f1", "f2", "f3"))
    assert results["method"] == "nsga3" and len(f) >= 40
    assert np.abs(np.linalg.norm(f, axis=1) - 1).max() < 0.02
    # the hypervolume of the ideal points (NSGA-III's reference directions on the sphere)
    from pymoo.indicators.hv import HV
    from pymoo.util.ref_dirs import get_reference_directions

    ideal = get_reference_directions("das-dennis", 3, n_partitions=12)
    ideal = ideal / np.linalg.norm(ideal, axis=1)[:, None]
    best = HV(ref_point=np.full(3, 1.1))(ideal)
    assert 0.97 * best < results["hypervolume"][-1] < 1.1**3 - np.pi / 6  # the whole octant's
    assert "parallel coordinates" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.slow
def test_robust_front_is_the_closed_form_over_the_common_scenarios(tmp_path):
    """Every candidate is run over the same 64 draws of u; mean((x - u)^2) = (x - m)^2 + v, and
    the front spans x from m to where the 90th percentile of (x - u)^2 reaches 3."""
    result = run_example(tmp_path, "shifted-squares-robust")
    runs = result.runs
    u = np.unique(runs["u"])
    assert len(u) == 64
    for _, group in runs.groupby("x"):  # common random numbers: each candidate saw the same u
        assert np.array_equal(np.sort(group["u"].to_numpy()), u)
    m, v = u.mean(), u.var()
    front = result.results["pareto"]
    x = np.array([p["parameters"]["x"] for p in front])
    f = objectives(front, ("mean(near)", "mean(far)"))
    np.testing.assert_allclose(f[:, 0], (x - m) ** 2 + v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f[:, 1], (x - 2 - m) ** 2 + v, rtol=1e-12, atol=1e-12)
    grid = np.linspace(m, m + 2, 20001)
    allowed = grid[np.percentile((grid[:, None] - u) ** 2, 90, axis=1) <= 3].max()
    assert x.min() == pytest.approx(m, abs=0.02) and x.max() == pytest.approx(allowed, abs=0.02)
    assert all(p["quantities"]["percentile(near, 90)"] <= 3 for p in front)
    assert result.results["scenarios"] == 64
    assert result.results["evaluations"] == 64 * result.results["candidates"]
    report = (result.folder / "report.md").read_text()  # a point to paste keeps the uncertain u
    assert "the uncertain parameters stay as they are" in report
    assert "  # ... and the uncertain parameters, as the study gives them" in report


SLOW = """
import time
import numpy as np

def model(x1, x2, x3, x4, x5):
    time.sleep(0.002)
    g = 1 + 9 * (x2 + x3 + x4 + x5) / 4
    return {"f1": x1, "f2": g * (1 - np.sqrt(x1 / g))}
"""


@pytest.mark.slow
def test_a_killed_search_resumes_and_ends_with_the_same_front(tmp_path):
    """SIGKILL the driver mid-search; the rerun reuses every stored run, goes on from there, and
    ends with the front of an uninterrupted study of the same seed."""
    (tmp_path / "slow.py").write_text(SLOW)
    text = (STUDIES / "zdt1-nsga2.yaml").read_text().replace("zdt:zdt1", "slow:model").replace(
        "vectorized: true", "vectorized: false").replace("population: 60", "population: 20")
    text = text.replace("generations: 100", "generations: 12")
    path = write_study(tmp_path, text + "execution: {scheduler: sync, batch_size: 5}\n")
    stored, analysis = killed_and_resumed(path, tmp_path / "out", 100)
    assert 100 <= stored < 240, stored
    assert analysis["runs"]["reused"] >= stored - 5
    fresh = studyrun.run(path, tmp_path / "fresh", report=False)
    assert analysis["results"] == json.loads(json.dumps(fresh.results))


@pytest.mark.thorough
@pytest.mark.slow
def test_the_front_does_not_depend_on_scheduler_or_batch_size(tmp_path):
    """One process, then a LocalCluster of two workers with batch sizes 1, the default and 64."""
    fronts, ran = [], []
    for execution in ("{scheduler: sync}", *(f"{{scheduler: local, workers: 2, batch_size: {b}}}"
                                             for b in (1, "auto", 64))):
        folder = tmp_path / str(len(fronts))
        folder.mkdir()
        done = run_example(folder, "zdt1-nsga2", execution, report=False, **{
            "population: 60": "population: 24", "generations: 100": "generations: 8"})
        fronts.append(done.results)
        ran.append(done.analysis["execution"]["scheduler"])
    assert fronts[0] == fronts[1] == fronts[2] == fronts[3]
    assert ran[0] == "sync" and all(s != "sync" for s in ran[1:]), ran


FAILING = """
import numpy as np

def model(x1, x2, x3, x4, x5):
    if x1 > 0.8:
        raise RuntimeError("no solution past x1 = 0.8")
    g = 1 + 9 * (x2 + x3 + x4 + x5) / 4
    return {"f1": x1, "f2": g * (1 - np.sqrt(x1 / g))}
"""


@pytest.mark.slow
def test_failed_runs_are_infeasible_candidates_and_the_search_goes_on(tmp_path):
    (tmp_path / "failing.py").write_text(FAILING)
    text = (STUDIES / "zdt1-nsga2.yaml").read_text().replace("zdt:zdt1", "failing:model").replace(
        "vectorized: true", "vectorized: false").replace("generations: 100", "generations: 30")
    path = write_study(tmp_path, text + "execution: {scheduler: sync, on_failure: continue}\n")
    done = studyrun.run(path, tmp_path / "out", report=False)
    results, runs = done.results, done.analysis["runs"]
    assert runs["failed"] > 0 and runs["succeeded"] > 0
    f = objectives(results["pareto"])
    assert f[:, 0].max() <= 0.8 and f[:, 0].max() > 0.7
    seen = results["evaluated"]
    assert None in seen["objectives"] and not all(seen["feasible"])
    assert all(p["failed"] for p in results["infeasible"])


@pytest.mark.slow
def test_every_mistake_of_a_multi_objective_block_is_located_at_once(tmp_path):
    (tmp_path / "zdt.py").write_text((STUDIES / "zdt.py").read_text())
    text = BINH_KORN.replace("minimize: [f1, f2]", "minimize: [f1, mean(f2)], maximize: [f3]")
    text = text.replace('["c1 <= 25", "c2 >= 7.7"]', '["c1 = 25", "c9 >= 7.7"]')
    text = text.replace("population: 60", "population: 60\n  reference: {f4: 1}")
    path = write_study(tmp_path, text)
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = done.stderr.strip().splitlines()
    expected = [  # each at its item: indices as in correlation[0][1], the items' columns
        ":11:31: analysis.objectives.minimize[1]: 'mean(f2)' is a statistic over scenarios, but "
        "the analysis has no scenarios",
        ":11:53: analysis.objectives.maximize[0]: 'f3' is not a quantity of the study",
        ":12:17: analysis.constraints[0]: invalid syntax in 'c1 = 25'",
        ":12:28: analysis.constraints[1]: 'c9' is not a quantity of the study",
        ":14:15: analysis.reference.f4: 'f4' is not an objective",
    ]
    for message in expected:
        assert any(message in line for line in errors), (message, errors)
    assert all(re.match(rf"{re.escape(str(path))}:\d+:\d+: analysis\.", line) for line in errors)
    assert len(errors) == len(expected), errors


@pytest.mark.slow
def test_an_objective_yaml_split_at_its_comma_is_told_to_be_quoted(tmp_path):
    """`minimize: [f1, percentile(f2, 95)]` is three items to YAML; the split one is named once,
    with the list to write, and still checked as written (and so is a split constraint)."""
    (tmp_path / "zdt.py").write_text((STUDIES / "zdt.py").read_text())
    text = BINH_KORN.replace("y: {bounds: [0, 3]}", "y: {distribution: uniform, low: 0, high: 3}")
    text = text.replace("minimize: [f1, f2]", "minimize: [f1, percentile(f2, 150)]")
    text = text.replace('["c1 <= 25", "c2 >= 7.7"]', "[percentile(c1, 90) <= 25]")
    text = text.replace("population: 60", "population: 60\n  scenarios: 8\n  "
                        "reference: {f1: 1, 'percentile(f2, 150)': 1}")
    path = write_study(tmp_path, text)
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"{path}:11:31: analysis.objectives.minimize[1]: YAML split 'percentile(f2, 150)' at its "
        "comma into 'percentile(f2', '150)': in a [a, b] list every comma ends an item; quote it: "
        'minimize: [f1, "percentile(f2, 150)"]',
        f"{path}:11:31: analysis.objectives.minimize[1]: 'percentile(f2, 150)': the percent must "
        "be from 0 to 100, got 150",
        f"{path}:12:17: analysis.constraints[0]: YAML split 'percentile(c1, 90) <= 25' at its "
        "comma into 'percentile(c1', '90) <= 25': in a [a, b] list every comma ends an item; "
        'quote it: constraints: ["percentile(c1, 90) <= 25"]',
    ]


@pytest.mark.slow
def test_a_statistic_without_scenarios_still_has_its_quantity_checked(tmp_path):
    (tmp_path / "zdt.py").write_text((STUDIES / "zdt.py").read_text())
    text = BINH_KORN.replace("minimize: [f1, f2]", "minimize: [f1, mean(f3)]")
    text = text.replace('"c2 >= 7.7"', '"percentile(c9, 90) >= 7.7"')
    path = write_study(tmp_path, text)
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = done.stderr.splitlines()
    for where, message in (("minimize[1]", "'mean(f3)' is a statistic over scenarios, but the "
                            "analysis has no scenarios"),
                           ("minimize[1]", "'f3' is not a quantity of the study"),
                           ("constraints[1]", "'percentile(c9, 90)' is a statistic over scenarios"),
                           ("constraints[1]", "'c9' is not a quantity of the study")):
        assert any(f"{where}: {message}" in line for line in errors), (where, message, errors)
    assert len(errors) == 4, errors


@pytest.mark.slow
def test_wrong_counts_are_reported_with_the_objectives_mistakes(tmp_path):
    """generations: 0 once hid every mistake of the objectives and constraints; population: 1
    passed (NSGA-II pairs two candidates in its tournaments and crossovers)."""
    (tmp_path / "zdt.py").write_text((STUDIES / "zdt.py").read_text())
    text = BINH_KORN.replace("minimize: [f1, f2]", "minimize: [f1, f9]").replace(
        '"c2 >= 7.7"', '"c8 >= 7.7"').replace("population: 60", "population: 1").replace(
        "generations: 60", "generations: 0")
    path = write_study(tmp_path, text)
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert [line.split(": ", 2)[1] for line in done.stderr.splitlines()] == [
        "analysis.objectives.minimize[1]", "analysis.constraints[1]", "analysis.population",
        "analysis.generations"]
    assert (f"{path}:13:3: analysis.population: nsga2 needs a population of at least 2, got 1: "
            "its binary tournaments and crossovers pair two different candidates; give "
            "population: 2 or more (default 100)\n") in done.stderr
    assert f"{path}:14:3: analysis.generations: must be at least 1, got 0" in done.stderr


@pytest.mark.parametrize("analysis, message", [
    ("{type: optimize, method: nsga2, objectives: {minimize: [f1]}}", "two or more objectives"),
    ("{type: optimize, method: nsga2, minimize: [f1, f2]}", "minimize: not read by method: nsga2"),
    ("{type: optimize, objectives: {minimize: [f1, f2]}}", "objectives applies to method: nsga2"),
    ("{type: optimize, method: nsga2, objectives: {minimize: [f1, f2]}, scenarios: 8}",
     "scenarios draw the parameters that have a distribution, and this study has none"),
    ("{type: optimize, method: nsga2, objectives: {minimize: [f1, f2]}, constraints: [f1]}",
     "'f1' is not an inequality"),
    ("{type: optimize, method: nsga3, objectives: {minimize: [f1, f2, c1]}, population: 2}",
     "nsga3 needs a population of at least one candidate per objective (3)"),
    ("{type: optimize, method: nsga2, objectives: {minimize: [f1, f2]}, population: 1}",
     "nsga2 needs a population of at least 2, got 1"),
    # found by the fuzz tests: sizing the memory of a generation of 0 divided by zero
    ("{type: optimize, method: nsga2, objectives: {minimize: [f1, f2]}, population: 0}",
     "nsga2 needs a population of at least 2, got 0"),
    ("{type: optimize, method: nsga2, objectives: {minimize: [f1, f2], maximize: [f1]}}",
     "analysis.objectives.maximize[0]: 'f1' is an objective twice (first at "
     "analysis.objectives.minimize[0]); give each once"),
    ("{type: optimize, method: differential-evolution, minimize: f1, population: 0}",
     "analysis.population: must be at least 1, got 0"),
])
def test_a_wrong_multi_objective_block_says_what_to_write(tmp_path, analysis, message):
    (tmp_path / "zdt.py").write_text((STUDIES / "zdt.py").read_text())
    text = BINH_KORN.split("analysis:")[0] + f"analysis: {analysis}\n"
    with pytest.raises(studyrun.StudyError) as error:
        studyrun.load(write_study(tmp_path, text))
    assert message in str(error.value)


@pytest.mark.slow
def test_report_shows_the_front_and_each_point_as_a_parameters_block(tmp_path):
    done = run_cli("run", STUDIES / "zdt1-nsga2.yaml", "--out", tmp_path, "--quiet",
                   "--scheduler", "sync")
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "report.md").read_text()
    results = json.loads((tmp_path / "analysis.json").read_text())["results"]
    for figure in ("pareto-front", "pareto-hypervolume"):
        assert f"](figures/{figure}.png)" in report and (tmp_path / "figures" / f"{figure}.png").exists()
    blocks = re.findall(r"```yaml\n(.*?)```", report, re.S)
    assert len(blocks) == len(results["pareto"])
    for block, point in zip(blocks, results["pareto"]):
        assert yaml.safe_load(block) == {"parameters": point["parameters"]}
    plan = run_cli("plan", STUDIES / "zdt1-nsga2.yaml")
    assert "NSGA-II (pymoo), 100 generations of 60 candidates" in plan.stdout, plan.stdout
    assert "(at most 6,000 runs; fewer where candidates repeat)" in plan.stdout
    robust = run_cli("plan", STUDIES / "shifted-squares-robust.yaml").stdout
    assert "at most 76,800 runs" in robust  # 30 generations of 40 candidates, 64 scenarios each


def test_statistics_over_scenarios_are_numpys():
    from studyrun.analyses.pareto.terms import statistic

    values = np.random.default_rng(2).normal(size=(4, 64))
    np.testing.assert_array_equal(statistic("mean(q)", True).over(values), values.mean(axis=1))
    np.testing.assert_array_equal(statistic("q", True).over(values), values.mean(axis=1))
    np.testing.assert_array_equal(statistic("std(q)", True).over(values), values.std(axis=1))
    np.testing.assert_array_equal(statistic("percentile(q, 95)", True).over(values),
                                  np.percentile(values, 95, axis=1))
    for text, message in (("percentile(q)", "takes a quantity and a percent"),
                          ("percentile(q, 101)", "from 0 to 100"), ("median(q)", "not a quantity")):
        with pytest.raises(ValueError, match=re.escape(message)):
            statistic(text, True)


def test_a_constraints_violation_is_how_far_it_is_off():
    from studyrun.analyses.pareto.terms import constraint

    env = {"travel": np.array([0.05, 0.08, 0.1, np.nan]), "comfort": np.array([1.0, 2, 3, 4])}
    np.testing.assert_allclose(constraint("travel <= 0.08", False, 0).violation(env),
                               [0, 0, 0.02, np.nan])
    np.testing.assert_allclose(constraint("2 * comfort >= travel + 5", False, 0).violation(env),
                               [3.05, 1.08, 0, np.nan])
    robust = constraint("percentile(travel, 90) < 0.1", True, 3)
    assert robust.quantities == {"travel"} and len(robust.statistics) == 1


@pytest.mark.slow
def test_a_distribution_searched_as_a_decision_is_warned_of(tmp_path):
    """Without scenarios every varied parameter is a decision over its box: a parameter given
    a distribution is searched, not drawn, and the study says so (with scenarios, it does not)."""
    short = {"generations: 30": "generations: 2"}
    plain = {**short, "  scenarios: 64\n": "", "mean(near), mean(far)": "near, far",
             '"percentile(near, 90) <= 3"': '"near <= 3"'}
    results = {}
    for name, changes in (("robust", short), ("plain", plain)):
        (tmp_path / name).mkdir()
        results[name] = run_example(tmp_path / name, "shifted-squares-robust", report=False,
                                    **changes)
    [warning] = results["plain"].analysis["warnings"]
    assert "nsga2 searches every varied parameter as a decision over its box, u too" in warning
    assert "give analysis.scenarios: N" in warning
    assert results["robust"].analysis["warnings"] == []
