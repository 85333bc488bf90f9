"""Checks of a study that span its sections (names, the model's inputs and outputs, the analysis
against the parameters), as located problems."""

from __future__ import annotations

import re

import numpy as np

from studyrun.analyses.base import StudyContext
from studyrun.blocks.dependencies import check_depends_on
from studyrun.blocks.expr import ExprError
from studyrun.blocks.quantities import parse_quantity, shape_problem
from studyrun.core.text import suggest
from studyrun.study.spec import Study
from studyrun.study.spec.registry import registry

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CONSTANTS = ("True", "False", "None")

def check_study(study: Study, context: StudyContext,
                run_code: bool = True) -> list[tuple[tuple, str]]:
    """Problems that span sections, as (key path, message) pairs; files are relative to the
    context's folder. Without `run_code`, a model whose check runs the study's code (a python
    model's import) is not checked."""
    folder = context.folder
    problems: list[tuple[tuple, str]] = []
    if run_code or not study.model_spec.runs_code_to_check:
        problems += checked("model", lambda: study.model_spec.check(folder))
    if study.model is None and getattr(study.analysis, "from_", None) is None:
        problems.append((("model",), "a study needs a model: block to make its runs; only an "
                         "analysis whose from: names runs that exist (a CSV or a results folder) "
                         "may leave it out"))
    problems += checked("execution", lambda: check_depends_on(study.execution.depends_on, folder))
    problems += check_parameters(study, context)
    problems += check_quantities(study)
    problems += check_correlation(study, context)
    problems += checked("analysis", lambda: study.analysis.check_size(context))
    problems += checked("analysis", lambda: study.analysis.check(context))
    return list(dict.fromkeys(problems))


def checked(section: str, check) -> list[tuple[tuple, str]]:
    """A section's own problems, located in it; a path its check cannot even look at (a name
    too long, a folder it may not search) is one of them, not an OSError out of validation."""
    try:
        return [((section, *split_path(p.path)), p.message) for p in check()]
    except OSError as exc:
        name = str(exc.filename or "")
        name = f" {name[:77]}..." if len(name) > 80 else f" {name}" if name else ""
        return [((section,), f"cannot use the path{name}: {exc.strerror or exc}")]


def split_path(path: str) -> tuple:
    """'rates.x' -> ('rates', 'x'); 'run[1]' -> ('run', 1)."""
    parts: list = []
    for piece in filter(None, re.split(r"\.", path)):
        name, *indices = re.split(r"\[(\d+)\]", piece)
        parts += [name] if name else []
        parts += [int(i) for i in indices if i]
    return tuple(parts)


def bad_name(name: str, what: str) -> str:
    """Why `name` cannot name a parameter or a quantity ('' when it can): not an identifier, or
    one of Python's constants, which an expression reads as a value. Python's keywords (`yield`,
    `lambda`) and runs.csv's old column names (`id`, `duration`) are names like any other."""
    if _NAME.match(name) and name not in CONSTANTS:
        return ""
    return (f"{name!r} cannot name a {what}: use letters, digits and _ (not "
            f"{', '.join(CONSTANTS)})")


def usable(names) -> list[str]:
    """The names a study can write (a did-you-mean suggests no other)."""
    return [name for name in names if not bad_name(name, "")]


def check_parameters(study: Study, context: StudyContext) -> list[tuple[tuple, str]]:
    problems = []
    inputs = study.model_spec.input_names(context.folder)
    for name in study.parameters:
        if wrong := bad_name(name, "parameter"):
            problems.append((("parameters", name), wrong))
        elif inputs is not None and name not in inputs:
            problems.append((("parameters", name), f"the model has no input {name!r}"
                             f"{suggest(name, usable(inputs))} (inputs: "
                             f"{', '.join(sorted(inputs)) or 'none'})"))
    if not context.varied:
        problems.append((("parameters",), "no parameter is varied; give at least one a "
                         "distribution or bounds"))
    problems += [(split_path(p.path), p.message) for p in context.model.check_inputs(
        context.folder, list(study.parameters), list(context.varied))]
    return problems


def check_quantities(study: Study) -> list[tuple[tuple, str]]:
    problems = []
    outputs = study.model_spec.output_names()
    known = None if outputs is None else (set(outputs) | set(study.parameters)
                                          | set(study.model_spec.defaults()) | {"time"})
    for name, text in (study.quantities or {}).items():
        where = ("quantities", name)
        if wrong := bad_name(name, "quantity"):
            problems.append((where, wrong))
            continue
        if name in study.parameters:
            problems.append((where, f"{name!r} is a parameter too; give the quantity another name"))
        try:
            expr = parse_quantity(text)
        except ExprError as error:  # said once: a syntax error names the text already
            named = repr(str(text)) in error.message
            problems.append(((*where, "<value>"), error.message if named
                             else f"{error.message} in {text!r}"))
            continue
        problem = shape_problem(expr, scalars_only=study.model is None)  # runs given in a CSV
        if problem:
            problems.append(((*where, "<value>"), f"{problem} (in {text!r})"))
        for unknown in sorted(expr.names - known) if known is not None else []:
            problems.append(((*where, "<value>"), f"unknown name {unknown!r} in {text!r}"
                             f"{suggest(unknown, usable(known))}"))
    return problems


def check_correlation(study: Study, context: StudyContext) -> list[tuple[tuple, str]]:
    """`correlation:` names varied parameters, each pair once, r in [-1, 1]; the completed matrix
    is positive definite; the analysis draws correlated inputs."""
    if not study.correlation:
        return []
    problems = []
    names, seen = list(context.varied), {}
    for i, (a, b, r) in enumerate(study.correlation):
        for k, name in enumerate((a, b)):
            if name not in names:
                what = ("is fixed; only varied parameters can be correlated"
                        if name in study.parameters else
                        f"is not a parameter{suggest(name, names)}")
                problems.append((("correlation", i, k), f"{name!r} {what} (varied: "
                                 f"{', '.join(names) or 'none'})"))
        if a == b:
            problems.append((("correlation", i), f"{a!r} is paired with itself; a parameter's "
                             "correlation with itself is 1 already: name two parameters"))
        pair = frozenset((a, b))
        if pair in seen and a != b:
            problems.append((("correlation", i), f"the pair {a}, {b} is given twice (first at "
                             f"correlation[{seen[pair]}]); give each pair once"))
        seen.setdefault(pair, i)
        if not -1 <= r <= 1:
            problems.append((("correlation", i, 2), f"a correlation lies in [-1, 1]; got {r}"))
    if not problems and context.correlation is not None:
        lowest = float(np.linalg.eigvalsh(context.correlation)[0])
        if lowest <= 1e-10:
            problems.append((("correlation",), "the correlations are not positive definite (the "
                             f"completed matrix, unlisted pairs 0, has smallest eigenvalue "
                             f"{lowest:.3g}): no joint distribution has them; weaken them, "
                             "or leave out a pair that contradicts the others"))
    reason = study.analysis.without_correlation
    if reason is not None:
        problems.append((("correlation",), f"{study.analysis.type} cannot take correlated inputs: "
                         f"{reason}; remove `correlation:`, or use an analysis that supports it: "
                         f"{', '.join(registry().correlated())}"))
    elif study.analysis.rows_given():
        problems.append((("correlation",), f"{study.analysis.type} analyses the rows of "
                         "analysis.from as given, with the correlations they have; "
                         "`correlation:` would change nothing: remove it"))
    return problems
