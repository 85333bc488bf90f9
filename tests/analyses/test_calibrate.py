"""calibrate end to end: known answers through the real pipeline (logistic growth)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import STUDIES, run_cli, write_study

import studyrun

pytestmark = pytest.mark.slow  # calibration fits of ODE models, the CLI in subprocesses

LOGISTIC = """
name: logistic-fit
seed: 3
model: {file: MODELS/logistic.yaml}
parameters:
  initial_population: 0.1
  rate: {bounds: [0.05, 5], nominal: 2}
  capacity: {bounds: [1, 1000], nominal: 10}
analysis:
  type: calibrate
  method: METHOD
  data: {file: logistic.csv, format: long, x: time, y: value}
execution: {scheduler: sync}
"""


def logistic(t, K=100.0, r=0.5, x0=0.1):
    return K / (1 + (K / x0 - 1) * np.exp(-r * t))


def write_logistic(folder, method="lm", extra=""):
    t = np.arange(0, 31, 1.0)
    lines = ["name,time,value"] + [f"population,{a:g},{b:.17g}" for a, b in zip(t, logistic(t))]
    (folder / "logistic.csv").write_text("\n".join(lines) + "\n")
    text = LOGISTIC.replace("MODELS", str(STUDIES / "models")).replace("METHOD", method) + extra
    return write_study(folder, text)


@pytest.mark.parametrize("method", ["lm", "trf"])
def test_logistic_growth_is_recovered_from_far_away(tmp_path, method):
    result = studyrun.run(write_logistic(tmp_path, method), tmp_path / "out")
    params = result.results["parameters"]
    assert params["capacity"]["estimate"] == pytest.approx(100, rel=1e-5)
    assert params["rate"]["estimate"] == pytest.approx(0.5, rel=1e-5)
    assert params["capacity"]["initial"] == 10 and params["rate"]["initial"] == 2
    assert result.results["converged"] is True
    cost = result.results["cost"]
    assert cost["final"] < 1e-6 < 1e3 < cost["initial"]
    variables = result.results["variables"]["population"]
    assert variables["N"] == 31 and variables["rms_after"] < 1e-4 < 10 < variables["rms_before"]
    assert set(result.results) >= {"parameters", "correlation", "cost", "variables", "minlogp",
                                   "converged", "message"}
    assert (tmp_path / "out" / "residuals.csv").read_text().startswith(
        "name,x,obs,mod,weight,res_unweighted,res")


def test_lm_moves_from_a_start_at_the_centre_of_the_box(tmp_path):
    """A start at the centre of the bounds (the default nominal) is a logit of ~1e-16, and
    MINPACK bounds its first step by 100 times the start: lm stopped there, 'converged'."""
    path = write_logistic(tmp_path)
    path.write_text(path.read_text().replace("[0.05, 5], nominal: 2", "[0.1, 1.0], nominal: 0.55")
                    .replace("[1, 1000], nominal: 10", "[20, 200], nominal: 110"))
    result = studyrun.run(path, tmp_path / "out", report=False).results
    assert result["parameters"]["rate"]["initial"] == 0.55
    assert result["parameters"]["capacity"]["estimate"] == pytest.approx(100, rel=1e-5)
    assert result["parameters"]["rate"]["estimate"] == pytest.approx(0.5, rel=1e-5)


def test_a_resumed_calibration_reuses_every_run(tmp_path):
    path = write_logistic(tmp_path)
    first = studyrun.run(path, tmp_path / "out", report=False)
    again = studyrun.run(path, tmp_path / "out", report=False)
    assert again.analysis["runs"]["reused"] == again.analysis["runs"]["planned"]
    assert again.analysis["execution"]["executed"] == 0
    assert again.results["parameters"] == first.results["parameters"]


def test_example_study_runs_from_the_command_line(tmp_path):
    done = run_cli("run", STUDIES / "logistic-calibrate.yaml", "--out", tmp_path, "--quiet")
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "analysis.json").read_text())["results"]
    assert results["parameters"]["capacity"]["estimate"] == pytest.approx(100, rel=1e-4)
    assert results["parameters"]["rate"]["estimate"] == pytest.approx(0.5, rel=1e-4)
    assert "```yaml\nparameters:" in (tmp_path / "report.md").read_text()
    (tmp_path / "report.md").unlink()
    again = run_cli("report", tmp_path)  # from the results folder, away from the data file
    assert again.returncode == 0, again.stderr
    assert "## Calibration (lm)" in (tmp_path / "report.md").read_text()


def test_gradient_matching_reaches_the_trajectory_fit_with_far_fewer_integrations(tmp_path):
    trajectory = studyrun.run(write_logistic(tmp_path), tmp_path / "lm-out", report=False).results
    folder = tmp_path / "gm"
    folder.mkdir()
    matched = studyrun.run(write_logistic(folder, "gradient-matching"), folder / "out",
                           report=False).results
    gm = matched["gradient_matching"]
    assert gm["integrations"] <= 3 and gm["hidden_states"] == [] and gm["collocation_points"] == 31
    for name, truth in [("capacity", 100.0), ("rate", 0.5)]:
        assert gm["estimate"][name] == pytest.approx(truth, rel=1e-3)
        assert trajectory["parameters"][name]["estimate"] == pytest.approx(truth, rel=1e-6)
    assert gm["integrations"] * 5 < trajectory["evaluations"]["runs"]
    folder = tmp_path / "refined"
    folder.mkdir()
    refined = studyrun.run(write_logistic(folder, "gradient-matching\n  refine: true"),
                           folder / "out").results
    for name in ("capacity", "rate"):
        assert refined["parameters"][name]["estimate"] == pytest.approx(
            trajectory["parameters"][name]["estimate"], rel=1e-6)
    total = refined["gradient_matching"]["integrations"] + refined["gradient_matching"]["refine_integrations"]
    assert total == refined["evaluations"]["runs"] and total * 2 <= trajectory["evaluations"]["runs"]
    assert "## Calibration (gradient-matching)" in (folder / "out" / "report.md").read_text()


@pytest.mark.parametrize("method", ["nelder-mead", "lbfgsb", "differential-evolution\n  generations: 20",
                                    "lm\n  multistart: 3"])
def test_other_methods_recover_the_logistic_parameters(tmp_path, method):
    result = studyrun.run(write_logistic(tmp_path, method), tmp_path / "out", report=False).results
    assert result["parameters"]["capacity"]["estimate"] == pytest.approx(100, rel=1e-4)
    assert result["parameters"]["rate"]["estimate"] == pytest.approx(0.5, rel=1e-4)
    if "multistart" in method:
        starts = result["starts"]
        assert len(starts) == 4 and sum(s["best"] for s in starts) == 1
        assert result["evaluations"]["batches"] < result["evaluations"]["runs"] / 3


def test_the_fit_does_not_depend_on_the_scheduler(tmp_path):
    reference = studyrun.run(write_logistic(tmp_path, "lm\n  multistart: 2"), tmp_path / "sync", report=False).results
    threads = studyrun.run(write_logistic(tmp_path, "lm\n  multistart: 2"), tmp_path / "threads",
                           scheduler="threads", workers=2, report=False).results
    assert threads["parameters"] == reference["parameters"]
    assert threads["evaluations"] == reference["evaluations"]


def test_exact_jacobians_from_the_sensitivity_equations(tmp_path):
    differences = studyrun.run(write_logistic(tmp_path), tmp_path / "fd", report=False).results
    exact = studyrun.run(write_logistic(tmp_path, "lm\n  jacobian: exact"), tmp_path / "ex", report=False).results
    for name in ("capacity", "rate"):
        a, b = exact["parameters"][name], differences["parameters"][name]
        assert a["estimate"] == pytest.approx(b["estimate"], rel=1e-7)
        assert a["std_error"] == pytest.approx(b["std_error"], rel=0.01)
    assert exact["evaluations"]["runs"] < differences["evaluations"]["runs"] / 2
    assert exact["notes"] == []


def test_exact_jacobians_fall_back_for_a_model_with_a_lookup(tmp_path):
    t = np.arange(0, 21.0)
    (tmp_path / "area.csv").write_text("time,area\n" + "".join(
        f"{a:g},{600 + (10 - 600) * np.exp(-0.6 * a):.6f}\n" for a in t))
    study = write_study(tmp_path, f"""
        name: flowers-fit
        model: {{file: {STUDIES}/models/flowers.yaml}}
        parameters:
          decay_rate: {{bounds: [0.05, 0.8], nominal: 0.2}}
        analysis:
          type: calibrate
          jacobian: exact
          data: {{file: area.csv, format: wide}}
        execution: {{scheduler: sync}}
        """)
    result = studyrun.run(study, tmp_path / "out", report=False).results
    assert "lookup" in result["notes"][0] and "forward differences" in result["notes"][0]
    assert result["cost"]["final"] < result["cost"]["initial"]


LOTKA_VOLTERRA = """
type: ode
time: {start: 0, stop: 8, step: 0.25}
rtol: 1.0e-9
atol: 1.0e-12
states: {prey: 10, predator: 10}
rates:
  prey: alpha * prey - beta * prey * predator
  predator: delta * prey * predator - gamma * predator
