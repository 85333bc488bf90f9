"""A stored surrogate as analysis.json holds it, checked before `predict` computes anything: a
folder from elsewhere may hold a term of degree 100,000, 20,000 training points or NaN
hyperparameters, which would take minutes, exhaust memory or print NaN. The bounds are those of
what studyrun fits."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from studyrun.analyses.surrogate.basis import FAMILIES, MAX_DEGREE
from studyrun.analyses.surrogate.gp import MAX_TRAINING
from studyrun.analyses.surrogate.pce import MAX_TERMS
from studyrun.results.analysis_file import Malformed, first_error

Finite = Annotated[float, Field(allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Exponent = Annotated[float, Field(gt=-1, allow_inf_nan=False)]  # of a Jacobi or Laguerre weight
Power = Annotated[int, Field(strict=True, ge=0, le=MAX_DEGREE)]


class Stored(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Germ(Stored):
    family: Literal[FAMILIES]  # type: ignore[valid-type]
    map: Literal["affine", "uniform", "normal"]
    shift: Finite = 0.0
    scale: Finite = 1.0
    a: Exponent = 0.0
    b: Exponent = 0.0
    parameter: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _scale(self) -> "Germ":
        if self.scale == 0:
            raise ValueError("scale must not be 0")
        return self


class Term(Stored):
    index: dict[str, Power]
    coefficient: Finite


class Kernel(Stored):
    length_scales: dict[str, Positive]
    signal_variance: Positive
    noise_variance: Positive
    box: dict[str, tuple[Finite, Finite]]
    training_inputs: Annotated[list[list[Finite]], Field(min_length=1, max_length=MAX_TRAINING)]
    training_outputs: Annotated[list[Finite], Field(min_length=1, max_length=MAX_TRAINING)]


class Surrogate(Stored):
    """A PCE (basis and terms) or a GP (kernel) over the named inputs."""

    inputs: dict[str, dict[str, Any]]
    basis: dict[str, Germ] | None = None
    terms: Annotated[list[Term], Field(max_length=MAX_TERMS)] | None = None
    rmse: Finite | None = None
    kernel: Kernel | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Surrogate":
        names = set(self.inputs)
        if self.terms is not None:
            if self.basis is None or set(self.basis) != names:
                raise ValueError("basis must name each input once")
            if any(set(t.index) != names for t in self.terms):
                raise ValueError("each term's index must give a power of each input")
        elif self.kernel is not None:
            kernel, d = self.kernel, len(names)
            if set(kernel.length_scales) != names or set(kernel.box) != names:
                raise ValueError("kernel.length_scales and kernel.box must name each input once")
            if any(not low < high for low, high in kernel.box.values()):
                raise ValueError("each range of kernel.box must be [low, high] with low < high")
            if any(len(row) != d for row in kernel.training_inputs) \
                    or len(kernel.training_outputs) != len(kernel.training_inputs):
                raise ValueError(f"kernel.training_inputs must be rows of {d} numbers, as many "
                                 "as kernel.training_outputs")
        else:
            raise ValueError("neither terms (a pce) nor kernel (a gp)")
        return self


def check(fit: dict[str, Any], quantity: str) -> Surrogate:
    """The stored surrogate of `quantity`, or Malformed saying what is wrong and the bound."""
    try:
        return Surrogate.model_validate(fit)
    except ValidationError as error:
        raise Malformed(f"results.{quantity}: the stored surrogate: {first_error(error)} "
                        f"(predict evaluates finite numbers, at most {MAX_TERMS:,} terms of "
                        f"degree at most {MAX_DEGREE}, a gp of at most {MAX_TRAINING:,} training "
                        "points)") from None
