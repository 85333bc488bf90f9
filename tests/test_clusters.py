"""Cluster blocks (dask-jobqueue): the job script of each batch system, validation, and whole
studies on stand-in batch systems whose submit command starts the job script on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import time
from pathlib import Path

import distributed  # noqa: F401 - see below
import pytest
from conftest import count_runs, signals_as, write_study

import studyrun
from studyrun.cli import main
from studyrun.core.errors import StudyError
from studyrun.execution.clusters import job_name, job_script, walltime_for
from studyrun.study.spec.execution import Cluster

# distributed is imported before any dask.config.set of these tests: a set made before its
# defaults load would take them all away when it ends (KeyError: 'comm' in the next cluster).

# The test extra installs dask-jobqueue: a missing one must fail, not skip. Not imported here:
# its import makes Ctrl-C a sys.exit() in this test process (the other tests' KeyboardInterrupt).
assert importlib.util.find_spec("dask_jobqueue"), "pip install -e '.[test]' installs dask-jobqueue"


def cli(capsys, *args) -> tuple[int, str, str]:
    """`studyrun ARGS` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err

BLOCK = {"cores": 8, "memory": "16GB", "walltime": "02:00:00", "queue": "short",
         "account": "proj42", "job_extra": ["--exclusive"], "prologue": ["module load python/3.11"]}


@pytest.mark.parametrize("kind, expected", [
    ("slurm", ["#SBATCH -J studyrun", "#SBATCH -p short", "#SBATCH -A proj42",
               "#SBATCH --cpus-per-task=8", "#SBATCH --mem=15G", "#SBATCH -t 02:00:00",
               "#SBATCH --exclusive"]),
    ("pbs", ["#PBS -N studyrun", "#PBS -q short", "#PBS -A proj42", "ncpus=8",
             "#PBS -l walltime=02:00:00", "#PBS --exclusive"]),
    ("sge", ["#$ -N studyrun", "#$ -q short", "#$ -P proj42", "#$ -l h_rt=02:00:00",
             "#$ --exclusive"]),
    ("lsf", ["#BSUB -J studyrun", "#BSUB -q short", '#BSUB -P "proj42"', "#BSUB -n 8",
             "#BSUB -W 02:00", "#BSUB --exclusive"]),
])
def test_job_script_of_each_batch_system(kind, expected):
    script = job_script(Cluster(cluster=kind, **BLOCK))
    for line in expected:
        assert line in script, f"{line!r} missing from\n{script}"
    lines = script.splitlines()
    worker = next(i for i, line in enumerate(lines) if "distributed.cli.dask_worker" in line)
    assert lines.index("module load python/3.11") < worker
    assert "--nworkers 8" in lines[worker] and "--nthreads 1" in lines[worker]


def test_job_script_of_htcondor():
    script = job_script(Cluster(cluster="htcondor", cores=4, memory="8GB", disk="20GB",
                                job_extra=["requirements = (OpSysMajorVer == 9)"],
                                prologue=["module load python"]))
    assert "MY.DaskWorkerCores = 4" in script and "MY.DaskWorkerMemory = 8000000000" in script
    assert "MY.DaskWorkerDisk = 20000000000" in script
    assert "requirements = (OpSysMajorVer == 9)" in script
    assert "module load python; " in script


def test_processes_per_job_and_walltime_forms():
    script = job_script(Cluster(cluster="slurm", cores=8, processes=2, memory="8GB"))
    assert "--nworkers 2" in script and "--nthreads 4" in script
    assert walltime_for("lsf", "1-00:00:30") == "24:01"
    assert walltime_for("pbs", "1-02:00:00") == "26:00:00"
    assert walltime_for("slurm", "1-00:00:00") == "1-00:00:00"


@pytest.mark.parametrize("block, message", [
    ({"cluster": "slurmm"}, "did you mean 'slurm'"),
    ({"cluster": "slurm", "walltime": "2h"}, "expected HH:MM:SS"),
    ({"cluster": "slurm", "memory": "lots"}, "not a memory size"),
    ({"cluster": "slurm", "minimum_jobs": 2}, "minimum_jobs needs maximum_jobs"),
    ({"cluster": "slurm", "minimum_jobs": 3, "maximum_jobs": 2}, "exceeds maximum_jobs"),
    ({"cluster": "slurm", "jobs": 3, "maximum_jobs": 5}, "either jobs"),
    ({"cluster": "slurm", "cores": 2, "processes": 4}, "cannot exceed cores"),
    ({"cluster": "htcondor", "walltime": "01:00:00"}, "htcondor has no walltime"),
    ({"cluster": "htcondor", "job_extra": ["--exclusive"]}, "key = value"),
    ({"cluster": "pbs", "disk": "1GB"}, "htcondor only"),
    ({"cluster": "slurm", "nodes": 2}, "nodes"),
])
def test_invalid_cluster_blocks_are_located_errors(study_dir, block, message):
    study = write_study(study_dir, STUDY.replace("SCHEDULER", json.dumps(block)))
    with pytest.raises(StudyError) as caught:
        studyrun.load(study)
    text = str(caught.value)
    assert "study.yaml:" in text and "execution.scheduler" in text and message in text


