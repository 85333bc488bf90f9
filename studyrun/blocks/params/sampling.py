"""Sampling the open unit cube: random, Latin hypercube and scrambled Sobol' points, whole or in
chunks.

Formulas, defaults and edge cases: docs/methods.md,
"Parameters: boxes, nominal values and unit-cube samples".
"""

from __future__ import annotations

import inspect
import warnings
from typing import Iterator, Literal

import numpy as np

from studyrun.blocks.params.base import stats

_EPS = 2.0 ** -53  # samples stay in [EPS, 1 - EPS], so unbounded ppfs stay finite
def _rng_keyword() -> str:
    """scipy.stats.qmc engines take `rng` from scipy 1.15 on, `seed` before."""
    return "rng" if "rng" in inspect.signature(stats.qmc.Sobol.__init__).parameters else "seed"


def _generator(seed: np.random.SeedSequence) -> np.random.Generator:
    """A generator on a copy of `seed`: scipy's qmc engines spawn from the generator's
    SeedSequence, which would otherwise change what the same seed gives the next time."""
    copy = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size)
    return np.random.Generator(np.random.PCG64(copy))


def sample_unit(n: int, d: int, method: Literal["random", "lhs", "sobol"],
                seed: np.random.SeedSequence) -> np.ndarray:
    """n points of the open unit cube (0, 1)^d, the same for the same seed.

    sobol: scrambled Sobol'; for n not a power of 2, the first n of the next power of 2.
    """
    if n < 0 or d < 1:
        raise ValueError(f"sample_unit needs n >= 0 and d >= 1; got n={n}, d={d}")
    rng = _generator(seed)
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


def sample_unit_range(start: int, stop: int, d: int, method: Literal["random", "lhs", "sobol"],
                      seed: np.random.SeedSequence) -> np.ndarray:
    """Points start..stop of a sample that grows in batches: random and sobol continue one
    sequence (the first n points are `sample_unit(n)`'s); lhs adds a Latin hypercube of its own
    per batch, seeded by its start, so each batch is space-filling on its own."""
    if method == "lhs":
        batch_seed = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, start))
        return sample_unit(stop - start, d, "lhs", batch_seed if start else seed)
    return sample_unit(stop, d, method, seed)[start:]


def sample_unit_chunks(n: int, d: int, method: Literal["random", "lhs", "sobol"],
                       seed: np.random.SeedSequence, rows: int) -> Iterator[np.ndarray]:
    """The points of `sample_unit` in consecutive slices of at most `rows`, drawn as they are
    needed (Latin hypercubes, stratified over all n, come whole)."""
    if method == "lhs" or n <= rows:
        yield sample_unit(n, d, method, seed)
        return
    rng = _generator(seed)
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
