"""Runs that already exist (`analysis.from:`): a CSV of inputs and outputs, or another study's
results folder (its runs.csv, after its analysis.json is checked against its study.yaml), read as
rows to analyse without running the model; every mistake is located at the CSV's line and column.

Formulas, defaults and edge cases: docs/methods.md, "Analysing runs that already exist".
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field

from studyrun.analyses.base import FixedDesignAnalysis, StudyContext
from studyrun.analyses.calibrate.data import file_stamp
from studyrun.core.csv_table import MISSING, Grid, read_plain, read_table, unescape_text
from studyrun.core.design import Design
from studyrun.core.errors import Problem, StudyError, StudyrunError
from studyrun.core.runtable import objects, own_columns
from studyrun.core.text import suggest
from studyrun.results.outputs import Finished, read_finished

WHERE = "from"
SHOWN = 20  # problems listed per file; the rest are counted
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # what a quantity may be called


@dataclass(frozen=True)
class GivenRows:
    """The rows of a CSV: the varied parameters' values, every other column as an output (NaN
    where empty), and an error for each row a results folder records as failed."""

    path: Path  # the CSV read (a results folder's runs.csv)
    names: list[str]
    inputs: np.ndarray  # (rows, parameters)
    outputs: dict[str, np.ndarray]
    errors: list[str | None]
    sha256: str
    finished: Finished | None = None  # the results folder, when `from:` names one

    @property
    def size(self) -> int:
        return len(self.inputs)

    def design(self, info: dict[str, Any]) -> Design:
        return Design(list(self.names), self.inputs.copy(), {"given": str(self.path), **info})

    def quantities(self, definitions: dict[str, str] | None,
                   fixed: dict[str, float]) -> tuple[dict[str, np.ndarray], list[str | None]]:
        """The study's quantities and each row's error (None: it succeeded): a quantity named
        as a column is that column, any other is computed from the columns by its expression, as
        from a model's outputs; without a quantities block, every output column."""
        from studyrun.blocks.quantities import Quantities
        from studyrun.core.batch import ModelOutput

        out = ModelOutput(n=self.size, scalars=dict(self.outputs), errors=list(self.errors))
        inputs = {name: self.inputs[:, j] for j, name in enumerate(self.names)}
        inputs.update({name: np.full(self.size, value) for name, value in fixed.items()})
        if definitions is None:
            return Quantities(None).evaluate(out, inputs), out.errors
        computed = Quantities({name: text for name, text in definitions.items()
                               if name not in self.outputs}).evaluate(out, inputs)
        columns = Quantities({name: name for name in definitions if name in self.outputs})
        taken = columns.evaluate(out, inputs)
        merged = {**computed, **taken}  # series() quantities have no column: given runs are scalars
        return {name: merged[name] for name in definitions if name in merged}, out.errors

    def content(self) -> tuple[list[str], np.ndarray]:
        """The output columns' names and, per row, its outputs and whether it failed: with the
        inputs, what a given run's identity is derived from."""
        failed = np.not_equal(objects(self.errors), None).astype(float)
        return list(self.outputs), np.column_stack([*self.outputs.values(), failed])

    def provenance(self) -> dict[str, Any]:
        """What analysis.json's provenance names as the rows the results rest on."""
        given: dict[str, Any] = {"file": str(self.path), "sha256": self.sha256, "rows": self.size}
        return given | (self.finished.provenance() if self.finished is not None else {})


class ReadsGiven(FixedDesignAnalysis):
    """An analysis that may read runs that exist (`from:`) instead of running the model."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: str | None = Field(
        None, alias="from", description="analyse the runs of a CSV (one column per varied "
        "parameter and per quantity) or of another study's results folder, relative to the study "
        "file; the model is not run")

    def given(self, context: StudyContext) -> GivenRows | None:
        return None if self.from_ is None else read_given(self.from_, context)

    def check(self, context: StudyContext) -> list[Problem]:
        return [] if self.from_ is None else given_problems(self.from_, context)

    def provenance(self, context: StudyContext) -> dict[str, Any]:
        rows = self.given(context)
        return {} if rows is None else {"given": rows.provenance()}


def given_problems(name: str, context: StudyContext) -> list[Problem]:
    """What is wrong with the `from:` a study names: a missing file or unfinished folder as
    problems at `analysis.from`; a mistake inside the CSV raised at the CSV's line and column."""
    try:
        read_given(name, context)
    except StudyError as error:
        if any(problem.file for problem in error.problems):
            raise
        return error.problems
    return []


