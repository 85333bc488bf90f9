"""sobol's results in analysis.json: each quantity's (or output's) Sobol' indices."""

from __future__ import annotations

from typing import Any

from pydantic import RootModel

from studyrun.results.records import STRICT, Entry, Numbers, Series, Table


class SobolQuantity(Entry):
    """First-order and total indices with their bootstrap half-widths; a series's at each time."""

    S1: Series = {}
    S1_conf: Series = {}
    ST: Series = {}
    ST_conf: Series = {}
    S2: Table = {}  # with second_order: a -> b -> index
    S2_conf: Table = {}
    time: Numbers = []
    time_resolved: dict[str, Any] = {}


class SobolResults(RootModel[dict[str, SobolQuantity]]):
    """Quantity or output -> its indices."""

    model_config = STRICT
