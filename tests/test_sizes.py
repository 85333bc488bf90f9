"""Sizes are bounded at validate, where the study says them (issue 28.6): sizes that need more
memory than an analysis may use here (80% of the machine's, or STUDYRUN_MEMORY_LIMIT) are a
located error at their key from validate, plan and run, saying what they need, what is allowed
and what to lower; a size just under the limit validates. Both examples used to validate and die
in a MemoryError traceback (a GP of 60,000 runs allocated 26.8 GiB, NSGA's population of 200,000
298 GiB)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import run_cli, write_study

STUDIES = Path(__file__).resolve().parents[1] / "studies"
CASES = {  # example study -> (its size as written, the key, what that size counts, a memory
    # limit the size reaches before any other bound: a gp's 5,000 training runs)
    "borehole-gp": ("samples: 40", "samples", "training runs", "256MiB"),
    "zdt1-nsga2": ("population: 60", "population", "candidates a generation", "2GiB"),
}


def example(folder: Path, name: str, size: int) -> Path:
    """The example study `name` with its size set to `size`, beside its python model."""
    written, key, *_ = CASES[name]
    for module in ("borehole.py", "zdt.py"):
        shutil.copy(STUDIES / module, folder / module)
    text = (STUDIES / f"{name}.yaml").read_text().replace(written, f"{key}: {size}")
    text = re.sub(r"\n  until: .*", "", text)  # the GP's runs are `samples` alone
    return write_study(folder, text, f"{name}-{size}.yaml")


@pytest.mark.parametrize("name, size, needs", [
    ("borehole-gp", 60000, "60,000 training runs need about 111 GiB of memory (the GP's "
                           "likelihood gradient, 24 bytes x runs^2 x 10 up to 400 runs, its fit "
                           "on more, 32 bytes x runs^2"),
    ("zdt1-nsga2", 200000, "200,000 candidates a generation need about 698 GiB of memory "
                           "(pymoo's sorting of a generation, 18 bytes x population^2"),
])
def test_sizes_that_cannot_fit_are_located_at_their_key(tmp_path, monkeypatch, name, size, needs):
    monkeypatch.delenv("STUDYRUN_MEMORY_LIMIT", raising=False)
    path = example(tmp_path, name, size)
    _, key, counts, _ = CASES[name]
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if f"{key}: {size}" in text)
    for command in ("validate", "plan", "run"):
        done = run_cli(command, path, *(["--out", tmp_path / "out"] if command == "run" else []))
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
        assert re.match(  # its first line (a gp of 60,000 runs is also past 5,000, the next)
            rf"{re.escape(str(path))}:{line}:\d+: analysis\.{key}: {re.escape(needs)}.*\), more "
            rf"than the [\d.]+ [MGT]iB an analysis may use here \(80% of (this machine's|this "
            rf"process's cgroup's|`ulimit -v`'s) [\d.]+ [MGT]iB; set STUDYRUN_MEMORY_LIMIT, e\.g\. "
            rf"to 64GB, for another\); lower {key} "
            rf"\(at most [\d,]+ {counts} fit\).*\n", done.stderr), done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", list(CASES))
def test_a_size_just_under_the_limit_validates_and_one_more_does_not(tmp_path, monkeypatch, name):
    _, key, counts, limit = CASES[name]
    monkeypatch.setenv("STUDYRUN_MEMORY_LIMIT", limit)
    shown = limit.replace("MiB", " MiB").replace("GiB", " GiB")
    done = run_cli("validate", example(tmp_path, name, 1_000_000))
    assert done.returncode == 2 and f"(STUDYRUN_MEMORY_LIMIT={limit})" in done.stderr, done.stderr
    assert f"more than the {shown} an analysis may use here" in done.stderr
    fits = int(re.search(rf"at most ([\d,]+) {counts} fit", done.stderr)[1].replace(",", ""))
    done = run_cli("validate", example(tmp_path, name, fits))
    assert done.returncode == 0, done.stderr
    done = run_cli("validate", example(tmp_path, name, fits + 1))
    assert done.returncode == 2 and f"at most {fits:,} {counts} fit" in done.stderr, done.stderr
    done = run_cli("plan", example(tmp_path, name, fits))  # plan states what it takes
    assert re.search(rf"^memory: about [\d.]+ [MG]iB for {fits:,} {counts} \(.*\); an analysis may use "
                     rf"{shown} here$", done.stdout, re.M), done.stdout


def test_a_malformed_memory_limit_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDYRUN_MEMORY_LIMIT", "lots")
    done = run_cli("validate", example(tmp_path, "zdt1-nsga2", 60))
    assert done.returncode == 2
    assert done.stderr == ("STUDYRUN_MEMORY_LIMIT: not a memory size: 'lots' (try '512MB' or "
                           "'2GiB')\n")
