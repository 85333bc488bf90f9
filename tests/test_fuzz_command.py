"""No parameter value, file name, template or argument of a `command` model reaches a shell or
writes outside the results folder and the runs' working directories (issue 8, point 4).

A whole study runs with shell syntax everywhere a user can put text (arguments, template,
environment); a snapshot of the folder tree around it shows that only the results folder
changed and that no sentinel file appeared. Hypothesis then throws file names with `..`,
absolute paths and shell syntax at `params_file`, `results_file` and the template's `file`:
each is refused at validation, or lands inside the run's working directory.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from test_fuzz_common import FAST, assert_located, examples

from studyrun.commands.pipeline import run_study
from studyrun.core.batch import RunContext
from studyrun.core.errors import StudyError
from studyrun.models.command import Command
from studyrun.study.loading import load_study

SENTINEL = Path("/tmp") / f"studyrun-pwned-{os.getpid()}"


def hostile(target: Path) -> list[str]:
    """Shell syntax that would create `target` if any shell ever saw it."""
    return [f"$(touch {target})", f"`touch {target}`", f"; touch {target}", f"| touch {target}",
            f"&& touch {target}", f"\n touch {target}", f"$(touch {target}){{x}}"]


PROGRAM = """\
import json, os, sys
params_file, results_file, *rest = sys.argv[1:]
expected = json.loads(open(sys.argv[0] + ".expected").read())
workdir = os.path.dirname(params_file)
literal = rest == [a.replace("{workdir}", workdir) for a in expected["argv"]]
with open(params_file) as f:
    text = f.read()
values = json.loads(text) if params_file.endswith(".json") else {}
with open(results_file, "w") as f:
    json.dump({"y": sum(values.values()) if values else 1.0, "argv_literal": float(literal),
               "env_literal": float(os.environ.get("HOSTILE") == expected["env"])}, f)
"""


def snapshot(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under root but `skip`: path -> (size, mtime_ns)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder) / d != skip]
        for name in dirs + files:
            info = (Path(folder) / name).lstat()
            found[str(Path(folder) / name)] = (info.st_size, info.st_mtime_ns)
    return found


@pytest.fixture
def sandbox(tmp_path):
    """study/ with the program, outside/ with a canary file, results/ for the run."""
    study = tmp_path / "study"
    study.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "canary.txt").write_text("keep me")
    (study / "prog.py").write_text(PROGRAM)
    return tmp_path


@pytest.mark.slow
def test_shell_syntax_everywhere_reaches_no_shell(sandbox):
    study, marker, results = sandbox / "study", sandbox / "pwned", sandbox / "results"
    args = [a for a in hostile(marker) + hostile(SENTINEL) if "{x}" not in a]
    args += ["../../outside/escape.txt", "{workdir}/../../outside/x", "*", "~", "$HOME"]
    (study / "prog.py.expected").write_text(json.dumps({"argv": args, "env": hostile(marker)[0]}))
    (study / "in.tmpl").write_text("\n".join(hostile(marker) + [
        "x = {x}", "where = {workdir}", "{unknown_brace text}", "${x}", "`{x}`"]))
    model = {"type": "command",
             "run": [sys.executable, "{study_dir}/prog.py", "{params_file}", "{results_file}", *args],
             "env": {"HOSTILE": hostile(marker)[0]}, "keep_workdirs": "all"}
    plain = {"name": "hostile", "model": model,
             "parameters": {"x": {"bounds": [0, 1]}, "y2": 3.5},
             "quantities": {"y": "y", "argv_literal": "argv_literal", "env_literal": "env_literal"},
             "analysis": {"type": "montecarlo", "samples": 4},
             "execution": {"scheduler": "sync", "on_failure": "continue"}}
    templated = dict(plain, name="hostile-template", quantities={"argv_literal": "argv_literal"},
                     model=dict(model, params_file={"template": "in.tmpl", "file": "sub/in.txt"}))
    (study / "plain.yaml").write_text(json.dumps(plain, indent=1))
    (study / "templated.yaml").write_text(json.dumps(templated, indent=1))
    before = snapshot(sandbox, results)

    analysis = run_study(study / "plain.yaml", results / "plain", quiet=True)
    assert analysis["runs"]["succeeded"] == 4, analysis
    assert analysis["results"]["argv_literal"]["min"] == 1.0  # every argument as written
    assert analysis["results"]["env_literal"]["min"] == 1.0
    analysis = run_study(study / "templated.yaml", results / "templated", quiet=True)
    assert analysis["runs"]["succeeded"] == 4, analysis

    assert not marker.exists() and not SENTINEL.exists()
    assert snapshot(sandbox, results) == before  # nothing written outside results/
    work = (results / "templated" / "work").resolve()
    written = list(work.rglob("in.txt"))
    assert len(written) == 4 and all(work in p.resolve().parents for p in written)
    content = written[0].read_text()
    assert hostile(marker)[0] in content and "{unknown_brace text}" in content
    assert "x = 0." in content and "where = " + str(written[0].parent.parent) in content


NAME_PARTS = st.sampled_from(["..", ".", "/", "a", "b.json", "results.json", "in.txt", "~", "//",
                              "$(touch x)", "`id`", ";", "*", "\\", "%2e%2e", "\u2215", "\x00",
                              "\n", " ", "..json", "x.csv", "/tmp", "/etc/passwd", "sub"])
FILE_NAMES = st.one_of(st.lists(NAME_PARTS, min_size=1, max_size=6).map("".join),
                       st.text(max_size=30))


def _inside(name: str, workdir: Path) -> bool:
    target = Path(os.path.normpath(workdir / name))
    return target == workdir or workdir in target.parents


@pytest.mark.slow
@settings(FAST, max_examples=examples(200))
@given(key=st.sampled_from(["params_file", "results_file", "template_file"]), name=FILE_NAMES)
def test_file_names_stay_inside_the_run_folder(key, name):
    """A file name is refused (a located error) or names a file inside the run's folder."""
    spec = {"type": "command", "run": ["true"]}
    if key == "template_file":
        spec["params_file"] = {"template": "in.tmpl", "file": name}
    else:
        spec[key] = name
    try:
        Command.model_validate(spec)
    except ValidationError:
        return
    assert name.isprintable(), f"{key}: {name!r} accepted"
    workdir = Path("/work/run-0000000000000001")
    assert _inside(name, workdir), f"{key}: {name!r} leaves the run's folder"


