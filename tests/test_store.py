"""The run store's record: failed runs replaced when they succeed later, stores of another layout
refused,
runs.csv written column by column yet read back exactly (errors with commas, quotes, newlines;
a failed run's quantities empty)."""

from __future__ import annotations

import csv
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing

import numpy as np
import pytest
from conftest import REPO, count_runs, run_cli, write_study

import studyrun
from studyrun.core.errors import StoreError
from studyrun.store.run_store import RunStore

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


@pytest.mark.slow
def test_failed_runs_are_replaced_when_they_succeed_on_the_next_start(moody, tmp_path):
    (tmp_path / "broken").write_text("")
    first = studyrun.run(moody, tmp_path / "out", quiet=True, report=False)
    failed = first.analysis["runs"]["failed"]
    assert 50 < failed < 150  # about 30% of 300
    (tmp_path / "broken").unlink()
    second = studyrun.run(moody, tmp_path / "out", quiet=True, report=False)
    assert second.analysis["runs"] == {"planned": 300, "succeeded": 300, "failed": 0,
                                       "reused": 300 - failed}
    with RunStore.open_readonly(tmp_path / "out" / "runs.sqlite") as store:
        assert store.counts() == {"ok": 300}  # each run's latest record
    assert count_runs(tmp_path / "out" / "runs.sqlite") == 300 + failed  # a failure, then its success
    table = rows(tmp_path / "out" / "runs.csv")
    assert [r["run.status"] for r in table] == ["ok"] * 300
    assert [int(r["run.index"]) for r in table] == list(range(300))


@pytest.mark.parametrize("chunk", [None, 70])
def test_runs_csv_reads_back_exactly(moody, tmp_path, monkeypatch, chunk):
    """Written at once, or (a plan of several chunks) a chunk each by helper processes."""
    import studyrun.commands.pipeline
    import studyrun.plan.runs

    if chunk:
        monkeypatch.setattr(studyrun.commands.pipeline, "CHUNK_ROWS", chunk)
        monkeypatch.setattr(studyrun.plan.runs, "CHUNK_ROWS", chunk)
    (tmp_path / "broken").write_text("")
    result = studyrun.run(moody, tmp_path / "out", quiet=True, report=False)
    table = rows(tmp_path / "out" / "runs.csv")
    assert [int(row["run.index"]) for row in table] == list(range(300))
    assert not list((tmp_path / "out").glob(".*"))  # no part left behind
    with RunStore.open_readonly(tmp_path / "out" / "runs.sqlite") as store:
        records = store.latest_records()
    stored = {i: (ok, error, *inputs, *values) for i, ok, error, inputs, values in zip(
        records.ids.tolist(), records.ok.tolist(), records.errors, records.inputs.tolist(),
        records.values.tolist())}
    assert len(table) == len(stored) == 300
    for row in table:
        ok, error, a, b, y, gap = stored[int(row["run.id"])]
        assert (row["run.status"], row["run.error"] or None) == ("ok" if ok else "failed", error)
        assert float(row["a"]) == a and float(row["b"]) == b  # shortest round-trip text
        assert (row["y"] == "") == np.isnan(y) == (not ok)
        if ok:
            assert float(row["y"]) == y and float(row["gap"]) == gap
    failed = [r for r in table if r["run.status"] == "failed"]
    assert failed and all(r["run.error"].startswith('ValueError: a is "too large", sorry\nsecond line')
                          for r in failed)
    assert result.runs["y"].isna().sum() == len(failed) == result.analysis["runs"]["failed"]


def row_per_run_store(path) -> None:
    """A run store as development versions of studyrun wrote it (format 2: a row per run)."""
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("format", '"2"'), ("parameters", '["a", "b"]'), ("quantities", '["y", "gap"]')])
        db.execute("CREATE TABLE runs (seq INTEGER PRIMARY KEY, id INTEGER, status TEXT NOT NULL, "
                   "error TEXT, duration REAL, worker TEXT, a REAL, b REAL, y REAL, gap REAL)")
        db.execute("INSERT INTO runs (id, status, duration, worker, a, b, y, gap) "
                   "VALUES (7, 'ok', 0.1, 'w', 0.5, 0.25, 0.75, 0.25)")


