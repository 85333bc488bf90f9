"""The memory a surrogate's training runs imply (`AnalysisSpec.footprint`), checked at validate.

A GP (scikit-learn) holds, at n training runs and d inputs: the log-likelihood's gradient,
three s x s x (d + 2) arrays on the s = min(n, SUBSAMPLE) runs its hyperparameters are fitted on
(LIKELIHOOD_BYTES = 24 bytes x s^2 x (d + 2)); past SUBSAMPLE runs, the fit on all runs, about
four n x n arrays (FIXED_BYTES = 32 bytes x n^2); its predictions at the Saltelli design of the
indices (m = GP_BASE x (d + 2) points, 2d + 2 with second order), PREDICT_BYTES = 48 bytes x m x
n, m x n at most PREDICTED_CELLS at once; and the joint posterior at GP_DRAW_BASE x (d + 2) points, their
covariance. A PCE of a set degree holds its candidate terms, at most binomial(d + degree,
degree) of them (fewer for q < 1, not cheap to count for any degree), as an array
(TERM_BYTES + 16 d bytes each), and the basis evaluated at the runs, BASIS_BYTES x n a term;
`degree: auto` counts a degree's terms before it makes them, and never holds more than
MAX_TERMS terms or MAX_CELLS basis values.
Measured: benchmarks/bench_memory.py.
"""

from __future__ import annotations

from typing import Any

from studyrun.analyses.base import StudyContext, run_bytes
from studyrun.analyses.surrogate.basis import term_count
from studyrun.analyses.surrogate.fitting import CORRELATED_DRAWS, GP_BASE, GP_DRAW_BASE
from studyrun.analyses.surrogate.gp import PREDICTED_CELLS, SUBSAMPLE
from studyrun.analyses.surrogate.pce import MAX_CELLS, MAX_TERMS
from studyrun.core.sizes import Footprint

LIKELIHOOD_BYTES, PREDICT_BYTES, COVARIANCE_BYTES, FIXED_BYTES = 24, 48, 32, 32
TERM_BYTES, BASIS_BYTES = 64, 24


def gp_footprint(key: str, runs: int, context: StudyContext, spec: Any) -> Footprint:
    d = len(context.varied)
    block = (2 * d + 2) if spec.second_order else (d + 2)
    points = max(GP_BASE * block, CORRELATED_DRAWS if context.correlation is not None else 0)
    drawn = GP_DRAW_BASE * block
    fixed = COVARIANCE_BYTES * drawn ** 2 + 8 * drawn * spec.resamples
    each = run_bytes(context)

    def bytes_at(n: int) -> float:
        tuned = min(n, SUBSAMPLE)
        return (LIKELIHOOD_BYTES * (d + 2) * tuned * tuned
                + (FIXED_BYTES * n * n if n > SUBSAMPLE else 0)
                + PREDICT_BYTES * min(points * n, PREDICTED_CELLS)
                + COVARIANCE_BYTES / 2 * drawn * n + each * n + fixed)

    return Footprint(key, runs, "training runs", bytes_at,
                     f"the GP's likelihood gradient, {LIKELIHOOD_BYTES} bytes x runs^2 x {d + 2} "
                     f"up to {SUBSAMPLE} runs, its fit on more, {FIXED_BYTES} bytes x runs^2, and "
                     f"its predictions at {points:,} points, {PREDICT_BYTES} bytes x "
                     f"{points:,} x runs", ", or method: pce", lower=lower(key))


def pce_footprint(key: str, runs: int, context: StudyContext, spec: Any) -> Footprint:
    d = len(context.varied)
    each = run_bytes(context)
    if spec.degree == "auto":
        terms = (TERM_BYTES + 16 * d) * MAX_TERMS
        return Footprint(key, runs, "training runs", lambda n: (
            each * n + BASIS_BYTES * min(n * MAX_TERMS, MAX_CELLS) + terms),
            f"{each:,} bytes a run, at most {MAX_TERMS:,} candidate terms of {d} inputs, "
            f"{TERM_BYTES + 16 * d} bytes each, and the basis at the runs, {BASIS_BYTES} bytes x "
            f"runs x terms, at most {MAX_CELLS:,} values", lower=lower(key))
    term = TERM_BYTES + 16 * d + BASIS_BYTES * runs
    return Footprint("degree", spec.degree, "degree", lambda p: (
        each * runs + term * term_count(d, p)),
        f"its {term_count(d, spec.degree):,} candidate terms of {d} inputs, each "
        f"{TERM_BYTES + 16 * d} bytes and {BASIS_BYTES} bytes x {runs:,} runs",
        ", or degree: auto")


def lower(key: str) -> str:
    """How to train on fewer runs: by `key`'s number, or by a `from:` of fewer rows."""
    return "train on fewer of its runs" if key == "from" else ""
