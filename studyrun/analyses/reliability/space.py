"""The two spaces of a reliability analysis: the parameters' own (physical) space and the
standard normal space in which FORM, SORM and the samplers work, joined by the Nataf transform
(the study's Gaussian copula); and the limit state g read from the study's `failure:` condition.

Formulas: docs/methods.md, "Reliability: the probability of failure".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from studyrun.blocks.expr import Expr, inequality
from studyrun.core.design import Evaluate

PLANE_KEPT, PLANE_DRAWN = 200_000, 2000  # runs of two parameters kept, and drawn
_EPS = 2.0 ** -53  # as the unit-cube samplers: a point stays inside (0, 1)


@dataclass(frozen=True)
class Failure:
    """`left < right` (or <=, >, >=) over quantities, read as the limit state g = left - right
    (right - left for > and >=): the run fails where g < 0 (g <= 0 for the non-strict forms)."""

    text: str
    left: Expr
    right: Expr
    below: bool  # True for < and <=: failure where left is below right
    strict: bool

    @property
    def names(self) -> set[str]:
        return set(self.left.names | self.right.names)

    def g(self, values: dict[str, np.ndarray]) -> np.ndarray:
        """The limit state of each run (NaN where a quantity is)."""
        left, right = (np.asarray(side(values), dtype=float) for side in (self.left, self.right))
        return np.broadcast_to(left - right if self.below else right - left,
                               np.broadcast(left, right).shape).astype(float)

    def failed(self, g: np.ndarray) -> np.ndarray:
        return g < 0 if self.strict else g <= 0


def failure(text: str) -> Failure:
    """Parse a failure condition; ExprError says what is wrong and what is allowed."""
    left, right, below, strict = inequality(
        text, "a condition: write one inequality over quantities, such as 'g < 0' or 'peak > 5' "
        "(several limit states: 'min(g1, g2) < 0' fails where either does)")
    return Failure(text, left, right, below, strict)


@dataclass(frozen=True)
class Transform:
    """Standard normal points u to parameter values x: z = L u (L the Cholesky factor of the
    normal scores' correlation), then each column through Phi and its parameter's inverse CDF."""

    parameters: dict[str, Any]
    correlation: np.ndarray | None = None

    @property
    def names(self) -> list[str]:
        return list(self.parameters)

    def to_physical(self, u: np.ndarray) -> np.ndarray:
        from scipy.special import ndtr

        from studyrun.blocks.params import map_unit

        z = np.atleast_2d(np.asarray(u, dtype=float))
        if self.correlation is not None:
            z = z @ np.linalg.cholesky(self.correlation).T
        return map_unit(self.parameters, np.clip(ndtr(z), _EPS, 1 - _EPS))

    def pull_back(self, u: np.ndarray, slope: np.ndarray) -> np.ndarray:
        """dg/du at the point u from dg/dx there, by the chain rule: dx_j/dz_j =
        phi(z_j) / f_j(x_j) (0 where Phi(z_j) is clipped), then dg/du = L^T (dg/dx * dx/dz)."""
        from scipy.special import ndtr

        u = np.asarray(u, dtype=float).reshape(-1)
        lower = np.linalg.cholesky(self.correlation) if self.correlation is not None else None
        z = u if lower is None else lower @ u
        x = self.to_physical(u)[0]
        density = np.array([p._dist().pdf(v) for p, v in zip(self.parameters.values(), x)])
        inside = (ndtr(z) > _EPS) & (ndtr(z) < 1 - _EPS)
        with np.errstate(all="ignore"):
            dxdz = np.where(inside, np.exp(-z * z / 2) / np.sqrt(2 * np.pi) / density, 0.0)
        slope_z = np.asarray(slope, dtype=float) * dxdz
        return slope_z if lower is None else lower.T @ slope_z

    def named(self, u: np.ndarray) -> dict[str, dict[str, float]]:
        """A point in both spaces, by parameter name."""
        x = self.to_physical(u)[0]
        return {"physical": dict(zip(self.names, map(float, x))),
                "standard": dict(zip(self.names, map(float, np.ravel(u))))}


@dataclass
class LimitState:
    """g at standard normal points, through the study's `evaluate` (executor and store): counts
    the runs asked for and the runs that gave no finite g."""

    evaluate: Evaluate
    transform: Transform
    condition: Failure
    runs: int = 0
    dropped: int = 0
    rounds: list[dict[str, Any]] = field(default_factory=list)
    kept: list[np.ndarray] = field(default_factory=list)  # (x1, x2, g) rows, two parameters

    def __call__(self, u: np.ndarray) -> np.ndarray:
        u = np.atleast_2d(np.asarray(u, dtype=float))
        if not len(u):
            return np.zeros(0)
        outcome = self.evaluate(self.transform.to_physical(u))
        g = self.condition.g(outcome.values)
        g = np.where(outcome.ok, g, np.nan)
        g[~np.isfinite(g)] = np.nan
        self.runs += len(u)
        self.dropped += int(np.isnan(g).sum())
        if u.shape[1] == 2 and sum(map(len, self.kept)) < PLANE_KEPT:
            self.kept.append(np.column_stack([self.transform.to_physical(u), g]))
        return g

    def plane(self) -> dict[str, Any] | None:
        """Two parameters: the runs to draw, (x1, x2, g) of at most PLANE_DRAWN of them, evenly
        spread over the order they ran in."""
        if not self.kept:
            return None
        rows = np.concatenate(self.kept)
        rows = rows[np.unique(np.linspace(0, len(rows) - 1, min(len(rows), PLANE_DRAWN))
                              .astype(int))]
        return {"parameters": self.transform.names,
                "points": [[float(v) if np.isfinite(v) else None for v in row] for row in rows]}


GFunction = Callable[[np.ndarray], np.ndarray]  # standard normal rows -> g, NaN where none
