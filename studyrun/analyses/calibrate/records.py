"""calibrate's results in analysis.json: the estimate, its uncertainty, the fit and, with `mcmc:`,
the chain's summary."""

from __future__ import annotations

from typing import Any

from studyrun.results.records import (
    ByName,
    Count,
    Flag,
    Lines,
    Number,
    Numbers,
    Record,
    Table,
    Text,
)


class Estimated(Record):
    """A fitted parameter: where it started, its estimate and its linearised uncertainty."""

    initial: Number = None
    estimate: Number = None
    std_error: Number = None
    t: Number = None
    p: Number = None
    lower: Number = None
    upper: Number = None


class Variable(Record):
    """An observed variable's share of the fit: points, sums of squares, scale, RMS."""

    N: Count | None = None
    SSR: Number = None
    SSR_unweighted: Number = None
    scale: Number = None
    rms_before: Number = None
    rms_after: Number = None


class CostChange(Record):
    """A value at the start and at the end of the search."""

    initial: Number = None
    final: Number = None


class Evaluations(Record):
    """The runs and batches the fit asked for."""

    runs: Count | None = None
    batches: Count | None = None


class FittedSeries(Record):
    """The fitted run's series and the span of the data."""

    time: Numbers = []
    series: dict[str, Numbers] = {}
    data_span: Numbers = []


class Mcmc(Record):
    """The chain (`mcmc:`): its settings, acceptance, error variance and intervals."""

    chains: Count | None = None
    iterations: Count | None = None
    burnin: Count | None = None
    thin: Count | None = None
    runs: Count | None = None
    acceptance_rate: Number = None
    acceptance_by_chain: Numbers = []
    delayed_rejection: Flag | None = None
    error_variance: Text | None = None  # fixed, or sampled
    sigma2: dict[str, Any] | None = None
    intervals: dict[str, dict[str, Number]] = {}  # parameter -> mean, sd, lower, upper, ...
    prediction: dict[str, dict[str, Numbers]] = {}  # output -> time, lower, upper, ...
    trace: dict[str, list[Numbers]] = {}  # parameter -> each chain's values


class CalibrateResults(Record):
    """A calibration (docs/reference/results.md lists each key)."""

    method: Text
    parameters: dict[str, Estimated] = {}
    correlation: Table = {}
    covariance: Table = {}
    cost: CostChange | None = None
    variables: dict[str, Variable] = {}
    minlogp: Number = None
    minlogp_initial: Number = None
    df: int | None = None
    residual_variance: Number = None
    converged: Flag | None = None
    message: Text | None = None
    evaluations: Evaluations | None = None
    fitted: ByName = {}  # name -> estimate
    fitted_yaml: Text | None = None  # a `parameters:` block to paste
    outputs: dict[str, Text] = {}
    progress: Numbers = []
    residuals: list[dict[str, Any]] = []
    curves: dict[str, dict[str, Numbers]] = {}
    fitted_series: FittedSeries | None = None
    notes: Lines = []
    mcmc: Mcmc | None = None
    gradient: dict[str, Any] | None = None
    gradient_matching: dict[str, Any] | None = None
    starts: list[dict[str, Any]] = []
    start: dict[str, Any] | None = None  # the earlier calibration it started from
