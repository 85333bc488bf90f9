"""The load step's result: the `Study` model, its unions, and the checks that span sections.

The registry of model and analysis types is the discriminated unions below; a new type adds its
class here and nowhere else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    NonNegativeInt,
    PositiveInt,
    Tag,
    field_validator,
)

from .analyses.calibrate import Calibrate
from .analyses.delta import Delta
from .analyses.dgsm import Dgsm
from .analyses.doe import Doe
from .analyses.fast import Fast
from .analyses.local import Local
from .analyses.montecarlo import Montecarlo
from .analyses.morris import Morris
from .analyses.optimize import Optimize
from .analyses.pawn import Pawn
from .analyses.rbd_fast import RbdFast
from .analyses.sobol import Sobol
from .analyses.sweep import Sweep
from .clusters import Cluster
from .core.runtable import RESERVED
from .core.text import suggest
from .dependencies import check_depends_on
from .executors import scheduler_problem
from .expr import ExprError
from .models.command import Command
from .models.ode import Ode
from .models.pysd import Pysd
from .models.python import Python
from .models.stockflow import Stockflow
from .params import ParameterSpec, varied
from .quantities import parse_quantity, shape_problem

ModelUnion = Annotated[Union[Python, Command, Ode, Stockflow, Pysd], Field(discriminator="type")]
AnalysisUnion = Annotated[Union[Montecarlo, Sweep, Sobol, Morris, Fast, RbdFast, Delta, Pawn, Dgsm,
                                Doe, Local, Calibrate, Optimize],
                          Field(discriminator="type")]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _scheduler_kind(value) -> str:
    return "cluster" if isinstance(value, (dict, Cluster)) else "name"


Scheduler = Annotated[Union[Annotated[str, Tag("name")], Annotated[Cluster, Tag("cluster")]],
                      Discriminator(_scheduler_kind)]


class Execution(BaseModel):
    """How the runs are executed; the command line overrides any of these."""

    model_config = ConfigDict(extra="forbid")

    scheduler: Scheduler = Field(
        "local", description="local | threads | sync | tcp://host:port | a cluster block "
        "{cluster: slurm | pbs | sge | lsf | htcondor, cores, memory, walltime, jobs, ...}")
    workers: PositiveInt | None = Field(None, description="worker processes (default: one per "
                                        "core; a cluster block counts its own)")
    batch_size: PositiveInt | Literal["auto"] = "auto"
    retries: NonNegativeInt = Field(0, description="re-runs of failed runs and lost batches")
    timeout: float | None = Field(None, gt=0, description="seconds per run (command models; a "
                                  "python model runs in the worker and cannot be stopped)")
    on_failure: Literal["abort", "continue"] = "abort"
    keep: Literal["quantities", "series"] = Field(
        "quantities", description="series: keep every run's time series in the store too")
    depends_on: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="files the model reads on its own (data, inputs, a "
        "container image): paths or globs (** for any depth) relative to the study file; their "
        "content is part of every run's identity, so editing one re-runs the study")

    @field_validator("scheduler")
    @classmethod
    def _check_scheduler(cls, value):
        problem = scheduler_problem(value) if isinstance(value, str) else None
        if problem:
            raise ValueError(problem)
        return value


class Study(BaseModel):
    """A whole study file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=200,
                      description="identifier; results go to results/<name>/")
    description: str = ""
    seed: NonNegativeInt = Field(0, description="every random choice derives from this")
    model: ModelUnion
    parameters: dict[str, ParameterSpec] = Field(default_factory=dict)
    quantities: dict[str, str] | None = Field(
        None, description="name -> expression; without it every scalar output is a quantity")
    analysis: AnalysisUnion
    execution: Execution = Field(default_factory=Execution)

    @field_validator("quantities", mode="before")
    @classmethod
    def _quantities_as_text(cls, value):
        if isinstance(value, dict):
            return {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                    for k, v in value.items()}
        return value


def check_study(study: Study, study_dir: Path) -> list[tuple[tuple, str]]:
    """Problems that span sections, as (key path, message) pairs."""
    problems: list[tuple[tuple, str]] = []
    problems += checked("model", lambda: study.model.check(study_dir))
    problems += checked("execution", lambda: check_depends_on(study.execution.depends_on, study_dir))
    problems += check_parameters(study)
    problems += check_quantities(study)
    problems += checked("analysis", lambda: study.analysis.check_size(dict(varied(study.parameters))))
    problems += checked("analysis", lambda: study.analysis.check(dict(varied(study.parameters))))
    check_whole = getattr(study.analysis, "check_study", None)  # analyses reading model or data
    if check_whole is not None:
        problems += checked("analysis", lambda: check_whole(study))
    return list(dict.fromkeys(problems))


def checked(section: str, check) -> list[tuple[tuple, str]]:
    """A section's own problems, located in it; a path its check cannot even look at (a name
    too long, a folder it may not search) is one of them, not an OSError out of validation."""
    try:
        return [((section, *split_path(p.path)), p.message) for p in check()]
    except OSError as exc:
        name = str(exc.filename or "")
        name = f" {name[:77]}..." if len(name) > 80 else f" {name}" if name else ""
        return [((section,), f"cannot use the path{name}: {exc.strerror or exc}")]


def split_path(path: str) -> tuple:
    """'rates.x' -> ('rates', 'x'); 'run[1]' -> ('run', 1)."""
    parts: list = []
    for piece in filter(None, re.split(r"\.", path)):
        name, *indices = re.split(r"\[(\d+)\]", piece)
        parts += [name] if name else []
        parts += [int(i) for i in indices if i]
    return tuple(parts)


def check_parameters(study: Study) -> list[tuple[tuple, str]]:
    problems = []
    inputs = study.model.input_names()
    for name in study.parameters:
        if not _NAME.match(name) or name in RESERVED:
            problems.append((("parameters", name), f"{name!r} cannot name a parameter: use letters, "
                             f"digits and _ (not one of {', '.join(sorted(RESERVED))})"))
        elif inputs is not None and name not in inputs:
            problems.append((("parameters", name), f"the model has no input {name!r}"
                             f"{suggest(name, inputs)} (inputs: {', '.join(sorted(inputs)) or 'none'})"))
    if not varied(study.parameters):
        problems.append((("parameters",), "no parameter is varied; give at least one a "
                         "distribution or bounds"))
    return problems


def check_quantities(study: Study) -> list[tuple[tuple, str]]:
    problems = []
    outputs = study.model.output_names()
    known = None if outputs is None else (set(outputs) | set(study.parameters)
                                          | set(study.model.defaults()) | {"time"})
    for name, text in (study.quantities or {}).items():
        where = ("quantities", name)
        if not _NAME.match(name) or name in RESERVED:
            problems.append((where, f"{name!r} cannot name a quantity: use letters, digits and _"))
            continue
        if name in study.parameters:
            problems.append((where, f"{name!r} is a parameter too; give the quantity another name"))
        try:
            expr = parse_quantity(text)
        except ExprError as error:
            problems.append(((*where, "<value>"), f"{error.message} in {text!r}"))
            continue
        problem = shape_problem(expr)
        if problem:
            problems.append(((*where, "<value>"), f"{problem} (in {text!r})"))
        for unknown in sorted(expr.names - known) if known is not None else []:
            problems.append(((*where, "<value>"), f"unknown name {unknown!r} in {text!r}"
                             f"{suggest(unknown, known)}"))
    return problems
