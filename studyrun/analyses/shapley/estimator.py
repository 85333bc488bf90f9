"""Shapley effects and Kucherenko's indices by conditional sampling (Song, Nelson and Staum 2016),
under the study's Gaussian copula.

The cost of a set J of inputs is c(J) = E[Var(Y | X_not J)]: the variance left when every input
but J is known. c(empty) = 0 and c(all) = Var(Y). Shapley effects are weighted sums of its
increments; Kucherenko's total index of i is c({i}) / V and his first-order index
1 - c(all but i) / V. Each cost is estimated from `outer` draws of X_not J, each followed by
`inner` draws of X_J from its conditional distribution given them, which under a Gaussian copula
is exact: the normal scores of X_J given the others' are normal, with the conditional mean and
covariance of the copula's correlation matrix.

Formulas, defaults and edge cases: docs/methods.md, "Shapley effects".
"""

from __future__ import annotations

from dataclasses import dataclass
from math import factorial
from typing import Any, Callable

import numpy as np

EXACT_UP_TO = 8  # permutations: exact (every subset's cost once) up to this many inputs


@dataclass(frozen=True)
class Scheme:
    """Which costs a design estimates and how they combine into Shapley effects.

    `blocks` are the subsets (bit masks over the inputs) whose cost each block of
    outer x inner rows estimates; `weights` (d, costs) maps the costs [c(empty)=0, c(all)=1,
    blocks...] to the unnormalised Shapley effects; `permutations` (m, d) for a random scheme
    (its weights are an average over them), None for the exact one."""

    d: int
    blocks: list[int]
    permutations: np.ndarray | None

    @property
    def full(self) -> int:
        return (1 << self.d) - 1

    @property
    def complete(self) -> bool:
        """Its costs give Shapley effects (not only Kucherenko's indices)."""
        return self.permutations is not None or len(self.blocks) == self.full - 1

    def weights(self, chosen: np.ndarray | None = None) -> np.ndarray:
        """(d, 2 + blocks): the linear map from [0, 1, block costs...] to the Shapley effects;
        a random scheme's over the `chosen` permutations (default: all)."""
        d, columns = self.d, 2 + len(self.blocks)
        w = np.zeros((d, columns))
        if self.permutations is None:
            index = {mask: 2 + k for k, mask in enumerate(self.blocks)}
            index[0], index[self.full] = 0, 1
            for i in range(d):
                for mask in range(1 << d):
                    if mask >> i & 1:
                        continue
                    s = bin(mask).count("1")
                    weight = factorial(s) * factorial(d - s - 1) / factorial(d)
                    w[i, index[mask | 1 << i]] += weight
                    w[i, index[mask]] -= weight
            return w
        m = len(self.permutations)
        chosen = np.arange(m) if chosen is None else chosen
        for p in chosen:
            previous = 0  # column of c(empty)
            for j, i in enumerate(self.permutations[p]):
                column = 1 if j == self.d - 1 else 2 + p * (self.d - 1) + j
                w[i, column] += 1.0 / len(chosen)
                w[i, previous] -= 1.0 / len(chosen)
                previous = column
        return w

    def kucherenko_columns(self) -> tuple[list[int], list[int]]:
        """The cost columns of each singleton {i} (for ST) and of all but i (for S1)."""
        where: dict[int, int] = {0: 0, self.full: 1}
        for k, mask in enumerate(self.blocks):
            where.setdefault(mask, 2 + k)
        single = [where[1 << i] for i in range(self.d)]
        rest = [where[self.full & ~(1 << i)] for i in range(self.d)]
        return single, rest


def scheme(d: int, permutations: int | None, rng: np.random.Generator) -> Scheme:
    """Every proper subset once (permutations None: exact), or the prefixes of `permutations`
    random orders then every singleton and every all-but-one set (for Kucherenko's indices)."""
    if d < 2:
        return Scheme(d, [], None)
    if permutations is None:
        return Scheme(d, list(range(1, (1 << d) - 1)), None)
    orders = np.array([rng.permutation(d) for _ in range(permutations)], dtype=np.int64)
    full = (1 << d) - 1
    blocks = []
    for order in orders:
        mask = 0
        for i in order[:-1]:
            mask |= 1 << int(i)
            blocks.append(mask)
    blocks += [1 << i for i in range(d)] + [full & ~(1 << i) for i in range(d)]
    return Scheme(d, blocks, orders)


def kucherenko_scheme(d: int) -> Scheme:
    """Only the costs Kucherenko's indices need: every singleton and every all-but-one set."""
    full = (1 << d) - 1
    blocks = list(dict.fromkeys([1 << i for i in range(d)] + [full & ~(1 << i) for i in range(d)]))
    return Scheme(d, [b for b in blocks if 0 < b < full], None)


