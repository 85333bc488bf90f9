"""Parameters of a study (pipeline step: load -> plan): kinds, validation and the unit cube.

Every kind maps points of the unit cube to natural values through its inverse CDF (`ppf`), so
every design (random, LHS, Sobol', Saltelli, Morris...) is drawn once in (0, 1)^d and mapped the
same way. The registry is the union `ParameterSpec`: a bare number (`Fixed`), a mapping with
`distribution:` (one class per name), or a mapping with `bounds: [lo, hi]` alone (`Bounds`).

`bounds()` is the finite box used by DOE designs, fits and sweeps: the kind's own limits where it
has them (uniform, bounds, truncnormal, triangular, loguniform, beta, discrete), and the 0.1% and
99.9% quantiles where it has none (normal, lognormal, gamma, and a one-sided truncnormal's open
side).
"""

from __future__ import annotations

import difflib
import inspect
import math
import numbers
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Iterator, Literal, Union

import numpy as np
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Discriminator,
                      Field, Tag, ValidationInfo, field_validator, model_validator)


class _LazyStats:
    """scipy.stats, imported on first use so that validating a study stays fast."""

    def __getattr__(self, name: str) -> Any:
        from scipy import stats as module

        return getattr(module, name)


stats = _LazyStats()

TAIL = 0.001  # bounds() of an unbounded kind: the TAIL and 1 - TAIL quantiles
DISTRIBUTIONS = ("uniform", "normal", "lognormal", "truncnormal", "triangular", "loguniform",
                 "beta", "gamma", "discrete")
TAGS = DISTRIBUTIONS + ("bounds", "fixed")  # union tags; they appear in pydantic error locations
_TINY = float(np.finfo(float).tiny)


def _num(x: float) -> str:
    """A number as a user wrote it: 5 rather than 5.0, full precision otherwise."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def _check_positive(value: float, info: ValidationInfo) -> float:
    if value > 0:
        return value
    name = info.field_name
    hint = "write the bare number to fix the parameter" if value == 0 and name in ("std", "sigma") \
        else f"try {_num(abs(value))}" if value < 0 else "use a small positive value"
    raise ValueError(f"{name} must be above 0; got {name}={_num(value)} ({hint})")


Real = Annotated[float, Field(allow_inf_nan=False)]
Positive = Annotated[float, Field(allow_inf_nan=False, json_schema_extra={"exclusiveMinimum": 0}),
                     AfterValidator(_check_positive)]


def _check_above_low(cls: type, high: float | None, info: ValidationInfo) -> float | None:
    """Field validator for `high`: it must lie above an already validated `low`."""
    low = info.data.get("low")
    if low is not None and high is not None and not low < high:
        hint = "swap them?" if low > high else "for one value write the bare number"
        raise ValueError(f"low must be below high; got low={_num(low)}, high={_num(high)} ({hint})")
    return high


class ParameterBase(BaseModel):
    """What every parameter kind offers: the inverse CDF, a box, a median and a nominal value."""

    model_config = ConfigDict(extra="forbid")
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

    def _check_together(self) -> None:
        """Checks that span fields; subclasses raise ValueError."""

    @model_validator(mode="after")
    def _check_whole(self) -> "ParameterBase":
        self._check_together()
        if self.nominal is not None:
            lo, hi = self._support()
            if not lo <= self.nominal <= hi:
                raise ValueError(f"nominal must lie within [{_num(lo)}, {_num(hi)}], the values "
                                 f"this {self.kind} parameter can take; got nominal="
                                 f"{_num(self.nominal)}")
        return self

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Unit-cube values to natural values (vectorized; NaN outside [0, 1])."""
        u = np.asarray(u, dtype=float)
        u = np.where((u > 0) & (u < _TINY), _TINY, u)  # scipy's root finders fail on subnormals
        dist = self._dist()
        out = np.asarray(dist.ppf(u), dtype=float)
        failed = np.isnan(out) & (u >= 0) & (u <= 1)
        if failed.any():  # the solver gave up far in a tail: the support's nearer end
            out = np.where(failed, np.where(u < 0.5, *dist.support()), out)
        lo, hi = self._limits()  # guard the declared limits against rounding in loc + scale * x
        return np.clip(out, -np.inf if lo is None else lo, np.inf if hi is None else hi)

    def bounds(self) -> tuple[float, float]:
        """Finite box: the kind's own limits, or its 0.1% / 99.9% quantiles where it has none."""
        lo, hi = self._limits()
        lo = float(self.ppf(TAIL)) if lo is None else lo
        hi = float(self.ppf(1 - TAIL)) if hi is None else hi
        return float(lo), float(hi)

    def median(self) -> float:
        return float(self.ppf(0.5))

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


