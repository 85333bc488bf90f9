"""Models that draw random numbers (PySD's RANDOM functions, a python model's `rng`, a command's
`{seed}`) draw the same numbers for a run alone, in any batch, on any worker and after a resume
from a SIGKILL; each run its own; a new study seed gives new ones."""

from __future__ import annotations

import pytest
from conftest import killed_and_resumed, run_cli, stored_runs, write_study

import studyrun
from studyrun.core.seeds import SEED_LIMIT, run_seed

pytestmark = pytest.mark.slow  # real PySD, subprocesses, drivers killed with SIGKILL

NOISE_MDL = r"""{UTF-8}
Noise=
	RANDOM UNIFORM(-1, 1, 0) + RANDOM NORMAL(-3, 3, 0, 1, 0)
	~	Dmnl
	~		|

Level= INTEG (
	Noise * Scale,
		0)
	~	Dmnl
	~		|

Scale=
	1
	~	Dmnl
	~		|

********************************************************
	.Control
********************************************************~
		Simulation Control Parameters
	|

FINAL TIME  = 10
	~	Day
	~		|

INITIAL TIME  = 0
	~	Day
	~		|

SAVEPER  =
        TIME STEP
	~	Day [0,?]
	~		|

TIME STEP  = 1
	~	Day [0,?]
	~		|

\\\---/// Sketch information - do not modify anything except names
V300  Do not put anything below this section - it will be ignored
*View 1
$192-192-192,0,Times New Roman|12||0-0-0|0-0-0|0-0-255|-1--1--1|-1--1--1|72,72,100,0
///---\\\
:L<%^E!@
"""

NOISY_PY = """
import time

def model(scale, rng):
    time.sleep(0.005)  # slow enough to be killed midway
    return {"y": scale * rng.normal()}
"""

SEED_ECHO = """#!/bin/sh
read scale seed < in.txt
[ "$seed" = "$1" ] || { echo "argv says $1, in.txt $seed" >&2; exit 3; }
printf '{"y": %s}' "$seed" > results.json
"""

MODELS = {  # model block, quantities
    "pysd": ("{type: pysd, file: noise.mdl}", "{y: final(level)}"),
    "python": ('{type: python, function: "noisy:model"}', "{y: y}"),
    "command": ('{type: command, run: ["./echo.sh", "{seed}"], results_file: results.json, '
                'params_file: {template: in.tmpl, file: in.txt}}', "{y: y}"),
}

STUDY = """
name: noisy
seed: 7
model: MODEL
parameters:
  scale: {distribution: discrete, values: [1, 2]}
quantities: QUANTITIES
analysis: {type: montecarlo, samples: 200}
execution: EXECUTION
"""


def noisy_study(folder, kind: str, execution: str, seed: int = 7):
    (folder / "noise.mdl").write_text(NOISE_MDL)
    (folder / "noisy.py").write_text(NOISY_PY)
    (folder / "echo.sh").write_text(SEED_ECHO)
    (folder / "echo.sh").chmod(0o755)
    (folder / "in.tmpl").write_text("{scale} {seed}\n")
    model, quantities = MODELS[kind]
    text = (STUDY.replace("MODEL", model).replace("QUANTITIES", quantities)
            .replace("EXECUTION", execution).replace("seed: 7", f"seed: {seed}"))
    return write_study(folder, text, f"{kind}-{len(list(folder.glob('*.yaml')))}.yaml")


def by_run(folder, columns=("scale", "y")) -> dict[int, tuple]:
    runs = stored_runs(folder)
    assert (runs["run.status"] == "ok").all()
    return {int(i): tuple(row) for i, row in zip(runs["run.id"], runs[list(columns)].to_numpy())}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # PySD's translation
    return tmp_path


@pytest.mark.parametrize("kind", [pytest.param(kind, marks=pytest.mark.thorough) if kind == "pysd"
                                  else kind for kind in MODELS])  # pysd's the longest
def test_a_run_draws_the_same_numbers_in_any_batch_and_after_a_kill(folder, kind):
    alone = noisy_study(folder, kind, "{scheduler: sync, batch_size: 1}")
    studyrun.run(alone, folder / "alone", report=False)
    threads = noisy_study(folder, kind, "{scheduler: threads, workers: 2, batch_size: 64}")
    studyrun.run(threads, folder / "threads", report=False)
    killed = noisy_study(folder, kind, "{scheduler: sync, batch_size: 10}")
    stored, analysis = killed_and_resumed(killed, folder / "resumed", 40)
    assert 40 <= stored < 200 and analysis["runs"]["reused"] == stored

    runs = by_run(folder / "alone")
    assert len(runs) == 200
    assert by_run(folder / "threads") == runs
    assert by_run(folder / "resumed") == runs
    for scale in (1, 2):  # runs of the same inputs draw their own numbers
        ys = [y for s, y in runs.values() if s == scale]
        assert len(ys) > 60 and len(set(ys)) == len(ys)


def test_a_command_gets_the_documented_seed_of_its_run(folder):
    studyrun.run(noisy_study(folder, "command", "{scheduler: sync}"), folder / "out", report=False)
    seeds = by_run(folder / "out", ("y",))
    assert {run_id: (run_seed(run_id),) for run_id in seeds} == seeds
    assert all(0 <= seed < SEED_LIMIT for (seed,) in seeds.values())


@pytest.mark.parametrize("kind", list(MODELS))
def test_a_new_study_seed_gives_new_numbers(folder, kind):
    sweep = "analysis: {type: sweep, levels: {scale: [1, 2, 3]}}"
    first = noisy_study(folder, kind, "{scheduler: sync}")
    first.write_text(first.read_text().replace("analysis: {type: montecarlo, samples: 200}", sweep)
                     .replace("  scale: {distribution: discrete, values: [1, 2]}",
                              "  scale: {bounds: [1, 3]}"))
    again = folder / "again.yaml"
    again.write_text(first.read_text())
    other = folder / "other.yaml"
    other.write_text(first.read_text().replace("seed: 7", "seed: 8"))
    ys = {}
    for path in (first, again, other):
        out = folder / path.stem
        studyrun.run(path, out, report=False)
        ys[path.stem] = sorted(y for _, y in by_run(out).values())
    assert ys[first.stem] == ys["again"]
    assert not set(ys[first.stem]) & set(ys["other"])
    shown = run_cli("plan", other, "--out", folder / "again").stdout
    assert "0 of 3 runs would be reused, 3 would run: the seed changed since the last run" in shown
