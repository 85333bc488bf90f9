"""The `stockflow` model: the system-dynamics view (stocks, flows, auxiliaries, lookups).

d stock / dt = sum(inflows) - sum(outflows). Euler at ``time.step`` is the default, as in Stella
and Vensim; ``rk4`` or an adaptive method on request. Output every ``time.save_every`` (default:
every step). Compiles to the same core as `ode` (:mod:`studyrun.models.equations`); every stock,
flow and auxiliary is an output series and every constant can be a study parameter.

Formulas, defaults and edge cases: docs/methods.md, "Stock-and-flow models".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from studyrun.core.errors import Problem
from studyrun.core.plugin import Example
from studyrun.core.text import suggest
from studyrun.models.equations import (
    EquationModel,
    EquationSystem,
    Expression,
    Method,
    TimeGrid,
    TimeSpan,
)


class Stock(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    initial: Expression
    inflows: list[str] = []
    outflows: list[str] = []

    @field_validator("inflows", "outflows", mode="before")
    @classmethod
    def _one_name_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class StockflowTime(TimeSpan):
    """The integration step, and the output interval ``save_every`` (default: every step)."""

    save_every: float | None = Field(default=None, gt=0)


class Stockflow(EquationModel):
    """``type: stockflow``."""

    type: Literal["stockflow"]
    example = Example({
        "model": {"type": "stockflow", "method": "euler",
                  "time": {"start": 0, "stop": 5, "step": 0.125, "save_every": 1},
                  "stocks": {"area": {"initial": 10, "inflows": ["growth"],
                                      "outflows": ["decay"]}},
                  "flows": {"growth": "area * growth_rate * (1 - area / 1000)",
                            "decay": "area * decay_rate"},
                  "constants": {"growth_rate": 1.0, "decay_rate": 0.2}},
        "parameters": {"growth_rate": {"bounds": [0.5, 1.5]}, "decay_rate": {"bounds": [0.1, 0.3]}},
        "quantities": {"final": "final(area)"}})
    stocks: dict[str, Stock]
    flows: dict[str, Expression] = {}
    time: StockflowTime
    method: Method = "euler"

    def spec_problems(self) -> list[Problem]:
        problems = [] if self.stocks else [Problem("a stockflow model needs at least one stock",
                                                   "stocks")]
        for stock_name, stock in self.stocks.items():
            for key in ("inflows", "outflows"):
                for i, flow in enumerate(getattr(stock, key)):
                    if flow not in self.flows:
                        hint = suggest(flow, self.flows)
                        problems.append(Problem(f"{flow!r} is not a flow{hint}",
                                                f"stocks.{stock_name}.{key}[{i}]"))
        return problems

    def to_system(self) -> EquationSystem:
        grid = TimeGrid(self.time.start, self.time.stop, self.time.step,
                        self.time.save_every or self.time.step)
        paths = {("initial", s): f"stocks.{s}.initial" for s in self.stocks}
        paths.update({("derivative", s): f"stocks.{s}" for s in self.stocks})
        paths.update({("variable", f): f"flows.{f}" for f in self.flows})
        paths.update({("variable", a): f"auxiliaries.{a}" for a in self.auxiliaries})
        paths.update({("lookup", k): f"lookups.{k}" for k in self.lookups})
        paths.update({("constant", k): f"constants.{k}" for k in self.constants})
        return EquationSystem(
            initial={s: stock.initial for s, stock in self.stocks.items()},
            derivatives={s: net_flow(stock, set(self.flows)) for s, stock in self.stocks.items()},
            variables={**self.flows, **self.auxiliaries},
            lookups=self.lookup_tables(),
            constants=dict(self.constants),
            grid=grid, method=self.method, rtol=self.rtol, atol=self.atol, paths=paths,
        )


def net_flow(stock: Stock, flows: set[str]) -> str:
    """The text ``in1 + in2 - (out1 + out2)``, or "0" for a stock no flow changes."""
    inflows = [f for f in stock.inflows if f in flows]
    outflows = [f for f in stock.outflows if f in flows]
    text = " + ".join(inflows) if inflows else "0"
    return f"{text} - ({' + '.join(outflows)})" if outflows else text
