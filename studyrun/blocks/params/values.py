"""Kinds given by their values rather than a continuous distribution: discrete values, a bare
`bounds: [lo, hi]` and a fixed number."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from studyrun.blocks.params.base import (
    ParameterBase,
    Real,
    Whole,
    as_number,
    stats,
    uniform_ppf,
    uniform_support,
)


class Discrete(ParameterBase):
    """One of `values`, with probabilities proportional to `weights` (equal when left out).
    ppf is the inverse CDF over the values in increasing order, so it is monotone."""

    kind: ClassVar[str] = "discrete"
    distribution: Literal["discrete"] = "discrete"
    values: list[Whole | Real] = Field(description="the possible values, at least two "
                                       "different (integers stay whole numbers)")
    weights: list[Real] | None = Field(None, description="relative weights, one per value "
                                                           "(default: equal)")

    @field_validator("values")
    @classmethod
    def _check_values(cls, values: list[float]) -> list[float]:
        if len(set(values)) < 2:
            raise ValueError("discrete needs at least two different values; got "
                             f"[{', '.join(as_number(v) for v in values)}] "
                             "(for one value write the bare number)")
        far = [v for v in values if isinstance(v, int) and abs(v) > 2**53]
        if far:  # a design holds floats: such an integer would reach the model rounded
            raise ValueError(f"values holds the integer {far[0]}, beyond 2**53 "
                             "(9007199254740992): not every such integer is exact in a design, "
                             "which holds floats; rescale it (other units)")
        return values

    @field_validator("weights")
    @classmethod
    def _check_weights(cls, weights: list[float] | None, info: ValidationInfo) -> Any:
        values = info.data.get("values")
        if weights is None or values is None:
            return weights
        if len(weights) != len(values):
            raise ValueError(f"weights must have one entry per value; got {len(weights)} weights "
                             f"for {len(values)} values")
        if min(weights) < 0 or sum(weights) <= 0:
            raise ValueError("weights must be at least 0 and sum to more than 0; got "
                             f"[{', '.join(as_number(w) for w in weights)}]")
        return weights

    def _table(self) -> tuple[np.ndarray, np.ndarray]:
        """Values of positive weight in increasing order, and their cumulative probabilities."""
        values = np.asarray(self.values, dtype=float)
        weights = np.ones_like(values) if self.weights is None else np.asarray(self.weights, float)
        keep = weights > 0
        order = np.argsort(values[keep], kind="stable")
        cum = np.cumsum(weights[keep][order])
        cum /= cum[-1]
        cum[-1] = 1.0
        return values[keep][order], cum

    def ppf(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=float)
        values, cum = self._table()
        index = np.minimum(np.searchsorted(cum, u, side="left"), len(values) - 1)
        return np.where((u >= 0) & (u <= 1), values[index], np.nan)

    def _limits(self) -> tuple[float | None, float | None]:
        return min(self.values), max(self.values)

    @property
    def whole(self) -> bool:
        return all(isinstance(v, int) for v in self.values)

    def _support(self) -> tuple[float, float]:
        return min(self.values), max(self.values)


class Bounds(ParameterBase):
    """`bounds: [lo, hi]` alone: uniform when sampled, the box for DOE designs and fits."""

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True, frozen=True)
    kind: ClassVar[str] = "bounds"
    limits: tuple[Real, Real] = Field(alias="bounds", description="[low, high]")  # bounds(): method

    @field_validator("limits")
    @classmethod
    def _check_limits(cls, limits: tuple[float, float]) -> tuple[float, float]:
        lo, hi = limits
        if not lo < hi:
            hint = f"write [{as_number(hi)}, {as_number(lo)}]" if lo > hi else \
                "for one value write the bare number"
            raise ValueError(f"bounds must be [low, high] with low below high; got "
                             f"[{as_number(lo)}, {as_number(hi)}] ({hint})")
        return limits

    def _dist(self) -> Any:
        return stats.uniform(loc=self.limits[0], scale=self.limits[1] - self.limits[0])

    def _limits(self) -> tuple[float | None, float | None]:
        return self.limits

    def _support(self) -> tuple[float, float]:
        return uniform_support(*self.limits)

    def _quantiles(self, u: np.ndarray) -> np.ndarray:
        return uniform_ppf(*self.limits, u)

    def to_salib(self) -> tuple[str, list[float]]:
        return "unif", list(self.limits)


class Fixed(ParameterBase):
    """A bare number (or `{value: x}`): the parameter keeps this value for the whole study."""

    kind: ClassVar[str] = "fixed"
    value: Whole | Real = Field(description="the value for the whole study (an integer stays one)")

    @model_validator(mode="before")
    @classmethod
    def _wrap_number(cls, data: Any) -> Any:
        return data if isinstance(data, (Mapping, ParameterBase)) else {"value": data}

    def _check_together(self) -> None:
        if self.nominal is not None:
            raise ValueError("a fixed parameter takes no nominal; its value is its nominal")

    def ppf(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=float)
        return np.where((u >= 0) & (u <= 1), self.value, np.nan)

    def _limits(self) -> tuple[float | None, float | None]:
        return self.value, self.value

    @property
    def whole(self) -> bool:
        return isinstance(self.value, int)

    def _support(self) -> tuple[float, float]:
        return self.value, self.value

    def nominal_value(self, model_default: float | None) -> float | int:
        """The fixed value, of the type the study gave: the study overrides the model's own value."""
        return self.value

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        return {"anyOf": [{"type": "number"}, handler(core_schema)]}
