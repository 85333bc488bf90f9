"""The union `ParameterSpec`: classify the raw input once, with one clear error (and a hint) for
what fits no kind."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Annotated, Any, TypeAlias, Union

from pydantic import BeforeValidator, Discriminator, Tag

from studyrun.blocks.params.base import DISTRIBUTIONS, ParameterBase
from studyrun.blocks.params.continuous import (
    Beta,
    Gamma,
    LogNormal,
    LogUniform,
    Normal,
    Triangular,
    TruncNormal,
    Uniform,
)
from studyrun.blocks.params.values import Bounds, Discrete, Fixed
from studyrun.core.text import closest

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
    match = _ALIASES.get(key) or closest(key, DISTRIBUTIONS)
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
    if isinstance(data, numbers.Integral) and -2**63 <= data < 2**63:
        return int(data)  # a whole number stays one: a model may count with it
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


ParameterSpec: TypeAlias = Annotated[
    Union[tuple(Annotated[cls, Tag(tag)] for tag, cls in _KINDS.items())],  # type: ignore[misc]
    Discriminator(_tag_of, custom_error_type="parameter_kind", custom_error_message=_SHAPES),
    BeforeValidator(_check_shape),
]
