"""The `command` model: real subprocesses (helpers in tests/models/programs/), no mocks."""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from conftest import alive
from pydantic import ValidationError

from studyrun.core.batch import RunContext
from studyrun.core.sizes import parse_bytes
from studyrun.models.command import Command
from studyrun.models.command.processes import wait_for

PROGRAMS = Path(__file__).parent / "programs"
STUDIES = Path(__file__).parents[2] / "studies"
PY = sys.executable


def command(**keys) -> Command:
    return Command.model_validate({"type": "command", **keys})


def run_batch(model: Command, workdir: Path | None, study_dir: Path = PROGRAMS, ids=None,
              **inputs):
    n = len(next(iter(inputs.values()))) if inputs else 1
    ids = np.arange(1, n + 1) if ids is None else np.asarray(ids)
    evaluator = model.build(study_dir)
    inputs = {k: np.asarray(v, dtype=float) for k, v in inputs.items()}
    return evaluator(inputs, RunContext(run_ids=ids, workdir=workdir))


def sim(*extra, **keys) -> Command:
    return command(run=[PY, "{study_dir}/sim.py", "{params_file}", *extra], **keys)


def expected_y(a, b, time):
    return np.asarray(a)[:, None] * np.exp(-np.asarray(b)[:, None] * time)


# --- a successful batch ------------------------------------------------------------------------

def test_batch_of_three_runs_gives_scalars_and_series(tmp_path):
    a, b = [1.0, 2.0, 3.0], [0.1, 0.2, 0.3]
    out = run_batch(sim(), tmp_path, a=a, b=b)
    assert out.errors == [None, None, None]
    np.testing.assert_allclose(out.time, [0, 1, 2, 3, 4])
    np.testing.assert_allclose(out.series["y"], expected_y(a, b, out.time))
    np.testing.assert_allclose(out.series["z"], 2 * expected_y(a, b, out.time))
    np.testing.assert_allclose(out.scalars["final"], np.array(a) * np.exp(-4 * np.array(b)))
    np.testing.assert_allclose(out.scalars["sum"], np.add(a, b))
    assert set(out.scalars) == {"final", "sum", "a_type"} and set(out.series) == {"y", "z"}
    assert list(tmp_path.iterdir()) == []  # successful workdirs are removed by default


def test_params_json_holds_floats_even_for_integral_values(tmp_path):
    model = sim(keep_workdirs="all")
    out = run_batch(model, tmp_path, ids=[0xAB], a=[2.0], b=[1.0])
    assert out.errors == [None] and out.scalars["a_type"][0] == 1.0
    workdir = tmp_path / "run-00000000000000ab"
    assert json.loads((workdir / "params.json").read_text()) == {"a": 2.0, "b": 1.0}
    assert (workdir / "params.json").read_text() == '{"a": 2.0, "b": 1.0}'
    assert (workdir / "stdout.txt").read_text() == "done params.json\n"
    assert (workdir / "stderr.txt").read_text() == ""


@pytest.mark.parametrize("name", ["params.yaml", "in.yml"])
def test_yaml_params_file(tmp_path, name):
    import yaml

    a, b = [1.5, 2.5], [0.25, 1e-20]
    out = run_batch(sim(params_file=name, keep_workdirs="all"), tmp_path, a=a, b=b)
    assert out.errors == [None, None]
    np.testing.assert_allclose(out.scalars["sum"], np.add(a, b))
    written = yaml.safe_load((tmp_path / f"run-{2:016x}" / name).read_text())
    assert written == {"a": 2.5, "b": 1e-20}


