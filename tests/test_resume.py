"""A study killed with SIGKILL and started again loses at most the batches in flight."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from conftest import CliServer, count_runs, write_study

import studyrun

pytestmark = pytest.mark.slow  # drivers killed with SIGKILL, a LocalCluster

SLOW = """
name: slow
seed: 11
model: {type: python, function: "slow:model"}
parameters:
  a: {bounds: [0, 1]}
  b: {distribution: normal, mean: 0, std: 1}
quantities: {y: y}
analysis: {type: montecarlo, samples: 300}
execution: {batch_size: 10, scheduler: SCHEDULER, workers: 2}
"""


def kill_midway(study, out, threshold: int) -> int:
    process = CliServer.get().start(["run", str(study), "--out", str(out), "--quiet"], Path.cwd())
    deadline = time.time() + 60
    while count_runs(out / "runs.sqlite") < threshold:
        assert process.poll() is None, process.wait().stderr
        assert time.time() < deadline
        time.sleep(0.05)
    try:
        os.kill(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # it had just ended, and the server had waited for it
        pass
    process.wait()
    return count_runs(out / "runs.sqlite")


def test_sigkill_then_resume_matches_an_uninterrupted_run(study_dir):
    (study_dir / "slow.py").write_text(
        "import time\ndef model(a, b):\n    time.sleep(0.01)\n    return {'y': a * a + b}\n")
    study = write_study(study_dir, SLOW.replace("SCHEDULER", "sync"))
    recorded = kill_midway(study, study_dir / "out", threshold=60)
    assert 60 <= recorded < 300
    resumed = studyrun.run(study, study_dir / "out", report=False)
    assert resumed.analysis["runs"]["reused"] == recorded
    assert resumed.analysis["runs"]["succeeded"] == 300
    assert resumed.analysis["execution"]["executed"] == 300 - recorded
    uninterrupted = studyrun.run(study, study_dir / "fresh", report=False)
    assert resumed.results == uninterrupted.results


def test_sigkill_of_a_driver_using_a_local_cluster(study_dir):
    (study_dir / "slow.py").write_text(
        "import time\ndef model(a, b):\n    time.sleep(0.02)\n    return {'y': a - b}\n")
    study = write_study(study_dir, SLOW.replace("SCHEDULER", "local"))
    recorded = kill_midway(study, study_dir / "out", threshold=40)
    assert recorded < 300
    resumed = studyrun.run(study, study_dir / "out", scheduler="sync", report=False)
    assert resumed.analysis["runs"]["reused"] == recorded
    assert resumed.results == studyrun.run(study, study_dir / "fresh", scheduler="sync", report=False).results
