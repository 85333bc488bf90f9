"""The whole path of a study: load, plan, execute, analyse, report; one function per step.

`run_study()` reads as those steps. Every step leaves an artefact in the results folder, so the
late steps (analyse, report) can be redone from the folder without running a model again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from studyrun.analyses.base import gathered_warnings
from studyrun.blocks.dependencies import code_digest
from studyrun.blocks.quantities import Quantities
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import StudyError
from studyrun.core.numbers import finite_or_none
from studyrun.core.text import terminal_safe
from studyrun.core.threads import ANALYSIS_THREADS, held_to_cores
from studyrun.execution.execute import Job, Runner, Settings, record_given
from studyrun.models.base import HasEquations
from studyrun.plan import make_plan, plan_slices
from studyrun.plan.runs import CHUNK_ROWS, PlannedRuns, read_outcome, series_kept, series_wanted
from studyrun.plan.study import given_plan, identity_context, identity_record
from studyrun.results import outputs
from studyrun.results.analysis_file import AnalysisFile, Execution, Runs
from studyrun.results.exports import remove_unexported, write_parquets, writing_exports
from studyrun.results.provenance import collect, now
from studyrun.results.report.build import write_report
from studyrun.results.runs_csv import write_csv
from studyrun.store.run_store import RunStore
from studyrun.study.loading import Loaded, load_study
from studyrun.study.spec import Study
from studyrun.study.spec.registry import registry


def settings_for(study: Study, scheduler: str | None = None, workers: int | None = None,
                 quiet: bool = False) -> Settings:
    """The execution settings: the study's, overridden by the command line."""
    execution = study.execution
    return Settings(scheduler=scheduler or execution.scheduler, workers=workers or execution.workers,
                    batch_size=execution.batch_size, retries=execution.retries,
                    on_failure=execution.on_failure, quiet=quiet)


def make_job(loaded: Loaded, folder: Path) -> Job:
    """What each batch needs on a worker."""
    study = loaded.study
    model = loaded.context.model
    if study.execution.timeout is not None:
        model = model.with_timeout(study.execution.timeout)
    quantities = Quantities(study.quantities)
    every = study.execution.keep == "series"
    kept = series_kept(quantities, study.analysis, loaded.context)
    evaluator = model.build(loaded.folder).with_code(code_digest(loaded.dependencies()))
    return Job(evaluator=evaluator, quantities=quantities, workdir=str(folder / "work"),
               keep_series=every or bool(kept), series_outputs=None if every else kept,
               retries=study.execution.retries)


def run_study(path: str | Path, out: str | Path | None = None, *, scheduler: str | None = None,
              workers: int | None = None, fresh: bool = False, quiet: bool = False,
              warn: Callable[[str], None] | None = None,
              report: bool = True) -> dict[str, Any]:
    """Load, plan, execute, analyse and report a study; return analysis.json's content (its
    `warnings`: the study's own, then every one its results hold). The study's own warnings
    go to `warn` before any run (by default to stderr), so a long study shows them first.
    Without `report`, the folder holds no report (one of an earlier run is removed);
    `studyrun report DIR` draws it later."""
    started = now()
    loaded = load_study(path)
    warnings = study_warnings(loaded)
    for warning in warnings:
        (warn or print_warning)(warning)
    folder = Path(out) if out else Path("results") / loaded.study.name
    earlier = loaded.study.analysis.earlier_results(loaded.context)
    if earlier is not None and earlier.resolve() == folder.resolve():
        raise StudyError(f"{loaded.path}: analysis.from names the folder this run writes "
                         f"({folder}), whose results it would replace; give --out another folder")
    job = make_job(loaded, folder.resolve())
    settings = settings_for(loaded.study, scheduler, workers, quiet)
    parameters = list(loaded.context.varied)
    quantities = None if loaded.study.quantities is None else job.quantities.names()
    copy = study_copy(loaded)
    with RunStore.open(folder / "runs.sqlite", fresh=fresh) as store:  # held until all is written
        store.check(parameters, quantities)  # before anything in the folder changes
        outputs.claim(folder, copy, fresh=fresh, files=registry().results_files())
        store.record_identity(identity_record(loaded))
        store.set_meta(iterative=loaded.study.analysis.iterative)  # for `studyrun status`
        if quantities is not None:
            store.prepare(parameters, quantities)
        if loaded.study.analysis.iterative:
            analysed, outcome = run_iterative(loaded, store, job, settings, folder)
        else:
            analysed, outcome = run_fixed(loaded, store, job, settings, folder)
        results = jsonable(analysed.results)
        record = AnalysisFile.model_validate({
            "study": loaded.study.name, "analysis": loaded.study.analysis.type,
            "runs": analysed.runs, "results": results,
            **({} if analysed.design is None else {"design": jsonable(analysed.design)}),
            "execution": analysed.execution,
            "warnings": warnings + gathered_warnings(results),
            "provenance": jsonable({**collect(loaded.path, loaded.study.seed, started,
                                              loaded.context.model.packages()),
                                    **loaded.study.analysis.provenance(loaded.context)}),
            outputs.DIGEST_KEY: outputs.study_digest(copy)})
        outputs.write_text(folder / "analysis.json", record.text())
        analysis = record.dump()
        # the report reads the results as computed (a NaN, not analysis.json's null), as before
        if report:
            write_report(folder, loaded.study, {**analysis, "results": analysed.results}, outcome)
        else:  # the report step's files: report.md, report.html, figures, an analysis's own
            outputs.clear(folder, only=outputs.REPORT, files=type(loaded.study.analysis).results_files)
    return analysis


