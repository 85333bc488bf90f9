"""Sequential identification (issue 16, section 3): the stock survey (M1, logistic growth) and
then the fishery (M2, logistic growth with harvesting) from M1's results folder, each run from the
command line as the README says."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
from conftest import STUDIES, run_cli

import studyrun
from studyrun.study.loading import load_study

pytestmark = pytest.mark.slow  # calibrations of ODE models, the CLI in subprocesses

M1, M2 = "stock-survey-calibrate", "stock-harvest-sequential"
FROM = "start: {from: ../results/stock-survey-calibrate}"
TRUTH = {"rate": 0.5, "capacity": 100, "catchability": 0.04}


def copy_example(folder):
    """The pair's study files, models and data in folder/studies."""
    studies = folder / "studies"
    (studies / "models").mkdir(parents=True)
    (studies / "data").mkdir()
    for name in (M1, M2):
        shutil.copy(STUDIES / f"{name}.yaml", studies)
    for name in ("logistic.yaml", "logistic_harvest.yaml"):
        shutil.copy(STUDIES / "models" / name, studies / "models")
    for name in ("stock-survey.csv", "stock-landings.csv"):
        shutil.copy(STUDIES / "data" / name, studies / "data")
    return studies


def run(folder, name, out=None, report=True):
    """`studyrun run studies/NAME.yaml` from `folder` (into results/NAME); its analysis.json."""
    done = run_cli("run", f"studies/{name}.yaml", "--quiet", *(["--out", out] if out else []),
                   *([] if report else ["--no-report"]), cwd=folder)
    assert done.returncode == 0, done.stderr
    return json.loads((folder / (out or f"results/{name}") / "analysis.json").read_text())


def variant(studies, name, replacements):
    """A copy of M2 with text replaced."""
    text = (studies / f"{M2}.yaml").read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    (studies / f"{name}.yaml").write_text(text)
    return studies / f"{name}.yaml"


@pytest.fixture(scope="session")  # once per test process, however pytest-xdist splits the module
def chain(tmp_path_factory):
    """M1, then M2 from M1's results, as the README runs the example pair (from the project
    folder, into results/NAME): the folder and both analysis.json."""
    folder = tmp_path_factory.mktemp("sequential")
    copy_example(folder)
    return folder, run(folder, M1), run(folder, M2)


def test_the_sequential_fit_reaches_the_optimum_of_a_good_start_in_fewer_runs(chain):
    folder, first, second = chain
    studies = folder / "studies"
    pseudo_only = (FROM, "start: {from: ../results/stock-survey-calibrate, parameters: []}")
    variant(studies, "nominal", [pseudo_only])
    variant(studies, "good", [pseudo_only, ("nominal: 2}", "nominal: 0.45}"),
                              ("nominal: 10}", "nominal: 110}"), ("nominal: 0.1}", "nominal: 0.035}")])
    nominal = run(folder, "nominal", "results/nominal", report=False)
    good = run(folder, "good", "results/good", report=False)
    sequential = second["results"]
    for fit in (sequential, nominal["results"], good["results"]):
        assert fit["converged"] is True
        assert fit["fitted"] == pytest.approx(TRUTH, rel=1e-5)
    # one optimum: the same cost (the pseudo-data too), reached from three starts
    assert sequential["fitted"] == pytest.approx(good["results"]["fitted"], rel=1e-7)
    assert sequential["cost"]["final"] == pytest.approx(good["results"]["cost"]["final"], rel=1e-3)
    assert sequential["variables"]["population (pseudo-data)"]["N"] == 31
    assert nominal["results"]["start"]["parameters"]["rate"] == {"value": 2.0, "from": "nominal"}
    runs = {name: fit["evaluations"]["runs"]
            for name, fit in [("sequential", sequential), ("nominal", nominal["results"]),
                              ("good", good["results"])]}
    assert runs["good"] <= runs["sequential"] < runs["nominal"], runs
    print("runs of the M2 fit by start:", runs, "and M1's:", first["results"]["evaluations"]["runs"])


