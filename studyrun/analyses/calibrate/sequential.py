"""Sequential identification (docs/methods.md, "Sequential identification"): a calibration that
starts from an earlier one's results folder, its shared parameters at the earlier estimates and
the earlier fitted trajectories as pseudo-data for outputs the data lack.

The earlier folder is read from its analysis.json (checked against its study.yaml), once while
the file is unchanged; every mistake about it is a located problem under `analysis.start` or
`analysis.pseudo_data`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from studyrun.analyses.base import StudyContext
from studyrun.analyses.calibrate.data import DataBlock, Observations, Variable
from studyrun.analyses.search.fit import Box, make_box
from studyrun.core.errors import Problem, StudyError, StudyrunError
from studyrun.core.text import suggest
from studyrun.results.outputs import read_finished


class Start(BaseModel):
    """`start:`: the earlier calibration whose estimates start this one."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: str = Field(alias="from", description="an earlier calibration's results folder, "
                                                 "relative to the study file's folder")
    parameters: list[str] | dict[str, str] | None = Field(
        None, description="the parameters that start at the earlier estimates: names shared by "
                          "both studies, or this study's name -> the earlier one's; default: every "
                          "varied parameter the earlier calibration estimated under the same name")


@dataclass(frozen=True)
class Earlier:
    """What this calibration takes from a finished earlier one."""

    folder: Path
    study: str
    study_yaml_sha256: str
    analysis_sha256: str
    estimates: dict[str, float]
    converged: bool
    time: np.ndarray | None  # the fitted run's output times, None when not stored
    series: dict[str, np.ndarray] = field(default_factory=dict)  # output -> fitted series
    data_span: tuple[float, float] | None = None  # the x range of the earlier data
    builds_on: dict | None = None  # the earlier study's own earlier study, if any

    def provenance(self) -> dict[str, Any]:
        """The chain of studies this one rests on, for analysis.json's provenance."""
        record = {"folder": str(self.folder), "study": self.study,
                  "study_yaml_sha256": self.study_yaml_sha256,
                  "analysis_json_sha256": self.analysis_sha256}
        return {**record, "builds_on": self.builds_on} if self.builds_on else record


_READ: dict[tuple, Earlier] = {}  # (folder, analysis.json's stamp) -> that folder read
_READ_KEPT = 8
WHERE = "start.from"


