"""The objectives and constraints of a multi-objective optimisation, parsed from the study file.

An objective is a quantity's name, or with `scenarios:` a statistic of it over the scenarios:
`mean(q)`, `std(q)` (ddof 0) or `percentile(q, p)` (numpy's linear interpolation); a bare name
is then its mean. A constraint is `left <= right` or `left >= right` (`<`, `>` alike) in the safe
expression language, over quantities (and the same statistics); its violation is how far the
inequality is off, 0 where it holds, as pymoo's `G <= 0`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from studyrun.blocks.expr import Expr, inequality

STATISTICS = ("mean", "std", "percentile")
_STATISTIC = re.compile(r"\b(mean|std|percentile)\s*\(\s*([A-Za-z_]\w*)\s*(?:,\s*([^()]*?)\s*)?\)")
_NAME = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Statistic:
    """A quantity, or a statistic of it over the scenarios of a candidate."""

    text: str
    quantity: str
    kind: str = "value"  # value | mean | std | percentile
    percent: float | None = None

    def over(self, values: np.ndarray) -> np.ndarray:
        """Per candidate, from values of shape (candidates, scenarios)."""
        if self.kind == "std":
            return values.std(axis=1)
        if self.kind == "percentile":
            return np.percentile(values, self.percent, axis=1)
        return values.mean(axis=1)  # value, with one scenario, or mean


def statistic(text: str, robust: bool) -> Statistic:
    """Parse `q`, `mean(q)`, `std(q)` or `percentile(q, p)`; ValueError says what is allowed."""
    text = str(text).strip()
    if _NAME.fullmatch(text):
        return Statistic(text, text, "mean" if robust else "value")
    found = _STATISTIC.fullmatch(text)
    if found is None:
        raise ValueError(f"{text!r} is not a quantity's name or a statistic of one; write q, "
                         "mean(q), std(q) or percentile(q, 95)")
    kind, quantity, argument = found.groups()
    if not robust:
        raise ValueError(f"{text!r} is a statistic over scenarios, but the analysis has no "
                         "scenarios: set scenarios: N (draws of the parameters that have "
                         "distributions), or name the quantity alone")
    if (kind == "percentile") != (argument is not None):
        raise ValueError(f"{text!r}: percentile takes a quantity and a percent, "
                         "percentile(q, 95); mean and std take the quantity alone")
    percent = None
    if argument is not None:
        try:
            percent = float(argument)
        except ValueError:
            raise ValueError(f"{text!r}: the percent must be a number from 0 to 100") from None
        if not 0 <= percent <= 100:
            raise ValueError(f"{text!r}: the percent must be from 0 to 100, got {percent:g}")
    return Statistic(text, quantity, kind, percent)


@dataclass(frozen=True)
class Constraint:
    """`left <= right` as the violation max(0, left - right) (and `>=` the other way)."""

    text: str
    left: Expr
    right: Expr
    at_most: bool  # True for <= and <
    statistics: dict[str, Statistic]  # placeholder name -> the statistic it stands for

    @property
    def quantities(self) -> set[str]:
        names = (self.left.names | self.right.names) - set(self.statistics)
        return set(names) | {s.quantity for s in self.statistics.values()}

    def gap(self, env: dict[str, np.ndarray]) -> np.ndarray:
        """How far each candidate is past the limit: > 0 where it is not met, <= 0 where it is."""
        left, right = (np.asarray(side(env), dtype=float) for side in (self.left, self.right))
        return left - right if self.at_most else right - left

    def violation(self, env: dict[str, np.ndarray]) -> np.ndarray:
        """How far each candidate is from meeting it (0 where it does); NaN stays NaN."""
        gap = self.gap(env)
        return np.where(np.isnan(gap), np.nan, np.maximum(gap, 0.0))


def constraint(text: str, robust: bool, index: int) -> Constraint:
    """Parse one constraint; ValueError (ExprError) says what is wrong and what is allowed."""
    text = str(text).strip()
    statistics: dict[str, Statistic] = {}

    def placeholder(found: re.Match) -> str:
        name = f"statistic{index}_{len(statistics)}_"  # not a quantity name: _ is refused
        statistics[name] = statistic(found.group(0), robust)
        return name

    written = _STATISTIC.sub(placeholder, text)
    left, right, below, _ = inequality(written, "an inequality: write left <= right or left >= "
                                       "right, over quantities (for example travel <= 0.08)", text)
    return Constraint(text, left, right, below, statistics)