@pytest.mark.parametrize("key, name", [
    ("params_file", "../../outside/params.json"), ("params_file", "/tmp/params.json"),
    ("params_file", "sub/../../params.json"), ("results_file", "../results.json"),
    ("results_file", "/etc/results.json"), ("template_file", "../in.txt"),
    ("template_file", "/tmp/in.txt"), ("template_file", "a/../../in.txt"),
])
def test_file_names_leaving_the_run_folder_are_located_errors(sandbox, key, name):
    (sandbox / "study" / "in.tmpl").write_text("x = {x}\n")
    model = {"type": "command", "run": ["true"]}
    if key == "template_file":
        model["params_file"] = {"template": "in.tmpl", "file": name}
    else:
        model[key] = name
    text = {"name": "paths", "model": model, "parameters": {"x": {"bounds": [0, 1]}},
            "quantities": {"y": "y"}, "analysis": {"type": "montecarlo", "samples": 2}}
    path = sandbox / "study" / "paths.yaml"
    path.write_text(json.dumps(text, indent=1))
    with pytest.raises(StudyError) as caught:
        load_study(path)
    assert_located(caught.value)
    assert "inside the run's working directory" in str(caught.value)


@pytest.mark.parametrize("name", ["$(touch x)", "x; rm", "a b", "a.b", "x`id`", "None"])
def test_parameter_names_with_shell_syntax_are_refused(sandbox, name):
    text = {"name": "names", "model": {"type": "command", "run": ["true"]},
            "parameters": {name: {"bounds": [0, 1]}}, "analysis": {"type": "montecarlo",
                                                                     "samples": 2}}
    path = sandbox / "study" / "names.yaml"
    path.write_text(json.dumps(text, indent=1))
    with pytest.raises(StudyError) as caught:
        load_study(path)
    assert_located(caught.value)
    assert "cannot name a parameter" in str(caught.value)


@pytest.mark.slow
@settings(FAST, max_examples=examples(40))
@given(template=st.lists(st.one_of(st.sampled_from(hostile(SENTINEL) + [
    "{x}", "{workdir}", "{run_id}", "{params_file}", "{", "}", "{{", "}}", "{x", "x}", "$x",
    "${x}", "%s", "{0}", "{x!r}", "{x:>10}", "{x:d}", "{x:", "{run_id:q}", "\\", "\n"]),
    st.text(max_size=10)), max_size=12)
    .map("".join))
def test_templates_are_only_ever_text(template, tmp_path_factory):
    """A template is rendered into the run's folder as text: shell syntax stays text, only
    {name} or {name:spec} of a parameter or placeholder is replaced, and nothing runs; a
    malformed spec is an error located in the template."""
    folder = tmp_path_factory.mktemp("template")
    (folder / "in.tmpl").write_text(template)
    model = Command.model_validate({"type": "command", "run": ["true"], "keep_workdirs": "all",
                                    "params_file": {"template": "in.tmpl", "file": "in.txt"}})
    try:
        evaluator = model.build(folder)
    except StudyError as error:
        assert re.search(r"in\.tmpl:\d+:\d+: \{\w+:.*\}: ", str(error)), str(error)
        return
    work = folder / "work"
    out = evaluator({"x": [0.25]}, RunContext(run_ids=[1], workdir=work))
    assert not SENTINEL.exists()
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert all(p == folder / "in.tmpl" or work in p.parents for p in files)
    written = list(work.rglob("in.txt"))
    if written:
        text = written[0].read_text()
        assert "$(" not in template or "$(" in text
        assert "{x}" not in text or "{{x}}" in template  # filled in, unless written as text
    else:  # an unknown {name}, or a spec that does not fit, fails the batch and says so
        assert out.errors[0] and ("unknown name" in out.errors[0] or "does not fit" in out.errors[0])


