"""Observed data for `calibrate` (load step): CSV files in FME's long or wide format.

Long format: one observation per line, with a variable-name column (`name`), the independent
variable (`x`, default `time`), the value (`y`, default `value`) and optionally a per-point error
(`err`). Wide format: an x column and one column per observed variable. core/csv_table.py reads both;
empty cells and NA / NaN are missing values and are skipped. Every mistake (a missing column, a
value that is not a number, a variable the model does not produce, an x outside the model's time
span) is a StudyError at the file, line and column of the offending cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from studyrun.core.csv_table import MISSING, Table, read_table
from studyrun.core.errors import Problem, StudyError
from studyrun.core.text import suggest


class DataBlock(BaseModel):
    """One observed-data file and how to read it (FME modCost's conventions)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(description="CSV file, relative to the study file's folder")
    format: Literal["long", "wide"] = Field(
        "long", description="long: name, x, value[, error] columns; wide: an x column and one "
                            "column per observed variable")
    x: str = Field("time", description="the column of the independent variable (the model's time)")
    name: str = Field("name", description="long format: the column naming the variable")
    y: str = Field("value", description="long format: the column of observed values")
    err: str | None = Field(None, description="long format: a column of per-point errors "
                                              "(standard deviations); weights are 1/err")
    weight: Literal["none", "std", "mean"] = Field(
        "none", description="without err: the error of every point of a variable is 1 (none), the "
                            "standard deviation of its observations (std) or their mean |value| (mean)")
    scale_var: bool = Field(False, description="divide each variable's cost by its number of "
                                               "observations N, once (FME's manual; FME's code "
                                               "divides by N^3: docs/methods.md)")
    map: dict[str, str] = Field(default_factory=dict,
                                description="observed name -> model output, where they differ")
    window: tuple[float, float] | None = Field(
        None, description="[x0, x1]: fit only the observations with x0 <= x <= x1")
    sep: str = Field(",", min_length=1, max_length=1, description="the field separator")

    @model_validator(mode="after")
    def _check(self) -> "DataBlock":
        if self.err is not None and self.format == "wide":
            raise ValueError("err names an error column of the long format; the wide format has "
                             "no per-point errors (use weight: none | std | mean)")
        if self.window is not None and not self.window[0] < self.window[1]:
            raise ValueError(f"window must be [x0, x1] with x0 < x1; got {list(self.window)}")
        return self


@dataclass
class Variable:
    """The observations of one variable in one file."""

    label: str  # as the file names it
    output: str  # the model output it is compared with
    where: tuple[int, int]  # line, column of the name's first cell (or header cell)
    x: np.ndarray
    obs: np.ndarray
    err: np.ndarray | None  # per-point errors from the err column
    cells: list[tuple[int, int]] = field(default_factory=list)  # (line, col) of each x cell


@dataclass
class Observations:
    """One data block, read: its variables in order of first appearance."""

    block: DataBlock
    index: int
    variables: list[Variable]

    @property
    def file(self) -> str:
        return self.block.file


_READ: dict[tuple, list[Observations]] = {}  # (each block and its file's stamp) -> those blocks read
_READ_KEPT = 16


def read_blocks(blocks: list[DataBlock], folder: Path) -> list[Observations]:
    """Every data block read and checked on its own (not yet against a model), its file relative
    to `folder`; read once while the files are unchanged."""
    located = [block.model_copy(update={"file": str(folder / block.file)}) for block in blocks]
    key = tuple((block.model_dump_json(), *file_stamp(block.file)) for block in located)
    if key not in _READ:
        read = [read_block(block, i) for i, block in enumerate(located)]
        while len(_READ) >= _READ_KEPT:
            _READ.pop(next(iter(_READ)))
        _READ[key] = read
    return _READ[key]


def file_stamp(path: str) -> tuple[int, int] | tuple[None, None]:
    """A file's modification time and size: what tells a changed file from the one read."""
    try:
        status = Path(path).stat()
    except OSError:  # read_block reports it
        return None, None
    return status.st_mtime_ns, status.st_size


def number(table: Table, line: int, row: list[tuple[str, int]], index: int, what: str) -> float:
    """The number in a cell; NaN for a missing value; a StudyError for anything else."""
    if index >= len(row):
        return math.nan
    text, col = row[index]
    if text.strip().lower() in MISSING:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise table.fail(line, col, f"{what} {text.strip()!r} in column {table.header[index]!r} is "
                                    "not a number (leave the cell empty or write NA for a missing "
                                    "value)") from None
    if math.isinf(value):
        raise table.fail(line, col, f"{what} in column {table.header[index]!r} is infinite")
    return value


def read_block(block: DataBlock, index: int) -> Observations:
    """One file in long or wide format, missing values skipped and the window applied."""
    table = read_table(block.file, block.sep)
    found = Found(block.window)
    (read_long if block.format == "long" else read_wide)(block, table, found)
    variables = [Variable(label, block.map.get(label, label), entry["where"],
                          np.asarray(entry["x"], float), np.asarray(entry["obs"], float),
                          np.asarray(entry["err"], float) if block.err else None, entry["cells"])
                 for label, entry in found.entries.items() if entry["x"]]
    if not variables:
        raise StudyError("no observations left (every value is missing or outside the window)",
                         file=block.file, line=table.header_line, col=1)
    check_weights(block, table, variables)
    return Observations(block, index, variables)


class Found:
    """Observations gathered per variable label, in order of first appearance."""

    def __init__(self, window: tuple[float, float] | None) -> None:
        self.window = window
        self.entries: dict[str, dict] = {}

    def add(self, label: str, where: tuple[int, int], cell: tuple[int, int], x: float, y: float,
            err: float | None = None) -> None:
        entry = self.entries.setdefault(label, {"where": where, "x": [], "obs": [], "err": [],
                                                "cells": []})
        if math.isnan(x) or math.isnan(y):
            return
        if self.window is not None and not self.window[0] <= x <= self.window[1]:
            return
        entry["x"].append(x)
        entry["obs"].append(y)
        entry["err"].append(err)
        entry["cells"].append(cell)


def column_of(row: list[tuple[str, int]], index: int) -> int:
    return row[index][1] if index < len(row) else 1


def read_long(block: DataBlock, table: Table, found: Found) -> None:
    """name, x, value[, err] per line."""
    x_index = table.column(block.x, "x")
    name_index, y_index = table.column(block.name, "name"), table.column(block.y, "y")
    err_index = table.column(block.err, "err") if block.err else None
    for line, row in table.rows:
        if name_index >= len(row) or not row[name_index][0].strip():
            raise table.fail(line, 1, f"no variable name in column {block.name!r}")
        label = row[name_index][0].strip()
        x = number(table, line, row, x_index, "x")
        y = number(table, line, row, y_index, "value")
        err = None
        if err_index is not None and not math.isnan(y):
            err = number(table, line, row, err_index, "error")
            if math.isnan(err):
                raise table.fail(line, column_of(row, err_index),
                                 f"no error for this observation in column {block.err!r}")
            if not err > 0:
                raise table.fail(line, column_of(row, err_index),
                                 f"error {err:g} must be above 0 (it is the standard deviation "
                                 "of the observation)")
        found.add(label, (line, row[name_index][1]), (line, column_of(row, x_index)), x, y, err)


def read_wide(block: DataBlock, table: Table, found: Found) -> None:
    """An x column and one column per variable."""
    x_index = table.column(block.x, "x")
    columns = [j for j in range(len(table.header)) if j != x_index]
    if not columns:
        raise table.fail(table.header_line, 1, "a wide data file needs an x column and at least "
                                               "one column of observations")
    for line, row in table.rows:
        x = number(table, line, row, x_index, "x")
        for j in columns:
            found.add(table.header[j], (table.header_line, table.header_cols[j]),
                      (line, column_of(row, x_index)), x, number(table, line, row, j, "value"))


def check_weights(block: DataBlock, table: Table, variables: list[Variable]) -> None:
    """weight: std needs two different values per variable; weight: mean a nonzero mean."""
    for v in variables:
        line, col = v.where
        if block.weight == "std" and (len(v.obs) < 2 or not np.std(v.obs) > 0):
            raise table.fail(line, col, f"weight: std needs at least two different observations of "
                                        f"{v.label!r}; it has {len(v.obs)}")
        if block.weight == "mean" and not np.mean(np.abs(v.obs)) > 0:
            raise table.fail(line, col, f"weight: mean needs observations of {v.label!r} that are "
                                        "not all 0")


def check_against_model(data: list[Observations], outputs: set[str] | None,
                        span: tuple[float, float] | None) -> None:
    """Every variable names a model output and every x lies in the model's time span."""
    problems = []
    for obs in data:
        for v in obs.variables:
            line, col = v.where
            if outputs is not None and v.output not in outputs:
                hint = suggest(v.output, outputs) or " (use map: to name it)"
                what = f"{v.label!r} (mapped to {v.output!r})" if v.output != v.label else repr(v.label)
                problems.append(Problem(f"observed variable {what} is not an output of the model"
                                        f"{hint}; outputs: {', '.join(sorted(outputs))}",
                                        file=obs.file, line=line, col=col))
            if span is not None:
                lo, hi = span
                tol = 1e-9 * max(1.0, abs(lo), abs(hi))
                for x, (line, col) in zip(v.x, v.cells):
                    if x < lo - tol or x > hi + tol:
                        problems.append(Problem(
                            f"x = {x:g} of {v.label!r} lies outside the model's time span "
                            f"[{lo:g}, {hi:g}] (extend the model's time, or use window: to leave "
                            "it out)", file=obs.file, line=line, col=col))
                        break
    if problems:
        raise StudyError(problems)


def outputs_needed(data: list[Observations]) -> list[str]:
    """The model outputs the data are compared with, in order of first appearance."""
    return list(dict.fromkeys(v.output for obs in data for v in obs.variables))
