"""The other adaptive methods (RK23, DOP853, LSODA, Radau, BDF): scipy's solve_ivp once
per member, with a budget of rate evaluations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from studyrun.blocks.expr import ExprError
from studyrun.models.equations.compiled import CompiledSystem, rhs_function

MAX_EVALUATIONS = 100_000  # rate evaluations per member for solve_ivp methods


def integrate_each(compiled: CompiledSystem, base: Mapping[str, Any], y0: np.ndarray,
                   times: np.ndarray, method: str, rtol: float, atol: float
                   ) -> tuple[np.ndarray, list[str | None]]:
    """scipy.integrate.solve_ivp once per member (its right-hand side vectorized over columns,
    which speeds up the finite-difference Jacobians of Radau and BDF)."""
    from scipy.integrate import solve_ivp

    S, n = y0.shape
    out = np.full((S, len(times), n), np.nan)
    errors: list[str | None] = [None] * n
    span = (float(times[0]), float(times[-1]))
    for m in range(n):
        member = {k: (float(v[m]) if isinstance(v, np.ndarray) else v) for k, v in base.items()}
        fun = _BudgetedRates(compiled, member)
        try:
            sol = solve_ivp(fun, span, y0[:, m], method=method, t_eval=times, rtol=rtol,
                            atol=atol, vectorized=True)
        except _OverBudget:
            errors[m] = (f"{method}: more than {MAX_EVALUATIONS} evaluations of the rates before "
                         f"time {fun.last_time:g} (the solution may blow up, or the problem be "
                         f"too stiff for this method)")
            continue
        except ExprError:
            raise
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            errors[m] = f"{method}: {exc}"
            continue
        out[:, : sol.y.shape[1], m] = sol.y
        if sol.status < 0 or not sol.success:
            errors[m] = f"{method}: {sol.message}"
        elif not np.isfinite(sol.y).all():
            errors[m] = f"{method}: the solution is not finite"
    return out, errors


class _OverBudget(Exception):
    pass


class _BudgetedRates:
    """The rates of one member for solve_ivp, giving up after MAX_EVALUATIONS calls (LSODA can
    creep towards a singularity for ever)."""

    def __init__(self, compiled: CompiledSystem, member: dict[str, Any]):
        self.compiled, self.member, self.calls, self.last_time = compiled, member, 0, 0.0

    def __call__(self, t: float, y: np.ndarray) -> np.ndarray:
        self.calls += 1
        self.last_time = t
        if self.calls > MAX_EVALUATIONS:
            raise _OverBudget
        return rhs_function(self.compiled, self.member, t, y)
