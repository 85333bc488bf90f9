"""Runs that already exist (`analysis.from:`): a CSV or another study's results folder analysed
without running the model (issue 18, point 4), each against a known answer."""

from __future__ import annotations

import json
from math import pi as PI
from pathlib import Path

import numpy as np
import pytest
from conftest import STUDIES, run_cli, write_study

import studyrun

ISHIGAMI = '''
import numpy as np

def ishigami(x1, x2, x3):
    return np.sin(x1) + 7 * np.sin(x2) ** 2 + 0.1 * x3 ** 4 * np.sin(x1)
'''
PARAMETERS = "\n".join(f"  x{i}: {{distribution: uniform, low: {-PI!r}, high: {PI!r}}}"
                       for i in (1, 2, 3))


def ishigami_rows(rows: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).uniform(-PI, PI, size=(rows, 3))
    return x, np.sin(x[:, 0]) + 7 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])


def write_csv(path: Path, header: list[str], columns: list[np.ndarray]) -> Path:
    lines = [",".join(header)] + [",".join(repr(float(v)) for v in row)
                                  for row in np.column_stack(columns).tolist()]
    path.write_text("\n".join(lines) + "\n")
    return path


def given_study(folder: Path, analysis: str, parameters: str = PARAMETERS, extra: str = "",
                name: str = "given.yaml") -> Path:
    return write_study(folder, f"name: given\nseed: 7\nparameters:\n{parameters}\n{extra}"
                               f"analysis: {analysis}\n", name)


def test_delta_of_a_folder_and_of_its_runs_csv_equals_the_delta_of_its_run(tmp_path):
    (tmp_path / "ishigami.py").write_text(ISHIGAMI)
    ran = write_study(tmp_path, f"""
        name: ran
        seed: 7
        model: {{type: python, function: ishigami:ishigami, vectorized: true}}
        parameters:
        {PARAMETERS.replace(chr(10), chr(10) + '        ')}
        quantities: {{y: value}}
        analysis: {{type: delta, samples: 300, resamples: 10}}
        execution: {{scheduler: sync}}
        """, "ran.yaml")
    first = studyrun.run(ran, tmp_path / "ran", report=False).analysis
    assert first["execution"]["executed"] == 300
    for source in ("ran", "ran/runs.csv"):
        path = given_study(tmp_path, f"{{type: delta, from: {source}, resamples: 10}}",
                           extra="quantities: {y: value}\n", name="again.yaml")
        again = studyrun.run(path, tmp_path / f"again-{source.replace('/', '-')}", report=False).analysis
        assert again["results"] == first["results"]
        assert again["runs"] == {"planned": 300, "succeeded": 300, "failed": 0, "reused": 0,
                                 "given": 300, "executed": 0}
        assert again["execution"]["scheduler"] == "none"
        assert again["provenance"]["given"]["file"] == str((tmp_path / "ran/runs.csv").resolve())
    assert again["provenance"]["given"]["study"] == "ran"


