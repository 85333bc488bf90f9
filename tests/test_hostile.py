"""A hostile study folder (issue 14.1): nothing in it runs code the study did not declare, nothing
a model prints drives the terminal, and no error quotes a file that is not a study or data file
or prints a 5,000-digit value in full. All through the real command line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli, write_study

ODE_STUDY = """
name: hostile-git
model:
  type: ode
  time: {start: 0, stop: 1, step: 0.5}
  states: {x: 1}
  rates: {x: -k * x}
  constants: {k: 1}
parameters:
  k: {bounds: [0.5, 1.5]}
quantities: {y: final(x)}
analysis: {type: montecarlo, samples: 4}
execution: {scheduler: sync}
"""
TRAPS = ("fsmonitor", "hook", "pager", "diff", "textconv", "clean", "process", "included", "ssh")


def git(folder: Path, *args: str) -> str:
    """A plain git call of the test's own (hooks and filters are set up only afterwards)."""
    return subprocess.run(["git", "-c", "core.hooksPath=/dev/null", *args], cwd=folder,
                          check=True, capture_output=True, text=True).stdout.strip()


def trap(folder: Path, name: str) -> str:
    """A script that leaves a marker file when run (and passes its input through)."""
    script = folder / f"trap-{name}.sh"
    script.write_text(f"#!/bin/sh\ntouch '{folder}/ran-{name}'\ncat\n")
    script.chmod(0o755)
    return str(script)


def hostile_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A committed study whose .git/config names a program for every hook git offers."""
    repo, traps = tmp_path / "repo", tmp_path / "traps"
    repo.mkdir(), traps.mkdir()
    write_study(repo, ODE_STUDY)
    (repo / "notes.txt").write_text("notes\n")
    (repo / "zz.dat").write_text("data\n")
    (repo / ".gitattributes").write_text("*.txt filter=evil diff=evil\n*.yaml filter=Other\n"
                                         "*.dat filter=proc\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "study")
    settings = {"core.fsmonitor": "fsmonitor", "core.pager": "pager", "pager.status": "pager",
                "diff.external": "diff", "diff.evil.textconv": "textconv",
                "filter.evil.clean": "clean", "filter.proc.process": "process",
                "core.sshCommand": "ssh"}
    for key, name in settings.items():
        git(repo, "config", key, trap(traps, name))
    git(repo, "config", "filter.evil.required", "true")
    included = traps / "included.cfg"  # a filter defined in a file the config includes
    included.write_text(f'[filter "Other"]\n\tclean = {trap(traps, "included")}\n')
    git(repo, "config", "include.path", str(included))
    hooks = repo / ".git" / "hooks"
    for hook in ("post-index-change", "reference-transaction", "pre-commit", "post-checkout"):
        shutil.copy(trap(traps, "hook"), hooks / hook)
    return repo, traps


def run_in(repo: Path) -> dict:
    out = repo.parent / "results"
    done = run_cli("run", "--no-report", repo / "study.yaml", "--out", out, "--quiet")
    assert done.returncode == 0, done.stderr
    return json.loads((out / "analysis.json").read_text())["provenance"]["git"]


@pytest.mark.slow
def test_a_hostile_git_config_runs_nothing_and_commit_and_dirty_are_right(tmp_path):
    repo, traps = hostile_repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    for path in repo.iterdir():  # stale stat data: git would re-read (and filter) every file
        path.touch()
    assert run_in(repo) == {"commit": head, "dirty": False}
    (repo / "notes.txt").write_text("changed\n")
    assert run_in(repo) == {"commit": head, "dirty": True}
    ran = sorted(p.name for p in traps.glob("ran-*"))
    assert ran == [], f"git ran the repository's programs: {ran}"
    assert not list(repo.glob("ran-*"))


def test_the_traps_do_fire_under_a_plain_git_status(tmp_path):
    """The test above can fail: the same repository makes a plain `git status` run them."""
    repo, traps = hostile_repo(tmp_path)
    for path in repo.iterdir():
        path.touch()
    subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True)
    fired = {p.name[4:] for p in traps.glob("ran-*")}
    assert {"fsmonitor", "clean", "included", "process"} <= fired, fired


@pytest.mark.slow
def test_outside_a_repository_the_report_says_so(tmp_path):
    write_study(tmp_path, ODE_STUDY)
    done = run_cli("run", tmp_path / "study.yaml", "--out", tmp_path / "results", "--quiet",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "results" / "report.md").read_text()
    assert "git None" not in report and "not in a git repository" in report


EVIL_OUTPUT = "boom \x1b[2J\x1b]0;pwned\x07 \x9b31m\r\nsecond line"
EVIL_COMMAND = f"import sys\nsys.stderr.write({EVIL_OUTPUT!r})\nsys.exit(3)\n"
EVIL_PYTHON = f"def model(k):\n    raise ValueError({EVIL_OUTPUT!r})\n"
STUDY = """
name: hostile-output
model: {model}
parameters:
  k: {{bounds: [0, 1]}}
