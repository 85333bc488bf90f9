"""The one CSV reader (data files, `from:` runs, runs.csv, a design, a command model's results):
records split as a CSV parser splits them, every cell with the line and column where it starts,
a header whose names are unique. Every mistake is a StudyError at FILE:LINE:COL.

A quoted field may hold line breaks; only \\n, \\r\\n and \\r end a record (not \\v, \\f,
\\x1c-\\x1e, \\x85 or \\u2028, where `str.splitlines` would split). A record spanning lines is
located at its first line, its cells by their offset in it.

runs.csv's text cells (`error`, `worker`) starting with = + - @ tab or CR are written with a
single quote before them, so that spreadsheets show them as text instead of running them as
formulas (the OWASP CSV-injection rule); `escape_text` writes that, `unescape_text` reads it.

`read_plain` reads the common case, a header and rows of plain cells, at the speed of string
splitting (a million rows in about a second) and declines everything else, which `read_table`
reads and locates.
"""

from __future__ import annotations

import codecs
import csv
import functools
import hashlib
import io
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from studyrun.core import arrow
from studyrun.core.errors import StudyError
from studyrun.core.text import suggest

MISSING = {"", "na", "nan", "null", "n/a", "none"}  # a cell holding no value
FORMULA = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet runs when a cell starts with it
SEPARATORS = {",": "commas", ";": "semicolons", "\t": "tabs", "|": "bars"}
# A record: quoted stretches (which may hold anything, line breaks too) and other characters up
# to a line break or the end; an unclosed quote runs to the end of the text.
_RECORD = re.compile(r'(?:"[^"]*(?:"|\Z)|[^"\r\n]+)*(?:\r\n|\r|\n|\Z)')
_BREAK = re.compile(r"\r\n|\r|\n")
HEADER_BYTES = 16 * 2**20  # where read_header stops looking for the header
NUMBERS_CELLS = 1 << 18  # cells that pay for importing pyarrow (~0.1 s) to read them


@dataclass
class Table:
    """A CSV file's header and rows, each cell with its line and column."""

    path: str
    header: list[str]  # the names, stripped
    header_line: int
    header_cols: list[int]
    rows: list[tuple[int, list[tuple[str, int]]]]  # (line, cells as (text, column))

    def column(self, name: str, key: str) -> int:
        """The index of a named column, or a StudyError at the header naming the choices."""
        if name in self.header:
            return self.header.index(name)
        raise StudyError(f"no column {name!r} (data.{key}) in the header; columns: "
                         f"{', '.join(self.header)}{suggest(name, self.header)}",
                         file=self.path, line=self.header_line, col=1)

    def fail(self, line: int, col: int, message: str) -> StudyError:
        return StudyError(message, file=self.path, line=line, col=col)


def read_table(path: str | Path, sep: str = ",", *, check_separators: bool = True) -> Table:
    """A CSV file (UTF-8, a byte-order mark allowed) read as a Table: blank lines and lines
    starting with # are skipped, the first line left is the header."""
    raw = _read(str(path))
    return parse_table(_decode(raw, str(path)), str(path), sep, check_separators=check_separators)


def read_header(path: str | Path, sep: str = ",", *, check_separators: bool = True) -> Table:
    """A CSV file's header checked as read_table checks it (a Table without rows), reading no
    further than HEADER_BYTES: for a file whose rows another reader takes (pandas, runs.csv)."""
    path = str(path)
    raw = _read(path, HEADER_BYTES + 1)
    cut = len(raw) > HEADER_BYTES
    if cut:  # whole lines only, so that no character is cut in two
        raw = raw[:raw.rfind(b"\n", 0, HEADER_BYTES) + 1]
    head: list[str] = []
    found = iter(records(_decode(raw, path)))
    for _, record in found:
        head.append(record)
        if record.strip() and not record.lstrip().startswith("#"):
            if cut and next(found, None) is None:  # the header may go on past what was read
                break
            return parse_table("\n".join(head), path, sep, check_separators=check_separators)
    if cut:
        raise StudyError(f"no header within the file's first {HEADER_BYTES // 2**20} MB; a "
                         "header line is far shorter", file=path, line=1, col=1)
    return parse_table("\n".join(head), path, sep)  # the file is empty: its error


