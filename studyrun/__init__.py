"""studyrun: declarative studies of simulation models, from a YAML file to analysed results.

The Python API follows the command line: `load(path)` validates a study, `run(path)` runs it and
returns its results, `open_results(folder)` reads a finished results folder back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from studyrun.core.errors import StudyError, StudyrunError, named_only_outside

if TYPE_CHECKING:
    from studyrun.commands.open_results import Results, open_results

__version__ = "0.1.0"
__all__ = ["load", "run", "open_results", "Results", "StudyError", "StudyrunError", "__version__"]


def __getattr__(name: str) -> Any:
    """`Results` and `open_results`, imported when first asked for: a Dask worker, which
    imports studyrun to run a batch, does not import the results readers (0.3 s a worker)."""
    if name in ("Results", "open_results"):
        from studyrun.commands import open_results as module

        return getattr(module, name)
    raise AttributeError(f"module 'studyrun' has no attribute {name!r}")


def load(path: str | Path):
    """The validated `Study` of a study file (raises StudyError listing every problem)."""
    from studyrun.study.loading import load_study

    return load_study(path).study  # load_study names files outside the folder, never quotes them


def run(path: str | Path, out: str | Path | None = None, *, scheduler: str | None = None,
        workers: int | None = None, fresh: bool = False, quiet: bool = True,
        report: bool = True) -> Results:
    """Run a study file as `studyrun run` does; return its Results (analysis dict, runs frame).
    `report=False` draws no report, as `--no-report`."""
    from studyrun.commands.open_results import Results
    from studyrun.commands.pipeline import run_study

    with named_only_outside(path):  # as the command line: a file outside the folder never quoted
        analysis = run_study(path, out, scheduler=scheduler, workers=workers, fresh=fresh,
                             quiet=quiet, report=report)
    folder = Path(out) if out else Path("results") / analysis["study"]
    return Results(folder, analysis)