analysis: {{type: montecarlo, samples: 3}}
execution: {{scheduler: sync, on_failure: {on_failure}}}
"""
MODELS = {"command": '{type: command, run: [python3, "{study_dir}/evil.py"], '
                     'params_file: params.json, results_file: results.json}',
          "python": "{type: python, function: evil:model}"}


@pytest.mark.slow
@pytest.mark.parametrize("model, on_failure", [("command", "abort"), ("command", "continue"),
                                               ("python", "abort"), ("python", "continue")])
def test_a_models_escape_sequences_never_reach_the_terminal(tmp_path, model, on_failure):
    (tmp_path / "evil.py").write_text(EVIL_COMMAND if model == "command" else EVIL_PYTHON)
    study = write_study(tmp_path, STUDY.format(model=MODELS[model], on_failure=on_failure))
    out = tmp_path / "results"
    outputs = [run_cli("run", "--no-report", study, "--out", out, "--quiet")]
    assert outputs[0].returncode == 1, outputs[0].stderr  # continue: no run succeeded
    outputs += [run_cli("runs", out, "--failed"), run_cli("status", out)]
    for done in outputs:
        text = done.stdout + done.stderr
        assert not set(text) & {"\x1b", "\x07", "\x9b", "\r"}, repr(text)
    shown = outputs[0].stderr if on_failure == "abort" else outputs[1].stdout
    assert "boom \\x1b[2J\\x1b]0;pwned\\x07 \\x9b31m" in shown and "second line" in shown
    if model == "python":  # status shows each error's first line: here the model's own words
        assert "boom \\x1b[2J" in outputs[2].stdout


SURROGATE = '''
def model(k):
    if k > 0.5:
        raise ValueError(b"bad \\xff byte".decode("ascii", "surrogateescape"))
    return {"y": k}
'''


def test_a_model_error_holding_a_lone_surrogate_is_kept_as_its_escape(tmp_path):
    """A model's message about bytes it decoded with surrogateescape holds a lone surrogate,
    which UTF-8 cannot encode: the run fails with it shown as its escape (in runs.csv and
    `studyrun runs`), and the study ends as any other; writing runs.csv raised before. A store
    written elsewhere with the surrogate in it is read the same way."""
    import sqlite3

    (tmp_path / "surrogate.py").write_text(SURROGATE)
    study = write_study(tmp_path, STUDY.replace("samples: 3", "samples: 12").format(
        model="{type: python, function: surrogate:model}", on_failure="continue"))
    out = tmp_path / "results"
    done = run_cli("run", study, "--out", out, "--quiet")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "ValueError: bad \\udcff byte" in (out / "runs.csv").read_text(encoding="utf-8")
    assert "bad \\udcff byte" in run_cli("runs", out, "--failed").stdout
    with sqlite3.connect(out / "runs.sqlite") as db:
        db.execute("UPDATE batches SET errors = replace(errors, '\\\\udcff', '\\udcfe') "
                   "WHERE errors IS NOT NULL")
    listed = run_cli("runs", out, "--failed")
    assert listed.returncode == 0 and "bad \\udcfe byte" in listed.stdout, listed.stderr


PRINTING_PYTHON = f"""import sys
print({EVIL_OUTPUT!r}, flush=True)  # on import
def model(k):
    print({EVIL_OUTPUT!r}, flush=True)
    sys.stderr.write({EVIL_OUTPUT!r} + "\\n")
    sys.stderr.flush()
    return k
