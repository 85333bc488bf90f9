"""The equation system at source level (text plus key paths) and its checks: names,
unknown references, missing initial values and circular definitions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from studyrun.blocks.expr import BUILTINS, ExprError, FunctionDef, parse
from studyrun.core.errors import Problem
from studyrun.core.text import suggest
from studyrun.models.equations.lookups import Lookup
from studyrun.models.equations.timegrid import TimeGrid

Expression = float | str  # a number or the text of an expression
RESERVED = frozenset({"time"})


@dataclass
class EquationSystem:
    """Equations as text, with the key path of each for error messages; pickles as plain data."""

    initial: dict[str, Expression | None]  # state -> initial value
    derivatives: dict[str, Expression]  # state -> d state / dt
    variables: dict[str, Expression]  # flows and auxiliaries
    lookups: dict[str, tuple[list[float], list[float], bool]]
    constants: dict[str, float]
    grid: TimeGrid
    method: str = "RK45"
    rtol: float = 1e-6
    atol: float = 1e-9
    paths: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> key path

    def path(self, kind: str, name: str) -> str:
        return self.paths.get((kind, name), f"{kind}.{name}")

    def functions(self) -> dict[str, FunctionDef]:
        return {name: FunctionDef(name, 1, 1, Lookup(*table))
                for name, table in self.lookups.items()}

    def check(self) -> list[Problem]:
        """Every problem found beyond the schema, with key paths relative to the model block."""
        problems = self.grid.problems() + self._name_problems()
        functions = self.functions()
        dynamic = set(self.initial) | set(self.variables) | set(self.constants)
        parsed: dict[str, Any] = {}
        for kind, name, text, known in self._expressions(dynamic):
            where = self.path(kind, name)
            if text is None:
                problems.append(Problem(f"state {name!r} has no initial value", where))
                continue
            try:
                expr = parse(text, functions)
            except ExprError as exc:
                problems.append(Problem(f"{exc.message} in {str(text)!r}", where))
                continue
            problems += [Problem(m, where) for m in self._unknown(expr, known, kind)]
            if kind == "variable":
                parsed[name] = expr
        problems += self._cycle_problems(parsed)
        return problems

    def _expressions(self, dynamic: set[str]):
        for name, text in self.initial.items():
            yield "initial", name, text, set(self.constants)
        for name, text in self.derivatives.items():
            yield "derivative", name, text, dynamic
        for name, text in self.variables.items():
            yield "variable", name, text, dynamic

    def _unknown(self, expr: Any, known: set[str], kind: str) -> list[str]:
        """A message per name the expression reads but may not, with a hint where one helps."""
        messages = []
        for name in sorted(expr.names - known - RESERVED):
            if name in self.lookups:
                messages.append(f"lookup {name!r} is a function: call it as {name}(x)")
            elif kind == "initial" and (name in self.initial or name in self.variables):
                messages.append(f"an initial value may use only constants (and study "
                                f"parameters); {name!r} is not a constant")
            else:
                messages.append(f"unknown name {name!r} in {expr.text!r}"
                                f"{suggest(name, known)}")
        return messages

    def _name_problems(self) -> list[Problem]:
        problems, seen = [], {}
        groups = [("initial", self.initial), ("variable", self.variables),
                  ("lookup", self.lookups), ("constant", self.constants)]
        for kind, names in groups:
            for name in names:
                where = self.path(kind, name)
                if (not name.isidentifier() or name.startswith("_") or name in RESERVED
                        or name in ("True", "False", "None")):
                    problems.append(Problem(f"{name!r} is not a valid name (letters, digits and "
                                            f"'_', not starting with '_' or a digit, not True, "
                                            f"False or None; 'time' is the clock)", where))
                elif kind == "lookup" and name in BUILTINS:
                    problems.append(Problem(f"lookup {name!r} would hide the function {name}(); "
                                            f"choose another name", where))
                elif name in seen:
                    problems.append(Problem(f"{name!r} is defined twice (also at "
                                            f"{seen[name]})", where))
                else:
                    seen[name] = where
        return problems

    def _cycle_problems(self, parsed: Mapping[str, Any]) -> list[Problem]:
        _, cycles = topological_order({n: e.names for n, e in parsed.items()})
        return [Problem("circular definition: " + " -> ".join(cycle), self.path("variable",
                                                                                  cycle[0]))
                for cycle in cycles]


def topological_order(depends: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Names ordered so each comes after those it reads (declaration order otherwise), and the
    cycles found, each as a loop in order ``[a, b, a]``."""
    order: list[str] = []
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(set(depends[name]) & depends.keys(), key=list(depends).index):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[name] = 2
        order.append(name)

    for name in depends:
        if name not in state:
            visit(name, [])
    return order, cycles
