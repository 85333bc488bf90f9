"""Studies on a real single-node SLURM (tests/cluster/slurm.sh): results equal to a local run,
lost jobs replaced, no job left in squeue however the driver ends, jobs in `studyrun status`.

A session fixture brings SLURM up when it is down (as root); when it cannot, the tests fail
saying how to bring it up, or to leave them out with -m "not slurm". The tests share the
cluster, in parallel: a test's jobs may wait for CPUs that another's hold, and no test counts
on a free node."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask
import distributed  # noqa: F401 - see below
import pytest
from conftest import count_runs, signals_as, stored_runs, write_study

import studyrun
from studyrun.execution.clusters import job_name, slurm_jobs

# distributed is imported before any dask.config.set of these tests: a set made before its
# defaults load would take them all away when it ends (KeyError: 'comm' in the next cluster).

pytestmark = [pytest.mark.system, pytest.mark.slurm, pytest.mark.slow]

SCRIPT = Path(__file__).with_name("slurm.sh")
HOW = f"bring SLURM up first with `sudo {SCRIPT} up` (Debian: installs slurm-wlm and munge)"

STUDY = """
name: on-slurm
seed: 5
model: {type: python, function: "slow:model"}
parameters:
  a: {bounds: [0, 1]}
  b: {distribution: normal, mean: 0, std: 1}
quantities: {y: y}
analysis: {type: montecarlo, samples: SAMPLES}
execution:
  batch_size: 6
  scheduler: {cluster: slurm, cores: 1, memory: 1GB, interface: lo, log_directory: LOGS, JOBS}
"""


def study(folder: Path, samples: int, seconds: float, jobs: str = "jobs: 1") -> Path:
    """A Monte Carlo study of `samples` runs of `seconds` each, on SLURM jobs of one worker
    whose output files go to FOLDER/logs."""
    (folder / "slow.py").write_text("import time\ndef model(a, b):\n"
                                    f"    time.sleep({seconds})\n    return {{'y': 2 * a - b}}\n")
    text = STUDY.replace("SAMPLES", str(samples)).replace("JOBS", jobs)
    text = text.replace("LOGS", json.dumps(str(folder / "logs")))  # not slurm-N.out in the cwd
    return write_study(folder, text)


def cluster_is_up() -> bool:
    return subprocess.run(["bash", SCRIPT, "status"], capture_output=True).returncode == 0


@pytest.fixture(scope="session")
def slurm_up():
    """SLURM, up already: the tests never install or start a system service themselves."""
    if not cluster_is_up():
        pytest.fail(f"SLURM is not up: {HOW}", pytrace=False)


@pytest.fixture
def slurm(slurm_up, study_dir):
    """The cluster, shared with the other tests (their jobs may wait for its CPUs); the jobs of
    the test's results folders are cancelled after it."""
    yield
    for folder in study_dir.iterdir():
        if folder.is_dir():
            for job, _ in slurm_jobs(job_name(folder)) or []:
                subprocess.run(["scancel", job])


def jobs(out: Path) -> list[tuple[str, str]]:
    listed = slurm_jobs(job_name(out))
    assert listed is not None, "squeue failed"
    return listed


def wait_for(condition, timeout: float, step: float = 0.25) -> float:
    """Seconds until `condition()` holds; AssertionError after `timeout`."""
    start = time.time()
    while not condition():
        if time.time() - start > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(step)
    return time.time() - start