constants: {alpha: 1.1, beta: 0.4, delta: 0.1, gamma: 0.4}
"""


def test_two_data_files_in_two_formats_fit_lotka_volterra(tmp_path):
    import yaml

    from studyrun.models.ode import Ode

    (tmp_path / "lv.yaml").write_text(LOTKA_VOLTERRA)
    out = Ode.model_validate(yaml.safe_load(LOTKA_VOLTERRA)).build(tmp_path).integrate({}, n=1)
    t, prey, predator = out.time, out.series["prey"][0], out.series["predator"][0]
    (tmp_path / "prey.csv").write_text("time,prey\n" + "".join(
        f"{a:g},{b:.12g}\n" for a, b in zip(t[:21:2], prey[:21:2])))
    (tmp_path / "predator.csv").write_text("name,time,value\n" + "".join(
        f"predator,{a:g},{b:.12g}\n" for a, b in zip(t[:29:2], predator[:29:2])))
    study = write_study(tmp_path, """
        name: two-files
        model: {file: lv.yaml}
        parameters:
          alpha: {bounds: [0.2, 3], nominal: 0.8}
          beta: {bounds: [0.05, 1], nominal: 0.3}
          delta: {bounds: [0.01, 0.5], nominal: 0.2}
          gamma: {bounds: [0.05, 2], nominal: 0.6}
        analysis:
          type: calibrate
          method: trf
          data:
            - {file: prey.csv, format: wide, weight: std}
            - {file: predator.csv, format: long, weight: mean, scale_var: true}
        execution: {scheduler: sync}
        """)
    result = studyrun.run(study, tmp_path / "out", report=False).results
    for name, truth in {"alpha": 1.1, "beta": 0.4, "delta": 0.1, "gamma": 0.4}.items():
        assert result["parameters"][name]["estimate"] == pytest.approx(truth, rel=1e-5)
    variables = result["variables"]
    assert variables["prey"]["N"] == 11 and variables["predator"]["N"] == 15
    assert variables["predator"]["scale"] == pytest.approx(1 / 15) and variables["prey"]["scale"] == 1


CHAIN = """
name: chain
model:
  type: ode
  time: {start: 0, stop: 10, step: 0.25}
  states: {x: 1, y: 5}
  rates: {x: -a * x + b * y, y: -c * y * y}
  constants: {a: 1.0, b: 0.5, c: 0.3}
