"""The execute step: send a plan's unfinished runs to an executor in batches, record each batch.

A short pilot times the model (one that runs user code in a process of its own, so that a
crash costs only runs); the batch size follows from it, and a study that would finish before a
cluster could start never starts one. Every finished batch is committed to the store as it
arrives, so a killed study loses at most the batches in flight. A batch lost with the process
running it is run again in parts until the runs that crash are found (see Dispatch).
"""

from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from studyrun.blocks.quantities import Quantities
from studyrun.core.batch import Evaluator, ModelOutput, RunContext
from studyrun.core.errors import ExecutionError, describe
from studyrun.core.interrupts import fails_the_run, noting_interrupts
from studyrun.core.isolated import IsolatedExecutor, Loss
from studyrun.core.runtable import objects
from studyrun.execution.clusters import cancel_leftovers, job_name
from studyrun.execution.executors import (
    Executor,
    Submitted,
    SyncExecutor,
    give_back_memory,
    is_cluster,
    planned_workers,
    probe_scheduler,
    scheduler_name,
    start_executor,
    starts_a_cluster,
)
from studyrun.execution.progress import Progress
from studyrun.plan import Plan
from studyrun.store.run_store import Batch, RunStore
from studyrun.store.series import Block, pack

if TYPE_CHECKING:
    from studyrun.execution.executors import Scheduler

PILOT_SECONDS = 0.25  # time spent timing the model before choosing a batch size
CLUSTER_STARTUP_SECONDS = 3.0  # what starting a LocalCluster costs here
TASK_SECONDS = 0.5  # target duration of one batch on a worker
MAX_BATCH = 1 << 18  # runs per batch at most, to bound a worker's memory
BATCH_BYTES = 64 << 20  # and the model's output of one batch at most (series make it large)
SPLIT_PARTS = 16  # a batch lost with its process is sent again in this many parts


@dataclass(frozen=True)
class Job:
    """What every batch of a study needs on a worker: the model, the quantities, where to work."""

    evaluator: Evaluator
    quantities: Quantities
    workdir: str | None = None
    keep_series: bool = False
    series_outputs: tuple[str, ...] | None = None  # the series kept (None: every one)
    retries: int = 0


@dataclass
class Settings:
    """How to execute: the `execution` block after command-line overrides."""

    scheduler: Scheduler = "local"  # a name, an address or a cluster block
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


@dataclass
class BatchResult:
    """What one batch gives back from where it ran: its runs' errors (None where a run
    succeeded), their quantities, the series kept, and how long a run took where."""

    ids: np.ndarray  # int64 (n,): the runs' identities
    errors: list[str | None]
    values: dict[str, np.ndarray]  # quantity -> (n,); a batch whose runs all failed may name none
    duration: float  # seconds per run; NaN where not known
    worker: str  # host:pid
    series: list[Block] | None = None  # the series kept, packed (None: none kept)
    output_bytes: float = 0.0  # the bytes of model output a run gave (what bounds a batch)


def run_batch(job: Job, inputs: dict[str, np.ndarray], run_ids: np.ndarray) -> BatchResult:
    """Evaluate one batch where it runs: model, quantities, retries of failed runs."""
    start = time.perf_counter()
    out = evaluate_model(job, inputs, run_ids)
    output_bytes = model_output_bytes(out)
    values = job.quantities.evaluate(out, inputs)
    series = pack(out, run_ids, job.series_outputs) if job.keep_series else None
    for _ in range(job.retries):
        failed = np.flatnonzero([e is not None for e in out.errors])
        if not len(failed):
            break
        sub_inputs = {k: v[failed] for k, v in inputs.items()}
        again = evaluate_model(job, sub_inputs, run_ids[failed])
        again_values = job.quantities.evaluate(again, sub_inputs)
        for j, i in enumerate(failed):
            if again.errors[j] is None:
                out.errors[i] = None
                for name, array in again_values.items():
                    values[name][i] = array[j]
        if series is not None:  # each run's series of its latest attempt: a later block wins
            series += pack(again, run_ids[failed], job.series_outputs)
    return BatchResult(ids=run_ids, errors=out.errors, values=values,
                       duration=(time.perf_counter() - start) / max(len(run_ids), 1),
                       worker=f"{socket.gethostname()}:{os.getpid()}", series=series,
                       output_bytes=output_bytes)


