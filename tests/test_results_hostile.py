"""A results folder from elsewhere is data (issue 28, points 3, 4, 5 and 7): a crafted
analysis.json, stored surrogate or runs.csv is refused in one line with exit status 2, never a
traceback, a minute of computing or a NaN; diff does not let a NaN pass a pipeline's guard; CSV is
read by a CSV parser; runs.csv does not hand spreadsheets a formula. All through the real command
line, on small real results folders made once for the module."""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, write_study
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_common import FAST, LOCATED, examples

import studyrun

MODEL = '''
import numpy as np

def bowl(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return {"y": 3 + a - 2 * b + a * b + a ** 2, "z": a + b}
'''
STUDY = """
name: {name}
seed: 3
model: {{type: python, function: "bowl:bowl", vectorized: true}}
parameters:
  a: {{bounds: [-1, 1]}}
  b: {{bounds: [0, 2]}}
quantities: {{y: y}}
analysis: {analysis}
execution: {{scheduler: sync}}
"""
ANALYSES = {
    "mc": "{type: montecarlo, samples: 16}",
    "doe": "{type: doe, design: ccd, alpha: face, center: 2, response: quadratic}",
    "pce": "{type: surrogate, method: pce, samples: 30, degree: 2, validation: 3, resamples: 10}",
    "gp": "{type: surrogate, method: gp, samples: 10, validation: 3, resamples: 10}",
    "lhs": "{type: doe, design: lhs, samples: 6, response: linear}",
}
COMMANDS = {"report": ["report", "{dir}"], "status": ["status", "{dir}"],
            "diff": ["diff", "{dir}", "{mc}"], "predict": ["predict", "{dir}", "--at", "a=0,b=1"]}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """One small real results folder per analysis, made once: FOLDER/NAME."""
    folder = tmp_path_factory.mktemp("made")
    (folder / "bowl.py").write_text(MODEL)
    for name, analysis in ANALYSES.items():
        studyrun.run(write_study(folder, STUDY.format(name=name, analysis=analysis),
                                 f"{name}.yaml"), folder / name, report=False)
    return folder


