"""The pysd model type, with real PySD on Vensim's teacup model (tests/models/teacup.mdl)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, write_study

from studyrun.core.batch import RunContext
from studyrun.core.errors import StudyError
from studyrun.models.pysd import Pysd, cache_folder, mangled_names, plain_name

TEACUP = Path(__file__).parent / "teacup.mdl"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One translation cache for the module (PySD translates in seconds), not the user's."""
    folder = tmp_path_factory.mktemp("cache")
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    yield folder
    if before is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture
def model_dir(tmp_path, cache) -> Path:
    shutil.copy(TEACUP, tmp_path / "teacup.mdl")
    return tmp_path


def euler_teacup(tau: float, steps: int, dt: float = 0.125) -> np.ndarray:
    """The teacup's temperature, Euler at dt: T_n = 70 + 110 (1 - dt/tau)^n."""
    return 70 + 110 * (1 - dt / tau) ** np.arange(steps + 1)


@pytest.mark.slow
def test_runs_give_the_models_series_under_plain_names(model_dir):
    spec = Pysd.model_validate({"type": "pysd", "file": "teacup.mdl",
                                "time": {"final_time": 5, "saveper": 0.125}})
    assert spec.check(model_dir) == []
    evaluator = spec.build(model_dir)
    out = evaluator({"characteristic_time": np.array([5.0, 10.0])}, RunContext(run_ids=np.arange(2)))
    assert out.errors == [None, None]
    np.testing.assert_allclose(out.time, np.arange(41) * 0.125)
    for row, tau in enumerate([5.0, 10.0]):  # each run on a fresh model: nothing leaks
        np.testing.assert_allclose(out.series["teacup_temperature"][row], euler_teacup(tau, 40))
    assert {"teacup_temperature", "heat_loss_to_room"} <= set(out.series)


@pytest.mark.slow
def test_a_time_setting_varied_as_a_parameter_sets_the_clock(model_dir):
    """Fails before: TIME STEP as a parameter went to PySD's `params`, which replaced the
    variable but not the clock: every run ended at its start (180), silently."""
    spec = Pysd.model_validate({"type": "pysd", "file": "teacup.mdl", "time": {"final_time": 5}})
    assert spec.check(model_dir) == []
    steps = np.array([0.125, 0.25, 0.125])
    out = spec.build(model_dir)({"characteristic_time": np.full(3, 10.0), "time_step": steps},
                                RunContext(run_ids=np.arange(3)))
    assert out.errors == [None, None, None]
    for group in out.series_groups():  # a grid per time step (SAVEPER = TIME STEP)
        rows = np.arange(3)[group.rows]
        dt = float(steps[rows[0]])
        np.testing.assert_allclose(group.time, np.arange(int(5 / dt) + 1) * dt)
        for i in range(len(rows)):
            np.testing.assert_allclose(group.series["teacup_temperature"][i],
                                       euler_teacup(10.0, int(5 / dt), dt))
    twice = [p.message for p in spec.check_inputs(model_dir, ["final_time"], ["final_time"])]
    assert twice == ["final_time is both a parameter and model.time.final_time; give it once "
                     "(as a parameter to vary it)"]


def test_the_translation_goes_to_the_cache_not_beside_the_model(model_dir, cache):
    spec = Pysd.model_validate({"type": "pysd", "file": "teacup.mdl"})
    first = spec.build(model_dir).translated
    assert sorted(p.name for p in model_dir.iterdir()) == ["teacup.mdl"]
    assert Path(first).is_file() and Path(first).is_relative_to(cache_folder())
    assert cache_folder().is_relative_to(cache)
    assert spec.build(model_dir).translated == first  # reused while the model is unchanged
    (model_dir / "teacup.mdl").write_text(TEACUP.read_text().replace("180)", "190)"))
    assert spec.build(model_dir).translated != first
    assert spec.dependencies(model_dir) == {"teacup.mdl": model_dir / "teacup.mdl"}


def test_parameters_must_name_components_of_the_model(model_dir):
    spec = Pysd.model_validate({"type": "pysd", "file": "teacup.mdl"})
    assert spec.input_names(model_dir) is None  # unknown until check() has read the model
    assert spec.check(model_dir) == []
    assert {"characteristic_time", "room_temperature"} <= spec.input_names(model_dir)
    assert "time" not in spec.input_names(model_dir)
    (model_dir / "teacup.mdl").write_text(TEACUP.read_text() + "\n")
    assert spec.input_names(model_dir) is None  # the file changed: unknown until checked again