def test_template_params_file(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    (study / "sim.py").write_text((PROGRAMS / "sim.py").read_text())
    (study / "in.tmpl").write_text("! run {run_id}\na = {a}\nb = {b}\nkeep {this} and { b } as text\n")
    model = sim(params_file={"template": "in.tmpl", "file": "deck.txt"}, keep_workdirs="all")
    assert model.check(study) == []
    work = tmp_path / "work"
    out = run_batch(model, work, study_dir=study, ids=[7, 8], a=[1.0, 0.1], b=[2.0, 3.0],
                    this=[0.0, 0.0])
    assert out.errors == [None, None]
    np.testing.assert_allclose(out.scalars["sum"], [3.0, 3.1])
    deck = (work / f"run-{8:016x}" / "deck.txt").read_text()
    assert deck == f"! run {8:016x}\na = 0.1\nb = 3.0\nkeep 0.0 and {{ b }} as text\n"


def test_template_with_unknown_name_fails_every_run_without_running(tmp_path):
    (tmp_path / "in.tmpl").write_text("a = {a}\nc = {c}\n")
    model = command(run=[PY, str(PROGRAMS / "sim.py"), "{params_file}"],
                    params_file={"template": "in.tmpl", "file": "in.txt"})
    out = run_batch(model, tmp_path / "work", study_dir=tmp_path, a=[1.0, 2.0])
    assert all("unknown name {c}" in e for e in out.errors)
    assert not any((tmp_path / "work").glob("*/stdout.txt"))


def test_csv_results(tmp_path):
    a, b = [1.0, 4.0], [0.5, 0.05]
    out = run_batch(sim("{results_file}", results_file="out.csv"), tmp_path, a=a, b=b)
    assert out.errors == [None, None]
    assert out.scalars == {} and set(out.series) == {"y", "z"}
    np.testing.assert_allclose(out.series["y"], expected_y(a, b, out.time))


def test_each_run_keeps_its_own_grid(tmp_path):
    a, b = [1.0, 1.0, 1.0, 2.0], [0.0, 1.0, 1.0, 1.0]
    # runs 1 and 4 share a grid; run 2 has a finer one, run 3 one that starts late
    out = run_batch(sim(), tmp_path, a=a, b=b, n=[5, 9, 5, 5], t0=[0, 0, 1, 0])
    assert out.errors == [None] * 4
    grids = {tuple(np.arange(4)[g.rows]): g for g in out.series_groups()}
    assert set(grids) == {(0, 3), (1,), (2,)}
    np.testing.assert_allclose(grids[(0, 3)].time, [0, 1, 2, 3, 4])
    np.testing.assert_allclose(grids[(1,)].time, np.linspace(0, 4, 9))
    np.testing.assert_allclose(grids[(2,)].time, [1, 1.75, 2.5, 3.25, 4])
    for rows, group in grids.items():
        np.testing.assert_array_equal(group.series["y"],
                                      expected_y(np.take(a, rows), np.take(b, rows), group.time))


def test_runs_sharing_a_grid_are_stacked_on_it(tmp_path):
    out = run_batch(sim(), tmp_path, a=[1.0, 2.0], b=[0.5, 0.5], n=[5, 5])
    assert out.groups == [] and out.series["y"].shape == (2, 5)


def test_no_workdir_uses_a_temporary_folder_and_removes_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    out = run_batch(sim(), None, a=[1.0], b=[0.5])
    assert out.errors == [None]
    assert list(tmp_path.iterdir()) == []


def test_stale_workdir_of_an_earlier_attempt_is_emptied(tmp_path):
    stale = tmp_path / f"run-{1:016x}"
    stale.mkdir()
    (stale / "results.json").write_text('{"x": 1}')
    out = run_batch(command(run=[PY, str(PROGRAMS / "garbage.py"), "none"]), tmp_path)
    assert "wrote no results.json" in out.errors[0]
    assert not (stale / "results.json").exists()


def test_env_is_passed_and_placeholders_fill_whole_arguments(tmp_path):
    script = ("import os, json; json.dump({'v': float(os.environ['SIM_SCALE'])}, "
              "open('results.json', 'w'))")
    out = run_batch(command(run=[PY, "-c", script], env={"SIM_SCALE": "2.5"}), tmp_path)
    assert out.errors == [None] and out.scalars["v"][0] == 2.5
    work = tmp_path / "w"
    expected = [str(work / f"run-{1:016x}"), f"{1:016x}", f"x{1:016x}y{{}}"]
    model = command(run=[PY, "{study_dir}/argv.py", json.dumps(expected), "{workdir}", "{run_id}",
                         "x{run_id}y{}"])
    out = run_batch(model, work)
    assert out.errors == [None] and out.scalars["match"][0] == 1.0


# --- failures are recorded on the run, never raised ---------------------------------------------

def test_nonzero_exit_records_status_and_stderr_tail(tmp_path):
    model = command(run=[PY, "{study_dir}/fail.py"])
    out = run_batch(model, tmp_path)
    error = out.errors[0]
    assert error.startswith("exited with status 1; stderr ends:")
    assert "error line 29" in error and "error line 10" in error and "error line 9\n" not in error
    assert str(tmp_path / f"run-{1:016x}") in error  # the kept workdir is named
    assert (tmp_path / f"run-{1:016x}" / "stderr.txt").read_text().count("\n") == 30


@pytest.mark.parametrize("mode, results, message", [
    ("garbage", "results.json", "is not valid JSON"),
    ("text", "results.json", "'y' is not numeric"),
    ("list", "results.json", "must hold a JSON object"),
    ("csv-garbage", "results.csv", "not a table of numbers"),
    ("csv-notime", "results.csv", "has no 'time' column"),
    ("none", "results.json", "exited with status 0 but wrote no results.json"),
])
def test_malformed_or_missing_results_fail_the_run(tmp_path, mode, results, message):
    model = command(run=[PY, "{study_dir}/garbage.py", mode], results_file=results)
    out = run_batch(model, tmp_path)
    assert message in out.errors[0]
    assert out.scalars == {} and out.series == {}


def test_missing_results_error_carries_stderr(tmp_path):
    out = run_batch(command(run=[PY, "{study_dir}/garbage.py", "none"]), tmp_path)
    assert "forgot to write results" in out.errors[0]


def test_one_failed_run_leaves_the_others_alone(tmp_path):
    out = run_batch(sim(), tmp_path, a=[1.0, 2.0, 3.0], b=[0.1, 0.2, 0.3], n=[5, 1, 5])
    assert out.errors[0] is None and out.errors[2] is None
    assert "ZeroDivisionError" in out.errors[1]
    assert np.isnan(out.scalars["final"][1]) and np.isfinite(out.scalars["final"][[0, 2]]).all()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"run-{2:016x}"]


