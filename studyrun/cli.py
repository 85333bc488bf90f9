"""The command line: `studyrun validate | plan | run | check | status | diff | runs | predict | report | schema`.

A StudyError prints as FILE:LINE:COL: path: message lines and exits 2; other studyrun errors (and a
`run` in which no run succeeded) print one line and exit 1; a traceback appears only with --debug.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import NoReturn

from studyrun.core.errors import ExecutionError, StudyError, StudyrunError, named_only_outside
from studyrun.core.interrupts import Terminated
from studyrun.core.text import cut_values, one_line, terminal_safe

CLUSTER_KINDS = ("slurm", "pbs", "sge", "lsf", "htcondor")  # clusters.KINDS, without importing it
WARNINGS_SHOWN = 10  # of analysis.json's warnings, in the closing summary of `run`


def main(argv: list[str] | None = None) -> int:
    show_crashes()
    parser = build_parser()
    args = parser.parse_args(argv)
    study = getattr(args, "study", None)  # plan, run, check: a file read after validating
    try:
        with named_only_outside(study) if isinstance(study, Path) else nullcontext():
            return int(args.command(args) or 0)
    except StudyError as error:
        if args.debug:
            raise
        print(terminal_safe(str(error)), file=sys.stderr)
        return 2
    except StudyrunError as error:
        if args.debug:
            raise
        print(f"studyrun: {terminal_safe(str(error))}", file=sys.stderr)  # may quote a model's stderr
        return 1
    except BrokenPipeError:  # the reader of stdout went away (| head): nothing more to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 1
    except (OSError, sqlite3.Error) as error:  # a full disk, a read-only folder: say which file
        if args.debug:
            raise
        print(f"studyrun: {terminal_safe(describe_os_error(error))}", file=sys.stderr)
        return 1
    except Terminated:
        print("studyrun: terminated (SIGTERM); finished runs are saved, run again to resume",
              file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("studyrun: interrupted; finished runs are saved, run again to resume", file=sys.stderr)
        return 130


def console() -> NoReturn:
    """`studyrun` and `python -m studyrun`: main(), then the end of `end`."""
    end(main())


def end(code: int) -> NoReturn:
    """End the process as the interpreter ends it (threads joined, atexit handlers run, every
    open file flushed, standard output too) but without tearing its modules and objects down,
    which costs a process that held a large study 0.3-0.8 s of CPU and writes nothing.

    Safe because studyrun closes what it writes before main() returns (its files through
    `with`, runs.sqlite and the lock file when the store's `with` ends, helper processes and
    clusters when their `with` ends); a file that a model opened in this process and never
    closed is flushed here, as teardown would."""
    import _io  # its _IOBase, every file object's base: io.IOBase's subclass check costs 0.1 s
    import atexit
    import gc
    import os
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter's exit calls first
    atexit._run_exitfuncs()
    objects = gc.get_objects()
    files = {kind for kind in set(map(type, objects)) if issubclass(kind, _io._IOBase)}
    for file in [thing for thing in objects if type(thing) in files]:
        try:
            if not file.closed and file.writable():
                file.flush()
        except Exception:  # a file's flush may be anyone's code: teardown would ignore it too
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def show_crashes() -> None:
    """Make a crash of this process (a python model's segfault under sync or threads) print
    where it happened on stderr."""
    import faulthandler

    if not faulthandler.is_enabled():
        try:
            faulthandler.enable(all_threads=False)
        except (AttributeError, OSError, ValueError):  # a stderr without a file descriptor
            pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="studyrun", description=__doc__.splitlines()[0],
        epilog="STUDYRUN_MEMORY_LIMIT (e.g. 16GB) sets the memory an analysis's sizes may take "
               "(default: 80% of the machine's); validate, plan and run refuse sizes beyond it")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    validate = commands.add_parser("validate", help="check study files without running anything")
    validate.add_argument("studies", nargs="+", type=Path, metavar="STUDY")
    validate.set_defaults(command=command_validate)

    plan = commands.add_parser("plan", help="show what would run")
    plan.add_argument("study", type=Path, metavar="STUDY")
    plan.add_argument("--csv", type=Path, metavar="FILE", help="write the design to FILE")
    plan.add_argument("--out", type=Path, metavar="DIR", help="the results folder a run would "
                      "reuse runs from (default results/NAME)")
    plan.add_argument("--cluster", nargs="?", const="study", metavar="KIND",
                      help="print the batch job script (the study's cluster block, or one for "
                      "KIND: slurm | pbs | sge | lsf | htcondor)")
    plan.set_defaults(command=command_plan)

    run = commands.add_parser(
        "run", help="run a study (resuming a previous run of it)",
        epilog="exit status: 0 when the study ran and was analysed; 1 when it could not run or "
               "finish (a failed run under on_failure: abort, no run succeeded under continue, a "
               "lost scheduler, a full disk), the runs recorded kept; 2 for a study file in error; "
               "130 after Ctrl-C and 143 after SIGTERM, the runs finished kept")
    run.add_argument("study", type=Path, metavar="STUDY")
    run.add_argument("--out", type=Path, metavar="DIR", help="results folder (default results/NAME)")
    run.add_argument("--scheduler", help="local | threads | sync | tcp://HOST:PORT")
    run.add_argument("--workers", type=int, help="number of workers")
    run.add_argument("--cluster", metavar="KIND", choices=CLUSTER_KINDS,
                     help="run on a batch system (slurm | pbs | sge | lsf | htcondor) with the "
                     "study's cluster block, or a default one")
    run.add_argument("--fresh", action="store_true", help="start over: forget earlier runs")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--no-report", dest="report", action="store_false",
                     help="write no report.md, report.html, figures/ or calibrate's CSVs "
                     "(`studyrun report DIR` writes them later)")
    run.set_defaults(command=command_run)

    check = commands.add_parser("check", help="integrate an equation model with its step and half of it")
    check.add_argument("study", type=Path, metavar="STUDY")
    check.set_defaults(command=command_check)

    status = commands.add_parser("status", help="progress and failures of a study, running or "
                                 "finished, from its results folder")
    status.add_argument("folder", type=Path, metavar="DIR")
    status.set_defaults(command=command_status)

    diff = commands.add_parser(
        "diff", help="what changed between two results folders (or a study and a git revision "
                     "of it): the study, the runs they share, every result that moved")
    diff.add_argument("a", type=Path, metavar="A", help="a results folder, or a study file with --rev")
    diff.add_argument("b", type=Path, metavar="B", nargs="?", help="the other results folder")
    diff.add_argument("--rev", metavar="REV", help="compare study file A with itself at this git "
                                                   "revision (a branch, tag or commit), running "
                                                   "nothing of either")
    diff.add_argument("--results", type=Path, metavar="DIR",
                      help="with --rev: the study's results folder (only read); the revision's "
                           "study, its model's code included, is run beside it (reusing its "
                           "runs) and their results compared")
    diff.add_argument("--fail-above", type=float, metavar="TOL",
                      help="exit 1 when a result moved by more than TOL (absolute), or beyond "
                           "the intervals the analysis gives it")
    diff.add_argument("--json", action="store_true", help="the difference as JSON")
    diff.set_defaults(command=command_diff)

    runs = commands.add_parser("runs", help="list the runs of a results folder")
    runs.add_argument("folder", type=Path, metavar="DIR")
    runs.add_argument("--failed", action="store_true",
                      help="only failed runs, with their errors and working directories")
    runs.add_argument("--limit", type=int, metavar="N", help="at most N runs")
    runs.set_defaults(command=command_runs)

    predict = commands.add_parser("predict", help="a doe response surface's or a surrogate's "
                                                   "prediction, with intervals")
    predict.add_argument("folder", type=Path, metavar="DIR")
    predict.add_argument("--at", required=True, action="append", metavar="NAME=VALUE,...",
                         help="the point in natural units, every factor of the fit; repeat the "
                         "flag or separate pairs with commas")
    predict.add_argument("--quantity", action="append", help="a fitted quantity (default: all)")
    predict.add_argument("--level", type=float, default=0.95,
                         help="interval level, between 0 and 1 (default 0.95)")
    predict.set_defaults(command=command_predict)

    report = commands.add_parser("report", help="rebuild report.md, report.html and figures from a results folder")
    report.add_argument("folder", type=Path, metavar="DIR")
    report.add_argument("--out", type=Path, metavar="DIR",
                        help="write report.md and figures/ into DIR (default: the results folder)")
    report.add_argument("--box", type=int, metavar="N", help="scenarios (prim): show step N of "
                        "the first box's peeling trajectory as the box, without running again")
    report.set_defaults(command=command_report)

    schema = commands.add_parser("schema", help="print the study file's JSON Schema (with "
                                 "--analysis, analysis.json's)")
    schema.add_argument("--analysis", action="store_true",
                        help="the schema of a results folder's analysis.json instead")
    schema.set_defaults(command=command_schema)
    return parser


def command_validate(args) -> int:
    from studyrun.study.loading import load_study

    problems = []
    for path in args.studies:
        try:
            load_study(path)
            print(f"{path}: valid")
        except StudyError as error:
            problems += error.problems
    if problems:
        raise StudyError(problems)
    return 0


def command_plan(args) -> int:
    from studyrun.commands.pipeline import settings_for
    from studyrun.execution.executors import scheduler_name
    from studyrun.plan.describe import (
        describe_adoption,
        describe_dependencies,
        describe_iterative,
        describe_plan,
        describe_reuse,
        write_design_csv,
    )
    from studyrun.plan.study import identity_record, plan_study
    from studyrun.study.loading import load_study

    loaded = load_study(args.study)
    folder = args.out or Path("results") / loaded.study.name
    record = identity_record(loaded)
    if loaded.study.analysis.iterative:
        print(describe_iterative(loaded))
        print(describe_dependencies(record))
        print(describe_reuse(folder, record, None))
        return 0
    plan = plan_study(loaded)
    scheduler = cluster_override(loaded.study.execution.scheduler, args.cluster)
    settings = settings_for(loaded.study, scheduler)
    settings.scheduler = scheduler_name(settings.scheduler)
    print(describe_plan(loaded, plan, settings))
    print(describe_dependencies(record))
    earlier = loaded.study.analysis.earlier_results(loaded.context)
    print(describe_reuse(folder, record, plan.run_ids, grows=earlier is not None))
    if earlier is not None:
        print(describe_adoption(earlier, plan.run_ids))
    if args.csv:
        write_design_csv(plan, args.csv)
        print(f"design written to {args.csv}")
    from studyrun.execution.clusters import job_name, job_script
    from studyrun.study.spec.execution import Cluster

    scheduler = scheduler or loaded.study.execution.scheduler
    if isinstance(scheduler, Cluster):
        name = job_name(folder)
        print(f"\n{scheduler.describe()}; each job, called {name} after the results folder, is "
              "submitted with this script:\n")
        print(terminal_safe(job_script(scheduler, name)))
    elif args.cluster:
        raise StudyError(f"{args.study}: execution.scheduler is {scheduler!r}, not a cluster block; "
                         "give a batch system: --cluster slurm (or pbs, sge, lsf, htcondor)")
    return 0


def cluster_override(scheduler, kind: str | None):
    """The cluster block `--cluster KIND` asks for; None when there is no such flag."""
    if kind is None or kind == "study":
        return None
    from studyrun.execution.clusters import with_kind
    from studyrun.study.spec.execution import KINDS

    if kind not in KINDS:
        raise StudyError(f"--cluster: unknown batch system {kind!r}; allowed: {', '.join(KINDS)}")
    return with_kind(scheduler, kind)


def command_run(args) -> int:
    from studyrun.commands.pipeline import print_warning, run_study

    if args.workers is not None and args.workers < 1:
        raise StudyError(f"--workers must be at least 1; got {args.workers}")
    scheduler = args.scheduler
    if scheduler:
        from studyrun.study.spec.execution import scheduler_problem

        problem = scheduler_problem(scheduler)
        if problem:
            raise StudyError(f"--scheduler: {problem}")
    if args.cluster:
        from studyrun.study.loading import load_study

        if scheduler:
            raise StudyError("give --scheduler or --cluster, not both")
        scheduler = cluster_override(load_study(args.study).study.execution.scheduler, args.cluster)
    shown: list[str] = []  # the study's own warnings, shown before its runs

    def warn(warning: str) -> None:
        print_warning(warning)
        shown.append(warning)

    analysis = run_study(args.study, args.out, scheduler=scheduler, workers=args.workers,
                         fresh=args.fresh, quiet=args.quiet, warn=warn,
                         report=args.report)
    folder = args.out or Path("results") / analysis["study"]
    runs = analysis["runs"]
    if runs["planned"] and not runs["succeeded"]:  # on_failure: continue, every run failed
        raise ExecutionError(f"{analysis['study']}: no run succeeded ({runs['failed']} of "
                             f"{runs['planned']} failed); their errors are in {folder}: "
                             f"studyrun runs {folder} --failed")
    print(f"{analysis['study']}: {describe_runs_done(runs)}; results in {folder}")
    show_warnings(analysis.get("warnings", [])[len(shown):], Path(folder) / "analysis.json")
    return 0


def show_warnings(warnings: list[str], where: Path) -> None:
    """The first WARNINGS_SHOWN warnings on stderr, one line each, then how many more `where`
    holds."""
    for warning in warnings[:WARNINGS_SHOWN]:
        print(f"studyrun: warning: {one_line(cut_values(warning))}", file=sys.stderr)
    if len(warnings) > WARNINGS_SHOWN:
        print(f"studyrun: warning: and {len(warnings) - WARNINGS_SHOWN} more (`warnings` in "
              f"{one_line(str(where))})", file=sys.stderr)


def describe_runs_done(runs: dict) -> str:
    """analysis.json's `runs` in words; an iterative analysis's repeated points counted apart."""
    given = f"{runs['given']} given, " if runs.get("given") else ""
    done = f"{runs['succeeded']} of {runs['planned']} runs succeeded ({given}{runs['failed']} failed, "
    if "evaluated" not in runs:
        return done + f"{runs['reused']} reused)"
    repeats = runs["evaluated"] - runs["planned"] + runs.get("given", 0)
    return (done + f"{runs['reused']} reused from an earlier session, {runs['executed']} executed "
            f"now); the analysis evaluated {runs['evaluated']} points, {repeats} of them repeats")


def command_check(args) -> int:
    from studyrun.execution.stepcheck import LIMIT, check_step
    from studyrun.study.loading import load_study

    loaded = load_study(args.study)
    result = check_step(loaded.context)
    if result is None:
        raise StudyError(f"{args.study}: the step check applies to ode and stockflow models; this "
                         f"study's model is {loaded.study.model_spec.type}")
    print(result.describe())
    name, worst = result.worst
    print(f"{'ok' if worst <= LIMIT else 'too coarse'}: largest difference {worst:.3g} ({name})")
    return 0 if worst <= LIMIT else 1


def command_status(args) -> int:
    from studyrun.commands.status import describe_status

    print(terminal_safe(describe_status(args.folder)))  # it shows the last models' errors
    return 0


def command_diff(args) -> int:
    from studyrun.commands.diff import diff_folders, diff_revision

    if args.results is not None and args.rev is None:
        raise StudyError("--results goes with --rev: studyrun diff STUDY.yaml --rev REV "
                         "--results DIR")
    if (args.rev is None) == (args.b is None):
        raise StudyError("studyrun diff takes two results folders (studyrun diff A B) or a study "
                         "file and a git revision (studyrun diff STUDY.yaml --rev main)")
    if args.fail_above is not None and not args.fail_above >= 0:
        raise StudyError(f"--fail-above must be a number of 0 or more; got {args.fail_above}")
    if args.fail_above is not None and args.rev is not None and args.results is None:
        raise StudyError("--fail-above guards results, and a study against a revision compares "
                         "results only with --results DIR (the study's results folder): "
                         "studyrun diff STUDY.yaml --rev REV --results DIR --fail-above TOL")
    try:
        found = (diff_revision(args.a, args.rev, args.results) if args.rev
                 else diff_folders(args.a, args.b))
    except StudyrunError as error:  # not a results folder, not in git: the input is wrong
        raise StudyError(str(error)) from None
    if args.json:
        print(json.dumps(found.as_json(args.fail_above), indent=2))
    else:
        print(terminal_safe(found.as_text(args.fail_above)))
    return 1 if args.fail_above is not None and found.moved(args.fail_above) else 0


def command_runs(args) -> int:
    from studyrun.commands.status import describe_runs

    print(terminal_safe(describe_runs(args.folder, failed_only=args.failed, limit=args.limit)))
    return 0


def describe_os_error(error: Exception) -> str:
    """One line for an operating-system or SQLite error: which file, and what went wrong."""
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename else "the results folder: "
        what = error.strerror or str(error)
        hint = {28: "; free some space", 13: "; check the folder's permissions",
                30: "; the file system is read-only"}.get(error.errno or 0, "")
        return (f"{where}cannot write: {what}{hint}. Runs recorded before are kept; run the "
                "study again to resume")
    return f"the run store failed: {error}; runs recorded before are kept"


def parse_point(texts: list[str]) -> dict[str, float]:
    """['a=1,b=2.5', 'c=3'] (each --at) -> {'a': 1.0, 'b': 2.5, 'c': 3.0}; a clear error otherwise."""
    point = {}
    for item in (part.strip() for text in texts for part in text.split(",")):
        if not item:
            continue
        name, _, value = (half.strip() for half in item.partition("="))
        try:
            number = float(value)
        except ValueError:
            raise StudyError(f"--at: expected NAME=VALUE pairs separated by commas, such as "
                             f"a=1,b=2.5; got {item!r}") from None
        if name in point:
            raise StudyError(f"--at: {name} is given twice ({point[name]:g} and {number:g}); "
                             "give each factor once")
        point[name] = number
    return point


def command_predict(args) -> int:
    from studyrun.commands.open_results import open_results
    from studyrun.results.report.markdown import format_number

    results = open_results(args.folder)
    point = parse_point(args.at)
    names = args.quantity or results.fitted_quantities()
    predictions = [results.predict(point, name, level=args.level) for name in names]

    def interval(pair):
        return "n/a" if not pair else f"[{format_number(pair[0])}, {format_number(pair[1])}]"

    for out in predictions:
        text = f"{out['quantity']}: {format_number(out['prediction'])}"
        if "confidence" in out:  # a doe response surface
            text += f"  {args.level * 100:g}% confidence {interval(out['confidence'])}"
        if out.get("prediction_interval") or "confidence" in out:
            text += f"  prediction {interval(out.get('prediction_interval'))}"
        if out.get("std") is not None:
            text += f"  (std {format_number(out['std'])})"
        print(text + ("  (extrapolated)" if out.get("extrapolation") else ""))
        if out.get("note"):
            print(f"  note: {out['note']}")
    return 0


def command_report(args) -> int:
    from studyrun.commands.open_results import rebuild_report

    report = rebuild_report(args.folder, args.out, args.box)
    print(f"wrote {report}, {report.with_suffix('.html').name} and {report.parent / 'figures'}/")
    return 0


def command_schema(args) -> int:
    from studyrun.commands.schema import analysis_schema, study_schema

    print(json.dumps(analysis_schema() if args.analysis else study_schema(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
