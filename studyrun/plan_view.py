"""`studyrun plan`: what would run, as text and as a design CSV."""

from __future__ import annotations

import csv
from pathlib import Path

from .params import Fixed
from .plan import Plan


def describe_plan(loaded, plan: Plan, settings) -> str:
    """A short account of the design, the runs and how they would be batched."""
    study = loaded.study
    names = plan.design.names
    lines = [f"study {study.name}: {study.analysis.type} of a {study.model.type} model",
             f"varied parameters ({len(names)}): {', '.join(names)}",
             f"fixed: {', '.join(f'{k}={v:g}' for k, v in plan.fixed.items()) or 'none'}",
             f"runs: {plan.size}"]
    if settings.batch_size == "auto":
        lines.append(f"batches: sized after timing the model in-process; scheduler {settings.scheduler}")
    else:
        count = -(-plan.size // int(settings.batch_size))
        lines.append(f"batches: {count} of {settings.batch_size} runs; scheduler {settings.scheduler}")
    describe = getattr(study.analysis, "describe_design", None)
    if describe is not None:
        lines.append(describe(plan.design))
    else:
        shown = min(plan.size, 10)
        lines.append(f"first {shown} runs:")
        lines.append("  " + "  ".join(f"{n:>12}" for n in names))
        for row in plan.design.matrix[:shown]:
            lines.append("  " + "  ".join(f"{v:>12.6g}" for v in row))
    return "\n".join(lines)


def describe_iterative(loaded) -> str:
    """An iterative analysis has no design up front: say what it varies and how it proceeds."""
    study = loaded.study
    names = [name for name, p in study.parameters.items() if not isinstance(p, Fixed)]
    return "\n".join([
        f"study {study.name}: {study.analysis.type} of a {study.model.type} model",
        f"varied parameters ({len(names)}): {', '.join(names)}",
        "runs: planned by the optimiser as it goes; each is cached in the store, so a "
        "restarted study replays the runs it already made"])


def write_design_csv(plan: Plan, path: Path) -> None:
    """The design, one row per run, with the run's identity."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["run", "id", *plan.design.names])
        for index, (run_id, row) in enumerate(zip(plan.run_ids.tolist(), plan.design.matrix.tolist())):
            writer.writerow([index, run_id, *row])
