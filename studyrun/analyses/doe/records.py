"""doe's results in analysis.json: each quantity's response surface, and the Pareto front of a
`pareto:` block."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from studyrun.results.records import ByName, Count, Entry, Number, Record, Text


class DoeQuantity(Entry):
    """A quantity's fitted response surface (coded units), its tests and what it says."""

    r2: Number = None
    adj_r2: Number = None
    rmse: Number = None
    sigma: Number = None  # residual standard error
    df_resid: int | None = None
    n_runs: Count | None = None
    coefficients: dict[str, ByName] = {}  # term -> estimate, std_error, t, p
    terms: list[Text] = []
    covariance: list[list[Number]] | None = None
    coding: dict[str, Any] | list[Any] = {}  # parameter -> symbol, center, half_range
    anova: dict[str, Any] = {}
    lack_of_fit: dict[str, Any] | None = None
    residuals: dict[str, Any] = {}
    main_effects: dict[str, Any] = {}
    interactions: dict[str, Any] = {}
    stationary_point: dict[str, Any] | None = None
    aliases: dict[str, Any] = {}
    dropped_terms: list[Text] = []
    dropped_aliases: dict[str, Any] = {}


class Pareto(Record):
    """The non-dominated runs over the quantities a `pareto:` block names."""

    senses: dict[str, Text] = {}  # quantity -> min or max
    runs: list[Count] = []  # their rows of runs.csv
    values: dict[str, list[Number]] = {}  # quantity -> its value at each
    parameters: dict[str, list[Number]] = {}  # parameter -> its value at each


class DoeResults(Record):
    """Quantity -> its response surface; `_pareto` beside them with a `pareto:` block."""

    model_config = ConfigDict(populate_by_name=True)
    __pydantic_extra__: dict[str, DoeQuantity] = Field(init=False)

    pareto: Pareto | None = Field(None, alias="_pareto")