"""


@pytest.mark.slow
@pytest.mark.parametrize("execution", ["{scheduler: local, workers: 2, batch_size: 2}",
                                       "{scheduler: local, workers: 2}",
                                       "{scheduler: threads, workers: 2}", "{scheduler: sync}"])
def test_a_python_models_own_prints_reach_the_terminal_escaped(tmp_path, execution):
    """A python model's print() and sys.stderr.write, on import and in each run, in a
    LocalCluster's workers (batch_size: 2), the pilot's child process (auto), threads or the
    driver itself, reach the driver's stdout and stderr with control characters escaped."""
    (tmp_path / "evil.py").write_text(PRINTING_PYTHON)
    text = STUDY.format(model=MODELS["python"], on_failure="abort")
    study = write_study(tmp_path, text.replace("{scheduler: sync, on_failure: abort}", execution))
    done = run_cli("run", "--no-report", study, "--out", tmp_path / "results", "--quiet")
    assert done.returncode == 0, done.stderr
    analysis = json.loads((tmp_path / "results" / "analysis.json").read_text())
    if "batch_size: 2" in execution:
        assert analysis["execution"]["scheduler"] == "local"  # the runs went to its workers
    for shown in (done.stdout, done.stderr):
        assert not set(shown) & {"\x1b", "\x07", "\x9b", "\r"}, repr(shown)
        assert "boom \\x1b[2J\\x1b]0;pwned\\x07 \\x9b31m\\r" in shown, repr(shown)


@pytest.mark.slow
def test_a_model_file_that_is_not_yaml_is_named_not_quoted(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    for target in ("/etc/passwd", secret):
        study = write_study(tmp_path, ODE_STUDY.replace(
            "model:\n  type: ode\n", f"model: {{file: {target}}}\nx:\n  type: ode\n"))
        done = run_cli("validate", study)
        assert done.returncode == 2
        assert "root:" not in done.stderr and f"{target} is not a YAML file" in done.stderr
        assert done.stderr.startswith(f"{study}:2:")


@pytest.mark.slow
def test_a_5000_digit_number_is_cut_in_the_message(tmp_path):
    huge = "1" + "0" * 4999
    bounds = [huge, f"'{huge}'", huge[:4000]]  # beyond int-from-text, text, beyond a float
    studies = [write_study(tmp_path, ODE_STUDY.replace("[0.5, 1.5]", f"[0.5, {bound}]"),
                           f"study{i}.yaml") for i, bound in enumerate(bounds)]
    done = run_cli("validate", *studies)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 3 and all(len(line) < 300 for line in lines), lines
    assert "5,000 digits" in lines[0] and "too large" in lines[0]
    assert "a number of 5,000 digits" in lines[1]
    assert "4,000 digits" in lines[2] and "too large" in lines[2]


def test_cut_values_cuts_values_and_leaves_prose_alone():
    from studyrun.core.text import cut_values, terminal_safe

    prose = "the model's " + "word " * 40 + "isn't cut; unknown key 'x' (" + "a, " * 40 + "'b')"
    assert cut_values(prose) == prose
    long_text = "x" * 1000
    assert cut_values(f"got {long_text!r}; try again") == f"got '{'x' * 76}...' (1,000 characters); try again"
    assert cut_values(f"got {10**200}") == "got a number of 201 digits"
    assert terminal_safe("a\x1b[2J\tb\r\nc\x9b\u202e") == "a\\x1b[2J\tb\\r\nc\\x9b\\u202e"


def test_only_what_the_models_thread_prints_is_escaped(capsys):
    """Under `threads` the driver's main thread writes (its progress bar redraws with \\r) while
    a model's thread runs: only the model's text is escaped, and the streams are given back."""
    import sys
    import threading

    from studyrun.core.prints import escaped_prints

    streams = (sys.stdout, sys.stderr)
    inside, release = threading.Event(), threading.Event()

    def model():
        with escaped_prints():
            print("\x1b[2Jmodel")
            print("\x1b]0;pwned\x07", file=sys.stderr)
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=model)
    thread.start()
    assert inside.wait(10)
    sys.stdout.write("\rdriver\n")
    release.set()
    thread.join()
    assert (sys.stdout, sys.stderr) == streams
    out, err = capsys.readouterr()
    assert out == "\\x1b[2Jmodel\n\rdriver\n" and err == "\\x1b]0;pwned\\x07\n"