def dump(path) -> list[str]:
    with closing(sqlite3.connect(path)) as db:
        return list(db.iterdump())


@pytest.mark.parametrize("layout", ["row per run", "npz series"])
def test_a_store_of_another_layout_is_refused_in_one_line(moody, tmp_path, layout):
    """A store of a layout this studyrun does not write (no release wrote one) is left as it is:
    run, report and status say so in one line and what to do; --fresh and --out start over."""
    out = tmp_path / "out"
    studyrun.run(moody, out, quiet=True, report=False)
    if layout == "row per run":
        (out / "runs.sqlite").unlink()
        row_per_run_store(out / "runs.sqlite")
    else:  # format 3, its series as an npz per run in `series (id, data)`
        with closing(sqlite3.connect(out / "runs.sqlite")) as db, db:
            db.execute("CREATE TABLE series (id INTEGER PRIMARY KEY, data BLOB)")
    before = dump(out / "runs.sqlite")
    for path in (RunStore.open, RunStore.open_readonly):
        with pytest.raises(StoreError, match="another layout"):
            path(out / "runs.sqlite")
    for args in (("run", moody, "--out", out, "--quiet"), ("status", out), ("report", out)):
        result = run_cli(*args, cwd=tmp_path)
        assert result.returncode != 0 and "Traceback" not in result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "another layout" in lines[0] and "--out DIR" in lines[0], lines
    assert dump(out / "runs.sqlite") == before  # (in WAL mode now: its rows unchanged)
    assert run_cli("run", moody, "--out", out, "--quiet", "--fresh", "--no-report",
                   cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_runs_recorded_in_one_session_are_found_in_the_next(tmp_path):
    from studyrun.store.run_store import Batch, RunStore

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


# --- RunStore on its own: real SQLite files in tmp_path ---------------------------------------

def batch(ids, *, ok=None, errors=None, inputs=None, values=None, duration=0.5, worker="w1",
          series=None):
    """A Batch of runs over parameters (a, b) and quantities (y, z), derived from the ids."""
    from studyrun.store.run_store import Batch

    ids = np.asarray(ids, dtype=np.int64)
    ok = np.ones(len(ids), bool) if ok is None else np.asarray(ok, dtype=bool)
    if inputs is None:
        inputs = np.c_[ids * 1.0, ids * -0.5]
    if values is None:
        values = np.where(ok[:, None], np.c_[ids * 2.0, ids + 0.25], np.nan)
    if errors is None:
        errors = [None if good else f"ValueError: run {i} failed" for i, good in zip(ids, ok)]
    return Batch(ids=ids, ok=ok, errors=errors, inputs=inputs, values=values, duration=duration,
                 worker=worker, series=series)


def prepared(path):
    """A store of parameters (a, b) and quantities (y, z), open."""
    from studyrun.store.run_store import RunStore

    store = RunStore.open(path)
    store.prepare(["a", "b"], ["y", "z"])
    return store


def test_open_creates_the_store_and_holds_its_lock_until_closed(tmp_path):
    from studyrun.store.run_store import RunStore

    path = tmp_path / "deep" / "folder" / "runs.sqlite"
    store = RunStore.open(path)
    assert path.is_file()
    lock = path.with_name("runs.sqlite.lock")
    assert lock.read_text() == f"pid {os.getpid()}"  # `studyrun status` names the holder
    store.close()
    assert lock.read_text() == ""
    with RunStore.open(path) as again:  # released: it opens again
        assert again.parameters == [] and again.meta("format") is None


def test_open_where_the_folder_cannot_be_made_is_a_store_error(tmp_path):
    from studyrun.store.run_store import RunStore, StoreError

    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(StoreError, match="cannot write the results folder"):
        RunStore.open(tmp_path / "file" / "runs.sqlite")


HOLDER = """
import sys
from studyrun.store.run_store import RunStore

store = RunStore.open(sys.argv[1])
print("holding", flush=True)
sys.stdin.read()  # until the test closes our stdin or kills us
store.close()
"""


def start_python(script: str, *args) -> subprocess.Popen:
    """A real Python process running `script` with this checkout's studyrun."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_a_store_open_in_another_process_is_refused_until_that_process_ends(tmp_path):
    from studyrun.store.run_store import RunStore, StoreError

    path = tmp_path / "runs.sqlite"
    holder = start_python(HOLDER, path)
    try:
        assert holder.stdout.readline() == "holding\n", holder.stderr.read()
        with pytest.raises(StoreError, match=f"another studyrun \\(pid {holder.pid}\\)"):
            RunStore.open(path)
        with pytest.raises(StoreError):
            RunStore.open(path, fresh=True)  # the lock comes before anything is deleted
        assert path.is_file()
    finally:
        holder.kill()  # SIGKILL: the operating system releases the lock, not the holder
        holder.wait(10)
    with RunStore.open(path) as store:
        assert store.meta("format") is None


@pytest.mark.slow
def test_a_store_held_here_is_refused_to_another_process(tmp_path):
    path = tmp_path / "runs.sqlite"
    prepared(path).close()
    script = ("import sys\nfrom studyrun.store.run_store import RunStore, StoreError\n"
              "try:\n    RunStore.open(sys.argv[1])\nexcept StoreError as e:\n    print(e)\n"
              "else:\n    print('opened')\n")
    with prepared(path):
        child = start_python(script, path)
        out, err = child.communicate(timeout=60)
        assert f"another studyrun (pid {os.getpid()})" in out, err
    child = start_python(script, path)
    assert child.communicate(timeout=60)[0] == "opened\n"


def test_fresh_deletes_the_runs_of_before(tmp_path):
    from studyrun.store.run_store import RunStore

    with prepared(tmp_path / "runs.sqlite") as store:
        store.write(batch([1, 2, 3]))
    with RunStore.open(tmp_path / "runs.sqlite", fresh=True) as store:
        assert store.meta("format") is None and store.parameters == []
        store.prepare(["c"], ["w"])
        assert not store.succeeded_among(np.array([1, 2, 3])).any()


def test_prepare_records_the_columns_and_check_refuses_another_study(tmp_path):
    from studyrun.store.run_store import RunStore, StoreError

    path = tmp_path / "runs.sqlite"
    with RunStore.open(path) as store:
        store.check(["anything"], None)  # an empty store holds no study yet
        store.prepare(["a", "b"], ["y", "z"])
        store.prepare(["a", "b"], ["y", "z"])  # the same study again: nothing to do
    with RunStore.open(path) as store:
        assert (store.parameters, store.quantities) == (["a", "b"], ["y", "z"])
        store.check(["a", "b"], ["y", "z"])
        store.check(["a", "b"], None)  # quantities not known yet (named by the model's outputs)
        for parameters, quantities in [(["b", "a"], ["y", "z"]), (["a"], ["y", "z"]),
                                       (["a", "b"], ["y"]), (["a", "b"], ["z", "y"])]:
            with pytest.raises(StoreError, match="holds runs of a study with parameters") as error:
                store.check(parameters, quantities)
            assert "--fresh" in str(error.value)
        with pytest.raises(StoreError):
            store.check(["c", "b"], None)
        with pytest.raises(StoreError):
            store.prepare(["a", "b"], ["y", "w"])
        assert (store.parameters, store.quantities) == (["a", "b"], ["y", "z"])


def test_names_that_clash_in_sqlite_are_written_and_read_back_apart(tmp_path):
    from studyrun.store.run_store import Batch, RunStore

    path = tmp_path / "runs.sqlite"
    with RunStore.open(path) as store:
        store.prepare(["k", "K", "ID"], ["Duration", "seq"])
        store.write(Batch(ids=np.array([5]), ok=np.array([True]), errors=[None],
                          inputs=np.array([[1.0, 2.0, 3.0]]), values=np.array([[4.0, 5.0]]),
                          duration=9.0, worker="w"))
    with RunStore.open(path) as store:
        table = store.read(np.array([5]))
        assert table.inputs.tolist() == [[1.0, 2.0, 3.0]] and table.values.tolist() == [[4.0, 5.0]]
        assert table.duration.tolist() == [9.0]


def test_a_batch_is_read_back_in_the_order_asked_with_absent_runs_not_found(tmp_path):
    with prepared(tmp_path / "runs.sqlite") as store:
        ids = np.array([40, -7, 2**62, 13, -2**63], dtype=np.int64)
        store.write(batch(ids, duration=0.25, worker="tcp://10.0.0.1:9000"))
        store.write(batch([8, 9], duration=1.5, worker="w2"))
        asked = np.array([13, 99, -2**63, 9, 40, -1, 2**62, -7, 8], dtype=np.int64)
        table = store.read(asked)
        present = np.isin(asked, [40, -7, 2**62, 13, -2**63, 8, 9])
        assert table.ids.dtype == np.int64 and (table.ids == asked).all()
        assert (table.found == present).all() and (table.ok == present).all()
        expected_inputs = np.c_[asked * 1.0, asked * -0.5]
        assert (table.inputs[present] == expected_inputs[present]).all()
        assert np.isnan(table.inputs[~present]).all()  # absent: no stored inputs
        assert (table.values[present] == np.c_[asked * 2.0, asked + 0.25][present]).all()
        assert np.isnan(table.values[~present]).all()
        assert table.errors.tolist() == [None] * len(asked)
        assert table.duration[present].tolist() == [0.25, 0.25, 1.5, 0.25, 0.25, 0.25, 1.5]
        assert np.isnan(table.duration[~present]).all()
        assert table.worker.tolist() == ["tcp://10.0.0.1:9000", None, "tcp://10.0.0.1:9000",
                                         "w2", "tcp://10.0.0.1:9000", None,
                                         "tcp://10.0.0.1:9000", "tcp://10.0.0.1:9000", "w2"]
        given = np.arange(len(asked) * 2, dtype=float).reshape(-1, 2)
        assert (store.read(asked, inputs=given).inputs == given).all()  # the plan's own inputs
        assert len(store.read(np.zeros(0, np.int64))) == 0
        assert store.counts() == {"ok": 7}


def test_a_failed_run_keeps_its_error_and_gives_way_when_run_again(tmp_path):
    path = tmp_path / "runs.sqlite"
    error = 'KeyError: "x", line 1\nline 2, ü, \x00 and ,;'
    with prepared(path) as store:
        store.write(batch([1, 2, 3], ok=[True, False, False],
                          errors=[None, error, "ValueError: three"]))
        table = store.read(np.array([2, 1, 3]))
        assert table.found.all() and table.ok.tolist() == [False, True, False]
        assert table.errors.tolist() == [error, None, "ValueError: three"]
        assert np.isnan(table.values[[0, 2]]).all() and table.inputs[0].tolist() == [2.0, -1.0]
        assert store.counts() == {"ok": 1, "failed": 2}
        store.write(batch([2], ok=[False], errors=["RuntimeError: again"]))  # fails again
        assert store.read(np.array([2])).errors.tolist() == ["RuntimeError: again"]
        assert store.counts() == {"ok": 1, "failed": 2}
    with prepared(path) as store:  # the failures are found again after a reopen
        store.write(batch([2, 3, 4]))
        assert store.counts() == {"ok": 4}
        table = store.read(np.array([1, 2, 3, 4]))
        assert table.ok.all() and table.errors.tolist() == [None] * 4
        assert store.recorded()[0].tolist() == [1, 2, 3, 4]


def packed(ids, time, **series):
    """The blocks a batch of these runs sends back: series (runs, T) on one grid."""
    from studyrun.core.batch import ModelOutput
    from studyrun.store.series import pack

    ids = np.asarray(ids, dtype=np.int64)
    return pack(ModelOutput(len(ids), series=series, time=time), ids)


def test_series_are_kept_per_batch_and_read_back(tmp_path):
    t = np.linspace(0, 1, 11)
    with prepared(tmp_path / "runs.sqlite") as store:
        store.write(batch([1, 2], series=packed([1, 2], t, x=np.array([t**2, t**3]))))
        store.write(batch([3]))  # a batch that keeps no series
        first, second, third, absent = store.series_reader().read([1, 2, 3, 99])
        assert sorted(first) == ["time", "x"]
        assert (first["time"] == t).all() and (first["x"] == t**2).all()
        assert (second["x"] == t**3).all()
        assert third is None and absent is None
        store.write(batch([1], series=packed([1], t, x=-t[None])))  # run again: the new series
        assert (store.series_reader().read(np.array([1]))[0]["x"] == -t).all()
        assert (store.series_reader().read([2])[0]["x"] == t**3).all()


def test_succeeded_among_answers_in_the_order_asked(tmp_path):
    path = tmp_path / "runs.sqlite"
    with prepared(path) as store:
        assert not store.succeeded_among(np.array([1, 2])).any()
        store.write(batch([1, 2, 3], ok=[True, False, True]))
        asked = np.array([3, 4, 2, 1, 1, 3])
        assert store.succeeded_among(asked).tolist() == [True, False, False, True, True, True]
        store.write(batch([2]))
        assert store.succeeded_among(asked).tolist() == [True, False, True, True, True, True]
    with prepared(path) as store:
        assert store.succeeded_among(np.array([2, 4, 1])).tolist() == [True, False, True]
        assert store.succeeded_among(np.zeros(0, np.int64)).tolist() == []


def test_runs_are_read_by_their_records_in_the_order_asked(tmp_path):
    with prepared(tmp_path / "runs.sqlite") as store:
        store.write(batch([10, 11, 12]))
        store.write(batch([13, 11], ok=[True, False], duration=0.25, worker="w2"))
        plan = np.array([13, 99, 11, 10, 12, 98, 10], dtype=np.int64)  # 99, 98: not run yet
        seqs, ok = store.locate(plan)
        assert seqs.tolist() == [4, 0, 5, 1, 3, 0, 1]  # 11's latest record: its failure
        table = store.read_seqs(seqs)
        recorded = seqs > 0
        assert (table.found == recorded).all() and (table.ok == ok).all()
        assert (table.ids[recorded] == plan[recorded]).all()
        assert (table.inputs[recorded, 1] == -0.5 * plan[recorded]).all()
        assert np.isnan(table.inputs[~recorded]).all() and np.isnan(table.values[~recorded]).all()
        assert table.errors.tolist()[2] == "ValueError: run 11 failed"
        assert table.worker.tolist() == ["w2", None, "w2", "w1", "w1", None, "w1"]
        assert table.duration[recorded].tolist() == [0.25, 0.25, 0.5, 0.5, 0.5]
        whole = store.read_seqs(np.array([4, 5, 1, 2, 3]))  # each record whole, in its order
        assert whole.ids.tolist() == [13, 11, 10, 11, 12] and whole.found.all()
        assert whole.ok.tolist() == [True, False, True, True, True]
        assert whole.errors.tolist() == [None, "ValueError: run 11 failed", None, None, None]
        assert whole.inputs[:, 1].tolist() == [-6.5, -5.5, -5.0, -5.5, -6.0]


def test_runs_of_many_parameters_are_recorded_in_records_of_bounded_size(tmp_path, monkeypatch):
    import studyrun.store.run_store
    from studyrun.store.run_store import Batch, RunStore

    monkeypatch.setattr(studyrun.store.run_store, "RECORD_BYTES", 8 * 1000 * 7)  # 7 runs per record
    rng = np.random.default_rng(3)
    ids, inputs = np.arange(50, dtype=np.int64), rng.normal(size=(50, 999))
    with RunStore.open(tmp_path / "runs.sqlite") as store:
        store.prepare([f"x{j}" for j in range(999)], ["y"])
        store.write(Batch(ids=ids, ok=ids % 9 > 0, errors=[None if i % 9 else f"e{i}" for i in ids],
                          inputs=inputs, values=inputs.sum(axis=1)[:, None], duration=0.1, worker="w"))
        assert store.db.execute("SELECT count(*), sum(size) FROM batches").fetchone() == (8, 50)
    with RunStore.open_readonly(tmp_path / "runs.sqlite") as store:
        order = rng.permutation(50)
        table = store.read(ids[order])
        assert np.array_equal(table.inputs, inputs[order])
        assert np.array_equal(table.values[:, 0], inputs[order].sum(axis=1))
        assert table.errors.tolist() == [None if i % 9 else f"e{i}" for i in order.tolist()]


def test_the_latest_identity_is_the_last_recorded(tmp_path):
    from studyrun.store.run_store import RunStore, connect_readonly, latest_identity

    path = tmp_path / "runs.sqlite"
    with RunStore.open(path) as store:
        assert latest_identity(store.db) is None  # a store that never recorded one
        store.record_identity({"code": "abc", "model": {"type": "python"}})
        store.record_identity({"code": "def", "model": {"type": "python"}})
        assert latest_identity(store.db) == {"code": "def", "model": {"type": "python"}}
        store.record_identity({"model": {"type": "python"}, "code": "abc"})  # back to the first
        assert latest_identity(store.db) == {"code": "abc", "model": {"type": "python"}}
        assert store.db.execute("SELECT count(*) FROM identities").fetchone()[0] == 2
    with closing(connect_readonly(path)) as db:
        assert latest_identity(db) == {"code": "abc", "model": {"type": "python"}}


def test_a_read_only_connection_sees_committed_runs_while_the_store_is_held(tmp_path):
    from studyrun.store.run_store import RunStore, StoreError, connect_readonly

    path = tmp_path / "runs.sqlite"
    with pytest.raises(StoreError, match="no runs.sqlite here"):
        connect_readonly(path)
    with prepared(path) as store:
        store.write(batch([1, 2], ok=[True, False]))
        with closing(connect_readonly(path)) as db:
            assert db.execute("SELECT sum(size) FROM batches").fetchone()[0] == 2
            store.write(batch([3]))  # a later commit is seen by the next read
            assert db.execute("SELECT sum(size) FROM batches").fetchone()[0] == 3
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                db.execute("DELETE FROM batches")
        reader = RunStore.open_readonly(path)  # no lock: the store is in use
        try:
            assert (reader.parameters, reader.quantities) == (["a", "b"], ["y", "z"])
            table = reader.read(np.array([3, 2, 1, 4]))
            assert table.found.tolist() == [True, True, True, False]
            assert table.ok.tolist() == [True, False, True, False]
        finally:
            reader.close()
        store.write(batch([4]))  # the reader took no lock and left none
    assert path.with_name("runs.sqlite.lock").read_text() == ""


def test_a_file_that_is_no_store_is_refused(tmp_path):
    from studyrun.store.run_store import RunStore, StoreError

    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"this is not an SQLite database, " * 200)
    with pytest.raises(StoreError, match="corrupted or not a run store"):
        RunStore.open(path)
    with pytest.raises(StoreError, match="corrupted or not a run store"):
        RunStore.open_readonly(path)
    assert path.read_bytes().startswith(b"this is not")  # left as it was


WRITER = """
import sys
import numpy as np
from studyrun.store.run_store import Batch, RunStore

store = RunStore.open(sys.argv[1])
store.prepare(["a", "b"], ["y"])
size = int(sys.argv[2])
for k in range(100000):
    ids = np.arange(k * size, (k + 1) * size, dtype=np.int64)
    ok = ids % 7 != 0
    store.write(Batch(ids=ids, ok=ok, errors=[None if good else f"run {i} failed"
                                              for i, good in zip(ids.tolist(), ok)],
                      inputs=np.c_[ids * 1.0, ids * -1.0],
                      values=np.where(ok, ids * 0.5, np.nan)[:, None],
                      duration=0.1, worker=f"batch {k}"))
    print(k, flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.013, 0.037])
