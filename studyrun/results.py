"""Reading a results folder back: the study, analysis.json, the runs; rebuilding the report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import StudyrunError


@dataclass
class Results:
    """A finished study: its analysis (analysis.json) and its runs (runs.csv as a DataFrame)."""

    folder: Path
    analysis: dict[str, Any]

    @property
    def runs(self):
        """runs.csv as a DataFrame. Only an empty field is missing (an error reading "NA" stays
        text), and `error` and `worker` are text columns even when every field is empty."""
        import pandas

        return pandas.read_csv(self.folder / "runs.csv", keep_default_na=False, na_values=[""],
                               dtype={"error": object, "worker": object})

    @property
    def results(self) -> dict[str, Any]:
        return self.analysis["results"]


def open_results(folder: str | Path) -> Results:
    """Read a results folder written by `studyrun run`."""
    folder = Path(folder)
    path = folder / "analysis.json"
    if not path.is_file():
        raise StudyrunError(f"{folder}: no analysis.json here; is it a results folder of a "
                            "finished `studyrun run`?")
    return Results(folder, json.loads(path.read_text()))


def rebuild_report(folder: str | Path) -> None:
    """report.md and figures/ again from study.yaml, analysis.json and runs.sqlite."""
    from .pipeline import load_study, plan_study, read_outcome, write_report
    from .quantities import Quantities
    from .store import RunStore

    folder = Path(folder)
    results = open_results(folder)
    origin = Path(results.analysis.get("provenance", {}).get("study_file", folder / "study.yaml"))
    loaded = load_study(folder / "study.yaml", check=False)
    loaded.path = origin if origin.exists() else folder / "study.yaml"
    plan = plan_study(loaded)
    with RunStore.open(folder / "runs.sqlite", lock=False) as store:
        outcome = read_outcome(plan, store, Quantities(loaded.study.quantities), loaded.study.analysis)
    write_report(folder, loaded.study, results.analysis, outcome)