def study_warnings(loaded: Loaded) -> list[str]:
    """Warnings about the study itself (an integration step too coarse) and how its analysis
    reads it."""
    from studyrun.execution.stepcheck import LIMIT, check_step

    warnings = []
    if isinstance(loaded.study.model, HasEquations):
        result = check_step(loaded.context)
        name, worst = result.worst
        if worst > LIMIT:
            warnings.append(f"the integration step may be too coarse: halving it changes {name!r} "
                            f"by {worst:.2%} (more than 1%); see `studyrun check`")
    warnings += loaded.study.analysis.warnings(loaded.context)
    return warnings


@dataclass(frozen=True)
class Analysed:
    """What the execute and analyse steps give analysis.json: the runs' counts, the analysis's
    results, its design (fixed designs) and where the runs went."""

    runs: Runs
    results: dict[str, Any]
    execution: Execution
    design: dict[str, Any] | None = None


def print_warning(warning: str) -> None:
    """A warning on stderr, made safe for a terminal."""
    print(f"studyrun: warning: {terminal_safe(warning)}", file=sys.stderr)


def run_fixed(loaded: Loaded, store: RunStore, job: Job, settings: Settings,
              folder: Path) -> tuple[Analysed, Outcome]:
    """A fixed design: plan it slice by slice, execute each slice, then analyse all of it."""
    study, context = loaded.study, loaded.context
    identity = identity_context(loaded)
    runs = PlannedRuns(store, list(context.varied),
                       series_wanted(job.quantities, study.analysis, context),
                       study.analysis.series_grid(context))
    seed = np.random.SeedSequence(study.seed)
    given = study.analysis.given(context)
    earlier = study.analysis.earlier_results(context)
    adopted = 0
    if given is not None:  # runs that exist: recorded as they are, no executor started
        plan = given_plan(loaded, given, study.analysis.design(context, seed))
        values, errors = given.quantities(study.quantities, context.fixed)
        totals, located = record_given(store, plan, values, errors)
        runs.add(plan, located)
    else:
        designs = study.analysis.design_chunks(context, seed, CHUNK_ROWS)
        with Runner(store, job, settings) as runner:
            for plan in plan_slices(designs, context.fixed, identity):
                if earlier is not None:
                    adopted += adopt_earlier(store, earlier, plan.run_ids)
                runner.execute(plan)
                runs.add(plan)
        totals = runner.totals
    store.release_index()  # the planned runs are found by record (seq) from here on
    with writing_exports(runs, folder, study.execution.export), held_to_cores(ANALYSIS_THREADS):
        results = study.analysis.analyse_runs(runs, context)  # runs.csv by helper processes
    succeeded = runs.succeeded()
    counts = Runs.model_validate(jsonable({
        "planned": runs.size, "succeeded": succeeded, "failed": runs.size - succeeded,
        "reused": totals.reused, **({"given": given.size, "executed": 0} if given else {}),
        **({"adopted": adopted} if earlier is not None else {})}))
    execution = Execution.model_validate(jsonable({
        "scheduler": totals.scheduler, "batch_size": totals.batch_size,
        "executed": totals.executed, "notes": totals.notes}))
    return Analysed(counts, results, execution, {"runs": runs.size, **runs.info}), runs.first()