def test_every_batch_committed_before_a_sigkill_is_there_after_a_reopen(tmp_path, delay):
    from studyrun.store.run_store import Batch, RunStore

    path, size = tmp_path / "runs.sqlite", 20_000
    writer = start_python(WRITER, path, size)
    reported = []
    try:
        while len(reported) < 4:
            line = writer.stdout.readline()
            assert line, writer.stderr.read()
            reported.append(int(line))
        time.sleep(delay)  # somewhere within the next batch's write
        writer.send_signal(signal.SIGKILL)
        writer.wait(10)
    finally:
        writer.kill()
    reported += [int(line) for line in writer.stdout.read().split()]
    assert reported == list(range(len(reported)))
    with RunStore.open(path) as store:  # the writer's lock went with it; the store checks intact
        workers = [row[0] for row in store.db.execute("SELECT DISTINCT worker FROM batches")]
        batches = len(workers)
        assert sorted(workers) == sorted(f"batch {k}" for k in range(batches))
        assert batches in (len(reported), len(reported) + 1)  # the last may commit unreported
        assert store.counts() == {"ok": sum(i % 7 != 0 for i in range(batches * size)),
                                  "failed": sum(i % 7 == 0 for i in range(batches * size))}
        ids = np.arange((batches + 1) * size, dtype=np.int64)
        table = store.read(ids)
        done = ids < batches * size
        assert (table.found == done).all()
        assert (table.ok == (done & (ids % 7 != 0))).all()
        assert (table.values[table.ok, 0] == ids[table.ok] * 0.5).all()
        assert (table.inputs[done, 1] == -ids[done]).all()
        assert table.errors[done & ~table.ok].tolist() == [
            f"run {i} failed" for i in ids[done & ~table.ok].tolist()]
        more = np.array([-1, -2], dtype=np.int64)  # and it takes more runs
        store.write(Batch(ids=more, ok=np.array([True, True]), errors=[None, None],
                          inputs=np.zeros((2, 2)), values=np.ones((2, 1)), duration=0, worker="w"))
        assert store.succeeded_among(more).all()