@pytest.mark.parametrize("key, name, words", [
    ("params_file", "a\x00.json", "control characters"), ("results_file", "r\n.json", "control"),
    ("template_file", ".", "inside the run's working directory"),
    ("template_file", "./", "inside the run's working directory"),
])
def test_file_names_no_run_can_write_are_refused(key, name, words):
    """Regression: a NUL byte or a name with no file in it (`.`) passed validation and then
    failed every run (ValueError: embedded null byte; IsADirectoryError)."""
    spec = {"type": "command", "run": ["true"]}
    if key == "template_file":
        spec["params_file"] = {"template": "in.tmpl", "file": name}
    else:
        spec[key] = name
    with pytest.raises(ValidationError, match=words):
        Command.model_validate(spec)


@pytest.mark.parametrize("key, value, words", [
    ("run", ["x" * 300], "program not found"),
    ("run", ["/" + "x" * 300], "program not found"),
    ("params_file", {"template": "x" * 300, "file": "in.txt"}, "template file not found"),
    ("memory_limit", "1" * 400 + "GB", "too large"),
    ("memory_limit", 10**400, "too large"),
    ("memory_limit", "9" * 30 + "TiB", "too large"),
    ("env", {"A=B": "1"}, "environment variable"),
    ("env", {"": "1"}, "environment variable"),
    ("env", {"PATH": "a\x00b"}, "environment variable"),
])
def test_command_keys_that_crashed_validation_are_located(sandbox, key, value, words):
    """Regression: a program or template name too long raised OSError (ENAMETOOLONG) and a
    huge memory_limit OverflowError, out of `validate`; environment names with '=' or NUL
    passed validation and then failed every run."""
    model = {"type": "command", "run": ["true"], key: value}
    text = {"name": "keys", "model": model, "parameters": {"x": {"bounds": [0, 1]}},
            "quantities": {"y": "y"}, "analysis": {"type": "montecarlo", "samples": 2}}
    path = sandbox / "study" / "keys.yaml"
    path.write_text(json.dumps(text, indent=1))
    with pytest.raises(StudyError, match=words) as caught:
        load_study(path)
    assert_located(caught.value)


def test_a_study_folder_with_braces_in_its_path_runs(tmp_path):
    """Regression: {study_dir} was filled in before the argument was split into placeholders,
    so a folder named `{x}` became a placeholder and every run failed with KeyError: 'x'."""
    study = tmp_path / "{x}" / "{params_file}"
    study.mkdir(parents=True)
    (study / "prog.py").write_text("import json, sys\njson.dump({'y': 2.0}, open(sys.argv[2], 'w'))\n")
    model = Command.model_validate({"type": "command", "run": [
        sys.executable, "{study_dir}/prog.py", "{params_file}", "{results_file}"]})
    assert model.check(study) == []
    out = model.build(study)({"a": [1.0]}, RunContext(run_ids=[1], workdir=tmp_path / "{run_id}"))
    assert out.errors == [None] and out.scalars["y"][0] == 2.0


ECHO = """\
import json, sys
json.dump({{**json.load(open(sys.argv[1])), **{outputs}}}, open(sys.argv[2], "w"))
"""


@pytest.mark.slow
@pytest.mark.parametrize("outputs, succeeded", [
    ({"y": 1.0}, 4),  # the parameter x is echoed back: not a quantity, the runs succeed
    ({"y": 1.0, "status": 2.0}, 4),  # once crashed the store, then was refused: a name like any other
    ({"../../../../outside/evil": 1.0}, 0),  # crashed the report: figures/hist-../../...png
    ({"a/b": 1.0, "": 2.0, "x\ny": 3.0, 'y"; DROP TABLE runs; --': 4.0}, 0),
])
def test_output_names_never_reach_the_store_or_a_file_name(sandbox, outputs, succeeded):
    """Regression: without a quantities block every scalar output is a quantity, and its name
    became a store column and a figure's file name; an output named `status` (or like a
    parameter) crashed the store, `../x` the report. Such outputs now fail their runs (`status`
    is a name like any other since runs.csv names its own columns `run.status` ...)."""
    study, results = sandbox / "study", sandbox / "results"
    (study / "echo.py").write_text(ECHO.format(outputs=repr(outputs)))
    text = {"name": "outputs", "model": {"type": "command", "run": [
        sys.executable, "{study_dir}/echo.py", "{params_file}", "{results_file}"]},
        "parameters": {"x": {"bounds": [0, 1]}}, "analysis": {"type": "montecarlo", "samples": 4},
        "execution": {"scheduler": "sync", "on_failure": "continue"}}
    (study / "outputs.yaml").write_text(json.dumps(text))
    before = snapshot(sandbox, results)
    analysis = run_study(study / "outputs.yaml", results, quiet=True)
    assert analysis["runs"]["succeeded"] == succeeded
    assert snapshot(sandbox, results) == before
    assert all(p.resolve().parent == (results / "figures").resolve()
               for p in (results / "figures").rglob("*"))
