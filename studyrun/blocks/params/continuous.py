"""The continuous distributions, each the pydantic spec of a `distribution:` and its scipy.stats
counterpart: uniform, normal, lognormal, truncnormal, triangular, loguniform, beta, gamma."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from studyrun.blocks.params.base import (
    TAIL_Z,
    ParameterBase,
    Positive,
    Real,
    as_number,
    check_above_low,
    stats,
    uniform_ppf,
    uniform_support,
)


def normal_tails(mean: float, std: float) -> tuple[float, float]:
    """A normal's 0.1% and 99.9% quantiles in float64 (inf where they overflow)."""
    with np.errstate(all="ignore"):
        mean, spread = np.float64(mean), TAIL_Z * np.float64(std)
        return mean - spread, mean + spread


class Uniform(ParameterBase):
    """Uniform on [low, high]."""

    kind: ClassVar[str] = "uniform"
    distribution: Literal["uniform"] = "uniform"
    low: Real = Field(description="lower end")
    high: Real = Field(description="upper end, above low")
    _check_high = field_validator("high")(check_above_low)

    def _dist(self) -> Any:
        return stats.uniform(loc=self.low, scale=self.high - self.low)

    def _limits(self) -> tuple[float | None, float | None]:
        return self.low, self.high

    def _support(self) -> tuple[float, float]:
        return uniform_support(self.low, self.high)

    def _quantiles(self, u: np.ndarray) -> np.ndarray:
        return uniform_ppf(self.low, self.high, u)

    def to_salib(self) -> tuple[str, list[float]]:
        return "unif", [self.low, self.high]


class Normal(ParameterBase):
    """Normal with mean and standard deviation `std`."""

    kind: ClassVar[str] = "normal"
    distribution: Literal["normal"] = "normal"
    mean: Real
    std: Positive = Field(description="standard deviation (not variance), above 0")

    def _dist(self) -> Any:
        return stats.norm(loc=self.mean, scale=self.std)

    def _quantiles(self, u: np.ndarray) -> np.ndarray:
        """scipy.stats.norm's ppf, the same numbers (ndtri(u) * std + mean, NaN outside [0, 1]),
        through scipy.special alone: importing scipy.stats costs a second of every Monte Carlo."""
        from scipy.special import ndtri

        u = np.asarray(u, dtype=float)
        return np.where((u >= 0) & (u <= 1), ndtri(u) * self.std + self.mean, np.nan)

    def _support(self) -> tuple[float, float]:
        return -math.inf, math.inf

    def _tails(self) -> tuple[float, float]:
        return normal_tails(self.mean, self.std)

    def to_salib(self) -> tuple[str, list[float]]:
        return "norm", [self.mean, self.std]


class LogNormal(ParameterBase):
    """Lognormal: give EITHER `mean` and `std` of the variable itself (as Dakota does), OR `mu`
    and `sigma`, the mean and standard deviation of its natural logarithm (as numpy and SALib
    do). They relate by sigma^2 = ln(1 + std^2/mean^2), mu = ln(mean) - sigma^2/2; the median is
    exp(mu)."""

    kind: ClassVar[str] = "lognormal"
    distribution: Literal["lognormal"] = "lognormal"
    mean: Positive | None = Field(None, description="mean of the variable (with std)")
    std: Positive | None = Field(None, description="standard deviation of the variable (with mean)")
    mu: Real | None = Field(None, description="mean of ln(x) (with sigma); the median is exp(mu)")
    sigma: Positive | None = Field(None, description="standard deviation of ln(x) (with mu)")

    def _check_together(self) -> None:
        pairs = {"mean and std (of the variable)": ("mean", "std"),
                 "mu and sigma (of its natural log)": ("mu", "sigma")}
        given = {k: [f for f in fs if getattr(self, f) is not None] for k, fs in pairs.items()}
        used = [k for k, fs in given.items() if fs]
        if len(used) != 1:
            found = ", ".join(f for fs in given.values() for f in fs) or "neither"
            raise ValueError("lognormal takes either mean and std (of the variable) or mu and "
                             f"sigma (of its natural log), exactly one pair; got {found}")
        missing = [f for f in pairs[used[0]] if f not in given[used[0]]]
        if missing:
            raise ValueError(f"lognormal needs both {used[0]}; got {given[used[0]][0]} "
                             f"without {missing[0]}")

    def log_params(self) -> tuple[float, float]:
        """(mu, sigma): mean and standard deviation of ln(x)."""
        if self.mu is not None:
            return float(self.mu), float(self.sigma)
        s2 = math.log1p((self.std / self.mean) ** 2)
        return math.log(self.mean) - s2 / 2, math.sqrt(s2)

    def _dist(self) -> Any:
        mu, sigma = self.log_params()
        return stats.lognorm(s=sigma, scale=math.exp(mu))

    def _tails(self) -> tuple[float, float]:
        if self.mu is not None:
            mu, sigma = np.float64(self.mu), np.float64(self.sigma)
        else:  # log_params in float64, so an overflow gives inf rather than OverflowError
            s2 = np.log1p((np.float64(self.std) / self.mean) ** 2)
            mu, sigma = np.log(self.mean) - s2 / 2, np.sqrt(s2)
        return tuple(np.exp(normal_tails(mu, sigma)))

    def to_salib(self) -> tuple[str, list[float]]:
        return "lognorm", list(self.log_params())


