"""Reading a results folder back: the study, analysis.json, the runs; rebuilding the report."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studyrun.core.csv_table import read_header, unescape_text
from studyrun.core.errors import StudyError, StudyrunError
from studyrun.core.runtable import CSV_FIXED, LEGACY_FIXED
from studyrun.results.analysis_file import Malformed, not_results
from studyrun.results.outputs import read_analysis


@dataclass
class Results:
    """A finished study: its analysis (analysis.json) and its runs (runs.csv as a DataFrame)."""

    folder: Path
    analysis: dict[str, Any]

    @property
    def runs(self):
        """The runs as a DataFrame, from runs.parquet (typed) where the study exported it, else
        from runs.csv: only an empty field is missing (an error reading "NA" stays text), and
        `run.error` and `run.worker` are text columns even when every field is empty, as
        written before the quote that keeps spreadsheets from running them. A file written
        before studyrun's own columns were named `run.`... is read with those names."""
        import pandas

        text = {name: object for name in ("run.status", "run.error", "run.worker")}
        if (self.folder / "runs.parquet").exists():
            frame = pandas.read_parquet(self.folder / "runs.parquet")
            return renamed_legacy(frame).astype(text)
        path = self.folder / "runs.csv"
        first = read_header(path, check_separators=False).header  # as store/finished_runs
        # reads it; pandas would rename a second `y` to `y.1`
        legacy = tuple(first[:len(LEGACY_FIXED)]) == LEGACY_FIXED
        frame = renamed_legacy(pandas.read_csv(
            path, keep_default_na=False, na_values=[""],
            dtype={name: object for name in (LEGACY_FIXED[2:4] + LEGACY_FIXED[5:] if legacy
                                             else text)}))
        for column in ("run.error", "run.worker"):  # text a spreadsheet would run has a ' before it
            if column in frame:
                frame[column] = frame[column].map(unescape_text, na_action="ignore").astype(object)
        return frame

    @property
    def series(self):
        """series.parquet (run, id, output, time, value) as a DataFrame; None without it."""
        import pandas

        path = self.folder / "series.parquet"
        if not path.exists():
            return None
        return pandas.read_parquet(path).astype({"output": object})

    @property
    def results(self) -> dict[str, Any]:
        return self.analysis["results"]

    def fitted_quantities(self) -> list[str]:
        """The quantities with a response surface (doe) or a surrogate to predict from."""
        self._predictor()
        return [q for q, r in self.results.items()
                if not q.startswith("_") and isinstance(r, dict)
                and ("coefficients" in r or "inputs" in r)]

    def predict(self, at: dict[str, float], quantity: str | None = None,
                level: float = 0.95) -> dict[str, Any]:
        """The fitted model's prediction at `at` (natural units) with its intervals; for one
        quantity, or a dict of every fitted quantity's when `quantity` is None."""
        predict = self._predictor()
        try:
            if quantity is None:
                return {q: predict(self.analysis, q, at, level=level)
                        for q in self.fitted_quantities()}
            return predict(self.analysis, quantity, at, level=level)
        except Malformed as error:  # a fit that studyrun did not store: refused before computing
            raise not_results(self.folder, f"analysis.json: {error}") from None

    def _predictor(self):
        from studyrun.study.spec.registry import registry

        kind = self.analysis.get("analysis")
        predict = registry().predictor(kind)
        if predict is None:
            kinds = " or ".join(registry().predicting())
            raise StudyError(f"{self.folder}: predict needs the results of a {kinds} analysis; "
                             f"this folder holds a {kind} analysis")
        return predict


def renamed_legacy(frame):
    """A runs table whose first columns are studyrun's own as written before format 3 (`run`,
    `id`, `status` ...), with those columns under their present names (`run.index` ...)."""
    if tuple(frame.columns[:len(LEGACY_FIXED)]) != LEGACY_FIXED:
        return frame
    return frame.rename(columns=dict(zip(frame.columns[:len(LEGACY_FIXED)], CSV_FIXED)))


def open_results(folder: str | Path) -> Results:
    """Read a results folder written by `studyrun run` (it may be read-only); results that do not
    belong to the folder's study.yaml are an error."""
    folder = Path(folder)
    return Results(folder, read_analysis(folder))


def rebuild_report(folder: str | Path, out: str | Path | None = None,
                   box: int | None = None) -> Path:
    """report.md and figures/ again from study.yaml, analysis.json and runs.sqlite, written into
    the folder (holding its lock) or into `out`; returns the report's path. The runs are those of
    the files the store last recorded; an iterative analysis's report reads analysis.json only,
    as when it ran. `box`: the step of a PRIM trajectory the report shows as the first box."""
    from studyrun.blocks.quantities import Quantities
    from studyrun.plan.runs import read_outcome
    from studyrun.plan.study import plan_study
    from studyrun.results.report.build import write_report
    from studyrun.store.run_store import RunStore, acquire_lock, latest_identity, release_lock
    from studyrun.study.loading import load_study

    folder = Path(folder)
    results = open_results(folder)
    target = Path(out) if out is not None else folder
    origin = Path((results.analysis.get("provenance") or {}).get("study_file") or folder / "study.yaml")
    with RunStore.open_readonly(folder / "runs.sqlite") as store:
        recorded = latest_identity(store.db)  # the runs' files as they were: edited since, or gone
        loaded = dataclasses.replace(load_study(folder / "study.yaml", check=False),
                                     path=origin if exists(origin) else folder / "study.yaml",
                                     digests=None if recorded is None else recorded["files"])
        outcome = None if loaded.study.analysis.iterative else read_outcome(
            plan_study(loaded), store, Quantities(loaded.study.quantities),
            loaded.study.analysis, loaded.context, series=False)  # a report draws no series
    study = loaded.study if box is None else with_box(loaded.study, box, folder,
                                                      results.results)
    try:
        target.mkdir(parents=True, exist_ok=True)
        lock = acquire_lock(folder / "runs.sqlite") if out is None else None
        try:
            write_report(target, study, results.analysis, outcome)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
            # analysis.json's own `results` are checked by the report that reads them: a
            # folder from elsewhere holding other shapes there is refused at that reader
            raise not_results(folder, f"analysis.json's results are not what a "
                                      f"{results.analysis['analysis']} report reads "
                                      f"({type(error).__name__}: {error})") from None
        finally:
            if lock is not None:
                release_lock(lock)
    except OSError as error:
        raise StudyrunError(f"{target}: cannot write report.md and figures/ there "
                            f"({error.strerror or error}); `studyrun report {folder} --out DIR` "
                            "writes them into another folder") from None
    return target / "report.md"


def with_box(study, box: int, folder: Path, results: dict[str, Any]):
    """The study with its scenarios analysis showing step `box` of the first box's trajectory."""
    spec = study.analysis
    if getattr(spec, "method", None) != "prim" or "box" not in type(spec).model_fields:
        raise StudyError(f"{folder}: --box picks a step of a PRIM box; this folder holds a "
                         f"{spec.type} analysis{'' if spec.type != 'scenarios' else ' (cart)'}")
    steps = len(((results.get("boxes") or [{}])[0]).get("trajectory") or [])
    if not 0 <= box < steps:
        raise StudyError(f"--box {box}: the first box's trajectory has steps 0 to {steps - 1}; "
                         "give one of them")
    return study.model_copy(update={"analysis": spec.model_copy(update={"box": box})})


def exists(path: Path) -> bool:
    """Whether a path named in analysis.json exists; a name no file system takes does not."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False
