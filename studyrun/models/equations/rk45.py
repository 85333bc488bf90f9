"""RK45 over an ensemble: Dormand-Prince 5(4) with scipy's semantics but a step size and
error norm per member, so a run's result does not depend on its batch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from studyrun.models.equations.compiled import CompiledSystem, rhs_function

MAX_STEPS = 200_000  # accepted + rejected attempts per member for RK45


# Dormand-Prince 5(4) with the dense output of scipy.integrate.RK45 (Shampine 1986).
_C = np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1])
_A = [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
      [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
      [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656]]
_B = [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]
_E = [-71 / 57600, 0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40]
_P = np.array([
    [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0, 0, 0, 0],
    [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0, 127303824393 / 49829197408, -318862633887 / 49829197408,
     701980252875 / 199316789632],
    [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423]])
_SAFETY, _MIN_FACTOR, _MAX_FACTOR, _EXPONENT = 0.9, 0.2, 10.0, -1 / 5


def _combine(weights: list[float], stages: list[np.ndarray]) -> np.ndarray:
    total = None
    for w, k in zip(weights, stages):
        if w:
            total = w * k if total is None else total + w * k
    return total


def _rms(x: np.ndarray) -> np.ndarray:
    """Root mean square over states, per member; summed row by row so that a member's value
    does not depend on how many members share the array (numpy sums a single column pairwise)."""
    total = x[0] * x[0]
    for row in x[1:]:
        total += row * row
    return np.sqrt(total / len(x))


def _subset(base: Mapping[str, Any], keep: np.ndarray) -> dict[str, Any]:
    return {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in base.items()}


@dataclass
class _Ensemble:
    """The active members of an RK45 ensemble; every array's last axis runs over members."""

    idx: np.ndarray  # indices into the batch
    base: dict[str, Any]  # constants of the active members
    t: np.ndarray
    y: np.ndarray  # (S, m)
    f: np.ndarray  # (S, m)
    h: np.ndarray  # step size to try next
    rejected: np.ndarray  # the current step was rejected at least once
    next_out: np.ndarray  # index of the next output time
    attempts: np.ndarray

    def keep(self, mask: np.ndarray) -> None:
        for name in ("idx", "t", "h", "rejected", "next_out", "attempts"):
            setattr(self, name, getattr(self, name)[mask])
        self.y, self.f = self.y[:, mask], self.f[:, mask]
        self.base = _subset(self.base, mask)


def integrate_rk45(compiled: CompiledSystem, base: Mapping[str, Any], y0: np.ndarray,
                   times: np.ndarray, rtol: float, atol: float
                   ) -> tuple[np.ndarray, list[str | None]]:
    """Dormand-Prince 5(4) over an ensemble with a step size and error norm per member."""
    S, n = y0.shape
    T = len(times)
    out = np.full((S, T, n), np.nan)
    out[:, 0] = y0
    errors: list[str | None] = [None] * n
    t_bound = float(times[-1])
    f0 = rhs_function(compiled, base, float(times[0]), y0)
    ens = _Ensemble(np.arange(n), dict(base), np.full(n, float(times[0])), y0.copy(), f0,
                    np.zeros(n), np.zeros(n, bool), np.ones(n, int), np.zeros(n, int))
    ens.h = _initial_step(compiled, ens, t_bound, rtol, atol)
    start_bad = ~(np.isfinite(y0).all(axis=0) & np.isfinite(f0).all(axis=0))
    for m in np.flatnonzero(start_bad):
        errors[m] = "RK45: the initial state or its rates are not finite"
    ens.keep(~start_bad)
    while ens.idx.size:
        failed = _rk45_attempt(compiled, ens, out, times, t_bound, rtol, atol, errors)
        done = ens.t >= t_bound
        if failed.any() or done.any():
            ens.keep(~(failed | done))
    return out, errors


def _initial_step(compiled: CompiledSystem, ens: _Ensemble, t_bound: float, rtol: float,
                  atol: float) -> np.ndarray:
    """scipy's select_initial_step (Hairer, Norsett & Wanner II.4), one value per member."""
    interval = t_bound - ens.t
    scale = atol + np.abs(ens.y) * rtol
    d0, d1 = _rms(ens.y / scale), _rms(ens.f / scale)
    h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.where(d1 > 0, d1, 1.0))
    h0 = np.minimum(h0, interval)
    f1 = rhs_function(compiled, ens.base, ens.t + h0, ens.y + h0 * ens.f)
    d2 = _rms((f1 - ens.f) / scale) / h0
    flat = (d1 <= 1e-15) & (d2 <= 1e-15)
    h1 = np.where(flat, np.maximum(1e-6, h0 * 1e-3),
                  (0.01 / np.maximum(np.maximum(d1, d2), 1e-300)) ** (1 / 5))
    h = np.minimum(np.minimum(100 * h0, h1), interval)
    return np.where(np.isfinite(h) & (h > 0), h, 1e-6)


