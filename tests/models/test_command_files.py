"""Input files written as compiled programs read them (issue 29, point 1): a C program reading
`%d %lf` and a Fortran namelist, built here with the machine's compilers and run by whole studies.
Whole numbers are written as integers and reals read back bit for bit, at batch sizes 1,
automatic and 64; format specs, unknown fields and parameters no field writes are located at
validate; a table without a header is read by the columns the study names."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import STUDIES, run_cli, write_study

from studyrun.commands.pipeline import run_study
from studyrun.core.batch import RunContext
from studyrun.models.command import Command
from studyrun.models.command.results import RunFailed, read_results
from studyrun.study.loading import load_study

PROGRAMS = Path(__file__).parent / "programs"
GFORTRAN_SCRIPT = Path(__file__).with_name("gfortran.sh")
BATCH_SIZES = ("1", "auto", "64")


def compiled(source: Path, folder: Path, compiler: str = "cc") -> Path:
    """`source` built with the machine's compiler into folder (no fused multiply-adds: the same
    roundings as Python's)."""
    binary = folder / source.stem
    subprocess.run([compiler, "-O2", "-ffp-contract=off", "-o", str(binary), str(source)],
                   check=True, timeout=120)
    return binary


def euler(steps: int, rate: float, horizon: float) -> list[float]:
    """y at every step of Euler's method for dy/dt = -rate y, y(0) = 1, as the programs compute it."""
    dt, y, ys = horizon / steps, 1.0, [1.0]
    for _ in range(steps):
        y -= rate * y * dt
        ys.append(y)
    return ys


