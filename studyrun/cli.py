"""The command line: `studyrun validate | plan | run | report | schema`.

A StudyError prints as FILE:LINE:COL: path: message lines and exits 2; other studyrun errors print
one line and exit 1; a traceback appears only with --debug.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import StudyError, StudyrunError


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.command(args) or 0)
    except StudyError as error:
        if args.debug:
            raise
        print(str(error), file=sys.stderr)
        return 2
    except StudyrunError as error:
        if args.debug:
            raise
        print(f"studyrun: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("studyrun: interrupted; finished runs are saved, run again to resume", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="studyrun", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    validate = commands.add_parser("validate", help="check study files without running anything")
    validate.add_argument("studies", nargs="+", type=Path, metavar="STUDY")
    validate.set_defaults(command=command_validate)

    plan = commands.add_parser("plan", help="show what would run")
    plan.add_argument("study", type=Path, metavar="STUDY")
    plan.add_argument("--csv", type=Path, metavar="FILE", help="write the design to FILE")
    plan.set_defaults(command=command_plan)

    run = commands.add_parser("run", help="run a study (resuming a previous run of it)")
    run.add_argument("study", type=Path, metavar="STUDY")
    run.add_argument("--out", type=Path, metavar="DIR", help="results folder (default results/NAME)")
    run.add_argument("--scheduler", help="local | threads | sync | tcp://HOST:PORT")
    run.add_argument("--workers", type=int, help="number of workers")
    run.add_argument("--fresh", action="store_true", help="start over: forget earlier runs")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(command=command_run)

    report = commands.add_parser("report", help="rebuild report.md and figures from a results folder")
    report.add_argument("folder", type=Path, metavar="DIR")
    report.set_defaults(command=command_report)

    schema = commands.add_parser("schema", help="print the study file's JSON Schema")
    schema.set_defaults(command=command_schema)
    return parser


def command_validate(args) -> int:
    from .pipeline import load_study

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
    from .pipeline import load_study, plan_study, settings_for
    from .plan_view import describe_plan, write_design_csv

    loaded = load_study(args.study)
    plan = plan_study(loaded)
    print(describe_plan(loaded, plan, settings_for(loaded.study)))
    if args.csv:
        write_design_csv(plan, args.csv)
        print(f"design written to {args.csv}")
    return 0


def command_run(args) -> int:
    from .pipeline import run_study

    if args.workers is not None and args.workers < 1:
        raise StudyError(f"--workers must be at least 1; got {args.workers}")
    analysis = run_study(args.study, args.out, scheduler=args.scheduler, workers=args.workers,
                         fresh=args.fresh, quiet=args.quiet)
    runs = analysis["runs"]
    folder = args.out or Path("results") / analysis["study"]
    print(f"{analysis['study']}: {runs['succeeded']} of {runs['planned']} runs succeeded "
          f"({runs['failed']} failed, {runs['reused']} reused); results in {folder}")
    return 0


def command_report(args) -> int:
    from .results import rebuild_report

    rebuild_report(args.folder)
    print(f"wrote {args.folder / 'report.md'}")
    return 0


def command_schema(args) -> int:
    from .schema import study_schema

    print(json.dumps(study_schema(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
