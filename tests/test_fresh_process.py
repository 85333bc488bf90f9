"""The commands that read a results folder, each in a process that imported nothing before it
(run_cli's processes are forked from one that imported the whole pipeline, which hid a reader
that needed the analysis types defined by an earlier import)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import write_study

import studyrun

STUDY = """
name: fresh
seed: 1
model: {type: python, function: "linear:linear"}
parameters: {a: {bounds: [0, 1]}, b: {bounds: [0, 1]}}
analysis: {type: montecarlo, samples: 8}
execution: {scheduler: sync}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from conftest import LINEAR_MODEL

    folder = tmp_path_factory.mktemp("fresh")
    (folder / "linear.py").write_text(LINEAR_MODEL)
    out = folder / "out"
    studyrun.run(write_study(folder, STUDY), out, quiet=True, report=False)
    return out


@pytest.mark.parametrize("args", [["diff", "{out}", "{out}"], ["status", "{out}"],
                                  ["runs", "{out}", "--limit", "2"], ["report", "{out}"]])
def test_a_command_reads_a_results_folder_in_a_fresh_process(results, args):
    """Fails before (diff): RuntimeError 'no analysis type is registered', a traceback."""
    done = subprocess.run([sys.executable, "-m", "studyrun", *(a.format(out=results) for a in args)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_the_python_api_opens_a_results_folder_in_a_fresh_process(results):
    """Fails before: studyrun.open_results raised RuntimeError in a process that had not
    imported the study's specification first."""
    code = f"import studyrun; print(studyrun.open_results({str(results)!r}).analysis['study'])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "fresh", done.stderr


def test_a_file_a_model_never_closed_is_written_when_the_command_ends(tmp_path):
    """`studyrun` ends without tearing its modules down (cli.end): a file a model left open in
    the process still gets every line it was given, as the interpreter's teardown would flush."""
    from conftest import run_cli

    (tmp_path / "leaky.py").write_text(
        "import io\n"
        "LOG = open('calls.txt', 'a')  # never closed\n"
        "class Broken(io.RawIOBase):  # a file whose flush fails: the command still ends well\n"
        "    def writable(self):\n        return True\n"
        "    def flush(self):\n        raise RuntimeError('cannot flush')\n"
        "BROKEN = Broken()\n"
        "def f(a):\n    LOG.write(f'{a!r}\\n')\n    return a\n")
    path = write_study(tmp_path, STUDY.replace("linear:linear", "leaky:f").replace(
        "b: {bounds: [0, 1]}", ""))
    done = run_cli("run", path, "--out", tmp_path / "out", "--no-report", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "calls.txt").read_text().splitlines()
    assert len(lines) >= 8 and len(set(lines)) == 8
