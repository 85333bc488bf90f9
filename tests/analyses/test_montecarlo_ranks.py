"""Monte Carlo rank correlations, in memory and streamed from the store, against scipy's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import write_study
from scipy.stats import rankdata, spearmanr

from studyrun.analyses.montecarlo.ranks import TiedRanks, exact_dot

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
def test_spearman_streamed_and_in_memory_match_scipy_with_ties_and_failed_runs(study_dir,
                                                                                monkeypatch):
    import studyrun
    import studyrun.pipeline
    import studyrun.plan.runs

    (study_dir / "ties.py").write_text(TIES_MODEL)
    path = write_study(study_dir, TIES_STUDY)
    whole = studyrun.run(path, study_dir / "whole")
    monkeypatch.setattr(studyrun.pipeline, "CHUNK_ROWS", 700)
    monkeypatch.setattr(studyrun.plan.runs, "CHUNK_ROWS", 700)  # ties run on across slices
    chunked = studyrun.run(path, study_dir / "chunked")
    assert "The figures show the first 700 runs" in (study_dir / "chunked" / "report.md").read_text()

    runs = whole.runs
    ok = runs["status"] == "ok"
    failed_y = runs.loc[~ok, "y"]
    assert failed_y.isna().sum() > 300 and failed_y.notna().sum() > 300  # left out all the same
    assert runs.loc[ok, "y"].duplicated().sum() > 1000  # ties in y, and in b by design
    for quantity in ("y", "z"):
        kept = runs[ok & np.isfinite(runs[quantity])]
        assert whole.results[quantity]["n"] == chunked.results[quantity]["n"] == len(kept)
        for parameter in ("a", "b", "c"):
            expected = spearmanr(kept[parameter], kept[quantity]).statistic
            for result in (whole, chunked):
                rho = result.results[quantity]["correlations"][parameter]
                assert rho == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert chunked.results[quantity]["percentiles"] == whole.results[quantity]["percentiles"]


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1000])
def test_ranks_of_sorted_chunks_are_scipy_average_ranks(chunk):
    rng = np.random.default_rng(5)
    values = np.sort(np.r_[rng.integers(0, 20, 300), np.full(150, 7), rng.normal(size=50)])
    keys = rng.permutation(len(values))
    tied, parts = TiedRanks(), []
    for start in [*range(0, len(values), chunk), len(values)]:  # an empty chunk at the end
        parts.append(tied.add(values[start:start + chunk], keys[start:start + chunk]))
    parts.append(tied.finish())
    twice, got_keys = (np.concatenate(side) for side in zip(*parts))
    assert np.array_equal(got_keys, keys)
    assert np.array_equal(twice, 2 * rankdata(values))


def test_exact_dot_does_not_overflow_at_the_largest_ranks():
    a = np.full((1 << 20) + 3, (1 << 28) - 1, np.int64)
    assert exact_dot(a, a) == ((1 << 28) - 1) ** 2 * len(a)
    assert exact_dot(a, a) != int(a @ a)  # what int64 would give