def test_montecarlo_of_a_csv_gives_the_samples_own_mean_and_std_and_reruns_nothing(tmp_path):
    rng = np.random.default_rng(3)
    a, b = rng.normal(2.0, 0.5, 400), rng.uniform(0, 1, 400)
    y = 3 * a + rng.normal(0, 1, 400)
    write_csv(tmp_path / "runs.csv", ["a", "b", "y"], [a, b, y])
    parameters = ("  a: {distribution: normal, mean: 2, std: 0.5}\n"
                  "  b: {distribution: uniform, low: 0, high: 1}")
    path = given_study(tmp_path, "{type: montecarlo, from: runs.csv}", parameters)
    done = run_cli("run", path, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    analysis = json.loads((tmp_path / "out/analysis.json").read_text())
    summary = analysis["results"]["y"]
    assert summary["n"] == 400
    assert summary["mean"] == pytest.approx(np.mean(y), rel=1e-13)
    assert summary["std"] == pytest.approx(np.std(y, ddof=1), rel=1e-13)
    assert summary["correlations"]["a"] > 0.7
    assert analysis["runs"]["executed"] == 0 and analysis["runs"]["given"] == 400
    assert not (tmp_path / "out/work").exists()
    assert list(json.loads(json.dumps(analysis["results"]))) == ["y"]  # a and b are inputs
    plan = run_cli("plan", path, "--out", tmp_path / "out")
    assert plan.returncode == 0 and "given runs (no model)" in plan.stdout
    assert "400 of 400 runs would be reused, 0 would run" in plan.stdout, plan.stdout
    report = run_cli("report", tmp_path / "out")
    assert report.returncode == 0, report.stderr
    assert "of given runs (no model)" in (tmp_path / "out/report.md").read_text()
    (tmp_path / "out/report.md").unlink()
    again = run_cli("run", path, "--out", tmp_path / "out")
    assert again.returncode == 0 and "400 reused" in again.stdout
    assert json.loads((tmp_path / "out/analysis.json").read_text())["results"] == analysis["results"]


def test_a_changed_row_is_a_new_run_the_others_are_reused(tmp_path):
    x, y = ishigami_rows(100)
    write_csv(tmp_path / "runs.csv", ["x1", "x2", "x3", "y"], [x, y])
    path = given_study(tmp_path, "{type: montecarlo, from: runs.csv}")
    studyrun.run(path, tmp_path / "out", report=False)
    y[0] += 1.0  # the same inputs, another output: not the run recorded before
    write_csv(tmp_path / "runs.csv", ["x1", "x2", "x3", "y"], [x, y])
    again = studyrun.run(path, tmp_path / "out", report=False).analysis
    assert again["runs"]["reused"] == 99
    assert again["results"]["y"]["mean"] == pytest.approx(np.mean(y), rel=1e-13)


def test_doe_design_given_recovers_an_exactly_quadratic_response(tmp_path):
    rng = np.random.default_rng(11)
    a, b = rng.uniform(0, 2, 30), rng.uniform(-1, 1, 30)
    x1, x2 = a - 1, b  # coded units: centre 1 and half-range 1; centre 0 and half-range 1
    y = 3 + 2 * x1 - x2 + 0.5 * x1 * x2 + 1.5 * x1**2 - 2 * x2**2
    write_csv(tmp_path / "runs.csv", ["a", "b", "y"], [a, b, y])
    parameters = "  a: {bounds: [0, 2]}\n  b: {bounds: [-1, 1]}"
    path = given_study(tmp_path, "{type: doe, design: given, from: runs.csv}", parameters)
    fit = studyrun.run(path, tmp_path / "out", report=False).results["y"]
    coefficients = {term: c["estimate"] for term, c in fit["coefficients"].items()}
    expected = {"1": 3, "x1": 2, "x2": -1, "x1*x2": 0.5, "x1^2": 1.5, "x2^2": -2}
    assert coefficients == pytest.approx(expected, abs=1e-9)
    assert fit["r2"] == pytest.approx(1.0)


def test_rbd_fast_and_pawn_of_ishigami_rows(tmp_path):
    from SALib.analyze import pawn

    x, y = ishigami_rows(4000)
    write_csv(tmp_path / "runs.csv", ["x1", "x2", "x3", "y"], [x, y])
    path = given_study(tmp_path, "{type: rbd_fast, from: runs.csv, resamples: 10}")
    s1 = studyrun.run(path, tmp_path / "rbd", report=False).results["y"]["S1"]
    assert [s1["x1"], s1["x2"], s1["x3"]] == pytest.approx([0.3139, 0.4424, 0.0], abs=0.05)
    path = given_study(tmp_path, "{type: pawn, from: runs.csv}", name="pawn.yaml")
    median = studyrun.run(path, tmp_path / "pawn", report=False).results["y"]["median"]
    problem = {"num_vars": 3, "names": ["x1", "x2", "x3"], "bounds": [[0.0, 1.0]] * 3}
    direct = pawn.analyze(problem, x, y, S=10)["median"]
    assert [median[n] for n in ("x1", "x2", "x3")] == pytest.approx(list(direct), abs=1e-12)
    assert median["x2"] > median["x1"] > median["x3"]  # x2's effect is the largest, x3's alone least


def test_surrogate_trained_on_a_csv_without_a_model(tmp_path):
    from scipy.stats import qmc

    unit = qmc.LatinHypercube(d=3, seed=2).random(600)
    x = -PI + 2 * PI * unit
    y = np.sin(x[:, 0]) + 7 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])
    write_csv(tmp_path / "runs.csv", ["x1", "x2", "x3", "y"], [x, y])
    path = given_study(tmp_path, "{type: surrogate, from: runs.csv}")
    result = studyrun.run(path, tmp_path / "out", report=False)
    y_fit = result.results["y"]
    assert y_fit["samples"] == 600 and result.analysis["execution"]["executed"] == 0
    assert [y_fit["ST"][n] for n in ("x1", "x2", "x3")] == pytest.approx([0.5576, 0.4424, 0.2437],
                                                                         abs=0.03)


