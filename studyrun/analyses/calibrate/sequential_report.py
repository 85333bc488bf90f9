"""The report's part of a sequential fit: where each parameter started and which earlier study's
series stood in for data; and fitted.csv, the fitted run's series for a later study."""

from __future__ import annotations

import csv

from studyrun.results.outputs import replacing
from studyrun.results.report.markdown import escape, table


def write_fitted(path, fitted: dict) -> None:
    """The fitted run's series in FME's long format: name, time, value."""
    with replacing(path) as temporary, open(temporary, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "time", "value"])
        for name, values in fitted["series"].items():
            writer.writerows([name, t, v] for t, v in zip(fitted["time"], values))


def section_start(results: dict) -> list[str]:
    start = results.get("start")
    if not start:
        return []
    lines = ["### Sequential start", "",
             f"Started from the calibration {escape(start['study'])} in "
             f"{escape(start['folder'])} (study.yaml sha256 "
             f"{escape(str(start['study_yaml_sha256'])[:12])}).", "",
             table(["parameter", "start", "from"],
                   [[n, p["value"], p["from"]] for n, p in start["parameters"].items()]), ""]
    pseudo = start.get("pseudo_data") or {}
    if pseudo:
        lines += [f"- {escape(name)}: {escape(p['points'])} points of "
                  f"{escape(start['study'])}'s fitted series"
                  + (f" over [{p['time'][0]:g}, {p['time'][1]:g}]" if p["time"] else "")
                  + " stand in for data (weight 1 each)." for name, p in pseudo.items()]
    lines += [f"- {escape(note)}" for note in start.get("notes", [])]
    return lines + [""]
