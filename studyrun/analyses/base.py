"""The analysis plug-in point: plan a design of runs, then analyse the quantities they gave.

A fixed-design analysis (`FixedDesignAnalysis`) writes `design()` and `analyse()`. An iterative
one (`IterativeAnalysis`: calibrate, optimize, surrogate) writes `iterate()`, asking for runs
through an `evaluate` callback that goes through the same executor and store, and `design()`
for what `studyrun plan` shows. The hooks they must write are abstract: a type that leaves one
out is a TypeError when its class is made. `report()` turns the analysis results into Markdown
and figures; it computes nothing new. Every hook but `report()` is given the `StudyContext`: an
analysis block is frozen and holds nothing but its own keys.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

import numpy as np
from pydantic import BaseModel, ConfigDict

from studyrun.core.design import MAX_RUNS, Design, Evaluate, Outcome, PlannedRuns
from studyrun.core.plugin import Example, check_complete
from studyrun.core.sizes import Footprint, memory_problem
from studyrun.results.records import register

if TYPE_CHECKING:
    from studyrun.analyses.given import GivenRows
    from studyrun.blocks.params import ParameterBase, ParameterSpec
    from studyrun.core.errors import Problem
    from studyrun.models.base import ModelSpec
    from studyrun.results.report.figures import Figures


@dataclass(frozen=True)
class StudyContext:
    """What an analysis may know of its study beyond its own block; built once, after validation
    (`loading.study_context`), and never changed."""

    model: "ModelSpec"  # the model as the analysis runs it (after model_for)
    parameters: dict[str, "ParameterSpec"]  # every parameter, in study order
    varied: dict[str, "ParameterSpec"]  # the varied ones (what design() varies)
    fixed: dict[str, float]  # fixed inputs' values
    defaults: dict[str, float]  # the model's own input values
    folder: Path  # the study file's folder; relative paths resolve here
    quantities: dict[str, str] | None
    notes: tuple[str, ...] = ()  # what model_for changed, in words
    # the study's `correlation:` completed over `varied` (in its order); None: independent inputs
    correlation: np.ndarray | None = field(default=None, compare=False)

    def path(self, name: str) -> Path:
        """A file the study names: relative to the study's folder unless absolute."""
        return self.folder / name

    def nominal(self, name: str) -> float:
        """A parameter's nominal value: its `nominal`, else the model's own value, else its median."""
        parameter: ParameterBase = self.parameters[name]
        return parameter.nominal_value(self.defaults.get(name))


INDEPENDENT_INPUTS = ("its estimators assume independent inputs (for the sensitivities of "
                      "correlated inputs, use type: shapley)")
WARNING_DEPTH = 3  # results.<quantity>.<part>: as deep as an analysis keeps warnings


def gathered_warnings(results: dict[str, Any]) -> list[str]:
    """Every error, warning and note a results block holds, once each, prefixed by where it is
    (`y: ...`, `y.time_resolved: ...`): the warnings about the numbers that analysis.json lists
    at its top and `studyrun run` prints."""
    found: list[str] = []

    def walk(block: dict[str, Any], where: tuple[str, ...]) -> None:
        prefix = f"{'.'.join(where)}: " if where else ""
        error = block.get("error")
        lines = [error] if isinstance(error, str) else []
        for key in ("warnings", "notes"):
            listed = block.get(key)
            lines += [line for line in listed if isinstance(line, str)] \
                if isinstance(listed, list) else []
        found.extend(prefix + line for line in lines)
        if len(where) < WARNING_DEPTH:
            for key, value in block.items():
                if isinstance(value, dict):
                    walk(value, (*where, str(key)))

    walk(results, ())
    return list(dict.fromkeys(found))


# What a run holds in the driver (measured: benchmarks/bench_memory.py): a fixed design's run,
# RUN_BYTES and VALUE_BYTES for each varied parameter and quantity (its row, identity, status,
# values read back, ranks); a run of an iterative analysis, SEARCH_RUN_BYTES (its row and summary
# remembered so no row runs twice, the search's own lists of candidates).
RUN_BYTES, VALUE_BYTES, SEARCH_RUN_BYTES = 200, 24, 1500


def columns(context: StudyContext) -> int:
    """The values each run holds: its varied parameters and its quantities."""
    if context.quantities is not None:
        return len(context.varied) + len(context.quantities)
    return len(context.varied) + len(context.model.output_names() or ["value"])


