"""The real command line on fuzzed input (issue 8, point 4): `studyrun validate` in a process of
its own (tests/cli_server.py), on a sample of mutated studies and on known nasty files, many
files per call.

Exit status 0 (every file valid) or 2, no traceback, every line on stderr FILE:LINE:COL: ...,
within the time limit.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_common import FAST, LOCATED, REPO, copy_studies, examples, study_files
from test_fuzz_studies import YAMLISH, dump, mutate, mutate_text, original

pytestmark = pytest.mark.slow  # fuzzing the studyrun CLI in subprocesses

CLI_TIME_LIMIT = 60  # seconds for one call on many files


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return copy_studies(tmp_path_factory.mktemp("cli") / "studies")


def validate(*paths, cwd=None) -> subprocess.CompletedProcess:
    done = run_cli("validate", *paths, cwd=cwd or REPO, timeout=CLI_TIME_LIMIT)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode in (0, 2), (done.returncode, done.stderr[-3000:])
    if done.returncode == 2:
        lines = done.stderr.splitlines()
        assert lines, "exit status 2 without a message"
        bad = [line for line in lines if not LOCATED.match(line)]
        assert not bad, f"not FILE:LINE:COL lines: {bad[:5]}"
    else:
        assert done.stderr == "" or "warning" in done.stderr
    return done


@settings(FAST, max_examples=examples(3))
@given(names=st.lists(st.sampled_from(study_files()), min_size=12, max_size=12),
       texts=st.lists(st.one_of(YAMLISH, st.binary(max_size=200)), min_size=4, max_size=4),
       draw=st.data())
def test_cli_reports_mutated_studies_as_located_lines(folder, names, texts, draw):
    paths = []
    for i, name in enumerate(names):
        text, data = original(folder, name)
        if i % 2:
            mutate(data, draw.draw)
            text = dump(data)
        else:
            text = mutate_text(text, draw.draw)
        paths.append(folder / f"cli-mutant-{i}.yaml")
        paths[-1].write_text(text)
    for i, text in enumerate(texts):
        paths.append(folder / f"cli-random-{i}.yaml")
        raw = text if isinstance(text, bytes) else text.encode("utf-8", errors="replace")
        paths[-1].write_bytes(raw)
    done = validate(*paths)
    for path in paths:  # each file answers: valid, or a located line (its own, or one in the
        # model file it includes or the CSV of runs its analysis reads from)
        text = path.read_text(errors="replace")
        assert f"{path}: valid" in done.stdout or f"{path}:" in done.stderr or "file" in text \
            or "from:" in text, path


NASTY = {
    "empty": b"",
    "bom_only": b"\xef\xbb\xbf",
    "utf16": "name: x\n".encode("utf-16"),
    "nul": b"name: x\x00\n",
    "binary": bytes(range(256)),
    "tabs": b"name: x\nmodel:\n\ttype: ode\n",
    "alias_bomb": b"a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                  b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                  b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
    "recursive_alias": b"a: &a [*a]\n",
    "deep": b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "python_tag": b"name: !!python/object/apply:os.system ['touch /tmp/studyrun-pwned']\n",
    "duplicate": b"name: a\nname: b\nmodel: {type: ode}\nmodel: {type: ode}\n",
    "top_list": b"- name\n- model\n",
}
SNIPPETS = ["9**9**9", "1" * 400, "(" * 199 + "x" + ")" * 199, "x" + " + x" * 300,
            "__import__('os').system('touch /tmp/studyrun-pwned')", "().__class__.__bases__",
            "lambda: 1", "x[0]", "f'{x}'", "(y := 1)", "max(" + ", ".join(["x"] * 5000) + ")"]


def test_cli_on_nasty_files_and_hostile_expressions(folder):
    paths = []
    for name, raw in NASTY.items():
        paths.append(folder / f"nasty-{name}.yaml")
        paths[-1].write_bytes(raw)
    text, data = original(folder, "logistic-montecarlo.yaml")
    for i, snippet in enumerate(SNIPPETS):
        for keys in (("quantities", "q"), ("model", "rates", "population"),
                     ("model", "auxiliaries", "growth")):
            changed = yaml.safe_load(dump(data))
            target = changed
            for key in keys[:-1]:
                target = target[key]
            target[keys[-1]] = snippet
            paths.append(folder / f"snippet-{i}-{keys[-1]}.yaml")
            paths[-1].write_text(dump(changed))
    paths += [folder / "no-such-file.yaml", folder / "models", folder / ("x" * 300 + ".yaml")]
    done = validate(*paths)
    assert done.returncode == 2
    for path in paths:
        assert f"{path}:" in done.stderr or f"{path}: valid" in done.stdout, path
    assert re.search(r"nasty-alias_bomb\.yaml:\d+:\d+: .*alias", done.stderr)
