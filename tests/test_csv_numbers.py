"""csv_table.Grid.numbers, the vectorised reader of a plain CSV of numbers (pyarrow's CSV reader,
or pandas' C reader without pyarrow): every number it gives is the one float() reads, bit for
bit, and every cell float() would not read, or reads as NaN or inf, sends the file back to the
cell reader, which locates it. Each check is made of both readers."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow  # noqa: F401  (imported, as in `studyrun run`: Grid.numbers reads any size)
import pytest

from studyrun.core import csv_table
from studyrun.core.csv_table import read_plain

READERS = [csv_table.arrow_numbers, csv_table.pandas_numbers]

ODD_BUT_NUMBERS = [  # forms float() reads, and numbers that are hard to round
    "1.", ".5", "+1", "-0", "-0.0", "1E5", "1e-0", "00012", "+.5e+3", "-.5e-3", "1e+308",
    "9007199254740993", "2.2250738585072011e-308", "4.9e-324", "1e-400", "1.7976931348623157e308",
    "0.1000000000000000055511151231257827021181583404541015625", "123456789012345678901234567890",
    "0.30000000000000004", "5e-324", "2.4703282292062328e-324", "8.98846567431158e307",
]
NOT_NUMBERS = [  # float() refuses these, or gives a value that is not finite
    "1e", "e1", "+-1", "1.2.3", "--1", "1e+", ".", "-", "+", "1-2", "1e1.5", "1e1e1", ".e1",
    "1..2", "1+", "E", "-.e5", "+.", "1e--1", "1e400", "-1e309", "", "1e+-1", "..", "e",
]


def numbers_of(tmp_path, cells: list[str], reader):
    """Grid.numbers of a two-column file whose first column holds the cells, read by `reader`."""
    path = tmp_path / "runs.csv"
    path.write_text("x,y\n" + "".join(f"{cell},1\n" for cell in cells))
    grid = read_plain(path)
    assert grid is not None
    with pytest.MonkeyPatch.context() as patched:  # the other reader, as without pyarrow
        patched.setattr(csv_table, "arrow_numbers", reader)
        return grid.numbers()


@pytest.mark.parametrize("reader", READERS)
def test_odd_forms_and_hard_roundings_are_read_as_float_reads_them(tmp_path, reader):
    found = numbers_of(tmp_path, ODD_BUT_NUMBERS, reader)
    assert found is not None
    expected = np.array([float(cell) for cell in ODD_BUT_NUMBERS])
    assert found[:, 0].tobytes() == expected.tobytes()


@pytest.mark.parametrize("reader", READERS)
def test_a_cell_that_is_not_a_finite_number_declines(tmp_path, reader):
    for cell in NOT_NUMBERS:
        assert numbers_of(tmp_path, ["0.5", cell, "2"], reader) is None, cell


@pytest.mark.parametrize("cell", ["nan", "inf", " 1", "1 ", "1_000", "0x10", "1\x002", "1d3", "١"])
def test_text_spaces_and_other_characters_decline_before_pandas_reads(tmp_path, cell):
    path = tmp_path / "runs.csv"
    path.write_bytes(f"x,y\n0.5,1\n{cell},2\n".encode())
    grid = read_plain(path)
    assert grid is None or grid.numbers() is None


@pytest.mark.thorough
@pytest.mark.parametrize("reader", READERS)
def test_every_short_string_of_number_characters_is_read_as_float_reads_it(tmp_path, reader):
    """Each string of up to 4 of 1 0 . e E + -: a number exactly where float() reads a finite
    one, that number (all of them in one file), and otherwise a decline (each alone)."""
    numbers, others = [], []
    for length in range(1, 5):
        for letters in itertools.product("10.eE+-", repeat=length):
            cell = "".join(letters)
            try:
                (numbers if np.isfinite(float(cell)) else others).append(cell)
            except ValueError:
                others.append(cell)
    found = numbers_of(tmp_path, numbers, reader)
    assert found is not None and found[:, 0].tolist() == [float(cell) for cell in numbers]
    for cell in others:
        assert numbers_of(tmp_path, [cell], reader) is None, cell


@pytest.mark.slow  # a fresh Python process
def test_reading_numbers_and_writing_runs_csv_leave_pandas_unimported(tmp_path):
    """pyarrow's array(), scalar() and to_numpy() import pandas (0.3 s of CPU); the given-data
    path (a plain CSV of numbers read, runs.csv written by pyarrow) never needs it."""
    import subprocess
    import sys

    code = """if True:
        import sys
        import numpy as np
        import pyarrow  # as a large file would: Grid.numbers reads this small one by pyarrow too
        from studyrun.core.csv_table import read_plain
        from studyrun.core.runtable import RunTable
        from studyrun.results import runs_csv
        path = sys.argv[1]
        open(path, "w").write("x,y\\n" + "".join(f"{i / 7!r},{i}e-9\\n" for i in range(300)))
        matrix = read_plain(path).numbers()
        assert matrix.shape == (300, 2), matrix
        runs_csv.ARROW_CELLS = 0
        n = len(matrix)
        table = RunTable(ids=np.arange(n), found=np.ones(n, bool), ok=np.arange(n) % 3 > 0,
                         errors=np.array(["a,b", None, None] * 100, object),
                         duration=np.zeros(n), worker=np.full(n, "given", object),
                         inputs=matrix[:, :1], values=matrix[:, 1:])
        runs_csv.write_csv(path, ["x"], ["y"], [(0, table)])
        assert b'"a,b"' in open(path, "rb").read()
        assert "pyarrow.compute" in sys.modules and "pandas" not in sys.modules
    """
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "runs.csv")], check=True)
