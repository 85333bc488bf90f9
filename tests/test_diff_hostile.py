"""`studyrun diff --rev` against a hostile repository or revision (issue 28.2): git runs no
program the repository names, a revision is never read as an option, nothing of a revision runs
unless --results asks for its results, only the files the study names are read, and the results
folder given is only read. Real git repositories, through the real command line."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli, write_study

import studyrun

MARKERS = ("smudge", "clean", "process", "fsmonitor", "hook", "textconv", "diff", "pager",
           "ssh", "ext", "imported")
PYTHON_STUDY = """
name: marked
seed: 3
model: {type: python, function: model:f, vectorized: true}
parameters:
  x: {distribution: uniform, low: 0, high: 1}
quantities: {y: value}
analysis: {type: montecarlo, samples: 8}
execution: {scheduler: sync, depends_on: [data/*.csv]}
"""
ODE_STUDY = """
name: decay
model: {type: ode, time: {start: 0, stop: 1, step: 0.5}, states: {n: 1}, rates: {n: -k * n},
        constants: {k: 1}}
parameters:
  k: {bounds: [0.5, 1.5]}
quantities: {y: final(n)}
analysis: {type: montecarlo, samples: 4}
execution: {scheduler: sync, depends_on: [data.txt]}
"""


def git(repo: Path, *args: str) -> str:
    """The test's own git call (the repository's traps are set up only afterwards)."""
    return subprocess.run(["git", "-c", "core.hooksPath=/dev/null", "-c", "user.name=t", "-c",
                           "user.email=t@t", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def trap(traps: Path, name: str) -> str:
    """A program that leaves the marker ran-NAME when run (and passes its input through)."""
    script = traps / f"trap-{name}.sh"
    script.write_text(f"#!/bin/sh\ntouch '{traps}/ran-{name}'\ncat\n")
    script.chmod(0o755)
    return str(script)


def ran(traps: Path) -> list[str]:
    return sorted(p.name for p in traps.glob("ran-*"))


def python_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A committed python-model study whose module, when imported, leaves a marker; it imports a
    helper, a package's module that imports its sibling relatively, and reads a data file."""
    repo, traps = tmp_path / "repo", tmp_path / "traps"
    (repo / "pkg").mkdir(parents=True)
    (repo / "data").mkdir()
    traps.mkdir()
    write_study(repo, PYTHON_STUDY)
    (repo / "model.py").write_text(
        f"import pathlib\npathlib.Path({str(traps / 'ran-imported')!r}).touch()\n"
        "import helper\nfrom pkg import scale\n\n"
        "def f(x, rng=None):  # declares rng: asked whether it draws, nothing is imported\n"
        "    return helper.offset() + scale.factor() * x\n")
    (repo / "helper.py").write_text("def offset():\n    return 1.0\n")
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "scale.py").write_text("from . import base\n\ndef factor():\n"
                                           "    return base.FACTOR\n")
    (repo / "pkg" / "base.py").write_text("FACTOR = 2.0\n")
    (repo / "data" / "a.csv").write_text("a\n1\n")
    (repo / ".gitignore").write_text("results/\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "study")
    return repo, traps


def hostile_config(repo: Path, traps: Path) -> None:
    """Filters (smudge, clean, process) on every file the study needs, a diff driver, an
    fsmonitor, a pager, ssh, the ext transport allowed, and hooks: each a program leaving a
    marker."""
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n*.csv filter=proc\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    settings = {"filter.evil.smudge": "smudge", "filter.evil.clean": "clean",
                "filter.proc.process": "process", "core.fsmonitor": "fsmonitor",
                "diff.evil.textconv": "textconv", "diff.external": "diff",
                "core.pager": "pager", "core.sshCommand": "ssh"}
    for key, name in settings.items():
        git(repo, "config", key, trap(traps, name))
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "protocol.ext.allow", "always")
    hooks = repo / ".git" / "hooks"
    for hook in ("post-checkout", "post-index-change", "reference-transaction", "pre-commit"):
        (hooks / hook).write_text(Path(trap(traps, "hook")).read_text())
        (hooks / hook).chmod(0o755)
    for path in repo.rglob("*"):  # stale stat data: a status would re-read (and clean) each
        if ".git" not in path.parts:
            os.utime(path)


@pytest.mark.slow
def test_the_repositorys_filters_hooks_and_fsmonitor_run_nothing(tmp_path):
    repo, traps = python_repo(tmp_path)
    hostile_config(repo, traps)
    (repo / "helper.py").write_text("def offset():\n    return 3.0\n")
    done = run_cli("diff", "study.yaml", "--rev", "HEAD", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert ran(traps) == [], f"git or the model ran: {ran(traps)}"
    found = json.loads(done.stdout)
    assert [c["key"] for c in found["study"]["files"]] == ["files.helper.py"]
    assert found["runs"] == {"a": 8, "b": 8, "shared": 0}


@pytest.mark.slow
@pytest.mark.parametrize("revision", ["--output={victim}", "--list",
                                      "--remote=ext::sh -c touch% {traps}/ran-ext", "-h"])
def test_a_revision_is_never_read_as_an_option(tmp_path, revision):
    repo, traps = python_repo(tmp_path)
    git(repo, "config", "protocol.ext.allow", "always")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    revision = revision.format(victim=victim, traps=traps)
    done = run_cli("diff", "study.yaml", f"--rev={revision}", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "cannot start with '-'" in done.stderr, done.stderr
    assert victim.read_text() == "keep me\n"
    assert ran(traps) == []


@pytest.mark.slow
@pytest.mark.parametrize("revision", ["nowhere", "HEAD:study.yaml", "HEAD~5"])
def test_a_revision_that_names_no_commit_is_one_line(tmp_path, revision):
    repo, _ = python_repo(tmp_path)
    done = run_cli("diff", "study.yaml", "--rev", revision, cwd=repo)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "names no commit" in done.stderr, done.stderr


@pytest.mark.slow
def test_without_results_nothing_of_the_revision_or_the_study_is_imported(tmp_path):
    repo, traps = python_repo(tmp_path)
    (repo / "pkg" / "base.py").write_text("FACTOR = 3.0\n")
    done = run_cli("diff", "study.yaml", "--rev", "HEAD", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert ran(traps) == [], "the model's module was imported"
    assert "files.pkg/base.py:" in done.stdout, done.stdout
    assert "runs: a 8, b 8, shared by identity 0" in done.stdout
    assert "the model was not imported" in done.stdout


@pytest.mark.slow
def test_with_results_the_revision_runs_and_the_results_folder_is_only_read(tmp_path):
    """--results runs the revision's study (its module and the modules it imports, read from the
    revision); the results folder given keeps its listing, bytes and time stamps."""
    repo, traps = python_repo(tmp_path)
    results = tmp_path / "current"
    for factor in (2, 3):  # the runs of HEAD's study, then those of the study now
        (repo / "pkg" / "base.py").write_text(f"FACTOR = {factor}.0\n")
        assert run_cli("run", "study.yaml", "--out", results, "--quiet", "--no-report",
                       cwd=repo).returncode == 0
    (traps / "ran-imported").unlink()

    def state(folder: Path) -> dict:
        files = {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
                 for p in sorted(folder.rglob("*")) if p.is_file()}
        return {"files": files, "folder": folder.stat().st_mtime_ns}

    before = state(results)
    done = run_cli("diff", "study.yaml", "--rev", "HEAD", "--results", results, "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    changed = {c["key"]: c for c in json.loads(done.stdout)["results"]["changed"]}
    assert changed["y.mean"]["b"] > changed["y.mean"]["a"]  # FACTOR 3 now, 2 at HEAD
    assert "ran-imported" in ran(traps)  # what --results is for: the revision's study ran
    assert state(results) == before

    storeless = tmp_path / "storeless"  # a folder without its store: none is made in it
    shutil.copytree(results, storeless)
    (storeless / "runs.sqlite").unlink()
    before = state(storeless)
    done = run_cli("diff", "study.yaml", "--rev", "HEAD", "--results", storeless, cwd=repo)
    assert done.returncode == 2 and "no runs.sqlite here" in done.stderr, done.stderr
    assert state(storeless) == before


@pytest.mark.slow
def test_a_file_the_study_does_not_name_is_never_read(tmp_path):
    """A committed file whose object is gone (as in a partial clone, where reading it would
    fetch it): a study that does not name it is compared all the same."""
    repo, _ = python_repo(tmp_path)
    (repo / "large.bin").write_bytes(os.urandom(1 << 20))
    git(repo, "add", "large.bin")
    git(repo, "commit", "-qm", "large")
    oid = git(repo, "rev-parse", "HEAD:large.bin")
    (repo / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
    (repo / "large.bin").unlink()
    done = run_cli("diff", "study.yaml", "--rev", "HEAD", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "shared by identity 8" in done.stdout


@pytest.mark.slow
def test_a_file_the_study_names_beyond_the_size_bound_is_refused(tmp_path):
    from studyrun.study.revision import MAX_FILE

    repo = tmp_path / "repo"
    repo.mkdir()
    write_study(repo, ODE_STUDY)
    with open(repo / "data.txt", "wb") as handle:
        handle.truncate(MAX_FILE + 1)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "study")
    done = run_cli("diff", "study.yaml", "--rev", "HEAD", cwd=repo)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert f"data.txt at HEAD has {MAX_FILE + 1:,} bytes" in done.stderr, done.stderr


def starts_a_program(node: ast.AST, programs: tuple[str, ...]) -> bool:
    """An argv list or tuple whose first item is one of the programs, or a call whose first
    argument is a command line starting with one (`os.system("git ...")`, `shutil.which("git")`)."""
    def named(item: ast.AST) -> bool:
        if isinstance(item, ast.JoinedStr) and item.values:
            item = item.values[0]
        return (isinstance(item, ast.Constant) and isinstance(item.value, str)
                and item.value.split(" ")[0] in programs)

    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        return named(node.elts[0])
    if not (isinstance(node, ast.Call) and node.args):
        return False
    function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    return function in LAUNCHERS and named(node.args[0])


LAUNCHERS = {"run", "Popen", "call", "check_call", "check_output", "getoutput",
             "getstatusoutput", "system", "popen", "which", "execvp", "execlp", "spawnlp",
             "create_subprocess_exec", "create_subprocess_shell"}


def test_only_the_git_module_starts_git():
    """Every git call goes through studyrun/core/git.py, the hardened runner: no other module starts
    git, and none starts tar."""
    package = Path(studyrun.__file__).parent
    callers = {path.relative_to(package).as_posix()
               for path in package.rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text(), str(path)))
               if starts_a_program(node, ("git", "tar"))}
    assert callers == {"core/git.py"}, callers


@pytest.mark.slow
@pytest.mark.parametrize("where", ["absolute", "relative"])
def test_a_model_file_outside_the_repository_is_not_shown_as_the_revisions(tmp_path, where):
    """A revision whose study includes a YAML file of this machine: its values would be printed
    as the revision's model; it is refused, and nothing of the file is shown."""
    repo, _ = python_repo(tmp_path)
    secret = tmp_path / "secret.yaml"
    secret.write_text("type: python\nfunction: model:f\ntoken: hunter2\n")
    target = secret if where == "absolute" else "../secret.yaml"
    (repo / "study.yaml").write_text(PYTHON_STUDY.replace(
        "model: {type: python, function: model:f, vectorized: true}", f"model: {{file: {target}}}"))
    git(repo, "commit", "-qam", "a shared model")
    (repo / "study.yaml").write_text(PYTHON_STUDY)
    done = run_cli("diff", "study.yaml", "--rev", "HEAD", cwd=repo)
    assert done.returncode == 2 and "hunter2" not in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "is outside the repository" in done.stderr, done.stderr