class TruncNormal(ParameterBase):
    """Normal(mean, std) truncated to [low, high]; leave out low or high for a one-sided cut."""

    kind: ClassVar[str] = "truncnormal"
    distribution: Literal["truncnormal"] = "truncnormal"
    mean: Real = Field(description="mean of the normal before truncation")
    std: Positive = Field(description="standard deviation of the normal before truncation")
    low: Real | None = Field(None, description="lower cut (leave out for none)")
    high: Real | None = Field(None, description="upper cut (leave out for none)")
    _check_high = field_validator("high")(check_above_low)

    def _check_together(self) -> None:
        if self.low is None and self.high is None:
            raise ValueError("truncnormal needs low, high or both; got neither "
                             "(without them use distribution: normal)")

    def _dist(self) -> Any:
        lo = -np.inf if self.low is None else self.low
        hi = np.inf if self.high is None else self.high
        return stats.truncnorm((lo - self.mean) / self.std, (hi - self.mean) / self.std,
                               loc=self.mean, scale=self.std)

    def _limits(self) -> tuple[float | None, float | None]:
        return self.low, self.high

    def _tails(self) -> tuple[float, float]:
        lo, hi = normal_tails(self.mean, self.std)
        return (lo if self.low is None else self.low), (hi if self.high is None else self.high)

    def to_salib(self) -> tuple[str, list[float]]:
        lo, hi = self._support()
        return "truncnorm", [lo, hi, self.mean, self.std]


class Triangular(ParameterBase):
    """Triangular on [low, high] with its peak at `mode`."""

    kind: ClassVar[str] = "triangular"
    distribution: Literal["triangular"] = "triangular"
    low: Real
    high: Real
    mode: Real = Field(description="the peak, within [low, high]")  # last: its check sees both
    _check_high = field_validator("high")(check_above_low)

    @field_validator("mode")
    @classmethod
    def _check_mode(cls, mode: float, info: ValidationInfo) -> float:
        low, high = info.data.get("low"), info.data.get("high")
        if low is not None and high is not None and not low <= mode <= high:
            raise ValueError(f"mode must lie within [low, high]; got mode={as_number(mode)} with "
                             f"low={as_number(low)}, high={as_number(high)}")
        return mode

    def _dist(self) -> Any:
        width = self.high - self.low
        return stats.triang(c=(self.mode - self.low) / width, loc=self.low, scale=width)

    def _limits(self) -> tuple[float | None, float | None]:
        return self.low, self.high

    def to_salib(self) -> tuple[str, list[float]]:
        c = (self.mode - self.low) / (self.high - self.low)
        if c >= 1:  # SALib refuses a peak at the upper end
            return super().to_salib()
        return "triang", [self.low, self.high, c]


class LogUniform(ParameterBase):
    """Log-uniform (reciprocal) on [low, high], 0 < low < high: uniform in ln(x)."""

    kind: ClassVar[str] = "loguniform"
    distribution: Literal["loguniform"] = "loguniform"
    low: Real = Field(description="lower end, above 0")
    high: Real = Field(description="upper end, above low")
    _check_high = field_validator("high")(check_above_low)

    @field_validator("low")
    @classmethod
    def _check_low(cls, low: float) -> float:
        if low <= 0:
            raise ValueError(f"loguniform low must be above 0; got low={as_number(low)} (a log scale "
                             "never reaches 0; try a small positive value such as 1e-6)")
        return low

    def _dist(self) -> Any:
        return stats.loguniform(self.low, self.high)

    def _limits(self) -> tuple[float | None, float | None]:
        return self.low, self.high

    def to_salib(self) -> tuple[str, list[float]]:
        return "logunif", [self.low, self.high]


class Beta(ParameterBase):
    """Beta(alpha, beta) stretched from [0, 1] to [low, high]."""

    kind: ClassVar[str] = "beta"
    distribution: Literal["beta"] = "beta"
    alpha: Positive = Field(description="first shape parameter (a)")
    beta: Positive = Field(description="second shape parameter (b)")
    low: Real = Field(0.0, description="where 0 of the standard beta lands")
    high: Real = Field(1.0, description="where 1 of the standard beta lands")
    _check_high = field_validator("high")(check_above_low)

    def _dist(self) -> Any:
        return stats.beta(self.alpha, self.beta, loc=self.low, scale=self.high - self.low)

    def _limits(self) -> tuple[float | None, float | None]:
        return self.low, self.high


class Gamma(ParameterBase):
    """Gamma with `shape` (k), `scale` (theta) and a shift `loc`: mean loc + k * theta."""

    kind: ClassVar[str] = "gamma"
    distribution: Literal["gamma"] = "gamma"
    shape: Positive = Field(description="shape k")
    scale: Positive = Field(description="scale theta (not the rate)")
    loc: Real = Field(0.0, description="shift: the lower end of the support")

    def _dist(self) -> Any:
        return stats.gamma(self.shape, loc=self.loc, scale=self.scale)

    def _tails(self) -> tuple[float, float]:
        """loc, and above the 99.9% quantile: k + 3.1 sqrt(k) + 7 scales past loc."""
        shape = np.float64(self.shape)
        return self.loc, self.loc + self.scale * (shape + TAIL_Z * np.sqrt(shape) + 7)
