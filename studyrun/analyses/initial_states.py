"""Parameters that only set initial states: the right-hand side f(x, p) of an equation model never
reads them, so whatever looks at f alone (the partition coefficients of `local`, gradient
matching) cannot see them; only the trajectory x(t; p) does."""

from __future__ import annotations

from typing import Any, Iterable


def read_by_rates(compiled: Any) -> set[str]:
    """Every name the derivatives read, directly or through the variables they use."""
    needed: set[str] = set().union(*(d.names for d in compiled.derivatives))
    for name, expr in reversed(compiled.variables):  # readers before what they read
        if name in needed:
            needed |= expr.names
    return needed


def initial_only(compiled: Any, names: Iterable[str]) -> dict[str, list[str]]:
    """Parameter -> the states whose initial value it sets, for the parameters among `names`
    that the right-hand side does not read."""
    rates = read_by_rates(compiled)
    found = {}
    for name in names:
        states = [s for s, e in zip(compiled.state_names, compiled.initial) if name in e.names]
        if states and name not in rates:
            found[name] = states
    return found
