"""Shared helpers for the SALib-backed analyses (analyse step): unit-cube problems, mapping
samples through the parameters' inverse CDFs, dropping failed runs and JSON-safe results.

Every SALib sampler here works on the unit hypercube ([0, 1] bounds for every variable); the
columns are then mapped to natural units by each parameter's `ppf`, so any distribution that
studyrun knows can be studied by any SALib method (Saltelli et al., Global Sensitivity
Analysis: The Primer, 2008, sec. 1.2.3).
"""

from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Iterable,
    Iterator,
    Literal,
    Mapping,
    Sequence,
)

import numpy as np
from pydantic import AfterValidator, Field, model_validator

from studyrun.analyses.base import (
    INDEPENDENT_INPUTS,
    FixedDesignAnalysis,
    StudyContext,
    runs_footprint,
)
from studyrun.analyses.given import ReadsGiven, not_with_from
from studyrun.core.design import Design
from studyrun.core.errors import Problem, StudyError
from studyrun.core.numbers import finite_or_none
from studyrun.core.sizes import Footprint

if TYPE_CHECKING:
    from studyrun.blocks.params import ParameterSpec
    from studyrun.core.design import Outcome
    from studyrun.results.report.figures import Figures

# Unit samples are clipped into [UNIT_MARGIN, 1 - UNIT_MARGIN] before the inverse CDF, so a
# parameter without finite bounds (normal, lognormal...) never receives 0 or 1 and never gives
# an infinite value; for bounded parameters the shift is far below any meaningful precision.
UNIT_MARGIN = 1e-12

# Fewer surviving blocks (Sobol' base samples, Morris trajectories) or runs than these and the
# indices are reported as an error rather than as numbers nobody should trust.
MIN_BLOCKS = 4
MIN_RUNS = 20


def derive_seed(seed: np.random.SeedSequence) -> int:
    """A plain integer seed for SALib, derived from the study's SeedSequence."""
    return int(seed.generate_state(1)[0])


def check_power_of_two(value: int, method: str, key: str = "samples") -> int:
    """`value` itself when it is a positive power of 2, else the study-format error message."""
    if value < 1 or value & (value - 1):
        hint = 1 << max(0, round(math.log2(max(value, 1))))
        raise ValueError(f"must be a power of 2 for {method}; got {value} (try {hint})")
    return value


def check_unit_interval(value: float) -> float:
    """Confidence levels are strictly between 0 and 1."""
    if not 0.0 < value < 1.0:
        raise ValueError(f"must be strictly between 0 and 1; got {value}")
    return value


Confidence = Annotated[float, AfterValidator(check_unit_interval),
                      Field(description="confidence level of the bootstrap intervals")]
Resamples = Annotated[int, Field(ge=2, description="bootstrap resamples for the intervals")]


def unit_problem(names: Sequence[str], groups: Sequence[str] | None = None) -> dict[str, Any]:
    """A SALib problem on the unit hypercube: every variable in [0, 1]."""
    problem: dict[str, Any] = {"num_vars": len(names), "names": list(names),
                               "bounds": [[0.0, 1.0]] * len(names)}
    if groups is not None:
        problem["groups"] = list(groups)
    return problem


def map_to_natural(unit: np.ndarray, parameters: Mapping[str, "ParameterSpec"],
                   names: Sequence[str]) -> np.ndarray:
    """Map unit-cube samples (runs, D) to natural units through each parameter's ppf."""
    natural = np.clip(unit, UNIT_MARGIN, 1.0 - UNIT_MARGIN)
    for j, name in enumerate(names):  # in place, column by column: one matrix, not two
        natural[:, j] = parameters[name].ppf(natural[:, j])
    return natural


def group_labels(names: Sequence[str], groups: Mapping[str, list[str]] | None,
                 path: str = "groups") -> list[str] | None:
    """Each parameter's group (SALib's `groups` list); ungrouped parameters form their own.

    Raises StudyError with `path` relative to the `analysis` block.
    """
    if not groups:
        return None
    label: dict[str, str] = {}
    for group, members in groups.items():
        for member in members:
            if member not in names:
                raise StudyError(f"group {group!r} names {member!r}, which is not a varied "
                                 f"parameter; varied parameters: {', '.join(names)}", path=path)
            if member in label:
                raise StudyError(f"parameter {member!r} is in groups {label[member]!r} and "
                                 f"{group!r}; a parameter belongs to one group", path=path)
            label[member] = group
    return [label.get(name, name) for name in names]


def unique_labels(names: Sequence[str], groups: Sequence[str] | None) -> list[str]:
    """The factors the indices are reported for: groups in first-seen order, else parameters."""
    return list(dict.fromkeys(groups)) if groups else list(names)


