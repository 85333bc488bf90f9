"""`studyrun status DIR` and `studyrun runs DIR --failed`: a study's progress and failures.

Both read the results folder's runs.sqlite read-only and without its lock, so they work while the
study runs (WAL lets a reader see every committed batch, never half of one) and after it ended.
A damaged store is reported as such (exit status 1), never read as if it were whole.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from studyrun.execution.clusters import slurm_jobs
from studyrun.results.outputs import read_analysis
from studyrun.store.view import StoreView, run_name


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
        counts = view.store.counts()
        ok, failed = counts.get("ok", 0), counts.get("failed", 0)
        state = driver_state(view)
        lines = [f"study: {_study_name(view.folder)} ({view.folder})", f"state: {state}"]
        planned = view.meta.get("planned")
        recorded = ok + failed
        if planned and view.meta.get("iterative") and not state.startswith("finished"):
            lines.append(f"runs: {recorded} recorded ({ok} succeeded, {failed} failed) of "
                         f"{planned} planned so far (an iterative analysis plans its runs as it "
                         "goes)")  # a percentage of the plans so far would say 100% too soon
        elif planned:
            left = max(planned - recorded, 0)
            lines.append(f"runs: {planned} planned, {recorded} recorded ({ok} succeeded, "
                         f"{failed} failed), {left} to go ({100 * recorded / planned:.1f}% done)")
            if left == 0 and state.startswith("running"):
                lines.append("analysis: every planned run is recorded; the analysis step is "
                             "under way (a fit or bootstrap can take a while)")
        else:
            lines.append(f"runs: {recorded} recorded ({ok} succeeded, {failed} failed)")
        known = None if view.meta.get("iterative") else planned  # the whole plan, if known
        lines += rate_lines(view, recorded, known, state.startswith("running"))
        if state.startswith("running"):
            lines += job_lines(view.meta.get("batch_jobs"))
        failed_runs = view.store.latest_records(failed_only=True)
        last = list(zip(failed_runs.ids[::-1][:errors].tolist(),
                        failed_runs.errors[::-1][:errors].tolist()))
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
    mean, workers = view.store.timing()
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
        parameters = view.store.parameters
        table = view.store.latest_records(failed_only, limit or None)
        rows = list(zip(table.ids.tolist(), table.ok.tolist(), table.errors.tolist(),
                        table.worker.tolist(), *table.inputs.T.tolist()))
        if not rows:
            return "no failed runs" if failed_only else "no runs recorded yet"
        lines = []
        for run_id, ok, error, worker, *values in rows:
            status = "ok" if ok else "failed"
            text = "  ".join(f"{p}={v:.6g}" if v == v else f"{p}=?"
                             for p, v in zip(parameters, values))
            lines.append(f"run {run_name(run_id)}  {status}  {text}  (worker {worker})")
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