@pytest.mark.slow
def test_a_template_that_is_not_text_is_an_error_not_a_traceback(tmp_path):
    (tmp_path / "evil.py").write_text(EVIL_COMMAND)
    (tmp_path / "in.tmpl").write_bytes(b"\xff\xfe\x00k={k}")
    model = MODELS["command"].replace("params_file: params.json",
                                      "params_file: {template: in.tmpl, file: in.txt}")
    study = write_study(tmp_path, STUDY.format(model=model, on_failure="abort"))
    done = run_cli("run", "--no-report", study, "--out", tmp_path / "results", "--quiet")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "in.tmpl: not a UTF-8 text file" in done.stderr


OUTSIDE = """
name: outside
{model}
parameters:
  k: {{bounds: [0.5, 1.5]}}
quantities: {{y: final(x)}}
analysis: {analysis}
execution: {{scheduler: sync}}
"""
ODE = ("model: {type: ode, time: {start: 0, stop: 1, step: 0.5}, states: {x: 1}, "
       "rates: {x: -k * x}, constants: {k: 1}}")
MONTECARLO = "{type: montecarlo, samples: 2}"
PRIVATE = {  # a private file's text, that each reader fails on and used to quote
    "yaml": "root:x:0:0:root:/root:/bin/bash\nSECRET_TOKEN=hunter2-ab12cd34ef56\n",
    "csv": "root:x:0:0:root:/root:/bin/bash\nSECRET_TOKEN=hunter2-ab12cd34ef56\n",
    "tmpl": "k = {k}\n{SECRET_TOKEN}\n",
    "mdl": "{UTF-8}\nx = 1 ]SECRET_TOKEN=hunter2-ab12cd34ef56\n~~|\n",
}
CASES = {  # link in the study's folder -> (private file, model block, analysis block, command)
    "model.yaml": ("yaml", "model: {file: model.yaml}", MONTECARLO, "validate"),
    "data.csv": ("csv", ODE, "{type: calibrate, data: {file: data.csv, format: wide, x: time}}",
                 "validate"),
    "runs.csv": ("csv", ODE, "{type: delta, from: runs.csv}", "validate"),
    "design.csv": ("csv", ODE, "{type: doe, design: csv, file: design.csv}", "plan"),
    "in.tmpl": ("tmpl", "model: {type: command, run: [python3, prog.py], params_file: "
                        "{template: in.tmpl, file: in.txt}, results_file: out.json}",
                MONTECARLO, "validate"),
    "model.mdl": ("mdl", "model: {type: pysd, file: model.mdl}", MONTECARLO, "validate"),
}