def test_unquoted_walltime_is_read_as_a_clock_time(study_dir):
    study = write_study(study_dir, STUDY.replace("SCHEDULER", "{cluster: pbs, walltime: 02:00:00}"))
    assert studyrun.load(study).execution.scheduler.walltime == "02:00:00"


def test_plan_prints_the_job_script(study_dir, capsys):
    study = write_study(study_dir, STUDY.replace("SCHEDULER", json.dumps(
        {"cluster": "slurm", "cores": 2, "memory": "4GB", "walltime": "00:10:00", "jobs": 3})))
    status, shown, errors = cli(capsys, "plan", study)
    assert status == 0, errors
    assert "slurm cluster, 3 jobs of 2 cores and 4GB" in shown
    assert "#SBATCH -t 00:10:00" in shown and "scheduler slurm" in shown
    _, other, _ = cli(capsys, "plan", study, "--cluster", "pbs")
    assert "#PBS -l walltime=00:10:00" in other and "#SBATCH" not in other
    local = write_study(study_dir, STUDY.replace("SCHEDULER", "local"), "local.yaml")
    assert "#!/usr/bin/env bash" not in cli(capsys, "plan", local)[1]
    assert "#SBATCH -J studyrun" in cli(capsys, "plan", local, "--cluster", "slurm")[1]
    status, _, errors = cli(capsys, "plan", local, "--cluster")
    assert status == 2 and "not a cluster block" in errors


def test_the_example_cluster_study_is_valid_and_shows_its_script(capsys):
    study = Path(__file__).resolve().parents[1] / "studies" / "cluster-slurm.yaml"
    status, shown, errors = cli(capsys, "plan", study)
    assert status == 0, errors
    assert "#SBATCH -p" in shown and "#SBATCH -A" in shown
    text = study.read_text()
    assert text.count("# CHANGE") == 2


# -- whole studies on stand-in batch systems ------------------------------------------------------

STUDY = """
name: on-a-cluster
seed: 5
model: {type: python, function: "linear:scalar_linear"}
parameters:
  a: {bounds: [0, 1]}
  b: {distribution: normal, mean: 0, std: 1}
quantities: {y: y}
analysis: {type: montecarlo, samples: 60}
execution:
  batch_size: 6
  scheduler: SCHEDULER
"""

SUBMIT = r"""#!/usr/bin/env bash
# Stand-in for a batch system's submit command: start the job script here, in its own session.
copy="$(mktemp "$FAKE_BATCH_DIR/job-XXXXXX")"
if [ $# -gt 0 ]; then cp "${@: -1}" "$copy"; else cat > "$copy"; fi
setsid bash "$copy" > "$copy.log" 2>&1 < /dev/null &
echo "$!" >> "$FAKE_BATCH_DIR/submitted"
printf 'OUTPUT\n' "$!"
"""
CANCEL = """#!/usr/bin/env bash
for id in "$@"; do kill -TERM -- "-${id%%.*}" 2>/dev/null; done
exit 0
"""
# what studyrun asks SLURM of its jobs at start (an earlier driver's leftovers): none here, and
# never the machine's own squeue, which waits 9 s for a controller that is down
QUERY = """#!/usr/bin/env bash
exit 0
"""
SYSTEMS = {"slurm": ("sbatch", "scancel", "Submitted batch job %s"),
           "pbs": ("qsub", "qdel", "%s.fake-server"),
           "lsf": ("bsub", "bkill", "Job <%s> is submitted to queue <normal>.")}


@pytest.fixture
def batch_system(tmp_path, monkeypatch):
    """Install a stand-in submit and cancel command for a batch system on PATH."""
    def install(kind: str) -> Path:
        submit, cancel, output = SYSTEMS[kind]
        folder = tmp_path / f"fake-{kind}"
        folder.mkdir()
        (folder / submit).write_text(SUBMIT.replace("OUTPUT", output))
        (folder / cancel).write_text(CANCEL)
        (folder / "squeue").write_text(QUERY)
        for name in (submit, cancel, "squeue"):
            (folder / name).chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_BATCH_DIR", str(folder))
        return folder
    return install


