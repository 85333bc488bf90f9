"""A run is reused only when nothing it depends on changed: imported modules, a command's program
and files, `execution.depends_on`; and `studyrun plan` says what would be reused and why not."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import run_cli, write_study

import studyrun

pytestmark = pytest.mark.slow  # the studyrun CLI in subprocesses, a Dask worker

HELPED = """
name: helped
seed: 3
model: {type: python, function: "model:model"}
parameters:
  a: {bounds: [0, 1]}
  b: {bounds: [0, 1]}
quantities: {y: y}
analysis: {type: montecarlo, samples: 40}
execution: {scheduler: SCHEDULER, batch_size: 10}
"""

COMMAND = """
name: command
seed: 5
model:
  type: command
  run: [PYTHON, "{study_dir}/sim.py", "{params_file}", "{results_file}", "--factor={study_dir}/factor.txt"]
  params_file: {template: params.tmpl, file: params.json}
parameters:
  a: {bounds: [0, 1]}
quantities: {y: y}
analysis: {type: montecarlo, samples: 6}
execution: {scheduler: sync}
"""

BROKEN = """
name: broken
model: {type: python, function: "reader:model"}
parameters:
  a: {bounds: [0, 1]}
analysis: {type: montecarlo, samples: 4}
execution:
  depends_on: [data/*.csv, inputs/*.nc]
"""

SIM = """
import json, sys
params = json.load(open(sys.argv[1]))
factor = float(open(sys.argv[3].split("=", 1)[1]).read())
json.dump({"y": OFFSET + factor * params["a"]}, open(sys.argv[2], "w"))
"""


def helped_study(folder, scheduler: str = "sync", helper: str = "SCALE = 0.001\n"):
    (folder / "model.py").write_text("from helpers import SCALE\n\ndef model(a, b):\n"
                                     "    return {'y': (a + b) * SCALE}\n")
    (folder / "helpers.py").write_text(helper)
    (folder / "notes.txt").write_text("nothing a run reads\n")
    (folder / "unused.py").write_text("X = 1\n")
    return write_study(folder, HELPED.replace("SCHEDULER", scheduler))


def run(study, out, *more):
    done = run_cli("run", "--no-report", study, "--out", out, "--quiet", *more)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "analysis.json").read_text())


def plan(study, out, *more):
    done = run_cli("plan", study, "--out", out, *more)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cli(env, *args) -> str:
    """`studyrun ARGS` in a subprocess with this environment; its output."""
    done = subprocess.run([sys.executable, "-m", "studyrun", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cli_json(env, *args) -> dict:
    cli(env, *args)
    return json.loads((args[args.index("--out") + 1] / "analysis.json").read_text())


def test_editing_an_imported_helper_reruns_every_run_with_the_new_numbers(tmp_path):
    study = helped_study(tmp_path)
    out = tmp_path / "out"
    first = run(study, out)
    (tmp_path / "helpers.py").write_text("SCALE = 1.0\n")
    shown = plan(study, out)
    assert "0 of 40 runs would be reused, 40 would run: helpers.py changed since the last run" in shown
    again = run(study, out)
    assert again["runs"]["reused"] == 0
    fresh = run(study, tmp_path / "fresh")
    assert again["results"] == fresh["results"]
    assert abs(again["results"]["y"]["mean"] - 1000 * first["results"]["y"]["mean"]) < 1e-9


def test_editing_a_file_no_run_reads_reuses_every_run(tmp_path):
    study = helped_study(tmp_path)
    out = tmp_path / "out"
    first = run(study, out)
    (tmp_path / "notes.txt").write_text("edited\n")
    (tmp_path / "unused.py").write_text("X = 2  # not imported by the model\n")
    assert "40 of 40 runs would be reused, 0 would run" in plan(study, out)
    again = run(study, out)
    assert again["runs"]["reused"] == 40 and again["results"] == first["results"]


def test_a_users_package_outside_the_study_folder_is_covered(tmp_path):
    library = tmp_path / "lib" / "mylib"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text("")
    (library / "scales.py").write_text("SCALE = 2.0\n")
    folder = tmp_path / "study"
    folder.mkdir()
    study = helped_study(folder, helper="from mylib.scales import SCALE\n")
    out = folder / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "lib"),
                                                        os.environ.get("PYTHONPATH", "")])}
    first = cli_json(env, "run", study, "--out", out, "--quiet", "--no-report")
    (library / "scales.py").write_text("SCALE = 20.0\n")
    shown = cli(env, "plan", study, "--out", out)
    assert "mylib/scales.py" in shown and "mylib/scales.py changed since the last run" in shown
    again = cli_json(env, "run", study, "--out", out, "--quiet", "--no-report")
    assert again["runs"]["reused"] == 0
    assert abs(again["results"]["y"]["mean"] - 10 * first["results"]["y"]["mean"]) < 1e-9


def command_study(folder):
    (folder / "sim.py").write_text(SIM.replace("OFFSET", "0"))
    (folder / "factor.txt").write_text("2")
    (folder / "params.tmpl").write_text('{"a": {a}}')
    (folder / "notes.txt").write_text("nothing a run reads\n")
    return write_study(folder, COMMAND.replace("PYTHON", json.dumps(sys.executable)))


def test_editing_a_command_models_program_or_files_reruns_it(tmp_path):
    study = command_study(tmp_path)
    out = tmp_path / "out"
    first = run(study, out)
    (tmp_path / "notes.txt").write_text("edited\n")
    assert run(study, out)["runs"]["reused"] == 6
    edits = [("sim.py", SIM.replace("OFFSET", "100")), ("factor.txt", "3"),
             ("params.tmpl", '{"a": {a}, "unused": 1}')]
    for name, text in edits:
        (tmp_path / name).write_text(text)
        assert f"0 of 6 runs would be reused, 6 would run: {name} changed" in plan(study, out)
        assert run(study, out)["runs"]["reused"] == 0, name
    last = run(study, out)
    assert last["runs"]["reused"] == 6
    mean = first["results"]["y"]["mean"]
    assert abs(last["results"]["y"]["mean"] - (100 + 1.5 * mean)) < 1e-9
    assert last["results"] == run(study, tmp_path / "fresh")["results"]


def test_a_depends_on_file_edit_reruns_and_a_glob_that_matches_nothing_is_located(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "scale.csv").write_text("3\n")
    (tmp_path / "reader.py").write_text(
        "from pathlib import Path\nHERE = Path(__file__).parent\n\ndef model(a, b):\n"
        "    return {'y': (a + b) * float((HERE / 'data' / 'scale.csv').read_text())}\n")
    text = HELPED.replace("model:model", "reader:model").replace("SCHEDULER", "sync")
    study = write_study(tmp_path, text.replace("batch_size: 10", "batch_size: 10, depends_on: "
                                               "[data/*.csv]"))
    out = tmp_path / "out"
    first = run(study, out)
    (tmp_path / "data" / "scale.csv").write_text("30\n")
    assert "40 would run: data/scale.csv changed since the last run" in plan(study, out)
    again = run(study, out)
    assert again["runs"]["reused"] == 0
    assert abs(again["results"]["y"]["mean"] - 10 * first["results"]["y"]["mean"]) < 1e-9

    broken = write_study(tmp_path, BROKEN, name="broken.yaml")
    done = run_cli("validate", broken)
    assert done.returncode == 2
    assert "broken.yaml:7:28: execution.depends_on[1]: no file matches 'inputs/*.nc'" in done.stderr
    assert "depends_on[0]" not in done.stderr


def test_plan_counts_runs_that_failed_or_were_never_recorded(tmp_path):
    (tmp_path / "model.py").write_text("def model(a, b):\n    if a > 0.5:\n"
                                       "        raise ValueError('no')\n    return {'y': a + b}\n")
    text = HELPED.replace("SCHEDULER", "sync").replace("batch_size: 10", "batch_size: 10, "
                                                       "on_failure: continue")
    study = write_study(tmp_path, text)
    out = tmp_path / "out"
    assert "no runs recorded yet; every run would run" in plan(study, out)
    done = run(study, out)
    failed = done["runs"]["failed"]
    assert 0 < failed < 40
    assert f"{40 - failed} of 40 runs would be reused, {failed} would run ({failed} failed before)" \
        in plan(study, out)
    bigger = write_study(tmp_path, text.replace("samples: 40", "samples: 80"))
    shown = plan(bigger, out)
    assert f"would run ({failed} failed before, " in shown and "not recorded yet)" in shown
    (tmp_path / "model.py").write_text("def model(a, b):\n    return {'y': a + b}\n")
    assert "would run: model.py changed since the last run" in plan(study, out)


def design_ids(study, out, seed: str) -> list[list[str]]:
    path = out.parent / f"design-{seed}.csv"
    cli({**os.environ, "PYTHONHASHSEED": seed}, "plan", study, "--csv", path)
    return list(csv.reader(path.open()))


def test_identities_survive_a_moved_folder_and_ignore_the_hash_seed(tmp_path):
    for kind, make in (("python", helped_study), ("command", command_study)):
        folder = tmp_path / kind / "original"
        folder.mkdir(parents=True)
        study = make(folder)
        run(study, folder / "out")
        moved = tmp_path / kind / "elsewhere" / "moved"
        shutil.copytree(folder, moved)
        shutil.rmtree(folder)
        copy = moved / study.name
        assert design_ids(copy, moved / "out", "1") == design_ids(copy, moved / "out", "2")
        done = run(copy, moved / "out")
        assert done["runs"]["reused"] == done["runs"]["planned"], kind


def test_a_long_lived_dask_worker_runs_the_edited_helper(tmp_path, dask_scheduler):
    study = helped_study(tmp_path, scheduler=dask_scheduler)
    out = tmp_path / "out"
    first = run(study, out)
    (tmp_path / "helpers.py").write_text("SCALE = 1.0\n")
    again = run(study, out)
    assert again["runs"]["reused"] == 0
    assert abs(again["results"]["y"]["mean"] - 1000 * first["results"]["y"]["mean"]) < 1e-9


def edit_in_place(path, old: str, new: str) -> None:
    """Replace text in a file by text of the same length, keeping its modification time to the
    nanosecond: what an edit within the same second looks like to Python's bytecode check."""
    assert len(old) == len(new)
    before = os.stat(path)
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size


# (the LocalCluster variant is thorough: its new worker processes import the edited files from
# disk, as the new driver process of `sync` does)
@pytest.mark.parametrize("scheduler, batch", [
    ("sync", "10"), pytest.param("local", "10", marks=pytest.mark.thorough), ("local", "auto"),
    ("tcp", "10")])
def test_a_module_edited_within_the_second_to_the_same_size_runs_its_new_code(
        tmp_path, request, scheduler, batch):
    """The model and its helper edited in place (same size, same modification time) after their
    timestamped bytecode was written: the new runs compute the new code's numbers, in the
    driver, on a LocalCluster, in the pilot's process (auto) and on a long-lived tcp worker."""
    import py_compile

    import pandas

    where = request.getfixturevalue("dask_scheduler") if scheduler == "tcp" else scheduler
    study = write_study(tmp_path, helped_study(tmp_path, where).read_text()
                        .replace("batch_size: 10", f"batch_size: {batch}"))
    out = tmp_path / "out"
    run(study, out)
    for name in ("model.py", "helpers.py"):  # as an import writes it where bytecode may be written
        py_compile.compile(str(tmp_path / name), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    edit_in_place(tmp_path / "model.py", "(a + b)", "(a * b)")
    edit_in_place(tmp_path / "helpers.py", "0.001", "0.002")
    again = run(study, out)
    assert again["runs"]["reused"] == 0 and again["runs"]["failed"] == 0
    runs = pandas.read_csv(out / "runs.csv")  # not (a + b) 0.001, the old code's
    assert np.allclose(runs["y"], runs["a"] * runs["b"] * 0.002, rtol=1e-12, atol=0)


def test_the_files_a_module_imports_are_found_from_its_source_not_its_stale_bytecode(tmp_path):
    import py_compile

    from studyrun.models.imports import imported_files

    helped_study(tmp_path)
    (tmp_path / "helperz.py").write_text("SCALE = 0.002\n")
    assert "helpers.py" in [f.name for f in imported_files("model", tmp_path)]
    py_compile.compile(str(tmp_path / "model.py"), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    edit_in_place(tmp_path / "model.py", "from helpers ", "from helperz ")
    found = [f.name for f in imported_files("model", tmp_path)]
    assert "helperz.py" in found and "helpers.py" not in found


def test_the_python_api_in_one_process_runs_the_edited_helper_and_data(tmp_path):
    study = helped_study(tmp_path)
    first = studyrun.run(study, tmp_path / "out", report=False)
    (tmp_path / "helpers.py").write_text("SCALE = 1.0\n")
    again = studyrun.run(study, tmp_path / "out", report=False)
    assert again.analysis["runs"]["reused"] == 0
    assert abs(again.results["y"]["mean"] - 1000 * first.results["y"]["mean"]) < 1e-9
    # a module that reads a depends_on file when it is imported is imported again
    (tmp_path / "scale.txt").write_text("2")
    (tmp_path / "helpers.py").write_text("from pathlib import Path\n"
                                         "SCALE = float((Path(__file__).parent / 'scale.txt').read_text())\n")
    text = HELPED.replace("SCHEDULER", "sync").replace("batch_size: 10", "batch_size: 10, "
                                                       "depends_on: [scale.txt]")
    study = write_study(tmp_path, text)
    before = studyrun.run(study, tmp_path / "out", report=False)
    (tmp_path / "scale.txt").write_text("5")
    after = studyrun.run(study, tmp_path / "out", report=False)
    assert after.analysis["runs"]["reused"] == 0
    assert abs(after.results["y"]["mean"] - 2.5 * before.results["y"]["mean"]) < 1e-9


def test_plan_says_how_the_seed_of_a_random_model_changed():
    from studyrun.blocks.dependencies import describe_changes

    plain = {"model": "m", "quantities": "q", "fixed": {}, "files": {}}
    assert describe_changes(plain, {**plain, "seed": 1}) == [
        "the runs draw random numbers from the seed now"]  # a model upgraded to seeded runs
    assert describe_changes({**plain, "seed": 1}, {**plain, "seed": 2}) == ["the seed changed"]
    assert describe_changes({**plain, "seed": 1}, plain) == ["the runs no longer draw random numbers"]
    assert describe_changes({**plain, "seed": 1}, {**plain, "seed": 1}) == []
