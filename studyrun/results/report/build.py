"""report.md: the study, its runs, the analysis's own sections, failures and provenance."""

from __future__ import annotations

import sys
from pathlib import Path

from studyrun.core.design import Outcome
from studyrun.core.text import one_line
from studyrun.results import outputs
from studyrun.results.report.figures import Figures, old_objects_frozen
from studyrun.results.report.markdown import code, escape, paragraphs, table

RUN_COUNTS = ("planned", "succeeded", "failed", "reused", "given", "evaluated", "executed")  # README


def build_report(folder: Path, study, analysis: dict, outcome: Outcome | None) -> str:
    """The whole Markdown report for a results folder. Every text that studyrun did not write
    (the study's, a CSV's, analysis.json's) goes through report.markdown's escaping."""
    runs = analysis["runs"]
    lines = [f"# {escape(study.name)}", ""]
    if study.description:
        lines += [paragraphs(study.description), ""]
    model = (f"with a **{escape(study.model.type)}** model" if study.model is not None
             else "of given runs (no model)")
    given = analysis.get("provenance", {}).get("given")
    source = (f"; the runs were given: {code(given['file'])} ({escape(given['rows'])} rows)"
              if given else "")
    lines += [f"Analysis: **{escape(analysis['analysis'])}** {model}{source}.", "",
              table(shown := [k for k in RUN_COUNTS if k in runs], [[runs[k] for k in shown]]), ""]
    lines += ["## Parameters", "", table(["name", "specification"],
              [[name, describe_parameter(p)] for name, p in study.parameters.items()]), ""]
    if study.quantities:
        lines += ["## Quantities", "", table(["name", "definition"],
                  [[name, code(text)] for name, text in study.quantities.items()]), ""]
    if outcome is not None and 0 < len(outcome.ok) < runs["planned"]:
        lines += [f"The figures show the first {len(outcome.ok):,} runs of the design's "
                  f"{runs['planned']:,}; the tables summarise every run.", ""]
    figures = Figures(folder / "figures")
    section = analysis_section(study, analysis, outcome, figures)
    lines += [figures.note(), ""] if figures.note() else []
    lines += [section, ""]
    provenance = analysis.get("provenance", {})
    if provenance:
        lines += ["## Provenance", "",
                  f"studyrun {escape(provenance.get('studyrun'))}, Python "
                  f"{escape(provenance.get('python'))}, seed {escape(provenance.get('seed'))}, "
                  f"study sha256 {code(str(provenance.get('study_sha256', ''))[:16] + '…')}, "
                  f"{describe_git(provenance.get('git') or {})}; "
                  f"{escape(provenance.get('started'))} to {escape(provenance.get('finished'))}."
                  + describe_chain(provenance.get("builds_on")), ""]
    return "\n".join(lines)


def describe_chain(builds_on: dict | None) -> str:
    """The earlier studies whose results these rest on (a sequential calibration), latest first."""
    links = []
    while isinstance(builds_on, dict) and len(links) < 100:
        sha256 = code(str(builds_on.get("study_yaml_sha256", ""))[:16] + "…")
        links.append(f"{escape(builds_on.get('study'))} in {escape(builds_on.get('folder'))} "
                     f"(study.yaml sha256 {sha256})")
        builds_on = builds_on.get("builds_on")
    return f" Builds on the results of {', which builds on '.join(links)}." if links else ""


def describe_git(git: dict) -> str:
    """The study's commit and whether its work tree was dirty, as the provenance line says it."""
    if not git.get("commit"):
        return "not in a git repository (or git could not read it)"
    dirty = git.get("dirty")
    state = " (dirty)" if dirty else "" if dirty is False else " (clean or dirty: unknown)"
    return f"git {escape(str(git['commit'])[:12])}{state}"


def analysis_section(study, analysis: dict, outcome: Outcome | None, figures: Figures) -> str:
    """The analysis's own section; where numpy or matplotlib cannot draw the values (spans near
    the float limit, 1e308) a note stands in for it: the results are in analysis.json already."""
    try:
        return study.analysis.report(analysis, outcome, figures)
    except (ValueError, OverflowError) as error:
        print(f"studyrun: warning: the report's {one_line(str(analysis['analysis']))} section "
              f"was not drawn: {one_line(str(error))}", file=sys.stderr)
        return (f"*The {escape(analysis['analysis'])} section could not be drawn "
                f"({escape(error)}); the results are in analysis.json and runs.csv.*")


def describe_parameter(parameter) -> str:
    """A parameter's specification in one short line."""
    data = parameter.model_dump(exclude_none=True) if hasattr(parameter, "model_dump") else parameter
    return ", ".join(f"{k}={v}" for k, v in data.items()) if isinstance(data, dict) else str(data)


def write_report(folder: Path, study, analysis: dict, outcome: Outcome | None) -> None:
    """report.md, figures/ and report.html (the same content, one self-contained page) from
    the analysis and the runs."""
    from studyrun.results.report.html import write_html

    with old_objects_frozen():
        text = build_report(folder, study, analysis, outcome)
        outputs.write_text(folder / "report.md", text)
        write_html(folder, text, study.name)