def test_missing_file_and_missing_pysd_are_problems(monkeypatch, tmp_path):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    spec = Pysd.model_validate({"type": "pysd", "file": "nowhere.mdl"})
    paths = {p.path: p.message for p in spec.check(tmp_path)}
    assert "no such file" in paths["file"] and "pip install" in paths["type"]
    with pytest.raises(StudyError):
        spec.build(tmp_path)
    bad = Pysd.model_validate({"type": "pysd", "file": "model.txt"})
    assert any("unknown model file type" in p.message for p in bad.check(tmp_path))


def test_a_model_pysd_cannot_translate_is_located(model_dir):
    (model_dir / "broken.mdl").write_text("{UTF-8}\nx = = 3 ~ ~ |\n")
    spec = Pysd.model_validate({"type": "pysd", "file": "broken.mdl"})
    (problem,) = spec.check(model_dir)
    assert problem.path == "file" and problem.message.startswith(
        "broken.mdl:2:5: PySD cannot parse the equation of 'x': it stops at '= 3'")


def test_plain_names():
    assert plain_name("Teacup Temperature") == "teacup_temperature"
    assert plain_name("stock[A,B]") == "stock_a_b"
    assert plain_name("3 things") == "v_3_things"


STUDY = """
name: teacup
model: {type: pysd, file: teacup.mdl, time: {final_time: 10}}
parameters:
  characteristic_time: {distribution: uniform, low: 5, high: 15}
  room_temperature: 70
quantities: {final: final(teacup_temperature)}
analysis: {type: montecarlo, samples: 4}
execution: {scheduler: sync}
"""


@pytest.mark.slow
def test_cli_locates_a_parameter_the_model_lacks_and_runs_without_writing_beside_it(model_dir):
    typo = write_study(model_dir, STUDY.replace("  characteristic_time", "  charactristic_time"),
                       "typo.yaml")
    done = run_cli("validate", typo)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (f"{typo}:4:3: parameters.charactristic_time: the model has no input "
            "'charactristic_time'; did you mean 'characteristic_time'?") in done.stderr
    study = write_study(model_dir, STUDY)
    done = run_cli("run", study, "--out", model_dir / "results", "--no-report", cwd=model_dir)
    assert done.returncode == 0, done.stderr
    assert "4 of 4 runs succeeded" in done.stdout
    left = sorted(p.name for p in model_dir.iterdir())
    assert left == ["results", "study.yaml", "teacup.mdl",
                    "typo.yaml"], left


@pytest.mark.slow
def test_the_provenance_names_pysd_and_a_model_without_random_functions_ignores_the_seed(
        model_dir):
    import pysd

    import studyrun

    study = write_study(model_dir, STUDY.replace("{type: montecarlo, samples: 4}",
                                                 "{type: sweep, levels: {characteristic_time: 3}}"))
    first = studyrun.run(study, model_dir / "out", report=False)
    assert first.analysis["provenance"]["packages"]["pysd"] == pysd.__version__
    assert not Pysd.model_validate({"type": "pysd", "file": "teacup.mdl"}).uses_seed(model_dir)
    study.write_text(study.read_text().replace("name: teacup", "name: teacup\nseed: 2"))
    assert studyrun.run(study, model_dir / "out", report=False).analysis["runs"]["reused"] == 3


NAMES = Path(__file__).parent / "names.mdl"  # Input, Duration, Yield, Birth Rate, Population[Region]
NAMED = """
name: names
model: {type: pysd, file: names.mdl, outputs: [Yield, Population, Input]}
parameters:
  Birth Rate: {bounds: [0.01, 0.02]}
  Input: {bounds: [1, 2]}
  duration: {bounds: [3, 5]}
quantities: {yield: final(yield), north: final(population_north), input_end: final(input)}
analysis: {type: montecarlo, samples: 4}
execution: {scheduler: sync}
"""


@pytest.mark.slow
def test_a_variable_is_one_name_however_the_study_writes_it(tmp_path, cache):
    """Fails before: `Birth Rate` could not name a parameter, `Input` was PySD's `input_1` as
    an input and `input` as an output, and errors listed Python and Vensim names mixed."""
    import pandas

    shutil.copy(NAMES, tmp_path / "names.mdl")
    done = run_cli("run", "--no-report", write_study(tmp_path, NAMED), "--out", tmp_path / "out", "--quiet")
    assert done.returncode == 0 and "4 of 4 runs succeeded" in done.stdout, done.stderr
    runs = pandas.read_csv(tmp_path / "out" / "runs.csv")
    assert list(runs.columns)[6:] == ["birth_rate", "input", "duration", "yield", "north",
                                      "input_end"]
    assert (runs["input_end"] == runs["input"]).all()  # the input set is the output read
    np.testing.assert_allclose(runs["yield"], runs["north"] * runs["duration"], rtol=1e-12)
    typo = write_study(tmp_path, NAMED.replace("  duration:", "  duraton:"), "typo.yaml")
    done = run_cli("validate", typo)
    assert done.returncode == 2 and "did you mean 'duration'?" in done.stderr
    inputs = done.stderr.split("(inputs: ")[1].split(")")[0].split(", ")
    assert "input" in inputs and "birth_rate" in inputs and all(
        name == plain_name(name) for name in inputs), inputs  # one kind of name
    twice = write_study(tmp_path, NAMED.replace("  duration:", "  Duration: 4\n  duration:"),
                        "twice.yaml")
    done = run_cli("validate", twice)
    assert done.returncode == 2 and "'Duration' and 'duration' name the same variable" in done.stderr


