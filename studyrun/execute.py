"""The execute step: send a plan's unfinished runs to an executor in batches, record each batch.

A short pilot in this process times the model; the batch size follows from it, and a study that
would finish before a cluster could start never starts one. Every finished batch is committed to
the store as it arrives, so a killed study loses at most the batches in flight.
"""

from __future__ import annotations

import io
import math
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .errors import ExecutionError
from .executors import (SyncExecutor, planned_workers, probe_scheduler, scheduler_name,
                        scheduler_problem, start_executor, starts_a_cluster)
from .models.base import Evaluator, ModelOutput, RunContext
from .models.python import describe
from .plan import Plan
from .progress import Progress
from .quantities import Quantities
from .runtable import RunTable
from .store import Batch, RunStore

Sink = Callable[[np.ndarray, RunTable], None]  # (plan rows, their records), as batches finish

PILOT_SECONDS = 0.25  # time spent timing the model in-process before choosing a batch size
CLUSTER_STARTUP_SECONDS = 3.0  # what starting a LocalCluster costs here
TASK_SECONDS = 0.5  # target duration of one batch on a worker
MAX_BATCH = 1 << 18  # runs per batch at most, to bound a worker's memory


@dataclass(frozen=True)
class Job:
    """What every batch of a study needs on a worker: the model, the quantities, where to work."""

    evaluator: Evaluator
    quantities: Quantities
    workdir: str | None = None
    keep_series: bool = False
    retries: int = 0


@dataclass
class Settings:
    """How to execute: the `execution` block after command-line overrides."""

    scheduler: object = "local"  # a name, an address or a clusters.Cluster block
    workers: int | None = None
    batch_size: int | str = "auto"
    retries: int = 0
    on_failure: str = "abort"
    quiet: bool = False


@dataclass
class Counts:
    """What the execute step did, for analysis.json's `runs`."""

    planned: int = 0
    reused: int = 0
    executed: int = 0
    failed: int = 0
    scheduler: str = "none"
    batch_size: int = 0
    notes: list[str] = field(default_factory=list)


def run_batch(job: Job, inputs: dict[str, np.ndarray], run_ids: np.ndarray) -> dict:
    """Evaluate one batch where it runs: model, quantities, retries of failed runs."""
    start = time.perf_counter()
    out = evaluate_model(job, inputs, run_ids)
    values = job.quantities.evaluate(out, inputs)
    series = pack_series(out) if job.keep_series else None
    for _ in range(job.retries):
        failed = np.flatnonzero([e is not None for e in out.errors])
        if not len(failed):
            break
        sub_inputs = {k: v[failed] for k, v in inputs.items()}
        again = evaluate_model(job, sub_inputs, run_ids[failed])
        again_values = job.quantities.evaluate(again, sub_inputs)
        again_series = pack_series(again) if job.keep_series else None
        for j, i in enumerate(failed):
            if again.errors[j] is None:
                out.errors[i] = None
                for name, array in again_values.items():
                    values[name][i] = array[j]
                if series is not None:  # the series of the attempt that succeeded
                    series[i] = again_series[j]
    return {
        "ids": run_ids,
        "errors": out.errors,
        "values": values,
        "duration": (time.perf_counter() - start) / max(len(run_ids), 1),
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        "series": series,
    }


def evaluate_model(job: Job, inputs: dict[str, np.ndarray], run_ids: np.ndarray) -> ModelOutput:
    """The model's output for a batch; an exception escaping the model fails the whole batch."""
    context = RunContext(run_ids=run_ids, workdir=None if job.workdir is None else Path(job.workdir))
    try:
        return job.evaluator(inputs, context)
    except Exception as error:
        return ModelOutput(len(run_ids), errors=[describe(error)] * len(run_ids))


def pack_series(out: ModelOutput) -> list[bytes]:
    """Each run's time series as npz bytes on its own grid, for `keep: series` (a run in no
    group of series, a failed one, keeps an empty npz)."""
    blobs = [EMPTY_NPZ] * out.n
    for group in out.series_groups():
        for j, i in enumerate(np.arange(out.n)[group.rows].tolist()):
            arrays = {name: values[j] for name, values in group.series.items()}
            if group.time is not None:
                arrays["time"] = group.time
            buffer = io.BytesIO()
            np.savez(buffer, **arrays)
            blobs[i] = buffer.getvalue()
    return blobs


def empty_npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer)
    return buffer.getvalue()


EMPTY_NPZ = empty_npz()