def root(matrix: np.ndarray) -> np.ndarray:
    """A square root L (L L^T = matrix) of a covariance that may be singular: by eigenvalues,
    negative rounding errors clipped."""
    values, vectors = np.linalg.eigh(matrix)
    return vectors * np.sqrt(np.clip(values, 0.0, None))


def normal_scores(rng: np.random.Generator, n: int, correlation: np.ndarray) -> np.ndarray:
    """n draws of the normal scores, correlated as `correlation`."""
    return rng.standard_normal((n, len(correlation))) @ root(correlation).T


def conditional_rows(rng: np.random.Generator, mask: int, outer: int, inner: int,
                     correlation: np.ndarray) -> np.ndarray:
    """(outer * inner, d) normal scores: `outer` draws of the inputs not in `mask`, each repeated
    `inner` times with the inputs in `mask` drawn from their conditional normal given them."""
    d = len(correlation)
    inside = np.array([(mask >> i) & 1 == 1 for i in range(d)])
    given = normal_scores(rng, outer, correlation)[:, ~inside]
    r_in_out = correlation[np.ix_(inside, ~inside)]
    gain = np.linalg.solve(correlation[np.ix_(~inside, ~inside)], r_in_out.T).T
    spread = root(correlation[np.ix_(inside, inside)] - gain @ r_in_out.T)
    z = np.empty((outer, inner, d))
    z[:, :, ~inside] = given[:, None, :]
    mean = given @ gain.T
    z[:, :, inside] = mean[:, None, :] + rng.standard_normal((outer, inner, int(inside.sum()))) @ spread.T
    return z.reshape(outer * inner, d)


def design_scores(s: Scheme, total: int, outer: int, inner: int, correlation: np.ndarray | None,
                  rng: np.random.Generator) -> np.ndarray:
    """The normal scores of a design: `total` independent draws (for V), then each block's."""
    r = np.eye(s.d) if correlation is None else correlation
    parts = [normal_scores(rng, total, r)]
    parts += [conditional_rows(rng, mask, outer, inner, r) for mask in s.blocks]
    return np.concatenate(parts)


@dataclass(frozen=True)
class Sizes:
    """Song et al.'s sample sizes: N_V draws for the variance, N_O outer and N_I inner a cost."""

    total: int
    outer: int
    inner: int


def estimate(y: np.ndarray, bad: np.ndarray, s: Scheme, sizes: Sizes, resamples: int,
             confidence: float, seed: int) -> dict[str, Any]:
    """Shapley effects, Kucherenko's indices and V from a design's outputs in order. An outer
    draw with a failed inner run is left out of its block."""
    nv = sizes.total
    keep_v = ~bad[:nv]
    blocks = y[nv:].reshape(len(s.blocks), sizes.outer, sizes.inner)
    kept = ~bad[nv:].reshape(len(s.blocks), sizes.outer, sizes.inner).any(axis=2)
    result = combine(y[:nv][keep_v], [blocks[k][kept[k]] for k in range(len(s.blocks))], s,
                     resamples, confidence, seed)
    return result | {"dropped_runs": int(bad.sum()), "dropped_outer": int((~kept).sum())}


