"""Response-surface terms: coded factors, term names (`1`, `x1`, `x1*x2`, `x1^2`) and model matrices.

A term is a tuple of powers, one per factor (x-index in parameter order): `x1*x2` is (1, 1, 0),
`x1^2` is (2, 0, 0) and the intercept `1` is all zeros. Factors are coded to [-1, 1] over their
bounds: x = (p - center) / half_range (Montgomery, Design and Analysis of Experiments, ch. 11).
"""

from __future__ import annotations

import re
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from studyrun.core.errors import StudyError

Term = tuple[int, ...]

_FACTOR = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\^(?P<power>[0-9]+))?$")


def read_coding(names: Sequence[str], parameters: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Centers and half-ranges of the varied parameters, from their bounds, in `names` order."""
    centers, halves = [], []
    for name in names:
        try:
            lo, hi = (float(v) for v in parameters[name].bounds())
        except (AttributeError, TypeError, ValueError) as exc:
            raise StudyError(f"doe needs finite bounds for every parameter; {exc}",
                             path=f"parameters.{name}") from exc
        if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
            raise StudyError(f"doe needs finite bounds with low < high; got [{lo}, {hi}]",
                             path=f"parameters.{name}")
        centers.append(lo / 2.0 + hi / 2.0)  # (lo + hi) / 2 bit for bit, without overflowing
        halves.append((hi - lo) / 2.0)
    return np.array(centers), np.array(halves)


def to_coded(natural: np.ndarray, centers: np.ndarray, halves: np.ndarray) -> np.ndarray:
    """Natural units to coded units."""
    return (np.asarray(natural, dtype=float) - centers) / halves


def to_natural(coded: np.ndarray, centers: np.ndarray, halves: np.ndarray) -> np.ndarray:
    """Coded units to natural units."""
    return centers + np.asarray(coded, dtype=float) * halves


def name_term(term: Term) -> str:
    """The contract's name of a term: `1`, `x1`, `x1*x2`, `x1^2`, `x1^2*x3`."""
    parts = [f"x{i + 1}" if p == 1 else f"x{i + 1}^{p}" for i, p in enumerate(term) if p]
    return "*".join(parts) or "1"


def order_of(term: Term) -> str:
    """The group a term belongs to in the ANOVA: intercept, linear, interaction, quadratic, higher."""
    degree = sum(term)
    if degree == 0:
        return "intercept"
    if degree == 1:
        return "linear"
    if degree == 2:
        return "quadratic" if max(term) == 2 else "interaction"
    return "higher"


def standard_terms(k: int, response: str) -> list[Term]:
    """The terms of a linear, interaction or quadratic model in k factors, in the usual order."""
    unit = [tuple(int(i == j) for j in range(k)) for i in range(k)]
    terms: list[Term] = [tuple([0] * k)] + unit
    if response in ("interaction", "quadratic"):
        terms += [tuple(int(j in (a, b)) for j in range(k)) for a, b in combinations(range(k), 2)]
    if response == "quadratic":
        terms += [tuple(2 * int(i == j) for j in range(k)) for i in range(k)]
    return terms


def parse_formula(formula: str, names: Sequence[str]) -> list[Term]:
    """Terms of a formula such as `x1 + x2 + x1*x2 + x1^2` (parameter names work too).

    The intercept is always included; terms are separated by `+`; a factor is `xK` (K from 1 in
    parameter order) or a parameter name, optionally raised to a power with `^`.
    """
    k = len(names)
    index = {f"x{i + 1}": i for i in range(k)} | {n: i for i, n in enumerate(names)}
    terms: list[Term] = [tuple([0] * k)]
    for raw in formula.split("+"):
        text = raw.strip().replace(" ", "")
        if text in ("", "1"):
            continue
        powers = [0] * k
        for factor in text.split("*"):
            match = _FACTOR.match(factor)
            if not match or match["name"] not in index:
                raise StudyError(
                    f"unknown term {text!r} in response formula; factors are x1..x{k} or "
                    f"parameter names ({', '.join(names)}), e.g. 'x1 + x2 + x1*x2 + x1^2'",
                    path="analysis.response")
            powers[index[match["name"]]] += int(match["power"] or 1)
        if tuple(powers) not in terms:
            terms.append(tuple(powers))
    return terms


def select_terms(response: str, names: Sequence[str]) -> list[Term]:
    """The requested terms: a standard model by name, or a formula."""
    if response in ("linear", "interaction", "quadratic"):
        return standard_terms(len(names), response)
    return parse_formula(response, names)


def build_matrix(coded: np.ndarray, terms: Sequence[Term]) -> np.ndarray:
    """The model matrix: one column per term, evaluated at the coded design points."""
    coded = np.atleast_2d(np.asarray(coded, dtype=float))
    columns = [np.prod(coded ** np.array(term, dtype=float), axis=1) for term in terms]
    return np.column_stack(columns) if columns else np.empty((coded.shape[0], 0))


def find_estimable(matrix: np.ndarray, rtol: float = 1e-8) -> tuple[list[int], dict[int, dict[int, float]]]:
    """Columns the design can estimate, taken in order; each later dependent column is dropped.

    Returns the kept column indices and, for each dropped column, the combination of kept
    columns it equals on this design (its alias).
    """
    kept: list[int] = []
    aliases: dict[int, dict[int, float]] = {}
    for j in range(matrix.shape[1]):
        column = matrix[:, j]
        norm = np.linalg.norm(column)
        if norm == 0.0:
            aliases[j] = {}
            continue
        if kept:
            basis = matrix[:, kept]
            coef, *_ = np.linalg.lstsq(basis, column, rcond=None)
            residual = column - basis @ coef
        else:
            coef, residual = np.empty(0), column
        if np.linalg.norm(residual) <= rtol * norm * max(1.0, np.sqrt(len(column))):
            aliases[j] = {kept[i]: float(c) for i, c in enumerate(coef) if abs(c) > 1e-6}
            continue
        kept.append(j)
    return kept, aliases
