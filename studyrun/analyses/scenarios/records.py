"""scenarios' results in analysis.json: the boxes PRIM found (each with its peeling trajectory)
or the leaves of a classification tree, and the runs they rest on."""

from __future__ import annotations

from studyrun.results.records import Count, Lines, Number, Numbers, Record, Text


class Limit(Record):
    """One restricted parameter: [lower, upper] (a categorical one: the values kept) and the
    quasi-p-value of each restricted side (of the set)."""

    lower: Number = None
    upper: Number = None
    values: Numbers | None = None
    p_lower: Number = None
    p_upper: Number = None
    p_value: Number = None


class Step(Record):
    """A box: its coverage, density and mass, the runs (and runs of interest) inside, and its
    restricted parameters' limits."""

    coverage: Number = None
    density: Number = None
    mass: Number = None
    runs: Count | None = None
    of_interest: Count | None = None
    restricted: list[Text] = []
    limits: dict[str, Limit] = {}


class Box(Step):
    """A chosen box: a step of its own peeling trajectory (`step`), and that trajectory."""

    step: Count | None = None
    trajectory: list[Step] = []


class Leaf(Step):
    """A leaf of the classification tree: the rule (its limits) and what it holds."""

    predicted: Text | None = None


class Depth(Record):
    """A tree depth's cross-validated accuracy: mean and standard error over the folds."""

    depth: Count | None = None
    accuracy: Number = None
    se: Number = None


class Parameter(Record):
    """A parameter's range over the runs analysed (a categorical one: its values)."""

    min: Number = None
    max: Number = None
    values: Numbers | None = None


class ScenariosResults(Record):
    """The runs analysed, those of interest and those counted apart, and what was found."""

    method: Text | None = None
    of_interest: Text | None = None
    runs: Count | None = None
    runs_of_interest: Count | None = None
    dropped_runs: Count | None = None
    threshold: Number = None
    parameters: dict[str, Parameter] = {}
    boxes: list[Box] = []
    depth: Count | None = None
    cross_validation: list[Depth] = []
    leaves: list[Leaf] = []
    warnings: Lines = []
    notes: Lines = []