@pytest.mark.slow
def test_pysd_python_name_of_a_renamed_variable_is_the_same_name(tmp_path, cache):
    """Fails before: PySD's own Python name of `Input`, `input_1` (Python has `input`), was no
    name of the model ("not an input of the model"), so a study written from PySD's names could
    not set or read it."""
    import pandas

    shutil.copy(NAMES, tmp_path / "names.mdl")
    python = NAMED.replace("Input]", "input_1]").replace("  Input:", "  input_1:").replace(
        "final(input)", "final(input_1)")
    assert "input_1" in python and "Input" not in python and "(input)" not in python
    done = run_cli("run", "--no-report", write_study(tmp_path, python), "--out", tmp_path / "out", "--quiet")
    assert done.returncode == 0 and "4 of 4 runs succeeded" in done.stdout, done.stderr
    runs = pandas.read_csv(tmp_path / "out" / "runs.csv")
    assert "input" in runs.columns and "input_1" not in runs.columns
    assert (runs["input_end"] == runs["input"]).all()  # the input set is the output read
    both = write_study(tmp_path, NAMED.replace("  Input:", "  input_1: 1.5\n  Input:"), "both.yaml")
    done = run_cli("validate", both)
    assert done.returncode == 2 and "'input_1' and 'Input' name the same variable" in done.stderr


def test_a_quantity_reads_an_output_or_parameter_as_the_study_spells_it():
    """Fails before: `max(Infectious)` beside `outputs: [Infectious]` (PySD's SIR sample, tried
    as a new user) failed every run, the output being called `infectious`; a name the study does
    not give, a function's and a spelling with spaces are left as they are."""
    data = {"model": {"type": "pysd", "file": "sir.mdl", "outputs": ["Infectious", "Recovered"]},
            "parameters": {"Contact Rate": {"bounds": [1, 2]}, "Duration": {"bounds": [4, 6]}},
            "quantities": {"peak": "max(Infectious)", "end": "final(Recovered) / Duration",
                           "other": "max(Susceptible) + Infectious_2"}}
    named = Pysd.names_in_study(data, {})
    assert named["quantities"] == {"peak": "max(infectious)",
                                   "end": "final(recovered) / duration",
                                   "other": "max(Susceptible) + Infectious_2"}
    assert named["model"]["outputs"] == ["infectious", "recovered"]
    assert list(named["parameters"]) == ["contact_rate", "duration"]


def test_renamed_names_are_read_from_a_translation_never_run(tmp_path):
    """A translation's names are read from its decorators, not by running it; one a parser
    cannot read (nested past Python's limit) has none, and a name that is also a study name
    stays that variable's."""
    translation = tmp_path / "model.py"
    translation.write_text("raise SystemExit('ran')\n"
                           "@component.add(name='Input')\ndef input_1():\n    return 1\n"
                           "@component.add(name='Input 1')\ndef input_1_1():\n    return 2\n"
                           "@component.add(name='Stock 1')\ndef stock_1():\n    return 3\n")
    assert mangled_names(translation) == {"input_1_1": "input_1"}  # input_1 is 'Input 1''s name
    translation.write_text("@component.add(name='Input')\ndef input_1():\n    return 1\n")
    assert mangled_names(translation) == {"input_1": "input"}
    translation.write_text("x = " + "(" * 100_000 + ")" * 100_000 + "\n")
    assert mangled_names(translation) == {}


def test_a_parse_error_names_the_variable_and_the_line(tmp_path, cache):
    """Fails before: PySD's parser message, without the file's line or the variable."""
    text = NAMES.read_text().replace("Population[Region] * Birth Rate * Input",
                                     "Population[Region] * * Birth Rate (")
    (tmp_path / "names.mdl").write_text(text)
    done = run_cli("validate", write_study(tmp_path, NAMED))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert ("names.mdl:13:21: PySD cannot parse the equation of 'Births': it stops at "
            "'* * Birth Rate ('") in done.stderr, done.stderr