def run_bytes(context: StudyContext) -> int:
    """What a fixed design's run takes in memory: RUN_BYTES and VALUE_BYTES a column."""
    return RUN_BYTES + VALUE_BYTES * columns(context)


def runs_footprint(context: StudyContext, count: tuple[int, str], extra: float = 0.0,
                   what: str = "") -> Footprint:
    """The footprint of a design of `count` = (runs, key) runs, each `extra` bytes more for
    `what` the analysis holds of it."""
    runs, key = count
    each = run_bytes(context) + extra
    return Footprint(key, runs, "runs", lambda n: each * n,
                     f"{each:,.0f} bytes a run: the design and its values{what}")


def search_footprint(count: tuple[int, str], each: int = SEARCH_RUN_BYTES) -> Footprint:
    """The footprint of a search (calibrate, optimize) that makes `count` = (runs, key) runs."""
    runs, key = count
    return Footprint(key, runs, "runs", lambda n: each * n,
                     f"{each:,} bytes a run: its row and what it gave, kept so that no run is "
                     "made twice")


def search_runs(analysis: Any, dimensions: int) -> tuple[int, str]:
    """The runs an iterative analysis's own numbers ask for at least: one per start, and a
    differential evolution's population in every generation."""
    counts = [(analysis.multistart + 1, "multistart")]
    if analysis.method == "differential-evolution":
        population = getattr(analysis, "population_size", analysis.population)
        counts.append(((analysis.generations + 1) * population * max(dimensions, 1),
                       "generations"))
    return max(counts)


