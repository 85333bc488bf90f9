"""Reading outputs: a run's results file (JSON, CSV with a header, or a table of numbers whose
columns the study names), gathered into the batch's arrays."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from studyrun.core.batch import ModelOutput


class RunFailed(Exception):
    """One run's failure message, raised and caught inside the batch loop."""


_SEPARATORS = re.compile(r"[\s,]+")
_FORTRAN_EXPONENT = re.compile(r"(?<=[0-9.])[dD](?=[-+]?[0-9])")  # 1.5D+03, as Fortran writes


def read_results(path: Path, columns: tuple[str, ...] | None = None
                 ) -> tuple[dict[str, float], dict[str, np.ndarray], np.ndarray | None]:
    """(scalars, series, time) of one run's results file; RunFailed when malformed."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise RunFailed(f"cannot read {path.name}: {exc.strerror}") from None
    if columns is not None:
        return _parse_table(text, path.name, columns)
    if path.suffix.lower() == ".csv":
        return _parse_csv(text, path.name)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFailed(f"{path.name} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RunFailed(f"{path.name} must hold a JSON object of outputs; "
                         f"got {type(data).__name__}")
    scalars, series = {}, {}
    for name, value in data.items():
        if isinstance(value, list):
            series[name] = _as_numbers(value, name, path.name)
        else:
            scalars[name] = _as_numbers([value], name, path.name)[0]
    time = series.pop("time", None)
    if "time" in scalars:
        raise RunFailed(f"{path.name}: 'time' must be a list of numbers")
    return scalars, series, _check_grid(time, series, path.name)


def _as_numbers(values: list, name: str, file: str) -> np.ndarray:
    for v in values:
        if v is not None and not isinstance(v, (int, float)):
            raise RunFailed(f"{file}: {name!r} is not numeric (found {v!r}); outputs must be "
                             "numbers, null, or lists of them")
    return np.array([math.nan if v is None else float(v) for v in values], dtype=float)


def _parse_csv(text: str, file: str):
    from studyrun.core.csv_table import parse_table
    from studyrun.core.errors import StudyError

    try:
        table = parse_table(text, file, check_separators=False)
    except StudyError as exc:  # a column named twice, a field beyond the csv module's limit
        raise RunFailed(str(exc)) from None
    header = table.header
    if "time" not in header:
        raise RunFailed(f"{file} has no 'time' column; found columns {header}")
    try:
        values = [[float(c) if c.strip() else math.nan for c, _ in row] for _, row in table.rows]
        matrix = np.array(values, dtype=float).reshape(len(values), len(header))
    except ValueError as exc:
        raise RunFailed(f"{file}: not a table of numbers under its header ({exc})") from None
    series = {h: matrix[:, k] for k, h in enumerate(header)}
    return {}, series, _check_grid(series.pop("time"), series, file)


def _parse_table(text: str, file: str, columns: tuple[str, ...]):
    """A table without a header: numbers separated by spaces, tabs or commas, one row a line,
    as many as `columns`; blank lines and lines starting with # are skipped. With a `time`
    column the others are series over it; without, the table is one row of scalars."""
    rows, lines = [], []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            rows.append(_SEPARATORS.split(line.strip(",")))
            lines.append(number)
    if not rows:
        raise RunFailed(f"{file} holds no row of numbers (columns: {', '.join(columns)})")
    for cells, number in zip(rows, lines):
        if len(cells) != len(columns):
            raise RunFailed(f"{file}:{number}: {len(cells)} numbers where columns names "
                            f"{len(columns)} ({', '.join(columns)})")
    try:
        table = np.array([_FORTRAN_EXPONENT.sub("e", c) for cells in rows for c in cells],
                         dtype=float).reshape(len(rows), len(columns))
    except ValueError:
        for cells, number in zip(rows, lines):
            for cell in cells:
                try:
                    float(_FORTRAN_EXPONENT.sub("e", cell))
                except ValueError:
                    raise RunFailed(f"{file}:{number}: {cell[:40]!r} is not a number") from None
        raise
    if "time" not in columns:
        if len(rows) > 1:
            raise RunFailed(f"{file} has {len(rows)} rows but no time column: a table without "
                            "time holds one row of scalars (name a time column for series)")
        return dict(zip(columns, table[0].tolist())), {}, None
    series = {name: table[:, k] for k, name in enumerate(columns)}
    return {}, series, _check_grid(series.pop("time"), series, file)


def _check_grid(time, series: dict[str, np.ndarray], file: str) -> np.ndarray | None:
    if not series:
        return None if time is None else np.asarray(time)
    lengths = {len(s) for s in series.values()}
    if time is None:
        if len(lengths) > 1:
            raise RunFailed(f"{file}: series differ in length {sorted(lengths)} and no 'time'")
        return np.arange(lengths.pop(), dtype=float)
    if not len(time):
        raise RunFailed(f"{file}: 'time' holds no value")
    if lengths != {len(time)}:
        raise RunFailed(f"{file}: every series must have as many values as 'time' ({len(time)})")
    if not np.all(np.diff(time) > 0):
        raise RunFailed(f"{file}: 'time' must increase strictly")
    return time


def assemble(out: ModelOutput, parsed: list, results_name: str) -> None:
    """Fill the batch's arrays, each run's series on its own grid; a run that lacks an output
    the other runs of the batch have fails."""
    ok = [i for i, p in enumerate(parsed) if p is not None]
    scalar_names = list(dict.fromkeys(k for i in ok for k in parsed[i][0]))
    series_names = list(dict.fromkeys(k for i in ok for k in parsed[i][1]))
    out.scalars = {k: np.full(out.n, math.nan) for k in scalar_names}
    runs = {}
    for i in ok:
        scalars, series, time = parsed[i]
        missing = [k for k in scalar_names if k not in scalars]
        missing += [k for k in series_names if k not in series]
        if missing:
            out.fail(i, f"{results_name} has no {missing[0]!r}, which other runs of the batch "
                        "have (write null for a value a run cannot compute)")
            continue
        for k in scalar_names:
            out.scalars[k][i] = scalars[k]
        if series_names:
            runs[i] = (time, series)
    out.put_runs(runs)