def runs_of(folder: Path) -> list[dict[str, str]]:
    with open(folder / "runs.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="session")
def gfortran():
    """gfortran, installed already (`sudo tests/system.sh up`): the tests install nothing."""
    if shutil.which("gfortran") is None:
        pytest.fail(f"gfortran is missing: install it first with `sudo {GFORTRAN_SCRIPT} install`",
                    pytrace=False)
    return "gfortran"


# --- the example study: a C program reading %d and %lf ------------------------------------------

@pytest.mark.slow
def test_the_c_example_reads_its_step_count_with_d_and_gives_eulers_numbers(tmp_path):
    """studies/euler-c-sweep.yaml from the command line: steps reaches fscanf("%d") as 5, not
    5.0 (which %d would read as 5 and leave ".0" for the rate's %lf: every rate 0, exit 0), and
    each run's y is Euler's to the last bit, whatever the batch size."""
    shutil.copytree(STUDIES / "sim", tmp_path / "sim", ignore=shutil.ignore_patterns("build"))
    text = (STUDIES / "euler-c-sweep.yaml").read_text()
    found = {}
    for size in BATCH_SIZES:
        study = write_study(tmp_path, text.replace("workers: 2", f"workers: 2\n  batch_size: {size}"),
                            f"euler-{size}.yaml")
        done = run_cli("run", "--no-report", study, "--out", tmp_path / size, "--quiet", timeout=280)
        assert done.returncode == 0, done.stderr
        found[size] = [{k: r[k] for k in ("steps", "rate", "final_y", "euler_error")}
                       for r in runs_of(tmp_path / size)]
    assert found["1"] == found["auto"] == found["64"]
    assert {float(r["steps"]) for r in found["1"]} == {5, 10, 20, 40, 80}
    for row in found["1"]:
        assert float(row["final_y"]) == euler(int(float(row["steps"])), float(row["rate"]), 2.0)[-1]


# --- every value reaches the program as written, and back -----------------------------------------

ECHO_STUDY = """\
name: echo
seed: 5
model:
  type: command
  run: ["{study_dir}/echo", "{params_file}", "{results_file}"]
  params_file: {template: echo.tmpl, file: echo.in}
  results_file: out.txt
  columns: [n_read, x_read, m_read]
parameters:
  n: {distribution: discrete, values: [-7, 0, 3, 2147483647]}
  x: {distribution: loguniform, low: 1.0e-150, high: 1.0e+150}
  m: 12
quantities: {n_read: n_read, x_read: x_read, m_read: m_read}
analysis: {type: montecarlo, samples: 64}
execution: {scheduler: threads, workers: 2, batch_size: 16}
"""


@pytest.mark.slow
def test_a_c_program_reads_whole_numbers_with_d_and_every_real_bit_for_bit(tmp_path):
    compiled(PROGRAMS / "echo.c", tmp_path)
    (tmp_path / "echo.tmpl").write_text("n, x and m as echo.c reads them\n{n} {x} {m}\n")
    result = run_study(write_study(tmp_path, ECHO_STUDY), tmp_path / "out", quiet=True, report=False)
    assert result["runs"]["succeeded"] == 64, result["runs"]
    for row in runs_of(tmp_path / "out"):
        assert float(row["n_read"]) == float(row["n"])
        assert float(row["x_read"]) == float(row["x"])  # runs.csv writes every digit
        assert float(row["m_read"]) == 12


def test_whole_numbers_are_written_as_integers_wherever_the_study_says_so(tmp_path):
    """An integer constant, values: of integers, a sweep's levels of integers: integers; a real
    parameter is a real even when its value is whole (10.0), and a sweep's real levels too."""
    (tmp_path / "in.tmpl").write_text("{fixed_int} {fixed_real} {listed} {levels} {real_levels} "
                                      "{ranged}\n")
    study = write_study(tmp_path, """\
        name: kinds
        model:
          type: command
          run: [python3, "-c", "open('results.json', 'w').write('{\\"y\\": 1}')"]
          params_file: {template: in.tmpl, file: in.txt}
          keep_workdirs: all
        parameters:
          fixed_int: 10
          fixed_real: 10.0
          listed: {distribution: discrete, values: [1, 2]}
          levels: {bounds: [0, 8]}
          real_levels: {bounds: [0, 8]}
          ranged: {bounds: [2, 4]}
        analysis:
          type: sweep
          levels: {listed: 2, levels: [4, 8], real_levels: [4.0, 8.0], ranged: 2}
        execution: {scheduler: sync}
        """)
    result = run_study(study, tmp_path / "out", quiet=True, report=False)
    assert result["runs"]["succeeded"] == 16, result["runs"]
    texts = {p.read_text() for p in (tmp_path / "out" / "work").rglob("in.txt")}
    assert len(texts) == 16
    for text in texts:
        assert re.fullmatch(r"10 10\.0 [12] [48] [48]\.0 [24]\.0\n", text), text


def test_a_params_json_holds_whole_numbers_as_integers(tmp_path):
    model = Command.model_validate({"type": "command", "run": ["true"], "keep_workdirs": "all"})
    evaluator = model.with_whole_numbers({"n"}).build(tmp_path)
    evaluator({"n": np.array([3.0]), "x": np.array([3.0])}, RunContext(run_ids=[1], workdir=tmp_path))
    assert (tmp_path / f"run-{1:016x}" / "params.json").read_text() == '{"n": 3, "x": 3.0}'


def test_a_whole_number_an_analysis_moves_off_its_values_fails_its_run_clearly(tmp_path):
    (tmp_path / "in.tmpl").write_text("{n}\n")
    model = Command.model_validate({"type": "command", "run": ["true"],
                                    "params_file": {"template": "in.tmpl", "file": "in.txt"}})
    out = model.with_whole_numbers({"n"}).build(tmp_path)(
        {"n": np.array([2.5])}, RunContext(run_ids=[1], workdir=tmp_path / "work"))
    assert "n is a whole number in this study" in out.errors[0]
    assert "this run gives it 2.5" in out.errors[0]


def test_how_the_files_are_written_is_part_of_every_runs_identity(tmp_path):
    """values: [1.0, 2.0] and values: [1, 2] write different files (1.0 and 1): different runs."""
    (tmp_path / "in.tmpl").write_text("{n}\n")
    text = """\
        name: ids
        model: {type: command, run: [cat, "{params_file}"], params_file: {template: in.tmpl, file: in.txt}}
        parameters: {n: {distribution: discrete, values: VALUES}}
        analysis: {type: montecarlo, samples: 4}
        """
    from studyrun.plan.study import plan_study

    plans = [plan_study(load_study(write_study(tmp_path, text.replace("VALUES", v), f"{k}.yaml")))
             for k, v in enumerate(["[1.0, 2.0]", "[1, 2]"])]
    assert plans[0].design.matrix.tolist() == plans[1].design.matrix.tolist()
    assert not set(plans[0].run_ids.tolist()) & set(plans[1].run_ids.tolist())


# --- a Fortran namelist ---------------------------------------------------------------------------

FORTRAN_STUDY = """\
name: namelist
model:
  type: command
  run: ["{study_dir}/euler"]
  params_file: {template: euler.nml, file: euler.nml}
  results_file: out.txt
  columns: [time, y]
parameters:
  steps: {distribution: discrete, values: [5, 7, 10, 40]}
  rate: {bounds: [0.1, 1.5]}
  horizon: 2.0
quantities: {final_y: final(y)}
analysis: {type: montecarlo, samples: 48}
execution: {scheduler: threads, workers: 2, batch_size: SIZE}
"""


@pytest.mark.system
@pytest.mark.fortran
@pytest.mark.slow
def test_a_fortran_namelist_reads_integers_and_reals_at_every_batch_size(tmp_path, gfortran):
    """`steps = 10.0` stops a namelist read ("Cannot match namelist object name .0"); written as
    10 it runs, and y (written with a D exponent) is Euler's to the last bit."""
    compiled(PROGRAMS / "euler.f90", tmp_path, gfortran)
    shutil.copy(PROGRAMS / "euler.nml", tmp_path)
    found = {}
    for size in BATCH_SIZES:
        study = write_study(tmp_path, FORTRAN_STUDY.replace("SIZE", size), f"namelist-{size}.yaml")
        result = run_study(study, tmp_path / size, quiet=True, report=False)
        assert result["runs"]["succeeded"] == 48, result["runs"]
        found[size] = [(r["steps"], r["rate"], r["final_y"]) for r in runs_of(tmp_path / size)]
    assert found["1"] == found["auto"] == found["64"]
    for steps, rate, final_y in found["1"]:
        assert float(final_y) == euler(int(float(steps)), float(rate), 2.0)[-1]


# --- located at validate ------------------------------------------------------------------------

VALIDATE = """\
name: located
model:
  type: command
  run: [cat, "{params_file}", "--n=ARG"]
  params_file: {template: in.tmpl, file: in.txt}
parameters:
  n: {distribution: discrete, values: [1, 2, 4]}
  x: {bounds: [0, 1]}
  k: {bounds: [0, 1]}
analysis: {type: montecarlo, samples: 4}
"""


@pytest.mark.parametrize("template, arg, where, message", [
    ("n = {n:d}\nx = {x:d}\nk = {k}\n", "{n}", ":5:17: model.params_file.template: in.tmpl:2:5: ",
     "{x:d} does not fit x, a real number"),
    ("n = {n}\nx = {x:>12.4f}\nk = {k:.6e}\n", "{n:.3}", ":4:31: model.run[2]: ",
     "{n:.3} does not fit n, a whole number (Precision not allowed in integer format"),
    ("{n} {x} {k}\n{param_file}\n", "{n}", ":5:17: model.params_file.template: in.tmpl:2:1: ",
     "{param_file} names no parameter nor placeholder; did you mean 'params_file'?"),
    ("{n} {x}\n", "{n}", ":9:3: parameters.k: ",
     "the command model never reads k: its template in.tmpl has no {k} and no argument of run"),
    ("{n} {x} {k:q}\n", "{n}", ":5:17: model.params_file.template: in.tmpl:1:9: ",
     "{k:q}: 'q' is not a format spec"),
])
def test_fields_are_checked_against_the_parameters_at_validate(tmp_path, template, arg, where,
                                                               message):
    (tmp_path / "in.tmpl").write_text(template)
    study = write_study(tmp_path, VALIDATE.replace("ARG", arg))
    done = run_cli("validate", study)
    assert done.returncode == 2, done.stdout
    assert f"{study}{where}{message}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_format_specs_and_literal_braces_reach_the_file_and_the_arguments(tmp_path):
    """A JSON template needs no escaping; {{n}} is the text {n}; specs format as Python does."""
    (tmp_path / "in.tmpl").write_text('{"n": {n:>4d}, "x": {x:.3e}, "k": {k}}\n{{n}} {n:+d}\n')
    (tmp_path / "prog.py").write_text(
        "import json, sys\n"
        "first, second = open('in.txt').read().splitlines()\n"
        "p = json.loads(first)\n"
        "json.dump({'y': p['n'] + p['x'] + p['k'], 'arg': float(sys.argv[1])}, "
        "open('results.json', 'w'))\n")
    study = write_study(tmp_path, VALIDATE.replace("cat, \"{params_file}\", \"--n=ARG\"",
                                                   "python3, \"{study_dir}/prog.py\", \"{n:03d}\"")
                        + "execution: {scheduler: sync}\n")
    text = study.read_text().replace("  type: command\n", "  type: command\n  keep_workdirs: all\n")
    study.write_text(text)
    assert run_cli("validate", study).returncode == 0
    result = run_study(study, tmp_path / "out", quiet=True, report=False)
    assert result["runs"]["succeeded"] == 4, result["runs"]
    for written in (tmp_path / "out" / "work").rglob("in.txt"):
        first, second = written.read_text().splitlines()
        assert re.fullmatch(r'\{"n": {4}[124], "x": \d\.\d{3}e[-+]\d\d, "k": 0\.\d+\}', first), first
        assert re.fullmatch(r"\{n\} \+[124]", second), second
    rows = runs_of(tmp_path / "out")
    assert all(float(r["arg"]) == float(r["n"]) for r in rows)


# --- results: a table without a header ---------------------------------------------------------

@pytest.mark.parametrize("text", [
    "0 1.5\n1 2.5\n2 3.5\n",
    "# t y\n0,1.5\n\n1,  2.5\n2 ,3.5\n",
    "  0.0\t0.15D+01\n  1.0\t0.25d+01\n  2.0\t3.5E+00\n",
])
def test_a_table_without_a_header_is_read_by_its_columns(tmp_path, text):
    (tmp_path / "out.txt").write_text(text)
    scalars, series, time = read_results(tmp_path / "out.txt", ("time", "y"))
    assert scalars == {} and time.tolist() == [0, 1, 2] and series["y"].tolist() == [1.5, 2.5, 3.5]


def test_a_table_without_time_is_one_row_of_scalars(tmp_path):
    (tmp_path / "out.dat").write_text("3 -1.25e-3 nan\n")
    scalars, series, _ = read_results(tmp_path / "out.dat", ("a", "b", "c"))
    assert series == {} and scalars["a"] == 3 and scalars["b"] == -1.25e-3 and math.isnan(scalars["c"])


@pytest.mark.parametrize("text, columns, message", [
    ("0 1\n1 2 3\n", ("time", "y"), "out.txt:2: 3 numbers where columns names 2 (time, y)"),
    ("0 1\n1 x\n", ("time", "y"), "out.txt:2: 'x' is not a number"),
    ("1 2\n3 4\n", ("a", "b"), "has 2 rows but no time column"),
    ("# nothing\n\n", ("a",), "holds no row of numbers"),
    ("0 1\n0 2\n", ("time", "y"), "'time' must increase strictly"),
])
def test_a_table_that_does_not_fit_its_columns_fails_the_run(tmp_path, text, columns, message):
    (tmp_path / "out.txt").write_text(text)
    with pytest.raises(RunFailed, match=re.escape(message)):
        read_results(tmp_path / "out.txt", columns)


def test_columns_reach_the_run_through_a_study(tmp_path):
    """A program that writes `t y` lines (no header, no JSON) needs no wrapper script."""
    program = "import math\nwith open('out.txt', 'w') as f:\n" \
              "    for t in range(4): print(t / 2, math.exp(-t / 2), file=f)\n"
    (tmp_path / "table.py").write_text(program)
    study = write_study(tmp_path, """\
        name: table
        model: {type: command, run: [python3, "{study_dir}/table.py"], results_file: out.txt,
                columns: [time, y]}
        parameters: {a: {bounds: [0, 1]}}
        quantities: {last: final(y), span: final(time)}
        analysis: {type: montecarlo, samples: 2}
        execution: {scheduler: sync}
        """)
    result = run_study(study, tmp_path / "out", quiet=True, report=False)
    assert result["results"]["last"]["mean"] == math.exp(-1.5)
    assert result["results"]["span"]["mean"] == 1.5
    assert json.loads((tmp_path / "out" / "analysis.json").read_text())["runs"]["failed"] == 0


def test_integers_reach_the_file_exact_and_those_a_design_cannot_hold_are_refused(tmp_path):
    """An integer constant beyond 2**53 is written as given (a design's floats would round it);
    values: of such integers are refused at validate."""
    (tmp_path / "in.tmpl").write_text("{big} {n}\n")
    text = """\
        name: big
        model: {type: command, run: [python3, "-c", "open('results.json', 'w').write('{}')"],
                params_file: {template: in.tmpl, file: in.txt}, keep_workdirs: all}
        parameters: {big: 9007199254740993, n: {distribution: discrete, values: VALUES}}
        analysis: {type: montecarlo, samples: 2}
        execution: {scheduler: sync}
        """
    run_study(write_study(tmp_path, text.replace("VALUES", "[1, 2]")), tmp_path / "out", quiet=True, report=False)
    assert {p.read_text() for p in (tmp_path / "out" / "work").rglob("in.txt")} <= {
        "9007199254740993 1\n", "9007199254740993 2\n"}
    done = run_cli("validate", write_study(tmp_path, text.replace("VALUES", "[1, 9007199254740993]")))
    assert done.returncode == 2
    assert "parameters.n.values: values holds the integer 9007199254740993, beyond 2**53" in done.stderr
