"""optimize with method: bayesian (EGO): known optima (Branin, a constrained quadratic, the
beam example), failed runs and NaN outputs steered around, resume after SIGKILL, independence of
the executor's batch size, validation and the report."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import STUDIES, killed_and_resumed, run_cli, run_example, write_study

import studyrun

MODELS = '''
import time
import numpy as np

def branin(x1, x2):
    b, c, t = 5.1 / (4 * np.pi ** 2), 5 / np.pi, 1 / (8 * np.pi)
    return {"f": (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * np.cos(x1) + 10}

def branin_failing(x1, x2):
    """Branin that raises left of x1 = 0, where one of its three minima lies."""
    if x1 < 0:
        raise RuntimeError("no solution for x1 < 0")
    return branin(x1, x2)

def branin_nan(x1, x2):
    """Branin that gives NaN left of x1 = 0."""
    return {"f": float("nan") if x1 < 0 else float(branin(x1, x2)["f"])}

def hartmann6(x1, x2, x3, x4, x5, x6):
    """Hartmann 6: minimum -3.32237 in the unit cube."""
    a = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
                  [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
    p = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                         [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])
    x = np.column_stack([x1, x2, x3, x4, x5, x6])
    inner = (a[None] * (x[:, None, :] - p[None]) ** 2).sum(axis=2)
    return {"f": -(np.array([1.0, 1.2, 3.0, 3.2])[None] * np.exp(-inner)).sum(axis=1)}

def quadratic(x, y):
    """(x - 0.7)^2 + (y - 0.7)^2 under x + y <= 1: the optimum is (0.5, 0.5), 0.08."""
    return {"f": (x - 0.7) ** 2 + (y - 0.7) ** 2, "total": x + y}

def slow_quadratic(x, y):
    time.sleep(0.05)
    return quadratic(x, y)
'''

BRANIN = """
name: branin
seed: {seed}
model: {{type: python, function: models:{function}, vectorized: {vectorized}}}
parameters:
  x1: {{bounds: [-5, 10]}}
  x2: {{bounds: [0, 15]}}
quantities: {{f: f}}
analysis:
  type: optimize
  method: bayesian
  minimize: f
  max_evaluations: 50
{extra}execution: {{scheduler: sync, on_failure: continue}}
"""

QUADRATIC = """
name: quadratic
seed: 5
model: {type: python, function: models:FUNCTION}
parameters:
  x: {bounds: [0, 1]}
  y: {bounds: [0, 1]}
quantities: {f: f, total: total}
analysis:
  type: optimize
  method: bayesian
  minimize: f
  constraints: ["total <= 1"]
  batch: 3
  max_evaluations: 30