def test_unusable_workdir_fails_every_run_without_raising(tmp_path):
    (tmp_path / "file").write_text("")
    out = run_batch(sim(), tmp_path / "file" / "work", a=[1.0, 2.0], b=[0.0, 0.0])
    assert all(e.startswith("cannot make the working folder") for e in out.errors)
    assert np.isnan(out.scalars.get("final", np.full(2, np.nan))).all()


def test_run_missing_an_output_the_others_have_fails(tmp_path):
    script = ("import json, sys; d = json.load(open(sys.argv[1])); "
              "json.dump({'x': 1.0, **({'y': 2.0} if d['a'] > 0 else {})}, open('results.json', 'w'))")
    out = run_batch(command(run=[PY, "-c", script, "{params_file}"]), tmp_path, a=[1.0, -1.0])
    assert out.errors[0] is None and "has no 'y'" in out.errors[1]
    assert out.scalars["x"][0] == 1.0 and np.isnan(out.scalars["x"][1])


@pytest.mark.slow
def test_hanging_program_is_killed_with_its_group_at_the_timeout(tmp_path):
    model = command(run=[PY, "{study_dir}/hang.py", "{workdir}/child.pid"], timeout=1)
    started = time.monotonic()
    out = run_batch(model, tmp_path)
    elapsed = time.monotonic() - started
    assert elapsed < 5
    assert out.errors[0].startswith("timed out after 1 s")
    child = int((tmp_path / f"run-{1:016x}" / "child.pid").read_text())
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child), "the grandchild survived the timeout"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds processes via /proc")
@pytest.mark.parametrize("ending", ["hang", "exit"])
def test_a_grandchild_in_a_new_session_is_killed_when_its_run_ends(tmp_path, ending):
    """A descendant that left the run's process group (setsid) is killed too: at the timeout,
    and at the end of a run that succeeded."""
    marker = f"studyrun-escape-{uuid.uuid4().hex}"
    model = command(run=[PY, "{study_dir}/escape.py", marker, ending], timeout=2)
    out = run_batch(model, tmp_path)
    if ending == "hang":
        assert out.errors[0].startswith("timed out after 2 s")
    else:
        assert out.errors == [None] and out.scalars["x"].tolist() == [1.0]
    assert _running_with(marker) == [], "a process the run started survived it"


