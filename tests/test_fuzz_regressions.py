"""Regression tests for what the fuzz suite found (issue 8, point 4), each a plain example.

The expression-language regressions (huge integer literals, nesting, sympy powers) live in
test_fuzz_expressions.py next to the fuzzers that found them.
"""

from __future__ import annotations

import pytest
from test_fuzz_common import assert_located

from studyrun.core.errors import StudyError
from studyrun.study.loading import load_study

GOOD = """\
name: good
model:
  type: ode
  time: {start: 0, stop: 1, step: 0.5}
  states: {x: 1}
  rates: {x: -k * x}
  constants: {k: 1}
parameters:
  k: {bounds: [0.5, 1.5]}
quantities: {y: final(x)}
analysis: {type: montecarlo, samples: 4}
"""


def load_error(tmp_path, text: str) -> StudyError:
    path = tmp_path / "study.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(StudyError) as caught:
        load_study(path)
    assert_located(caught.value)
    return caught.value


@pytest.mark.parametrize("escaped, shown", [("\\r", "\\r"), ("\\u2028", "\\u2028"),
                                            ("\\x85", "\\x85"), ("\\f", "\\x0c")])
def test_a_line_break_in_a_value_stays_on_the_problems_line(tmp_path, escaped, shown):
    """Regression: `model: {file: "0\\r"}` printed `file not found: 0` then a stray line."""
    error = load_error(tmp_path, GOOD.replace("model:\n", f'model: {{file: "0{escaped}"}}\nx:\n', 1))
    assert len(str(error).splitlines()) == len(error.problems)
    assert any(f"0{shown}" in p.message for p in error.problems), str(error)


@pytest.mark.parametrize("brk", ["\\r", "\\u2028", "\\n"])
def test_a_line_break_in_a_key_stays_on_the_problems_line(tmp_path, brk):
    text = GOOD.replace("analysis: {type: montecarlo, samples: 4}",
                        f'analysis: {{type: montecarlo, samples: 4, "sam{brk}ples": 1}}')
    text = text.replace("quantities: {y: final(x)}", f'quantities: {{"y{brk}": final(x)}}')
    error = load_error(tmp_path, text)
    assert len(str(error).splitlines()) == len(error.problems)


def test_a_model_file_name_too_long_is_located(tmp_path):
    """Regression: a 5000-character `model: {file: ...}` raised OSError (name too long)."""
    error = load_error(tmp_path, f"name: x\nmodel: {{file: {'x' * 5000}.yaml}}\n")
    (problem,) = error.problems
    assert problem.path == "model.file" and problem.line == 2
    assert "cannot use the path" in problem.message


def test_a_huge_integer_for_a_fixed_parameter_is_located(tmp_path):
    """Regression: `k: 1000...0` (400 digits) raised OverflowError in the parameter check."""
    error = load_error(tmp_path, GOOD.replace("parameters:\n", f"parameters:\n  k2: {10**400}\n"))
    (problem,) = error.problems
    assert problem.path == "parameters.k2" and "401 digits" in problem.message


def test_escape_sequences_in_a_value_are_shown_escaped(tmp_path):
    """A terminal never gets a user's escape sequence (ESC [2J clears the screen) or NUL raw."""
    error = load_error(tmp_path, GOOD.replace("model:\n", 'model: {file: "\\e[2J\\0x"}\nx:\n', 1))
    text = str(error)
    assert "\x1b" not in text and "\x00" not in text and "\\x1b[2J\\x00x" in text


def test_a_data_file_name_too_long_is_located(tmp_path):
    """Regression: calibrate's check met ENAMETOOLONG and the OSError left `validate`; a section
    whose check cannot look at a path now reports it at that section."""
    import shutil

    from test_fuzz_common import STUDIES

    folder = shutil.copytree(STUDIES, tmp_path / "studies")
    path = folder / "logistic-calibrate.yaml"
    path.write_text(path.read_text().replace("data/logistic-growth.csv", "x" * 300 + ".csv"))
    with pytest.raises(StudyError) as caught:
        load_study(path)
    assert_located(caught.value)
    (problem,) = caught.value.problems
    assert problem.path.startswith("analysis") and "File name too long" in problem.message


def test_a_model_file_name_too_long_in_a_model_check_is_located(tmp_path):
    """The same guard for a model's own check (pysd's file, a command's program)."""
    path = tmp_path / "study.yaml"
    path.write_text(GOOD.replace("""  type: ode
  time: {start: 0, stop: 1, step: 0.5}
  states: {x: 1}
  rates: {x: -k * x}
  constants: {k: 1}
""", f"  type: pysd\n  file: {'x' * 300}.mdl\n"))
    with pytest.raises(StudyError) as caught:
        load_study(path)
    assert_located(caught.value)
    assert any(p.path.startswith("model") and "too long" in p.message
               for p in caught.value.problems), str(caught.value)


@pytest.mark.parametrize("time", ["{start: 0, stop: 1, step: .inf}", "{start: 0, stop: .inf, step: 0.5}",
                                  "{start: -.inf, stop: 1, step: 0.5}", "{start: 0, stop: 1, step: .nan}",
                                  "{start: 0, stop: 1e300, step: 1e-300}"])
def test_infinite_or_nan_times_are_located(tmp_path, time):
    """Regression: `step: .inf` or `stop: .inf` raised OverflowError (round(inf)) and
    `step: .nan` ValueError in the time grid check, out of validate."""
    error = load_error(tmp_path, GOOD.replace("{start: 0, stop: 1, step: 0.5}", time))
    assert all(p.path.startswith("model.time") for p in error.problems), str(error)


def test_a_study_name_too_long_for_a_folder_is_located(tmp_path):
    """Regression: a 300-character name validated, then the results folder could not be made."""
    name = "a" * 300
    error = load_error(tmp_path, GOOD.replace("name: good", f"name: {name}", 1))
    (problem,) = error.problems
    assert problem.path == "name"
    assert problem.line == 1 and problem.message == (
        "must be at most 200 characters long, got 300 characters")


@pytest.mark.slow
@pytest.mark.parametrize("quantity, message", [
    ("final(value) + sin(x9)", "quantity 'y': 'x9' is neither an output of the model (outputs: "
                               "value) nor a parameter; check the name in 'final(value) + sin(x9)'"),
    ("final(value)", "quantity 'y': final() reads a time series, and the model gave none (its "
                     "outputs are scalars: value)"),
])
def test_a_quantity_naming_what_the_run_lacks_says_which_name(tmp_path, quantity, message):
    """`final(value) + sin(x9)` of a python model failed with "the model gave no output 'time'",
    naming neither x9 nor the problem."""
    from conftest import run_cli

    (tmp_path / "m.py").write_text("def f(a):\n    return a * 2\n")
    path = tmp_path / "study.yaml"
    path.write_text("name: q\nmodel: {type: python, function: 'm:f'}\n"
                    "parameters:\n  a: {bounds: [0, 1]}\n"
                    f"quantities: {{y: '{quantity}'}}\nanalysis: {{type: montecarlo, samples: 4}}\n"
                    "execution: {scheduler: sync}\n")
    done = run_cli("run", "--no-report", path, "--out", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("studyrun: run ") and message in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1
