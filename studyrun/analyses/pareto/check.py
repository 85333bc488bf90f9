"""Checks of a multi-objective search against the rest of the study, at validate."""

from __future__ import annotations

from typing import Any

from ...core.errors import Problem
from ...core.text import suggest
from ...expr import ExprError
from .terms import constraint, statistic


def check_multi_objective(spec: Any, context: Any) -> list[Problem]:
    """Objectives and constraints parse and name quantities; reference names objectives;
    scenarios have uncertain parameters to draw and decisions to make."""
    robust = spec.scenarios is not None
    known = set(context.quantities) if context.quantities is not None else None
    problems: list[Problem] = []

    def unknown(name: str, where: str) -> None:
        if known is not None and name not in known:
            problems.append(Problem(f"{name!r} is not a quantity of the study{suggest(name, known)} "
                                    f"(quantities: {', '.join(sorted(known)) or 'none'})", where))

    texts = []
    for sense in ("minimize", "maximize"):
        for i, text in enumerate(getattr(spec.objectives, sense)):
            where = f"objectives.{sense}.{i}"
            try:
                item = statistic(text, robust)
            except ValueError as error:
                problems.append(Problem(str(error), where))
                continue
            texts.append(item.text)
            unknown(item.quantity, where)
    for i, text in enumerate(spec.constraints):
        try:
            item = constraint(text, robust, i)
        except (ValueError, ExprError) as error:
            problems.append(Problem(str(error), f"constraints.{i}"))
            continue
        for name in sorted(item.quantities):
            unknown(name, f"constraints.{i}")
    for name in spec.reference:
        if name not in texts:
            problems.append(Problem(f"{name!r} is not an objective{suggest(name, texts)} "
                                    f"(objectives: {', '.join(texts)})", f"reference.{name}"))
    if robust:
        kinds = {name: p.kind for name, p in context.varied.items()}
        if not any(kind != "bounds" for kind in kinds.values()):
            problems.append(Problem("scenarios draw the parameters that have a distribution, and "
                                    "this study has none: give the uncertain parameters a "
                                    "distribution, or leave scenarios out", "scenarios"))
        if not any(kind == "bounds" for kind in kinds.values()):
            problems.append(Problem("with scenarios, the decisions are the parameters given as "
                                    "bounds: [low, high], and this study has none", "scenarios"))
    return problems