def test_mistakes_in_a_csv_are_all_located_at_its_cells(tmp_path):
    (tmp_path / "runs.csv").write_text("x1,x2,X3,y,y 2\n"
                                       "0.5,0.1,0.2,1.0\n"
                                       "0.5,abc,0.2,1.0\n"
                                       "9.0,0.1,0.2,oops\n")
    path = given_study(tmp_path, "{type: montecarlo, from: runs.csv}")
    done = run_cli("run", "--no-report", path, "--out", tmp_path / "out")
    csv = str((tmp_path / "runs.csv").resolve())
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith(f"{csv}:1:1: ") and "'x3'" in line and "'X3'" in line
               for line in lines), done.stderr
    assert any(line.startswith(f"{csv}:3:5: ") and "x2 is 'abc'" in line for line in lines)
    assert any(line.startswith(f"{csv}:4:1: ") and "outside [-3.14159, 3.14159]" in line
               for line in lines)
    assert any(line.startswith(f"{csv}:4:13: ") and "'oops'" in line for line in lines)
    assert any(line.startswith(f"{csv}:1:12: ") and "'y 2' cannot name a quantity" in line
               for line in lines)
    assert not (tmp_path / "out/analysis.json").exists()


def test_a_results_folder_of_other_parameters_and_a_missing_source_are_located(tmp_path):
    x, y = ishigami_rows(50)
    write_csv(tmp_path / "runs.csv", ["x1", "x2", "x3", "y"], [x, y])
    studyrun.run(given_study(tmp_path, "{type: montecarlo, from: runs.csv}"), tmp_path / "mc", report=False)
    other = PARAMETERS + "\n  x4: {distribution: uniform, low: 0, high: 1}"
    done = run_cli("validate", given_study(tmp_path, "{type: delta, from: mc}", other, name="b.yaml"))
    runs_csv = str((tmp_path / "mc/runs.csv").resolve())
    assert done.returncode == 2 and f"{runs_csv}:1:1: no column for the varied parameter 'x4'" \
        in done.stderr, done.stderr
    fixed = PARAMETERS.replace(f"x3: {{distribution: uniform, low: {-PI!r}, high: {PI!r}}}",
                               "x3: 0.5")
    done = run_cli("validate", given_study(tmp_path, "{type: delta, from: mc}", fixed,
                                           name="f.yaml"))
    assert done.returncode == 2 and f"{runs_csv}:2:" in done.stderr and \
        "but the study fixes it at 0.5: the runs vary it" in done.stderr, done.stderr
    done = run_cli("validate", given_study(tmp_path, "{type: delta, from: nowhere}", name="c.yaml"))
    assert done.returncode == 2 and "c.yaml:" in done.stderr and "analysis.from: nowhere: no such" \
        in done.stderr, done.stderr
    done = run_cli("validate", given_study(tmp_path, "{type: delta, from: d.yaml}", name="d.yaml"))
    assert done.returncode == 2 and "analysis.from: d.yaml is not a CSV file" in done.stderr
    done = run_cli("validate", given_study(tmp_path, "{type: delta, samples: 100}", name="d.yaml"))
    assert done.returncode == 2 and "model: a study needs a model" in done.stderr, done.stderr
    done = run_cli("validate", given_study(tmp_path, "{type: delta, from: mc, samples: 64}",
                                           name="e.yaml"))
    assert done.returncode == 2 and "give samples (runs to make) or from" in done.stderr