def _running_with(marker: str) -> list[int]:
    """Live processes with `marker` on their command line."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes() and alive(int(cmdline.parent.name)):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_program_not_found(tmp_path):
    out = run_batch(command(run=["no-such-program-xyz", "{params_file}"]), tmp_path)
    assert "program not found: 'no-such-program-xyz'" in out.errors[0]
    out = run_batch(command(run=["{workdir}/nothing-here"]), tmp_path)
    assert "program not found" in out.errors[0]
    script = tmp_path / "script"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    out = run_batch(command(run=[str(script)]), tmp_path / "work")
    assert "the interpreter on its #! line was not found" in out.errors[0]


def test_a_program_nowhere_is_not_found_whatever_a_path_folder_says(tmp_path):
    """execvp reports EACCES when a folder on PATH refuses it (one the user cannot search, or an
    entry of the program's name that is a folder), though the program is nowhere: that is 'not
    found', and a file there without its x bit is 'not executable'."""
    odd = tmp_path / "odd-path"
    (odd / "no-such-program-xyz").mkdir(parents=True)  # EACCES even for root
    (tmp_path / "locked").mkdir(mode=0)  # EACCES for anyone but root
    path = os.pathsep.join([str(tmp_path / "locked"), str(odd), os.environ.get("PATH", "")])
    out = run_batch(command(run=["no-such-program-xyz", "{params_file}"], env={"PATH": path}),
                    tmp_path / "work")
    assert "program not found: 'no-such-program-xyz'" in out.errors[0], out.errors[0]
    (odd / "plain-file-xyz").write_text("not a program\n")
    out = run_batch(command(run=["plain-file-xyz"], env={"PATH": path}), tmp_path / "work2")
    assert "program not executable: 'plain-file-xyz'" in out.errors[0], out.errors[0]


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_memory_limit_exceeded_is_a_failure(tmp_path):
    model = command(run=[PY, "{study_dir}/hog.py", "1024"], memory_limit="200MB")
    out = run_batch(model, tmp_path)
    assert "exited with status 1" in out.errors[0]
    assert "memory_limit is 200MB" in out.errors[0] and "MemoryError" in out.errors[0]
    # the same program within the limit succeeds
    out = run_batch(model.model_copy(update={"run": [PY, "{study_dir}/hog.py", "10"]}), tmp_path)
    assert out.errors == [None] and out.scalars["allocated"][0] == 10 * 2**20


# --- values never reach a shell -----------------------------------------------------------------

def test_shell_metacharacters_are_never_executed(tmp_path):
    marker = tmp_path / "PWNED"
    evil = f"; touch {marker} && echo $(touch {marker}) `touch {marker}` | touch {marker}"
    study = tmp_path / "study; touch PWNED && echo $(touch PWNED) `touch PWNED` | touch PWNED"
    study.mkdir()
    for name in ("sim.py", "argv.py"):
        (study / name).write_text((PROGRAMS / name).read_text())
    (study / "in.tmpl").write_text(f"a = {{a}}{evil}\nb = {{b}}\n$(touch {marker})\n")
    model = sim(params_file={"template": "in.tmpl", "file": "in; touch PWNED.txt"},
                keep_workdirs="all")
    assert model.check(study) == []
    out = run_batch(model, tmp_path / "work", study_dir=study, a=[1.0], b=[0.5])
    assert out.errors == [None] and out.scalars["sum"][0] == 1.5
    args = [evil, "{study_dir}", "*", "$HOME"]
    model = command(run=[PY, "{study_dir}/argv.py", json.dumps([evil, str(study), "*", "$HOME"]),
                         *args])
    out = run_batch(model, tmp_path / "work2", study_dir=study)
    assert out.errors == [None] and out.scalars["match"][0] == 1.0
    assert not marker.exists() and not any(tmp_path.rglob("PWNED"))
    assert not Path("PWNED").exists()


# --- workdirs kept or removed -------------------------------------------------------------------

@pytest.mark.parametrize("keep, kept", [("failed", {2}), ("all", {1, 2}), ("none", set())])
def test_keep_workdirs(tmp_path, keep, kept):
    out = run_batch(sim(keep_workdirs=keep), tmp_path, a=[1.0, 1.0], b=[1.0, 1.0], n=[5, 1])
    assert out.errors[0] is None and out.errors[1] is not None
    assert {int(p.name[4:], 16) for p in tmp_path.iterdir()} == kept
    assert ("files kept in" in out.errors[1]) == (2 in kept)


# --- the evaluator ships to workers --------------------------------------------------------------

def test_evaluator_survives_a_pickle_round_trip(tmp_path):
    evaluator = pickle.loads(pickle.dumps(sim().build(PROGRAMS)))
    out = evaluator({"a": np.array([2.0]), "b": np.array([0.0])},
                    RunContext(run_ids=np.array([3]), workdir=tmp_path))
    assert out.errors == [None] and out.scalars["final"][0] == 2.0


def test_own_overhead_per_run_is_small(tmp_path):
    """A batch of runs of a tiny program costs little more than bare subprocesses (~0.3 ms)."""
    argv = ["/bin/sh", "-c", "echo '{\"x\": 1}' > results.json"]
    runs = 30
    bare, ours = [], []
    for attempt in range(3):  # a busy machine can slow one measurement; a polling loop slows all
        started = time.perf_counter()
        for _ in range(runs):
            subprocess.run(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, check=True)
        bare.append(time.perf_counter() - started)
        started = time.perf_counter()
        out = run_batch(command(run=argv), tmp_path / f"w{attempt}", ids=np.arange(runs),
                        a=np.zeros(runs))
        ours.append(time.perf_counter() - started)
        assert out.errors == [None] * runs
        if min(ours) < 2 * min(bare) + runs * 0.005:
            break
    assert min(ours) < 2 * min(bare) + runs * 0.005  # generous: catches polling loops, not noise


def test_the_program_leads_its_own_process_group_in_the_drivers_session(tmp_path):
    """Its group is what is killed when it ends; not a session of its own, which on Linux is a
    scheduling autogroup that a busy machine made cost each run about a millisecond."""
    script = ("import json, os; json.dump({'leads': float(os.getpgid(0) == os.getpid()), "
              "'session': os.getsid(0)}, open('results.json', 'w'))")
    out = run_batch(command(run=[PY, "-c", script]), tmp_path)
    assert out.errors == [None] and out.scalars["leads"][0] == 1.0
    assert out.scalars["session"][0] == os.getsid(0)


def test_the_next_runs_folder_is_made_while_a_program_runs(tmp_path):
    """While run i's program runs, run i + 1's folder is made and its params file written (on
    a slow file system this hides their cost); each program still finds only its own files."""
    script = ("import json, os, sys; here = os.getcwd(); "
              "following = os.path.join(os.path.dirname(here), 'run-%016x' % (int(here[-16:], 16) + 1)); "
              "json.dump({'next_ready': float(os.path.isfile(os.path.join(following, 'params.json'))), "
              "'own_files': float(sorted(os.listdir(here)) == ['params.json', 'stderr.txt', 'stdout.txt'])}, "
              "open('results.json', 'w'))")
    out = run_batch(command(run=[PY, "-c", script]), tmp_path, ids=[1, 2, 3], a=[1.0, 2.0, 3.0])
    assert out.errors == [None] * 3
    assert out.scalars["next_ready"].tolist() == [1.0, 1.0, 0.0]
    assert out.scalars["own_files"].tolist() == [1.0] * 3
    assert list(tmp_path.iterdir()) == []


LOG_INODES = ("import json, os, sys; n = int(float(open(sys.argv[1]).read())); "
              "start = os.fstat(1).st_size + os.fstat(2).st_size; os.write(1, b'x' * n); "
              "json.dump({'out': os.fstat(1).st_ino, 'err': os.fstat(2).st_ino, "
              "'size_at_start': float(start)}, open('results.json', 'w'))")


def test_empty_logs_of_finished_runs_are_renamed_into_later_runs_folders(tmp_path):
    """A new file costs an inode (milliseconds on some file systems): the empty stdout.txt and
    stderr.txt of a run that succeeded become those of a run two later. Logs with text are never
    reused, and each run's logs start empty."""
    (tmp_path / "in.tmpl").write_text("{n}")
    model = command(run=[PY, "-c", LOG_INODES, "{params_file}"],
                    params_file={"template": "in.tmpl", "file": "n.txt"})
    out = run_batch(model, tmp_path / "work", study_dir=tmp_path, n=[0, 5, 0, 0, 0])
    assert out.errors == [None] * 5
    inodes = [{out.scalars["out"][i], out.scalars["err"][i]} for i in range(5)]
    assert inodes[2] == inodes[0]  # run 1's, empty
    assert inodes[3].isdisjoint(inodes[1])  # run 2 printed: its logs are not reused
    assert inodes[4] == inodes[2]
    assert out.scalars["size_at_start"].tolist() == [0.0] * 5
    kept = run_batch(model.model_copy(update={"keep_workdirs": "all"}), tmp_path / "all",
                     study_dir=tmp_path, n=[0, 0, 0])
    assert len(set().union(*({kept.scalars["out"][i], kept.scalars["err"][i]}
                             for i in range(3)))) == 6  # every kept folder keeps its own


def test_a_run_failed_after_its_logs_were_lent_keeps_them(tmp_path):
    """A run that wrote its results but lacks an output later runs have fails when the batch
    ends; its kept folder still has its (empty) stdout.txt and stderr.txt."""
    script = ("import json, sys; d = json.load(open(sys.argv[1])); "
              "json.dump({'x': 1.0, **({'y': 2.0} if d['a'] > 0 else {})}, open('results.json', 'w'))")
    out = run_batch(command(run=[PY, "-c", script, "{params_file}"]), tmp_path,
                    a=[-1.0, 1.0, 1.0, 1.0])
    assert "has no 'y'" in out.errors[0] and out.errors[1:] == [None] * 3
    kept = tmp_path / f"run-{1:016x}"
    assert sorted(p.name for p in kept.iterdir()) == ["params.json", "results.json", "stderr.txt",
                                                      "stdout.txt"]
    assert [p.name for p in tmp_path.iterdir()] == [kept.name]


def test_a_folder_made_ahead_is_still_emptied_of_an_earlier_attempt(tmp_path):
    stale = tmp_path / f"run-{2:016x}"
    stale.mkdir()
    (stale / "results.json").write_text('{"final": 99}')
    out = run_batch(sim(), tmp_path, a=[1.0, 2.0], b=[0.0, 0.0])
    assert out.errors == [None, None] and out.scalars["final"].tolist() == [1.0, 2.0]


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="Popen.wait polls where there is no pidfd")
def test_a_run_with_a_timeout_ends_when_its_program_does(tmp_path):
    """With a timeout, the wait ends at the program's exit: Popen.wait(timeout) would poll, waking
    at 63, 113, 163 ms ... after the start, so a program of 110 ms would be seen at 163 ms."""
    sleep = shutil.which("sleep")
    elapsed = []
    for _ in range(3):  # the fastest of three: a busy machine can delay one
        started = time.monotonic()
        proc = subprocess.Popen([sleep, "0.11"])
        assert wait_for(proc, started + 30) == 0
        elapsed.append(time.monotonic() - started)
    assert 0.11 <= min(elapsed) < 0.145
    proc = subprocess.Popen([sleep, "0"])
    assert wait_for(proc, time.monotonic() + 1e10) == 0  # a timeout of centuries, in milliseconds
    proc = subprocess.Popen([sleep, "5"])
    started = time.monotonic()
    assert wait_for(proc, started + 0.2) is None  # still running at the deadline
    assert 0.2 <= time.monotonic() - started < 1
    proc.kill()
    proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("timeout", [None, 30])
