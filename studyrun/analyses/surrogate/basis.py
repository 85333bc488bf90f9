"""Orthonormal polynomials matched to each input's distribution (the Wiener-Askey scheme), the
map from natural values to each family's standard variable, and truncated multi-index sets.

Legendre for uniform inputs, probabilists' Hermite for normal ones, generalised Laguerre for
gamma, Jacobi for beta. Other kinds go through an isoprobabilistic transform: bounded ones to a
uniform variable through their CDF (Legendre), lognormal to a standard normal through its
logarithm's CDF (Hermite). Each family is normalised by Gauss quadrature of its own weight, so
every polynomial has mean square 1 under its input's distribution.

Formulas: docs/methods.md, "Surrogate models".
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

FAMILIES = ("legendre", "hermite", "laguerre", "jacobi")
MAX_DEGREE = 100  # a higher degree's Gauss rule takes seconds to minutes, and Hermite's overflows


@dataclass(frozen=True)
class Germ:
    """One input's polynomial family and how a natural value becomes its standard variable.

    map "affine": z = (x - shift) / scale; "uniform": z = 2 F(x) - 1; "normal": z = Phi^-1(F(x)),
    with F the parameter's CDF (then `parameter` holds the parameter as the study wrote it).
    """

    family: str
    map: str
    shift: float = 0.0
    scale: float = 1.0
    a: float = 0.0  # laguerre: alpha; jacobi: alpha (the (1 - z) exponent)
    b: float = 0.0  # jacobi: beta (the (1 + z) exponent)
    parameter: dict[str, Any] | None = None

    def standard(self, x: np.ndarray, cdf=None) -> np.ndarray:
        """Natural values to the family's standard variable; `cdf` for the transformed maps."""
        x = np.asarray(x, dtype=float)
        if self.map == "affine":
            return (x - self.shift) / self.scale
        from scipy import special

        u = np.clip(cdf(x), 1e-300, 1 - 1e-16)
        return 2.0 * u - 1.0 if self.map == "uniform" else special.ndtri(u)

    def table(self, z: np.ndarray, degree: int) -> np.ndarray:
        """The orthonormal polynomials of degree 0..degree at z, one column each."""
        columns = [_evaluate(self.family, n, self.a, self.b, z) for n in range(degree + 1)]
        return np.stack(columns, axis=1) / _norms(self.family, degree, self.a, self.b)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"family": self.family, "map": self.map}
        if self.map == "affine":
            out |= {"shift": self.shift, "scale": self.scale}
        else:
            out["parameter"] = self.parameter
        if self.family in ("laguerre", "jacobi"):
            out["a"] = self.a
        if self.family == "jacobi":
            out["b"] = self.b
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Germ":
        return cls(**data)


def germ_for(parameter) -> Germ:
    """The family and map of a study parameter (see the module docstring)."""
    kind = parameter.kind
    if kind in ("uniform", "bounds"):
        low, high = parameter.bounds()
        return Germ("legendre", "affine", shift=(low + high) / 2, scale=(high - low) / 2)
    if kind == "normal":
        return Germ("hermite", "affine", shift=parameter.mean, scale=parameter.std)
    if kind == "gamma":
        return Germ("laguerre", "affine", shift=parameter.loc, scale=parameter.scale,
                    a=parameter.shape - 1.0)
    if kind == "beta":
        low, high = parameter.low, parameter.high
        return Germ("jacobi", "affine", shift=(low + high) / 2, scale=(high - low) / 2,
                    a=parameter.beta - 1.0, b=parameter.alpha - 1.0)
    dump = parameter.model_dump(mode="json", by_alias=True, exclude_none=True)
    if kind == "lognormal":
        return Germ("hermite", "normal", parameter=dump)
    return Germ("legendre", "uniform", parameter=dump)


def _evaluate(family: str, n: int, a: float, b: float, z: np.ndarray) -> np.ndarray:
    from scipy import special  # here: validating a study does not need scipy (0.1 s)

    if family == "legendre":
        return special.eval_legendre(n, z)
    if family == "hermite":
        return special.eval_hermitenorm(n, z)
    if family == "laguerre":
        return special.eval_genlaguerre(n, a, z)
    return special.eval_jacobi(n, a, b, z)