class Uniform(ParameterBase):
    """Uniform on [low, high]."""

    kind: ClassVar[str] = "uniform"
    distribution: Literal["uniform"] = "uniform"
    low: Real = Field(description="lower end")
    high: Real = Field(description="upper end, above low")
    _check_high = field_validator("high")(_check_above_low)

    def _dist(self) -> Any:
        return stats.uniform(loc=self.low, scale=self.high - self.low)

    def _limits(self) -> tuple[float | None, float | None]:
        return self.low, self.high

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
    _check_high = field_validator("high")(_check_above_low)

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
    _check_high = field_validator("high")(_check_above_low)

    @field_validator("mode")
    @classmethod
    def _check_mode(cls, mode: float, info: ValidationInfo) -> float:
        low, high = info.data.get("low"), info.data.get("high")
        if low is not None and high is not None and not low <= mode <= high:
            raise ValueError(f"mode must lie within [low, high]; got mode={_num(mode)} with "
                             f"low={_num(low)}, high={_num(high)}")
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
    _check_high = field_validator("high")(_check_above_low)

    @field_validator("low")
    @classmethod
    def _check_low(cls, low: float) -> float:
        if low <= 0:
            raise ValueError(f"loguniform low must be above 0; got low={_num(low)} (a log scale "
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
    _check_high = field_validator("high")(_check_above_low)

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


class Discrete(ParameterBase):
    """One of `values`, with probabilities proportional to `weights` (equal when left out).
    ppf is the inverse CDF over the values in increasing order, so it is monotone."""

    kind: ClassVar[str] = "discrete"
    distribution: Literal["discrete"] = "discrete"
    values: list[Real] = Field(description="the possible values, at least two different")
    weights: list[Real] | None = Field(None, description="relative weights, one per value "
                                                           "(default: equal)")

    @field_validator("values")
    @classmethod
    def _check_values(cls, values: list[float]) -> list[float]:
        if len(set(values)) < 2:
            raise ValueError("discrete needs at least two different values; got "
                             f"[{', '.join(_num(v) for v in values)}] "
                             "(for one value write the bare number)")
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
                             f"[{', '.join(_num(w) for w in weights)}]")
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

    def _support(self) -> tuple[float, float]:
        return min(self.values), max(self.values)


class Bounds(ParameterBase):
    """`bounds: [lo, hi]` alone: uniform when sampled, the box for DOE designs and fits."""

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True)
    kind: ClassVar[str] = "bounds"
    limits: tuple[Real, Real] = Field(alias="bounds", description="[low, high]")  # bounds(): method

    @field_validator("limits")
    @classmethod
    def _check_limits(cls, limits: tuple[float, float]) -> tuple[float, float]:
        lo, hi = limits
        if not lo < hi:
            hint = f"write [{_num(hi)}, {_num(lo)}]" if lo > hi else \
                "for one value write the bare number"
            raise ValueError(f"bounds must be [low, high] with low below high; got "
                             f"[{_num(lo)}, {_num(hi)}] ({hint})")
        return limits

    def _dist(self) -> Any:
        return stats.uniform(loc=self.limits[0], scale=self.limits[1] - self.limits[0])

    def _limits(self) -> tuple[float | None, float | None]:
        return self.limits

    def to_salib(self) -> tuple[str, list[float]]:
        return "unif", list(self.limits)


class Fixed(ParameterBase):
    """A bare number (or `{value: x}`): the parameter keeps this value for the whole study."""

    kind: ClassVar[str] = "fixed"
    value: Real = Field(description="the value for the whole study")

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

    def _support(self) -> tuple[float, float]:
        return self.value, self.value

    def nominal_value(self, model_default: float | None) -> float:
        """The fixed value: the study overrides the model's own value."""
        return float(self.value)

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        return {"anyOf": [{"type": "number"}, handler(core_schema)]}