def test_adopt_copies_only_the_succeeded_runs_asked_for_exactly(tmp_path):
    from studyrun.store.run_store import RunStore

    with prepared(tmp_path / "earlier.sqlite") as earlier:
        earlier.write(batch([1, 2, 3, 4], ok=[True, True, False, True], duration=0.25,
                            inputs=np.c_[[0.1, 0.2, 0.3, 0.4], [1 / 3, 2 / 3, 1.0, 4 / 3]],
                            series=packed([1, 2, 3, 4], np.arange(3.0), y=np.eye(4, 3))))
    with RunStore.open(tmp_path / "new.sqlite") as store, \
            RunStore.open_readonly(tmp_path / "earlier.sqlite") as source:
        assert store.adopt(source, np.array([2, 3, 4, 9])) == 2  # 3 failed, 9 was never made
        assert store.adopt(source, np.array([2, 4])) == 0  # held already
        assert (store.parameters, store.quantities) == (["a", "b"], ["y", "z"])
        assert store.succeeded_among(np.array([1, 2, 3, 4])).tolist() == [False, True, False, True]
        copied, original = store.read(np.array([2, 4])), source.read(np.array([2, 4]))
        for name in ("ids", "ok", "inputs", "values", "duration", "worker"):
            np.testing.assert_array_equal(getattr(copied, name), getattr(original, name))
        two, three, four = store.series_reader().read([2, 3, 4])
        assert three is None  # not copied: it failed
        assert two["y"].tolist() == [0, 1, 0] and four["y"].tolist() == [0, 0, 0]
        assert two["time"].tolist() == [0, 1, 2]


