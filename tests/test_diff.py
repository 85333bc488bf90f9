"""studyrun diff on real results folders and on revisions of a real git repository."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import STUDIES, run_cli, write_study

import studyrun

MONTECARLO = """
name: ishigami
seed: 3
model: {type: python, function: ishigami:ishigami, vectorized: true}
parameters:
  x1: {distribution: uniform, low: -3.141592653589793, high: 3.141592653589793}
  x2: {distribution: uniform, low: -3.141592653589793, high: 3.141592653589793}
  x3: {distribution: uniform, low: -3.141592653589793, high: 3.141592653589793}
quantities: {y: value}
analysis: {type: montecarlo, samples: 256, sampling: sobol}
execution: {scheduler: sync}
"""


def folder_of(tmp_path, name: str, text: str):
    (tmp_path / "ishigami.py").write_text((STUDIES / "ishigami.py").read_text())
    out = tmp_path / name
    studyrun.run(write_study(tmp_path, text, f"{name}.yaml"), out)
    return out


@pytest.mark.slow
def test_two_folders_show_the_study_change_shared_runs_and_every_moved_result(tmp_path):
    a = folder_of(tmp_path, "a", MONTECARLO)
    b = folder_of(tmp_path, "b", MONTECARLO.replace("samples: 256", "samples: 512"))
    done = run_cli("diff", a, b, "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["study"] == {"analysis": [{"key": "analysis.samples", "a": 256, "b": 512}]}
    assert found["runs"] == {"a": 256, "b": 512, "shared": 256}  # a Sobol' sequence's prefix
    changed = {c["key"]: c for c in found["results"]["changed"]}
    before, after = (studyrun.open_results(f).results["y"] for f in (a, b))
    assert changed["y.mean"]["a"] == before["mean"] and changed["y.mean"]["b"] == after["mean"]
    assert changed["y.n"]["change"] == 256
    assert found["results"]["compared"] > len(changed) > 5
    guarded = run_cli("diff", a, b, "--fail-above", "1e-9")
    assert guarded.returncode == 1 and "BEYOND" in guarded.stdout
    assert "analysis.samples: 256 -> 512" in guarded.stdout
    assert run_cli("diff", a, b, "--fail-above", "1e9").returncode == 0
    same = run_cli("diff", a, a, "--fail-above", "0")
    assert same.returncode == 0 and "study: the same" in same.stdout, same.stdout


@pytest.mark.slow
def test_sobol_results_are_judged_by_their_intervals(tmp_path):
    sobol = MONTECARLO.replace("{type: montecarlo, samples: 256, sampling: sobol}",
                               "{type: sobol, samples: 512}")
    a = folder_of(tmp_path, "a", sobol)
    b = folder_of(tmp_path, "b", sobol.replace("seed: 3", "seed: 4"))
    found = json.loads(run_cli("diff", a, b, "--json").stdout)
    changed = {c["key"]: c for c in found["results"]["changed"]}
    s1 = changed["y.S1.x1"]
    confs = [studyrun.open_results(f).results["y"]["S1_conf"]["x1"] for f in (a, b)]
    assert s1["interval"] == pytest.approx(sum(confs))
    assert s1["beyond"] is (abs(s1["change"]) > s1["interval"])
    assert found["runs"]["shared"] == 0  # another seed: other runs
    assert "seed" in found["study"]
    # a large tolerance still fails on a result that moved beyond its intervals, and only then
    beyond = [c for c in changed.values() if c["interval"] is not None and abs(c["change"]) > c["interval"]]
    assert run_cli("diff", a, b, "--fail-above", "1e9").returncode == (1 if beyond else 0)


def committed_study(tmp_path):
    """A git repository holding the Monte Carlo study and its model, committed once; and the
    git command for it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(STUDIES / "ishigami.py", repo / "ishigami.py")
    (repo / "study.yaml").write_text(MONTECARLO)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    return repo, git


@pytest.mark.slow
def test_a_study_against_a_git_revision_of_itself(tmp_path):
    repo, git = committed_study(tmp_path)
    (repo / "study.yaml").write_text(MONTECARLO.replace("samples: 256", "samples: 1024").replace(
        "x3: {distribution: uniform, low: -3.141592653589793", "x3: {distribution: uniform, low: -3"))
    done = run_cli("diff", repo / "study.yaml", "--rev", "HEAD", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["study"]["analysis"] == [{"key": "analysis.samples", "a": 256, "b": 1024}]
    assert found["study"]["parameters"] == [
        {"key": "parameters.x3.low", "a": -3.141592653589793, "b": -3}]
    assert found["runs"] == {"a": 256, "b": 1024, "shared": 0}  # x3's box moved every run
    subprocess.run([*git, "commit", "-qam", "second"], check=True)
    (repo / "study.yaml").write_text(MONTECARLO.replace("samples: 256", "samples: 1024").replace(
        "x3: {distribution: uniform, low: -3.141592653589793", "x3: {distribution: uniform, low: -3")
        + "# a comment changes nothing\n")
    text = run_cli("diff", repo / "study.yaml", "--rev", "HEAD")
    assert text.returncode == 0 and "study: the same" in text.stdout
    assert "shared by identity 1,024" in text.stdout
    first = run_cli("diff", repo / "study.yaml", "--rev", "HEAD~1")
    assert "runs: a 256, b 1,024, shared by identity 0" in first.stdout


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["nowhere", "elsewhere"], "nowhere: no analysis.json here"),
    (["only-one"], "studyrun diff takes two results folders"),
    (["study.yaml", "--rev", "HEAD"], "failed in"),
])
def test_wrong_input_is_a_clear_error(tmp_path, args, message):
    (tmp_path / "study.yaml").write_text(MONTECARLO)
    done = run_cli("diff", *args, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr, done.stderr


@pytest.mark.slow
def test_a_revisions_results_are_run_beside_the_current_ones_and_compared(tmp_path):
    repo, git = committed_study(tmp_path)
    (repo / "study.yaml").write_text(MONTECARLO.replace("samples: 256", "samples: 512"))
    current = studyrun.run(repo / "study.yaml", tmp_path / "current")
    done = run_cli("diff", repo / "study.yaml", "--rev", "HEAD", "--results", tmp_path / "current",
                   "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    changed = {c["key"]: c for c in found["results"]["changed"]}
    assert changed["y.n"]["a"] == 256 and changed["y.n"]["b"] == 512
    assert changed["y.mean"]["b"] == current.results["y"]["mean"]
    assert any("reusing 256 runs" in note for note in found["notes"]), found["notes"]
    guarded = run_cli("diff", repo / "study.yaml", "--rev", "HEAD", "--results",
                      tmp_path / "current", "--fail-above", "1e-12")
    assert guarded.returncode == 1 and "BEYOND" in guarded.stdout


def test_output_cut_short_by_its_reader_ends_quietly(tmp_path):
    """`studyrun ... | head`: the reader closes the pipe; no error about the results folder."""
    import sys

    process = subprocess.Popen([sys.executable, "-m", "studyrun", "schema"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    process.stdout.close()  # as `head` does once it has its lines (the schema is ~100 kB)
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 1
    assert stderr == "", stderr
