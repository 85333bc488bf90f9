"""`studyrun plan`: what would run, as text and as a design CSV."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import numpy as np

from studyrun.blocks.dependencies import describe_changes
from studyrun.blocks.params import Fixed
from studyrun.core.runtable import CSV_FIXED
from studyrun.plan import Plan

SHOWN_FILES = 8


def describe_plan(loaded, plan: Plan, settings) -> str:
    """A short account of the design, the runs and how they would be batched."""
    study = loaded.study
    names = plan.design.names
    lines = [f"study {study.name}: {study.analysis.type} of {model_words(study)}",
             f"varied parameters ({len(names)}): {', '.join(names)}",
             f"fixed: {', '.join(f'{k}={v:g}' for k, v in plan.fixed.items()) or 'none'}",
             *correlated(study), f"runs: {plan.size}"]
    given = study.analysis.given(loaded.context)
    if given is not None:
        lines[-1] += f", given: the rows of {given.path}; the model is not run"
    elif settings.batch_size == "auto":
        lines.append(f"batches: sized after timing the model in-process; scheduler {settings.scheduler}")
    else:
        count = -(-plan.size // int(settings.batch_size))
        lines.append(f"batches: {count} of {settings.batch_size} runs; scheduler {settings.scheduler}")
    lines += memory(loaded)
    described = study.analysis.describe_design(plan.design, loaded.context)
    if described:
        lines.append(described)
    else:
        shown = min(plan.size, 10)
        lines.append(f"first {shown} runs:")
        lines.append("  " + "  ".join(f"{n:>12}" for n in names))
        for row in plan.design.matrix[:shown]:
            lines.append("  " + "  ".join(f"{v:>12.6g}" for v in row))
    return "\n".join(lines)


def model_words(study) -> str:
    """'a python model', or what a study without a model analyses."""
    return f"a {study.model.type} model" if study.model is not None else "given runs (no model)"


def describe_iterative(loaded) -> str:
    """An iterative analysis has no design up front: say what it varies and how it proceeds."""
    study = loaded.study
    names = [name for name, p in study.parameters.items() if not isinstance(p, Fixed)]
    return "\n".join([
        f"study {study.name}: {study.analysis.type} of {model_words(study)}",
        f"varied parameters ({len(names)}): {', '.join(names)}", *correlated(study),
        f"runs: {how_it_proceeds(loaded)}; each is cached in the store, so a restarted study "
        "replays the runs it already made", *memory(loaded)])


def memory(loaded) -> list[str]:
    """The line saying what the analysis's sizes take in memory, and what it may use here."""
    from studyrun.core.sizes import human, memory_limit

    footprint = loaded.study.analysis.footprint(loaded.context)
    if footprint is None:
        return []
    return [f"memory: {footprint.describe()}; an analysis may use {human(memory_limit()[0])} "
            "here"]


def correlated(study) -> list[str]:
    """The line naming the study's correlations of normal scores, if it has any."""
    pairs = [f"{a}-{b} {r:g}" for a, b, r in study.correlation]
    return [f"correlated (normal scores): {', '.join(pairs)}"] if pairs else []


def how_it_proceeds(loaded) -> str:
    """The analysis's own account of its runs (its first design described), else the default."""
    import numpy as np

    analysis, context = loaded.study.analysis, loaded.context
    try:
        text = analysis.describe_design(
            analysis.design(context, np.random.SeedSequence(loaded.study.seed)), context)
    except NotImplementedError:
        text = ""
    return text or "planned by the optimiser as it goes"


def describe_dependencies(record: dict) -> str:
    """The files a run's identity covers besides the model block, quantities and fixed inputs."""
    names = list(record["files"])
    shown = ", ".join(names[:SHOWN_FILES]) + (f" and {len(names) - SHOWN_FILES} more"
                                             if len(names) > SHOWN_FILES else "")
    return f"files the runs depend on ({len(names)}): {shown or 'none'}"


def describe_reuse(folder: Path, record: dict, run_ids: np.ndarray | None,
                   grows: bool = False) -> str:
    """How many planned runs the results folder would reuse, how many would run, and why (for
    a design that `grows` an earlier folder's, the next line says what that one holds)."""
    if not (folder / "runs.sqlite").is_file():
        return f"{folder}: no runs recorded yet" + ("" if grows else "; every run would run")
    ok, failed, before = recorded_runs(folder)
    changes = describe_changes(before, record) if before is not None else []
    since = f"{', '.join(changes)} since the last run" if changes else ""
    if run_ids is None:  # an iterative analysis: its runs are not known up front
        return (f"{folder}: {len(ok)} runs recorded" + (f"; {since}: runs made before would not be "
                                                         "reused" if since else ""))
    reused = np.isin(run_ids, ok)
    would_run = int((~reused).sum())
    line = f"{folder}: {int(reused.sum())} of {len(run_ids)} runs would be reused, {would_run} would run"
    if would_run == 0:
        return line
    if since:
        return f"{line}: {since}"
    failed_before = int(np.isin(run_ids, failed).sum())
    why = [f"{failed_before} failed before"] if failed_before else []
    why += [f"{would_run - failed_before} not recorded yet"] if would_run > failed_before else []
    return f"{line} ({', '.join(why)})"


def describe_adoption(earlier: Path, run_ids: np.ndarray) -> str:
    """How many planned runs an earlier results folder holds by identity, to be copied, not run."""
    ok, _, _ = recorded_runs(earlier)
    held = int(np.isin(run_ids, ok).sum())
    why = "" if held else " (its model, quantities, files or fixed inputs differ)"
    return f"{earlier}: holds {held} of the {len(run_ids)} runs, which a run copies instead of making{why}"


def recorded_runs(folder: Path) -> tuple[np.ndarray, np.ndarray, dict | None]:
    """The ids of succeeded and failed runs in a results folder, and its latest run context."""
    from studyrun.store.run_store import latest_identity, unreadable
    from studyrun.store.view import StoreView

    view = StoreView(folder)
    try:
        ids, ok = view.store.recorded()
        before = latest_identity(view.store.db)
    except sqlite3.DatabaseError as error:
        raise unreadable(view.path, error) from None
    finally:
        view.close()
    return ids[ok], ids[~ok], before


def write_design_csv(plan: Plan, path: Path) -> None:
    """The design, one row per run, with the run's identity."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*CSV_FIXED[:2], *plan.design.names])
        for index, (run_id, row) in enumerate(zip(plan.run_ids.tolist(), plan.design.matrix.tolist())):
            writer.writerow([index, run_id, *row])