def jobs_ended(folder: Path, timeout: float = 10) -> bool:
    """Whether every submitted job's process group is gone (the cluster cancelled them)."""
    pids = [int(p) for p in (folder / "submitted").read_text().split()]
    deadline = time.time() + timeout
    while time.time() < deadline:
        alive = []
        for pid in pids:
            try:
                os.killpg(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.2)
    for pid in alive:
        os.killpg(pid, signal.SIGKILL)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("kind, block", [
    ("slurm", {"cores": 2, "memory": "1GB", "jobs": 1}),
    ("pbs", {"cores": 1, "memory": "1GB", "minimum_jobs": 0, "maximum_jobs": 2}),
    ("lsf", {"cores": 2, "processes": 1, "memory": "1GB", "jobs": 1}),
])
def test_whole_study_on_a_batch_system(study_dir, batch_system, kind, block):
    fake = batch_system(kind)
    cluster = json.dumps({"cluster": kind, "interface": "lo", **block})
    study = write_study(study_dir, STUDY.replace("SCHEDULER", cluster))
    result = studyrun.run(study, study_dir / "out", quiet=True, report=False)
    assert result.analysis["runs"] == {"planned": 60, "succeeded": 60, "failed": 0, "reused": 0}
    assert result.analysis["execution"]["scheduler"] == kind
    workers = set(result.runs["run.worker"])
    assert all(int(w.rsplit(":", 1)[1]) != os.getpid() for w in workers), "ran in the driver"
    assert jobs_ended(fake), "the jobs outlived the study"
    reference = studyrun.run(study, study_dir / "sync", scheduler="sync", quiet=True, report=False)
    assert result.results == reference.results


@pytest.mark.slow
def test_cluster_flag_on_the_command_line(study_dir, batch_system, capsys):
    fake = batch_system("slurm")
    block = json.dumps({"cluster": "pbs", "cores": 1, "memory": "1GB", "interface": "lo"})
    study = write_study(study_dir, STUDY.replace("SCHEDULER", block))
    status, _, errors = cli(capsys, "run", study, "--out", study_dir / "out", "--cluster", "slurm",
                            "--quiet")
    assert status == 0, errors
    analysis = json.loads((study_dir / "out" / "analysis.json").read_text())
    assert analysis["execution"]["scheduler"] == "slurm"
    assert (fake / "submitted").is_file() and jobs_ended(fake)
    # `studyrun plan` shows the job name the jobs were submitted with (squeue --name finds them)
    _, planned, _ = cli(capsys, "plan", study, "--out", study_dir / "out", "--cluster", "slurm")
    script = next(p for p in fake.glob("job-*") if p.suffix != ".log").read_text()
    name = next(line for line in script.splitlines() if line.startswith("#SBATCH -J "))
    assert name == f"#SBATCH -J {job_name(study_dir / 'out')}" and name in planned.splitlines()
    assert f"called {job_name(study_dir / 'out')} after the results folder" in planned


@pytest.mark.slow
def test_a_job_that_ends_early_is_replaced(study_dir, batch_system):
    """Guarantee: a batch job killed mid-study (walltime, a lost node, qdel) is replaced by a new
    job, even with a fixed number of jobs, and the study completes with nothing lost."""
    import threading

    import dask

    fake = batch_system("pbs")
    (study_dir / "slow.py").write_text(
        "import time\ndef model(a, b):\n    time.sleep(0.03)\n    return {'y': a - b}\n")
    block = json.dumps({"cluster": "pbs", "cores": 1, "memory": "1GB", "interface": "lo",
                        "jobs": 1})
    text = STUDY.replace("SCHEDULER", block).replace("linear:scalar_linear", "slow:model")
    study = write_study(study_dir, text.replace("samples: 60", "samples: 120"))
    out = study_dir / "out"

    def end_the_first_job():
        deadline = time.time() + 60
        while count_runs(out / "runs.sqlite") < 12 and time.time() < deadline:
            time.sleep(0.05)
        os.killpg(int((fake / "submitted").read_text().split()[0]), signal.SIGKILL)

    killer = threading.Thread(target=end_the_first_job, daemon=True)
    killer.start()
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1s"}):
        result = studyrun.run(study, out, quiet=True, report=False)
    killer.join()
    assert result.analysis["runs"]["succeeded"] == 120
    assert len((fake / "submitted").read_text().split()) >= 2, "no job replaced the lost one"
    assert len(set(result.runs["run.worker"])) >= 2
    assert jobs_ended(fake)


def test_ctrl_c_stays_a_keyboard_interrupt_once_dask_jobqueue_is_imported():
    """dask_jobqueue's import replaces Ctrl-C's handler with a silent sys.exit() (status 0): a
    cluster study's driver would stop as if it had finished. studyrun puts Python's back."""
    import subprocess
    import sys

    code = ("import signal; from studyrun.execution.clusters import cluster_class; cluster_class('slurm'); "
            "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(studyrun.__file__).parents[1])},
                          preexec_fn=signals_as())  # SIGINT as in a terminal, where Python
    assert done.stdout.strip() == "True", done.stderr  # makes it a KeyboardInterrupt