def test_adopt_copies_nothing_into_a_store_of_other_quantities(tmp_path):
    from studyrun.store.run_store import RunStore

    with prepared(tmp_path / "earlier.sqlite") as earlier:
        earlier.write(batch([1, 2]))
    with RunStore.open(tmp_path / "new.sqlite") as store, \
            RunStore.open_readonly(tmp_path / "earlier.sqlite") as source:
        store.prepare(["a", "b"], ["y"])
        assert store.adopt(source, np.array([1, 2])) == 0
        assert not store.succeeded_among(np.array([1, 2])).any()


def test_runs_csv_is_kept_when_its_records_are_unchanged_and_written_again_otherwise(moody, tmp_path):
    (tmp_path / "broken").write_text("")
    out = tmp_path / "out"
    studyrun.run(moody, out, quiet=True, report=False)
    path = out / "runs.csv"
    written = path.stat().st_mtime_ns
    studyrun.run(moody, out, quiet=True, report=False)  # the failures fail again: new records, a new file
    assert path.stat().st_mtime_ns != written and len(rows(path)) == 300
    (tmp_path / "broken").unlink()
    studyrun.run(moody, out, quiet=True, report=False)
    kept, text = path.stat().st_mtime_ns, path.read_text()
    assert "failed" not in text
    studyrun.run(moody, out, quiet=True, report=False)  # every run reused: the same records, the file kept
    assert path.stat().st_mtime_ns == kept
    path.write_text(text.replace("ok", "OK", 1))  # edited by hand: written again
    studyrun.run(moody, out, quiet=True, report=False)
    assert path.read_text() == text
    path.unlink()  # removed: written again
    studyrun.run(moody, out, quiet=True, report=False)
    assert path.read_text() == text


