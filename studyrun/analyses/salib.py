"""Shared helpers for the SALib-backed analyses (analyse step): unit-cube problems, mapping
samples through the parameters' inverse CDFs, dropping failed runs and JSON-safe results.

Every SALib sampler here works on the unit hypercube ([0, 1] bounds for every variable); the
columns are then mapped to natural units by each parameter's `ppf`, so any distribution that
studyrun knows can be studied by any SALib method (Saltelli et al., Global Sensitivity
Analysis: The Primer, 2008, sec. 1.2.3).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import StudyError

if TYPE_CHECKING:
    from ..params import ParameterSpec
    from .base import Outcome

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
    clipped = np.clip(unit, UNIT_MARGIN, 1.0 - UNIT_MARGIN)
    natural = np.empty_like(clipped, dtype=float)
    for j, name in enumerate(names):
        natural[:, j] = np.asarray(parameters[name].ppf(clipped[:, j]), dtype=float)
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


def to_float(value: Any) -> float | None:
    """A plain JSON number; NaN and infinities become None."""
    number = float(value)
    return number if math.isfinite(number) else None


def by_factor(labels: Sequence[str], values: Iterable[Any]) -> dict[str, float | None]:
    """A map from factor name to a JSON-safe float."""
    return {label: to_float(v) for label, v in zip(labels, values)}


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


def keep_whole_blocks(bad: np.ndarray, block: int) -> tuple[np.ndarray, int]:
    """Rows to keep when a failure anywhere in a block of `block` runs voids the whole block.

    Returns the boolean row mask and the number of blocks dropped.
    """
    blocks = bad.reshape(-1, block).any(axis=1)
    return np.repeat(~blocks, block), int(blocks.sum())


def error_entry(message: str, **facts: Any) -> dict[str, Any]:
    """A quantity's result when no trustworthy indices can be given."""
    return {"error": message, **facts}


def dropped_warning(dropped: int, unit: str, kept: int) -> str:
    """The warning every method gives when failed runs were left out."""
    return (f"{dropped} {unit} dropped because a run in them failed; indices use the remaining "
            f"{kept}. If failures depend on the parameters, the indices describe only the "
            f"region where the model runs")


def constant_output(values: np.ndarray) -> bool:
    """True when an output does not vary over the runs (no variance to apportion)."""
    return values.size == 0 or float(np.ptp(values)) <= np.finfo(float).eps * max(
        1.0, float(np.max(np.abs(values))))
