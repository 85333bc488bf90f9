"""runs.parquet and series.parquet (`execution.export: [parquet]`): the runs with typed columns,
through pyarrow (the optional extra `studyrun[parquet]`).

runs.parquet has runs.csv's columns: run.index and run.id as int64, run.status, run.error and
run.worker as text, run.duration and every parameter and quantity as float64, null where runs.csv leaves a field empty;
a row group per chunk of the plan. series.parquet holds the series kept in the store in long
form: run, id, output, time, value, a row per point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from studyrun.core.runtable import CSV_FIXED, RunTable
from studyrun.results.outputs import replacing

PARQUET_FORMAT = 2  # the layout of runs.parquet: a file written by another layout is written again
# (2: runs.csv's own columns named `run.index`, `run.id`, ...)


def write_parquet(path: Path, parameters: list[str], quantities: list[str],
                  tables: Iterable[tuple[int, RunTable]]) -> None:
    """runs.parquet: one row per recorded run, `run.index` being its position in the plan; written
    whole or not at all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = runs_schema(parameters, quantities)
    with replacing(path) as temporary, pq.ParquetWriter(temporary, schema) as writer:
        for start, table in tables:
            kept = np.flatnonzero(table.found)
            writer.write_table(pa.Table.from_arrays(runs_columns(start, table, kept), schema=schema))


def runs_schema(parameters: list[str], quantities: list[str]):
    import pyarrow as pa

    types = [pa.int64(), pa.int64(), pa.string(), pa.string(), pa.float64(), pa.string()]
    return pa.schema(list(zip(CSV_FIXED, types))
                     + [(name, pa.float64()) for name in (*parameters, *quantities)])


def runs_columns(start: int, table: RunTable, kept: np.ndarray) -> list:
    import pyarrow as pa

    def floats(values: np.ndarray):
        return pa.array(values, type=pa.float64(), mask=np.isnan(values))

    return [pa.array(kept + start, type=pa.int64()), pa.array(table.ids[kept], type=pa.int64()),
            pa.array(np.where(table.ok[kept], "ok", "failed"), type=pa.string()),
            pa.array(table.errors[kept].tolist(), type=pa.string()),
            floats(table.duration[kept].astype(float)),
            pa.array([None if w is None else str(w) for w in table.worker[kept].tolist()],
                     type=pa.string()),
            *(floats(column) for column in table.inputs[kept].T),
            *(floats(column) for column in table.values[kept].T)]


def write_series_parquet(path: Path, run_ids: np.ndarray, reader) -> int:
    """series.parquet of the planned runs whose series the store keeps (their `run` is the
    position in the plan), a row group per 1,024 runs; the number of runs written. No file
    (and none left from before) when the store keeps no series of these runs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_ids = np.asarray(run_ids, dtype=np.int64)
    positions = np.flatnonzero(reader.locate(run_ids)[2])
    if not len(positions):
        Path(path).unlink(missing_ok=True)
        return 0
    schema = pa.schema([("run", pa.int64()), ("id", pa.int64()), ("output", pa.string()),
                        ("time", pa.float64()), ("value", pa.float64())])
    with replacing(path) as temporary, pq.ParquetWriter(temporary, schema) as writer:
        for first in range(0, len(positions), 1024):
            at = positions[first:first + 1024]
            columns: dict[str, list] = {name: [] for name in schema.names}
            for run, stored in zip(at.tolist(), reader.read(run_ids[at])):
                time = np.asarray(stored["time"], dtype=float)
                for output in sorted(k for k in stored if k != "time"):
                    columns["run"].append(np.full(len(time), run, np.int64))
                    columns["id"].append(np.full(len(time), run_ids[run], np.int64))
                    columns["output"].append(np.full(len(time), output, object))
                    columns["time"].append(time)
                    columns["value"].append(np.asarray(stored[output], dtype=float))
            value = np.concatenate(columns.pop("value"))
            arrays = [pa.array(np.concatenate(columns[n]), type=schema.field(n).type)
                      for n in ("run", "id", "output", "time")]
            writer.write_table(pa.Table.from_arrays(
                arrays + [pa.array(value, mask=np.isnan(value))], schema=schema))
    return len(positions)
