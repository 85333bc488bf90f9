"""The results folder as a whole: its outputs always belong to its study.yaml, are never seen
half-written, are written under the folder's lock; every name validation accepts is stored and
shown as written; a read-only folder is readable. Real subprocesses, signals and mounts."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from conftest import run_cli, stored_runs, write_study

import studyrun

pytestmark = pytest.mark.slow  # the studyrun CLI in subprocesses

MODEL = '''
import numpy as np

def linear(a, b, c=0.0):
    return {"y": 2 * np.asarray(a) - 3 * np.asarray(b), "z": np.asarray(a) * np.asarray(b)}

def broken(a, b, c=0.0):
    raise RuntimeError("this model is broken")

def named(Duration, Time, Status, ID, seq, K, k):
    """Inputs named like the store's own columns, and two that differ only in case."""
    return {"total": Duration + 2 * Time + 3 * Status + 4 * ID + 5 * seq + 6 * K + 7 * k,
            "Y": K, "y": k, "Worker": Duration - k}
'''

FIRST = """
name: first
seed: 1
model: {type: python, function: "m:linear", vectorized: true}
parameters:
  a: {bounds: [0, 1]}
  b: {bounds: [0, 1]}
quantities: {y: y, z: z}
analysis: {type: montecarlo, samples: 200}
execution:
  scheduler: sync
"""

# Another study: other parameters and analysis, and a model that fails every run.
SECOND = """
name: second
model: {type: python, function: "m:broken"}
parameters:
  a: {bounds: [0, 1]}
  b: {bounds: [0, 1]}
  c: {bounds: [0, 1]}
quantities: {w: w}
analysis: {type: sobol, samples: 16}
execution: {scheduler: sync}
"""

RESULTS = ("analysis.json", "report.md", "runs.csv", "figures")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "m.py").write_text(MODEL)
    return tmp_path


def one_line_error(done: subprocess.CompletedProcess, status: int = 1) -> str:
    assert done.returncode == status, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


# -- 13.4: the folder is always consistent ---------------------------------------------------------

def test_fresh_over_another_study_then_a_failing_run_leaves_no_stale_outputs(folder):
    """Guarantee: `--fresh` removes the earlier study's outputs before the first run, so a run
    that then fails leaves none of them beside the new study.yaml; `report` says what is missing."""
    out = folder / "out"
    assert run_cli("run", write_study(folder, FIRST, "first.yaml"), "--out", out,
                   "--quiet").returncode == 0
    assert all((out / name).exists() for name in RESULTS)
    second = write_study(folder, SECOND, "second.yaml")
    error = one_line_error(run_cli("run", second, "--out", out, "--fresh", "--quiet", cwd=folder))
    assert "this model is broken" in error
    assert not any((out / name).exists() for name in RESULTS)
    assert "name: second" in (out / "study.yaml").read_text()
    error = one_line_error(run_cli("report", out))
    assert "no analysis.json here (study.yaml is here: its run did not finish" in error
    status = run_cli("status", out)
    assert status.returncode == 0 and "study: second" in status.stdout, status.stderr
    assert "stopped before finishing" in status.stdout


def test_another_study_on_the_same_runs_replaces_the_outputs_before_it_runs(folder):
    """A study with the same parameters and quantities but another analysis shares the store
    (its runs are reused) but not the outputs: they go before its runs, and a failure leaves the
    folder without results rather than with the other study's."""
    out = folder / "out"
    studyrun.run(write_study(folder, FIRST, "first.yaml"), out, quiet=True, report=False)
    other = FIRST.replace("name: first", "name: other").replace(
        "{type: montecarlo, samples: 200}", "{type: sobol, samples: 32}").replace(
        "m:linear", "m:broken").replace("vectorized: true", "vectorized: false")
    error = one_line_error(run_cli("run", "--no-report", write_study(folder, other, "other.yaml"), "--out", out,
                                   "--quiet"))
    assert "this model is broken" in error
    assert not any((out / name).exists() for name in RESULTS)


def test_another_study_with_other_parameters_leaves_the_folder_as_it_was(folder):
    """Without --fresh, a study whose runs cannot share the store is refused before anything
    in the folder changes: study.yaml and the results stay the earlier study's."""
    out = folder / "out"
    studyrun.run(write_study(folder, FIRST, "first.yaml"), out, quiet=True)
    before = {name: (out / name).read_bytes() for name in ("study.yaml", "analysis.json",
                                                           "report.md", "runs.csv")}
    error = one_line_error(run_cli("run", write_study(folder, SECOND, "second.yaml"), "--out",
                                   out, "--quiet"))
    assert "--fresh to start over" in error
    assert before == {name: (out / name).read_bytes() for name in before}
    assert run_cli("report", out).returncode == 0


@pytest.mark.parametrize("legacy", [False, True], ids=["recorded-digest", "no-digest"])
def test_outputs_of_another_study_are_a_one_line_error(folder, legacy):
    """Guarantee: analysis.json computed for another study.yaml than the folder's (a folder
    assembled by hand), or recording none, is a one-line error from `report`, `status`,
    `predict` and open_results, naming the file and the command that fixes it."""
    first, second = folder / "first-out", folder / "second-out"
    studyrun.run(write_study(folder, FIRST, "first.yaml"), first, quiet=True)
    sobol = FIRST.replace("name: first", "name: second").replace(
        "{type: montecarlo, samples: 200}", "{type: sobol, samples: 16}")
    studyrun.run(write_study(folder, sobol, "second.yaml"), second, quiet=True)
    analysis = json.loads((first / "analysis.json").read_text())
    if legacy:  # no digest recorded: not written by studyrun for this study.yaml
        del analysis["study_yaml_sha256"]
    (second / "analysis.json").write_text(json.dumps(analysis))
    for command in (["report", second], ["status", second], ["predict", second, "--at", "a=0"]):
        error = one_line_error(run_cli(*command))
        assert f"{second / 'analysis.json'}: belongs to another study than " \
               f"{second / 'study.yaml'}" in error
        assert f"`studyrun run STUDY --out {second}`" in error and "KeyError" not in error
    with pytest.raises(studyrun.StudyrunError, match="belongs to another study"):
        studyrun.open_results(second)


def test_the_lock_is_held_until_every_output_is_written(folder):
    """Guarantee: the folder's lock is held until analysis.json and report.md are written: a
    driver stopped (SIGSTOP) after analysis.json and before report.md still holds the folder,
    and a second driver, of another study, is refused and changes nothing."""
    many = "".join(f"  q{i}: y + {i}\n" for i in range(12))  # a report step of some seconds
    study = write_study(folder, FIRST.replace("quantities: {y: y, z: z}\n", "quantities:\n" + many))
    out = folder / "out"
    first = subprocess.Popen([sys.executable, "-m", "studyrun", "run", str(study), "--out",
                              str(out), "--quiet"], cwd=folder, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not (out / "analysis.json").exists():
            assert first.poll() is None, first.communicate()
            assert time.time() < deadline
            time.sleep(0.002)
        os.kill(first.pid, signal.SIGSTOP)
        assert not (out / "report.md").exists(), "stopped too late to test the window"
        second = write_study(folder, SECOND.replace("m:broken", "m:linear").replace("{w: w}", "{y: y}"),
                             "second.yaml")
        error = one_line_error(run_cli("run", second, "--out", out, "--fresh", "--quiet"))
        assert f"another studyrun (pid {first.pid}) is using this results folder" in error
        assert "name: first" in (out / "study.yaml").read_text()
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert first.wait(120) == 0, first.communicate()
    assert json.loads((out / "analysis.json").read_text())["study"] == "first"
    assert "# first" in (out / "report.md").read_text()
    again = run_cli("run", "--no-report", study, "--out", out, "--quiet")  # the lock is free
    assert again.returncode == 0 and "reused" in again.stdout, again.stderr


def test_an_output_killed_mid_write_never_appears_under_its_name(folder):
    """Guarantee: every output is written to a hidden temporary file and renamed into place, so
    a driver killed (SIGKILL) while writing runs.csv leaves no runs.csv at all, never a truncated
    one; the next run removes the leftover and writes it whole."""
    study = write_study(folder, FIRST.replace("samples: 200", "samples: 200000")
                        + "  batch_size: 100000\n")
    out = folder / "out"
    driver = subprocess.Popen([sys.executable, "-m", "studyrun", "run", str(study), "--out",
                               str(out), "--quiet"], cwd=folder, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while not list(out.glob(".runs.csv.*.partial")):
        assert driver.poll() is None, driver.communicate()
        assert time.time() < deadline
        time.sleep(0.001)
    driver.kill()
    driver.wait()
    partial, = out.glob(".runs.csv.*.partial")
    assert not (out / "runs.csv").exists() and not (out / "analysis.json").exists()
    done = run_cli("run", study, "--out", out, "--quiet", "--no-report", cwd=folder, timeout=300)
    assert done.returncode == 0 and "200000 reused" in done.stdout, done.stderr
    assert not partial.exists() and not list(out.glob(".*.partial"))
    with open(out / "runs.csv") as handle:
        assert sum(1 for _ in handle) == 200001


# -- 13.5: names are names -------------------------------------------------------------------------

NAMED = """
name: named
seed: 5
model: {type: python, function: "m:named"}
parameters:
  Duration: {bounds: [0, 1]}
  Time: {bounds: [0, 1]}
  Status: {bounds: [0, 1]}
  ID: {bounds: [0, 1]}
  seq: {bounds: [0, 1]}
  K: {bounds: [0, 1]}
  k: {bounds: [0, 1]}
QUANTITIES
analysis: {type: montecarlo, samples: 40}
execution: {scheduler: sync, batch_size: 7}
"""
PARAMETERS = ["Duration", "Time", "Status", "ID", "seq", "K", "k"]


@pytest.mark.parametrize("quantities", [
    "quantities: {Total: total, Seq: total * 2, WORKER: Worker, Error: Y - y, Y: Y, y: y}",
    ""], ids=["quantities-block", "model-outputs"])
def test_names_sqlite_would_confuse_work_end_to_end(folder, quantities):
    """Guarantee: a parameter, quantity or output named like a column of the store (`Duration`,
    `ID`, `seq`, `Status`), `Time`, or two names that differ only in case (`K`, `k`) pass
    validation, run, and appear as written in runs.csv, analysis.json, `status` and `runs`."""
    study = write_study(folder, NAMED.replace("QUANTITIES", quantities))
    out = folder / "out"
    assert run_cli("validate", study).returncode == 0
    # the figures' file names are checked once: both variants draw the same `Y` and `y`
    done = run_cli("run", study, "--out", out, "--quiet", *([] if quantities else ["--no-report"]),
                   cwd=folder)
    assert done.returncode == 0 and "40 of 40 runs succeeded" in done.stdout, done.stderr
    names = (["Total", "Seq", "WORKER", "Error", "Y", "y"] if quantities
             else ["Worker", "Y", "total", "y"])
    import pandas

    frame = pandas.read_csv(out / "runs.csv")
    assert list(frame.columns) == ["run.index", "run.id", "run.status", "run.error",
                                   "run.duration", "run.worker", *PARAMETERS, *names]
    assert (frame["run.status"] == "ok").all() and frame["run.duration"].ge(0).all()
    total = sum(w * frame[p] for w, p in enumerate(PARAMETERS, start=1))
    assert list(frame["Y"]) == list(frame["K"]) and list(frame["y"]) == list(frame["k"])
    assert (frame["Total" if quantities else "total"] - total).abs().max() < 1e-12
    assert (frame["WORKER" if quantities else "Worker"] - (frame["Duration"] - frame["k"])
            ).abs().max() < 1e-12
    results = json.loads((out / "analysis.json").read_text())["results"]
    assert set(results) == set(names)
    assert set(results["y"]["correlations"]) == set(PARAMETERS)
    assert results["y"]["correlations"]["k"] == pytest.approx(1.0)
    assert results["Y"]["correlations"]["K"] == pytest.approx(1.0)
    if quantities:
        figures = {p.name for p in (out / "figures").iterdir()}  # one file each on macOS too
        assert {"hist-Y.png", "hist-y-2.png"} <= figures
        assert "(figures/hist-y-2.png)" in (out / "report.md").read_text()
    listed = run_cli("runs", out, "--limit", "1")
    assert listed.returncode == 0, listed.stderr
    shown = int(listed.stdout.split()[1], 16)  # the run's id as 16 hex digits
    first = frame[frame["run.id"] == shown - (shown >> 63 << 64)].iloc[0]
    assert "  ".join(f"{p}={first[p]:.6g}" for p in PARAMETERS) in listed.stdout
    status = run_cli("status", out)
    assert status.returncode == 0 and "40 recorded (40 succeeded, 0 failed)" in status.stdout
    again = run_cli("run", "--no-report", study, "--out", out, "--quiet", cwd=folder)
    assert again.returncode == 0 and "40 reused" in again.stdout, again.stderr
    assert pandas.read_csv(out / "runs.csv").equals(frame)
    records = stored_runs(out)
    assert records.loc[records["run.id"] == first["run.id"], "Duration"].item() == first["Duration"]


# -- 14.5: read-only results are readable ----------------------------------------------------------

@pytest.mark.system
def test_a_read_only_results_folder_is_readable(folder, mount_tmpfs):
    """Guarantee: `status`, `runs`, `report --out` and open_results read a results folder on a
    read-only file system; `report` into it says it cannot write there and offers --out, and
    nothing calls the healthy store corrupted."""
    disk = mount_tmpfs(folder / "archive", "size=16m")
    out = disk / "out"
    study = write_study(folder, FIRST)
    written = studyrun.run(study, out, quiet=True)
    report = (out / "report.md").read_text()
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    assert not os.access(out, os.W_OK)
    status = run_cli("status", out)
    assert status.returncode == 0 and "200 recorded (200 succeeded, 0 failed)" in status.stdout, \
        status.stderr
    assert "state: finished" in status.stdout
    listed = run_cli("runs", out, "--limit", "2")
    assert listed.returncode == 0 and listed.stdout.startswith("run "), listed.stderr
    assert len([line for line in listed.stdout.splitlines() if line.startswith("run ")]) == 2
    error = one_line_error(run_cli("report", out))
    assert f"{out}: cannot write report.md and figures/ there (Read-only file system)" in error
    assert f"studyrun report {out} --out DIR" in error
    elsewhere = folder / "elsewhere"
    done = run_cli("report", out, "--out", elsewhere)
    assert done.returncode == 0, done.stderr
    assert (elsewhere / "report.md").read_text() == report
    assert sorted(p.name for p in (elsewhere / "figures").iterdir()) == sorted(
        p.name for p in (out / "figures").iterdir())
    opened = studyrun.open_results(out)
    assert opened.results == written.results and len(opened.runs) == 200
    for text in (status.stderr, listed.stderr, error):
        assert "corrupted" not in text and "--fresh" not in text


def test_reading_a_folder_leaves_it_as_its_run_left_it(folder):
    """`status`, `runs`, `report --out`, `diff` and open_results leave no -wal or -shm file of
    the store behind (a folder tracked by DVC or Snakemake would change); a reader's closing
    does not take the journal from a study writing the store meanwhile."""
    out = folder / "out"
    studyrun.run(write_study(folder, FIRST), out, quiet=True)
    left = sorted(p.name for p in out.iterdir())
    assert not any(name.endswith(("-wal", "-shm")) for name in left)
    for args in (["status", out], ["runs", out, "--limit", "2"], ["diff", out, out],
                 ["report", out, "--out", folder / "elsewhere"]):
        assert run_cli(*args).returncode == 0, args
        assert sorted(p.name for p in out.iterdir()) == left, args
    assert len(studyrun.open_results(out).runs) == 200
    assert sorted(p.name for p in out.iterdir()) == left
    from studyrun.store.run_store import RunStore

    with closing(sqlite3.connect(out / "runs.sqlite")) as writer:
        writer.execute("CREATE TABLE scratch (x)")  # a writer in WAL mode: its journal exists
        assert (out / "runs.sqlite-wal").exists()
        RunStore.open_readonly(out / "runs.sqlite").close()
        writer.execute("INSERT INTO scratch VALUES (1)")
        writer.commit()
        assert (out / "runs.sqlite-wal").exists() and (out / "runs.sqlite-shm").exists()
    assert sorted(p.name for p in out.iterdir()) == left


def recorded_runs(out: Path) -> int:
    """Runs in a store so far, from a connection closed at once (an open one keeps a file of the
    mount open for writing, which a remount read-only refuses)."""
    try:
        with closing(sqlite3.connect(f"{(out / 'runs.sqlite').as_uri()}?mode=ro", uri=True)) as db:
            return db.execute("SELECT coalesce(sum(size), 0) FROM batches").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.system
def test_a_read_only_folder_of_a_killed_study_is_readable(folder, mount_tmpfs):
    """A study killed mid-run leaves its WAL journal and shared-memory file: on a read-only file
    system `status` and `runs --failed` still read every recorded batch. Without the
    shared-memory file the journal cannot be read there: a plain error, never "corrupted"."""
    (folder / "slow.py").write_text("import time\ndef model(a, b):\n    time.sleep(0.002)\n"
                                    "    return {'y': a - b, 'z': a * b}\n")
    study = write_study(folder, FIRST.replace("m:linear", "slow:model").replace(
        "vectorized: true", "vectorized: false").replace("samples: 200", "samples: 4000")
        + "  batch_size: 10\n")
    disk = mount_tmpfs(folder / "archive", "size=32m")
    out = disk / "out"
    driver = subprocess.Popen([sys.executable, "-m", "studyrun", "run", str(study), "--out",
                               str(out), "--quiet"], cwd=folder, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while recorded_runs(out) < 100:
        assert driver.poll() is None and time.time() < deadline
        time.sleep(0.05)
    driver.kill()
    driver.wait()
    recorded = recorded_runs(out)
    assert (out / "runs.sqlite-wal").stat().st_size > 0
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    status = run_cli("status", out)
    assert status.returncode == 0, status.stderr
    assert f"{recorded} recorded ({recorded} succeeded, 0 failed)" in status.stdout
    assert "stopped before finishing" in status.stdout
    assert run_cli("runs", out, "--failed").stdout.strip() == "no failed runs"
    subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
    (out / "runs.sqlite-shm").unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    error = one_line_error(run_cli("status", out))
    assert "runs.sqlite-wal holds recorded runs" in error and "copy the folder" in error
    assert "corrupted" not in error and "--fresh" not in error