# --- the union: classify the raw input once, with one clear error for what fits nothing -------

_KINDS: dict[str, type[ParameterBase]] = {
    c.kind: c for c in (Uniform, Normal, LogNormal, TruncNormal, Triangular, LogUniform, Beta,
                        Gamma, Discrete, Bounds, Fixed)}
_ALIASES = {"norm": "normal", "gauss": "normal", "gaussian": "normal", "lognorm": "lognormal",
            "log_normal": "lognormal", "truncnorm": "truncnormal", "truncated_normal":
            "truncnormal", "triang": "triangular", "triangle": "triangular", "unif": "uniform",
            "logunif": "loguniform", "log_uniform": "loguniform", "reciprocal": "loguniform",
            "categorical": "discrete", "choice": "discrete", "gamma_": "gamma"}
_SPECIAL = {"fixed": "write the bare number to fix a parameter",
            "constant": "write the bare number to fix a parameter",
            "bounds": "write `bounds: [lo, hi]` without `distribution:`"}
_GUESSES = [({"mean", "std", "low", "high"}, "truncnormal"), ({"low", "mode", "high"}, "triangular"),
            ({"alpha", "beta"}, "beta"), ({"shape", "scale"}, "gamma"),
            ({"mu", "sigma"}, "lognormal"), ({"values"}, "discrete"), ({"mean", "std"}, "normal"),
            ({"low", "high"}, "uniform")]  # key sets that betray a missing `distribution:`
_SHAPES = ("a parameter is a number, a mapping with `distribution:` or a mapping with "
           "`bounds: [lo, hi]`")


def _suggest(name: Any) -> str:
    """A did-you-mean hint for an unknown distribution name."""
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    if key in _SPECIAL:
        return f" ({_SPECIAL[key]})"
    close = difflib.get_close_matches(key, DISTRIBUTIONS, n=1, cutoff=0.6)
    match = _ALIASES.get(key) or (close[0] if close else None)
    return f" (did you mean {match!r}?)" if match else ""


def _check_mapping(data: Mapping) -> None:
    if "distribution" in data:
        name = data["distribution"]
        if not isinstance(name, str) or name not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {', '.join(DISTRIBUTIONS)}; "
                             f"got {name!r}{_suggest(name)}")
        if "bounds" in data:
            raise ValueError("bounds does not combine with distribution; for a normal cut to a "
                             "range use distribution: truncnormal with low and high")
        return
    if "bounds" in data or "value" in data:
        return
    keys = {str(k) for k in data}
    alias = next((k for k in ("dist", "type", "kind", "distr", "distribution_type") if k in keys),
                 None)
    if alias:
        hint = f"write `distribution:` instead of `{alias}:`"
    else:
        guess = next((name for need, name in _GUESSES if need <= keys), None)
        hint = f"add `distribution: {guess}`?" if guess else \
            f"allowed distributions: {', '.join(DISTRIBUTIONS)}"
    found = ", ".join(sorted(keys)) or "no keys"
    raise ValueError(f"{_SHAPES}; got a mapping with {found} ({hint})")


def _check_shape(data: Any) -> Any:
    """Before the union: reject what fits no kind with one message (and a hint)."""
    if isinstance(data, ParameterBase):
        return data
    if isinstance(data, bool):
        raise ValueError(f"{_SHAPES}; got {str(data).lower()} (a boolean)")
    if isinstance(data, numbers.Real):  # numpy scalars too
        try:
            return float(data)
        except OverflowError:  # an integer beyond float64
            raise ValueError(f"must be a finite number, got an integer of {len(str(data))} digits "
                             "(numbers are floats, at most about 1.8e308)") from None
    if isinstance(data, str):
        try:
            return float(data)  # YAML reads 1e-3 (no dot) as text
        except ValueError:
            hint = f" (write distribution: {data} with its parameters)" \
                if data in DISTRIBUTIONS else ""
            raise ValueError(f"{_SHAPES}; got the text {data!r}{hint}") from None
    if isinstance(data, Mapping):
        _check_mapping(data)
        return data
    if isinstance(data, (list, tuple)) and len(data) == 2:
        raise ValueError(f"{_SHAPES}; got a list (for a uniform range write "
                         f"bounds: [{', '.join(map(str, data))}])")
    raise ValueError(f"{_SHAPES}; got {type(data).__name__} {data!r}")