def test_delta_of_fewer_runs_than_its_minimum_is_refused_at_validate(tmp_path):
    (tmp_path / "ishigami.py").write_text(ISHIGAMI)
    model = "model: {type: python, function: ishigami:ishigami, vectorized: true}\n"
    path = given_study(tmp_path, "{type: delta, samples: 50}", extra=model)
    done = run_cli("validate", path)
    assert done.returncode == 2 and f"{path}:8:25: analysis.samples: delta needs at least " \
        "100 runs" in done.stderr and "got samples: 50" in done.stderr, done.stderr
    done = run_cli("validate", given_study(tmp_path, "{type: delta, samples: 50, method: sobol}",
                                           extra=model, name="s1.yaml"))
    assert done.returncode == 0, done.stderr
    x, y = ishigami_rows(60)
    write_csv(tmp_path / "runs.csv", ["x1", "x2", "x3", "y"], [x, y])
    path = given_study(tmp_path, "{type: delta, from: runs.csv}", name="from.yaml")
    done = run_cli("validate", path)
    assert done.returncode == 2 and "analysis.from: runs.csv holds 60 runs; delta needs at " \
        "least 100 runs" in done.stderr, done.stderr


def test_the_example_study_runs_from_its_csv(tmp_path):
    result = studyrun.run(STUDIES / "ishigami-given-delta.yaml", tmp_path / "out", report=False)
    s1 = result.results["y"]["S1"]
    assert result.analysis["runs"]["given"] == 2000 and result.analysis["runs"]["executed"] == 0
    assert [s1["x1"], s1["x2"], s1["x3"]] == pytest.approx([0.3139, 0.4424, 0.0], abs=0.05)