parameters:
  a: {bounds: [0.1, 3], nominal: 0.5}
  b: {bounds: [0.05, 2], nominal: 0.2}
  c: {bounds: [0.05, 2], nominal: 0.6}
analysis:
  type: calibrate
  method: gradient-matching
  refine: true
  data: {file: x.csv, format: wide}
execution: {scheduler: sync}
"""


def test_gradient_matching_with_a_state_that_has_no_data(tmp_path):
    import yaml

    from studyrun.models.ode import Ode

    model = yaml.safe_load(CHAIN)["model"]
    out = Ode.model_validate(model).build(tmp_path).integrate({}, n=1)
    (tmp_path / "x.csv").write_text("time,x\n" + "".join(
        f"{t:g},{v:.12g}\n" for t, v in zip(out.time[::2], out.series["x"][0][::2])))
    result = studyrun.run(write_study(tmp_path, CHAIN), tmp_path / "out", report=False).results
    gm = result["gradient_matching"]
    assert gm["hidden_states"] == ["y"] and gm["observed_states"] == ["x"]
    assert gm["cost"] < result["cost"]["initial"] / 10
    for name, truth in {"a": 1.0, "b": 0.5, "c": 0.3}.items():
        assert result["parameters"][name]["estimate"] == pytest.approx(truth, rel=1e-4)


def test_run_counts_tell_repeated_points_from_runs_of_an_earlier_session(tmp_path):
    """`evaluated` counts the fit's points with repeats, `planned` the distinct runs (runs.csv),
    `executed` what this session computed, `reused` what an earlier session had."""
    def counts(result):
        runs = result.analysis["runs"]
        assert runs["planned"] == len(result.runs)
        assert runs["succeeded"] == runs["planned"] and runs["failed"] == 0
        return runs

    done = run_cli("run", "--no-report", write_logistic(tmp_path), "--out", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stderr
    first = counts(studyrun.open_results(tmp_path / "out"))
    assert first["reused"] == 0 and first["executed"] == first["planned"]
    assert first["evaluated"] > first["planned"]  # the start and the estimate are asked for again
    assert (f"{first['planned']} of {first['planned']} runs succeeded (0 failed, 0 reused from an "
            f"earlier session, {first['planned']} executed now); the analysis evaluated "
            f"{first['evaluated']} points, {first['evaluated'] - first['planned']} of them "
            "repeats") in done.stdout
    again = counts(studyrun.run(write_logistic(tmp_path), tmp_path / "out", report=False))
    assert again == first | {"reused": first["planned"], "executed": 0}
    other = counts(studyrun.run(write_logistic(tmp_path, "trf"), tmp_path / "out", report=False))
    assert 0 < other["reused"] < other["planned"]  # the start, at least, an earlier session ran
    assert other["reused"] + other["executed"] == other["planned"]


def bad_data(folder, lines: list[str]):
    """A study over a data file of these lines; the CLI's validate answer."""
    write_logistic(folder)
    (folder / "logistic.csv").write_text("\n".join(lines) + "\n")
    return run_cli("validate", folder / "study.yaml")