def not_with_from(spec: ReadsGiven, *keys: str) -> None:
    """Keys that choose the runs to make have no meaning with `from:` (a pydantic field check)."""
    given = [key for key in keys if key in spec.model_fields_set]
    if spec.from_ is not None and given:
        raise ValueError(f"give {given[0]} (runs to make) or from (runs that exist), not both")


_READ: dict[tuple, GivenRows] = {}  # (path, stamp, parameters, fixed, quantities) -> the rows
_READ_KEPT = 8


def read_given(name: str, context: StudyContext) -> GivenRows:
    """The rows `from:` names, checked against the study's varied parameters and quantities;
    read once while the file is unchanged."""
    path, finished = locate(name, context)
    key = (str(path), *file_stamp(str(path)), repr(sorted(context.varied.items())),
           repr(sorted(context.fixed.items())), repr(context.quantities))
    if key not in _READ:
        while len(_READ) >= _READ_KEPT:
            _READ.pop(next(iter(_READ)))
        _READ[key] = read_rows(path, context, finished)
    return _READ[key]


def locate(name: str, context: StudyContext) -> tuple[Path, Finished | None]:
    """The CSV `from:` names: the file itself, or a finished results folder's runs.csv."""
    path = context.path(name).resolve()
    if path.is_dir():
        try:
            finished = read_finished(path)
        except (StudyrunError, OSError) as error:
            raise StudyError(str(getattr(error, "strerror", None) or error), path=WHERE) from None
        if not (path / "runs.csv").is_file():
            raise StudyError(f"{path} has no runs.csv: its study did not finish", path=WHERE)
        return path / "runs.csv", finished
    if not path.is_file():
        raise StudyError(f"{name}: no such file or results folder (relative to {context.folder}/); "
                         "name a CSV of runs or a results folder", path=WHERE)
    if path.suffix.lower() != ".csv":  # never quote the cells of a file that is not data
        raise StudyError(f"{name} is not a CSV file: a file of runs has a name ending in .csv",
                         path=WHERE)
    return path, None


def read_rows(path: Path, context: StudyContext, finished: Finished | None) -> GivenRows:
    """Every row read and checked: a plain file by columns (plain_rows); any other file, or
    one with a mistake, row by row (located_rows), which raises all the file's mistakes at once."""
    return plain_rows(path, context, finished) or located_rows(path, context, finished)


@dataclass(frozen=True)
class Layout:
    """What each column of a header is to the study: a varied parameter, studyrun's status or
    error, a fixed parameter or an output."""

    names: list[str]  # the varied parameters
    columns: dict[str, int]  # varied parameter -> its column
    status: int | None
    error: int | None
    outputs: list[int]
    fixed: dict[str, int]  # fixed parameter -> its column

    @classmethod
    def of(cls, header: list[str], context: StudyContext) -> "Layout":
        columns = {name: header.index(name) for name in context.varied if name in header}
        own = own_columns(header)  # studyrun's own (run.status ...), of any runs.csv layout
        return cls(list(context.varied), columns, own.get("run.status"), own.get("run.error"),
                   [j for j, h in enumerate(header)
                    if j not in own.values() and h not in columns and h not in context.fixed],
                   {name: header.index(name) for name in context.fixed if name in header})


def plain_rows(path: Path, context: StudyContext, finished: Finished | None) -> GivenRows | None:
    """The rows of a plain CSV (csv_table.read_plain) read column by column, equal to what
    located_rows reads; None if the file is not plain or has any mistake, which located_rows
    then finds and locates."""
    grid = read_plain(path)
    if grid is None or header_problems(grid.table.header, context):
        return None
    layout, header = Layout.of(grid.table.header, context), grid.table.header
    read = numbers_read if layout.status is None else cells_read  # runs.csv has text columns
    found = read(grid, layout, context, unescape_text if finished is not None else str)
    if found is None:
        return None
    inputs, values, errors = found
    return GivenRows(path, layout.names, inputs, {header[j]: values[:, k]
                                                  for k, j in enumerate(layout.outputs)},
                     errors, grid.sha256, finished)