def test_an_interrupted_batch_leaves_no_program_running(tmp_path, timeout, ctrl_c_raises):
    """Ctrl-C (KeyboardInterrupt) while a run's program runs ends its process group and every
    process it started, and reaches the caller."""
    import signal
    import threading

    model = command(run=[PY, "{study_dir}/hang.py", "{workdir}/child.pid"], timeout=timeout)
    pid_file = tmp_path / f"run-{1:016x}" / "child.pid"

    def interrupt_once_started():
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)  # the grandchild's pid is written in full
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=interrupt_once_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_batch(model, tmp_path, a=[1.0, 2.0])
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child), "a process the interrupted run started survived"
    assert not (tmp_path / f"run-{2:016x}" / "child.pid").exists()  # the next run never started


# --- validation and check() ----------------------------------------------------------------------

def test_shell_string_is_rejected_with_a_hint():
    with pytest.raises(ValidationError) as info:
        command(run="python3 sim.py {params_file}")
    message = str(info.value)
    assert "must be a list of arguments, not a shell string" in message
    assert '["python3", "sim.py", "{params_file}"]' in message


@pytest.mark.parametrize("keys, message", [
    ({"run": []}, "at least 1 item"),
    ({"run": ["sim", "--n={n:q}"]}, "'q' is not a format spec"),
    ({"run": ["sim", "{n:9999d}"]}, "a width of 9,999 is more than 1000"),
    ({"params_file": "params.txt"}, "must end in .json, .yaml or .yml"),
    ({"params_file": "../params.json"}, "inside the run's working directory"),
    ({"params_file": {"template": "in.tmpl"}}, "file"),
    ({"params_file": {"template": "in.tmpl", "file": "/etc/in.txt"}}, "inside the run's"),
    ({"results_file": "results.txt"}, "must end in .json or .csv, or be a table"),
    ({"results_file": "out.json", "columns": ["time", "y"]}, "names its own outputs"),
    ({"results_file": "out.txt", "columns": ["time", "time"]}, "column 'time' twice"),
    ({"results_file": "out.txt", "columns": ["a b"]}, "cannot name a column"),
    ({"timeout": 0}, "greater than 0"),
    ({"keep_workdirs": "some"}, "'failed', 'all' or 'none'"),
    ({"memory_limit": "lots"}, "not a memory size"),
    ({"env": {"N": 3}}, "valid string"),
    ({"shell": True}, "Extra inputs are not permitted"),
])
def test_invalid_keys(keys, message):
    with pytest.raises(ValidationError) as info:
        command(**{"run": ["sim"], **keys})
    assert message in str(info.value)


