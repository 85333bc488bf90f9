"""Every study in studies/ loads and plans; the small ones run end to end from the command line."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import SEQUENTIAL, STUDIES, analysis_schema_problems, run_cli, run_earlier_steps

ALL = sorted(STUDIES.glob("*.yaml"))
SMALL = ["ishigami-montecarlo", "decay-sweep", "decay-command", "logistic-montecarlo",
         "sir-montecarlo", "lotka-volterra-sweep", "mass-spring-sweep", "daisyworld-sweep",
         "sales-force-montecarlo", "flowers-sobol", "flowers-morris", "ishigami-sobol", "bowl-doe",
         "tank-inflow", "chain-gradient", "correlated-sum-montecarlo", "ishigami-given-delta",
         "ishigami-sobol-precision", "ishigami-fast", "ishigami-rbd-fast", "ishigami-pawn",
         "ishigami-dgsm", "flowers-local", "flowers-optimize", "zdt1-nsga2", "logistic-calibrate",
         "ishigami-surrogate", "shop-stock-montecarlo", "wingweight-surrogate",
         "resistance-load-reliability", "sir-hospital-reliability", "dnase-calibrate",
         "sir-vensim-names"]
RESULTS_DOC = STUDIES.parent / "docs" / "reference" / "results.md"


@pytest.fixture(autouse=True)
def translations(tmp_path_factory, monkeypatch):
    """PySD's translations of the pysd examples in a folder of the tests, not the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_study_validates_and_plans(tmp_path, path):
    assert path.read_text().startswith("# yaml-language-server: $schema=../schemas/study.schema.json")
    if path.stem in SEQUENTIAL:  # it starts from the results of another: run that one first
        path = copy_with_earlier_steps(tmp_path) / path.name
    done = run_cli("plan", path)
    assert done.returncode == 0, done.stderr
    assert "runs:" in done.stdout


# Examples that leave the scheduler to the default run on threads here, but for one: by default
# the pilot's timing decides between a LocalCluster and no cluster at all, and a busy machine (this
# suite runs in parallel) stretches that timing until a few seconds of runs start a cluster, in
# small batches (sir-montecarlo, 3 s on a quiet machine, took 37 s to over two minutes on a busy
# one). test_pipeline and tests/conformance test the default scheduler's paths.
ON_THE_DEFAULT_SCHEDULER = {"decay-sweep"}  # twelve runs: never long enough for a cluster


# examples another test of the suite runs from the command line, to their known answers
COVERED = {"sir-hospital-reliability": "tests/analyses/test_reliability_gradient.py"}


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.thorough)
                                  if name in COVERED else name for name in SMALL])
def test_small_study_runs(tmp_path, name):
    """The example runs from the command line without a failed run, and its analysis.json keys
    are documented and valid. Its report is not drawn here: the conformance tests draw each
    analysis type's, and the site's build draws each tutorial example's."""
    study = STUDIES / f"{name}.yaml"
    threads = "scheduler:" not in study.read_text() and name not in ON_THE_DEFAULT_SCHEDULER
    # a minute on a slow, busy machine (sir-montecarlo: 3 s quiet, 9 s alone on a slow day)
    done = run_cli("run", study, "--out", tmp_path / name, "--quiet", "--no-report",
                   *(["--scheduler", "threads"] if threads else []), timeout=280)
    assert done.returncode == 0, done.stderr
    analysis = json.loads((tmp_path / name / "analysis.json").read_text())
    assert analysis["runs"]["failed"] == 0
    assert (tmp_path / name / "runs.csv").exists()
    assert undocumented(analysis, study.read_text()) == set(), f"add them to {RESULTS_DOC}"
    assert analysis_schema_problems(tmp_path / name / "analysis.json") == []


def undocumented(analysis: dict, study_text: str) -> set[str]:
    """Keys of `results` (two levels deep) that docs/reference/results.md does not name; a
    quantity's, parameter's or output's own name, a pair of compared methods and an objective's
    text are names, not keys."""
    import re

    import yaml

    documented = set(re.findall(r"`([^`]+)`", RESULTS_DOC.read_text()))
    study = yaml.safe_load(study_text)
    named = set(study.get("quantities") or {}) | set(study.get("parameters") or {})
    named |= set(analysis["results"].get("outputs") or {})  # a calibration's observed outputs
    per_name = {"L1", "S1", "values", "n", "mu_star", "r2", "q2", "vi", "delta_raw", "mean"}
    found: set[str] = set()

    def walk(value, depth: int) -> None:
        if not isinstance(value, dict) or depth > 1:
            return
        for key, item in value.items():
            a_name = (key in named or " vs " in key or "(" in key
                      or (isinstance(item, dict) and per_name & set(item)))
            if not a_name and key not in documented:
                found.add(key)
            walk(item, depth + 1)

    walk(analysis["results"], 0)
    return found


