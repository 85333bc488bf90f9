"""runs.csv's writer: the floats formatted by pyarrow give the same bytes as Python's own
formatting, hostile text and every kind of float included (issue 33)."""

from __future__ import annotations

import numpy as np
import pytest

import studyrun.results.runs_csv as runs_csv
from studyrun.core.runtable import RunTable

HOSTILE = [None, "=cmd|' /C calc'!A0", "+1", "-x", "@SUM(A1)", "\tlead", "\rlead", "'=quoted",
           'a "quote"', "a,b", "line\nbreak", "crlf\r\nend", "\u2713 \u00e9", "", "nan"]
FLOATS = [0.0, -0.0, 1.0, -3.0, 123.0, 0.5, 0.1, 1e-4, -1.5e-4, 9.999e-5, 1e-5, 5e-324, 1e15,
          123456789012345.6, 9007199254740992.0, 1e16, 1.5e16, 1e22, 1.7976931348623157e308,
          0.30000000000000004, np.nan, np.inf, -np.inf, 2.5e-8, 7.0e-4]


def table(rows: int, inputs: np.ndarray, values: np.ndarray, seed: int) -> RunTable:
    rng = np.random.default_rng(seed)
    errors = np.array([HOSTILE[i % len(HOSTILE)] for i in range(rows)], object)
    return RunTable(ids=rng.integers(-2**63, 2**63 - 1, rows), found=np.ones(rows, bool),
                    ok=np.array([e is None for e in errors]), errors=errors,
                    duration=rng.choice([0.001, np.nan, 2.5e-5, 3.0], rows),
                    worker=np.array([HOSTILE[(i * 7) % len(HOSTILE)] for i in range(rows)], object),
                    inputs=inputs, values=values)


@pytest.fixture(autouse=True)
def arrow_for_any_size(monkeypatch):
    monkeypatch.setattr(runs_csv, "ARROW_CELLS", 0)


def python_text(monkeypatch, *args) -> str:
    with monkeypatch.context() as patched:
        patched.setattr(runs_csv, "arrow_text", lambda *_: None)
        return runs_csv.csv_text(*args)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pyarrow_formatting_gives_the_bytes_of_python_formatting(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    rows = 300
    special = rng.choice(FLOATS, (rows, 4))
    spread = rng.uniform(-1, 1, (rows, 6)) * 10.0 ** rng.integers(-12, 20, (rows, 6))
    short = np.round(rng.uniform(0, 100, (rows, 3)), rng.integers(0, 6))
    bits = rng.integers(0, 2**64 - 1, (rows, 3), dtype=np.uint64).view(np.float64)
    runs = table(rows, np.column_stack([special, spread, short]), bits, seed)
    kept = np.flatnonzero(rng.random(rows) < 0.9)
    fast = runs_csv.csv_text(11, runs, kept)
    assert fast == python_text(monkeypatch, 11, runs, kept)
    assert b"e-05" in fast and b"-0.0" in fast and b"123.0" in fast  # Python's forms, not pyarrow's


def test_a_wide_table_and_one_without_numbers_are_written_alike(monkeypatch, tmp_path):
    rng = np.random.default_rng(4)
    wide = table(40, rng.random((40, 1000)), rng.normal(size=(40, 2)), 4)
    bare = table(5, np.zeros((5, 0)), np.zeros((5, 0)), 5)
    names = [f"p{i}" for i in range(1000)]
    runs_csv.write_csv(tmp_path / "fast.csv", names, ["y", "z"], [(0, wide), (40, wide)])
    with monkeypatch.context() as patched:
        patched.setattr(runs_csv, "arrow_text", lambda *_: None)
        runs_csv.write_csv(tmp_path / "python.csv", names, ["y", "z"], [(0, wide), (40, wide)])
    assert (tmp_path / "fast.csv").read_bytes() == (tmp_path / "python.csv").read_bytes()
    assert runs_csv.csv_text(0, bare, np.arange(5)) == python_text(monkeypatch, 0, bare,
                                                                   np.arange(5))


@pytest.mark.parametrize("odd", [0, 1, 9])
def test_plain_numbers_and_a_few_of_another_form_give_the_bytes_of_python_formatting(monkeypatch,
                                                                                    odd):
    """Numbers both write alike (orjson's digits kept), with none, one or a few cells Python
    writes in another form (NaN, inf, 1e-05, a whole number)."""
    rng = np.random.default_rng(odd)
    rows = 80
    plain = rng.uniform(-1, 1, (rows, 5)) * 10.0 ** rng.integers(-3, 15, (rows, 5))
    plain[np.abs(plain) < 1e-4] = 0.5
    for k in range(odd):  # a few rows with a cell of another form
        plain[rng.integers(rows), rng.integers(5)] = FLOATS[k * 5 % len(FLOATS)]
    runs = table(rows, plain[:, :3], plain[:, 3:], odd)
    kept = np.arange(rows)
    fast = runs_csv.csv_text(3, runs, kept)
    assert fast == python_text(monkeypatch, 3, runs, kept)
