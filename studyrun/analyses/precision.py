"""Sample sizes chosen by precision: `samples: {start, until: {ci}, max}` doubles a design along
its own sequence, through the executor and the store, until every interval is narrow enough.

Each round asks only for the new rows; all runs go through the store, so a killed study replays
what it had and ends with the numbers of an uninterrupted one. Formulas: docs/methods.md,
"Sample sizes chosen by precision".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from studyrun.core.design import Design, Evaluate, Outcome


class Until(BaseModel):
    """`until:`: the 95% half-width every interval must reach, absolute (`ci`) or relative to
    the estimate's magnitude (`rel_ci`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ci: float | None = Field(None, gt=0, description="the largest 95% half-width allowed")
    rel_ci: float | None = Field(None, gt=0, description="montecarlo: the largest 95% "
                                                         "half-width relative to |estimate|")

    @model_validator(mode="after")
    def _one_target(self) -> "Until":
        if (self.ci is None) == (self.rel_ci is None):
            raise ValueError("give one target: ci (a half-width) or rel_ci (relative to the "
                             "estimate), e.g. until: {ci: 0.02}")
        return self

    def as_dict(self) -> dict[str, float]:
        return {"ci": self.ci} if self.ci is not None else {"rel_ci": self.rel_ci}  # type: ignore

    def describe(self) -> str:
        """`ci 0.02` or `rel_ci 0.01`, as the study says it."""
        return ", ".join(f"{key} {value:g}" for key, value in self.as_dict().items())

    def met(self, half_width: float | None, estimate: float | None) -> bool:
        """True when an interval's half-width is within the target (a missing one never is)."""
        if half_width is None or not np.isfinite(half_width):
            return False
        if self.ci is not None:
            return half_width <= self.ci
        return estimate is not None and half_width <= self.rel_ci * abs(estimate)  # type: ignore


class Samples(BaseModel):
    """`samples: {start, until, max}`: start with `start`, double until `until` or `max`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: PositiveInt = Field(description="samples in the first round")
    until: Until
    max: PositiveInt = Field(description="never more samples than this")

    @field_validator("max")
    @classmethod
    def _max_at_least_start(cls, value: int, info: ValidationInfo) -> int:
        start = info.data.get("start")
        if start is not None and value < start:
            raise ValueError(f"max ({value}) is below start ({start}); give a max of at least "
                             f"{start}")
        return value

    def sizes(self) -> list[int]:
        return doublings(self.start, self.max)


def doublings(start: int, most: int) -> list[int]:
    """The sizes of the rounds: start, 2 start, 4 start... up to `most`."""
    sizes = [start]
    while sizes[-1] * 2 <= most:
        sizes.append(sizes[-1] * 2)
    return sizes


def power_of_two(value: int) -> int:
    """`value` when it is a power of 2, else the error naming the nearest."""
    if value & (value - 1):
        lower = 1 << (value.bit_length() - 1)
        raise ValueError(f"must be a power of 2 (the Sobol' sequence is balanced there); got "
                         f"{value} (try {lower} or {lower * 2})")
    return value


class PowerOfTwoSamples(Samples):
    """Samples for Saltelli's design: start and max are powers of 2, as a fixed N is."""

    @field_validator("start", "max")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        return power_of_two(value)

    @field_validator("until")
    @classmethod
    def _absolute(cls, value: Until) -> Until:
        if value.ci is None:
            raise ValueError("sobol takes ci, an absolute half-width (indices are already "
                             "shares of the variance); rel_ci is for montecarlo")
        return value


@dataclass
class Round:
    """One round of a growing design: its size and the results analysed at that size."""

    size: int
    results: dict[str, Any]
    met: dict[str, bool]


def grow(evaluate: Evaluate, sizes: list[int], design_for: Callable[[int], Design],
         analyse: Callable[[Outcome], dict[str, Any]],
         met: Callable[[dict[str, Any]], dict[str, bool]]) -> list[Round]:
    """Run the rounds: each asks for the rows its design adds to the previous one, analyses
    all of them, and stops once every quantity meets the target or the sizes run out."""
    outcomes: list[Outcome] = []
    rounds: list[Round] = []
    asked: list[np.ndarray] = []
    done = 0
    for size in sizes:
        design = design_for(size)
        if asked and not np.array_equal(design.matrix[:done], np.vstack(asked)):
            raise RuntimeError(f"the design of {size} does not begin with the runs made before; "
                               "its results would pair runs with other runs' values")
        asked.append(design.matrix[done:])
        outcomes.append(evaluate(asked[-1]))
        done = len(design.matrix)
        results = analyse(joined(design, outcomes))
        rounds.append(Round(size, results, met(results)))
        if all(rounds[-1].met.values()):
            break
    return rounds


def joined(design: Design, outcomes: list[Outcome]) -> Outcome:
    """The outcomes of consecutive slices of `design` as one outcome of the whole design."""
    names = list(outcomes[0].values)
    return Outcome(design=design,
                   values={name: np.concatenate([o.values[name] for o in outcomes])
                           for name in names},
                   ok=np.concatenate([np.asarray(o.ok, dtype=bool) for o in outcomes]))


def reached(rounds: list[Round], until: Until) -> dict[str, Any]:
    """The final round's results, each quantity with its samples_reached, target_met, target and
    a warning where the target was not met."""
    last = rounds[-1]
    results = {}
    for name, entry in last.results.items():
        entry = dict(entry)
        entry |= {"samples_reached": last.size, "target_met": last.met.get(name, False),
                  "target": until.as_dict()}
        if not entry["target_met"]:
            entry["warnings"] = [*entry.get("warnings", []),
                                 f"the interval target ({until.describe()}) was not met at "
                                 f"{last.size} samples (samples.max); raise max, or accept "
                                 "the wider intervals reported"]
        results[name] = entry
    return results