def copy(made: Path, name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(made / name, target)
    return target


def one_line(done, status: int = 2) -> str:
    """The contract for bad input: one line on stderr, the exit status, no traceback."""
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == status, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    return lines[0]


def command(name: str, folder: Path, made: Path) -> list[str]:
    return [part.format(dir=folder, mc=made / "mc") for part in COMMANDS[name]]


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def with_results(change):
    def payload(analysis: dict) -> str:
        change(analysis)
        return json.dumps(analysis)
    return payload


ANALYSIS_PAYLOADS = {
    "deep nesting": lambda a: deep(100_000),
    "deep nesting inside results": with_results(lambda a: a["results"].update(y=json.loads(deep(80)))),
    "a 5,000-digit integer": lambda a: json.dumps(a)[:-1] + ', "n": ' + "9" * 5000 + "}",
    "a 400-digit integer": with_results(lambda a: a["runs"].update(planned=10 ** 400)),
    "a list at the top": lambda a: "[]",
    "null at the top": lambda a: "null",
    "results a list": with_results(lambda a: a.update(results=[1, 2])),
    "runs a string": with_results(lambda a: a.update(runs="many")),
    "runs counts as text": with_results(lambda a: a["runs"].update(succeeded="7")),
    "provenance a list": with_results(lambda a: a.update(provenance=["x"])),
    "study missing": with_results(lambda a: a.pop("study")),
    # checked against the analysis type's own results model (doe's DoeResults)
    "a result of another type": with_results(lambda a: a["results"]["y"].update(r2="0.9")),
    "a count that is true": with_results(lambda a: a["results"]["y"].update(n_runs=True)),
    "an analysis type studyrun does not know": with_results(lambda a: a.update(analysis="doe2")),
    "not JSON": lambda a: '{"study": ',
    "not UTF-8": lambda a: b'{"study": "\xff\xfe"}',
}


@pytest.mark.parametrize("payload", ANALYSIS_PAYLOADS)
@pytest.mark.parametrize("name", COMMANDS)
def test_a_crafted_analysis_json_is_one_line_and_exit_2(made, tmp_path, name, payload):
    folder = copy(made, "doe", tmp_path)
    analysis = json.loads((folder / "analysis.json").read_text())
    text = ANALYSIS_PAYLOADS[payload](analysis)
    (folder / "analysis.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    line = one_line(run_cli(*command(name, folder, made)))
    assert line.startswith(f"{folder}: not a studyrun results folder: analysis.json"), line
    assert len(line) < 600, line


@pytest.mark.parametrize("change, what", [
    (lambda a: a["results"]["y"].update(r2="0.9"), "`results.y.r2` must be a number; found a string"),
    (lambda a: a["results"]["y"]["coefficients"]["x1"].update(t=[1]),
     "`results.y.coefficients.x1.t` must be a number; found a list"),
    (lambda a: a.update(analysis="sobol"), "`results.y.S1` must be an object; found a list"),
    (lambda a: a.update(analysis="doe2"), "`analysis` is not an analysis type studyrun knows; "
                                          "found a string")])
def test_results_are_checked_against_their_analysis_types_model(made, tmp_path, change, what):
    folder = copy(made, "doe", tmp_path)
    analysis = json.loads((folder / "analysis.json").read_text())
    if analysis["analysis"] != "doe" or "r2" not in analysis["results"]["y"]:
        pytest.fail("the doe folder's results are not as this test expects")
    change(analysis)
    if analysis["analysis"] == "sobol":  # a doe's results under another type's name
        analysis["results"]["y"]["S1"] = [1.0]
    (folder / "analysis.json").write_text(json.dumps(analysis))
    line = one_line(run_cli("status", folder))
    assert line == (f"{folder}: not a studyrun results folder: analysis.json: {what}; run its study "
                    "again to write its results anew"), line


def test_an_analysis_json_over_the_size_bound_is_refused_unread(made, tmp_path):
    from studyrun.results import analysis_file

    folder = copy(made, "mc", tmp_path)
    with open(folder / "analysis.json", "r+b") as handle:  # a sparse file: no disk needed
        handle.truncate(analysis_file.MAX_BYTES + 1)
    line = one_line(run_cli("status", folder))
    assert "larger than 256 MiB" in line, line


def surrogate(folder: Path) -> tuple[dict, dict]:
    analysis = json.loads((folder / "analysis.json").read_text())
    return analysis, analysis["results"]["y"]


def save(folder: Path, analysis: dict) -> None:
    (folder / "analysis.json").write_text(json.dumps(analysis))  # NaN as NaN, as Python writes it


def pce_degree(fit):
    fit["terms"][-1]["index"]["a"] = 100_000


def pce_negative(fit):
    fit["terms"][-1]["index"]["b"] = -1


def pce_family(fit):
    fit["basis"]["a"]["family"] = "chebyshev"


def pce_nan(fit):
    fit["terms"][0]["coefficient"] = math.nan


def gp_training(fit):
    rng = np.random.default_rng(1)
    fit["kernel"]["training_inputs"] = rng.uniform(size=(20_000, 2)).tolist()
    fit["kernel"]["training_outputs"] = rng.uniform(size=20_000).tolist()


def gp_nan(fit):
    fit["kernel"]["length_scales"]["a"] = math.nan


def gp_negative(fit):
    fit["kernel"]["noise_variance"] = -1.0


def doe_power(fit):
    fit["terms"][-1] = "x1^100000"
    fit["coefficients"]["x1^100000"] = {"estimate": 1.0}


def doe_factor(fit):
    fit["terms"][-1] = "x9"
    fit["coefficients"]["x9"] = {"estimate": 1.0}


def doe_nan(fit):
    fit["coefficients"][fit["terms"][0]]["estimate"] = math.nan


SURROGATE_PAYLOADS = {
    "pce term of degree 100,000": ("pce", pce_degree, "at most 100"),
    "pce negative index": ("pce", pce_negative, "greater than or equal to 0"),
    "pce unknown family": ("pce", pce_family, "legendre"),
    "pce NaN coefficient": ("pce", pce_nan, "finite"),
    "gp of 20,000 training points": ("gp", gp_training, "at most 5,000 training points"),
    "gp NaN length scale": ("gp", gp_nan, "finite"),
    "gp negative noise": ("gp", gp_negative, "greater than 0"),
    "doe power 100,000": ("doe", doe_power, "powers up to 10"),
    "doe factor it lacks": ("doe", doe_factor, "beyond x2"),
    "doe NaN estimate": ("doe", doe_nan, "finite"),
}


@pytest.mark.parametrize("payload", SURROGATE_PAYLOADS)
def test_predict_refuses_a_crafted_stored_model_before_computing(made, tmp_path, payload):
    name, change, bound = SURROGATE_PAYLOADS[payload]
    folder = copy(made, name, tmp_path)
    done = run_cli("predict", folder, "--at", "a=0.5,b=1")  # as stored: y(0.5, 1) = 2.25
    assert done.returncode == 0 and abs(float(done.stdout.split()[1]) - 2.25) < 0.5, done
    analysis, fit = surrogate(folder)
    change(fit)
    save(folder, analysis)
    start = time.monotonic()
    line = one_line(run_cli("predict", folder, "--at", "a=0,b=1", timeout=60))
    assert time.monotonic() - start < 30
    assert line.startswith(f"{folder}: not a studyrun results folder: analysis.json: results.y"), line
    assert bound in line, line


def test_predict_far_outside_the_ranges_refuses_a_non_finite_value(made):
    done = run_cli("predict", made / "pce", "--at", "a=1e200,b=1")
    assert "no finite number there" in one_line(done)


# -- point 4: diff does not let a NaN pass --------------------------------------------------------

@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_diff_fail_above_treats_a_result_that_became_nan_as_moved(made, tmp_path, value):
    """NaN or infinite where a number was (and, beside it, a number that vanished): beyond any
    tolerance, and --json strict JSON."""
    folder = copy(made, "mc", tmp_path)
    analysis = json.loads((folder / "analysis.json").read_text())
    analysis["results"]["y"]["mean"] = value
    del analysis["results"]["y"]["max"]
    save(folder, analysis)
    done = run_cli("diff", made / "mc", folder, "--fail-above", "1e300")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "BEYOND" in done.stdout
    done = run_cli("diff", made / "mc", folder, "--fail-above", "1e300", "--json")
    assert done.returncode == 1, done.stderr

    def refuse(constant):
        raise AssertionError(f"--json printed {constant}, which is not JSON")

    found = json.loads(done.stdout, parse_constant=refuse)
    moved = {m["key"]: m for m in found["results"]["changed"]}
    assert moved["y.mean"]["beyond"] is True and moved["y.mean"]["b"] is None
    assert moved["y.mean"]["non_finite"] == {"b": "NaN" if value != value else "Infinity",
                                             "change": "NaN" if value != value else "Infinity"}
    assert moved["y.max"]["beyond"] is True and "non_finite" not in moved["y.max"]


def test_a_nan_in_both_folders_is_no_change():
    from studyrun.commands.diff import Moved, result_changes

    moved, compared = result_changes({"y": {"m": math.nan, "s": 1.0}}, {"y": {"m": math.nan, "s": 1.0}})
    assert moved == [] and compared == 2
    assert Moved("y", 1.0, math.nan).beyond(None) and Moved("y", -math.inf, math.inf).beyond(1e308)
    assert not Moved("y", 1.0, 1.5).beyond(1.0)


# -- point 3: a damaged earlier runs.csv under doe from: + augment: --------------------------------

RUNS_CSV_DAMAGE = {
    "a run id that is no integer": (lambda lines: lines[:2] + [lines[2].replace(",", ",x", 1)]
                                    + lines[3:], r":3:\d+: `run.id` is"),
    "NUL bytes": (lambda lines: lines[:2] + ["\x00" + lines[2]] + lines[3:], r":3:1: `run.index` is"),
    "a 128 KB field": (lambda lines: lines[:2] + ['"' + "9" * 131_073 + '"' + lines[2][1:]]
                       + lines[3:], r":3:1: cannot read this line as CSV: field larger"),
    "invalid UTF-8": (None, r":3:\d+: not UTF-8 text"),
}


@pytest.mark.parametrize("damage", RUNS_CSV_DAMAGE)
def test_a_damaged_earlier_runs_csv_under_augment_is_a_located_error(made, tmp_path, damage):
    change, where = RUNS_CSV_DAMAGE[damage]
    earlier = copy(made, "lhs", tmp_path)
    path = earlier / "runs.csv"
    if change is None:
        raw = path.read_bytes().split(b"\r\n")
        raw[2] = raw[2][:5] + b"\xff\xfe" + raw[2][5:]
        path.write_bytes(b"\r\n".join(raw))
    else:
        lines = path.read_bytes().decode().split("\r\n")
        path.write_bytes("\r\n".join(change(lines)).encode())
    (tmp_path / "bowl.py").write_text(MODEL)
    study = write_study(tmp_path, STUDY.format(name="grown", analysis="{type: doe, from: lhs, "
                                               "augment: lhs, samples: 4, response: linear}"),
                        "grown.yaml")
    for verb in ("validate", "plan"):
        line = one_line(run_cli(verb, study, cwd=tmp_path))
        assert re.match(rf"^{re.escape(str(path))}{where}", line), line


RUNS_HEADER_DAMAGE = {  # a runs.csv header, damaged -> what open_results(...).runs says, where
    "a quoted name named twice": (lambda header: '"run.index"' + header[9:] + ",run.index",
                                  lambda header: rf":1:{len(header) + 4}: the column 'run.index' is named twice"),
    "a 128 KB name": (lambda header: '"' + "y" * 131_073 + '",' + header,
                      lambda header: r":1:1: cannot read this line as CSV: field larger"),
    "invalid UTF-8": (lambda header: header.replace("id", "i\udcffd"),
                      lambda header: rf":1:{header.index('id') + 2}: not UTF-8 text: the byte 0xff"),
    "no header": (lambda header: "", lambda header: r":1:1: the file is empty"),
}


@pytest.mark.parametrize("damage", RUNS_HEADER_DAMAGE)
def test_a_damaged_runs_csv_header_read_back_is_a_located_error(made, tmp_path, damage):
    """Results.runs checked runs.csv's header with csv.reader, by column positions that ignore
    quotes, and let a field past csv's limit, bytes that are no UTF-8 and an empty file through
    as a traceback; it now reads it with the one CSV reader, located as everywhere else."""
    change, where = RUNS_HEADER_DAMAGE[damage]
    folder = copy(made, "mc", tmp_path)
    path = folder / "runs.csv"
    lines = path.read_bytes().decode().split("\r\n")
    header = lines[0]
    assert header.startswith("run.index,run.id,")
    damaged = change(header)
    path.write_bytes("\r\n".join([damaged, *lines[1:]] if damaged else []).encode(
        "utf-8", "surrogateescape"))
    with pytest.raises(studyrun.StudyError) as raised:
        _ = studyrun.open_results(folder).runs
    assert re.match(rf"^{re.escape(str(path))}{where(header)}", str(raised.value)), raised.value


# -- point 5: CSV is read by a CSV parser ----------------------------------------------------------

GIVEN = """
name: given
seed: 7
parameters:
  a: {{bounds: [-1, 1]}}
  b: {{bounds: [0, 2]}}
quantities: {{y: y}}
analysis: {{type: montecarlo, from: {source}}}
"""


def test_a_quoted_error_cell_holding_line_breaks_is_one_cell(tmp_path):
    """Each break splitlines() knows (and CSV does not: \\v \\f \\x1c-\\x1e \\x85 \\u2028) inside a
    quoted error cell: still one row of four, two of them failed, and the errors as written."""
    error = "Traceback\nline\vtwo\fthree\x1cfour\x1dfive\x1esix\x85seven\u2028eight"
    rows = [("0.1", "0.5", "ok", "", "1.0"), ("0.2", "0.6", "failed", error, ""),
            ("0.3", "0.7", "failed", "=1+2\r\nsecond", ""), ("0.4", "0.8", "ok", "", "2.0")]
    text = "a,b,run.status,run.error,y\r\n" + "".join(
        ",".join(f'"{c}"' if c == r[3] and c else c for c in r) + "\r\n" for r in rows)
    (tmp_path / "runs.csv").write_bytes(text.encode())
    write_study(tmp_path, GIVEN.format(source="runs.csv"))
    done = run_cli("run", "--no-report", tmp_path / "study.yaml", "--out", tmp_path / "out", "--quiet",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    analysis = json.loads((tmp_path / "out" / "analysis.json").read_text())
    assert analysis["runs"]["given"] == 4 and analysis["runs"]["failed"] == 2
    runs = studyrun.open_results(tmp_path / "out").runs
    assert sorted(e for e in runs["run.error"] if isinstance(e, str)) == sorted([error, "=1+2\r\nsecond"])


@pytest.mark.parametrize("where", ["from", "data", "design", "command"])
def test_a_column_named_twice_is_a_located_error(tmp_path, where):
    """`a,b,y,y`: which y a reader takes is a guess (the last one, silently, before)."""
    (tmp_path / "bowl.py").write_text(MODEL)
    (tmp_path / "runs.csv").write_text("a,b,y,y\n0.1,0.5,1,100\n0.2,0.6,2,200\n")
    if where == "from":
        study = write_study(tmp_path, GIVEN.format(source="runs.csv"))
        done = run_cli("validate", study, cwd=tmp_path)
    elif where == "design":
        study = write_study(tmp_path, STUDY.format(name="d", analysis="{type: doe, design: csv, "
                                                   "file: runs.csv, response: linear}"))
        done = run_cli("plan", study, cwd=tmp_path)
    elif where == "data":
        (tmp_path / "runs.csv").write_text("time,x,x\n0,1,2\n1,2,3\n")
        study = write_study(tmp_path, """
            name: c
            model: {type: ode, time: {start: 0, stop: 1, step: 0.5}, states: {x: 1},
                    rates: {x: -k * x}, constants: {k: 1}}
            parameters:
              k: {bounds: [0.5, 1.5], nominal: 1}
            analysis: {type: calibrate, data: {file: runs.csv, format: wide}}
            execution: {scheduler: sync}
            """)
        done = run_cli("validate", study, cwd=tmp_path)
    else:
        program = tmp_path / "model.py"
        program.write_text("open('results.csv', 'w').write('time,y,y\\n0,1,2\\n1,2,3\\n')\n")
        study = write_study(tmp_path, f"""
            name: cmd
            model: {{type: command, run: [python3, "{program}"], results_file: results.csv}}
            parameters:
              k: {{bounds: [0.5, 1.5]}}
            quantities: {{y: final(y)}}
            analysis: {{type: montecarlo, samples: 2}}
            execution: {{scheduler: sync, on_failure: continue}}
            """)
        run_cli("run", "--no-report", study, "--out", tmp_path / "out", "--quiet", cwd=tmp_path)
        done = run_cli("runs", tmp_path / "out", "--failed")
        assert "results.csv:1:" in done.stdout and "named twice" in done.stdout, done.stdout
        return
    line = one_line(done)
    assert re.search(r"runs\.csv:1:\d+: the column '[xy]' is named twice", line), line


# -- point 7: runs.csv hands spreadsheets no formula -----------------------------------------------

def test_runs_csv_quotes_text_a_spreadsheet_would_run_and_readers_undo_it(tmp_path):
    import csv

    errors = ["=HYPERLINK(\"http://x\")", "+1", "-1", "@SUM(A1)", "'=kept", "plain"]
    rows = [f"{0.1 * (i + 1):.1f},0.5,failed,\"{e.replace(chr(34), chr(34) * 2)}\","
            for i, e in enumerate(errors)] + ["-0.5,1.5,ok,,-3.25"]
    (tmp_path / "runs.csv").write_text("a,b,run.status,run.error,y\n" + "\n".join(rows) + "\n")
    write_study(tmp_path, GIVEN.format(source="runs.csv"))
    done = run_cli("run", "--no-report", tmp_path / "study.yaml", "--out", tmp_path / "out", "--quiet",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "out" / "runs.csv", newline="") as handle:
        written = list(csv.DictReader(handle))
    cells = {row["run.error"] for row in written if row["run.error"]}
    assert cells == {"'" + e for e in errors[:-1]} | {"plain"}, cells
    assert all(not c.startswith(("=", "+", "-", "@", "\t")) for c in cells)
    ok = [row for row in written if row["run.status"] == "ok"]
    assert ok[0]["a"] == "-0.5" and ok[0]["y"] == "-3.25"  # numbers stay numbers
    runs = studyrun.open_results(tmp_path / "out").runs
    assert sorted(e for e in runs["run.error"] if isinstance(e, str)) == sorted(errors)
    again = write_study(tmp_path, GIVEN.format(source="out"), "again.yaml")
    done = run_cli("run", "--no-report", again, "--out", tmp_path / "again", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(e for e in studyrun.open_results(tmp_path / "again").runs["run.error"]
                  if isinstance(e, str)) == sorted(errors)


def test_the_quote_is_undone_exactly():
    from studyrun.core.csv_table import escape_text, unescape_text

    for text in ["=1", "+", "-2", "@x", "\tx", "\rx", "'=x", "''-x", "'a", "a=b", "", "'"]:
        written = escape_text(text)
        assert unescape_text(written) == text
        assert not written.startswith(("=", "+", "-", "@", "\t", "\r"))


# -- the property: any analysis.json, any runs.csv -------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                  max_size=4),
    max_leaves=20)
KEYS = ["study", "analysis", "runs", "results", "design", "execution", "warnings", "provenance",
        "study_yaml_sha256"]


def paths(value, prefix=()):
    """Every key path into a JSON value."""
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, item in items:
        yield from paths(item, (*prefix, key))


@st.composite
def analysis_texts(draw, real: dict) -> bytes:
    """Random JSON; the real analysis.json with a random part replaced, removed or made huge;
    or an adversarial document."""
    kind = draw(st.sampled_from(["random", "replaced", "removed", "adversarial"]))
    if kind == "random":
        return json.dumps(draw(JSON)).encode()
    if kind == "adversarial":
        return draw(st.sampled_from([deep(5000).encode(), b"1" * 5000, b"\xff", b"",
                                     json.dumps({**real, "results": {"y": 1e400}}).encode(),
                                     b'{"results": NaN}']))
    document = json.loads(json.dumps(real))
    where = draw(st.sampled_from(list(paths(document))[1:]))
    parent = document
    for key in where[:-1]:
        parent = parent[key]
    if kind == "removed" and isinstance(parent, dict):
        del parent[where[-1]]
    else:
        parent[where[-1]] = draw(JSON | st.sampled_from([10 ** 300, -(10 ** 300), math.nan,
                                                          math.inf, "x" * 10_000, [[]] * 50]))
    return json.dumps(document).encode()


def in_process(args: list[str]) -> tuple[int, str]:
    """`studyrun ARGS` by its main() in this process (a subprocess per example is too slow
    here): the exit status and stderr; an exception out of main() fails the test."""
    import contextlib
    import io

    from studyrun.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main([str(a) for a in args])
    return status, err.getvalue()


def answers(args: list[str]) -> None:
    status, err = in_process(args)
    assert "Traceback" not in err, err
    assert status == 0 or (status == 2 and len(err.strip().splitlines()) == 1), (args, status, err)


@settings(FAST, max_examples=examples(10))
@given(data=st.data())
def test_any_analysis_json_is_answered_or_refused_in_one_line(made, tmp_path_factory, data):
    real = json.loads((made / "doe" / "analysis.json").read_text())
    text = data.draw(analysis_texts(real))
    folder = tmp_path_factory.mktemp("fuzz") / "doe"
    shutil.copytree(made / "doe", folder)
    (folder / "analysis.json").write_bytes(text)
    for name in ("status", "diff", "predict", "report"):
        answers(command(name, folder, made))


@settings(FAST, max_examples=examples(15))
@given(raw=st.binary(max_size=300), keep=st.integers(0, 3), where=st.sampled_from(["given", "grown"]))
def test_any_runs_csv_of_a_from_folder_is_read_or_a_located_line(made, tmp_path_factory, raw,
                                                                  keep, where):
    """Random bytes after the first `keep` lines of a real runs.csv, read by `from:` (a
    montecarlo of its runs) or by a grown doe design (augment: lhs)."""
    top = tmp_path_factory.mktemp("fuzz")
    folder = top / "lhs"
    shutil.copytree(made / "lhs", folder)
    lines = (folder / "runs.csv").read_bytes().split(b"\r\n")
    (folder / "runs.csv").write_bytes(b"\r\n".join(lines[:keep]) + raw)
    (top / "bowl.py").write_text(MODEL)
    study = write_study(top, GIVEN.format(source="lhs") if where == "given" else STUDY.format(
        name="grown", analysis="{type: doe, from: lhs, augment: lhs, samples: 4, response: linear}"))
    status, err = in_process(["validate", study])
    assert "Traceback" not in err, err
    assert status == 0 or (status == 2 and LOCATED.match(err)), err
