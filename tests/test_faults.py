"""Faults, each with real processes: a worker killed, the scheduler lost, models that fail in every
way, a results folder that cannot be written, a disk that fills, a damaged run store.

Each test states the guarantee it proves; README.md's reliability section points here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    DASK,
    REPO,
    alive,
    can_mount,
    count_runs,
    free_port,
    run_cli,
    signals_as,
    stored_runs,
    write_study,
)

import studyrun
from studyrun.cli import main

pytestmark = pytest.mark.slow  # fault injection: killed processes, Dask clusters, full disks


def cli(capsys, *args) -> tuple[int, str, str]:
    """`studyrun ARGS` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err

SLOW = """
name: faults
seed: 3
model: {type: python, function: "slow:model"}
parameters:
  a: {bounds: [0, 1]}
  b: {distribution: normal, mean: 0, std: 1}
quantities: {y: y}
analysis: {type: montecarlo, samples: RUNS}
execution: {batch_size: 6, scheduler: SCHEDULER, workers: 2}
"""
SLOW_MODEL = "import time\ndef model(a, b):\n    time.sleep(0.015)\n    return {'y': a * a - b}\n"


def start_study(study: Path, out: Path, *args: str, sigint=signal.SIG_DFL) -> subprocess.Popen:
    """`studyrun run` in a process of its own, with SIGINT as given (default: as in a terminal's
    foreground) and SIGTERM at its default."""
    return subprocess.Popen([sys.executable, "-m", "studyrun", "run", str(study), "--out", str(out),
                             "--quiet", "--no-report", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=study.parent, preexec_fn=signals_as(sigint))


def wait_for_runs(process: subprocess.Popen, store: Path, threshold: int, timeout: float = 60):
    deadline = time.time() + timeout
    while count_runs(store) < threshold:
        assert process.poll() is None, process.communicate()
        assert time.time() < deadline, "the study made no progress"
        time.sleep(0.05)


class DaskProcesses:
    """A `dask scheduler` and `dask worker` processes (no nanny: killing one kills the worker)."""

    def __init__(self, workers: int = 2) -> None:
        self.address = f"tcp://127.0.0.1:{free_port()}"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        self.scheduler = subprocess.Popen(
            [*DASK, "scheduler", "--host", "127.0.0.1", "--port", self.address.rsplit(":", 1)[1],
             "--no-dashboard"], **quiet)
        self.workers = [subprocess.Popen(
            [*DASK, "worker", self.address, "--nthreads", "1", "--no-dashboard", "--no-nanny",
             "--death-timeout", "20"], **quiet) for _ in range(workers)]
        self.wait_until_ready(workers)

    def wait_until_ready(self, workers: int) -> None:
        from distributed import Client

        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with Client(self.address, timeout="2s") as client:
                    if len(client.scheduler_info()["workers"]) == workers:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError("dask scheduler did not start")

    def stop(self) -> None:
        for process in [*self.workers, self.scheduler]:
            if process.poll() is None:
                process.kill()
            process.wait()


@pytest.fixture
def dask_processes():
    processes = DaskProcesses()
    yield processes
    processes.stop()


def slow_study(study_dir: Path, scheduler: str, runs: int = 120) -> Path:
    (study_dir / "slow.py").write_text(SLOW_MODEL)
    return write_study(study_dir, SLOW.replace("SCHEDULER", scheduler).replace("RUNS", str(runs)))


def assert_complete_and_equal_to_a_sync_run(study: Path, out: Path, runs: int) -> None:
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["runs"]["succeeded"] == runs and analysis["runs"]["failed"] == 0
    stored, distinct = count_runs(out / "runs.sqlite"), stored_runs(out)["run.id"].nunique()
    assert stored == distinct == runs, "a run was lost or recorded twice"
    reference = studyrun.run(study, out.parent / "reference", scheduler="sync", quiet=True, report=False)
    assert analysis["results"] == json.loads(json.dumps(reference.analysis["results"]))


# -- workers, scheduler, driver -------------------------------------------------------------------

def test_a_killed_dask_worker_loses_nothing(study_dir, dask_processes):
    """Guarantee: a worker killed mid-study (kill -9) costs only time; its batches run again."""
    study = slow_study(study_dir, dask_processes.address)
    out = study_dir / "out"
    process = start_study(study, out)
    wait_for_runs(process, out / "runs.sqlite", 30)
    os.kill(dask_processes.workers[0].pid, signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert dask_processes.workers[0].wait(5) == -signal.SIGKILL
    assert_complete_and_equal_to_a_sync_run(study, out, 120)


def local_cluster_workers(driver: int) -> list[int]:
    """Pids of the LocalCluster worker processes the driver spawned."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == driver and b"spawn_main" in command:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers through /proc")
def test_a_killed_local_cluster_worker_loses_nothing(study_dir):
    """Guarantee: the same on the default LocalCluster, whose nanny starts a new worker."""
    study = slow_study(study_dir, "local")
    out = study_dir / "out"
    process = start_study(study, out)
    wait_for_runs(process, out / "runs.sqlite", 30)
    workers = local_cluster_workers(process.pid)
    assert workers, "no LocalCluster worker found"
    os.kill(workers[0], signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert_complete_and_equal_to_a_sync_run(study, out, 120)


def test_a_lost_scheduler_is_a_clear_error_and_the_next_start_resumes(study_dir, dask_processes,
                                                                      capsys):
    """Guarantee: losing the scheduler ends the study with exit status 1 and a message naming
    it; every recorded run is reused by the next start."""
    study = slow_study(study_dir, dask_processes.address)
    out = study_dir / "out"
    process = start_study(study, out)
    wait_for_runs(process, out / "runs.sqlite", 30)
    started = time.time()
    os.kill(dask_processes.scheduler.pid, signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    assert time.time() - started < 30
    assert "lost the Dask scheduler at tcp://127.0.0.1:" in stderr, stderr
    assert "Traceback" not in stderr
    recorded = count_runs(out / "runs.sqlite")
    assert 30 <= recorded < 120
    status, stdout, stderr = cli(capsys, "run", study, "--out", out, "--scheduler", "sync", "--quiet",
                                 "--no-report")
    assert status == 0, stderr
    assert f"{recorded} reused" in stdout
    assert_complete_and_equal_to_a_sync_run(study, out, 120)


def test_a_batch_longer_than_the_scheduler_check_is_waited_for(study_dir, dask_scheduler,
                                                               monkeypatch):
    """A live scheduler that is slow to finish a batch is asked, found alive, and waited for."""
    from studyrun.execution.executors import DaskExecutor

    monkeypatch.setattr(DaskExecutor, "POLL_SECONDS", 0.1)
    study = slow_study(study_dir, dask_scheduler, runs=40)
    study.write_text(study.read_text().replace("batch_size: 6", "batch_size: 20"))
    result = studyrun.run(study, study_dir / "out", quiet=True, report=False)
    assert result.analysis["runs"]["succeeded"] == 40


def test_a_scheduler_that_misses_one_check_is_not_lost(dask_scheduler, monkeypatch):
    """A scheduler too busy to answer one check in time (here: stopped for 0.8 s, past the
    0.5 s a check waits) answers the next and is not reported lost; one that never answers is."""
    import threading

    from distributed import Client

    from studyrun.core.errors import ExecutionError
    from studyrun.execution.executors import DaskExecutor

    monkeypatch.setattr(DaskExecutor, "ANSWER_SECONDS", 0.5)
    monkeypatch.setattr(DaskExecutor, "ANSWER_PAUSE", 0.5)
    with Client(dask_scheduler, timeout="10s") as client:
        executor = DaskExecutor(client, name="scheduler")
        pid = client.run_on_scheduler(os.getpid)
        os.kill(pid, signal.SIGSTOP)
        threading.Timer(0.8, os.kill, (pid, signal.SIGCONT)).start()
        try:
            executor.check_scheduler()  # the first check times out; the second is answered
        finally:
            time.sleep(0.8)
            os.kill(pid, signal.SIGCONT)
        assert not executor.scheduler_lost
        monkeypatch.setattr(DaskExecutor, "ANSWER_TRIES", 1)
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(ExecutionError, match="lost the Dask scheduler"):
                executor.check_scheduler()
        finally:
            os.kill(pid, signal.SIGCONT)


def test_a_run_that_crashes_dask_workers_fails_alone(study_dir, dask_scheduler):
    """On a `dask scheduler` (whose nannies restart a dead worker) a batch Dask gives up runs
    again in parts, each alone, until the run that kills its workers is found; it fails alone
    (how its worker died is not known there) and every other run succeeds once."""
    study = exits_study(study_dir, dask_scheduler, 6, kinds=(11,))
    done = run_cli("run", "--no-report", study, "--out", study_dir / "out", "--quiet", cwd=study_dir)
    assert done.returncode == 0, done.stderr
    runs = stored_runs(study_dir / "out")
    failed = runs.loc[runs["run.status"] != "ok", ["a", "run.error"]].values.tolist()
    assert (runs["run.id"].nunique(), count_runs(study_dir / "out" / "runs.sqlite")) == (18, 18)
    assert len(failed) == 1 and failed[0][0] == 11
    assert failed[0][1].startswith("the process running the model died (how is not known")


# -- models that fail -----------------------------------------------------------------------------

FAILING = '''
import time

def model(a, b, kind=0.0):
    if a > 0.8:
        raise ValueError("a is too large")
    if b > 0.9:
        return {"y": float("nan")}
    if b < 0.1:
        return {"y": float("inf")}
    return {"y": a + b}
'''


def test_a_model_that_raises_or_returns_nan_or_inf_fails_only_those_runs(study_dir, capsys):
    """Guarantee: an exception, NaN or inf fails that run (recorded with its error), never the
    study with on_failure: continue, and never enters the analysis."""
    (study_dir / "failing.py").write_text(FAILING)
    study = write_study(study_dir, """
        name: failing
        model: {type: python, function: "failing:model"}
        parameters: {a: {bounds: [0, 1]}, b: {bounds: [0, 1]}}
        quantities: {y: y}
        analysis: {type: montecarlo, samples: 200}
        execution: {scheduler: sync, on_failure: continue}
    """)
    result = studyrun.run(study, study_dir / "out", quiet=True, report=False)
    runs = result.runs
    bad_a, nan_b, inf_b = runs.a > 0.8, (runs.a <= 0.8) & (runs.b > 0.9), (runs.a <= 0.8) & (runs.b < 0.1)
    assert (runs["run.status"][bad_a | nan_b | inf_b] == "failed").all()
    assert (runs["run.status"][~(bad_a | nan_b | inf_b)] == "ok").all()
    assert runs["run.error"][bad_a].str.contains("ValueError: a is too large").all()
    errors = runs["run.error"]
    assert errors[nan_b].str.contains("is nan").all() and errors[inf_b].str.contains("is inf").all()
    assert result.analysis["runs"]["failed"] == int((bad_a | nan_b | inf_b).sum())
    assert result.results["y"]["max"] <= 1.8 + 1e-9
    status, listed, _ = cli(capsys, "runs", study_dir / "out", "--failed")
    assert status == 0 and listed.count("\nrun ") + 1 == result.analysis["runs"]["failed"]
    strict = write_study(study_dir, study.read_text().replace("continue", "abort"), "strict.yaml")
    status, _, stderr = cli(capsys, "run", strict, "--out", study_dir / "strict", "--quiet")
    assert status == 1 and "failed:" in stderr and "will be reused; failed runs are run again" in stderr
    assert " 1 runs" not in stderr, stderr


def test_a_study_in_which_no_run_succeeded_ends_with_one_line_and_exit_status_1(study_dir, capsys):
    """Guarantee: with on_failure: continue and every run failed, `studyrun run` does not pass
    for a success: one line says no run succeeded and where the errors are, exit status 1, and
    analysis.json and runs.csv are written so the failures can be read."""
    (study_dir / "failing.py").write_text("def model(a, b):\n    raise ValueError('no luck')\n")
    study = write_study(study_dir, """
        name: all-failed
        model: {type: python, function: "failing:model"}
        parameters: {a: {bounds: [0, 1]}, b: {bounds: [0, 1]}}
        quantities: {y: y}
        analysis: {type: montecarlo, samples: 20}
        execution: {scheduler: sync, on_failure: continue}
    """)
    out = study_dir / "out"
    status, stdout, stderr = cli(capsys, "run", study, "--out", out, "--quiet")
    assert status == 1 and stdout == "", stdout
    assert stderr == (f"studyrun: all-failed: no run succeeded (20 of 20 failed); their errors "
                      f"are in {out}: studyrun runs {out} --failed\n")
    assert json.loads((out / "analysis.json").read_text())["runs"]["succeeded"] == 0
    runs = stored_runs(out)
    assert len(runs) == 20 and runs["run.error"].str.contains("ValueError: no luck").all()
    assert (out / "runs.csv").read_text().count("ValueError: no luck") == 20


EXITS = """
import ctypes, os, sys, time

def model(a):
    time.sleep(0.002)
    if a == 3:
        sys.exit(3)
    if a == 5:
        raise KeyboardInterrupt
    if a == 7:
        os._exit(1)
    if a == 11:
        ctypes.string_at(0)  # a segmentation fault
    return {"y": 2.0 * a}
"""
EXIT_STUDY = """
name: exits
model: {type: python, function: "exits:model"}
parameters: {a: {bounds: [0, 20]}}
quantities: {y: y}
analysis: {type: sweep, levels: {a: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]}}
execution: {scheduler: SCHEDULER, workers: 2, batch_size: BATCH, on_failure: continue}
"""
EXIT_ERRORS = {3: "the model called sys.exit(3) (at exits.py:",
               5: "the model raised KeyboardInterrupt (at exits.py:",
               7: "the process running the model died (exit status 1) running this run alone",
               11: "the process running the model died (signal 11, Segmentation fault) running "
                   "this run alone"}


def exits_study(study_dir: Path, scheduler: str, batch, kinds=(3, 5, 7, 11)) -> Path:
    source = EXITS
    for kind in {3, 5, 7, 11} - set(kinds):
        source = source.replace(f"if a == {kind}:", "if False:")
    (study_dir / "exits.py").write_text(source)
    return write_study(study_dir, EXIT_STUDY.replace("SCHEDULER", scheduler)
                       .replace("BATCH", str(batch)))


def assert_only_these_runs_failed(out: Path, kinds) -> None:
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["runs"]["failed"] == len(kinds)
    assert analysis["runs"]["succeeded"] == 18 - len(kinds)
    rows = stored_runs(out)[["a", "run.status", "run.error", "y", "run.id"]].values.tolist()
    assert count_runs(out / "runs.sqlite") == len({row[4] for row in rows}) == 18, \
        "a run was lost or recorded twice"
    for a, status, error, y, _ in rows:
        if a in kinds:
            assert status == "failed" and error.startswith(EXIT_ERRORS[a]), (a, error)
        else:
            assert status == "ok" and y == 2 * a, (a, status, error)


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_sys_exit_or_keyboard_interrupt_in_a_model_fails_only_that_run(study_dir, scheduler,
                                                                      capsys):
    """Guarantee: a python model calling sys.exit or raising KeyboardInterrupt fails only that
    run, on every scheduler, and the study goes on (before, `sync` ended with exit status 0)."""
    study = exits_study(study_dir, scheduler, "auto", kinds=(3, 5))
    status, stdout, stderr = cli(capsys, "run", study, "--out", study_dir / "out", "--quiet",
                                 "--no-report")
    assert status == 0, stderr
    assert_only_these_runs_failed(study_dir / "out", (3, 5))


@pytest.mark.parametrize("batch", ["auto", 4])
def test_a_model_that_exits_or_crashes_its_process_fails_only_that_run(study_dir, batch):
    """Guarantee: on a LocalCluster (`batch: 4`), and in the pilot of `batch_size: auto`, which
    runs away from the driver, a python model's os._exit or segmentation fault fails only the
    runs that do it: the batch is run again in parts in a process of its own until they are
    found, and recorded with how their process died; every other run succeeds once."""
    study = exits_study(study_dir, "local", batch)
    done = run_cli("run", "--no-report", study, "--out", study_dir / "out", "--quiet", cwd=study_dir)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert_only_these_runs_failed(study_dir / "out", (3, 5, 7, 11))


@pytest.mark.parametrize("threads", [0, 1])
def test_the_pilot_process_never_runs_the_drivers_script(study_dir, threads):
    """The pilot's process is forked (a driver with no other thread) or a new interpreter, never
    multiprocessing's spawn: a script calling studyrun.run with no `if __name__ == "__main__"`
    guard is not run again there (which would fail every run)."""
    study = exits_study(study_dir, "local", "auto", kinds=())
    script = study_dir / "script.py"
    script.write_text("import threading, time, studyrun\n"
                      f"for _ in range({threads}):\n"
                      "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                      f"print(studyrun.run({str(study)!r}, "
                      f"{str(study_dir / 'out')!r}, report=False).analysis['runs']['succeeded'])\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=study_dir)
    assert done.returncode == 0 and done.stdout.strip() == "18", done.stderr
    analysis = json.loads((study_dir / "out" / "analysis.json").read_text())
    assert analysis["execution"]["scheduler"] == "process"


@pytest.mark.skipif(sys.platform != "linux", reason="signals as on Linux")
def test_a_crash_under_sync_ends_the_driver_with_a_non_zero_status_and_where(study_dir):
    """Limit, stated: under `sync` and `threads` the model runs in the driver, which a
    segmentation fault ends; the exit status says so (never 0) and stderr shows the model's
    line, and the runs recorded before are kept."""
    study = exits_study(study_dir, "sync", 1, kinds=(11,))
    done = run_cli("run", "--no-report", study, "--out", study_dir / "out", "--quiet", cwd=study_dir)
    assert done.returncode == -signal.SIGSEGV, done.stderr
    assert "Segmentation fault" in done.stderr and 'exits.py", line 13 in model' in done.stderr
    assert 0 < count_runs(study_dir / "out" / "runs.sqlite") < 18


@pytest.mark.parametrize("sent, code, word", [(signal.SIGINT, 130, "interrupted"),
                                               (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_or_sigterm_of_the_driver_still_stops_a_sync_study(study_dir, sent, code, word):
    """A SIGINT (or a batch system's SIGTERM) to the driver is not a run's KeyboardInterrupt: it
    stops the study (exit status 130, or 143), every recorded run kept, none failed, though the
    model is running when it arrives."""
    study = slow_study(study_dir, "sync")
    out = study_dir / "out"
    process = start_study(study, out)
    wait_for_runs(process, out / "runs.sqlite", 12)
    process.send_signal(sent)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    assert word in stderr
    assert (stored_runs(out)["run.status"] == "ok").all()
    assert not (out / "analysis.json").exists()


def test_ctrl_c_in_a_terminal_stops_a_local_cluster_study_without_tracebacks(study_dir):
    """A terminal's Ctrl-C reaches its whole foreground process group, the LocalCluster's worker
    processes too: the driver alone acts on it (exit status 130, one line), and no worker prints
    a KeyboardInterrupt traceback."""
    study = slow_study(study_dir, "local", runs=600)
    out = study_dir / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "studyrun", "run", str(study), "--out", str(out), "--quiet",
         "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=study_dir, preexec_fn=signals_as(), process_group=0)  # as a terminal's job
    wait_for_runs(process, out / "runs.sqlite", 12)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr


@pytest.mark.parametrize("scheduler", ["sync", "local"])
def test_sigterm_stops_a_driver_started_with_ctrl_c_ignored(study_dir, scheduler):
    """A driver started with SIGINT ignored (a background job of a script: `studyrun run s.yaml &
    wait` in a batch script) still stops at a SIGTERM as in a terminal: exit status 143, every
    recorded run kept, none failed, and its LocalCluster's processes gone with it."""
    import psutil

    study = slow_study(study_dir, scheduler, runs=600)
    out = study_dir / "out"
    process = start_study(study, out, "--workers", "2", sigint=signal.SIG_IGN)
    wait_for_runs(process, out / "runs.sqlite", 12)
    children = psutil.Process(process.pid).children(recursive=True)
    assert children or scheduler == "sync", "no LocalCluster started"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert "terminated (SIGTERM)" in stderr
    assert (stored_runs(out)["run.status"] == "ok").all()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"processes of the driver outlived it: {alive}"


HANG_OR_HOG = r'''
import json, sys, time
p = json.load(open(sys.argv[1]))
if p["a"] > 0.75:
    time.sleep(60)
if p["b"] > 0.75:
    block = bytearray(2 * 1024 ** 3)
json.dump({"y": p["a"] + p["b"]}, open("results.json", "w"))
'''


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_a_command_that_hangs_or_exhausts_memory_fails_that_run(study_dir, capsys):
    """Guarantee: a command model past execution.timeout is killed (with its children) and a run
    past memory_limit fails; both are recorded with their working directories kept."""
    (study_dir / "sim.py").write_text(HANG_OR_HOG)
    study = write_study(study_dir, """
        name: hang-or-hog
        model:
          type: command
          run: [PYTHON, "{study_dir}/sim.py", "{params_file}"]
          memory_limit: 300MB
        parameters: {a: {bounds: [0, 1]}, b: {bounds: [0, 1]}}
        quantities: {y: y}
        analysis: {type: sweep, levels: {a: [0.1, 0.9], b: [0.1, 0.9]}}
        execution: {scheduler: threads, workers: 4, timeout: 1.5, on_failure: continue}
    """.replace("PYTHON", sys.executable))
    started = time.time()
    result = studyrun.run(study, study_dir / "out", quiet=True, report=False)
    assert time.time() - started < 15
    runs = result.runs.set_index(["a", "b"])
    assert runs.loc[(0.1, 0.1), "run.status"] == "ok"
    assert runs.loc[(0.9, 0.1), "run.error"].startswith("timed out after 1.5 s")
    assert runs.loc[(0.9, 0.9), "run.error"].startswith("timed out after 1.5 s")
    assert "memory_limit is 300MB" in runs.loc[(0.1, 0.9), "run.error"]
    _, listed, _ = cli(capsys, "runs", study_dir / "out", "--failed")
    assert listed.count("workdir: ") == 3
    for line in listed.splitlines():
        if "workdir: " in line:
            assert Path(line.split("workdir: ")[1]).joinpath("params.json").is_file()


ESCAPE = r'''
import json, subprocess, sys, time
p = json.load(open(sys.argv[1]))
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[2]],
                 start_new_session=True)  # leaves the run's process group and session
if p["a"] > 0.5:
    time.sleep(600)
json.dump({"y": p["a"]}, open("results.json", "w"))
'''


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds processes via /proc")
def test_nothing_a_command_run_started_outlives_it(study_dir):
    """Guarantee (Linux): a command model's descendant that left the run's process group and
    session (setsid) is killed too, at the timeout and when a run that succeeded ends."""
    (study_dir / "escape.py").write_text(ESCAPE)
    marker = f"studyrun-escape-{os.getpid()}-{time.time_ns()}"
    study = write_study(study_dir, f"""
        name: escape
        model:
          type: command
          run: [{sys.executable}, "{{study_dir}}/escape.py", "{{params_file}}", {marker}]
        parameters: {{a: {{bounds: [0, 1]}}}}
        quantities: {{y: y}}
        analysis: {{type: sweep, levels: {{a: [0.25, 0.75]}}}}
        execution: {{scheduler: threads, workers: 2, timeout: 1.5, on_failure: continue}}
    """)
    result = studyrun.run(study, study_dir / "out", quiet=True, report=False)
    runs = result.runs.set_index("a")
    assert runs.loc[0.25, "run.status"] == "ok"
    assert runs.loc[0.75, "run.error"].startswith("timed out after 1.5 s")
    survivors = [path for path in Path("/proc").glob("[0-9]*/cmdline")
                 if marker.encode() in read_or_nothing(path) and alive(int(path.parent.name))]
    assert survivors == [], "a process a run started outlived it"


def read_or_nothing(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


# -- the results folder and its disk --------------------------------------------------------------

SMALL = """
name: small
model: {type: python, function: "linear:linear", vectorized: true}
parameters: {a: {bounds: [0, 1]}, b: {bounds: [0, 1]}}
quantities: {y: y, a2: a_squared}
analysis: {type: montecarlo, samples: RUNS}
execution: {scheduler: sync, batch_size: 500}
"""


def test_an_unwritable_results_folder_is_a_clear_error(study_dir, mount_tmpfs, capsys):
    """Guarantee: a results folder that cannot be written stops the study before any run, with
    exit status 1 and the folder's name."""
    study = write_study(study_dir, SMALL.replace("RUNS", "100"))
    if can_mount():
        folder = mount_tmpfs(study_dir / "readonly", "ro,size=1m")
    else:
        folder = study_dir / "readonly"
        folder.mkdir()
        folder.chmod(0o555)
    status, _, stderr = cli(capsys, "run", study, "--out", folder / "out")
    assert status == 1, stderr
    assert "cannot write the results folder" in stderr and str(folder) in stderr


@pytest.mark.system
def test_a_full_disk_is_a_clear_error_and_leaves_no_half_written_batch(study_dir, mount_tmpfs,
                                                                       capsys):
    """Guarantee: a disk that fills mid-study ends it with exit status 1; the store holds whole
    batches only, and a resume on a roomier disk reuses them and equals a fresh run."""
    study = write_study(study_dir, SMALL.replace("RUNS", "10000"))
    disk = mount_tmpfs(study_dir / "tiny", "size=320k")
    status, _, stderr = cli(capsys, "run", study, "--out", disk / "out", "--quiet")
    assert status == 1, stderr
    assert "full" in stderr.lower() or "no space" in stderr.lower(), stderr
    moved = study_dir / "moved"
    shutil.copytree(disk / "out", moved)
    with sqlite3.connect(moved / "runs.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    runs = stored_runs(moved)
    stored = len(runs)
    partial = ((runs["run.status"] != "ok") | runs[["y", "a2", "a", "b"]].isna().any(axis=1)).sum()
    assert 0 < stored < 10000 and partial == 0
    assert stored % 500 == 0, "a batch was recorded in part"
    resumed = studyrun.run(study, moved, quiet=True, report=False)
    assert resumed.analysis["runs"]["reused"] == stored
    assert resumed.results == studyrun.run(study, study_dir / "fresh", quiet=True, report=False).results


@pytest.mark.system
def test_a_disk_that_fills_while_results_are_written(study_dir, mount_tmpfs, capsys):
    """Guarantee: a disk that fills while runs.csv or analysis.json is written ends the study with
    exit status 1 and the disk's message; the store is intact and the next start, with space,
    reuses every run and writes the results."""
    study = write_study(study_dir, SMALL.replace("RUNS", "5000"))
    disk = mount_tmpfs(study_dir / "disk", "size=16m")
    out = disk / "out"
    first = studyrun.run(study, out, quiet=True)
    for name in ("runs.csv", "analysis.json", "report.md"):
        (out / name).unlink()
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    filler.write_bytes(b"\0" * max(free - 128 * 1024, 0))  # room for the store's meta, not results
    status, _, stderr = cli(capsys, "run", study, "--out", out, "--quiet")
    assert status == 1, stderr
    assert "No space left on device" in stderr and "run the study again to resume" in stderr
    with sqlite3.connect(out / "runs.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert (stored_runs(out)["run.status"] == "ok").sum() == 5000
    assert not (out / "analysis.json").exists()  # written whole or not at all
    assert not (out / "runs.csv").exists() and not list(out.glob(".*.partial"))
    filler.unlink()
    again = studyrun.run(study, out, quiet=True)
    assert again.analysis["runs"]["reused"] == 5000 and again.results == first.results


# -- a damaged run store --------------------------------------------------------------------------

def damage_garbage(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        handle.write(os.urandom(8192))


def damage_header(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.write(b"\0" * 100)


def damage_truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2 + 123)


@pytest.mark.parametrize("damage", [damage_garbage, damage_header, damage_truncate])
def test_a_damaged_store_is_reported_and_never_reused(study_dir, damage, capsys):
    """Guarantee: garbage bytes in runs.sqlite or a truncated runs.sqlite are detected when the
    study starts again (exit status 1, the file named) and by `studyrun status`; --fresh starts over."""
    study = write_study(study_dir, SMALL.replace("RUNS", "1000"))
    out = study_dir / "out"
    first = studyrun.run(study, out, quiet=True, report=False)
    damage(out / "runs.sqlite")
    status, _, stderr = cli(capsys, "run", study, "--out", out, "--quiet")
    assert status == 1 and f"{out / 'runs.sqlite'}: the run store is corrupted" in stderr, stderr
    status, _, stderr = cli(capsys, "status", out)
    assert status == 1 and "corrupted" in stderr
    status, _, stderr = cli(capsys, "run", study, "--out", out, "--fresh", "--quiet", "--no-report")
    assert status == 0, stderr
    assert json.loads((out / "analysis.json").read_text())["results"] == json.loads(
        json.dumps(first.analysis["results"]))


def test_an_emptied_store_reruns_everything(study_dir):
    """A runs.sqlite truncated to nothing is an empty store: every run executes again."""
    study = write_study(study_dir, SMALL.replace("RUNS", "300"))
    out = study_dir / "out"
    first = studyrun.run(study, out, quiet=True, report=False)
    os.truncate(out / "runs.sqlite", 0)
    again = studyrun.run(study, out, quiet=True, report=False)
    assert again.analysis["runs"]["reused"] == 0 and again.results == first.results


def test_a_second_driver_on_the_same_folder_is_refused(study_dir, capsys):
    """Guarantee: one driver per results folder; a second one stops at once and says who holds it."""
    study = slow_study(study_dir, "sync")
    out = study_dir / "out"
    first = start_study(study, out)
    try:
        wait_for_runs(first, out / "runs.sqlite", 6)
        status, _, stderr = cli(capsys, "run", study, "--out", out, "--quiet")
        assert status == 1 and f"another studyrun (pid {first.pid}) is using this results folder" in stderr
    finally:
        first.kill()
        first.wait()


def test_a_local_workers_lost_heartbeat_stays_off_the_terminal():
    """Fails before: a LocalCluster worker whose heartbeat ran as the driver closed the scheduler
    (at Ctrl-C) printed distributed's traceback; the preload hook now drops that one message and
    no other of the worker's."""
    code = ("import logging, sys\n"
            "from studyrun.core.interrupts import dask_setup\n"
            "logging.basicConfig(stream=sys.stderr)\n"
            "dask_setup(None)\n"
            "log = logging.getLogger('distributed.worker')\n"
            "log.error('Failed to communicate with scheduler during heartbeat.')\n"
            "log.error('Compute Failed')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "heartbeat" not in done.stderr and "Compute Failed" in done.stderr
