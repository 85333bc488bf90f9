"""The run store's record: failed runs replaced when they succeed later, old stores upgraded,
runs.csv written column by column yet read back exactly (errors with commas, quotes, newlines;
a failed run's quantities empty)."""

from __future__ import annotations

import csv
import json
import sqlite3

import numpy as np
import pytest
from conftest import write_study

import studyrun

MOODY = '''
import pathlib

def model(a, b):
    """Fails for a > 0.7 while a file named `broken` lies next to this module."""
    if a > 0.7 and (pathlib.Path(__file__).parent / "broken").exists():
        raise ValueError('a is "too large", sorry\\nsecond line')
    return {"y": a + b, "gap": b}
'''

STUDY = """
    name: moody
    model: {type: python, function: "moody:model"}
    parameters: {a: {bounds: [0, 1]}, b: {bounds: [0, 1]}}
    quantities: {y: y, gap: gap}
    analysis: {type: montecarlo, samples: 300}
    execution: {scheduler: sync, on_failure: continue}
"""


@pytest.fixture
def moody(tmp_path):
    (tmp_path / "moody.py").write_text(MOODY)
    return write_study(tmp_path, STUDY)


def rows(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_failed_runs_are_replaced_when_they_succeed_on_the_next_start(moody, tmp_path):
    (tmp_path / "broken").write_text("")
    first = studyrun.run(moody, tmp_path / "out", quiet=True)
    failed = first.analysis["runs"]["failed"]
    assert 50 < failed < 150  # about 30% of 300
    (tmp_path / "broken").unlink()
    second = studyrun.run(moody, tmp_path / "out", quiet=True)
    assert second.analysis["runs"] == {"planned": 300, "succeeded": 300, "failed": 0,
                                       "reused": 300 - failed}
    with sqlite3.connect(tmp_path / "out" / "runs.sqlite") as db:
        stored, distinct, ok = db.execute("SELECT count(*), count(DISTINCT id), "
                                          "sum(status = 'ok') FROM runs").fetchone()
    assert stored == distinct == ok == 300
    table = rows(tmp_path / "out" / "runs.csv")
    assert [r["status"] for r in table] == ["ok"] * 300
    assert [int(r["run"]) for r in table] == list(range(300))


def test_runs_csv_reads_back_exactly(moody, tmp_path):
    (tmp_path / "broken").write_text("")
    result = studyrun.run(moody, tmp_path / "out", quiet=True)
    table = rows(tmp_path / "out" / "runs.csv")
    with sqlite3.connect(tmp_path / "out" / "runs.sqlite") as db:
        stored = {row[0]: row[1:] for row in db.execute("SELECT id, status, error, a, b, y, gap FROM runs")}
    assert len(table) == len(stored) == 300
    for row in table:
        status, error, a, b, y, gap = stored[int(row["id"])]
        assert (row["status"], row["error"] or None) == (status, error)
        assert float(row["a"]) == a and float(row["b"]) == b  # shortest round-trip text
        assert (row["y"] == "") == (y is None) == (status == "failed")
        if y is not None:
            assert float(row["y"]) == y and float(row["gap"]) == gap
    failed = [r for r in table if r["status"] == "failed"]
    assert failed and all(r["error"].startswith('ValueError: a is "too large", sorry\nsecond line')
                          for r in failed)
    assert result.runs["y"].isna().sum() == len(failed) == result.analysis["runs"]["failed"]


def test_a_store_of_format_1_is_upgraded_and_its_runs_reused(moody, tmp_path):
    studyrun.run(moody, tmp_path / "out", quiet=True)
    path = tmp_path / "out" / "runs.sqlite"
    with sqlite3.connect(path) as db:  # the layout of studyrun 0.1's first stores
        db.execute("CREATE TABLE old (id INTEGER PRIMARY KEY, status TEXT NOT NULL, error TEXT, "
                   "duration REAL, worker TEXT, a REAL, b REAL, y REAL, gap REAL)")
        db.execute("INSERT INTO old SELECT id, status, error, duration, worker, a, b, y, gap FROM runs")
        db.execute("DROP TABLE runs")
        db.execute("ALTER TABLE old RENAME TO runs")
        db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (json.dumps("1"),))
    again = studyrun.run(moody, tmp_path / "out", quiet=True)
    assert again.analysis["runs"]["reused"] == 300
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == '"2"'
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 300


def test_runs_recorded_in_one_session_are_found_in_the_next(tmp_path):
    from studyrun.store import Batch, RunStore

    n = 70_000  # more than one slice of rows read at a time
    ids = np.random.default_rng(1).integers(-2**63, 2**63 - 1, n)
    with RunStore.open(tmp_path / "runs.sqlite") as store:
        store.prepare(["a"], ["y"])
        for part in np.array_split(np.arange(n), 7):
            store.write(Batch(ids=ids[part], ok=part % 3 > 0, errors=[None] * len(part),
                              inputs=part[:, None] * 1.0, values=part[:, None] * 2.0,
                              duration=0.1, worker="w"))
        assert (store.succeeded_among(ids) == (np.arange(n) % 3 > 0)).all()
    with RunStore.open(tmp_path / "runs.sqlite") as store:
        order = np.random.default_rng(2).permutation(n)
        table = store.read(np.r_[ids[order], 12345])
        assert (table.found == np.r_[np.ones(n, bool), False]).all()
        assert (table.values[:-1, 0] == 2.0 * order).all() and (table.inputs[:-1, 0] == order).all()
        assert (table.ok[:-1] == (order % 3 > 0)).all()


def test_planned_runs_stream_in_plan_order_or_sorted_by_a_column(tmp_path):
    from studyrun.store import Batch, RunStore

    ids = np.arange(100, 110)
    a, y = np.arange(10.0)[::-1], np.array([3, 1, np.nan, 2, 1, 0, np.nan, 5, 4, 1.5])
    with RunStore.open(tmp_path / "runs.sqlite") as store:
        store.prepare(["a"], ["y"])
        recorded = np.arange(10) != 4  # position 4 never ran
        store.write(Batch(ids=ids[recorded], ok=np.isfinite(y[recorded]), errors=[None] * 9,
                          inputs=a[recorded, None], values=y[recorded, None], duration=0.1,
                          worker="w"))
        store.add_planned(0, ids[:6])
        store.add_planned(6, ids[6:])
        chunks = list(store.stream_planned(["run", "status", "a", "y"], rows=4))
        assert [c.shape for c in chunks] == [(4, 4), (4, 4), (4, 1)]
        position, ok, got_a, got_y = np.hstack(chunks)
        assert position.tolist() == [0, 1, 2, 3, 5, 6, 7, 8, 9]
        assert (ok == np.isfinite(y[recorded])).all() and (got_a == a[recorded]).all()
        assert np.array_equal(got_y, y[recorded], equal_nan=True)
        position, got_y = np.hstack(list(store.stream_planned(["run", "y"], order_by="y", rows=3)))
        assert np.isnan(got_y[:2]).all() and (np.diff(got_y[2:]) >= 0).all()  # NULL first
        assert sorted(position[:2]) == [2, 6] and position[-1] == 7
