"""gradient's results in analysis.json: an objective's gradient at the nominal point."""

from __future__ import annotations

from studyrun.results.records import ByName, Count, Lines, Number, Record, Text


class Cost(Record):
    """What the gradient cost: runs, integrations, backward steps, seconds."""

    runs: Count | None = None
    integrations: Count | None = None
    backward_steps: Count | None = None
    forward_seconds: Number = None
    backward_seconds: Number = None


class GradientResults(Record):
    """The objective J, dJ/dp and p / J dJ/dp for each parameter, ranked."""

    objective: Text
    method: Text | None = None
    value: Number = None  # J at the nominal point
    gradient: ByName = {}  # parameter -> dJ/dp
    normalised: ByName = {}  # parameter -> p / J dJ/dp
    ranking: list[Text] = []
    cost: Cost | None = None
    notes: Lines = []
