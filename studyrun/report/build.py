"""report.md: the study, its runs, the analysis's own sections, failures and provenance."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import outputs
from ..core.design import Outcome
from .figures import Figures
from .markdown import table

RUN_COUNTS = ("planned", "succeeded", "failed", "reused", "given", "evaluated", "executed")  # README


def build_report(folder: Path, study, analysis: dict, outcome: Outcome | None) -> str:
    """The whole Markdown report for a results folder."""
    runs = analysis["runs"]
    lines = [f"# {study.name}", ""]
    if study.description:
        lines += [study.description.strip(), ""]
    model = (f"with a **{study.model.type}** model" if study.model is not None
             else "of given runs (no model)")
    given = analysis.get("provenance", {}).get("given")
    source = f"; the runs were given: `{given['file']}` ({given['rows']} rows)" if given else ""
    lines += [f"Analysis: **{analysis['analysis']}** {model}{source}.", "",
              table(shown := [k for k in RUN_COUNTS if k in runs], [[runs[k] for k in shown]]), ""]
    lines += ["## Parameters", "", table(["name", "specification"],
              [[name, describe_parameter(p)] for name, p in study.parameters.items()]), ""]
    if study.quantities:
        lines += ["## Quantities", "", table(["name", "definition"],
                  [[name, f"`{text}`"] for name, text in study.quantities.items()]), ""]
    if outcome is not None and 0 < len(outcome.ok) < runs["planned"]:
        lines += [f"The figures show the first {len(outcome.ok):,} runs of the design's "
                  f"{runs['planned']:,}; the tables summarise every run.", ""]
    lines += [analysis_section(folder, study, analysis, outcome), ""]
    provenance = analysis.get("provenance", {})
    if provenance:
        lines += ["## Provenance", "",
                  f"studyrun {provenance.get('studyrun')}, Python {provenance.get('python')}, "
                  f"seed {provenance.get('seed')}, study sha256 `{provenance.get('study_sha256', '')[:16]}…`, "
                  f"{describe_git(provenance.get('git') or {})}; "
                  f"{provenance.get('started')} to {provenance.get('finished')}."
                  + describe_chain(provenance.get("builds_on")), ""]
    return "\n".join(lines)


def describe_chain(builds_on: dict | None) -> str:
    """The earlier studies whose results these rest on (a sequential calibration), latest first."""
    links = []
    while isinstance(builds_on, dict) and len(links) < 100:
        links.append(f"{builds_on.get('study')} in {builds_on.get('folder')} (study.yaml sha256 "
                     f"`{str(builds_on.get('study_yaml_sha256', ''))[:16]}…`)")
        builds_on = builds_on.get("builds_on")
    return f" Builds on the results of {', which builds on '.join(links)}." if links else ""


def describe_git(git: dict) -> str:
    """The study's commit and whether its work tree was dirty, as the provenance line says it."""
    if not git.get("commit"):
        return "not in a git repository (or git could not read it)"
    dirty = git.get("dirty")
    state = " (dirty)" if dirty else "" if dirty is False else " (clean or dirty: unknown)"
    return f"git {str(git['commit'])[:12]}{state}"


def analysis_section(folder: Path, study, analysis: dict, outcome: Outcome | None) -> str:
    """The analysis's own section; where numpy or matplotlib cannot draw the values (spans near
    the float limit, 1e308) a note stands in for it: the results are in analysis.json already."""
    try:
        return study.analysis.report(analysis, outcome, Figures(folder / "figures"))
    except (ValueError, OverflowError) as error:
        print(f"studyrun: warning: the report's {analysis['analysis']} section was not drawn: "
              f"{error}", file=sys.stderr)
        return (f"*The {analysis['analysis']} section could not be drawn ({error}); the results "
                "are in analysis.json and runs.csv.*")


def describe_parameter(parameter) -> str:
    """A parameter's specification in one short line."""
    data = parameter.model_dump(exclude_none=True) if hasattr(parameter, "model_dump") else parameter
    return ", ".join(f"{k}={v}" for k, v in data.items()) if isinstance(data, dict) else str(data)


def write_report(folder: Path, study, analysis: dict, outcome: Outcome | None) -> None:
    """report.md, figures/ and report.html (the same content, one self-contained page) from
    the analysis and the runs."""
    from .html import write_html

    text = build_report(folder, study, analysis, outcome)
    outputs.write_text(folder / "report.md", text)
    write_html(folder, text, study.name)