Read = tuple[np.ndarray, np.ndarray, list[str | None]]  # inputs, outputs, each row's error


def numbers_read(grid: Grid, layout: Layout, context: StudyContext, undo) -> Read | None:
    """A grid of numbers alone (Grid.numbers) read at once, or cells_read's reading of it."""
    matrix = grid.numbers()
    if matrix is None:
        return cells_read(grid, layout, context, undo)
    inputs = matrix[:, [layout.columns[name] for name in layout.names]]
    for j, name in enumerate(layout.names):
        low, high = context.varied[name]._support()
        if not ((low <= inputs[:, j]) & (inputs[:, j] <= high)).all():
            return None
    if any((matrix[:, j] != context.fixed[name]).any() for name, j in layout.fixed.items()):
        return None
    return inputs, matrix[:, layout.outputs], [None] * len(matrix)


def cells_read(grid: Grid, layout: Layout, context: StudyContext, undo) -> Read | None:
    """A grid read a chunk of cells at a time, by float() (`numbers`); None at any mistake."""
    if grid.ends is None:  # a row of more or fewer cells than the header
        return None
    width, size = len(grid.table.header), grid.size
    supports = {name: context.varied[name]._support() for name in layout.names}
    inputs = np.empty((size, len(layout.names)))
    values = np.empty((size, len(layout.outputs)))
    errors: list[str | None] = []
    for first, cells in grid.chunks():
        rows = slice(first, first + len(cells) // width)
        failed = np.zeros(rows.stop - first, bool)
        if layout.status is not None:
            failed = np.array([text.strip() != "ok" for text in cells[layout.status::width]])
        mistakes = cells[layout.error::width] if layout.error is not None else None
        errors += [(undo(mistakes[i].strip() if mistakes is not None else "") or "failed") if bad else None
                   for i, bad in enumerate(failed.tolist())]
        for j, name in enumerate(layout.names):
            found, bad = numbers(cells[layout.columns[name]::width])
            low, high = supports[name]
            if bad is not None or not ((low <= found) & (found <= high)).all():
                return None  # NaN fails the comparison too
            inputs[rows, j] = found
        for name, j in layout.fixed.items():
            found, bad = numbers(cells[j::width])
            if not (found == context.fixed[name]).all():
                return None
        for k, j in enumerate(layout.outputs):
            found, bad = numbers(cells[j::width])
            if bad is not None and (bad & ~failed).any():
                return None
            found[failed] = np.nan
            values[rows, k] = found
    return inputs, values, errors


def numbers(cells: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
    """The numbers of a column's cells as `number` reads each (NaN where missing or not a
    number) and where a cell is not a number (None: nowhere); float() over all cells at once
    first, `number` cell by cell where that meets anything but finite numbers."""
    try:
        found = np.fromiter(map(float, cells), float, len(cells))
        if np.isfinite(found).all():
            return found, None
    except ValueError:
        pass
    each = [number(text) for text in cells]
    bad = np.array([value is None for value in each])
    return np.array([math.nan if value is None else value for value in each]), (
        bad if bad.any() else None)


def located_rows(path: Path, context: StudyContext, finished: Finished | None) -> GivenRows:
    """Every row read and checked, each cell at its line and column; all the file's mistakes
    raised at once."""
    table = read_table(path)
    problems: list[Problem] = []

    def fail(line: int, col: int, message: str) -> None:
        problems.append(Problem(message, file=str(path), line=line, col=col))

    undo = unescape_text if finished is not None else str  # runs.csv quotes formula-like text
    layout = Layout.of(table.header, context)
    names, columns, status, error = layout.names, layout.columns, layout.status, layout.error
    outputs, fixed_columns = layout.outputs, layout.fixed
    for index, col, message in header_problems(table.header, context):
        fail(table.header_line, col or table.header_cols[index], message)
    supports = {name: context.varied[name]._support() for name in names}
    varying: set[str] = set()  # fixed parameters found varying, reported at their first row
    inputs = np.full((len(table.rows), len(names)), np.nan)
    values = np.full((len(table.rows), len(outputs)), np.nan)
    errors: list[str | None] = []
    for i, (line, row) in enumerate(table.rows):
        failed = status is not None and cell(row, status) != "ok"
        errors.append((undo(cell(row, error)) or "failed") if failed else None)
        for j, name in enumerate(names):
            if name not in columns:  # reported at the header
                continue
            text, col = row[columns[name]] if columns[name] < len(row) else ("", 1)
            value = number(text)
            low, high = supports[name]
            if value is None or math.isnan(value):
                fail(line, col, f"{name} is {text.strip()!r}, not a number; every row needs a "
                     "value of each varied parameter (remove the row, or fill in the cell)")
            elif not low <= value <= high:
                fail(line, col, f"{name} = {value:g} lies outside [{low:g}, {high:g}], the values "
                     f"parameters.{name} can take; widen the parameter, or remove the row")
            else:
                inputs[i, j] = value
        for name, j in fixed_columns.items():
            text, col = row[j] if j < len(row) else ("", 1)
            if number(text) != context.fixed[name] and name not in varying:
                varying.add(name)
                fail(line, col, f"{name} is {text.strip()!r} here, but the study fixes it at "
                     f"{context.fixed[name]:g}: the runs vary it; vary parameters.{name} too, or "
                     "keep only the rows at the fixed value")
        for k, j in enumerate(outputs):
            text, col = row[j] if j < len(row) else ("", 1)
            value = number(text)
            if value is None and not failed:
                fail(line, col, f"{text.strip()!r} in column {table.header[j]!r} is not a number "
                     "(leave the cell empty or write NA for a missing value)")
            elif value is not None and not failed:
                values[i, k] = value
    if not table.rows:
        fail(table.header_line, 1, "no rows under the header: there are no runs to analyse")
    if problems:
        more = len(problems) - SHOWN
        shown = problems[:SHOWN] + ([Problem(f"and {more} more problems in this file", file=str(path),
                                             line=table.header_line, col=1)] if more > 0 else [])
        raise StudyError(shown)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return GivenRows(path, names, inputs, {table.header[j]: values[:, k]
                                           for k, j in enumerate(outputs)}, errors, digest, finished)


def header_problems(header: list[str], context: StudyContext) -> list[tuple[int, int, str]]:
    """(header cell, column or 0 for the line's start, message) of what the header lacks or
    cannot hold: a varied parameter's column, a name the quantities read, a quantity's name."""
    found = []
    own = own_columns(header).values()
    names = [name for j, name in enumerate(header) if j not in own]  # what a study may name
    for name in context.varied:
        if name not in header:
            found.append((0, 1, f"no column for the varied parameter {name!r}"
                                f"{suggest(name, names)}; columns: {', '.join(header)}"))
    for name in needed_outputs(context, set(header)):
        found.append((0, 1, f"no column {name!r} for the quantities{suggest(name, names)}; "
                            f"columns: {', '.join(header)}"))
    if context.quantities is None:  # every output column is a quantity, named as its header
        found += [(j, 0, f"column {name!r} cannot name a quantity (letters, digits and _); "
                         "rename it, or name the quantities to keep in a quantities: block")
                  for j, name in enumerate(header)
                  if j not in own and name not in context.parameters and not NAME.match(name)]
    return found


def needed_outputs(context: StudyContext, header: set[str]) -> list[str]:
    """The names the quantities read that are neither a column nor a parameter."""
    from studyrun.blocks.quantities import parse_quantity

    wanted: list[str] = []
    for name, text in (context.quantities or {}).items():
        if name in header:
            continue
        try:
            wanted += sorted(parse_quantity(str(text)).names)
        except Exception:  # an invalid expression: the quantities' own check reports it
            continue
    known = header | set(context.parameters) | {"time"}
    return [name for name in dict.fromkeys(wanted) if name not in known]


def cell(row: list[tuple[str, int]], index: int | None) -> str:
    return row[index][0].strip() if index is not None and index < len(row) else ""


def number(text: str) -> float | None:
    """A cell's number; NaN for a missing value (empty, NA); None for anything else."""
    if text.strip().lower() in MISSING:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
