"""`studyrun status DIR` and `studyrun runs DIR --failed`: a study's progress and failures.

Both read the results folder's runs.sqlite read-only and without its lock, so they work while the
study runs (WAL lets a reader see every committed batch, never half of one) and after it ended.
A damaged store is reported as such (exit status 1), never read as if it were whole.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .clusters import slurm_jobs
from .outputs import read_analysis
from .store import quote, stored_columns
from .store_view import StoreView, run_name


def driver_state(view: StoreView) -> str:
    """running (pid N), finished, or stopped, from the lock file and analysis.json."""
    try:
        holder = Path(f"{view.path}.lock").read_text().split()
        pid = int(holder[1]) if len(holder) == 2 and holder[0] == "pid" else None
    except (OSError, ValueError):
        pid = None
    if pid is not None and pid != os.getpid() and _alive(pid):
        return f"running (pid {pid})"
    analysis = view.folder / "analysis.json"
    started = view.meta.get("started") or 0
    if analysis.is_file() and analysis.stat().st_mtime >= started:
        return "finished"
    return "stopped before finishing (run the study again to resume)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def describe_status(folder: Path, errors: int = 5) -> str:
    """The text of `studyrun status`: state, counts, rate, workers, last errors."""
    view = StoreView(folder)
    try:
        if (view.folder / "analysis.json").is_file():
            read_analysis(view.folder)  # results left by another study are an error, not a state
        counts = dict(view.query("SELECT status, count(*) FROM runs GROUP BY status"))
        ok, failed = counts.get("ok", 0), counts.get("failed", 0)
        state = driver_state(view)
        lines = [f"study: {_study_name(view.folder)} ({view.folder})", f"state: {state}"]
        planned = view.meta.get("planned")
        recorded = ok + failed
        if planned:
            left = max(planned - recorded, 0)
            lines.append(f"runs: {planned} planned, {recorded} recorded ({ok} succeeded, "
                         f"{failed} failed), {left} to go ({100 * recorded / planned:.1f}% done)")
        else:
            lines.append(f"runs: {recorded} recorded ({ok} succeeded, {failed} failed)")
        lines += rate_lines(view, recorded, planned, state.startswith("running"))
        if state.startswith("running"):
            lines += job_lines(view.meta.get("batch_jobs"))
        last = view.query("SELECT id, error FROM runs WHERE status = 'failed' ORDER BY rowid DESC "
                          "LIMIT ?", (errors,))
        if last:
            lines.append(f"last {len(last)} error{'s' * (len(last) > 1)} (all: studyrun runs "
                         f"{folder} --failed):")
            lines += [f"  run {run_name(i)}: {_first_line(e)}" for i, e in last]
        return "\n".join(lines)
    finally:
        view.close()


def rate_lines(view: StoreView, recorded: int, planned: int | None, running: bool) -> list[str]:
    """Runs per second since the last start (while running), mean run time and workers."""
    lines = []
    rows = view.query("SELECT avg(duration), count(DISTINCT worker) FROM runs")
    mean, workers = rows[0] if rows else (None, 0)
    workers = view.meta.get("workers") or workers  # the latest session's; older stores lack it
    if running and view.meta.get("started"):
        elapsed = max(time.time() - view.meta["started"], 1e-9)
        done_now = max(recorded - int(view.meta.get("recorded_at_start") or 0), 0)
        rate = done_now / elapsed
        line = f"rate: {rate:.3g} runs/s over the last {elapsed:.0f} s"
        if planned and rate > 0:
            line += f"; about {max(planned - recorded, 0) / rate:.0f} s left"
        lines.append(line)
    if mean is not None:
        lines.append(f"model: {mean:.3g} s per run on average, on {workers} worker"
                     f"{'s' * (workers != 1)}")
    return lines


def job_lines(jobs: dict | None) -> list[str]:
    """The study's batch jobs by state, as squeue lists them (SLURM only)."""
    if not jobs or jobs.get("cluster") != "slurm":
        return []
    listed = slurm_jobs(jobs["name"])
    if listed is None:
        return [f"jobs: unknown (squeue failed; its jobs are called {jobs['name']})"]
    states: dict[str, int] = {}
    for _, state in listed:
        states[state.lower()] = states.get(state.lower(), 0) + 1
    order = sorted(states, key=lambda s: (s != "running", s != "pending", s))
    shown = ", ".join(f"{states[s]} {s}" for s in order) or "none"
    return [f"jobs: {shown} (squeue --name {jobs['name']})"]


def describe_runs(folder: Path, failed_only: bool = False, limit: int | None = None) -> str:
    """The text of `studyrun runs`: each run's id, status, parameters; errors and workdirs."""
    view = StoreView(folder)
    try:
        parameters = list(view.meta.get("parameters", []))
        stored = stored_columns(parameters, list(view.meta.get("quantities", [])),
                                view.meta.get("columns"))
        columns = "".join(f", {quote(stored[p])}" for p in parameters)
        where = "WHERE status = 'failed'" if failed_only else ""
        sql = f"SELECT id, status, error, worker{columns} FROM runs {where} ORDER BY rowid"
        rows = view.query(sql + (f" LIMIT {int(limit)}" if limit else ""))
        if not rows:
            return "no failed runs" if failed_only else "no runs recorded yet"
        lines = []
        for run_id, status, error, worker, *values in rows:
            shown = "  ".join(f"{p}={v:.6g}" if v is not None else f"{p}=?"
                              for p, v in zip(parameters, values))
            lines.append(f"run {run_name(run_id)}  {status}  {shown}  (worker {worker})")
            if error:
                lines += ["  error: " + _indent(error)]
            workdir = view.folder / "work" / f"run-{run_name(run_id)}"
            if status == "failed" and workdir.is_dir():
                lines.append(f"  workdir: {workdir}")
        return "\n".join(lines)
    finally:
        view.close()


def _study_name(folder: Path) -> str:
    try:
        import yaml

        return str(yaml.safe_load((folder / "study.yaml").read_text()).get("name", "?"))
    except Exception:  # a missing or edited copy: the name is only decoration
        return "?"


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] + (" ..." if len(lines) > 1 else "") if lines else ""


def _indent(text: str) -> str:
    return "\n    ".join(text.rstrip().splitlines())