class AnalysisSpec(BaseModel):
    """Base of every `analysis:` block. A type derives from `FixedDesignAnalysis` or
    `IterativeAnalysis` and adds `type: Literal[...]` and its own keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # What a type declares of itself; the registry (study/spec/registry.py) reads it for the docs, the
    # results folder and `studyrun predict`.
    tutorial: ClassVar[str] = ""  # its tutorial's title in the docs' navigation ("": its type)
    results_files: ClassVar[tuple[str, ...]] = ()  # what its report writes beside report.md
    # the function that predicts from its analysis.json ("module:function", called as
    # predict(analysis, quantity, at, level=...)); None: it fits nothing to predict from
    predicts: ClassVar[str | None] = None
    example: ClassVar[Example | None] = None  # the study studyrun.testing checks it with
    iterative: ClassVar[bool] = False  # True: the pipeline calls iterate(), not analyse_runs()
    # True when analyse() reads the series() quantities (outcome.series), not only the outputs
    # of needs_series(): the others keep them in the store without reading them back.
    reads_series_quantities: ClassVar[bool] = False
    # Why a study with `correlation:` is refused; None: the design draws correlated inputs.
    without_correlation: ClassVar[str | None] = ("its design does not draw from the parameters' "
                                                 "joint distribution")
    # analysis.json's `results` of this type: how it is written, read and published as a schema
    results_model: ClassVar[type[BaseModel]]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """A type (a class whose `type` is one literal) is complete (`check_complete`: every
        abstract hook written) and is looked up by its type in analysis.json."""
        super().__pydantic_init_subclass__(**kwargs)
        check_complete(cls)
        kind = cls.model_fields.get("type")
        literals: tuple[Any, ...] = getattr(kind.annotation, "__args__", ()) if kind else ()
        if len(literals) == 1:
            model = getattr(cls, "results_model", None)
            if model is None:
                raise TypeError(f"analysis type {literals[0]!r} ({cls.__name__}) declares no "
                                "results_model: the pydantic model of its analysis.json results")
            register(literals[0], model)

    def model_for(self, model: "ModelSpec") -> tuple["ModelSpec", list[str]]:
        """The model as this analysis runs it and what it changed, in words (local tightens an
        adaptive solver); by default the model as given."""
        return model, []

    def whole_numbers(self, parameters: dict[str, "ParameterSpec"]) -> set[str]:
        """The parameters the study gives as whole numbers (written as integers by a model that
        writes its inputs as text): by default those whose kind says so (`ParameterBase.whole`)."""
        return {name for name, p in parameters.items() if p.whole}

    def check(self, context: StudyContext) -> list["Problem"]:
        """Problems of the block against the rest of the study (paths relative to `analysis`)."""
        return []

    def run_count(self, context: StudyContext) -> tuple[int, str] | None:
        """The number of runs the design will have and the key that sets it, known before
        planning; None where it is small by construction or only planning can tell."""
        return None

    def footprint(self, context: StudyContext) -> Footprint | None:
        """The memory this analysis's sizes imply (`core/sizes.py`), at the key that sets them;
        by default its design's runs (`runs_footprint`); None where only planning can tell."""
        count = self.run_count(context)
        return None if count is None else runs_footprint(context, count)

    def check_size(self, context: StudyContext) -> list["Problem"]:
        """A design beyond MAX_RUNS, or sizes whose footprint cannot fit in memory, are refused
        at their key, before anything is allocated."""
        from studyrun.core.errors import Problem

        count = self.run_count(context)
        if count is None or count[0] <= MAX_RUNS:
            footprint = self.footprint(context)
            problem = None if footprint is None else memory_problem(footprint)
            return [] if problem is None else [problem]
        runs, key = count
        size = f"{runs:,}" if runs < 10**15 else f"{float(runs):.3g}"
        if key.split(".")[-1] in ("max", "max_samples"):  # a cap a growing design may reach
            has = "may grow to"
        else:
            has = "asks for at least" if self.iterative else "has"
        return [Problem(f"the design {has} {size} runs, more than {MAX_RUNS:,}, the most a study "
                        "may have (its run store and runs.csv would pass 10 GB each); lower "
                        f"{key}, or split the study into several", path=key)]

    def needs_series(self, context: StudyContext) -> list[str]:
        """Model outputs whose whole time series the analysis needs from every run."""
        return []

    def series_grid(self, context: StudyContext) -> np.ndarray | None:
        """The times at which to compare runs whose grids differ; None: the first run's."""
        return None

    @abstractmethod
    def design(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        """The runs to make, derived only from the study context and the seed (an iterative
        analysis: its first runs, as `studyrun plan` shows them)."""

    def design_chunks(self, context: StudyContext, seed: np.random.SeedSequence,
                      rows: int) -> Iterator[Design]:
        """The design in slices of at most `rows` runs (by default all of it at once), so a very
        large design never has to be held whole."""
        yield self.design(context, seed)

    def given(self, context: StudyContext) -> "GivenRows | None":
        """Runs that already exist (`from:`), analysed instead of running the model: the design
        is their rows and the pipeline records what they gave; None: the model makes the runs."""
        return None

    def rows_given(self) -> bool:
        """True when the statistics come from given rows (`from:`) rather than from inputs drawn
        from the parameters' distribution, so `correlation:` would change nothing."""
        return getattr(self, "from_", None) is not None

    def describe_design(self, design: Design, context: StudyContext) -> str:
        """What `studyrun plan` says of the design; empty: it lists the first runs."""
        return ""

    def earlier_results(self, context: StudyContext) -> Path | None:
        """A finished results folder whose succeeded runs this study's plan may share (a grown
        design): the runs of the same identity are copied from its store instead of made
        again; by default none."""
        return None

    def warnings(self, context: StudyContext) -> list[str]:
        """Warnings about how this analysis will read the study (analysis.json's `warnings`,
        also printed); by default none."""
        return []

    def provenance(self, context: StudyContext) -> dict[str, Any]:
        """What the results rest on beyond the study and its files (an earlier study's results
        folder), for analysis.json's provenance; by default nothing."""
        return {}

    def report(self, analysis: dict[str, Any], outcome: Outcome | None, figures: "Figures") -> str:
        """Markdown sections (with figures) for report.md, from analysis.json and the runs."""
        return ""


class FixedDesignAnalysis(AnalysisSpec):
    """An analysis whose runs are planned at once (`design()`), then analysed (`analyse()`). One
    whose sample may grow until a precision target is met (montecarlo, sobol, morris) also
    writes `iterate()` and says when it is `iterative`."""

    def analyse_runs(self, runs: "PlannedRuns", context: StudyContext) -> dict[str, Any]:
        """Results from the planned runs in the store; by default read whole and `analyse()`d."""
        return self.analyse(runs.whole(), context)

    @abstractmethod
    def analyse(self, outcome: Outcome, context: StudyContext) -> dict[str, Any]:
        """The `results` block of analysis.json, keyed by quantity (see the study format)."""


class IterativeAnalysis(AnalysisSpec):
    """An analysis that decides its next runs from the last ones' results (a fit, a search)."""

    iterative: ClassVar[bool] = True

    @abstractmethod
    def iterate(self, evaluate: Evaluate, context: StudyContext,
                seed: np.random.SeedSequence) -> dict[str, Any]:
        """Ask for runs through `evaluate` and return the results block."""
