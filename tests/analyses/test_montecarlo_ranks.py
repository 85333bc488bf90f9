"""Monte Carlo rank correlations, of a design of one slice and of many, against scipy's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import write_study
from scipy.stats import spearmanr

TIES_MODEL = '''
def model(a, b, c):
    """y rounded (ties); a run fails where a > 0.85, and where b takes its largest value (z is
    NaN: the run fails, y is recorded all the same)."""
    if a > 0.85:
        raise ValueError("a is too large")
    return {"y": round(3 * a + b + c, 1), "z": float("nan") if b > 0.8 else a * b - c}
'''

TIES_STUDY = """
name: ties
seed: 7
model: {type: python, function: "ties:model"}
parameters:
  a: {distribution: uniform, low: 0, high: 1}
  b: {distribution: discrete, values: [0.1, 0.5, 0.9]}
  c: {distribution: normal, mean: 0, std: 1}
quantities: {y: y, z: z}
analysis: {type: montecarlo, samples: 3000, sampling: random}
execution: {scheduler: sync, on_failure: continue}
"""


@pytest.mark.slow
def test_spearman_of_one_slice_and_of_many_match_scipy_with_ties_and_failed_runs(study_dir,
                                                                                monkeypatch):
    import studyrun
    import studyrun.commands.pipeline
    import studyrun.plan.runs

    (study_dir / "ties.py").write_text(TIES_MODEL)
    path = write_study(study_dir, TIES_STUDY)
    whole = studyrun.run(path, study_dir / "whole", report=False)
    monkeypatch.setattr(studyrun.commands.pipeline, "CHUNK_ROWS", 700)
    monkeypatch.setattr(studyrun.plan.runs, "CHUNK_ROWS", 700)  # ties run on across slices
    chunked = studyrun.run(path, study_dir / "chunked")
    assert "The figures show the first 700 runs" in (study_dir / "chunked" / "report.md").read_text()

    runs = whole.runs
    ok = runs["run.status"] == "ok"
    failed_y = runs.loc[~ok, "y"]
    assert failed_y.isna().sum() > 300 and failed_y.notna().sum() > 300  # left out all the same
    assert runs.loc[ok, "y"].duplicated().sum() > 1000  # ties in y, and in b by design
    for quantity in ("y", "z"):
        kept = runs[ok & np.isfinite(runs[quantity])]
        assert whole.results[quantity]["n"] == chunked.results[quantity]["n"] == len(kept)
        assert (whole.results[quantity]["dropped_runs"] == chunked.results[quantity]["dropped_runs"]
                == len(runs) - len(kept))
        for parameter in ("a", "b", "c"):
            expected = spearmanr(kept[parameter], kept[quantity]).statistic
            for result in (whole, chunked):
                rho = result.results[quantity]["correlations"][parameter]
                assert rho == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert chunked.results[quantity]["percentiles"] == whole.results[quantity]["percentiles"]
