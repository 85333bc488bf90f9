"""Alias structure of a regular two-level fraction, read off its ±1 design matrix.

Factors are lettered a, b, c, ... in parameter order, as in pydoe's generator strings. A word is
a set of factors whose column product is constant (±1) over the runs; the words span the
defining relation I = ..., whose shortest word length is the resolution (Box, Hunter & Hunter,
Statistics for Experimenters, ch. 6; Montgomery, Design and Analysis of Experiments, ch. 8).

Formulas, defaults and edge cases: docs/methods.md,
"Designed experiments and fractional factorials".
"""

from __future__ import annotations

import string
from itertools import combinations

import numpy as np

LETTERS = string.ascii_lowercase
_MAX_FULL_CHAIN = 16  # words in the defining relation up to which alias chains are listed whole
_MAX_WORDS_SHOWN = 32


def _column_bits(coded: np.ndarray) -> list[int]:
    """Each column as a bit pattern: bit r set where run r is at its low level."""
    return [sum(1 << int(r) for r in np.flatnonzero(coded[:, j] < 0)) for j in range(coded.shape[1])]


def find_generator_words(coded: np.ndarray) -> tuple[list[tuple[int, int]], list[int]]:
    """Independent words (factor mask, sign) and the base factors, by elimination over GF(2).

    A column that is (up to sign) a product of earlier columns gives one word; the columns that
    are not are the base factors of the fraction.
    """
    n_runs = coded.shape[0]
    all_ones = (1 << n_runs) - 1
    basis: dict[int, tuple[int, int, int]] = {}  # pivot bit -> (vector, factor mask, sign)
    basis[all_ones.bit_length() - 1] = (all_ones, 0, 1)
    words, base = [], []
    for j, bits in enumerate(_column_bits(coded)):
        vector, mask, sign = bits, 1 << j, 0
        while vector:
            pivot = vector.bit_length() - 1
            if pivot not in basis:
                break
            b_vector, b_mask, b_sign = basis[pivot]
            vector, mask, sign = vector ^ b_vector, mask ^ b_mask, sign ^ b_sign
        if vector:
            basis[vector.bit_length() - 1] = (vector, mask, sign)
            base.append(j)
        else:
            words.append((mask, sign))
    return words, base


def span_words(generators: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every word of the defining relation: all products of the generator words."""
    words = [(0, 0)]
    for mask, sign in generators:
        words += [(m ^ mask, s ^ sign) for m, s in words]
    return sorted(words[1:], key=lambda w: (bin(w[0]).count("1"), _letters(w[0])))


def _letters(mask: int) -> str:
    return "".join(LETTERS[i] for i in range(mask.bit_length()) if mask >> i & 1)


def _signed(mask: int, sign: int) -> str:
    return ("-" if sign else "") + (_letters(mask) or "I")


def _chain(effect: int, words: list[tuple[int, int]]) -> str:
    """`a = bd = ce = abcde`: an effect and everything aliased with it."""
    members = sorted(((effect ^ m, s) for m, s in words),
                     key=lambda w: (bin(w[0]).count("1"), _letters(w[0])))
    shown = members if len(words) <= _MAX_FULL_CHAIN else [
        w for w in members if bin(w[0]).count("1") <= 3]
    text = " = ".join([_letters(effect)] + [_signed(m, s) for m, s in shown])
    return text + (" = ..." if len(shown) < len(members) else "")


def describe_fraction(coded: np.ndarray) -> dict:
    """Resolution, generators, defining relation and alias chains of main effects and 2FIs."""
    k = coded.shape[1]
    if k > len(LETTERS):
        return {"resolution": None, "aliases": []}
    generator_words, base = find_generator_words(coded)
    words = span_words(generator_words)
    generators = []
    for mask, sign in generator_words:
        last = mask.bit_length() - 1
        generators.append(f"{LETTERS[last]} = {_signed(mask ^ (1 << last), sign)}")
    effects = [1 << i for i in range(k)] + [(1 << i) | (1 << j) for i, j in combinations(range(k), 2)]
    chains, seen = [], set()
    for effect in effects:
        if effect in seen:
            continue
        seen.update(effect ^ m for m, _ in words)
        seen.add(effect)
        if words:
            chains.append(_chain(effect, words))
    shown = words[:_MAX_WORDS_SHOWN]
    relation = "I = " + " = ".join(_signed(m, s) for m, s in shown) + (
        " = ..." if len(shown) < len(words) else "")
    return {
        "resolution": min(bin(m).count("1") for m, _ in words) if words else None,
        "generators": generators,
        "base_factors": [LETTERS[j] for j in base],
        "defining_relation": relation if words else "I",
        "aliases": chains,
    }