def copy_with_earlier_steps(tmp_path):
    """studies/ copied into tmp_path, the studies the sequential examples start from run."""
    folder = tmp_path / "studies"
    shutil.copytree(STUDIES, folder, ignore=shutil.ignore_patterns("__pycache__", "results"))
    run_earlier_steps(folder)
    return folder


@pytest.mark.slow
def test_command_study_gives_the_simulators_exact_answers(tmp_path):
    import math

    import pandas

    done = run_cli("run", "--no-report", STUDIES / "decay-command.yaml", "--out", tmp_path, "--quiet")
    assert done.returncode == 0, done.stderr
    runs = pandas.read_csv(tmp_path / "runs.csv")
    assert (runs["half_life"] - math.log(2) / runs["k"]).abs().max() < 1e-9
    assert (runs["final_y"] - runs["y0"] * (-runs["k"] * 10).map(math.exp)).abs().max() < 1e-6


def test_schema_file_is_current():
    from studyrun.commands.schema import study_schema

    committed = json.loads((STUDIES.parent / "schemas" / "study.schema.json").read_text())
    assert committed == study_schema(), "regenerate: studyrun schema > schemas/study.schema.json"


def test_analysis_schema_file_is_current():
    from studyrun.commands.schema import analysis_schema

    committed = json.loads((STUDIES.parent / "schemas" / "analysis.schema.json").read_text())
    assert committed == analysis_schema(), ("regenerate: studyrun schema --analysis > "
                                            "schemas/analysis.schema.json")


@pytest.mark.slow
def test_step_check_compares_the_step_with_half_of_it(tmp_path):
    done = run_cli("check", STUDIES / "flowers-sobol.yaml")
    assert "euler with step 0.125 against 0.0625" in done.stdout
    # Euler at 0.125 moves the flowers' growth by about 2% when halved: too coarse, as it warns
    assert done.returncode == 1 and "too coarse" in done.stdout
    fine = (STUDIES / "models" / "flowers.yaml").read_text().replace("step: 0.125", "step: 0.0078125")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "flowers.yaml").write_text(fine)
    study = (STUDIES / "flowers-sobol.yaml").read_text()
    (tmp_path / "study.yaml").write_text(study)
    done = run_cli("check", tmp_path / "study.yaml")
    assert done.returncode == 0 and "ok: largest difference" in done.stdout


@pytest.mark.slow
def test_run_warns_when_the_step_is_too_coarse(tmp_path):
    done = run_cli("run", "--no-report", STUDIES / "flowers-morris.yaml", "--out", tmp_path, "--quiet")
    assert done.returncode == 0
    # before the runs, and not again in the closing summary
    assert done.stderr.count("warning: the integration step may be too coarse") == 1
    assert json.loads((tmp_path / "analysis.json").read_text())["warnings"]


@pytest.fixture(scope="session")  # once per test process, however pytest-xdist splits the module
def doe_results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bowl-doe")
    done = run_cli("run", "--no-report", STUDIES / "bowl-doe.yaml", "--out", folder, "--quiet")
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.slow
def test_predict_from_a_doe_results_folder(doe_results):
    # the surface is exactly quadratic: 80 - 4(0.5)^2 - 3(0.2)^2 + 1.5(0.5)(0.2) + 2(0.5) + 0.2
    centre = run_cli("predict", doe_results, "--at", "temperature=170,pressure=3.2,hold_time=30",
                     "--quantity", "process_yield")
    assert centre.returncode == 0, centre.stderr
    assert centre.stdout.startswith("process_yield: 80.23 ")
    # repeated --at flags accumulate: hold_time=20 (h = -1) adds -2 h^2 + 0.5 h = -2.5
    repeated = run_cli("predict", doe_results, "--at", "temperature=170", "--at", "pressure=3.2",
                       "--at", "hold_time=20", "--quantity", "process_yield")
    assert repeated.returncode == 0, repeated.stderr
    assert repeated.stdout.startswith("process_yield: 77.73 ")


@pytest.mark.slow
@pytest.mark.parametrize("args, words", [
    (["--at", "temperature=hot"], "NAME=VALUE"),
    (["--at", "temperature=170,pressure=3.2"], "no value for 'hold_time'"),
    (["--at", "temperature=170,pressure=3.2,hold_time=30,speed=2"], "unknown factor 'speed'"),
    (["--at", "temperature=nan,pressure=3.2,hold_time=30"], "temperature=nan is not a finite"),
    (["--at", "temperature=170", "--at", "temperature=160"], "temperature is given twice"),
    (["--at", "temperature=170,pressure=3.2,hold_time=30", "--level", "1"], "--level must lie"),
    (["--at", "temperature=170,pressure=3.2,hold_time=30", "--level", "0"], "--level must lie"),
])
def test_predict_refuses_a_bad_point_or_level(doe_results, args, words):
    bad = run_cli("predict", doe_results, *args)
    assert bad.returncode == 2 and words in bad.stderr and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