def evaluate_model(job: Job, inputs: dict[str, np.ndarray], run_ids: np.ndarray) -> ModelOutput:
    """The model's output for a batch; an exception escaping the model fails the whole batch."""
    context = RunContext(run_ids=run_ids, workdir=None if job.workdir is None else Path(job.workdir))
    try:
        return job.evaluator(inputs, context)
    except BaseException as error:
        if not fails_the_run(error):
            raise
        return ModelOutput(len(run_ids), errors=[describe(error)] * len(run_ids))


def model_output_bytes(out: ModelOutput) -> float:
    """The bytes a batch's model output takes per run (its series, mostly): what bounds a batch."""
    arrays = [*out.scalars.values(), *(a for g in out.series_groups() for a in g.series.values())]
    return sum(np.asarray(a).nbytes for a in arrays) / max(out.n, 1)


class Recorder:
    """Turns batch results into store records, fixing the quantity columns on the first batch
    with a successful run (batches of failed runs wait for it: they name no outputs)."""

    def __init__(self, plan: Plan, store: RunStore, settings: Settings, progress: Progress) -> None:
        self.plan, self.store, self.settings, self.progress = plan, store, settings, progress
        self.counts = Counts(planned=plan.size)
        self.waiting: list[tuple[np.ndarray, BatchResult]] = []
        self.output_bytes = 0.0  # the most bytes of model output a run gave so far

    def record(self, rows: np.ndarray, result: BatchResult) -> None:
        self.output_bytes = max(self.output_bytes, result.output_bytes)
        if not self.store.quantities and self.store.meta("format") is None:
            if self.settings.on_failure == "continue" and all(result.errors):
                self.waiting.append((rows, result))
                self.count(rows, result.errors)
                return
            self.store.prepare(list(self.plan.design.names), list(result.values))
            self.flush()
        errors = self.write(rows, result)
        self.count(rows, errors)

    def flush(self) -> None:
        """Write the batches that waited for the quantity columns (at the end, even without)."""
        if self.waiting and self.store.meta("format") is None:
            self.store.prepare(list(self.plan.design.names), [])
        for rows, result in self.waiting:
            self.write(rows, result)
        self.waiting = []

    def write(self, rows: np.ndarray, result: BatchResult) -> list[str | None]:
        """Store one batch; its runs' errors."""
        names = self.store.quantities
        n = len(rows)
        errors = list(result.errors)
        values = np.full((n, len(names)), np.nan)
        for j, name in enumerate(names):
            if name in result.values:
                values[:, j] = result.values[name]
            else:
                for i in range(n):
                    errors[i] = errors[i] or f"the model gave no output {name!r}"
        ok = np.array([e is None for e in errors])
        batch = Batch(ids=result.ids, ok=ok, errors=errors, inputs=self.plan.design.matrix[rows],
                      values=values, duration=result.duration, worker=result.worker,
                      series=result.series)
        self.store.write(batch)
        return errors

    def count(self, rows: np.ndarray, errors: list[str | None]) -> None:
        """Count a recorded batch; under on_failure: abort, stop at its first failed run."""
        ok = np.array([e is None for e in errors])
        failed = int((~ok).sum())
        self.counts.executed += len(rows)
        self.counts.failed += failed
        self.progress.update(len(rows), failed)
        if failed and self.settings.on_failure == "abort":
            first = int(np.flatnonzero(~ok)[0])
            run_id = int(self.plan.run_ids[rows[first]]) & (2**64 - 1)
            kept = self.counts.executed - self.counts.failed
            reused = ("no run succeeded before it" if kept == 0 else
                      f"the {kept} that succeeded {'is' if kept == 1 else 'are'} recorded and "
                      "will be reused; failed runs are run again")
            raise ExecutionError(
                f"run {run_id:016x} failed: {errors[first]}; {reused}. Set "
                "execution.on_failure: continue to go on past failed runs")


