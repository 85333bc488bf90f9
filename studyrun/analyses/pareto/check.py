"""Checks of a multi-objective search against the rest of the study, at validate."""

from __future__ import annotations

import json
from typing import Any

from studyrun.analyses.pareto.terms import constraint, statistic
from studyrun.blocks.expr import ExprError
from studyrun.core.errors import Problem
from studyrun.core.text import suggest


def check_multi_objective(spec: Any, context: Any) -> list[Problem]:
    """Objectives and constraints parse and name quantities; two or more objectives, each once,
    and a population the method can pair; reference names objectives; scenarios have uncertain
    parameters to draw and decisions to make."""
    robust = spec.scenarios is not None
    known = set(context.quantities) if context.quantities is not None else None
    problems: list[Problem] = []

    def unknown(name: str, where: str) -> None:
        if known is not None and name not in known:
            problems.append(Problem(f"{name!r} is not a quantity of the study{suggest(name, known)} "
                                    f"(quantities: {', '.join(sorted(known)) or 'none'})", where))

    def split(key: str, items: list[str]) -> list[tuple[str, str]]:
        return located(key, items, problems)

    seen: dict[str, str] = {}
    for sense in ("minimize", "maximize"):
        for where, text in split(f"objectives.{sense}", getattr(spec.objectives, sense, [])):
            if text in seen:
                problems.append(Problem(f"{text!r} is an objective twice (first at analysis."
                                        f"{seen[text]}); give each once", where))
            seen.setdefault(text, where)
            try:
                item = statistic(text, robust)
            except ValueError as error:
                problems.append(Problem(str(error), where))
                item = statistic_anyway(text)
            if item is not None:
                unknown(item.quantity, where)
    texts = list(seen)
    if len(texts) < 2:
        problems.append(Problem(f"method: {spec.method} trades two or more objectives off; give "
                                "them as objectives: {minimize: [...], maximize: [...]} (for one "
                                "objective, use nelder-mead, lbfgsb or differential-evolution)",
                                "objectives"))
    problems += check_constraints(spec.constraints, robust, known)
    for name in spec.reference:
        if name not in texts:
            problems.append(Problem(f"{name!r} is not an objective{suggest(name, texts)} "
                                    f"(objectives: {', '.join(texts)})", f"reference.{name}"))
    problems += check_population(spec, len(texts))
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


def check_constraints(constraints: list[str], robust: bool, known: set[str] | None) -> list[Problem]:
    """Each constraint parses as an inequality (without scenarios, over quantities alone) and
    names quantities of the study."""
    problems: list[Problem] = []
    for i, (where, text) in enumerate(located("constraints", constraints, problems)):
        try:
            item = constraint(text, robust, i)
        except (ValueError, ExprError) as error:
            problems.append(Problem(str(error), where))
            try:  # the names of a statistic given without scenarios are still checked
                item = constraint(text, True, i)
            except (ValueError, ExprError):
                continue
        for name in sorted(item.quantities):
            if known is not None and name not in known:
                problems.append(Problem(f"{name!r} is not a quantity of the study"
                                        f"{suggest(name, known)} (quantities: "
                                        f"{', '.join(sorted(known)) or 'none'})", where))
    return problems


def located(key: str, items: list[str], problems: list[Problem]) -> list[tuple[str, str]]:
    """(where, text) of each entry of a list, an entry YAML split at its commas joined again
    and located (a problem added that says to quote it)."""
    entries = []
    for i, text, pieces in rejoined(items):
        where = f"{key}[{i}]"
        if len(pieces) > 1:
            quoted = ", ".join(json.dumps(t) if "," in t else t for _, t, _ in rejoined(items))
            problems.append(Problem(
                f"YAML split {text!r} at its comma into {', '.join(map(repr, pieces))}: in a "
                f"[a, b] list every comma ends an item; quote it: "
                f"{key.split('.')[-1]}: [{quoted}]", where))
        entries.append((where, text))
    return entries


def rejoined(items: list[str]) -> list[tuple[int, str, list[str]]]:
    """(index of the first piece, text, pieces) of each entry of a list: YAML splits an unquoted
    `[f1, percentile(f2, 95)]` at every comma, so an entry that opens more parentheses than it
    closes is joined again with the pieces after it, up to the one that balances them."""
    found, i = [], 0
    while i < len(items):
        pieces = [str(items[i])]
        while (", ".join(pieces).count("(") > ", ".join(pieces).count(")")
               and i + len(pieces) < len(items)):
            pieces.append(str(items[i + len(pieces)]))
        text = ", ".join(pieces)
        if text.count("(") != text.count(")"):  # no piece balances it: not a split, as written
            pieces, text = pieces[:1], pieces[0]
        found.append((i, text.strip(), pieces))
        i += len(pieces)
    return found


def statistic_anyway(text: str):
    """The statistic `text` names as if the search had scenarios (None if not one), so that
    its quantity is checked too when `mean(q)` is given without them."""
    try:
        return statistic(text, True)
    except ValueError:
        return None


def check_population(spec: Any, objectives: int) -> list[Problem]:
    """NSGA-II and NSGA-III pick parents in binary tournaments and cross them over in pairs,
    so a population needs two candidates; NSGA-III one per objective too."""
    least = max(2, objectives) if spec.method == "nsga3" else 2
    size = spec.population_size
    if size >= least:
        return []
    if least > 2:
        return [Problem(f"nsga3 needs a population of at least one candidate per objective "
                        f"({least}); got population: {size}; give population: {least} or more "
                        "(default 100)", "population")]
    return [Problem(f"{spec.method} needs a population of at least 2, got {size}: its binary "
                    "tournaments and crossovers pair two different candidates; give population: "
                    "2 or more (default 100)", "population")]