class Recorder:
    """Turns batch results into store records, fixing the quantity columns on the first batch."""

    def __init__(self, plan: Plan, store: RunStore, settings: Settings, progress: Progress,
                 sink: Sink | None = None) -> None:
        self.plan, self.store, self.settings, self.progress = plan, store, settings, progress
        self.sink = sink
        self.counts = Counts(planned=plan.size)

    def record(self, rows: np.ndarray, result: dict) -> None:
        if not self.store.quantities and self.store.meta("format") is None:
            self.store.prepare(list(self.plan.design.names), list(result["values"]))
        names = self.store.quantities
        n = len(rows)
        errors = list(result["errors"])
        values = np.full((n, len(names)), np.nan)
        for j, name in enumerate(names):
            if name in result["values"]:
                values[:, j] = result["values"][name]
            else:
                for i in range(n):
                    errors[i] = errors[i] or f"the model gave no output {name!r}"
        ok = np.array([e is None for e in errors])
        batch = Batch(ids=result["ids"], ok=ok, errors=errors, inputs=self.plan.design.matrix[rows],
                      values=values, duration=result["duration"], worker=result["worker"],
                      series=result["series"])
        self.store.write(batch)
        if self.sink is not None:
            self.sink(rows, batch.table())
        failed = int((~ok).sum())
        self.counts.executed += n
        self.counts.failed += failed
        self.progress.update(n, failed)
        if failed and self.settings.on_failure == "abort":
            first = int(np.flatnonzero(~ok)[0])
            raise ExecutionError(
                f"run {int(result['ids'][first]) & (2**64 - 1):016x} failed: {errors[first]}; "
                f"{self.counts.executed} runs are recorded and will be reused. Set "
                "execution.on_failure: continue to go on past failed runs")


class Runner:
    """Executes plans through one store and one executor, kept open across the plans of an
    iterative analysis; the executor is chosen (and a cluster started) only when it pays."""

    def __init__(self, store: RunStore, job: Job, settings: Settings) -> None:
        self.store, self.job, self.settings = store, job, settings
        self.executor = None
        self.seconds_per_run: float | None = None
        self.totals = Counts()

    def __enter__(self) -> "Runner":
        """Check a scheduler address at once: a study small enough to finish in the pilot would
        otherwise never connect, and pass with an address that is wrong."""
        scheduler = self.settings.scheduler
        if isinstance(scheduler, str):
            problem = scheduler_problem(scheduler)
            if problem:
                raise ExecutionError(f"scheduler: {problem}")
            probe_scheduler(scheduler)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()
            self.executor = None

    def execute(self, plan: Plan, quiet: bool = False, sink: Sink | None = None) -> Counts:
        """Run the plan's runs that the store lacks, recording each batch as it finishes (and
        handing it to `sink`, when given, with its rows in the plan)."""
        pending = np.flatnonzero(~self.store.succeeded_among(plan.run_ids))
        progress = Progress(total=plan.size, already=plan.size - len(pending),
                            enabled=not (self.settings.quiet or quiet))
        recorder = Recorder(plan, self.store, self.settings, progress, sink)
        recorder.counts.reused = plan.size - len(pending)
        self.note_progress(plan.size)
        try:
            if len(pending):
                self.run_pending(plan, pending, recorder)
        finally:
            progress.close()
            self.add_to_totals(recorder.counts)
        return recorder.counts

    def note_progress(self, size: int) -> None:
        """The plan size so far, and at the first plan the start time and the runs already
        recorded, in the store's meta: what `studyrun status` reads."""
        meta = {"planned": self.totals.planned + size}
        if self.totals.planned == 0:
            counts = self.store.counts() if self.store.meta("format") is not None else {}
            meta.update(started=time.time(), recorded_at_start=sum(counts.values()))
        self.store.set_meta(**meta)

    def note_workers(self, workers: int) -> None:
        """The workers the runs go to, in the store's meta: `studyrun status` reports them
        (counting the processes that recorded runs would add the driver's timing runs)."""
        if workers != self.store.meta("workers"):
            self.store.set_meta(workers=workers)

    def add_to_totals(self, counts: Counts) -> None:
        totals = self.totals
        totals.planned += counts.planned
        totals.reused += counts.reused
        totals.executed += counts.executed
        totals.failed += counts.failed
        totals.scheduler, totals.batch_size = counts.scheduler, counts.batch_size
        totals.notes = list(dict.fromkeys(totals.notes + counts.notes))

    def run_pending(self, plan: Plan, pending: np.ndarray, recorder: Recorder) -> None:
        """Pilot in-process when the batch size is automatic, then the rest on the executor."""
        settings, counts = self.settings, recorder.counts
        if settings.batch_size != "auto":
            batch, scheduler = int(settings.batch_size), settings.scheduler
        else:
            if self.executor is None and self.seconds_per_run is None:  # time the model once
                self.seconds_per_run, used = run_pilot(plan, self.job, pending, recorder)
                pending = pending[used:]
            workers = (self.executor.workers if self.executor
                       else planned_workers(settings.scheduler, settings.workers))
            batch = choose_batch_size(self.seconds_per_run, len(pending), workers)
            short = self.seconds_per_run * len(pending) < CLUSTER_STARTUP_SECONDS
            in_process = starts_a_cluster(settings.scheduler) and self.executor is None and short
            scheduler = "sync" if in_process else settings.scheduler
            if in_process:  # one in-process batch: splitting it would only add calls
                batch = max(1, min(len(pending), MAX_BATCH))
            if in_process and len(pending):
                counts.notes.append("ran in-process: the runs took less than a cluster start-up")
        counts.batch_size, counts.scheduler = batch, scheduler_name(scheduler)
        if not len(pending):
            return
        if scheduler == "sync" and self.executor is None:
            executor = SyncExecutor()
        else:
            if self.executor is None:
                self.executor = start_executor(scheduler, settings.workers)
            executor = self.executor
        self.note_workers(executor.workers)
        guided = settings.batch_size == "auto" and executor.workers > 1
        smallest = math.ceil(TASK_SECONDS / 10 / max(self.seconds_per_run or 0, 1e-9))
        batches = split_batches(pending, batch, executor.workers if guided else 0, smallest)
        dispatch(executor, plan, self.job, batches, recorder, settings)