class Runner:
    """Executes plans through one store and one executor, kept open across the plans of an
    iterative analysis; the executor is chosen (and a cluster started) only when it pays."""

    def __init__(self, store: RunStore, job: Job, settings: Settings) -> None:
        self.store, self.job, self.settings = store, job, settings
        self.executor: Executor | None = None
        self.isolated: IsolatedExecutor | None = None  # the pilot's process, once started
        self.seconds_per_run: float | None = None
        self.output_bytes = 0.0  # per run, the most the model gave so far
        self.totals = Counts()

    def __enter__(self) -> "Runner":
        """Cancel the batch jobs a killed driver of this folder left; check a scheduler address
        at once: a study small enough to finish in the pilot would otherwise never connect, and
        pass with an address that is wrong."""
        self.cancel_leftovers()
        scheduler = self.settings.scheduler
        if isinstance(scheduler, str):
            from studyrun.study.spec.execution import scheduler_problem

            problem = scheduler_problem(scheduler)
            if problem:
                raise ExecutionError(f"scheduler: {problem}")
            probe_scheduler(scheduler)
        nearby = self.nearby_executor() if self.settings.batch_size == "auto" else None
        if isinstance(nearby, IsolatedExecutor):
            nearby.start()  # the pilot's process; a new interpreter imports meanwhile
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for executor in (self.executor, self.isolated):
            if executor is not None:
                executor.close()
        self.executor = self.isolated = None
        give_back_memory()

    def execute(self, plan: Plan, quiet: bool = False) -> Counts:
        """Run the plan's runs that the store lacks, recording each batch as it finishes."""
        pending = np.flatnonzero(~self.store.succeeded_among(plan.run_ids))
        progress = Progress(total=plan.size, already=plan.size - len(pending),
                            enabled=not (self.settings.quiet or quiet))
        recorder = Recorder(plan, self.store, self.settings, progress)
        recorder.output_bytes = self.output_bytes
        recorder.counts.reused = plan.size - len(pending)
        self.note_progress(plan.size)
        try:
            if len(pending):
                with noting_interrupts():
                    self.run_pending(plan, pending, recorder)
        finally:
            recorder.flush()
            progress.close()
            self.add_to_totals(recorder.counts)
            self.output_bytes = recorder.output_bytes
        return recorder.counts

    def note_progress(self, size: int) -> None:
        """The plan size so far, and at the first plan the start time and the runs already
        recorded, in the store's meta: what `studyrun status` reads."""
        meta: dict[str, float] = {"planned": self.totals.planned + size}
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
        if counts.scheduler != "none":  # not a plan whose runs were all in the store already
            totals.scheduler, totals.batch_size = counts.scheduler, counts.batch_size
        totals.notes = list(dict.fromkeys(totals.notes + counts.notes))

    def run_pending(self, plan: Plan, pending: np.ndarray, recorder: Recorder) -> None:
        """Pilot when the batch size is automatic (away from this process, when the model may
        crash it), then the rest on the executor, or where the pilot ran when that is quicker."""
        settings, counts = self.settings, recorder.counts
        nearby = None
        if settings.batch_size != "auto":
            batch = int(settings.batch_size)
        else:
            seconds = self.seconds_per_run
            if seconds is None:  # time the model once (before any executor starts)
                seconds, used = run_pilot(plan, self.job, pending, recorder,
                                          self.nearby_executor(), settings)
                self.seconds_per_run = seconds
                pending = pending[used:]
            workers = (self.executor.workers if self.executor
                       else planned_workers(settings.scheduler, settings.workers))
            batch = choose_batch_size(seconds, len(pending), workers, recorder.output_bytes)
            short = seconds * len(pending) < CLUSTER_STARTUP_SECONDS
            if starts_a_cluster(settings.scheduler) and self.executor is None and short:
                nearby = self.nearby_executor()  # splitting would only add calls
                batch = max(1, min(len(pending), most_runs(recorder.output_bytes)))
                if len(pending):
                    counts.notes.append("ran without a cluster: the runs took less than a "
                                        "cluster start-up")
        counts.batch_size = batch
        counts.scheduler = nearby.name if nearby else scheduler_name(settings.scheduler)
        if not len(pending):
            return
        executor = nearby or self.executor
        if executor is None:
            executor = self.executor = self.start_executor()
        self.note_workers(executor.workers)
        guided = settings.batch_size == "auto" and executor.workers > 1
        smallest = math.ceil(TASK_SECONDS / 10 / max(self.seconds_per_run or 0, 1e-9))
        batches = split_batches(pending, batch, executor.workers if guided else 0, smallest)
        quarantine = self.nearby_executor() if executor.name == "local" else None
        dispatch(executor, plan, self.job, batches, recorder, settings, quarantine)

    def cancel_leftovers(self) -> None:
        """Cancel the jobs an earlier driver of this folder left in the queue (killed, it could
        not), whatever this driver runs on, even with nothing left to run: the store's meta says
        which batch system that driver used; only jobs of this folder's own name are looked up."""
        earlier = self.store.meta("batch_jobs")
        kinds = {getattr(self.settings.scheduler, "cluster", None),
                 earlier.get("cluster") if isinstance(earlier, dict) else None}
        name = job_name(self.store.path.parent)
        cancelled = sum(cancel_leftovers(kind, name) for kind in kinds if isinstance(kind, str))
        if cancelled:
            self.totals.notes.append(f"cancelled {cancelled} batch job{'s' * (cancelled > 1)} "
                                     "left by an earlier driver of this folder")

    def start_executor(self) -> Executor:
        """The study's executor; for a batch system, note the jobs' name, which `studyrun
        status` looks them up by."""
        scheduler = self.settings.scheduler
        name = job_name(self.store.path.parent)
        self.store.set_meta(batch_jobs={"cluster": scheduler.cluster, "name": name}
                            if is_cluster(scheduler) else None)
        return start_executor(scheduler, self.settings.workers, name)

    def nearby_executor(self) -> SyncExecutor | IsolatedExecutor:
        """Where the pilot and studies too short for a cluster run: this process for sync and
        threads, or a model that runs no user code; else a spawned process that a crash of
        the model ends instead of the driver."""
        if self.settings.scheduler in ("sync", "threads") or not self.job.evaluator.runs_user_code:
            return SyncExecutor()
        if self.isolated is None:
            self.isolated = IsolatedExecutor()  # its process starts with its first batch
        return self.isolated


