"""surrogate's results in analysis.json: each quantity's fitted surrogate, its validation and
the indices computed from it."""

from __future__ import annotations

from typing import Any

from pydantic import RootModel

from studyrun.analyses.shapley.records import Kucherenko
from studyrun.results.records import STRICT, ByName, Count, Entry, Flag, Number, Table, Text


class SurrogateQuantity(Entry):
    """A quantity's surrogate (pce: `basis`, `terms`, `inputs`; gp: `kernel`) and its measures."""

    q2: Number = None  # cross-validated
    rmse: Number = None
    mean: Number = None
    std: Number = None
    S1: ByName = {}
    S1_conf: ByName = {}
    ST: ByName = {}
    ST_conf: ByName = {}
    S2: Table = {}
    S2_conf: Table = {}
    trusted: Flag | None = None
    samples: Count | None = None
    validation: dict[str, Any] = {}
    convergence: list[Any] | None = None
    basis: dict[str, Any] = {}
    degree: Count | None = None
    candidate_terms: Count | None = None
    terms: list[Any] = []
    inputs: dict[str, Any] = {}
    kernel: dict[str, Any] = {}
    correlation: dict[str, Any] = {}
    shapley: ByName = {}  # correlated inputs: Shapley effects and Kucherenko's indices
    shapley_conf: ByName = {}
    variance: Number = None
    kucherenko: Kucherenko | None = None
    method: Text | None = None


class SurrogateResults(RootModel[dict[str, SurrogateQuantity]]):
    """Quantity -> its surrogate."""

    model_config = STRICT