def test_the_earlier_fit_keeps_every_series_of_its_fitted_run(chain):
    folder, first, _ = chain
    assert first["results"]["fitted"] == pytest.approx({"rate": 0.5, "capacity": 100}, rel=1e-5)
    fitted = first["results"]["fitted_series"]
    assert fitted["time"] == pytest.approx(np.arange(0, 40.5, 0.5).tolist())
    assert set(fitted["series"]) == {"population", "growth"}  # the state and the auxiliary
    assert fitted["data_span"] == [0, 15]
    assert fitted["series"]["population"] == first["results"]["curves"]["population"]["final"]
    rows = (folder / "results" / M1 / "fitted.csv").read_text().splitlines()
    assert rows[0] == "name,time,value" and len(rows) == 1 + 2 * 81
    assert rows[1] == f"population,0.0,{fitted['series']['population'][0]!r}"


def test_the_report_and_provenance_say_where_the_start_came_from(chain):
    folder, first, second = chain
    start = second["results"]["start"]
    assert start["parameters"] == {
        "rate": {"value": first["results"]["fitted"]["rate"], "from": f"{M1}: rate"},
        "capacity": {"value": first["results"]["fitted"]["capacity"], "from": f"{M1}: capacity"},
        "catchability": {"value": 0.1, "from": "nominal"}}
    assert second["results"]["parameters"]["rate"]["initial"] == first["results"]["fitted"]["rate"]
    assert start["pseudo_data"] == {"population": {"points": 31, "time": [0, 15]}}
    builds_on = second["provenance"]["builds_on"]
    analysis_json = (folder / "results" / M1 / "analysis.json").read_bytes()
    assert builds_on == {"folder": str((folder / "results" / M1).resolve()), "study": M1,
                         "study_yaml_sha256": first["study_yaml_sha256"],
                         "analysis_json_sha256": hashlib.sha256(analysis_json).hexdigest()}
    report = (folder / "results" / M2 / "report.md").read_text()
    assert "### Sequential start" in report and f"| rate | 0.5 | {M1}: rate |" in report
    assert f"Builds on the results of {M1} in {folder / 'results' / M1}" in report
    assert "population: 31 points of" in report


def test_mistakes_about_the_earlier_folder_are_located(chain):
    folder, _, _ = chain
    studies = folder / "studies"
    done = run_cli("run", STUDIES / "decay-sweep.yaml", "--out", folder / "results" / "sweep",
                   "--quiet", "--no-report")
    assert done.returncode == 0, done.stderr
    (folder / "results" / "unfinished").mkdir()
    shutil.copy(folder / "results" / M1 / "study.yaml", folder / "results" / "unfinished")
    cases = {
        "missing": ([(FROM, "start: {from: ../results/nowhere}")],
                    "analysis.start.from: ", "no analysis.json here"),
        "unfinished": ([(FROM, "start: {from: ../results/unfinished}")],
                       "analysis.start.from: ", "its run did not finish"),
        "sweep": ([(FROM, "start: {from: ../results/sweep}")],
                  "analysis.start.from: ", "results of a sweep study, not of a calibration"),
        "counterpart": ([(FROM, FROM[:-1] + ", parameters: {rate: growth_rate}}")],
                        "analysis.start.parameters.rate: ",
                        "'growth_rate' has no counterpart among the parameters "
                        f"{M1} estimated (capacity, rate)"),
        "fixed": ([(FROM, FROM[:-1] + ", parameters: [effort]}")],
                  "analysis.start.parameters[0]: ", "'effort' is not a varied parameter"),
        "series": ([("pseudo_data: [population]", "pseudo_data: [landings]")],
                   "analysis.pseudo_data[0]: ", "the earlier fit has no series 'landings'"),
        "observed": ([("data: {file: data/stock-landings.csv}", "data: {file: data/stock-survey.csv}")],
                     "analysis.pseudo_data[0]: ", "the data observe 'population' already"),
        "alone": ([(FROM, "")], "analysis.pseudo_data: ", "give its results folder in start"),
    }
    paths = {name: variant(studies, f"bad-{name}", edits) for name, (edits, _, _) in cases.items()}
    done = run_cli("validate", *paths.values())  # each file is validated and reported apart
    assert done.returncode == 2 and done.stdout == "", done.stdout  # no file is valid
    lines = done.stderr.strip().splitlines()
    assert len(lines) == len(paths), lines
    for name, path in paths.items():
        line = next((line for line in lines if line.startswith(f"{path}:")), "")
        _, key, message = cases[name]
        assert line.startswith(f"{path}:") and f": {key}" in line and message in line, (name, line)
        number = int(line[len(str(path)) + 1:].split(":")[0])
        assert ("pseudo_data" if "pseudo_data" in key else "start:") in \
            path.read_text().splitlines()[number - 1], (name, line)