def driver(study_path: Path, out: Path, sigint=signal.SIG_DFL) -> subprocess.Popen:
    """`studyrun run` in a process of its own, as a user starts it in a terminal (Ctrl-C and
    SIGTERM stop it, even where this process was started with SIGINT ignored), or with SIGINT
    ignored as a batch script's background job (`studyrun run s.yaml & wait`)."""
    return subprocess.Popen([sys.executable, "-m", "studyrun", "run", str(study_path), "--out",
                             str(out), "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=signals_as(sigint))


def test_results_equal_a_local_run_and_no_job_outlives_the_study(slurm, study_dir):
    path = study(study_dir, 60, 0, "jobs: 2")
    result = studyrun.run(path, study_dir / "out", quiet=True, report=False)
    assert result.analysis["runs"] == {"planned": 60, "succeeded": 60, "failed": 0, "reused": 0}
    assert result.analysis["execution"]["scheduler"] == "slurm"
    assert all(int(w.rsplit(":", 1)[1]) != os.getpid() for w in result.runs["run.worker"])
    assert wait_for(lambda: not jobs(study_dir / "out"), 10) < 10
    reference = studyrun.run(path, study_dir / "sync", scheduler="sync", quiet=True, report=False)
    assert result.results == reference.results
    local = json.loads((study_dir / "sync" / "analysis.json").read_text())
    assert json.loads((study_dir / "out" / "analysis.json").read_text())["results"] == \
        local["results"]


def test_a_cancelled_job_is_replaced_and_nothing_is_lost(slurm, study_dir):
    """scancel of the only worker job mid-study: a new job replaces it, every run finishes."""
    path, out = study(study_dir, 120, 0.05), study_dir / "out"
    seen: set[str] = set()

    def cancel_the_first_job():
        wait_for(lambda: count_runs(out / "runs.sqlite") >= 12, 120, 0.05)
        first = jobs(out)[0][0]
        seen.add(first)
        subprocess.run(["scancel", first], check=True)
        while count_runs(out / "runs.sqlite") < 120:
            seen.update(job for job, _ in jobs(out))
            time.sleep(0.2)

    canceller = threading.Thread(target=cancel_the_first_job, daemon=True)
    canceller.start()
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1s"}):
        result = studyrun.run(path, out, quiet=True, report=False)
    canceller.join(5)
    assert result.analysis["runs"]["succeeded"] == 120
    assert len(seen) >= 2, f"no job replaced the cancelled one (jobs seen: {seen})"
    assert len(set(result.runs["run.worker"])) >= 2
    wait_for(lambda: not jobs(out), 10)


@pytest.mark.parametrize("sent, code, word, sigint", [
    (signal.SIGINT, 130, "interrupted", signal.SIG_DFL),
    (signal.SIGTERM, 143, "terminated", signal.SIG_DFL),
    (signal.SIGTERM, 143, "terminated", signal.SIG_IGN)],
    ids=["ctrl-c", "sigterm", "sigterm-with-sigint-ignored"])
def test_ctrl_c_or_sigterm_of_the_driver_leaves_no_job(slurm, study_dir, sent, code, word, sigint):
    """SIGTERM is what SLURM sends a driver job at its walltime or on scancel, also to a driver
    that its batch script started in the background, with SIGINT ignored."""
    path, out = study(study_dir, 600, 0.1, "jobs: 2"), study_dir / "out"
    process = driver(path, out, sigint)
    wait_for(lambda: count_runs(out / "runs.sqlite") >= 12, 120)
    process.send_signal(sent)
    _, errors = process.communicate(timeout=60)
    assert process.returncode == code and word in errors, errors
    assert wait_for(lambda: not jobs(out), 10) < 10, jobs(out)


def test_a_killed_driver_leaves_no_job_and_status_shows_jobs(slurm, study_dir):
    """Three one-core jobs on two CPUs: `studyrun status` shows some running and some pending.
    After a SIGKILL of the driver the workers that had connected lose their scheduler and end
    their jobs; a pending one, which would start and wait out its workers' --death-timeout, is
    cancelled when the study is run again (resumed)."""
    path, out = study(study_dir, 120, 0.1, "jobs: 3"), study_dir / "out"
    process = driver(path, out)
    wait_for(lambda: count_runs(out / "runs.sqlite") >= 12, 120)
    shown = subprocess.run([sys.executable, "-m", "studyrun", "status", str(out)],
                           capture_output=True, text=True, timeout=60).stdout
    line = rf"^jobs: [12] running, [12] pending \(squeue --name {re.escape(job_name(out))}\)$"
    counted = re.search(line, shown, re.MULTILINE)
    assert counted, shown
    process.kill()
    process.communicate()
    # a job whose workers had connected ends within seconds (one had: runs were recorded); one
    # that starts, or started too late to connect, waits out --death-timeout (60 s)
    took = wait_for(lambda: len(jobs(out)) < 3, 30)
    print(f"a running job ended {took:.1f} s after the driver was killed")
    assert jobs(out), "expected the pending job to outlive the driver"
    start = time.time()
    resumed = studyrun.run(path, out, quiet=True, report=False)
    print(f"resumed in {time.time() - start:.1f} s")
    assert resumed.analysis["runs"]["succeeded"] == 120 and resumed.analysis["runs"]["reused"]
    notes = json.dumps(resumed.analysis)
    assert re.search(r"cancelled [12] batch jobs? left by an earlier driver of this folder",
                     notes), notes
    wait_for(lambda: not jobs(out), 10)


LEFTOVERS = """
name: leftovers
model: {type: python, function: "slow:model"}
parameters: {a: {bounds: [0, 1]}}
quantities: {y: y}
analysis: {type: sweep, levels: {a: LEVELS}}
execution:
  batch_size: 6
  scheduler: {cluster: slurm, cores: 1, memory: 1GB, interface: lo, log_directory: LOGS, jobs: 3}
"""


@pytest.mark.parametrize("rerun", ["nothing left to run", "--scheduler sync"])
def test_a_rerun_that_submits_nothing_still_cancels_the_jobs_a_killed_driver_left(
        slurm, study_dir, rerun):
    """Three one-core jobs on two CPUs, the driver SIGKILLed: a job is left in the queue. The
    next driver of the folder cancels it though it submits no job itself: on `--scheduler sync`,
    or when every run it plans is recorded already (here a sweep of the levels the killed driver
    finished)."""
    (study_dir / "slow.py").write_text("import time\ndef model(a):\n    time.sleep(0.1)\n"
                                       "    return {'y': 2 * a}\n")
    logs = json.dumps(str(study_dir / "logs"))
    text = LEFTOVERS.replace("LOGS", logs)
    path = write_study(study_dir, text.replace("LEVELS", json.dumps([i / 120 for i in range(120)])))
    out = study_dir / "out"
    process = driver(path, out)
    wait_for(lambda: count_runs(out / "runs.sqlite") >= 12, 120)
    process.kill()
    process.communicate()
    wait_for(lambda: len(jobs(out)) < 3, 30)  # the jobs whose workers had connected end
    assert jobs(out), "expected the pending job to outlive the driver"
    if rerun == "--scheduler sync":
        result = studyrun.run(path, out, scheduler="sync", quiet=True, report=False)
        assert result.analysis["runs"]["succeeded"] == 120
    else:
        done = sorted(stored_runs(out).query("`run.status` == 'ok'")["a"])
        path = write_study(study_dir, text.replace("LEVELS", json.dumps(done)), "done.yaml")
        result = studyrun.run(path, out, quiet=True, report=False)
        assert result.analysis["runs"]["reused"] == len(done)
        assert result.analysis["execution"]["executed"] == 0
    assert wait_for(lambda: not jobs(out), 10) < 10, jobs(out)
    notes = result.analysis["execution"]["notes"]  # the pending job, and any job whose workers
    # had not yet noticed the killed driver (on a loaded machine they take longer to)
    assert any(re.fullmatch(r"cancelled [1-3] batch jobs? left by an earlier driver of this "
                            r"folder", note) for note in notes), notes


def test_a_job_that_reaches_its_walltime_is_replaced(slurm, study_dir):
    """SLURM's shortest walltime is a minute, and it checks limits every 30 s or so."""
    path, out = study(study_dir, 900, 0.1), study_dir / "out"
    text = path.read_text().replace("interface: lo,", 'interface: lo, walltime: "00:01:00",')
    path.write_text(text)
    seen: set[str] = set()
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.update(job for job, _ in jobs(out))
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    start = time.time()
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1s"}):
        result = studyrun.run(path, out, quiet=True, report=False)
    stop.set()
    watcher.join(5)
    assert result.analysis["runs"]["succeeded"] == 900
    assert len(seen) >= 2, f"no job replaced the one past its walltime ({seen}, " \
        f"{time.time() - start:.0f} s)"
    wait_for(lambda: not jobs(out), 10)
