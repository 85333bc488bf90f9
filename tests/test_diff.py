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
    studyrun.run(write_study(tmp_path, text, f"{name}.yaml"), out, report=False)
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
def test_a_change_in_a_file_the_study_names_or_its_model_imports_is_a_change(tmp_path):
    """The model's module, and a model file the study includes, are the study too: a revision
    that changed only them says so, and why no run is shared."""
    repo, git = committed_study(tmp_path)
    (repo / "ishigami.py").write_text((repo / "ishigami.py").read_text() + "\n# edited\n")
    found = json.loads(run_cli("diff", repo / "study.yaml", "--rev", "HEAD", "--json").stdout)
    [change] = found["study"]["files"]
    assert change["key"] == "files.ishigami.py" and change["a"] != change["b"]
    assert found["runs"]["shared"] == 0
    a = folder_of(tmp_path, "a", MONTECARLO)
    (tmp_path / "ishigami.py").write_text((tmp_path / "ishigami.py").read_text() + "\n# edited\n")
    b = tmp_path / "b"
    studyrun.run(write_study(tmp_path, MONTECARLO, "b.yaml"), b, report=False)
    folders = json.loads(run_cli("diff", a, b, "--json").stdout)
    assert [c["key"] for c in folders["study"]["files"]] == ["files.ishigami.py"]

    subprocess.run([*git, "checkout", "-q", "ishigami.py"], check=True)
    (repo / "decay.yaml").write_text("type: ode\nstates: {n: n0}\nrates: {n: -k * n}\n"
                                     "constants: {n0: 10, k: 0.5}\ntime: {start: 0, stop: 1, step: 0.1}\n")
    (repo / "decay-study.yaml").write_text(
        "name: decay\nmodel: {file: decay.yaml}\nparameters:\n  k: {bounds: [0.1, 1]}\n"
        "quantities: {final_n: final(n)}\nanalysis: {type: sweep, levels: 4}\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "decay"], check=True)
    (repo / "decay.yaml").write_text((repo / "decay.yaml").read_text().replace("n0: 10", "n0: 12"))
    text = run_cli("diff", repo / "decay-study.yaml", "--rev", "HEAD")
    assert text.returncode == 0, text.stderr
    assert "model.constants.n0: 10 -> 12" in text.stdout and "shared by identity 0" in text.stdout


@pytest.mark.slow
def test_a_revision_of_a_study_that_grows_an_untracked_results_folder(tmp_path):
    """analysis.from names a results folder git does not track: the revision's study finds it
    where the current one does, and its results are compared."""
    repo = tmp_path / "repo"
    (repo / "studies").mkdir(parents=True)
    for name in ("bowl.py", "bowl-screen.yaml", "bowl-foldover.yaml"):
        shutil.copy(STUDIES / name, repo / "studies" / name)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("results/\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "studies"], check=True)
    for name in ("bowl-screen", "bowl-foldover"):
        assert run_cli("run", "--no-report", f"studies/{name}.yaml", "--quiet", cwd=repo).returncode == 0
    done = run_cli("diff", "studies/bowl-foldover.yaml", "--rev", "HEAD", "--results",
                   "results/bowl-foldover", "--fail-above", "0", cwd=repo)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "runs: a 8, b 8, shared by identity 8" in done.stdout
    assert "results: 0 of" in done.stdout


def test_many_changed_numbers_of_one_list_are_one_line_and_indices_sort_as_numbers():
    from studyrun.commands.diff import Difference, Moved, natural

    keys = [f"hypervolume.{i}" for i in range(12)]
    assert sorted(keys, key=natural)[:3] == ["hypervolume.0", "hypervolume.1", "hypervolume.2"]
    found = Difference("a", "b", results=[Moved(f"evaluated.{i}.{j}", 0.0, i + j / 10)
                                          for i in range(30) for j in range(2)]
                       + [Moved("y.mean", 1.0, 1.5)], compared=61)
    text = found.as_text(0.1)
    assert "  evaluated.*.*: 60 numbers changed, the largest by 29.1  BEYOND: 58 (" in text
    assert "  y.mean: 1 -> 1.5 (+0.5)  BEYOND" in text
    assert len(text.splitlines()) == 8


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["nowhere", "elsewhere"], "nowhere: no analysis.json here"),
    (["only-one"], "studyrun diff takes two results folders"),
    (["study.yaml", "--rev", "HEAD"], "failed in"),
    (["study.yaml", "results"], "study.yaml: a file, not a results folder"),
    (["study.yaml", "--rev", "HEAD", "--fail-above", "0"], "only with --results DIR"),
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
    current = studyrun.run(repo / "study.yaml", tmp_path / "current", report=False)
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


def test_a_results_folder_of_another_version_of_the_study_is_said_to_be_stale(tmp_path):
    """--results names the folder of the study as it was before its last edit (run at the
    revision, not since): its results are not the edited study's, and the comparison says so
    rather than show them as the current study's."""
    repo, git = committed_study(tmp_path)
    studyrun.run(repo / "study.yaml", tmp_path / "results", report=False)
    (repo / "study.yaml").write_text(MONTECARLO.replace("samples: 256", "samples: 512"))
    done = run_cli("diff", repo / "study.yaml", "--rev", "HEAD", "--results", tmp_path / "results",
                   "--json")
    assert done.returncode == 0, done.stderr
    notes = json.loads(done.stdout)["notes"]
    assert any("another version of the study file" in note for note in notes), notes


def test_output_cut_short_by_its_reader_ends_quietly(tmp_path):
    """`studyrun ... | head`: the reader closes the pipe; no error about the results folder."""
    import sys

    process = subprocess.Popen([sys.executable, "-m", "studyrun", "schema"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    process.stdout.close()  # as `head` does once it has its lines (the schema is ~100 kB)
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 1
    assert stderr == "", stderr