ROWS = ["name,time,value", "population,0,0.1", "population,1,0.16", "population,2,0.27"]


@pytest.mark.parametrize("lines, where, message", [
    ([r.replace(",", ";") for r in ROWS], "1:1",
     "the header is separated by semicolons, not commas; set sep: \";\" in the data block"),
    ([r.replace(",", "\t") for r in ROWS], "1:1",
     "the header is separated by tabs, not commas; set sep: \"\\t\" in the data block"),
    (ROWS[:2] + ["population;1;0.16"] + ROWS[3:], "3:1",
     "this line holds semicolons where the header uses commas"),
    (["name,time;value"] + ROWS[1:], "1:1", "the header mixes separators (commas and semicolons)"),
    (ROWS[:2] + ["population,1,0.16,7"] + ROWS[3:], "3:19",
     "this line has 4 cells, the header 3; quote a value holding ','"),
    (ROWS[:2] + ['population,1,"' + "1" * 200_000 + '"'] + ROWS[3:], "3:1",
     "cannot read this line as CSV: field larger than field limit (131072)"),
])
def test_a_malformed_data_file_is_located(tmp_path, lines, where, message):
    """Each of these gave a traceback (_csv.Error) or was accepted silently (extra cells, a
    line of another separator skipped as missing values)."""
    done = bad_data(tmp_path, lines)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"{tmp_path / 'logistic.csv'}:{where}: {message}"), done.stderr