def test_defaults():
    model = command(run=["sim"])
    assert (model.params_file, model.results_file, model.timeout) == ("params.json", "results.json", None)
    assert (model.keep_workdirs, model.env, model.memory_limit) == ("failed", {}, None)


def test_execution_timeout_applies_where_the_model_sets_none():
    assert command(run=["sim"]).with_timeout(1.5).timeout == 1.5
    assert command(run=["sim"], timeout=5).with_timeout(1.5).timeout == 5
    assert not command(run=["sim"]).build(PROGRAMS).runs_user_code  # a crash ends only its subprocess


@pytest.mark.parametrize("text, size", [("512MB", 512 * 10**6), ("2GiB", 2 * 2**30),
                                        ("1.5 gb", 1_500_000_000), (4096, 4096), ("100k", 10**5)])
def test_parse_bytes(text, size):
    assert parse_bytes(text) == size


def test_check_finds_missing_template_and_program(tmp_path):
    model = command(run=["no-such-program-xyz", "x"],
                    params_file={"template": "in.tmpl", "file": "in.txt"})
    problems = {p.path: p.message for p in model.check(tmp_path)}
    assert set(problems) == {"run.0", "params_file.template"}
    assert "program not found" in problems["run.0"] and "in.tmpl" in problems["params_file.template"]