"""
BRANIN_MINIMUM = 0.397887


def branin(tmp_path, seed=1, function="branin", vectorized="true", extra=""):
    (tmp_path / "models.py").write_text(MODELS)
    text = BRANIN.format(seed=seed, function=function, vectorized=vectorized, extra=extra)
    return studyrun.run(write_study(tmp_path, text, f"branin-{seed}.yaml"),
                        tmp_path / f"out-{seed}", report=False)


@pytest.mark.slow
@pytest.mark.thorough
@pytest.mark.timeout(1200)  # five searches: 66 s alone, over 300 s at a load of 15 on 2 cores
def test_branin_comes_within_1e3_of_its_minimum_in_at_most_50_runs(tmp_path):
    """The median over five seeds of the best objective's distance to 0.397887 is below 1e-3,
    and each seed's best is one of the three minimisers' neighbourhoods."""
    gaps, runs = [], []
    for seed in range(1, 6):
        r = branin(tmp_path, seed).results
        gaps.append(r["objective"]["final"] - BRANIN_MINIMUM)
        runs.append(r["evaluations"])
        x = (r["parameters"]["x1"]["optimum"], r["parameters"]["x2"]["optimum"])
        minimisers = [(-np.pi, 12.275), (np.pi, 2.275), (9.42478, 2.475)]
        assert min(np.hypot(x[0] - a, x[1] - b) for a, b in minimisers) < 0.1, x
        # the optimum is the run of least GP mean: on this noise-free model, the best run seen
        # or one within 1e-5 of it (one seed: 0.3978882 beside 0.3978874)
        assert 0 <= r["objective"]["final"] - r["history"][-1] < 1e-5
        assert len(r["history"]) == r["evaluations"]
        assert r["surrogate"]["q2"] > 0.9 and set(r["surrogate"]["length_scales"]) == {"x1", "x2"}
    assert min(gaps) >= 0 and np.median(gaps) < 1e-3, gaps
    assert max(runs) <= 50, runs


@pytest.mark.thorough
@pytest.mark.slow
def test_hartmann_6_comes_within_1_percent_of_its_minimum_in_at_most_150_runs(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    text = ("name: hartmann\nseed: 1\nmodel: {type: python, function: models:hartmann6, "
            "vectorized: true}\nparameters:\n"
            + "".join(f"  x{i}: {{bounds: [0, 1]}}\n" for i in range(1, 7))
            + "quantities: {f: f}\nanalysis: {type: optimize, method: bayesian, minimize: f, "
              "max_evaluations: 150}\nexecution: {scheduler: sync}\n")
    r = studyrun.run(write_study(tmp_path, text), tmp_path / "out", report=False).results
    assert r["objective"]["final"] <= -3.32237 * 0.99 and r["evaluations"] <= 150
    assert r["initial"] == 14 and r["surrogate"]["q2"] > 0.9


@pytest.mark.slow
def test_lcb_finds_branins_minimum_too(tmp_path):
    r = branin(tmp_path, extra="  acquisition: lcb\n").results
    assert r["acquisition"] == "lcb" and r["objective"]["final"] - BRANIN_MINIMUM < 0.01


@pytest.mark.slow
def test_a_linear_constraint_active_at_the_optimum_is_met_there(tmp_path):
    """(x - 0.7)^2 + (y - 0.7)^2 under x + y <= 1, three runs a round: (0.5, 0.5) and 0.08, the
    constraint met at the optimum and the best point a feasible one."""
    (tmp_path / "models.py").write_text(MODELS)
    path = write_study(tmp_path, QUADRATIC.replace("FUNCTION", "quadratic")
                       + "execution: {scheduler: sync}\n")
    r = studyrun.run(path, tmp_path / "out", report=False).results
    assert r["objective"]["final"] == pytest.approx(0.08, abs=2e-3)
    assert r["parameters"]["x"]["optimum"] == pytest.approx(0.5, abs=0.03)
    assert r["parameters"]["y"]["optimum"] == pytest.approx(0.5, abs=0.03)
    met = r["constraint_values"]["total <= 1"]
    assert met["met"] and met["right"] == 1 and 0.97 < met["left"] <= 1
    assert r["evaluated"]["feasible"][r["evaluated"]["objective"].index(r["objective"]["final"])]
    rounds = r["evaluated"]["round"]
    assert rounds.count(0) == r["initial"] == 6 and all(rounds.count(k) <= 3 for k in set(rounds) - {0})


@pytest.mark.slow
def test_the_beam_example_finds_the_lightest_section_within_the_stress_limit(tmp_path):
    """The stress, 36 to 36,000 MPa over the box, is modelled as log(stress / 250): the area
    within 0.1% of 720 mm^2 (720.003 in 48 runs), and within 1% by the 24th run (the 17th)."""
    r = run_example(tmp_path, "beam-bayesian").results
    assert r["objective"]["final"] == pytest.approx(720, rel=1e-3)
    assert next(i for i, v in enumerate(r["history"]) if v is not None and v <= 727.2) < 24
    assert r["constraint_values"]["stress <= 250"]["met"]
    assert r["parameters"]["depth"]["optimum"] > 95
    report = (tmp_path / "out" / "report.md").read_text()
    assert "optimize-history" in report and "optimize-runs" in report and "Q2" in report
    assert "| stress <= 250 |" in report and "| yes |" in report  # the constraint at the optimum


@pytest.mark.thorough
@pytest.mark.slow
def test_the_search_does_not_stop_short_of_a_sliver_along_an_active_constraint(tmp_path):
    """The beam one run a round (seed 4): the area improves only in a sliver along the stress
    limit, which 1,024 random points miss, so the EI they find falls below the tolerance and
    the search stopped at 730.5 mm^2 (723.4 before issue 34's second pass). The maximiser also
    starts near the best feasible runs: within 0.1% of 720 (720.012)."""
    r = run_example(tmp_path, "beam-bayesian", report=False, **{
        "seed: 3": "seed: 4", "initial: 8": "initial: 6", "batch: 4": "batch: 1",
        "max_evaluations: 48": "max_evaluations: 40"}).results
    assert r["objective"]["final"] == pytest.approx(720, rel=1e-3)
    assert r["constraint_values"]["stress <= 250"]["met"]


@pytest.mark.slow
@pytest.mark.parametrize("function, batch", [("branin_failing", 1),
                                             pytest.param("branin_nan", 1,
                                                          marks=pytest.mark.thorough),
                                             pytest.param("branin_failing", 3,
                                                          marks=pytest.mark.thorough)])
def test_a_region_that_fails_is_learned_and_the_optimum_outside_it_found(tmp_path, function,
                                                                         batch):
    """Left of x1 = 0 the model raises (or gives NaN): the runs there are in `failed` with where
    they were, few land there after the first design, and a minimum right of it is found; in
    rounds of three runs too (the constant liar tells the failure GP its own prediction)."""
    done = branin(tmp_path, function=function, vectorized="false", extra=f"  batch: {batch}\n")
    r = done.results
    assert r["objective"]["final"] - BRANIN_MINIMUM < 0.01
    assert r["parameters"]["x1"]["optimum"] > 0
    failed = r["failed"]
    assert failed and all(f["parameters"]["x1"] < 0 for f in failed)
    later = [f for f in failed if f["round"] > 0]
    # a third of the box fails: random runs after the first design would put 14 or 15 there.
    # Seeds 1-4 put 4, 7, 5, 7 there one run a round (before issue 34's second pass: 6, 9, 9,
    # 14) and 5, 9, 9, 9 in rounds of three (8, 9, 10, 11)
    assert len(later) <= (6 if batch == 1 else 8), later
    assert sum(o is None for o in r["evaluated"]["objective"]) == len(failed)
    if function == "branin_failing":
        assert done.analysis["runs"]["failed"] == len(failed)


@pytest.mark.slow
def test_a_killed_study_resumes_and_ends_with_the_same_result(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    text = QUADRATIC.replace("FUNCTION", "slow_quadratic").replace("max_evaluations: 30",
                                                                   "max_evaluations: 24")
    path = write_study(tmp_path, text + "execution: {scheduler: sync, batch_size: 2}\n")
    stored, analysis = killed_and_resumed(path, tmp_path / "out", 12)
    assert 12 <= stored < 24, stored
    assert analysis["runs"]["reused"] >= stored - 2
    fresh = studyrun.run(path, tmp_path / "fresh", report=False)
    assert analysis["results"] == json.loads(json.dumps(fresh.results))


@pytest.mark.thorough
@pytest.mark.slow
def test_results_do_not_depend_on_the_executors_batch_size(tmp_path):
    """One process, then a LocalCluster of two workers with batch sizes 1, the default and 64:
    the same analysis.json results (the method's own `batch` is part of the design)."""
    (tmp_path / "models.py").write_text(MODELS)
    results, ran = [], []
    for execution in ("{scheduler: sync}", *(f"{{scheduler: local, workers: 2, batch_size: {b}}}"
                                             for b in (1, "auto", 64))):
        text = QUADRATIC.replace("FUNCTION", "quadratic").replace("max_evaluations: 30",
                                                                  "max_evaluations: 15")
        path = write_study(tmp_path, text + f"execution: {execution}\n")
        done = studyrun.run(path, tmp_path / f"out{len(results)}", report=False)
        results.append(json.loads(json.dumps(done.results)))
        ran.append(done.analysis["execution"]["scheduler"])
    assert results[0] == results[1] == results[2] == results[3]
    assert results[0]["evaluations"] == 15 and results[0]["batches"] == 4  # 6, then 3 a round
    assert ran[0] == "sync" and all(s != "sync" for s in ran[1:]), ran


@pytest.mark.parametrize("analysis, message", [
    ("{type: optimize, minimize: f, constraints: ['total <= 1']}",
     "constraints applies to method: bayesian, nsga2 or nsga3, not nelder-mead"),
    ("{type: optimize, minimize: f, batch: 4}", "batch applies to method: bayesian, not nelder"),
    ("{type: optimize, method: bayesian, minimize: f, multistart: 3}",
     "multistart applies to nelder-mead and lbfgsb, not bayesian"),
    ("{type: optimize, method: bayesian, minimize: f, acquisition: pi}", "unknown value 'pi'; allowed: ei, lcb"),
    ("{type: optimize, method: bayesian, minimize: f, batch: 0}", "greater than 0"),
    ("{type: optimize, method: bayesian, minimize: f, max_evaluations: 100000}",
     "analysis.max_evaluations: bayesian fits its GPs on every run, each round (n^3 for n runs): "
     "at most 5000, got 100000"),
    ("{type: optimize, method: bayesian, minimize: f, max_evaluations: 10, initial: 11}",
     "analysis.initial: must be at most max_evaluations (10), got 11"),
    ("{type: optimize, method: bayesian, minimize: f, batch: 51}",
     "analysis.batch: must be at most max_evaluations (50), got 51"),
    ("{type: optimize, method: bayesian, minimize: f, constraints: ['totl <= 1']}",
     "analysis.constraints[0]: 'totl' is not a quantity of the study; did you mean 'total'?"),
    ("{type: optimize, method: bayesian, minimize: f, constraints: [total]}",
     "'total' is not an inequality"),
    ("{type: optimize, method: bayesian, minimize: f, constraints: ['mean(total) <= 1']}",
     "is a statistic over scenarios, but the analysis has no scenarios"),
])
def test_a_wrong_bayesian_block_says_what_to_write(tmp_path, analysis, message):
    (tmp_path / "models.py").write_text(MODELS)
    text = QUADRATIC.split("analysis:")[0] + f"analysis: {analysis}\n"
    with pytest.raises(studyrun.StudyError) as error:
        studyrun.load(write_study(tmp_path, text.replace("FUNCTION", "quadratic")))
    assert message in str(error.value)


def test_a_wrong_bayesian_block_is_one_located_line_on_the_command_line(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    text = QUADRATIC.replace("FUNCTION", "quadratic").replace("batch: 3", "batch: 300")
    path = write_study(tmp_path, text)
    done = run_cli("validate", str(path), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == (f"{path}:13:3: analysis.batch: must be at most max_evaluations (30), "
                           "got 300\n")


def test_plan_shows_the_first_design_that_run_makes(tmp_path):
    """`studyrun plan`'s design is the nominal start and a Latin hypercube, 2 x 2 + 2 runs by
    default, the very rows the run starts with."""
    (tmp_path / "models.py").write_text(MODELS)
    path = write_study(tmp_path, QUADRATIC.replace("FUNCTION", "quadratic").replace(
        "  batch: 3\n", ""))
    from studyrun.study.loading import load_study

    loaded = load_study(path)
    design = loaded.study.analysis.design(loaded.context, np.random.SeedSequence(5))
    assert design.matrix.shape == (6, 2) and design.matrix[0].tolist() == [0.5, 0.5]
    described = run_cli("plan", str(path), cwd=tmp_path)
    assert described.returncode == 0, described.stderr
    assert "a first design of 6 runs" in described.stdout and "at most 30 runs" in described.stdout


def test_log_expected_improvement_is_exact_near_and_finite_far_below():
    from scipy.stats import norm

    from studyrun.analyses.bayesian.acquisition import log_h

    z = np.linspace(-20, 5, 200)
    np.testing.assert_allclose(log_h(z), np.log(z * norm.cdf(z) + norm.pdf(z)), rtol=1e-9)
    far = log_h(np.array([-40.0, -1e3, -1e6, -1e100]))
    assert np.all(np.isfinite(far)) and np.all(np.diff(far) < 0)
    assert np.isfinite(log_h(np.array([-1e300, -np.inf]))).all()
    assert far[0] == pytest.approx(-0.5 * 1600 - 0.5 * np.log(2 * np.pi) - 2 * np.log(40), rel=1e-4)


def test_the_example_study_is_in_studies():
    assert (STUDIES / "beam-bayesian.yaml").exists() and (STUDIES / "beam.py").exists()


HOSTILE = '''
import numpy as np

def always_fails(x, y):
    raise RuntimeError("never runs")

def flat(x, y):
    return {"f": 1.0, "total": x + y}

def infinite(x, y):
    return {"f": float("inf") if x > 0.5 else (x - 0.2) ** 2 + y, "total": x + y}
'''


@pytest.mark.parametrize("function, constraint, expect", [
    ("always_fails", "total <= 1", "every run failed or gave no finite objective"),
    ("flat", "total <= 1", None),
    ("flat", "total >= 5", "no run met every constraint"),
    ("infinite", "total <= 1", None),
])
def test_hostile_models_end_with_an_answer_or_say_why_not(tmp_path, function, constraint, expect):
    """A model that always fails, one whose objective never changes, a constraint no run can
    meet, and an infinite objective: each study ends within max_evaluations, its results
    finite or null and its report drawn."""
    (tmp_path / "models.py").write_text(HOSTILE)
    text = QUADRATIC.replace("FUNCTION", function).replace("total <= 1", constraint).replace(
        "max_evaluations: 30", "max_evaluations: 12")
    done = studyrun.run(write_study(tmp_path, text + "execution: {scheduler: sync, on_failure: "
                                    "continue}\n"), tmp_path / "out")
    r = done.results
    assert r["evaluations"] <= 12
    assert (expect is None) == (not r["notes"]) and (expect is None or expect in r["notes"][0])
    if expect is not None:
        assert r["converged"] is False
    if function == "always_fails":
        assert len(r["failed"]) == r["evaluations"] and r["objective"]["final"] is None
    if function == "infinite":
        assert r["failed"] and all(f["parameters"]["x"] > 0.5 for f in r["failed"])
        assert r["parameters"]["x"]["optimum"] <= 0.5
    json.dumps(r, allow_nan=False)
    assert (tmp_path / "out" / "report.md").exists()


NOISY = '''
import numpy as np

def noisy(x, y):
    """(x - 0.3)^2 + (y - 0.6)^2 plus a deterministic noise of amplitude 0.02."""
    return {"f": (x - 0.3) ** 2 + (y - 0.6) ** 2 + 0.02 * np.sin(1e4 * x + 3e4 * y), "total": x + y}
'''


@pytest.mark.slow
def test_a_noisy_model_gets_a_fitted_nugget_and_its_optimum_by_the_gps_mean(tmp_path):
    """Noise of amplitude 0.02 on a bowl: the GP fits a nugget, and the optimum reported is the
    run of least GP mean, near the bowl's bottom, not the run the noise lowered most."""
    (tmp_path / "models.py").write_text(NOISY)
    text = QUADRATIC.replace("FUNCTION", "noisy").replace("  constraints: [\"total <= 1\"]\n", "")
    r = studyrun.run(write_study(tmp_path, text + "execution: {scheduler: sync}\n"),
                     tmp_path / "out", report=False).results
    assert r["surrogate"]["noise_variance"] > 1e-4
    x, y = r["parameters"]["x"]["optimum"], r["parameters"]["y"]["optimum"]
    assert (x - 0.3) ** 2 + (y - 0.6) ** 2 < 0.01
    observed = [o for o in r["evaluated"]["objective"] if o is not None]
    chosen = r["surrogate"]["predicted_optimum"]
    assert abs(chosen - ((x - 0.3) ** 2 + (y - 0.6) ** 2)) < 0.02
    assert r["history"][-1] == min(observed)  # the history is of runs as observed


SIX = '''
import numpy as np

def six(a, b, c, d, e, g):
    return {"f": (a - 0.2) ** 2 + 4 * (b - 0.5) ** 2 + 0.01 * (c + d + e + g)}
'''


def test_the_report_draws_pairs_of_the_five_parameters_of_shortest_length_scale(tmp_path):
    """Six parameters: the runs are drawn pair by pair for the five the GP finds the objective
    varies fastest along; `b`, four times steeper than `a`, is among them."""
    (tmp_path / "models.py").write_text(SIX)
    names = "abcdeg"
    text = ("name: six\nseed: 2\nmodel: {type: python, function: models:six}\nparameters:\n"
            + "".join(f"  {n}: {{bounds: [0, 1]}}\n" for n in names)
            + "quantities: {f: f}\nanalysis: {type: optimize, method: bayesian, minimize: f, "
              "max_evaluations: 18, batch: 2}\nexecution: {scheduler: sync}\n")
    done = studyrun.run(write_study(tmp_path, text), tmp_path / "out")
    r = done.results
    assert r["initial"] == 14 and r["evaluations"] == 18 and r["batches"] == 3
    scales = r["surrogate"]["length_scales"]
    shown = sorted(scales, key=scales.get)[:5]
    assert "b" in shown
    from matplotlib.image import imread

    image = imread(tmp_path / "out" / "figures" / "optimize-runs.png")
    assert image.shape[0] > 900 and image.shape[1] > 900  # a 4 x 4 grid of panels
    report = (tmp_path / "out" / "report.md").read_text()
    assert "optimize-history" in report and "leave-one-out Q2" in report


def beam_runs(rows):
    """A cantilever's area b h and stress 6 F L / (b h^2) (F 2 kN, L 1.5 m) at (b, h) in mm:
    unit coordinates of b in [5, 50] and h in [10, 100], the area, and stress <= 250 as its
    gap and its log ratio."""
    from studyrun.analyses.bayesian.search import log_ratio
    from studyrun.analyses.pareto.terms import constraint

    rows = np.array(rows, dtype=float)
    stress = 6 * 2000 * 1500 / (rows[:, 0] * rows[:, 1] ** 2)
    limit = constraint("stress <= 250", False, 0)
    ratio = log_ratio(limit, {"stress": stress}, len(rows))
    return (rows - [5, 10]) / [45, 90], rows[:, 0] * rows[:, 1], stress - 250, ratio


def test_a_positive_constraint_is_modelled_as_a_log_ratio_and_any_other_by_bilog():
    """stress <= 250 with a stress of 36 to 36,000 MPa: its GP models log(stress / 250), of the
    gap's sign; a constraint whose sides are not all positive, bilog(gap); `>=` the other way."""
    from studyrun.analyses.bayesian.acquisition import bilog, modelled
    from studyrun.analyses.bayesian.search import log_ratio
    from studyrun.analyses.pareto.terms import constraint

    _, _, gap, ratio = beam_runs([[5, 10], [50, 100], [7.2, 100]])
    np.testing.assert_allclose(ratio, np.log([36000 / 250, 36 / 250, 1.0]), atol=1e-12)
    mixed = np.column_stack([ratio, [1.0, np.nan, 2.0]])
    gaps = np.column_stack([gap, [-3.0, 0.5, 99.0]])
    out = modelled(gaps, mixed)
    np.testing.assert_allclose(out[:, 0], ratio)
    np.testing.assert_allclose(out[:, 1], np.sign(gaps[:, 1]) * np.log1p(np.abs(gaps[:, 1])))
    assert bilog(np.array([-1e6, 0.0, 1e6])).tolist() == pytest.approx([-13.8155, 0, 13.8155],
                                                                       abs=1e-4)
    above = log_ratio(constraint("depth >= 20", False, 0), {"depth": np.array([10.0, 40.0])}, 2)
    np.testing.assert_allclose(above, [np.log(2), -np.log(2)])


def test_a_round_proposes_the_sliver_of_improvement_along_an_active_constraint():
    """17 runs of the beam, the best feasible area 807 at h = 100 (the bound) and b = 8.07, the
    constraint met for b >= 7.2 there: the area improves only in a sliver of width 0.02 of the
    box along h = 100. The round's point lies in it: its GP of log(stress / 250) is sure where
    the constraint holds (on the gap itself, 36 to 36,000 MPa, the round chose b = 5, h = 61)."""
    from studyrun.analyses.bayesian.acquisition import Data, fit_models, modelled, propose

    unit, area, gap, ratio = beam_runs([
        [27.5, 55], [42.07, 29.9], [30.17, 74.98], [5.34, 20], [38.21, 46.05], [19.81, 92.01],
        [5, 41.16], [20.06, 10], [5, 84.6], [23.66, 50.86], [35.3, 10], [30.83, 38.76],
        [7.13, 100], [10.22, 100], [8.07, 100], [11.9, 10], [5, 100]])
    data = Data(unit, area, modelled(gap[:, None], ratio[:, None]), unit, -np.ones(len(unit)))
    for seed in (1, 2):
        models = fit_models(data, seed)
        (u,), _ = propose(models, 1, "ei", np.random.default_rng(seed))
        b, h = 5 + 45 * u[0], 10 + 90 * u[1]
        assert 7.0 < b < 8.07 and h > 97, (b, h)


ELLIPSOID = """
name: ellipsoid
seed: 3
model: {type: python, function: models:ellipsoid, vectorized: true}
parameters:
PARAMETERS
quantities: {f: f}
analysis: {type: optimize, method: bayesian, minimize: f, max_evaluations: 70}
execution: {scheduler: sync}
"""


@pytest.mark.slow
@pytest.mark.thorough
@pytest.mark.timeout(1200)
def test_a_ten_parameter_ellipsoid_comes_within_1_percent_of_its_minimum(tmp_path):
    """1 + sum (i + 1) (x_i - c_i)^2 over ten parameters, the centre off the box's: within 1% of
    1 in at most 70 runs (60 in the benchmark). The seed is one whose search stopped 2.25% above, x0 0.15
    off, while the GPs' length scales went to 1,000: the GP put x0's, the gentlest term's, past
    400 and took it for a parameter that does not matter."""
    names = [f"x{i}" for i in range(10)]
    (tmp_path / "models.py").write_text(
        "import numpy as np\n"
        f"def ellipsoid({', '.join(names)}):\n"
        f"    x = np.column_stack([{', '.join(names)}])\n"
        "    return {'f': 1 + (np.arange(1, 11) * (x - np.linspace(0.15, 0.85, 10)) ** 2).sum(axis=1)}\n")
    text = ELLIPSOID.replace("PARAMETERS", "\n".join(f"  {n}: {{bounds: [0, 1]}}" for n in names))
    r = studyrun.run(write_study(tmp_path, text), tmp_path / "out", report=False).results
    assert r["objective"]["final"] <= 1.01, r["objective"]
