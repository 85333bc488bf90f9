"""The `ode` model: states, rates, auxiliaries, lookups and constants, integrated over a batch.

Compiles to the shared core in :mod:`studyrun.models.equations`. The output grid is
``time: {start, stop, step}``; fixed-step methods (euler, rk4) integrate at ``time.dt`` when
given (it must divide ``step``), else at ``step``. Adaptive methods (RK45 by default, DOP853,
LSODA, Radau, BDF, RK23) use ``rtol``/``atol``. Every state and auxiliary is an output series on
the grid; every constant can be a study parameter; a state's initial value may be an expression
of constants.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from studyrun.core.errors import Problem
from studyrun.core.plugin import Example
from studyrun.core.text import suggest
from studyrun.models.equations import EquationModel, EquationSystem, Expression, TimeGrid, TimeSpan


class OdeTime(TimeSpan):
    """The output grid, and optionally the fixed integration step ``dt``."""

    dt: float | None = Field(default=None, gt=0)


class Ode(EquationModel):
    """``type: ode``: d state / dt = rate, one rate per state."""

    type: Literal["ode"]
    example = Example({
        "model": {"type": "ode", "time": {"start": 0, "stop": 10, "step": 0.5}, "method": "RK45",
                  "states": {"population": "initial_population"},
                  "rates": {"population": "rate * population * (1 - population / capacity)"},
                  "constants": {"initial_population": 10, "rate": 0.4, "capacity": 1000}},
        "parameters": {"rate": {"bounds": [0.3, 0.5]}, "capacity": {"bounds": [800, 1200]}},
        "quantities": {"final": "final(population)"}})
    states: dict[str, Expression | None]  # name -> initial value
    rates: dict[str, Expression]
    time: OdeTime

    def spec_problems(self) -> list[Problem]:
        problems = [] if self.states else [Problem("an ode model needs at least one state",
                                                   "states")]
        for name in self.rates:
            if name not in self.states:
                hint = suggest(name, self.states)
                problems.append(Problem(f"rate of {name!r}, which is not a state{hint}",
                                        f"rates.{name}"))
        for name in self.states:
            if name not in self.rates:
                problems.append(Problem(f"state {name!r} has no rate", f"states.{name}"))
        return problems

    def to_system(self) -> EquationSystem:
        grid = TimeGrid(self.time.start, self.time.stop, self.time.dt or self.time.step,
                        self.time.step)
        paths = {("initial", s): f"states.{s}" for s in self.states}
        paths.update({("derivative", s): f"rates.{s}" for s in self.states})
        paths.update({("variable", a): f"auxiliaries.{a}" for a in self.auxiliaries})
        paths.update({("lookup", k): f"lookups.{k}" for k in self.lookups})
        paths.update({("constant", k): f"constants.{k}" for k in self.constants})
        return EquationSystem(
            initial=dict(self.states),
            derivatives={s: self.rates.get(s, 0.0) for s in self.states},
            variables=dict(self.auxiliaries),
            lookups=self.lookup_tables(),
            constants=dict(self.constants),
            grid=grid, method=self.method, rtol=self.rtol, atol=self.atol, paths=paths,
        )
