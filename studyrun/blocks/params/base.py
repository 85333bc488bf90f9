"""What every parameter kind shares: the base class, number types and checks, the constants, and
scipy.stats imported lazily."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)


class _LazyStats:
    """scipy.stats, imported on first use so that validating a study stays fast."""

    def __getattr__(self, name: str) -> Any:
        from scipy import stats as module

        return getattr(module, name)


stats = _LazyStats()

TAIL = 0.001  # bounds() of an unbounded kind: the TAIL and 1 - TAIL quantiles
TAIL_Z = 3.0902323061678132  # the standard normal's 1 - TAIL quantile
DISTRIBUTIONS = ("uniform", "normal", "lognormal", "truncnormal", "triangular", "loguniform",
                 "beta", "gamma", "discrete")
TAGS = DISTRIBUTIONS + ("bounds", "fixed")  # union tags; they appear in pydantic error locations
_TINY = float(np.finfo(float).tiny)


def uniform_support(low: float, high: float) -> tuple[float, float]:
    """scipy.stats.uniform(loc=low, scale=high - low).support(), with the same rounding, without
    importing scipy: validating a study checks a nominal against it."""
    return float(low), float((high - low) + low)


def uniform_ppf(low: float, high: float, u: np.ndarray) -> np.ndarray:
    """scipy.stats.uniform(loc=low, scale=high - low).ppf(u), the same numbers (u * scale + loc,
    NaN outside [0, 1]), without importing scipy: a study of `bounds` parameters needs no more."""
    u = np.asarray(u, dtype=float)
    return np.where((u >= 0) & (u <= 1), u * (high - low) + low, np.nan)


def as_number(x: float) -> str:
    """A number as a user wrote it: 5 rather than 5.0, full precision otherwise."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def _check_positive(value: float, info: ValidationInfo) -> float:
    if value > 0:
        return value
    name = info.field_name
    hint = "write the bare number to fix the parameter" if value == 0 and name in ("std", "sigma") \
        else f"try {as_number(abs(value))}" if value < 0 else "use a small positive value"
    raise ValueError(f"{name} must be above 0; got {name}={as_number(value)} ({hint})")


Real = Annotated[float, Field(allow_inf_nan=False)]
# A YAML integer that fits an int64 stays an int (a model may count with it); others are floats.
Whole = Annotated[int, Field(strict=True, ge=-2**63, le=2**63 - 1)]
Positive = Annotated[float, Field(allow_inf_nan=False, json_schema_extra={"exclusiveMinimum": 0}),
                     AfterValidator(_check_positive)]


def check_above_low(cls: type, high: float | None, info: ValidationInfo) -> float | None:
    """Field validator for `high`: it must lie above an already validated `low`."""
    low = info.data.get("low")
    if low is not None and high is not None and not low < high:
        hint = "swap them?" if low > high else "for one value write the bare number"
        raise ValueError(f"low must be below high; got low={as_number(low)}, high={as_number(high)} ({hint})")
    return high


class ParameterBase(BaseModel):
    """What every parameter kind offers: the inverse CDF, a box, a median and a nominal value."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ClassVar[str]

    nominal: Real | None = Field(None, description="value for local sensitivity and the start of a "
                                 "fit (default: the model's own value, else the median)")
    description: str | None = None

    def _dist(self) -> Any:
        """The frozen scipy.stats distribution."""
        raise NotImplementedError

    def _limits(self) -> tuple[float | None, float | None]:
        """The kind's own lower and upper limits, None on a side where it has none."""
        return None, None

    def _support(self) -> tuple[float, float]:
        """Where the distribution lives (possibly infinite); nominal must lie in it."""
        lo, hi = self._dist().support()
        return float(lo), float(hi)

    def _quantiles(self, u: np.ndarray) -> np.ndarray:
        """The distribution's inverse CDF at u (NaN where it fails, and outside [0, 1])."""
        return self._dist().ppf(u)

    def _check_together(self) -> None:
        """Checks that span fields; subclasses raise ValueError."""

    def _tails(self) -> tuple[float, float]:
        """The TAIL and 1 - TAIL quantiles, or bounds on them, computed without scipy (inf or
        NaN where they overflow): what the finiteness check looks at."""
        lo, hi = self._limits()
        return float(lo), float(hi)

    def _check_finite(self) -> None:
        """A parameter's values (its 0.1% to 99.9% range) must be finite floats, and so must
        that range's width (the scale of a uniform, a design's box): else sampling overflows."""
        with np.errstate(all="ignore"):
            lo, hi = (np.float64(v) for v in self._tails())
            width = hi - lo
        if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(width)):
            reach = f"its values reach about {as_number(lo)} to {as_number(hi)}"
            if np.isfinite(lo) and np.isfinite(hi):
                reach += ", a range wider than the largest float"
            raise ValueError(f"this {self.kind} parameter's values are not all finite numbers: "
                             f"{reach} (its 0.1% to 99.9% quantiles; floats reach about "
                             "1.8e308); rescale the parameter (other units) or narrow it")

    @model_validator(mode="after")
    def _check_whole(self) -> "ParameterBase":
        self._check_together()
        self._check_finite()
        if self.nominal is not None:
            lo, hi = self._support()
            if not lo <= self.nominal <= hi:
                raise ValueError(f"nominal must lie within [{as_number(lo)}, {as_number(hi)}], the values "
                                 f"this {self.kind} parameter can take; got nominal="
                                 f"{as_number(self.nominal)}")
        return self

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Unit-cube values to natural values (vectorized; NaN outside [0, 1])."""
        u = np.asarray(u, dtype=float)
        u = np.where((u > 0) & (u < _TINY), _TINY, u)  # scipy's root finders fail on subnormals
        out = np.asarray(self._quantiles(u), dtype=float)
        failed = np.isnan(out) & (u >= 0) & (u <= 1)
        if failed.any():  # the solver gave up far in a tail: the support's nearer end
            out = np.where(failed, np.where(u < 0.5, *self._dist().support()), out)
        lo, hi = self._limits()  # guard the declared limits against rounding in loc + scale * x
        return np.clip(out, -np.inf if lo is None else lo, np.inf if hi is None else hi)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """Natural values to the unit interval, the inverse of ppf (vectorized)."""
        return np.asarray(self._dist().cdf(np.asarray(x, dtype=float)), dtype=float)

    def bounds(self) -> tuple[float, float]:
        """Finite box: the kind's own limits, or its 0.1% / 99.9% quantiles where it has none."""
        lo, hi = self._limits()
        lo = float(self.ppf(TAIL)) if lo is None else lo
        hi = float(self.ppf(1 - TAIL)) if hi is None else hi
        return float(lo), float(hi)

    def median(self) -> float:
        return float(self.ppf(0.5))

    @property
    def whole(self) -> bool:
        """Whether the study gives this parameter as whole numbers only (an integer constant,
        `values:` of integers): a model that writes its inputs as text writes them as integers."""
        return False

    def nominal_value(self, model_default: float | None) -> float:
        """`nominal` if set, else the model's own value if it has one, else the median."""
        if self.nominal is not None:
            return float(self.nominal)
        return float(model_default) if model_default is not None else self.median()

    def to_salib(self) -> tuple[str, list[float]]:
        """SALib problem `dists` and `bounds` entries, for kinds SALib knows."""
        raise NotImplementedError(f"SALib has no {self.kind} distribution; sample the unit "
                                  "cube and map it with ppf() instead")

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        if "distribution" in target.get("properties", {}):  # the tag is required in a file
            target["required"] = ["distribution"] + [r for r in target.get("required", [])
                                                     if r != "distribution"]
        return schema