def test_given_runs_are_where_record_given_says_the_store_recorded_them(tmp_path):
    """record_given answers where each given run is recorded (and whether it succeeded) without
    locating them again: its answer is the store's, runs reused, failed and new alike."""
    from studyrun.core.design import Design
    from studyrun.execution.execute import record_given
    from studyrun.plan import Plan

    with prepared(tmp_path / "runs.sqlite") as store:
        store.write(batch([10, 11]))  # 10, 11: succeeded before; 12: failed before; 13, 14: new
        store.write(batch([12], ok=[False]))
        ids = np.array([13, 10, 12, 14, 11], dtype=np.int64)
        plan = Plan(Design(["a", "b"], np.c_[ids * 1.0, ids * 2.0]), {}, ids)
        errors = [None, None, None, "ValueError: 14 failed", None]
        values = {"y": ids * 3.0, "z": ids * 4.0}
        counts, (seqs, ok) = record_given(store, plan, values, errors)
        assert counts.reused == 2 and counts.failed == 1
        assert ok.tolist() == [True, True, True, False, True]
        store.release_index()
        assert (seqs.tolist(), ok.tolist()) == tuple(a.tolist() for a in store.locate(ids))
        table = store.read_seqs(seqs)
        assert table.ids.tolist() == ids.tolist() and table.errors.tolist()[3] == errors[3]


def test_errors_are_made_encodable_without_changing_the_callers_array():
    """Only failed runs' errors are escaped, in a copy; `objects` keeps each item as it is."""
    from studyrun.core.runtable import objects
    from studyrun.store.run_store import encodable_errors

    given = objects([None, "bad \udcff byte", None, "fine"])
    made = encodable_errors(given)
    assert made.tolist() == [None, "bad \\udcff byte", None, "fine"]
    assert given[1] == "bad \udcff byte"  # the caller's array as it was
    clean = objects([None] * 3)
    assert encodable_errors(clean) is clean
    assert objects([("a", 1), ["b", "c"], None]).tolist() == [("a", 1), ["b", "c"], None]