def _rk45_attempt(compiled: CompiledSystem, ens: _Ensemble, out: np.ndarray, times: np.ndarray,
                  t_bound: float, rtol: float, atol: float, errors: list[str | None]
                  ) -> np.ndarray:
    """One step attempt for every active member; returns the mask of members that failed."""
    min_step = 10 * np.abs(np.nextafter(ens.t, np.inf) - ens.t)
    h_abs = np.where(~ens.rejected & (ens.h < min_step), min_step, ens.h)
    too_small, too_many = h_abs < min_step, ens.attempts >= MAX_STEPS
    for m, t in zip(ens.idx[too_small], ens.t[too_small]):
        errors[m] = (f"RK45: required step size is less than spacing between numbers at time "
                     f"{t:g} (the solution may blow up or stop being finite)")
    for m, t in zip(ens.idx[too_many & ~too_small], ens.t[too_many & ~too_small]):
        errors[m] = (f"RK45: more than {MAX_STEPS} step attempts before time {t:g}; the problem "
                     f"may be stiff (try LSODA, Radau or BDF)")
    failed = too_small | too_many
    t_new = np.minimum(ens.t + h_abs, t_bound)
    h = t_new - ens.t
    stages = [ens.f]
    for s in range(1, 6):
        dy = _combine(_A[s], stages) * h
        stages.append(rhs_function(compiled, ens.base, ens.t + _C[s] * h, ens.y + dy))
    y_new = ens.y + h * _combine(_B, stages)
    f_new = rhs_function(compiled, ens.base, t_new, y_new)
    stages.append(f_new)
    scale = atol + np.maximum(np.abs(ens.y), np.abs(y_new)) * rtol
    err = _rms(_combine(_E, stages) * h / scale)
    finite = np.isfinite(err)
    accept = finite & (err < 1) & ~failed
    grow = np.where(err == 0, _MAX_FACTOR,
                    np.minimum(_MAX_FACTOR, _SAFETY * np.where(err > 0, err, 1.0) ** _EXPONENT))
    grow = np.where(ens.rejected, np.minimum(1.0, grow), grow)
    shrink = np.where(finite, np.maximum(_MIN_FACTOR, _SAFETY * err ** _EXPONENT), _MIN_FACTOR)
    ens.h = np.abs(h) * np.where(accept, grow, shrink)
    ens.rejected = ~accept
    ens.attempts += 1
    if accept.any():
        a: Any = slice(None) if accept.all() else np.flatnonzero(accept)  # views when all pass
        _save_dense(ens, a, h[a], t_new[a], [k[:, a] for k in stages], out, times)
        ens.t[a], ens.y[:, a], ens.f[:, a] = t_new[a], y_new[:, a], f_new[:, a]
    return failed


def _save_dense(ens: _Ensemble, a: Any, h: np.ndarray, t_new: np.ndarray,
                stages: list[np.ndarray], out: np.ndarray, times: np.ndarray) -> None:
    """Store the quartic interpolant at every output time in (t, t_new] of accepted members."""
    nxt = ens.next_out[a]
    counts = np.maximum(np.searchsorted(times, t_new, side="right") - nxt, 0)
    if not counts.any():
        return
    q = [_combine(list(_P[:, k]), stages) for k in range(4)]
    # every (member, output time) due, member by member: a step may pass hundreds of outputs
    col = np.repeat(np.arange(len(nxt)), counts)
    first = np.cumsum(counts) - counts
    due = np.repeat(nxt, counts) + np.arange(len(col)) - np.repeat(first, counts)
    h, t_old = h[col], ens.t[a][col]
    x = (times[due] - t_old) / h
    values = ens.y[:, a][:, col] + h * (
        (((q[3][:, col] * x + q[2][:, col]) * x + q[1][:, col]) * x + q[0][:, col]) * x)
    out[:, due, ens.idx[a][col]] = values
    ens.next_out[a] = nxt + counts
