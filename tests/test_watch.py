"""`studyrun status DIR` and `studyrun runs DIR --failed`: progress and failures from the store,
while the study runs (without its lock) and after it ended."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest
from conftest import CliServer, killed_at, run_cli, stored_runs, write_study

import studyrun
from studyrun.cli import main

FLAKY = """
name: watched
seed: 2
model: {type: python, function: "linear:flaky"}
parameters:
  a: {bounds: [0, 1]}
  b: {bounds: [0, 1]}
analysis: {type: montecarlo, samples: 100}
execution: {scheduler: sync, on_failure: continue}
"""

SLOW = """
name: watched-slowly
model: {type: python, function: "slow:model"}
parameters: {a: {bounds: [0, 1]}}
quantities: {y: y}
analysis: {type: montecarlo, samples: 400}
execution: {scheduler: sync, batch_size: 5}
"""


def cli(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_status_and_failed_runs_of_a_finished_study(study_dir, capsys):
    study = write_study(study_dir, FLAKY)
    out = study_dir / "out"
    result = studyrun.run(study, out, quiet=True, report=False)
    failed = result.analysis["runs"]["failed"]
    assert 0 < failed < 100
    status, text, _ = cli(capsys, "status", out)
    assert status == 0
    assert "study: watched" in text and "state: finished" in text
    assert f"runs: 100 planned, 100 recorded ({100 - failed} succeeded, {failed} failed), 0 to go" in text
    assert "ValueError: a is too large" in text or "quantity 'value' is nan" in text
    assert "s per run on average, on 1 worker" in text
    status, listed, _ = cli(capsys, "runs", out, "--failed")
    assert status == 0
    runs = re.findall(r"^run ([0-9a-f]{16})  failed  a=\S+  b=\S+", listed, re.MULTILINE)
    assert len(runs) == failed
    assert listed.count("  error: ") == failed
    _, some, _ = cli(capsys, "runs", out, "--limit", "3")
    assert len(re.findall(r"^run ", some, re.MULTILINE)) == 3
    driver = subprocess.Popen(["sleep", "60"])  # a driver that holds the lock, every run done
    try:
        (out / "runs.sqlite.lock").write_text(f"pid {driver.pid}")
        _, text, _ = cli(capsys, "status", out)
    finally:
        driver.kill()
        driver.wait()
    assert f"state: running (pid {driver.pid})" in text and "(100.0% done)" in text
    assert "analysis: every planned run is recorded; the analysis step is under way" in text


@pytest.mark.slow
def test_status_of_a_running_study_then_of_a_killed_one(study_dir, capsys):
    (study_dir / "slow.py").write_text(
        "import time\ndef model(a):\n    time.sleep(0.01)\n    return {'y': a}\n")
    study = write_study(study_dir, SLOW)
    out = study_dir / "out"
    driver = CliServer.get().start(["run", str(study), "--out", str(out), "--quiet"], study_dir)
    try:
        deadline = time.time() + 60
        text = ""
        while int((re.search(r"(\d+) recorded", text) or [0, "0"])[1]) < 20:
            assert driver.poll() is None and time.time() < deadline, text
            time.sleep(0.2)
            if (out / "runs.sqlite").exists():
                status, text, errors = cli(capsys, "status", out)
        assert f"state: running (pid {driver.pid})" in text
        assert re.search(r"runs: 400 planned, \d+ recorded \(\d+ succeeded, 0 failed\)", text)
        assert re.search(r"rate: [\d.e+]+ runs/s over the last \d+ s; about \d+ s left", text)
    finally:
        try:
            os.kill(driver.pid, signal.SIGKILL)
        except ProcessLookupError:  # it had ended, and the server had waited for it
            pass
        driver.wait()
    status, text, _ = cli(capsys, "status", out)
    assert status == 0 and "state: stopped before finishing" in text


@pytest.mark.slow
def test_status_of_an_iterative_study_claims_no_share_of_runs_to_go(study_dir, capsys):
    """An optimisation plans its runs as it goes: stopped in its first generations, its status
    says how many were planned so far, not "0 to go (100% done)"."""
    (study_dir / "slow.py").write_text(
        "import time\ndef model(a, b):\n    time.sleep(0.01)\n    return {'f': a, 'g': 1 - a + b}\n")
    study = write_study(study_dir, "name: searched\nseed: 1\nmodel: {type: python, function: "
                        "'slow:model'}\nparameters: {a: {bounds: [0, 1]}, b: {bounds: [0, 1]}}\n"
                        "quantities: {f: f, g: g}\nanalysis: {type: optimize, method: nsga2, "
                        "objectives: {minimize: [f, g]}, population: 20, generations: 50}\n"
                        "execution: {scheduler: sync}\n")
    out = study_dir / "out"
    assert killed_at(study, out, 40) >= 40
    status, text, _ = cli(capsys, "status", out)
    assert status == 0 and "state: stopped before finishing" in text
    assert re.search(r"runs: \d+ recorded \(\d+ succeeded, 0 failed\) of \d+ planned so far "
                     r"\(an iterative analysis plans its runs as it goes\)", text), text
    assert "to go" not in text and "% done" not in text


@pytest.mark.slow
def test_status_reports_the_workers_the_study_ran_on(study_dir):
    """The driver times the model on a few runs before the LocalCluster starts; those runs do
    not make a third worker of `workers: 2`."""
    (study_dir / "slow.py").write_text(
        "import time\ndef model(a):\n    time.sleep(0.02)\n    return {'y': a}\n")
    study = write_study(study_dir, SLOW.replace("scheduler: sync, batch_size: 5",
                                                "scheduler: local, workers: 2"))
    out = study_dir / "out"
    done = run_cli("run", study, "--out", out, "--quiet", "--no-report")
    assert done.returncode == 0, done.stderr
    processes = stored_runs(out)["run.worker"].nunique()
    assert processes == 3  # the driver's timing runs and the two workers'
    status = run_cli("status", out)
    assert status.returncode == 0 and "s per run on average, on 2 workers" in status.stdout


def test_status_of_a_folder_without_a_store(tmp_path, capsys):
    status, _, errors = cli(capsys, "status", tmp_path)
    assert status == 1 and "no runs.sqlite here" in errors