@pytest.mark.slow
@pytest.mark.parametrize("link", list(CASES))
def test_a_file_linked_from_outside_the_study_folder_is_named_never_quoted(tmp_path, monkeypatch,
                                                                            link):
    """A model, data, design or template file that links to a private file outside the study's
    folder: the error names the link and where, never a line of the private file (it quoted its
    first line, a header or a template's field); the same file inside the folder is quoted."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # PySD's translations
    kind, command = CASES[link][0], CASES[link][3]
    study = outside_study(tmp_path, link)
    folder = study.parent
    done = run_cli(command, study, cwd=folder)
    assert done.returncode == (1 if command == "run" else 2), done.stderr
    assert "Traceback" not in done.stderr
    for secret in ("root:", "SECRET_TOKEN", "hunter2"):
        assert secret not in done.stdout + done.stderr, done.stderr
    assert link in done.stderr or "secret.csv" in done.stderr, done.stderr
    assert "outside the study's folder" in done.stderr, done.stderr
    if command == "validate":  # the same file in the study's folder: its mistake in full
        (folder / link).unlink()
        (folder / link).write_text(PRIVATE[kind])
        done = run_cli(command, study, cwd=folder)
        assert done.returncode == 2 and "outside the study's folder" not in done.stderr
        assert "root:x:0:0" in done.stderr or "SECRET_TOKEN" in done.stderr, done.stderr


def outside_study(tmp_path: Path, link: str) -> Path:
    """A study folder whose `link` points to a private file outside it (CASES)."""
    kind, model, analysis, _ = CASES[link]
    private, folder = tmp_path / "private", tmp_path / "study"
    private.mkdir()
    folder.mkdir()
    (private / f"secret.{kind}").write_text(PRIVATE[kind])
    (folder / link).symlink_to(private / f"secret.{kind}")
    return write_study(folder, OUTSIDE.format(model=model, analysis=analysis))


def test_the_python_api_names_a_file_outside_the_study_folder_never_quotes_it(tmp_path):
    """studyrun.run reads the design file at plan time, after the study validated: its error
    named the link and quoted the private file's first line, where `studyrun run` names it only."""
    import studyrun

    study = outside_study(tmp_path, "design.csv")
    with pytest.raises(studyrun.StudyError) as raised:
        studyrun.run(study, tmp_path / "results", report=False)
    message = str(raised.value)
    assert "design.csv:1:1" in message and "outside the study's folder" in message, message
    for secret in ("root:", "SECRET_TOKEN", "hunter2"):
        assert secret not in message, message


def test_the_mistakes_of_a_file_outside_the_folder_are_counted_once_named(tmp_path):
    """An included model file outside the folder with two mistakes: `plan` said "a mistake" (the
    line saying "2 mistakes" was itself hidden again, as a mistake of that file)."""
    private = tmp_path / "private"
    private.mkdir()
    (private / "model.yaml").write_text("type: ode\ntime: {start: 0, stop: 1, step: 0.5}\n"
                                        "states: {x: 1}\nrates: {x: -k * x}\nconstants: {k: 1}\nbogus: 1\nbogus2: 2\n")
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "model.yaml").symlink_to(private / "model.yaml")
    study = write_study(tmp_path / "study", OUTSIDE.format(model="model: {file: model.yaml}",
                                                           analysis=MONTECARLO))
    for command in ("validate", "plan"):
        done = run_cli(command, study, cwd=tmp_path / "study")
        assert done.returncode == 2, done.stderr
        assert "2 mistakes in this file" in done.stderr, (command, done.stderr)
        assert "bogus" not in done.stderr, done.stderr


def test_within_follows_links_of_the_file_and_of_the_folder(tmp_path):
    """core/paths.within, the one check that a file lies in a folder: a `../` path and a link to a
    file elsewhere are outside; a folder named through a link still holds its files."""
    from studyrun.core.paths import within

    (tmp_path / "study").mkdir()
    (tmp_path / "private").write_text("secret")
    (tmp_path / "study" / "data.csv").write_text("x\n1\n")
    (tmp_path / "study" / "link.csv").symlink_to(tmp_path / "private")
    (tmp_path / "alias").symlink_to(tmp_path / "study")
    assert within(tmp_path / "study" / "data.csv", tmp_path / "study")
    assert within(tmp_path / "study" / "data.csv", tmp_path / "alias")
    assert within(tmp_path / "alias" / "data.csv", tmp_path / "other", tmp_path / "study")
    assert not within(tmp_path / "study" / "link.csv", tmp_path / "study")
    assert not within(tmp_path / "study" / ".." / "private", tmp_path / "study")
    assert not within(f"{tmp_path}/study/a\0b", tmp_path / "study")