def _tag_of(data: Any) -> str | None:
    if isinstance(data, ParameterBase):
        return data.kind
    if isinstance(data, Mapping):
        if "distribution" in data:
            return data["distribution"] if data["distribution"] in DISTRIBUTIONS else None
        return "bounds" if "bounds" in data else "fixed" if "value" in data else None
    return "fixed" if isinstance(data, numbers.Real) and not isinstance(data, bool) else None


ParameterSpec = Annotated[
    Union[tuple(Annotated[cls, Tag(tag)] for tag, cls in _KINDS.items())],  # type: ignore[misc]
    Discriminator(_tag_of, custom_error_type="parameter_kind", custom_error_message=_SHAPES),
    BeforeValidator(_check_shape),
]


# --- sampling the unit cube -------------------------------------------------------------------

_EPS = 2.0 ** -53  # samples stay in [EPS, 1 - EPS], so unbounded ppfs stay finite
def _rng_keyword() -> str:
    """scipy.stats.qmc engines take `rng` from scipy 1.15 on, `seed` before."""
    return "rng" if "rng" in inspect.signature(stats.qmc.Sobol.__init__).parameters else "seed"


def sample_unit(n: int, d: int, method: Literal["random", "lhs", "sobol"],
                seed: np.random.SeedSequence) -> np.ndarray:
    """n points of the open unit cube (0, 1)^d, the same for the same seed.

    sobol: scrambled Sobol'; for n not a power of 2, the first n of the next power of 2.
    """
    if n < 0 or d < 1:
        raise ValueError(f"sample_unit needs n >= 0 and d >= 1; got n={n}, d={d}")
    rng = np.random.Generator(np.random.PCG64(seed))
    if n == 0:
        return np.empty((0, d))
    if method == "random":
        u = rng.random((n, d))
    elif method == "lhs":
        u = stats.qmc.LatinHypercube(d, **{_rng_keyword(): rng}).random(n)
    elif method == "sobol":
        engine = stats.qmc.Sobol(d, scramble=True, **{_rng_keyword(): rng})
        u = engine.random_base2((n - 1).bit_length())[:n]
    else:
        raise ValueError(f"sampling must be one of random, lhs, sobol; got {method!r}")
    return np.clip(u, _EPS, 1 - _EPS)


def sample_unit_chunks(n: int, d: int, method: Literal["random", "lhs", "sobol"],
                       seed: np.random.SeedSequence, rows: int) -> Iterator[np.ndarray]:
    """The points of `sample_unit` in consecutive slices of at most `rows`, drawn as they are
    needed (Latin hypercubes, stratified over all n, come whole)."""
    if method == "lhs" or n <= rows:
        yield sample_unit(n, d, method, seed)
        return
    rng = np.random.Generator(np.random.PCG64(seed))
    if method == "random":
        def draw(k: int) -> np.ndarray:
            return rng.random((k, d))
    else:
        engine = stats.qmc.Sobol(d, scramble=True, **{_rng_keyword(): rng})
        draw = engine.random
    for start in range(0, n, rows):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Sobol' balance: the whole run is a power of 2
            yield np.clip(draw(min(rows, n - start)), _EPS, 1 - _EPS)


def map_unit(parameters: Mapping[str, ParameterBase], u: np.ndarray) -> np.ndarray:
    """Unit-cube rows to natural values: column j through the j-th parameter's ppf."""
    u = np.asarray(u, dtype=float)
    return np.column_stack([p.ppf(u[:, j]) for j, p in enumerate(parameters.values())]) \
        if parameters else np.empty((len(u), 0))


def varied(parameters: Mapping[str, ParameterSpec]) -> dict[str, ParameterSpec]:
    """The parameters the study varies (all but the fixed ones), in study order."""
    return {name: p for name, p in parameters.items() if not isinstance(p, Fixed)}