def prepare_model(job: Job) -> None:
    """Import what the model's runs need (where the pilot runs, before it: it times runs, not
    imports)."""
    job.evaluator.prepare()


def run_pilot(plan: Plan, job: Job, pending: np.ndarray, recorder: Recorder, executor: Executor,
              settings: Settings) -> tuple[float, int]:
    """Run growing batches on `executor` until PILOT_SECONDS pass, and on while a larger batch
    costs much less a run; return seconds per run (of the last batch) and rows used. A batch
    lost with its process is sent again in parts, as on any executor."""
    if isinstance(executor, IsolatedExecutor):
        try:
            executor.result(executor.submit(prepare_model, job))
        except Exception:
            pass  # the pilot's runs meet the same failure and record it
    used, size, spent, per_run, falling = 0, 1, 0.0, 0.0, False
    while used < len(pending) and (spent < PILOT_SECONDS or used == 0 or falling):
        rows = pending[used:used + size]
        start = time.perf_counter()
        dispatch(executor, plan, job, [rows], recorder, settings)
        elapsed = time.perf_counter() - start
        # A batch four times larger that costs less than twice as much a run: the batch's cost
        # is mostly fixed (an ensemble integrated together, a vectorized call), so a larger one
        # is timed before the size is chosen, while a batch takes under TASK_SECONDS.
        falling = 0 < elapsed / len(rows) < per_run / 2 and elapsed < TASK_SECONDS
        per_run = elapsed / len(rows)
        spent += elapsed
        used += len(rows)
        size = min(size * 4, most_runs(recorder.output_bytes))
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


