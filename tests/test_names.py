"""Every model's names are usable (issue 29, point 3): names runs.csv once kept for its own
columns (`id`, `duration`, `time`, `run`, `error`, `status`, `worker`) and Python's keywords
(`yield`, `lambda`, `in`, `class`) are parameters, outputs and quantities like any other."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from conftest import run_cli, stored_runs, write_study

import studyrun
from studyrun.core.runtable import CSV_FIXED

MODEL = '''
def plant(**given):
    """Inputs by keyword, as a model whose names Python's own `def` cannot spell takes them."""
    return {"yield": 2 * given["lambda"] + given["duration"], "in": given["id"] * given["time"],
            "class": given["run"] - given["error"] + given["status"] * given["worker"]}
'''
NAMES = ["lambda", "duration", "id", "time", "run", "error", "status", "worker"]
STUDY = """
name: names
seed: 3
model: {type: python, function: "plant:plant"}
parameters:
PARAMETERS
QUANTITIES
analysis: {type: montecarlo, samples: 30}
execution: {scheduler: sync, batch_size: 7}
"""


def names_study(folder, quantities: str) -> object:
    (folder / "plant.py").write_text(MODEL)
    parameters = "\n".join(f"  {name}: {{bounds: [{k}, {k + 1}]}}" for k, name in enumerate(NAMES))
    return write_study(folder, STUDY.replace("PARAMETERS", parameters)
                       .replace("QUANTITIES", quantities))


@pytest.mark.slow
@pytest.mark.parametrize("quantities, columns", [
    ("quantities: {yield: yield, for: 'in + class * 2 - lambda'}", ["yield", "for"]),
    ("", ["class", "in", "yield"]),  # every scalar output, named as the model names it
], ids=["quantities-block", "model-outputs"])
def test_names_runs_csv_once_kept_and_keywords_are_varied_and_read(tmp_path, quantities, columns):
    """Fails before: `id`, `duration`, `time` ... were refused at validate, `yield` and `in`
    could not be parsed, and the outputs named so failed their runs."""
    study = names_study(tmp_path, quantities)
    checked = run_cli("validate", study)
    assert checked.returncode == 0, checked.stderr
    out = tmp_path / "out"
    done = run_cli("run", "--no-report", study, "--out", out, "--quiet", cwd=tmp_path)
    assert done.returncode == 0 and "30 of 30 runs succeeded" in done.stdout, done.stderr
    with open(out / "runs.csv", newline="") as handle:
        header = next(csv.reader(handle))
    assert header == [*CSV_FIXED, *NAMES, *columns]
    runs = studyrun.open_results(out).runs
    assert (runs["run.status"] == "ok").all() and sorted(runs["run.index"]) == list(range(30))
    for name, k in zip(NAMES, range(len(NAMES))):
        assert runs[name].between(k, k + 1).all()
    np.testing.assert_array_equal(runs["yield"], 2 * runs["lambda"] + runs["duration"])
    into, kind = runs["id"] * runs["time"], runs["run"] - runs["error"] + runs["status"] * runs["worker"]
    if quantities:
        np.testing.assert_allclose(runs["for"], into + kind * 2 - runs["lambda"], rtol=1e-14)
    else:
        np.testing.assert_array_equal(runs["in"], into)
        np.testing.assert_array_equal(runs["class"], kind)
    assert set(stored_runs(out)["run.id"]) == set(runs["run.id"])
    listed = run_cli("runs", out, "--limit", "1")
    assert listed.returncode == 0 and "lambda=" in listed.stdout and "duration=" in listed.stdout


GIVEN = """
name: given
seed: 2
parameters:
  time: {bounds: [0, 1]}
  x: {bounds: [0, 1]}
QUANTITIES
analysis: {type: montecarlo, from: runs.csv}
"""


def test_a_csv_of_runs_may_have_columns_named_time_id_or_status(tmp_path):
    """Fails before: the columns `id`, `status` and `error` of any CSV were runs.csv's own (a
    `status` not `ok` failed its row) and `time` could be neither a parameter nor a column."""
    rows = np.random.default_rng(1).uniform(size=(20, 2))
    lines = ["time,x,id,status,error"] + [f"{t!r},{x!r},{t + x!r},{2 * t!r},{3 * x!r}"
                                          for t, x in rows.tolist()]
    (tmp_path / "runs.csv").write_text("\n".join(lines).replace("time,x", "t,x", 1)
                                       .replace(",id,", ",time,", 1) + "\n")
    study = write_study(tmp_path, GIVEN.replace("QUANTITIES", "quantities: {id: time * 1}")
                        .replace("  time:", "  t:"), "column.yaml")
    result = studyrun.run(study, tmp_path / "column", quiet=True, report=False)  # a column `time`, read bare
    assert result.analysis["results"]["id"]["mean"] == pytest.approx(rows.sum(axis=1).mean(),
                                                                     rel=1e-12)
    (tmp_path / "runs.csv").write_text("\n".join(lines) + "\n")
    for quantities in ("", "quantities: {id: id, in: 'status + error'}"):
        study = write_study(tmp_path, GIVEN.replace("QUANTITIES", quantities))
        result = studyrun.run(study, tmp_path / f"out{len(quantities)}", quiet=True, report=False)
        assert result.analysis["runs"]["succeeded"] == 20
        mean = result.analysis["results"]["id"]["mean"]
        assert mean == pytest.approx(rows.sum(axis=1).mean(), rel=1e-12)
        if quantities:
            assert result.analysis["results"]["in"]["mean"] == pytest.approx(
                (2 * rows[:, 0] + 3 * rows[:, 1]).mean(), rel=1e-12)
        else:
            assert set(result.analysis["results"]) == {"id", "status", "error"}


def test_runs_csv_of_format_2_is_read_under_the_new_names(tmp_path):
    """A runs.csv written before its own columns were named `run.` (format 2): open_results
    names them `run.status` ..., and `from:` takes its failed rows as failed. Fails before:
    open_results had no `run.status`."""
    (tmp_path / "plant.py").write_text(MODEL)
    study = names_study(tmp_path, "quantities: {yield: yield}")
    study.write_text(study.read_text().replace("samples: 30", "samples: 12"))
    out = tmp_path / "out"
    first = studyrun.run(study, out, quiet=True, report=False)
    path = out / "runs.csv"
    head, rest = path.read_bytes().split(b"\r\n", 1)
    assert head.decode().split(",")[6:] == [*NAMES, "yield"]
    old = "run,id,status,error,duration,worker,a,b,c,d,e,f,g,h,yield"  # format 2 had no `id`...
    path.write_bytes(old.encode() + b"\r\n" + rest)
    runs = studyrun.open_results(out).runs
    assert list(runs.columns[:6]) == list(CSV_FIXED) and (runs["run.status"] == "ok").all()
    assert runs["yield"].tolist() == first.runs["yield"].tolist()
    lines = [old] + [f"{i},{i},{'failed' if i % 3 else 'ok'},,,,{i / 10},0,0,0,0,0,0,0,{i}"
                     for i in range(10)]
    (tmp_path / "old.csv").write_text("\n".join(lines) + "\n")
    given = write_study(tmp_path, "name: old\nparameters: {a: {bounds: [0, 1]}}\n"
                        "analysis: {type: montecarlo, from: old.csv}\n", "old.yaml")
    result = studyrun.run(given, tmp_path / "old", quiet=True, report=False)
    assert result.analysis["runs"]["succeeded"] == 4 and result.analysis["runs"]["failed"] == 6
    assert result.analysis["results"]["yield"]["mean"] == pytest.approx(4.5)


ODE = """
name: kw-ode
model:
  type: ode
  time: {start: 0, stop: 5, step: 0.5}
  method: RK45
  rtol: 1.0e-10
  atol: 1.0e-12
  states: {yield: 1}
  rates: {yield: -lambda * yield}
  auxiliaries: {in: yield * 2}
  constants: {lambda: 0.5}
parameters:
  lambda: {bounds: [0.1, 1]}
quantities: {class: final(yield), for: max(in)}
analysis: {type: sweep, levels: 3}
execution: {scheduler: sync}
"""
COMMAND = """
name: kw-command
model:
  type: command
  run: [python3, -c, "import sys, json; a, b = map(float, sys.argv[1:]);
        json.dump({'yield': 2 * a + b}, open('results.json', 'w'))", "{lambda}", "{in}"]
parameters:
  lambda: {bounds: [0, 1]}
  in: {bounds: [0, 1]}
quantities: {yield: yield}
analysis: {type: sweep, levels: 2}
execution: {scheduler: sync}
"""


@pytest.mark.slow
def test_keywords_name_the_states_constants_and_fields_of_equation_and_command_models(tmp_path):
    """Fails before: an ode's `yield` and `lambda` were refused as Python keywords."""
    ode = studyrun.run(write_study(tmp_path, ODE, "ode.yaml"), tmp_path / "ode", quiet=True, report=False).runs
    np.testing.assert_allclose(ode["class"], np.exp(-5 * ode["lambda"]), rtol=1e-7)
    assert (ode["for"] == 2.0).all()
    runs = studyrun.run(write_study(tmp_path, COMMAND, "command.yaml"), tmp_path / "command",
                        quiet=True, report=False).runs
    assert (runs["yield"] == 2 * runs["lambda"] + runs["in"]).all() and len(runs) == 4


def test_a_did_you_mean_suggests_a_keyword_name_that_works(tmp_path):
    """The names suggested are names the study can write: here Python keywords, which the
    same study then uses. Fails before: `lambda` and `yield` could not name the ode's variables."""
    from studyrun.core.errors import StudyError
    from studyrun.study.loading import load_study

    typo = ODE.replace("  lambda: {bounds", "  lamda: {bounds").replace("final(yield)", "final(yeild)")
    with pytest.raises(StudyError) as caught:
        load_study(write_study(tmp_path, typo, "typo.yaml"))
    messages = [p.message for p in caught.value.problems]
    assert len(messages) == 2, messages
    assert "the model has no input 'lamda'; did you mean 'lambda'?" in messages[0]
    assert "unknown name 'yeild' in 'final(yeild)'; did you mean 'yield'?" in messages[1]
    load_study(write_study(tmp_path, ODE, "ode.yaml"))  # and the names suggested work
