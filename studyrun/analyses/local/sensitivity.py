"""Sensitivity functions by differences, normalisation and summaries (FME's sensFun and its
summary; docs/methods.md, "Local sensitivity functions" and "Summaries of sensitivity
functions").

S_ij(t) = dy_i(t)/dp_j by central or forward differences with a relative step; normalised
S~ = (p_j / y_i(t)) S_ij(t), or (p_j / scale_i) S_ij(t) with a fixed output scale (FME's
varscale) for outputs that cross zero. Summaries over the N points of the output grid, start
included: L1 = mean |S~|, L2 = sqrt(mean S~^2) (the root mean square, as FME's summary computes
it since version 1.3.6.1; earlier versions divided sqrt(sum S~^2) by N), mean, min, max. Points
where y is 0 (below 1e-12 of its largest magnitude) are left out of the summaries and counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.analyses.local.agreement import rank

ZERO = 1e-12  # |y| at or below ZERO * max|y| counts as y = 0
SCHEMES = ("central", "forward")


def perturbation_steps(nominal: np.ndarray, delta: float) -> np.ndarray:
    """h_j = delta |p_j|, or delta itself where p_j is 0."""
    steps = delta * np.abs(nominal)
    return np.where(steps > 0, steps, delta)


def difference_rows(nominal: np.ndarray, steps: np.ndarray, central: bool) -> np.ndarray:
    """The nominal point, then p + h_j e_j for each j, then p - h_j e_j for each j if central."""
    m = len(nominal)
    plus = nominal + np.diag(steps)
    rows = [nominal[None, :], plus] + ([nominal - np.diag(steps)] if central else [])
    return np.vstack(rows) if m else nominal[None, :]


def difference_quotients(series: np.ndarray, steps: np.ndarray, scheme: str) -> np.ndarray:
    """dy/dp (T, m) from the series (runs, T) of difference_rows' runs; NaN where a run failed."""
    m = len(steps)
    nominal, plus = series[0], series[1:1 + m]
    if scheme == "forward":
        return ((plus - nominal) / steps[:, None]).T
    minus = series[1 + m:1 + 2 * m]
    return ((plus - minus) / (2 * steps[:, None])).T


def normalise(raw: np.ndarray, y: np.ndarray, nominal: np.ndarray,
              scale: float | None = None) -> tuple[np.ndarray, int]:
    """(p_j / y(t)) dy/dp_j, NaN where y is 0; or (p_j / scale) dy/dp_j. Also the points left out."""
    if scale is not None:
        return raw * (nominal / scale)[None, :], 0
    largest = np.nanmax(np.abs(y)) if np.isfinite(y).any() else 0.0
    zero = ~(np.abs(y) > ZERO * largest)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = raw * nominal[None, :] / np.where(zero, np.nan, y)[:, None]
    return out, int(zero.sum())


def summarise(normalised: np.ndarray, names: list[str]) -> dict[str, Any]:
    """L1, L2, mean, min, max per parameter over the usable points, and the ranking by L1."""
    usable = np.isfinite(normalised).any(axis=1)  # rows where y is 0 are NaN throughout
    rows = normalised[usable]
    entry: dict[str, Any] = {key: {} for key in ("L1", "L2", "mean", "min", "max")}
    for j, name in enumerate(names):
        column = rows[:, j] if rows.size else np.zeros(0)
        good = column[np.isfinite(column)]
        if good.size < column.size or not good.size:  # a failed run: this column is unknown
            for key in entry:
                entry[key][name] = None
            continue
        entry["L1"][name] = float(np.mean(np.abs(good)))
        entry["L2"][name] = float(np.sqrt(np.mean(good ** 2)))
        entry["mean"][name] = float(np.mean(good))
        entry["min"][name] = float(np.min(good))
        entry["max"][name] = float(np.max(good))
    entry["ranking"] = rank(entry["L1"])
    entry["points"] = int(usable.sum())
    return entry


def overall_ranking(entries: list[dict[str, Any]], names: list[str]) -> tuple[list[str], dict]:
    """Parameters by L1 summed over outputs (the manual's time average of |p/y dy/dp| summed
    over outputs), largest first; and those sums."""
    totals: dict[str, float | None] = {}
    for name in names:
        values = [e["L1"].get(name) for e in entries if "L1" in e]
        totals[name] = None if not values or None in values else float(sum(values))
    return rank(totals), totals


def relative_difference(first: np.ndarray, second: np.ndarray) -> list[float | None]:
    """Per parameter, max_t |first - second| / max_t |second| over points finite in both."""
    out: list[float | None] = []
    for a, b in zip(first.T, second.T):
        good = np.isfinite(a) & np.isfinite(b)
        if not good.any():
            out.append(None)
            continue
        scale = np.max(np.abs(b[good]))
        gap = np.max(np.abs(a[good] - b[good]))
        out.append(float(gap / scale) if scale > 0 else float(gap))
    return out
