"""One grid for the analyses that compare runs' series time by time (time-resolved Sobol' indices,
local sensitivity, calibration), from each run's series as stored on its own grid.

Runs that share a grid (every equation model, most others) are stacked as they are. When grids
differ (a simulation that stops on an event), every run is interpolated onto one grid: the one
the analysis declares (calibration: the observation times), else that of the first run in plan
order that succeeded. A run whose grid does not cover it gets NaN, and a note names it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from studyrun.core.design import Outcome

SHOWN = 5  # run ids a note names before "and N more"


def put_on_one_grid(outcome: Outcome, stored: list[dict[str, np.ndarray] | None],
                    run_ids: np.ndarray, wanted: dict[str, str],
                    declared: np.ndarray | None = None) -> None:
    """Fill outcome.time and outcome.series[name] (runs, T) from each run's stored arrays."""
    common = common_grid([None if r is None else r.get("time") for r in stored], outcome.ok,
                         run_ids, declared)
    if common is not None:
        put_on_grid(outcome, stored, wanted, common)


@dataclass
class CommonGrid:
    """The grid runs are compared on, and the note naming the runs that do not cover it."""

    grid: np.ndarray
    notes: list[str]


def common_grid(grids: list[np.ndarray | None], ok: np.ndarray, run_ids: np.ndarray,
                declared: np.ndarray | None = None) -> CommonGrid | None:
    """The one grid of these runs (theirs when they share it, else `declared` or the first
    succeeded run's); None when no run has a grid."""
    ok = np.asarray(ok, dtype=bool)
    used = [g for g, good in zip(grids, ok) if g is not None and good]
    if not used:
        used = [g for g in grids if g is not None]
    if not used:
        return None
    shared = all(g is used[0] or (g.shape == used[0].shape and np.array_equal(g, used[0]))
                 for g in used)
    grid = used[0] if shared or declared is None else np.asarray(declared, dtype=float)
    short = [i for i, (time, good) in enumerate(zip(grids, ok))
             if good and time is not None and not covers(time, grid)]
    notes = [uncovered_note(run_ids[short], grid, declared is not None)] if short else []
    return CommonGrid(grid, notes)


def put_on_grid(outcome: Outcome, stored: list[dict[str, np.ndarray] | None],
                wanted: dict[str, str], common: CommonGrid) -> None:
    """Fill outcome.time and outcome.series[name] (runs, T) on the common grid; NaN for a run
    without the output or whose grid does not cover it."""
    grid = common.grid
    fits = [run is not None and "time" in run and covers(run["time"], grid) for run in stored]
    blank = np.full(len(grid), np.nan)
    for name, output in wanted.items():
        outcome.series[name] = np.array([
            onto(run[output], run["time"], grid) if fit and output in run else blank
            for run, fit in zip(stored, fits)]).reshape(len(stored), len(grid))
    outcome.time = grid
    outcome.series_notes.extend(common.notes)


def covers(time: np.ndarray, grid: np.ndarray) -> bool:
    """Whether a run's grid spans the common one (to rounding)."""
    if time is grid or (time.shape == grid.shape and np.array_equal(time, grid)):
        return True
    tolerance = 1e-9 * max(1.0, abs(float(grid[-1] - grid[0])))
    return bool(time[0] <= grid[0] + tolerance and time[-1] >= grid[-1] - tolerance)


def onto(values: np.ndarray, time: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """One run's series on a grid its own covers: as it is, or interpolated."""
    if time is grid or (time.shape == grid.shape and np.array_equal(time, grid)):
        return values
    return np.interp(grid, time, values)


def uncovered_note(run_ids: np.ndarray, grid: np.ndarray, declared: bool) -> str:
    """Which runs were left out of the time-resolved results, and why."""
    names = [f"{int(i) & (2**64 - 1):016x}" for i in run_ids[:SHOWN]]
    more = f" and {len(run_ids) - SHOWN} more" if len(run_ids) > SHOWN else ""
    whose = "the analysis's" if declared else "that of the first run that succeeded"
    return (f"{len(run_ids)} run(s) stop before or start after the common time grid "
            f"[{grid[0]:g}, {grid[-1]:g}] ({whose}; the runs' grids differ), so their series are "
            f"left out of the time-resolved results: {', '.join(names)}{more}")