def test_check_refuses_a_template_larger_than_10_mib_unread(tmp_path):
    with open(tmp_path / "in.tmpl", "wb") as f:
        f.truncate(10 * 2**20 + 1)  # sparse: no disk, and never read
    model = command(run=["true"], params_file={"template": "in.tmpl", "file": "in.txt"})
    problems = model.check(tmp_path)
    assert [p.path for p in problems] == ["params_file.template"]
    assert "10,485,761 bytes, more than the 10 MiB a template may have" in problems[0].message


def test_check_resolves_programs(tmp_path):
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "tool"
    tool.write_text("#!/bin/sh\n")
    assert command(run=["bin/tool"]).check(tmp_path)[0].message.endswith(
        "(chmod +x it, or name its interpreter first: [python3, bin/tool])")
    tool.chmod(0o755)
    assert command(run=["bin/tool"]).check(tmp_path) == []
    assert command(run=["{study_dir}/bin/tool"]).check(tmp_path) == []
    assert command(run=["{study_dir}/bin/nothing"]).check(tmp_path)[0].path == "run.0"
    assert command(run=["{workdir}/anything"]).check(tmp_path) == []  # resolved only per run
    on_path = {"PATH": str(Path(PY).parent)}
    assert command(run=[Path(PY).name, "{params_file}"], env=on_path).check(tmp_path) == []
    assert command(run=["tool"], env={"PATH": str(tmp_path / "bin")}).check(tmp_path) == []


