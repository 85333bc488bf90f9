"""Every model's names are usable (issue 29, point 3): names runs.csv once kept for its own
columns (`id`, `duration`, `time`, `run`, `error`, `status`, `worker`) and Python's keywords
(`yield`, `lambda`, `in`, `class`) are parameters, outputs and quantities like any other."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from conftest import run_cli, stored_runs, write_study

import studyrun
from studyrun.core.runtable import CSV_FIXED, LEGACY_FIXED

MODEL = '''
def plant(**given):
    """Inputs by keyword, as a model whose names Python's own `def` cannot spell takes them."""
    return {"yield": 2 * given["lambda"] + given["duration"], "in": given["id"] * given["time"],
            "class": given["run"] - given["error"] + given["status"] * given["worker"]}
'''
NAMES = ["lambda", "duration", "id", "time", "run", "error", "status", "worker"]
STUDY = """
name: names
seed: 3
model: {type: python, function: "plant:plant"}
parameters:
PARAMETERS
QUANTITIES
analysis: {type: montecarlo, samples: 30}
execution: {scheduler: sync, batch_size: 7}
"""


def names_study(folder, quantities: str) -> object:
    (folder / "plant.py").write_text(MODEL)
    parameters = "\n".join(f"  {name}: {{bounds: [{k}, {k + 1}]}}" for k, name in enumerate(NAMES))
    return write_study(folder, STUDY.replace("PARAMETERS", parameters)
                       .replace("QUANTITIES", quantities))


@pytest.mark.slow
@pytest.mark.parametrize("quantities, columns", [
    ("quantities: {yield: yield, for: 'in + class * 2 - lambda'}", ["yield", "for"]),
    ("", ["class", "in", "yield"]),  # every scalar output, named as the model names it
], ids=["quantities-block", "model-outputs"])
def test_names_runs_csv_once_kept_and_keywords_are_varied_and_read(tmp_path, quantities, columns):
    """Fails before: `id`, `duration`, `time` ... were refused at validate, `yield` and `in`
    could not be parsed, and the outputs named so failed their runs."""
    study = names_study(tmp_path, quantities)
    checked = run_cli("validate", study)
    assert checked.returncode == 0, checked.stderr
    out = tmp_path / "out"
    done = run_cli("run", study, "--out", out, "--quiet", cwd=tmp_path)
    assert done.returncode == 0 and "30 of 30 runs succeeded" in done.stdout, done.stderr
    with open(out / "runs.csv", newline="") as handle:
        header = next(csv.reader(handle))
    assert header == [*CSV_FIXED, *NAMES, *columns]
    runs = studyrun.open_results(out).runs
    assert (runs["run.status"] == "ok").all() and sorted(runs["run.index"]) == list(range(30))
    for name, k in zip(NAMES, range(len(NAMES))):
        assert runs[name].between(k, k + 1).all()
    np.testing.assert_array_equal(runs["yield"], 2 * runs["lambda"] + runs["duration"])
    into, kind = runs["id"] * runs["time"], runs["run"] - runs["error"] + runs["status"] * runs["worker"]
    if quantities:
        np.testing.assert_allclose(runs["for"], into + kind * 2 - runs["lambda"], rtol=1e-14)
    else:
        np.testing.assert_array_equal(runs["in"], into)
        np.testing.assert_array_equal(runs["class"], kind)
    assert set(stored_runs(out)["run.id"]) == set(runs["run.id"])
    listed = run_cli("runs", out, "--limit", "1")
    assert listed.returncode == 0 and "lambda=" in listed.stdout and "duration=" in listed.stdout