def test_a_data_block_at_the_top_level_says_it_belongs_under_analysis(tmp_path):
    text = write_logistic(tmp_path).read_text()
    moved = text.replace("  data: {file: logistic.csv", "data: {file: logistic.csv")
    path = write_study(tmp_path, moved)
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    line = moved.splitlines().index("data: {file: logistic.csv, format: long, x: time, y: value}")
    assert (f"{path}:{line + 1}:1: data: unknown key 'data' here: it belongs inside the analysis "
            "block (a key of calibrate); move it there (indented under it)") in done.stderr


def test_confidence_limits_past_a_bound_are_kept_and_the_report_says_so(tmp_path):
    """Noisy data and a capacity whose upper bound lies just above the truth: the Wald limits
    reach past the bound and stay there (estimate + t se), one note in the report and in
    analysis.json's warnings says why."""
    t = np.arange(0, 31, 1.0)
    noisy = logistic(t) + np.random.default_rng(0).normal(0, 2.0, len(t))
    path = write_logistic(tmp_path)
    (tmp_path / "logistic.csv").write_text("\n".join(
        ["name,time,value"] + [f"population,{a:g},{b:.17g}" for a, b in zip(t, noisy)]) + "\n")
    path.write_text(path.read_text().replace("[1, 1000], nominal: 10", "[1, 100.5], nominal: 10"))
    result = studyrun.run(path, tmp_path / "out")
    capacity = result.results["parameters"]["capacity"]
    half = capacity["upper"] - capacity["estimate"]
    assert capacity["upper"] > 100.5 and half > 0
    assert capacity["estimate"] - capacity["lower"] == pytest.approx(half, rel=1e-9)
    said = [n for n in result.results["notes"] if "reach past the bounds" in n]
    assert len(said) == 1 and f"capacity (upper {capacity['upper']:.4g} > 100.5)" in said[0]
    assert "Wald limits" in said[0] and "rate" not in said[0]
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.count("reach past the bounds") == 1
    assert any("reach past the bounds" in w for w in result.analysis["warnings"])


def test_the_dnase_example_gives_rs_nls_answer(tmp_path):
    """studies/dnase-calibrate.yaml is R's nls example fm1DNase1; R's summary() prints Asym
    2.34518 (0.07815), xmid 1.48309 (0.08135), scal 1.04146 (0.03227), residual standard error
    0.01919 on 13 degrees of freedom."""
    result = studyrun.run(STUDIES / "dnase-calibrate.yaml", tmp_path / "out", scheduler="sync",
                          quiet=True, report=False).results
    published = {"Asym": (2.34518, 0.07815), "xmid": (1.48309, 0.08135), "scal": (1.04146, 0.03227)}
    for name, (estimate, std_error) in published.items():
        assert result["parameters"][name]["estimate"] == pytest.approx(estimate, abs=2e-5)
        assert result["parameters"][name]["std_error"] == pytest.approx(std_error, abs=1e-5)
    assert result["df"] == 13
    assert result["residual_variance"] ** 0.5 == pytest.approx(0.01919, abs=1e-5)


LYNX_HARE = """# Hudson's Bay Company pelts (thousands), 1900-1920 (year - 1900)
year,lynx,hare
0,4.0,30.0
1,6.1,47.2
2,9.8,70.2
3,35.2,77.4
4,59.4,36.3
5,41.7,20.6
6,19.0,18.1
7,13.0,21.4
8,8.3,22.0
9,9.1,25.4
10,7.4,27.1
11,8.0,40.3
12,12.3,57.0
13,19.5,76.6
14,45.7,52.3
15,51.1,19.5
16,29.7,11.2
17,15.8,7.6
18,9.7,14.6
19,10.1,16.2
20,8.6,24.7
"""