def read_earlier(start: Start, context: StudyContext) -> Earlier:
    """The earlier results folder's calibration, or a StudyError at `start.from`."""
    folder = context.path(start.from_).resolve()
    path = folder / "analysis.json"
    try:
        stat = path.stat()
        key: tuple = (str(folder), stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = ()
    if key and key in _READ:
        return _READ[key]
    try:
        finished = read_finished(folder)
    except (StudyrunError, OSError) as error:
        raise StudyError(str(error), path=WHERE) from None
    try:
        earlier = earlier_from(folder, finished.analysis, finished.analysis_sha256)
    except (TypeError, ValueError, KeyError, AttributeError) as error:  # a folder from elsewhere
        raise StudyError(f"{folder}: not a studyrun results folder: its analysis.json's "
                         f"calibration cannot be read ({type(error).__name__}: {error})",
                         path=WHERE) from None
    if key:
        while len(_READ) >= _READ_KEPT:
            _READ.pop(next(iter(_READ)))
        _READ[key] = earlier
    return earlier


def earlier_from(folder: Path, analysis: dict, digest: str) -> Earlier:
    """A finished calibration's estimates and fitted series from its analysis.json."""
    kind = analysis.get("analysis")
    results = analysis.get("results")
    if kind != "calibrate" or not isinstance(results, dict):
        raise StudyError(f"{folder} holds the results of a {kind or 'unknown'} study, not of a "
                         "calibration", path=WHERE)
    estimates = results.get("fitted")
    if not isinstance(estimates, dict) or not estimates:
        raise StudyError(f"{folder}: its analysis.json holds no estimates (`results.fitted`); "
                         "is it a finished calibration?", path=WHERE)
    fitted = results.get("fitted_series") or {}
    time = np.asarray(fitted["time"], float) if "time" in fitted else None
    series = {name: np.asarray([np.nan if v is None else v for v in values], float)
              for name, values in (fitted.get("series") or {}).items()}
    span = fitted.get("data_span")
    return Earlier(folder, str(analysis.get("study", "")), str(analysis.get("study_yaml_sha256", "")),
                   digest, {k: float(v) for k, v in estimates.items() if v is not None},
                   bool(results.get("converged")), time, series,
                   tuple(map(float, span)) if span else None,
                   (analysis.get("provenance") or {}).get("builds_on"))


def parameter_pairs(start: Start, context: StudyContext,
                    earlier: Earlier) -> tuple[dict[str, str], list[Problem]]:
    """This study's parameter -> the earlier one's whose estimate starts it, and the problems:
    a name that is no varied parameter here, or has no counterpart in the earlier calibration."""
    varied, known = list(context.varied), sorted(earlier.estimates)
    if start.parameters is None:
        pairs = {name: name for name in varied if name in earlier.estimates}
        return pairs, []
    asked = (start.parameters if isinstance(start.parameters, dict)
             else {name: name for name in start.parameters})
    pairs, problems = {}, []
    for index, (here, there) in enumerate(asked.items()):
        where = (f"start.parameters.{here}" if isinstance(start.parameters, dict)
                 else f"start.parameters[{index}]")
        if here not in varied:
            fixed = " (it is fixed here: only varied parameters start at an estimate)" \
                if here in context.parameters else suggest(here, varied)
            problems.append(Problem(f"{here!r} is not a varied parameter of this study{fixed}",
                                    where))
        elif there not in earlier.estimates:
            problems.append(Problem(f"{there!r} has no counterpart among the parameters "
                                    f"{earlier.study or earlier.folder} estimated "
                                    f"({', '.join(known)}){suggest(there, known)}", where))
        else:
            pairs[here] = there
    return pairs, problems


def start_problems(spec, context: StudyContext) -> list[Problem]:
    """What is wrong with `start` and `pseudo_data`, located under them."""
    if spec.start is None:
        return [Problem("pseudo_data takes series from an earlier calibration: give its results "
                        "folder in start: {from: FOLDER}", "pseudo_data")]
    try:
        earlier = read_earlier(spec.start, context)
    except StudyError as error:
        return error.problems
    pairs, problems = parameter_pairs(spec.start, context, earlier)
    if spec.start.parameters is None and not pairs and not spec.pseudo_data:
        problems.append(Problem(
            f"{earlier.study or earlier.folder} estimated {', '.join(sorted(earlier.estimates))}, "
            f"none of which is varied here ({', '.join(context.varied)}); pair them under "
            "start.parameters (this study's name: the earlier one's)", WHERE))
    return problems + pseudo_problems(spec, context, earlier)


def pseudo_problems(spec, context: StudyContext, earlier: Earlier) -> list[Problem]:
    """Each pseudo-data series exists in the earlier fit, is an output here and is not observed."""
    from studyrun.analyses.calibrate.data import read_blocks

    if not spec.pseudo_data:
        return []
    if earlier.time is None:
        return [Problem(f"{earlier.folder} was calibrated by a studyrun that did not keep the "
                        "fitted trajectories (`results.fitted_series`); run that study again",
                        "pseudo_data")]
    outputs = context.model.output_names()
    try:
        observed = {v.output for obs in read_blocks(spec.blocks, context.folder)
                    for v in obs.variables}
    except StudyError:  # the data's own check reports it
        observed = set()
    problems = []
    for index, name in enumerate(spec.pseudo_data):
        where = f"pseudo_data[{index}]"
        if name not in earlier.series:
            problems.append(Problem(f"the earlier fit has no series {name!r}"
                                    f"{suggest(name, earlier.series)}; it has "
                                    f"{', '.join(sorted(earlier.series))}", where))
        elif outputs is not None and name not in outputs:
            problems.append(Problem(f"{name!r} is not an output of this model"
                                    f"{suggest(name, outputs)}", where))
        elif name in observed:
            problems.append(Problem(f"the data observe {name!r} already; pseudo-data stand in "
                                    "for outputs the data lack", where))
    return problems


def start_box(spec, context: StudyContext) -> tuple[Box, dict[str, Any]]:
    """The fit's box, its start at the earlier estimates where `start` pairs a parameter, and
    what came from where (the results' `start` block; empty without `start`)."""
    box = make_box(context.varied, context.defaults)
    if spec.start is None:
        return box, {}
    earlier = read_earlier(spec.start, context)
    pairs, problems = parameter_pairs(spec.start, context, earlier)
    if problems:
        raise StudyError(problems)
    start, sources, notes = box.start.copy(), {}, []
    for j, name in enumerate(box.names):
        if name not in pairs:
            sources[name] = {"value": float(start[j]), "from": "nominal"}
            continue
        value = earlier.estimates[pairs[name]]
        start[j] = min(max(value, box.lo[j]), box.hi[j])
        if start[j] != value:
            notes.append(f"{name}: the earlier estimate {value:g} lies outside the bounds "
                         f"[{box.lo[j]:g}, {box.hi[j]:g}]; it starts at the bound")
        sources[name] = {"value": float(start[j]), "from": f"{earlier.study}: {pairs[name]}"}
    if not earlier.converged:
        notes.append(f"the earlier calibration ({earlier.study}) did not converge")
    record = {"folder": str(earlier.folder), "study": earlier.study,
              "study_yaml_sha256": earlier.study_yaml_sha256, "parameters": sources,
              "pseudo_data": pseudo_summary(spec, context, earlier), "notes": notes}
    return Box(box.names, box.lo, box.hi, start), record


def pseudo_times(earlier: Earlier, context: StudyContext) -> np.ndarray:
    """Which of the earlier fit's output times take pseudo-data: those within the x range of
    the earlier data (beyond it the earlier model extrapolates) and this model's time span."""
    if earlier.time is None:
        return np.zeros(0, bool)
    keep = np.ones(len(earlier.time), bool)
    time = getattr(context.model, "time", None)
    spans = ([earlier.data_span] if earlier.data_span else []) + (
        [(float(time.start), float(time.stop))] if time is not None else [])
    for lo, hi in spans:
        tolerance = 1e-9 * max(1.0, abs(lo), abs(hi))
        keep &= (earlier.time >= lo - tolerance) & (earlier.time <= hi + tolerance)
    return keep


def pseudo_observations(spec, context: StudyContext, first_index: int) -> list[Observations]:
    """The earlier fitted series named by `pseudo_data`, as one more data block (weight 1 per
    point, like `weight: none`), at the earlier output times within this model's span."""
    if not spec.pseudo_data:
        return []
    earlier = read_earlier(spec.start, context)
    problems = pseudo_problems(spec, context, earlier)
    if problems:
        raise StudyError(problems)
    keep = pseudo_times(earlier, context)
    variables = []
    for name in spec.pseudo_data:
        values = earlier.series[name]
        good = keep & np.isfinite(values)
        variables.append(Variable(f"{name} (pseudo-data)", name, (1, 1), earlier.time[good],
                                  values[good], None))
    block = DataBlock(file=str(earlier.folder / "analysis.json"))
    return [Observations(block, first_index, variables)]


def pseudo_summary(spec, context: StudyContext, earlier: Earlier) -> dict[str, dict]:
    """Per pseudo-data series: how many points it adds and over which times."""
    if not spec.pseudo_data:
        return {}
    keep = pseudo_times(earlier, context)
    summary = {}
    for name in spec.pseudo_data:
        times = earlier.time[keep & np.isfinite(earlier.series[name])]
        summary[name] = {"points": int(len(times)),
                         "time": [float(times[0]), float(times[-1])] if len(times) else None}
    return summary


def fitted_series(outcome, row: int, observed: list[np.ndarray]) -> dict[str, Any]:
    """The fitted run's every output series on its output times, and the x range of the data it
    was fitted to, for a later study's pseudo-data (results `fitted_series`; also fitted.csv)."""
    if outcome.time is None:
        return {}
    x = np.concatenate(observed)
    return {"time": np.asarray(outcome.time, float).tolist(),
            "series": {name: np.asarray(values[row], float).tolist()
                       for name, values in outcome.series.items()},
            "data_span": [float(x.min()), float(x.max())]}