def _read(path: str, limit: int = -1) -> bytes:
    """The bytes of a file (at most `limit`), or a StudyError at it."""
    if Path(path).exists() and not Path(path).is_file():  # a pipe or device would never end
        raise StudyError("not a regular file (a folder, pipe or device); name a CSV file",
                         file=path, line=1, col=1)
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except FileNotFoundError:
        raise StudyError("file not found", file=path, line=1, col=1) from None
    except OSError as exc:
        raise StudyError(f"cannot read the file: {exc.strerror or exc}", file=path, line=1,
                         col=1) from None


def _decode(raw: bytes, path: str) -> str:
    """UTF-8 text (a byte-order mark allowed), or a StudyError where it is not."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _line_col(raw, exc.start)
        raise StudyError(f"not UTF-8 text: the byte {raw[exc.start]:#04x} cannot start or "
                         "continue a character here; save the file as UTF-8", file=path,
                         line=line, col=col) from None


@dataclass
class Grid:
    """A plain CSV file (see read_plain): its header as a Table without rows, and its rows,
    handed out as numbers all at once or, when every row has the header's width (`ends`), as
    cells a chunk of rows at a time."""

    table: Table
    data: bytes  # the file's text (a BOM left off, CRLF as LF), ending in \n
    start: int  # where its rows start (ASCII, each ending in \n), past the header's line
    sep: str
    sha256: str  # of the file as it is on disk

    @property
    def size(self) -> int:
        return self.data.count(b"\n", self.start)

    @property
    def rows(self) -> memoryview:
        return memoryview(self.data)[self.start:]

    @functools.cached_property
    def ends(self) -> np.ndarray | None:
        """The offset (in `rows`) just past each row's \n; None if a row has more or fewer
        cells than the header (checked here, not when read: pyarrow's reader checks that)."""
        data = np.frombuffer(self.data, np.uint8, offset=self.start)
        ends = np.flatnonzero(data == 10) + 1
        found = np.searchsorted(np.flatnonzero(data == ord(self.sep)), ends)
        if (np.diff(found, prepend=0) != len(self.table.header) - 1).any():
            return None
        return ends

    def chunks(self, cells: int = 1 << 20) -> Iterator[tuple[int, list[str]]]:
        """(first row, the cells of some rows, row after row) for all rows, `cells` at a time;
        only for a grid whose rows have the header's width (`ends`)."""
        ends, width = self.ends, len(self.table.header)
        assert ends is not None
        step = max(1, cells // width)
        for first in range(0, len(ends), step):
            start = int(ends[first - 1]) if first else 0
            stop = int(ends[min(first + step, len(ends)) - 1]) - 1
            yield first, self.data[self.start + start:self.start + stop].decode("ascii").replace(
                "\n", self.sep).split(self.sep)

    def numbers(self) -> np.ndarray | None:
        """Every cell as float() reads it (rows x columns), parsed at once by pyarrow's CSV
        reader (pandas' C reader without pyarrow), when every row has the header's width and
        each cell is a finite number written with digits, signs, a point and an exponent alone;
        None for any other grid (text, spaces, NaN, inf, '1_000'), and for one under
        NUMBERS_CELLS cells unless pyarrow or pandas is imported already: `chunks` hands their
        cells out instead."""
        width, size = len(self.table.header), self.size
        if size * width < NUMBERS_CELLS and not {"pyarrow", "pandas"} & set(sys.modules):
            return None
        allowed = b"0123456789+-.eE\n" + self.sep.encode()
        if len(self.data.translate(None, allowed)) > len(self.data[:self.start].translate(
                None, allowed)):
            return None  # a row holds a byte that is none of these (the header may)
        try:
            import pyarrow  # type: ignore[import-untyped]  # noqa: F401
        except ImportError:  # pandas takes a row of more cells for an index: widths first
            values = pandas_numbers(self.rows, self.sep, width) if self.ends is not None else None
        else:  # pyarrow refuses a row of more or fewer cells than the names it is given
            values = arrow_numbers(self.rows, self.sep, width)
        return (values if values is not None and values.shape == (size, width)
                and np.isfinite(values).all() else None)


def arrow_numbers(data: bytes | memoryview, sep: str, width: int) -> np.ndarray | None:
    """Rows of `width` numbers read by pyarrow's CSV reader (fast_float, correctly rounded:
    float()'s numbers), or None where a cell is not a number."""
    import pyarrow as pa
    import pyarrow.csv as csv_arrow  # type: ignore[import-untyped]

    names = [str(j) for j in range(width)]
    try:
        table = csv_arrow.read_csv(
            pa.BufferReader(pa.py_buffer(data)),  # the bytes themselves, not a copy
            read_options=csv_arrow.ReadOptions(column_names=names, use_threads=False,
                                               block_size=max(1 << 20, min(len(data) + 1, 1 << 30))),
            parse_options=csv_arrow.ParseOptions(delimiter=sep, quote_char=False,
                                                 ignore_empty_lines=False),
            convert_options=csv_arrow.ConvertOptions(
                column_types=dict.fromkeys(names, pa.float64()), null_values=[],
                strings_can_be_null=False))
        return np.column_stack([arrow.float_values(table.column(j)) for j in range(width)])
    except (pa.ArrowInvalid, ValueError):
        return None


def pandas_numbers(data: bytes | memoryview, sep: str, width: int) -> np.ndarray | None:
    """Rows of `width` numbers read by pandas' C reader (its round-trip converter before 3.1,
    whose default rounds some numbers otherwise than float()), or None where a cell is not."""
    import pandas as pd  # type: ignore[import-untyped]

    major, minor = (int(p) if p.isdigit() else 0 for p in pd.__version__.split(".")[:2])
    exact = {"float_precision": "round_trip"} if (major, minor) < (3, 1) else {}
    try:
        frame = pd.read_csv(io.BytesIO(data), sep=sep, header=None, names=list(range(width)),
                            dtype=np.float64, na_filter=False, engine="c", **exact)
    except (ValueError, TypeError, pd.errors.ParserError):
        return None
    values: np.ndarray = frame.to_numpy(dtype=np.float64)
    return values


def read_plain(path: str | Path, sep: str = ",") -> Grid | None:
    """A CSV file whose header is its first line and whose other lines are ASCII, without
    quotes, comments (#) or a lone CR; None for any other file (and for one that cannot be
    read), which read_table reads instead. The Grid declines (numbers() and ends are None) a
    file whose every row does not hold the header's number of cells (a blank line included):
    where read_table and the Grid both read a file, they read the same cells."""
    if len(sep) != 1 or sep.isspace() or sep in '"#\r\n' or not sep.isascii():
        return None
    try:
        if not Path(path).is_file():
            return None
        raw = Path(path).read_bytes()
    except OSError:
        return None
    original = raw
    if b'"' in raw or b"#" in raw:
        return None
    if b"\r" in raw:
        if raw.count(b"\r") != raw.count(b"\r\n"):
            return None
        raw = raw.replace(b"\r\n", b"\n")
    raw = raw[len(codecs.BOM_UTF8):] if raw.startswith(codecs.BOM_UTF8) else raw
    start = raw.find(b"\n") + 1  # the rows are not copied out of the text: it is large
    head = raw[:start - 1]
    if not start or start == len(raw) or not (raw.isascii() or raw[start:].isascii()):
        return None
    try:
        table = parse_table(head.decode("utf-8"), str(path), sep)
    except (UnicodeDecodeError, StudyError):
        return None
    if table.rows or len(table.header) < 2:  # a blank header line, or one cell: read_table's
        return None
    raw = raw if raw.endswith(b"\n") else raw + b"\n"
    return Grid(table, raw, start, sep, hashlib.sha256(original).hexdigest())


def parse_table(text: str, path: str, sep: str = ",", *, check_separators: bool = True) -> Table:
    """CSV text read as a Table (see read_table); `path` is the name its errors give."""
    found = [(line, record) for line, record in records(text)
             if record.strip() and not record.lstrip().startswith("#")]
    if not found:
        raise StudyError("the file is empty (no header line)", file=path, line=1, col=1)
    rows = [(line, _split(path, line, record, sep)) for line, record in found]
    header_line, header = rows.pop(0)
    table = Table(path, [name.strip() for name, _ in header], header_line,
                  [col for _, col in header], rows)
    check_names(table.header, table.header_cols, path, header_line)
    if check_separators:
        _check_widths(table, dict(found), sep)
    return table


def records(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of each record, its line break left off: lines joined where a quoted field
    holds a line break."""
    line, end = 1, len(text)
    for match in _RECORD.finditer(text):
        start, stop = match.span()
        if start == end:
            return
        record = match.group()
        ending = 2 if record.endswith("\r\n") else 1 if record.endswith(("\r", "\n")) else 0
        yield line, record[:len(record) - ending]
        line += len(_BREAK.findall(record))
        if stop == end:
            return


def cells(record: str, sep: str) -> list[tuple[str, int]]:
    """The fields of one record with the 1-based column where each starts (quotes honoured)."""
    if '"' not in record:  # what csv.reader gives a record without quotes, a hundred times faster
        out, pos = [], 0
        for value in record.split(sep):
            out.append((value, pos + 1))
            pos += len(value) + 1
        return out
    fields = next(csv.reader([record], delimiter=sep), [])
    out, pos = [], 0
    for value in fields:
        out.append((value, pos + 1))
        quoted = False
        while pos < len(record):  # skip to just past the next separator outside quotes
            ch = record[pos]
            pos += 1
            if ch == '"':
                quoted = not quoted
            elif ch == sep and not quoted:
                break
    return out


def escape_text(text: str) -> str:
    """A text cell as runs.csv writes it: a single quote before text a spreadsheet would run
    (starting with = + - @ tab or CR, after any quotes of its own, so that reading is exact)."""
    return "'" + text if text.lstrip("'").startswith(FORMULA) else text


def unescape_text(text: str) -> str:
    """A text cell of runs.csv as it was before `escape_text`."""
    return text[1:] if text.startswith("'") and text.lstrip("'").startswith(FORMULA) else text


def _split(path: str, line: int, record: str, sep: str) -> list[tuple[str, int]]:
    """The cells of one record, or a StudyError at it (a field beyond the csv module's limit)."""
    try:
        return cells(record, sep)
    except csv.Error as exc:
        raise StudyError(f"cannot read this line as CSV: {exc} (is a quote left open?)",
                         file=path, line=line, col=1) from None


def check_names(names: list[str], cols: list[int], path: str, line: int) -> None:
    """Each column named once: with two columns of one name, which one a reader takes is a
    guess."""
    seen: dict[str, int] = {}
    for name, col in zip(names, cols):
        if name in seen:
            raise StudyError(f"the column {name!r} is named twice (also at column {seen[name]}); "
                             "name each column once", file=path, line=line, col=col)
        seen[name] = col


def _check_widths(table: Table, text: dict[int, str], sep: str) -> None:
    """A line with more cells than the header, or split by another separator than `sep`
    (a ';' or tab file read as ',', or a mix), is an error naming what it found."""
    width = len(table.header)
    other = other_separator(text[table.header_line], sep)
    if other:
        where = "header" if width == 1 else "mixed"
        raise table.fail(table.header_line, 1, separator_message(other, sep, where))
    for number, row in table.rows:
        if len(row) > width:
            raise table.fail(number, row[width][1], f"this line has {len(row)} cells, the "
                             f"header {width}; quote a value holding {sep!r}, or remove the "
                             "extra cells")
        other = other_separator(text[number], sep) if len(row) < width else None
        if other:
            raise table.fail(number, 1, separator_message(other, sep, "line"))


def other_separator(line: str, sep: str) -> str | None:
    """A separator other than `sep` found outside quotes in the line, if any."""
    outside = "".join(line.split('"')[::2])
    return next((s for s in SEPARATORS if s != sep and s in outside), None)


def separator_message(found: str, sep: str, where: str) -> str:
    """What a header or line split by `found` rather than `sep` means, and the fix."""
    found_name, sep_name = SEPARATORS[found], SEPARATORS.get(sep, repr(sep))
    fix = f"set sep: {json.dumps(found)} in the data block, or use one separator throughout the file"
    if where == "header":
        return f"the header is separated by {found_name}, not {sep_name}; {fix}"
    if where == "line":
        return f"this line holds {found_name} where the header uses {sep_name}; {fix}"
    return (f"the header mixes separators ({sep_name} and {found_name}); use one throughout, "
            "and set sep: to it")


def _line_col(raw: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and column of a byte offset."""
    start = raw.rfind(b"\n", 0, offset) + 1
    return raw.count(b"\n", 0, offset) + 1, offset - start + 1
