"""Seconds and peak RSS of each step of one `studyrun run` (issue 19): design, plan, execute,
analyse, runs.csv, the text files (analysis.json ...), report; and, within them, the store's
writes and reads (the first step that uses scipy pays its import). Linux
only: each step resets the kernel's high-water mark (/proc/self/clear_refs) and reads it back.

    python benchmarks/profile_steps.py STUDY OUT
"""

from __future__ import annotations

import functools
import sys
import time

OPEN: list[list[int]] = [[0]]  # the peak so far of the whole run, then of each step under way


def status(key: str) -> int:
    """VmRSS or VmHWM of this process, in MB."""
    with open("/proc/self/status") as handle:
        line = next(line for line in handle if line.startswith(key))
    return int(line.split()[1]) // 1024


def reset_peak() -> None:
    """Fold the high-water mark into every step under way, then reset it."""
    for peak in OPEN:
        peak[0] = max(peak[0], status("VmHWM"))
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def timed(owner, name: str, label: str, totals: dict | None = None) -> None:
    """Wrap owner.name: print its seconds and peak RSS, or add them to `totals` (many calls)."""
    function = getattr(owner, name)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        reset_peak()
        before, peak, start = status("VmRSS"), [0], time.perf_counter()
        OPEN.append(peak)
        try:
            return function(*args, **kwargs)
        finally:
            reset_peak()
            OPEN.pop()  # steps nest: this one is the innermost
            seconds, rise = time.perf_counter() - start, max(0, peak[0] - before)
            if totals is None:
                print(f"{label:14s} {seconds:7.2f} s  peak {peak[0]:6d} MB (+{rise} MB)",
                      flush=True)
            else:
                calls, spent, most = totals.get(label, (0, 0.0, 0))
                totals[label] = (calls + 1, spent + seconds, max(most, rise))

    setattr(owner, name, wrapper)


def main(study: str, out: str) -> None:
    import studyrun.commands.pipeline as pipeline
    from studyrun.execution.execute import Runner
    from studyrun.results import exports, outputs
    from studyrun.store.run_store import RunStore

    store: dict = {}
    timed(pipeline, "make_plan", "plan")  # a design of one slice; of many: "plan slices"
    timed(pipeline, "plan_slices", "plan slices")
    timed(Runner, "execute", "execute")
    timed(RunStore, "write", "store writes", store)
    timed(RunStore, "read_seqs", "store reads", store)
    # runs.csv written in this process (helper processes write the parts of a large one)
    timed(exports, "write_csv", "runs.csv")
    timed(outputs, "write_text", "text file")  # analysis.json, the study's copy, report.md
    timed(pipeline, "write_report", "report")
    analysis = pipeline.load_study(study).study.analysis
    for name, label in (("design", "design"), ("analyse_runs", "analyse")):
        timed(type(analysis), name, label)
    start = time.perf_counter()
    pipeline.run_study(study, out, fresh=True, quiet=True)
    for label, (calls, seconds, rise) in store.items():
        print(f"{label:14s} {seconds:7.2f} s  in {calls} calls, each at most +{rise} MB")
    reset_peak()
    print(f"{'total':14s} {time.perf_counter() - start:7.2f} s  peak {OPEN[0][0]} MB (this "
          "process; Dask's workers are others)")


if __name__ == "__main__":  # the guard: Dask's worker processes import this module
    main(*sys.argv[1:3])
