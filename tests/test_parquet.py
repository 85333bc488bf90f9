"""execution.export: runs.parquet with typed columns, series.parquet in long form, the exports
not asked for removed, open_results reading whichever exists, and a clear error without pyarrow."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas
import pytest
from conftest import STUDIES, run_cli, write_study

import studyrun
from studyrun.store.run_store import RunStore

LOGISTIC = (STUDIES / "logistic-montecarlo.yaml").read_text().replace(
    "models/logistic.yaml", str(STUDIES / "models" / "logistic.yaml")).replace(
    "samples: 2000", "samples: 300")


def logistic(folder, execution: str):
    return write_study(folder, LOGISTIC + f"execution: {execution}\n")


@pytest.mark.slow
def test_runs_parquet_holds_runs_csv_with_typed_columns(tmp_path):
    path = logistic(tmp_path, "{scheduler: sync, export: [csv, parquet]}")
    result = studyrun.run(path, tmp_path / "out", report=False)
    frame = pandas.read_parquet(tmp_path / "out" / "runs.parquet")
    csv = pandas.read_csv(tmp_path / "out" / "runs.csv", keep_default_na=False, na_values=[""],
                          dtype={"run.error": object, "run.worker": object})
    assert list(frame.columns) == list(csv.columns)
    assert str(frame["run.index"].dtype) == str(frame["run.id"].dtype) == "int64"
    assert frame["rate"].dtype == frame["final_population"].dtype == np.float64
    for column in csv.columns:  # the same values, bit for bit, nulls where csv is empty
        left, right = frame[column].to_numpy(), csv[column].to_numpy()
        if left.dtype.kind == "f":
            np.testing.assert_array_equal(left, right)
        else:
            assert [None if v is None or v != v else v for v in left] == \
                [None if v is None or v != v else v for v in right], column
    pandas.testing.assert_frame_equal(result.runs, studyrun.open_results(tmp_path / "out").runs)
    assert not (tmp_path / "out" / "series.parquet").exists()  # no series kept


@pytest.mark.slow
def test_kept_series_export_in_long_form_equal_to_the_store(tmp_path):
    path = logistic(tmp_path, "{scheduler: sync, keep: series, export: [parquet]}")
    result = studyrun.run(path, tmp_path / "out", report=False)
    assert not (tmp_path / "out" / "runs.csv").exists()
    series = result.series
    assert list(series.columns) == ["run", "id", "output", "time", "value"]
    assert set(series["output"]) == {"population", "growth"}
    runs = result.runs
    assert len(runs) == 300 and runs["run.status"].eq("ok").all()
    with RunStore.open_readonly(tmp_path / "out" / "runs.sqlite") as store:
        stored = store.series_reader().read(runs["run.id"].to_numpy()[:3])
    for i, kept in enumerate(stored):
        one = series[(series["run"] == i) & (series["output"] == "population")]
        np.testing.assert_array_equal(one["time"].to_numpy(), kept["time"])
        np.testing.assert_array_equal(one["value"].to_numpy(), kept["population"])
        assert (one["id"] == runs["run.id"][i]).all()


@pytest.mark.slow
def test_an_export_no_longer_asked_for_is_removed_and_open_results_reads_the_other(tmp_path):
    out = tmp_path / "out"
    first = studyrun.run(logistic(tmp_path, "{scheduler: sync, export: [parquet]}"), out, report=False)
    assert (out / "runs.parquet").exists() and not (out / "runs.csv").exists()
    again = studyrun.run(logistic(tmp_path, "{scheduler: sync}"), out, report=False)  # csv, the default
    assert (out / "runs.csv").exists() and not (out / "runs.parquet").exists()
    assert again.analysis["runs"]["reused"] == 300
    columns = ["run.index", "run.id", "rate", "capacity", "final_population"]
    pandas.testing.assert_frame_equal(first.runs[columns], studyrun.open_results(out).runs[columns])


def test_parquet_without_pyarrow_is_a_located_error(tmp_path):
    """pyarrow hidden from the import system: validate says what to install, at the key."""
    path = logistic(tmp_path, "{export: [csv, parquet]}")
    code = ("import sys, runpy\n"
            "sys.modules['pyarrow'] = None  # import pyarrow raises ImportError\n"
            f"sys.argv = ['studyrun', 'validate', {str(path)!r}]\n"
            "runpy.run_module('studyrun', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{path}:" in done.stderr and "execution.export: " in done.stderr
    assert "pip install 'studyrun[parquet]'" in done.stderr


@pytest.mark.slow
def test_the_example_study_exports_parquet_from_the_command_line(tmp_path):
    done = run_cli("run", "--no-report", STUDIES / "sales-force-montecarlo.yaml", "--out", tmp_path, "--quiet",
                   "--scheduler", "threads")
    assert done.returncode == 0, done.stderr
    results = studyrun.open_results(tmp_path)
    runs, series = results.runs, results.series
    assert len(runs) == 500 and runs["run.status"].eq("ok").all()
    assert set(series["output"]) >= {"sales_force", "new_hires"}
    final = series[series["output"] == "sales_force"].groupby("run")["value"].last()
    np.testing.assert_array_equal(final.to_numpy(), runs["final_sales_force"].to_numpy())