def test_lotka_volterra_fitted_to_the_lynx_and_hare_pelts(tmp_path):
    """Lotka-Volterra fitted by least squares on the log scale to the Hudson's Bay Company's
    lynx and hare pelts (1900-1920): scipy's least_squares of the same residuals gives alpha
    0.54016, beta 0.027165, gamma 0.79639, delta 0.023695, hare(0) 34.602, lynx(0) 5.8445, near
    Carpenter's Stan case study's posterior means (0.55, 0.028, 0.80, 0.024, 33.9, 5.9)."""
    lines = LYNX_HARE.splitlines()
    logged = [f"{y},{math.log(float(lynx))!r},{math.log(float(hare))!r}"
              for y, lynx, hare in (line.split(",") for line in lines[2:])]
    (tmp_path / "pelts.csv").write_text("\n".join([lines[0], "year,log_lynx,log_hare", *logged]))
    path = write_study(tmp_path, """
name: lynx-hare
model:
  type: ode
  time: {start: 0, stop: 20, step: 1}
  rtol: 1.0e-7
  atol: 1.0e-7
  states: {hare: hare0, lynx: lynx0}
  rates:
    hare: alpha * hare - beta * hare * lynx
    lynx: delta * hare * lynx - gamma * lynx
  auxiliaries: {log_hare: log(hare), log_lynx: log(lynx)}
  constants: {alpha: 0.5, beta: 0.025, gamma: 0.8, delta: 0.025, hare0: 30, lynx0: 4}
parameters:
  alpha: {bounds: [0.1, 2]}
  beta: {bounds: [0.001, 0.2]}
  gamma: {bounds: [0.1, 2]}
  delta: {bounds: [0.001, 0.2]}
  hare0: {bounds: [1, 100]}
  lynx0: {bounds: [0.5, 50]}
analysis:
  type: calibrate
  method: lm
  data: {file: pelts.csv, format: wide, x: year}
execution: {scheduler: sync}
""")
    estimates = {name: found["estimate"] for name, found in
                 studyrun.run(path, tmp_path / "out", quiet=True, report=False).results["parameters"].items()}
    scipy = {"alpha": 0.54016, "beta": 0.027165, "gamma": 0.79639, "delta": 0.023695,
             "hare0": 34.602, "lynx0": 5.8445}
    assert estimates == pytest.approx(scipy, rel=1e-3)


def test_a_fit_where_every_run_failed_reports_no_uncertainty_and_its_report_is_rebuilt(tmp_path):
    """Fails before: with every run failed, the estimate (the start) had std_error 0, p 0 and
    limits equal to it, and `studyrun report` said the folder was not studyrun's (a null cost
    formatted as a number)."""
    (tmp_path / "broken.py").write_text("def model(**values):\n    raise RuntimeError('no')\n")
    (tmp_path / "data.csv").write_text("x,y\n1,2\n2,3\n3,5\n")
    study = write_study(tmp_path, """
name: broken-fit
model: {type: python, function: broken:model}
parameters: {a: {bounds: [0, 10], nominal: 1}, b: {bounds: [0, 10], nominal: 2}}
analysis: {type: calibrate, method: lm, data: {file: data.csv, format: wide, x: x}}
execution: {scheduler: sync, on_failure: continue}
""")
    out = tmp_path / "out"
    done = run_cli("run", study, "--out", out, "--quiet")
    assert done.returncode == 1 and "no run succeeded" in done.stderr  # and its results written
    results = json.loads((out / "analysis.json").read_text())["results"]
    assert results["converged"] is False and results["cost"]["final"] is None
    for row in results["parameters"].values():
        assert row["std_error"] is None and row["lower"] is None and row["p"] is None
    assert results["residual_variance"] is None
    assert all(v is None for row in results["covariance"].values() for v in row.values())
    done = run_cli("report", out)
    assert done.returncode == 0, done.stderr
    assert "Cost None at the start" in (out / "report.md").read_text()