PLAIN = {  # files the column reader reads, each equal to what the located reader reads
    "plain": "x1,x2,x3,y\n0.5,0.1,-0.2,1.0\n1.5,2.5,3.0,7.25\n",
    "crlf, a BOM, no last line break": "\ufeffx1,x2,x3,y\r\n0.5,0.1,-0.2,1.0\r\n1,2,3,4",
    "missing outputs and spaces": "x1, x2 ,x3,y,z\n 0.5 ,0.1,0.2,NA,\n0.5,1_0e-1,0.2,nan,None\n"
                                  "0.5,0.1,0.2,-0.0,n/a\n",
    "failed rows": "x1,x2,x3,run.status,run.error,y\n0.5,0.1,0.2,ok,,1.5\n0.5,0.1,0.2,failed,"
                   "'=boom,oops\n0.5,0.1,0.2, ok ,,2\n0.5,0.1,0.2,bad,,\n",
    "a fixed column": "x1,x2,x3,k,y\n0.5,0.1,0.2,2,1\n0.5,0.1,0.2,2.0,3\n",
}
DECLINED = {  # files the column reader leaves to the located reader, which reads them alike
    "quoted": 'x1,x2,x3,y\n0.5,0.1,0.2,"1.0"\n',
    "a comment": "# made by hand\nx1,x2,x3,y\n0.5,0.1,0.2,1.0\n",
    "a blank line": "x1,x2,x3,y\n0.5,0.1,0.2,1.0\n\n0.5,0.1,0.2,2.0\n",
    "a short row": "x1,x2,x3,y\n0.5,0.1,0.2\n",
    "a long row": "x1,x2,x3,y\n0.5,0.1,0.2,1.0\n0.5,0.1,0.2,1.0,2.0\n",
    "every row long": "x1,x2,x3,y\n0.5,0.1,0.2,1.0,2.0\n0.5,0.1,0.2,1.0,2.0\n",
    "every row short": "x1,x2,x3,y\n0.5,0.1,0.2\n0.5,0.1,0.2\n",
    "an empty last row": "x1,x2,x3,y\n0.5,0.1,0.2,1.0\n\n",
    "a lone CR": "x1,x2,x3,y\r0.5,0.1,0.2,1.0\r",
    "non-ASCII digits": "x1,x2,x3,y\n0.5,0.1,0.2,\u0661\n",
}
MISTAKES = {  # plain files with a mistake: the located reader reports it at its cell
    "x2,3:5": "x1,x2,x3,y\n0.5,0.1,0.2,1\n0.5,abc,0.2,1\n",
    "x1,2:1": "x1,x2,x3,y\n9.0,0.1,0.2,1\n",
    "x3,2:9": "x1,x2,x3,y\n0.5,0.1,NA,1\n",
    "'-nan',2:13": "x1,x2,x3,y\n0.5,0.1,0.2,-nan\n",
    "'inf',2:13": "x1,x2,x3,y\n0.5,0.1,0.2,inf\n",
    "k,3:13": "x1,x2,x3,k,y\n0.5,0.1,0.2,2,1\n0.5,0.1,0.2,2.5,1\n",
}


def given_context(folder: Path, fixed: bool):
    from studyrun.study.loading import load_study

    extra = "  k: 2\n" if fixed else ""
    return load_study(given_study(folder, "{type: montecarlo, from: runs.csv}",
                                  PARAMETERS + "\n" + extra)).context


def rows_equal(a, b) -> bool:
    return (np.array_equal(a.inputs, b.inputs) and a.errors == b.errors and a.names == b.names
            and list(a.outputs) == list(b.outputs) and a.sha256 == b.sha256
            and all(np.array_equal(a.outputs[k], b.outputs[k], equal_nan=True) for k in a.outputs))


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_csv_read_by_columns_equals_it_read_cell_by_cell(tmp_path, name):
    from studyrun.analyses.given import located_rows, plain_rows
    from studyrun.core.csv_table import read_plain

    path = tmp_path / "runs.csv"
    path.write_bytes(PLAIN[name].encode())
    context = given_context(tmp_path, "k," in PLAIN[name])
    assert read_plain(path) is not None
    fast = plain_rows(path, context, None)
    assert fast is not None and rows_equal(fast, located_rows(path, context, None))


@pytest.mark.parametrize("name", DECLINED)
def test_a_csv_that_is_not_plain_is_read_by_the_located_reader(tmp_path, name):
    import pyarrow  # noqa: F401  (Grid.numbers reads even a small file by pyarrow, as a large one)

    from studyrun.analyses.given import located_rows, read_rows
    from studyrun.core.csv_table import read_plain

    path = tmp_path / "runs.csv"
    path.write_text("x1,x2,x3,y\n0.5,0.1,0.2,1\n")  # valid while the study is loaded
    context = given_context(tmp_path, False)
    path.write_bytes(DECLINED[name].encode())
    grid = read_plain(path)  # a Grid for rows of other widths, whose numbers() it declines
    assert grid is None or (grid.numbers() is None and grid.ends is None)
    try:
        expected = located_rows(path, context, None)
    except studyrun.StudyError as error:
        with pytest.raises(studyrun.StudyError) as raised:
            read_rows(path, context, None)
        assert str(raised.value) == str(error)
    else:
        assert rows_equal(read_rows(path, context, None), expected)


