"""local's results in analysis.json: each output's normalised sensitivity functions, summarised,
and beside the outputs what holds over all of them."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from studyrun.results.records import ByName, Count, Entry, Lines, Number, Record, Text


class LocalOutput(Entry):
    """An output's sensitivity functions over its grid, summarised per parameter."""

    L1: ByName = {}
    L2: ByName = {}
    mean: ByName = {}
    min: ByName = {}
    max: ByName = {}
    ranking: list[Text] = []
    points: Count | None = None
    excluded_points: Count | None = None  # where the output is 0
    method: Text | None = None
    functions: dict[str, Any] = {}  # time and each parameter's function


class Collinearity(Record):
    """Which subsets of parameters can be told apart from the outputs."""

    subsets: list[Any] = []
    identifiable: list[Any] = []
    largest_identifiable_size: Count | None = None
    max_size: Count | None = None
    threshold: Number = None
    rows: Count | None = None
    unresponsive: list[Text] = []


class LocalResults(Record):
    """Output -> its summary; `ranking`, `collinearity`, `partition`, `agreement`, `quantities`
    and `notes` beside the outputs."""

    __pydantic_extra__: dict[str, LocalOutput] = Field(init=False)

    ranking: list[Text] = []  # over every output
    collinearity: Collinearity | None = None
    partition: dict[str, Any] | None = None  # full, uniform, clustering, initial_state_only, ...
    agreement: dict[str, dict[str, Any]] = {}  # each pair of methods or partitions compared
    quantities: dict[str, dict[str, Any]] = {}
    notes: Lines = []