def adopt_earlier(store: RunStore, folder: Path, run_ids: np.ndarray) -> int:
    """Copy into the store the earlier folder's succeeded runs that this plan has by identity
    (unchanged model, quantities, files and inputs), so they are reused, not made again."""
    with RunStore.open_readonly(folder / "runs.sqlite") as earlier:
        return store.adopt(earlier, run_ids)


def run_iterative(loaded: Loaded, store: RunStore, job: Job, settings: Settings,
                  folder: Path) -> tuple[Analysed, None]:
    """An iterative analysis: it asks for runs through `evaluate`, each batch cached in the store."""
    study, context = loaded.study, loaded.context
    identity = identity_context(loaded)
    evaluated: list[np.ndarray] = []
    seen: set[int] = set()  # runs asked for so far this session
    from_earlier = 0  # of those, runs the store held as succeeded when first asked for

    def evaluate(matrix: np.ndarray) -> Outcome:
        nonlocal from_earlier
        design = Design(list(context.varied), np.atleast_2d(np.asarray(matrix, dtype=float)))
        plan = make_plan(design, context.fixed, identity)
        new = np.array([i for i in np.unique(plan.run_ids).tolist() if i not in seen], np.int64)
        from_earlier += int(store.succeeded_among(new).sum())
        seen.update(new.tolist())
        runner.execute(plan, quiet=True)
        evaluated.append(plan.run_ids)
        return read_outcome(plan, store, job.quantities, study.analysis, context)

    given = study.analysis.given(context)
    if given is not None:  # runs that exist (a surrogate's training rows): recorded, not run
        plan = given_plan(loaded, given)
        counts, _ = record_given(store, plan, *given.quantities(study.quantities, context.fixed))
        evaluated.append(plan.run_ids)
        seen.update(plan.run_ids.tolist())
        from_earlier += counts.reused
    with Runner(store, job, settings) as runner, held_to_cores():
        results = study.analysis.iterate(evaluate, context, np.random.SeedSequence(study.seed))
    ids = np.concatenate(evaluated) if evaluated else np.zeros(0, np.int64)
    ids = ids[np.sort(np.unique(ids, return_index=True)[1])]
    table = store.read(ids)
    export = study.execution.export
    remove_unexported(folder, export)
    if "csv" in export:
        write_csv(folder / "runs.csv", list(context.varied), store.quantities, [(0, table)])
    if "parquet" in export:
        write_parquets(folder, list(context.varied), store, lambda: [(0, table)],
                       store.locate(ids)[0].tobytes())
    totals, succeeded = runner.totals, int(table.ok.sum())
    counts = Runs.model_validate(jsonable({
        "planned": len(ids), "succeeded": succeeded, "failed": len(ids) - succeeded,
        "reused": from_earlier, "evaluated": totals.planned, "executed": totals.executed,
        **({"given": given.size} if given else {})}))
    execution = Execution.model_validate(jsonable({
        "scheduler": totals.scheduler, "executed": totals.executed, "notes": totals.notes}))
    return Analysed(counts, results, execution), None


def study_copy(loaded: Loaded) -> str:
    """study.yaml of the results folder: the study as run, its model file inlined."""
    text = yaml.safe_dump(loaded.source.data, sort_keys=False, allow_unicode=True)
    return f"# run from {loaded.path.resolve()}\n{text}"


def jsonable(value: Any) -> Any:
    """Numbers as plain JSON: numpy scalars unwrapped, NaN and inf as null."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return finite_or_none(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value