def choose_batch_size(seconds_per_run: float, remaining: int, workers: int,
                      output_bytes: float = 0.0) -> int:
    """Batches of about TASK_SECONDS, but enough of them to keep every worker busy, and none
    whose model output passes BATCH_BYTES (`output_bytes` a run)."""
    by_time = math.ceil(TASK_SECONDS / max(seconds_per_run, 1e-9))
    by_balance = math.ceil(remaining / (4 * workers)) if remaining else 1
    return int(max(1, min(by_time, by_balance, most_runs(output_bytes))))


def most_runs(output_bytes: float) -> int:
    """The most runs a batch may have, for runs that give `output_bytes` each."""
    return int(max(1, min(MAX_BATCH, BATCH_BYTES // max(output_bytes, 1.0))))


def dispatch(executor: Executor, plan: Plan, job: Job, batches: list[np.ndarray],
             recorder: Recorder, settings: Settings, quarantine: Executor | None = None) -> None:
    """Send the batches to the executor and record each as it completes (see Dispatch)."""
    Dispatch(executor, plan, job, recorder, settings, quarantine).run(batches)


class Dispatch:
    """Keeps a few batches in flight per worker and records each as it completes; sends a batch
    that raised again whole (`retries` times). A batch lost with its process is sent again in
    parts, each alone in flight so that a death is that part's (to `quarantine`, a process of
    the driver's, when given), down to single runs: a run that kills its process alone (1 +
    retries times) is recorded as failed, saying how."""

    def __init__(self, executor: Executor, plan: Plan, job: Job, recorder: Recorder,
                 settings: Settings, quarantine: Executor | None = None) -> None:
        self.executor, self.plan, self.job = executor, plan, job
        self.quarantine = quarantine or executor
        self.recorder, self.settings = recorder, settings
        self.limit = 2 * max(1, executor.workers) + 2
        self.queue: list[np.ndarray] = []
        self.suspects: list[np.ndarray] = []  # parts of lost batches, each to run alone
        self.in_flight: dict[Submitted, tuple[np.ndarray, bool]] = {}  # future -> (rows, alone)
        self.failures: dict[tuple[int, int], int] = {}

    def run(self, batches: list[np.ndarray]) -> None:
        self.queue = list(reversed(batches))
        try:
            while self.queue or self.suspects or self.in_flight:
                self.submit_more()
                alone = next(iter(self.in_flight.values()))[1]  # then it is the only one
                executor = self.quarantine if alone else self.executor
                done, _ = executor.wait_first(set(self.in_flight))
                for future in done:
                    self.complete(future)
        finally:
            for future in self.in_flight:
                try:
                    future.cancel()
                except Exception:
                    pass

    def submit_more(self) -> None:
        """Fill the executor; but a suspect part waits until nothing is in flight, then goes
        alone."""
        if self.suspects:
            if not self.in_flight:
                self.submit(self.suspects.pop(), alone=True)
            return
        while self.queue and len(self.in_flight) < self.limit:
            self.submit(self.queue.pop(), alone=False)

    def submit(self, rows: np.ndarray, alone: bool) -> None:
        executor = self.quarantine if alone else self.executor
        future = executor.submit(run_batch, self.job, self.plan.inputs(rows),
                                 self.plan.run_ids[rows])
        self.in_flight[future] = (rows, alone)

    def complete(self, future: Submitted) -> None:
        rows, alone = self.in_flight.pop(future)
        executor = self.quarantine if alone else self.executor
        try:
            result = executor.result(future)
        except ExecutionError:  # the executor itself is lost: retrying cannot help
            raise
        except Exception as error:
            self.failed(rows, alone, executor.lost(error), error)
            return
        self.recorder.record(rows, result)

    def failed(self, rows: np.ndarray, alone: bool, loss: Loss | None, error: Exception) -> None:
        key = (int(rows[0]), len(rows))
        if loss is None:
            self.failures[key] = self.failures.get(key, 0) + 1
            if self.failures[key] > self.settings.retries:
                raise ExecutionError(lost_batch_message(self.executor, error)) from None
            self.queue.append(rows)
        elif len(rows) > 1:
            self.suspects.extend(reversed(np.array_split(rows, min(len(rows), SPLIT_PARTS))))
        else:
            if alone:
                self.failures[key] = self.failures.get(key, 0) + loss.deaths
            if self.failures.get(key, 0) <= self.settings.retries:
                self.suspects.append(rows)
            else:
                crashed = Loss(self.failures[key], loss.cause, loss.worker)
                self.recorder.record(rows, crashed_result(self.plan, self.job, rows, crashed))


def crashed_result(plan: Plan, job: Job, rows: np.ndarray, loss: Loss) -> BatchResult:
    """A batch result recording a run whose process died each time it ran."""
    how = loss.cause or ("how is not known: a crash, os._exit, a signal, or memory past the "
                         "worker's limit")
    return BatchResult(ids=plan.run_ids[rows], values={}, duration=float("nan"),
                       errors=[f"the process running the model died ({how}) running this run "
                               "alone" + (f", {loss.deaths} times" if loss.deaths > 1 else "")],
                       worker=loss.worker, series=[] if job.keep_series else None)


def lost_batch_message(executor: Executor, error: Exception) -> str:
    """Why a batch could not be computed, and what to do next."""
    return (f"a batch failed on the {executor.name} executor: {type(error).__name__}: {error}. "
            "The runs recorded so far are kept; run the study again to resume "
            "(execution.retries re-sends lost batches)")



def record_given(store: RunStore, plan: Plan, values: dict[str, np.ndarray],
                 errors: list[str | None]) -> tuple[Counts, tuple[np.ndarray, np.ndarray]]:
    """Record runs that already exist (`analysis.from:`) as the plan's runs, with the quantities
    they gave; nothing is executed, and runs the store holds already are reused. With the
    counts, where each run is recorded and whether it succeeded (RunStore.locate's answer)."""
    counts = Counts(planned=plan.size, notes=["the runs were given (analysis.from); the model "
                                              "was not run"])
    if not store.quantities and store.meta("format") is None:
        store.prepare(list(plan.design.names), list(values))
    seqs, ok = (found.copy() for found in store.locate(plan.run_ids))
    pending = np.flatnonzero(~ok)
    counts.reused = plan.size - len(pending)
    each = objects(errors)
    failed = np.not_equal(each, np.array(None, object))  # numpy's loop over a million rows
    if len(pending):
        table = np.column_stack([values.get(name, np.full(plan.size, np.nan))
                                 for name in store.quantities] or [np.zeros((plan.size, 0))])
        rows = slice(None) if len(pending) == plan.size else pending  # all: no copies
        batch = Batch(ids=plan.run_ids[rows], ok=~failed[rows], errors=each[rows],
                      inputs=plan.design.matrix[rows], values=table[rows], duration=0.0,
                      worker="given")
        seqs[pending], ok[pending] = store.write(batch), batch.ok
    counts.failed = int(failed.sum())
    return counts, (seqs, ok)