@lru_cache(maxsize=256)
def _norms(family: str, degree: int, a: float, b: float) -> np.ndarray:
    """Root mean squares of the degree 0..degree polynomials under the family's probability
    measure, by a Gauss rule exact for their squares."""
    from scipy import special

    nodes = degree + 1
    if family == "legendre":
        z, w = special.roots_legendre(nodes)
    elif family == "hermite":
        z, w = special.roots_hermitenorm(nodes)
    elif family == "laguerre":
        z, w = special.roots_genlaguerre(nodes, a)
    else:
        z, w = special.roots_jacobi(nodes, a, b)
    w = w / w.sum()
    return np.array([np.sqrt(w @ _evaluate(family, n, a, b, z) ** 2) for n in range(degree + 1)])


def multi_indices(dimension: int, degree: int, q: float = 1.0) -> np.ndarray:
    """Every multi-index alpha with sum(alpha_i^q)^(1/q) <= degree (q = 1: total degree), in
    order of total degree, then lexicographically from the last input; row 0 is the constant.
    Only those are made (`term_count` of them): the inputs a term involves, then their degrees."""
    budget = _budget(degree, q)
    parts = [np.zeros((1, dimension), np.int64)]
    for k in range(1, min(dimension, int(budget)) + 1):
        degrees = np.array(_positive(k, degree, q, budget), dtype=np.int64).reshape(-1, k)
        if not len(degrees):
            break
        inputs = np.array(list(itertools.combinations(range(dimension), k)), dtype=np.int64)
        block = np.zeros((len(inputs) * len(degrees), dimension), np.int64)
        rows = np.arange(len(block))[:, None]
        block[rows, np.repeat(inputs, len(degrees), axis=0)] = np.tile(degrees, (len(inputs), 1))
        parts.append(block)
    indices = np.concatenate(parts)
    if q < 1.0:
        norm = np.sum(indices.astype(float) ** q, axis=1) ** (1.0 / q)
        indices = indices[norm <= degree + 1e-9]
    order = np.lexsort((*(-indices[:, ::-1].T), indices.sum(axis=1)))
    return indices[order]


def _budget(degree: int, q: float) -> float:
    """sum(alpha_i^q) at most, a little above the bound `multi_indices` keeps to."""
    return (degree + 1e-9) ** q * (1 + 1e-9)


def _positive(k: int, degree: int, q: float, left: float) -> list[tuple[int, ...]]:
    """The k-tuples of degrees 1..degree whose q-th powers sum to at most `left`."""
    if k == 0:
        return [()]
    return [(a, *rest) for a in range(1, degree + 1) if a ** q <= left
            for rest in _positive(k - 1, degree, q, left - a ** q)]


def term_count(dimension: int, degree: int, q: float = 1.0) -> int:
    """Terms of `multi_indices(dimension, degree, q)`, counted without making them: binomial(
    dimension + degree, degree) for q = 1; else, as each non-zero alpha_i adds at least 1 to
    sum(alpha_i^q), a sum over the k inputs of a term of binomial(dimension, k) times the
    k-tuples of positive degrees within the bound."""
    if q >= 1.0:
        return math.comb(dimension + degree, degree)
    budget = _budget(degree, q)

    def positive(k: int, left: float) -> int:  # len(_positive(k, degree, q, left))
        if k == 0:
            return 1
        return sum(positive(k - 1, left - a ** q) for a in range(1, degree + 1) if a ** q <= left)

    return sum(math.comb(dimension, k) * positive(k, budget)
               for k in range(min(dimension, int(budget)) + 1))


def design_matrix(standard: np.ndarray, germs: list[Germ], indices: np.ndarray) -> np.ndarray:
    """Psi[i, j]: the j-th multi-index's polynomial at the i-th point (standard variables)."""
    degree = int(indices.max()) if indices.size else 0
    psi = np.ones((standard.shape[0], len(indices)))
    for k, germ in enumerate(germs):
        column = indices[:, k]
        if column.any():
            psi *= germ.table(standard[:, k], degree)[:, column]
    return psi
