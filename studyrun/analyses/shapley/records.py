"""shapley's results in analysis.json: each quantity's Shapley effects and Kucherenko's indices."""

from __future__ import annotations

from pydantic import RootModel

from studyrun.results.records import STRICT, ByName, Entry, Number, Record


class Kucherenko(Record):
    """Kucherenko's first-order and total indices for dependent inputs, with half-widths (the
    `sobol` analysis's key names)."""

    S1: ByName = {}
    S1_conf: ByName = {}
    ST: ByName = {}
    ST_conf: ByName = {}


class ShapleyQuantity(Entry):
    """Shapley effects (summing to 1) with bootstrap half-widths, the output's variance, and
    Kucherenko's indices."""

    shapley: ByName = {}
    shapley_conf: ByName = {}
    variance: Number = None
    kucherenko: Kucherenko | None = None
    q2: Number = None  # method: surrogate, its cross-validated Q2


class ShapleyResults(RootModel[dict[str, ShapleyQuantity]]):
    """Quantity -> its effects."""

    model_config = STRICT
