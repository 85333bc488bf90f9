"""A stored response surface as analysis.json holds it, checked before `predict` computes
anything: a folder from elsewhere may hold a term of power 100,000, a term of a factor the fit
lacks, a covariance of another size or NaN estimates. The bounds are those of what doe fits."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from studyrun.results.analysis_file import Malformed, first_error

MAX_TERMS = 5000  # a quadratic in 90 factors has 4,186
MAX_POWER = 10  # of one factor in a term (doe's formulas ask for 3 at most in practice)

Finite = Annotated[float, Field(allow_inf_nan=False)]
TermName = Annotated[str, Field(pattern=r"^(1|x[1-9][0-9]{0,5}(\^[0-9]{1,2})?"
                                        r"(\*x[1-9][0-9]{0,5}(\^[0-9]{1,2})?)*)$")]


class Stored(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Factor(Stored):
    symbol: str
    center: Finite
    half_range: Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Coefficient(Stored):
    estimate: Finite


class Surface(Stored):
    coding: Annotated[dict[str, Factor], Field(min_length=1)]
    terms: Annotated[list[TermName], Field(min_length=1, max_length=MAX_TERMS)]
    coefficients: dict[str, Coefficient]
    covariance: list[list[Finite]] | None = None
    df_resid: Annotated[int, Field(ge=0)] | None = None
    sigma: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Surface":
        k = len(self.coding)
        for term in self.terms:
            for factor in term.split("*") if term != "1" else []:
                symbol, _, power = factor.partition("^")
                if int(symbol[1:]) > k or int(power or 1) > MAX_POWER:
                    raise ValueError(f"term {term!r} names a factor beyond x{k} or a power "
                                     f"above {MAX_POWER}")
            if term not in self.coefficients:
                raise ValueError(f"term {term!r} has no coefficient")
        size = len(self.terms)
        if self.covariance is not None and (len(self.covariance) != size
                                            or any(len(row) != size for row in self.covariance)):
            raise ValueError(f"covariance must be {size} x {size}, a row and column per term")
        return self


def check(fit: Any, quantity: str) -> Surface:
    """The stored surface of `quantity`, or Malformed saying what is wrong and the bounds."""
    try:
        return Surface.model_validate(fit)
    except ValidationError as error:
        raise Malformed(f"results.{quantity}: the stored response surface: {first_error(error)} "
                        f"(predict evaluates finite numbers, at most {MAX_TERMS:,} terms, "
                        f"powers up to {MAX_POWER})") from None