def combine(yv: np.ndarray, blocks: list[np.ndarray], s: Scheme, resamples: int,
            confidence: float, seed: int) -> dict[str, Any]:
    """Shapley effects, Kucherenko's S1 and ST, V, and bootstrap half-widths (z times the
    spread over `resamples` resamples of the variance rows, of each block's outer draws, and
    for random permutations of the permutations), from the rows for V and each block's runs
    (outer, inner). Each block's runs are draws of the joint distribution too, so V is the
    variance of every run."""
    from scipy import stats

    fewest = min([len(yv), *[len(rows) for rows in blocks]])
    if fewest < 2:
        raise TooFew(fewest)
    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore", over="ignore"):
        local = [np.var(rows, axis=1, ddof=1) for rows in blocks]
        # per outer draw (and per row of V): count, sum and sum of squares of its runs
        sums = [(np.full(len(yv), 1.0), yv, yv * yv)] + [
            (np.full(len(rows), float(rows.shape[1])), rows.sum(axis=1), (rows * rows).sum(axis=1))
            for rows in blocks]

    def costs(v_pick: np.ndarray, picks: list[np.ndarray]) -> np.ndarray:
        chosen = [v_pick, *picks]
        n, total, squares = (sum(float(part[k][pick].sum()) for part, pick in zip(sums, chosen))
                             for k in range(3))
        v = (squares - total * total / n) / (n - 1)
        with np.errstate(invalid="ignore", divide="ignore"):  # v = 0: Constant, raised below
            return np.array([0.0, 1.0, *[np.mean(row[pick]) / v for row, pick in zip(local, picks)],
                             v])

    everything = np.arange(len(yv))
    point = costs(everything, [np.arange(len(rows)) for rows in blocks])
    if not point[-1] > 0:
        raise Constant()
    w = s.weights() if s.complete else np.full((s.d, len(point) - 1), np.nan)
    draws = []
    for _ in range(resamples):
        c = costs(rng.integers(0, len(yv), len(yv)),
                  [rng.integers(0, len(rows), len(rows)) for rows in blocks])[:-1]
        weights = w if s.permutations is None else s.weights(
            rng.integers(0, len(s.permutations), len(s.permutations)))
        draws.append(np.concatenate([weights @ c, *kucherenko(s, c)]))
    c = point[:-1]
    values = np.concatenate([w @ c, *kucherenko(s, c)])
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    with np.errstate(invalid="ignore"):
        conf = z * np.std(np.array(draws), axis=0, ddof=1)
    d = s.d
    return {"shapley": values[:d], "shapley_conf": conf[:d], "S1": values[d:2 * d],
            "S1_conf": conf[d:2 * d], "ST": values[2 * d:], "ST_conf": conf[2 * d:],
            "variance": float(point[-1])}


class Constant(Exception):
    """The output does not vary: there is no variance to share."""


def kucherenko(s: Scheme, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kucherenko's first-order and total indices from the costs (shares of V):
    1 - c(all but i), c({i})."""
    single, rest = s.kucherenko_columns()
    return 1.0 - c[rest], c[single]


class TooFew(Exception):
    """Fewer than two usable draws for the variance or for a block's cost."""

    def __init__(self, fewest: int) -> None:
        super().__init__(fewest)
        self.fewest = fewest


def on_function(f: Callable[[np.ndarray], np.ndarray], to_natural: Callable[[np.ndarray], np.ndarray],
                d: int, correlation: np.ndarray | None, sizes: Sizes, permutations: int | None,
                resamples: int, confidence: float, seed: int, chunk: int = 1 << 16) -> dict[str, Any]:
    """The estimator applied to a function of natural values (a surrogate), in chunks of rows."""
    from scipy.special import ndtr

    rng = np.random.default_rng(seed)
    s = scheme(d, permutations, rng)
    z = design_scores(s, sizes.total, sizes.outer, sizes.inner, correlation, rng)
    y = np.concatenate([np.asarray(f(to_natural(unit_of(ndtr(z[i:i + chunk])))), float).ravel()
                        for i in range(0, len(z), chunk)])
    return estimate(y, ~np.isfinite(y), s, sizes, resamples, confidence, seed + 1)


SURROGATE_BUDGET = 1 << 21  # evaluations of a surrogate for its Shapley effects
SURROGATE_TOTAL = 100_000  # draws for its variance
# outer draws of a cost, at most: 5,000 left a sd of 0.005-0.007 on Ishigami's effects (a third
# of the 0.02 asked); 20,000 leaves 0.003 for 0.55 s of CPU (3 inputs, the function itself)
SURROGATE_OUTER = 20_000
SURROGATE_PERMUTATIONS = 64  # random orders beyond SURROGATE_EXACT inputs
SURROGATE_EXACT = 10
SURROGATE_RESAMPLES = 100


def on_surrogate(f, to_natural, d: int, correlation: np.ndarray | None, confidence: float,
                 seed: int) -> dict[str, Any]:
    """The estimator on a cheap function: exact up to SURROGATE_EXACT inputs, random orders
    beyond, its outer draws sized to SURROGATE_BUDGET evaluations (200 to SURROGATE_OUTER a
    cost)."""
    permutations = None if d <= SURROGATE_EXACT else SURROGATE_PERMUTATIONS
    blocks = max(1, (1 << d) - 2 if permutations is None else permutations * (d - 1) + 2 * d)
    outer = int(np.clip(SURROGATE_BUDGET // (3 * blocks), 200, SURROGATE_OUTER))
    return on_function(f, to_natural, d, correlation, Sizes(SURROGATE_TOTAL, outer, 3),
                       permutations, SURROGATE_RESAMPLES, confidence, seed)


UNIT_MARGIN = 2.0 ** -53


def unit_of(u: np.ndarray) -> np.ndarray:
    """Points of the unit cube kept off its faces, so unbounded ppfs stay finite."""
    return np.clip(u, UNIT_MARGIN, 1 - UNIT_MARGIN)