def run_pilot(plan: Plan, job: Job, pending: np.ndarray, recorder: Recorder) -> tuple[float, int]:
    """Run growing batches in-process until PILOT_SECONDS pass; return seconds per run and rows used."""
    used, size, spent, per_run = 0, 1, 0.0, 0.0
    while used < len(pending) and (spent < PILOT_SECONDS or used == 0):
        rows = pending[used:used + size]
        start = time.perf_counter()
        result = run_batch(job, plan.inputs(rows), plan.run_ids[rows])
        elapsed = time.perf_counter() - start
        recorder.record(rows, result)
        per_run = elapsed / len(rows)
        spent += elapsed
        used += len(rows)
        size = min(size * 4, MAX_BATCH)
    return per_run, used


def split_batches(rows: np.ndarray, size: int, workers: int = 0, smallest: int = 1) -> list[np.ndarray]:
    """Consecutive batches of at most `size` rows. For several workers they shrink towards the
    end (guided self-scheduling, never below `smallest`), so that the workers finish together
    instead of one of them running a last full batch alone."""
    batches, start = [], 0
    while start < len(rows):
        step = size
        if workers:
            step = max(min(size, smallest), min(size, math.ceil((len(rows) - start) / (2 * workers))))
        batches.append(rows[start:start + step])
        start += step
    return batches


def choose_batch_size(seconds_per_run: float, remaining: int, workers: int) -> int:
    """Batches of about TASK_SECONDS, but enough of them to keep every worker busy."""
    by_time = math.ceil(TASK_SECONDS / max(seconds_per_run, 1e-9))
    by_balance = math.ceil(remaining / (4 * workers)) if remaining else 1
    return int(max(1, min(by_time, by_balance, MAX_BATCH)))


def dispatch(executor, plan: Plan, job: Job, batches: list[np.ndarray], recorder: Recorder,
             settings: Settings) -> None:
    """Keep a few batches in flight per worker; record each as it completes; retry lost ones."""
    limit = 2 * max(1, executor.workers) + 2
    queue = list(reversed(batches))
    in_flight: dict = {}
    attempts: dict[int, int] = {}
    try:
        while queue or in_flight:
            while queue and len(in_flight) < limit:
                rows = queue.pop()
                future = executor.submit(run_batch, job, plan.inputs(rows), plan.run_ids[rows])
                in_flight[future] = rows
            done, _ = executor.wait_first(set(in_flight))
            for future in done:
                rows = in_flight.pop(future)
                try:
                    result = executor.result(future)
                except ExecutionError:  # the executor itself is lost: retrying cannot help
                    raise
                except Exception as error:
                    key = int(rows[0])
                    attempts[key] = attempts.get(key, 0) + 1
                    if attempts[key] > settings.retries:
                        raise ExecutionError(lost_batch_message(executor, error)) from None
                    queue.append(rows)
                    continue
                recorder.record(rows, result)
    finally:
        for future in in_flight:
            try:
                future.cancel()
            except Exception:
                pass


def lost_batch_message(executor, error: Exception) -> str:
    """Why a batch could not be computed, and what to do next."""
    return (f"a batch failed on the {executor.name} executor: {type(error).__name__}: {error}. "
            "The runs recorded so far are kept; run the study again to resume "
            "(execution.retries re-sends lost batches)")