@pytest.mark.parametrize("where", MISTAKES)
def test_a_mistake_in_a_plain_csv_is_located_at_its_cell(tmp_path, where):
    from studyrun.analyses.given import plain_rows, read_rows
    from studyrun.core.csv_table import read_plain

    path = tmp_path / "runs.csv"
    path.write_text("x1,x2,x3,k,y\n0.5,0.1,0.2,2,1\n")  # valid while the study is loaded
    context = given_context(tmp_path, "k," in MISTAKES[where])
    path.write_bytes(MISTAKES[where].encode())
    assert read_plain(path) is not None and plain_rows(path, context, None) is None
    found, at = where.rsplit(",", 1)
    with pytest.raises(studyrun.StudyError) as raised:
        read_rows(path, context, None)
    assert f"{path}:{at}: " in str(raised.value) and found in str(raised.value)


MISTAKES_READ_AT_ONCE = {  # a line of a file read by pyarrow (Grid.numbers), with a mistake
    "x2,9:5": "0.5,abc,0.2,1,2,3",
    "x3,9:9": "0.5,0.1,1e999,1,2,3",
    "x1 = 4,9:1": "4,0.1,0.2,1,2,3",
    "7 cells,9:": "0.5,0.1,0.2,1,2,3,4",
    "x3 is '',9:1": "0.5,0.1",  # a short row: its missing outputs are missing values, x3 not
    "'1e5x',9:13": "0.5,0.1,0.2,1e5x,2,3",
}


@pytest.mark.parametrize("where", MISTAKES_READ_AT_ONCE)
def test_a_mistake_in_a_csv_read_at_once_is_located_at_its_line_and_column(tmp_path, where,
                                                                             monkeypatch):
    """A file of NUMBERS_CELLS cells and more is read at once by pyarrow, which knows no lines:
    a mistake anywhere in it sends it to the located reader, which reports it where it is (the
    threshold lowered here; the large file below takes the same path at its size)."""
    from studyrun.analyses.given import read_rows
    from studyrun.core import csv_table

    path = tmp_path / "runs.csv"
    path.write_text("x1,x2,x3,y,z,w\n0.5,0.1,0.2,1,2,3\n")  # valid while the study is loaded
    context = given_context(tmp_path, False)
    monkeypatch.setattr(csv_table, "NUMBERS_CELLS", 0)
    lines = ["x1,x2,x3,y,z,w"] + ["0.5,0.1,0.2,1.5,2.5,-3"] * 10
    found, at = where.rsplit(",", 1)
    lines[8] = MISTAKES_READ_AT_ONCE[where]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(studyrun.StudyError) as raised:
        read_rows(path, context, None)
    assert f"{path}:{at}" in str(raised.value) and found in str(raised.value), raised.value


def test_a_bad_cell_in_a_large_csv_is_located_at_its_line_and_column(tmp_path):
    """The same at the size that is read at once without lowering the threshold."""
    from studyrun.analyses.given import read_rows
    from studyrun.core.csv_table import NUMBERS_CELLS

    path = tmp_path / "runs.csv"
    width = 24
    header = ",".join(["x1", "x2", "x3"] + [f"y{j}" for j in range(width - 3)])
    path.write_text(f"{header}\n" + ",".join(["0.5"] * width) + "\n")
    context = given_context(tmp_path, False)
    rows = NUMBERS_CELLS // width + 1
    line = ",".join(["0.5", "0.25", "-0.125"] + ["1.5"] * (width - 3))
    bad = line[:-3] + "1.5.5"
    path.write_text("\n".join([header] + [line] * (rows - 2) + [bad, line]) + "\n")
    with pytest.raises(studyrun.StudyError) as raised:
        read_rows(path, context, None)
    assert f"{path}:{rows}:{len(bad) - 4}: '1.5.5' in column 'y20'" in str(raised.value), raised.value