def test_relative_program_runs_from_the_study_folder(tmp_path):
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "tool"
    tool.write_text(f"#!{PY}\nimport json\njson.dump({{'ok': 1}}, open('results.json', 'w'))\n")
    tool.chmod(0o755)
    out = run_batch(command(run=["bin/tool"]), tmp_path / "work", study_dir=tmp_path)
    assert out.errors == [None] and out.scalars["ok"][0] == 1.0


# --- the example simulator ---------------------------------------------------------------------

def test_example_decay_simulator(tmp_path):
    model = command(run=[PY, "{study_dir}/sim/decay_sim.py", "{params_file}", "{results_file}"],
                    timeout=30)
    assert model.check(STUDIES) == []
    k, y0 = np.array([0.5, 0.2]), np.array([100.0, 10.0])
    out = run_batch(model, tmp_path, study_dir=STUDIES, k=k, y0=y0)
    assert out.errors == [None, None]
    np.testing.assert_allclose(out.time, np.arange(0, 10.01, 0.5))
    np.testing.assert_allclose(out.series["y"], y0[:, None] * np.exp(-k[:, None] * out.time))
    np.testing.assert_allclose(out.scalars["final_y"], y0 * np.exp(-10 * k))
    np.testing.assert_allclose(out.scalars["half_life"], math.log(2) / k)
    np.testing.assert_allclose(out.scalars["auc"], y0 / k * (1 - np.exp(-10 * k)))
    out = run_batch(model, tmp_path, study_dir=STUDIES, kk=[1.0])
    assert out.errors[0].startswith("exited with status 2") and "unknown parameter 'kk'" in out.errors[0]


# --- bounded output ----------------------------------------------------------------------------

BIG_RESULTS = """
name: big-output
model:
  type: command
  run: [PYTHON, -c, "import json, os, sys; size = int(sys.argv[1]); f = open('results.json', 'w'); f.write('{\\"y\\": 1.0}'); f.truncate(size) if size > 11 else None", "SIZE"]
  MAX
parameters:
  a: {bounds: [0, 1]}
analysis: {type: montecarlo, samples: 2}
execution: {scheduler: sync}
"""  # noqa: E501 (a YAML line)


@pytest.mark.slow
@pytest.mark.parametrize("max_output, size, message", [
    ("max_output: 1MB", 1_000_001, "results.json is 1,000,001 bytes, more than max_output (1MB)"),
    ("", 100_000_001, "results.json is 100,000,001 bytes, more than max_output (100MB)"),
])
def test_a_results_file_beyond_max_output_fails_its_run_unread(tmp_path, max_output, size, message):
    """A results file larger than max_output (default 100MB; here sparse, so the disk is spared)
    fails the run with a clear error before it is read: the driver's memory stays bounded."""
    from conftest import run_cli, write_study

    text = BIG_RESULTS.replace("PYTHON", PY).replace("SIZE", str(size)).replace("MAX", max_output)
    done = run_cli("run", "--no-report", write_study(tmp_path, text), "--out", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("studyrun: run ") and message in done.stderr
    small = text.replace(f'"{size}"', '"11"')
    done = run_cli("run", "--no-report", write_study(tmp_path, small), "--out", tmp_path / "out2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_max_output_is_checked_at_validate(tmp_path):
    from conftest import run_cli, write_study

    text = BIG_RESULTS.replace("PYTHON", PY).replace("SIZE", "11").replace("MAX", "max_output: lots")
    done = run_cli("validate", write_study(tmp_path, text))
    assert done.returncode == 2
    assert re.search(r"study.yaml:5:3: model.max_output: not a memory size", done.stderr), done.stderr
