"""One grid for the analyses that compare runs' series time by time (time-resolved Sobol' indices,
local sensitivity, calibration), from each run's series as stored on its own grid.

Runs that share a grid (every equation model, most others) are stacked as they are. When grids
differ (a simulation that stops on an event), every run is interpolated onto one grid: the one
the analysis declares (calibration: the observation times), else that of the first run in plan
order that succeeded. A run whose grid does not cover it gets NaN, and a note names it.
"""

from __future__ import annotations

import numpy as np

from .core.design import Outcome

SHOWN = 5  # run ids a note names before "and N more"


def put_on_one_grid(outcome: Outcome, stored: list[dict[str, np.ndarray] | None],
                    run_ids: np.ndarray, wanted: dict[str, str],
                    declared: np.ndarray | None = None) -> None:
    """Fill outcome.time and outcome.series[name] (runs, T) from each run's stored arrays."""
    ok = np.asarray(outcome.ok, dtype=bool)
    grids = [None if r is None or "time" not in r else r["time"] for r in stored]
    used = [g for g, good in zip(grids, ok) if g is not None and good]
    if not used:
        used = [g for g in grids if g is not None]
    if not used:
        return
    shared = all(g.shape == used[0].shape and np.array_equal(g, used[0]) for g in used)
    grid = used[0] if shared or declared is None else np.asarray(declared, dtype=float)
    fits = [time is not None and covers(time, grid) for time in grids]
    blank = np.full(len(grid), np.nan)
    for name, output in wanted.items():
        outcome.series[name] = np.array([
            onto(run[output], time, grid) if fit and output in run else blank
            for run, time, fit in zip(stored, grids, fits)])
    outcome.time = grid
    short = [i for i, (time, fit) in enumerate(zip(grids, fits)) if ok[i] and time is not None
             and not fit]
    if short:
        outcome.series_notes.append(uncovered_note(run_ids[short], grid, declared is not None))


def covers(time: np.ndarray, grid: np.ndarray) -> bool:
    """Whether a run's grid spans the common one (to rounding)."""
    if time.shape == grid.shape and np.array_equal(time, grid):
        return True
    tolerance = 1e-9 * max(1.0, abs(float(grid[-1] - grid[0])))
    return bool(time[0] <= grid[0] + tolerance and time[-1] >= grid[-1] - tolerance)


def onto(values: np.ndarray, time: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """One run's series on a grid its own covers: as it is, or interpolated."""
    if time.shape == grid.shape and np.array_equal(time, grid):
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