def test_pseudo_data_stay_within_the_later_model_s_time_span(chain):
    folder, _, _ = chain
    studies = folder / "studies"
    model = (studies / "models" / "logistic_harvest.yaml").read_text()
    (studies / "models" / "short.yaml").write_text(model.replace("stop: 40", "stop: 10"))
    path = variant(studies, "short", [("models/logistic_harvest.yaml", "models/short.yaml"),
                                      ("data/stock-landings.csv", "data/short.csv")])
    (studies / "data" / "short.csv").write_text("name,time,value\nlandings,10,0\n")
    loaded = load_study(path)
    pseudo = loaded.study.analysis.observations(loaded.context)[-1].variables[0]
    assert pseudo.output == "population" and pseudo.x.tolist() == np.arange(0, 10.5, 0.5).tolist()


def test_a_redone_earlier_calibration_is_read_again_not_reused(tmp_path):
    """Runs are the model's at a point: M1's results change which runs M2 asks for and its cost,
    not what a run gives, so they are no part of a run's identity. M2 redone after M1 changed
    reads M1 again: the same answer as M2 in a fresh folder, not the earlier one."""
    studies = copy_example(tmp_path)
    m1, m2 = studies / f"{M1}.yaml", studies / f"{M2}.yaml"
    studyrun.run(m1, tmp_path / "results" / M1, report=False)
    before = studyrun.run(m2, tmp_path / "results" / M2, report=False).analysis
    survey = studies / "data" / "stock-survey.csv"
    t = np.arange(0, 16.0)
    smaller = 80 / (1 + (80 / 5 - 1) * np.exp(-0.5 * t))  # a stock of capacity 80
    survey.write_text("name,time,value\n" + "".join(f"population,{a:g},{b!r}\n"
                                                    for a, b in zip(t, smaller.tolist())))
    redone = studyrun.run(m1, tmp_path / "results" / M1, report=False).analysis
    assert redone["results"]["fitted"]["capacity"] == pytest.approx(80, rel=1e-5)
    again = studyrun.run(m2, tmp_path / "results" / M2, report=False).analysis
    fresh = studyrun.run(m2, tmp_path / "fresh", report=False).analysis
    for key in ("start", "fitted", "cost", "variables"):
        assert again["results"][key] == fresh["results"][key], key
    assert again["results"]["start"]["parameters"]["capacity"]["value"] == \
        redone["results"]["fitted"]["capacity"]
    assert again["results"]["fitted"]["capacity"] != pytest.approx(
        before["results"]["fitted"]["capacity"], rel=1e-3)
    # the study text is the same, its results are not: both hashes are recorded
    old, new = before["provenance"]["builds_on"], again["provenance"]["builds_on"]
    assert old["study_yaml_sha256"] == new["study_yaml_sha256"]
    assert old["analysis_json_sha256"] != new["analysis_json_sha256"]
    assert again["runs"]["planned"] == fresh["runs"]["planned"]