def by_factor(labels: Sequence[str], values: Iterable[Any]) -> dict[str, float | None]:
    """A map from factor name to a JSON-safe float."""
    return {label: finite_or_none(v) for label, v in zip(labels, values)}


def convert_indices(result: Mapping[str, Any], labels: Sequence[str]) -> dict[str, Any]:
    """SALib's result dict as JSON: every per-factor array becomes a map factor -> value."""
    converted: dict[str, Any] = {}
    for key, value in result.items():
        if key in ("names", "notes"):
            continue
        array = np.asarray(value, dtype=float) if not isinstance(value, str) else None
        if array is not None and array.shape == (len(labels),):
            converted[key] = by_factor(labels, array)
    return converted


def failed_rows(outcome: "Outcome", quantity: str, values: np.ndarray | None = None) -> np.ndarray:
    """Runs whose quantity cannot be used: failed, or NaN/inf for this quantity."""
    values = outcome.values[quantity] if values is None else values
    bad = ~np.asarray(outcome.ok, dtype=bool)
    finite = np.isfinite(values) if values.ndim == 1 else np.isfinite(values).all(axis=1)
    return bad | ~finite


def rows_kept(matrix: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The kept rows of a design matrix: the matrix itself when every row is kept (a copy per
    quantity was 500 MB at a thousand parameters)."""
    return matrix if keep.all() else matrix[keep]


def keep_whole_blocks(bad: np.ndarray, block: int) -> tuple[np.ndarray, int]:
    """Rows to keep when a failure anywhere in a block of `block` runs voids the whole block.

    Returns the boolean row mask and the number of blocks dropped.
    """
    blocks = bad.reshape(-1, block).any(axis=1)
    return np.repeat(~blocks, block), int(blocks.sum())


def unknown_outputs(outputs: list[str], model: Any) -> list[Problem]:
    """`outputs[i]` naming no output of the model, where the model declares its outputs."""
    try:
        known = model.output_names()
    except Exception:  # an invalid model: its own check reports it
        return []
    if known is None:
        return []
    from studyrun.core.text import suggest

    return [Problem(f"the model has no output {name!r}{suggest(name, known)} (outputs: "
                    f"{', '.join(sorted(known))})", f"outputs[{i}]")
            for i, name in enumerate(outputs) if name not in known]


def missing_series(name: str, series: np.ndarray | None, ok: np.ndarray) -> dict[str, Any] | None:
    """An error entry when no successful run gave the series `name` (the model has no such
    output), so it is not mistaken for failed runs."""
    if series is not None and (not ok.any() or np.isfinite(series[ok]).any()):
        return None
    return error_entry(f"no run gave a time series named {name!r}: it is not an output of the "
                       "model; name one of the model's outputs in `outputs:`")


def error_entry(message: str, **facts: Any) -> dict[str, Any]:
    """A quantity's result when no trustworthy indices can be given."""
    return {"error": message, **facts}


def dropped_warning(dropped: int, unit: str, kept: int) -> str:
    """The warning the block-design methods give when blocks with failed runs were dropped."""
    return (f"{dropped} {unit} dropped because a run in them failed; indices use the remaining "
            f"{kept}. If failures depend on the parameters, the indices describe only the "
            f"region where the model runs")


def constant_output(values: np.ndarray) -> bool:
    """True when an output does not vary over the runs (no variance to apportion)."""
    return values.size == 0 or float(np.ptp(values)) <= np.finfo(float).eps * max(
        1.0, float(np.max(np.abs(values))))


class SalibAnalysis(FixedDesignAnalysis):
    """Base of the SALib methods analysed one quantity at a time with one SALib call, whose
    per-parameter arrays become maps (FAST, RBD-FAST, delta, PAWN).

    Subclasses set `title`, `keys` (for tables), `bars` (for charts), `design` and `call_salib`.
    """

    title: ClassVar[str] = ""
    without_correlation = INDEPENDENT_INPUTS
    keys: ClassVar[tuple[str, ...]] = ()
    bars: ClassVar[tuple[str, ...]] = ()

    def salib_run_bytes(self) -> float:
        """What SALib's analysis adds to a run's bytes (measured: benchmarks/bench_memory.py)."""
        return 250

    def footprint(self, context: StudyContext) -> Footprint | None:
        count = self.run_count(context)
        return None if count is None else runs_footprint(context, count, self.salib_run_bytes(),
                                                         ", and SALib's copies of them")

    def analyse(self, outcome: "Outcome", context: StudyContext) -> dict[str, Any]:
        return {name: self.analyse_quantity(values, failed_rows(outcome, name, values),
                                            outcome.design)
                for name, values in outcome.values.items()}

    def analyse_quantity(self, values: np.ndarray, bad: np.ndarray, design: Design) -> dict[str, Any]:
        """Leave out failed runs, then call SALib once and convert its result to JSON."""
        kept, dropped = int((~bad).sum()), int(bad.sum())
        facts: dict[str, Any] = {"effective_N": kept, "dropped_runs": dropped}
        if kept < self.min_runs():
            return error_entry(f"only {kept} of {len(values)} runs succeeded; at least "
                               f"{self.min_runs()} are needed", **facts)
        notes = [f"{dropped} failed runs were left out; indices use the remaining {kept}. If "
                 f"failures depend on the parameters, the indices describe only the region "
                 f"where the model runs"] if dropped else []
        y, x = values[~bad], rows_kept(design.matrix, ~bad)
        if constant_output(y):
            return error_entry("the quantity is the same in every run: there is nothing to "
                               "apportion", **facts)
        result = self.call_salib(unit_problem(design.names), x, y, design.info["analysis_seed"])
        salib_notes = sorted({str(n) for n in result.get("notes", []) if str(n).strip()})
        entry = convert_indices(result, design.names)
        return entry | facts | {"warnings": notes + [f"SALib: {n}" for n in salib_notes]}

    def call_salib(self, problem: dict[str, Any], x: np.ndarray, y: np.ndarray,
                   seed: int) -> Mapping[str, Any]:
        raise NotImplementedError

    def min_runs(self) -> int:
        """The fewest succeeded runs this method gives indices from."""
        return MIN_RUNS

    def report(self, analysis: dict[str, Any], outcome: "Outcome | None", figures: "Figures") -> str:
        from studyrun.analyses.salib.report import generic_section

        return generic_section(self.title, analysis, figures, self.keys, self.bars)


class GivenDataAnalysis(SalibAnalysis, ReadsGiven):
    """Methods that read indices from any sample ("given data", Plischke 2013): RBD-FAST, delta,
    PAWN. `samples` unit-cube points (`sampling`; correlated as the study asks, for delta and
    pawn), mapped through each ppf, or the runs `from:` names; a failed run is simply left out."""

    samples: int = Field(1024, ge=MIN_RUNS, description="runs (not with from)")
    sampling: Literal["random", "lhs", "sobol"] = Field(
        "lhs", description="unit-cube points: random, Latin hypercube or scrambled Sobol'")

    @model_validator(mode="after")
    def _samples_or_from(self) -> "GivenDataAnalysis":
        not_with_from(self, "samples", "sampling")
        return self

    def check(self, context: StudyContext) -> list[Problem]:
        return SalibAnalysis.check(self, context) + ReadsGiven.check(self, context)

    def run_count(self, context: StudyContext) -> tuple[int, str] | None:
        return None if self.from_ is not None else (self.samples, "samples")

    def design(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        from studyrun.blocks.params import correlate_unit, design_facts, sample_unit

        parameters = context.varied
        names = list(parameters)
        rows = self.given(context)
        if rows is not None:
            return rows.design({"method": self.type, "sampling": "given",  # type: ignore[attr-defined]
                                "analysis_seed": derive_seed(seed) or 1})
        unit = correlate_unit(sample_unit(self.samples, len(names), self.sampling, seed),
                              context.correlation, self.sampling)
        x = map_to_natural(unit, parameters, names)
        info = {"method": self.type, "sampling": self.sampling,  # type: ignore[attr-defined]
                "analysis_seed": derive_seed(seed) or 1,  # bootstraps; SALib skips a seed of 0
                **design_facts(context.correlation, names, x)}
        return Design(names, x, info)


@contextmanager
def salib_side_effects_contained() -> Iterator[list[str]]:
    """Undo what some SALib analyses do to global state (`np.random.seed()` in delta, pawn,
    dgsm; `warnings.formatwarning` and `simplefilter("once")` in delta) and collect the warnings
    they raise, so they reach analysis.json rather than the terminal."""
    state = np.random.get_state()
    formatwarning = warnings.formatwarning
    messages: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield messages
        messages += [str(w.message).strip() for w in caught]
    finally:
        warnings.formatwarning = formatwarning
        np.random.set_state(state)


def with_notes(result: Mapping[str, Any], messages: list[str]) -> dict[str, Any]:
    """SALib's result with caught warnings added to its `notes` (reported as warnings)."""
    return {**result, "notes": [*result.get("notes", []), *messages]}
