"""Pipeline step *load*, second half: pydantic validation errors mapped back to the lines to fix.

Each error's `loc` is walked through the data and the model's types together, so that union tags
and validator names are skipped, unknown keys get a "did you mean", and the branches of a plain
union collapse into one problem per mistake.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass, replace
from typing import Any, Sequence

from pydantic import BaseModel

from studyrun.core.errors import Problem
from studyrun.core.text import closest
from studyrun.study.source import ABSENT, VALUE, Source, describe, one_line, sort_key


@dataclass
class _Located:
    """One pydantic error walked through the data and the model's types."""

    error: dict
    path: tuple  # the keys/indices present in the data
    parent_type: Any  # the type of the mapping holding the last key of `path`
    end_type: tuple  # (type, discriminator) the error is about
    union: tuple | None  # (where, branch) when the error came from a branch of a plain union
    data: Any  # the data at `path`
    tagged: tuple | None = None  # the last discriminated union passed: (type, discriminator)


_UNKNOWN = object()  # a type the walk could not follow


def problems_from(errors: list[dict], model_cls: type, source: Source) -> list[Problem]:
    located = _collapse_unions([_locate(err, model_cls, source.data) for err in errors])
    typo_targets = {(loc.path[:-1], _suggest(loc.path[-1], _allowed_keys(loc.parent_type)))
                    for loc in located if loc.error["type"] == "extra_forbidden" and loc.path}
    problems = []
    for loc in located:
        if loc.error["type"] == "missing" and (loc.path, str(loc.error["loc"][-1])) in typo_targets:
            continue  # `smaples: 1` is one mistake, reported as the unknown key
        problem = _to_problem(loc, source)
        if "[key]" in loc.error["loc"] and loc.path:  # a mapping's key, not its value, is wrong
            problem = replace(problem, message=f"the key '{loc.path[-1]}': {problem.message}")
        problem = replace(problem, message=one_line(problem.message))
        if problem not in problems:
            problems.append(problem)
    main = source.file
    return sorted(problems, key=lambda p: (p.file != main,) + sort_key(p))


def error_paths(errors: list[dict], model_cls: type, data: Any) -> list[tuple]:
    """Where in the data each pydantic error lies: the keys and indices present, tags skipped (a
    required top-level key left out: its name)."""
    return [_locate(err, model_cls, data).path or tuple(err["loc"][:1]) for err in errors]


def _locate(err: dict, model_cls: type, data: Any) -> _Located:
    path: list = []
    tp, parent, union, tagged = (model_cls, None), (None, None), None, None
    for index, item in enumerate(err["loc"]):
        tp = _unwrap(tp)
        member = _member_for(tp, item) if _is_union(tp[0]) else None
        if _is_union(tp[0]) and (member is not None or not _is_key(data, item)):
            if tp[1] is None and union is None:
                union = (tuple(err["loc"][:index]), item)
            tagged = tp if tp[1] is not None else tagged
            tp = (member, None) if member is not None else (_UNKNOWN, None)
            continue
        if _is_key(data, item):
            path.append(item)
            parent, tp, data = tp, _step(tp[0], item), data[item]
        elif _is_model(tp[0]) and isinstance(item, str) and _field(tp[0], item) is not None:
            parent, tp, data = tp, _step(tp[0], item), ABSENT  # a missing field
    return _Located(err, tuple(path), _unwrap(parent)[0], _unwrap(tp), union, data, tagged)


def _is_key(data: Any, item: Any) -> bool:
    if isinstance(data, dict):
        return isinstance(item, str) and item in data
    return isinstance(data, list) and isinstance(item, int) and 0 <= item < len(data)


def _collapse_unions(located: list[_Located]) -> list[_Located]:
    """Keep, for each plain union, the branch the data fits best.

    Best: the fewest unknown keys (a sign of the wrong branch), then the fewest errors, then the
    errors reaching deepest into the data (`[1, x]` is a list with a bad item, not a bad number).
    Branches that tie with one type error each merge into "expected A or B".
    """
    groups: dict[tuple, dict[Any, list[_Located]]] = {}
    for loc in located:
        if loc.union is not None:
            groups.setdefault(loc.union[0], {}).setdefault(loc.union[1], []).append(loc)
    keep: set[int] = set()
    merged: dict[int, _Located] = {}
    for branches in groups.values():
        score = {b: (sum(x.error["type"] == "extra_forbidden" for x in errs), len(errs),
                     -max(len(x.path) for x in errs)) for b, errs in branches.items()}
        best = [b for b in branches if score[b] == min(score.values())]
        if len(best) > 1 and all(len(branches[b]) == 1 for b in best):
            first = branches[best[0]][0]
            expected = [_expectation(branches[b][0]) for b in best]
            if all(expected):
                merged[id(first)] = _Located({**first.error, "type": "studyrun_any_of", "expected": expected},
                                             first.path, first.parent_type, first.end_type, None, first.data)
        keep.update(id(x) for x in branches[best[0]])
    return [merged.get(id(x), x) for x in located if x.union is None or id(x) in keep]


# ---------------------------------------------------------------------------------- types


def _unwrap(tp: tuple) -> tuple:
    """Strip Annotated (keeping a discriminator) and Optional; return (type, discriminator)."""
    annotation, discriminator = tp
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            args = typing.get_args(annotation)
            for meta in args[1:]:
                found = getattr(meta, "discriminator", None)
                discriminator = found if found is not None else discriminator
            annotation = args[0]
        elif _is_union(annotation):
            members = [m for m in typing.get_args(annotation) if m is not type(None)]
            if len(members) != 1:
                return annotation, discriminator
            annotation = members[0]
        else:
            return annotation, discriminator


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _field(model: type[BaseModel], key: str):
    for name, info in model.model_fields.items():
        if key in (name, info.alias, info.validation_alias):
            return info
    return None


def _step(tp: Any, item: Any) -> tuple:
    """The type inside `tp` at key or index `item`."""
    if _is_model(tp):
        info = _field(tp, item) if isinstance(item, str) else None
        return (info.annotation, info.discriminator) if info is not None else (_UNKNOWN, None)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (dict, typing.Mapping) or (isinstance(origin, type) and issubclass(origin, dict)):
        return (args[1] if len(args) == 2 else _UNKNOWN, None)
    if origin is tuple and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return (args[0], None)
        return (args[item], None) if isinstance(item, int) and item < len(args) else (_UNKNOWN, None)
    if origin in (list, set, frozenset, typing.Sequence) or (isinstance(origin, type) and issubclass(origin, list)):
        return (args[0] if args else _UNKNOWN, None)
    return (_UNKNOWN, None)


def _member_tags(member: Any, discriminator: Any) -> list[str]:
    """The labels pydantic uses for a union member: its Tag, its literal tag value, its name."""
    tags = []
    if typing.get_origin(member) is typing.Annotated:
        tags += [m.tag for m in typing.get_args(member)[1:] if type(m).__name__ == "Tag"]
        member = typing.get_args(member)[0]
    if _is_model(member):
        if isinstance(discriminator, str) and _field(member, discriminator) is not None:
            annotation = _field(member, discriminator).annotation
            if typing.get_origin(annotation) is typing.Literal:
                tags += [str(v) for v in typing.get_args(annotation)]
        tags.append(member.__name__)
    return tags


def _union_tags(tp: tuple) -> list[str]:
    """The tags a discriminated union accepts, in order."""
    annotation, discriminator = _unwrap(tp)
    if not _is_union(annotation):
        return []
    return [_member_tags(m, discriminator)[0] for m in typing.get_args(annotation)
            if m is not type(None) and _member_tags(m, discriminator)]


def _member_for(tp: tuple, item: Any) -> Any:
    annotation, discriminator = tp
    for member in typing.get_args(annotation):
        if item in _member_tags(member, discriminator):
            return member
    return None


def _other_members_with(key: Any, loc: _Located) -> str:
    """' (it is a key of sobol)' when another member of the union just passed has `key`."""
    if loc.tagged is None or not isinstance(key, str):
        return ""
    owners = []
    for member in typing.get_args(loc.tagged[0]):
        model, tags = _unwrap((member, None))[0], _member_tags(member, loc.tagged[1])
        if tags and model is not loc.parent_type and key in _allowed_keys(model):
            owners.append(tags[0])
    return f" (it is a key of {' and '.join(owners)})" if owners else ""


def _section_with(key: Any, model: Any) -> str | None:
    """'the analysis block (a key of calibrate)' when a block of `model` (a union's member
    included) has `key`, which was written one level too high."""
    if not _is_model(model) or not isinstance(key, str):
        return None
    for name, info in model.model_fields.items():
        annotation, discriminator = _unwrap((info.annotation, info.discriminator))
        members = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
        for member in members:
            inner = _unwrap((member, None))[0]
            if _is_model(inner) and key in _allowed_keys(inner):
                tags = _member_tags(member, discriminator) if discriminator is not None else []
                return f"the {name} block" + (f" (a key of {tags[0]})" if tags else "")
    return None


def _allowed_keys(model: Any) -> list[str]:
    if not _is_model(model):
        return []
    return [info.alias or name for name, info in model.model_fields.items()]


def _suggest(word: Any, choices: Sequence[str]) -> str | None:
    if not isinstance(word, str):
        return None
    by_case = [c for c in choices if c.lower() == word.lower()]
    return by_case[0] if by_case else closest(word, choices)


# ---------------------------------------------------------------------------------- messages


_EXPECTED = {
    "int": "a whole number", "float": "a number", "bool": "true or false", "string": "a text value",
    "list": "a list", "tuple": "a list", "set": "a list", "dict": "a mapping of keys",
    "model": "a mapping of keys", "model_attributes": "a mapping of keys", "date": "a date",
    "datetime": "a date and time", "url": "a URL", "path": "a path", "decimal": "a number",
    "complex": "a number", "bytes": "a text value", "none": "nothing (null)",
}
_YAML_KINDS = {"bool": "true or false", "int": "a number", "float": "a number", "date": "a date",
               "datetime": "a date and time", "bytes": "binary data"}
_BOUNDS = {"greater_than": ("gt", "greater than"), "greater_than_equal": ("ge", "at least"),
           "less_than": ("lt", "less than"), "less_than_equal": ("le", "at most"),
           "multiple_of": ("multiple_of", "a multiple of")}


def _expectation(loc: _Located) -> str | None:
    kind = loc.error["type"]
    for suffix in ("_type", "_parsing", "_from_float"):
        if kind.endswith(suffix) and kind[: -len(suffix)] in _EXPECTED:
            return _EXPECTED[kind[: -len(suffix)]]
    ctx = loc.error.get("ctx") or {}
    if kind == "literal_error":
        choices = [f"'{c}'" for c in _quoted(ctx.get("expected", ""))]
        return choices[0] if len(choices) == 1 else "one of " + ", ".join(choices)
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"a number {words} {describe(ctx.get(key))}"
    return None


def _quoted(text: str) -> list[str]:
    return re.findall(r"'((?:[^'\\]|\\.)*)'", text) or ([text] if text else [])


def _name_of(path: tuple) -> str:
    names = [p for p in path if isinstance(p, str)]
    return names[-1] if names else "value"


def _choice_message(found: Any, choices: list[str], what: str) -> str:
    allowed = ", ".join(choices)
    hint = _suggest(found, choices)
    head = (f"unknown {what} {describe(found)}" if isinstance(found, str)
            else f"expected {what}, got {describe(found)}")
    return f"{head}; did you mean '{hint}'? allowed: {allowed}" if hint else f"{head}; allowed: {allowed}"


def _to_problem(loc: _Located, source: Source) -> Problem:
    """The problem for one error: where (key, parent mapping or tag) and a user-facing message."""
    kind, path = loc.error["type"], loc.path
    if kind == "missing":
        return _missing_problem(loc, source)
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return _tag_problem(loc, source)
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc.parent_type)
        key = path[-1] if path else loc.error["loc"][-1]
        section = _section_with(key, loc.parent_type)
        if section:
            return source.problem(path, f"unknown key '{key}' here: it belongs inside {section}; "
                                        "move it there (indented under it)")
        hint = _suggest(key, allowed)
        if hint:
            return source.problem(path, f"unknown key '{key}'; did you mean '{hint}'?")
        listed = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return source.problem(path, f"unknown key '{key}'{listed}{_other_members_with(key, loc)}")
    return source.problem(path, _value_message(loc))


def _value_message(loc: _Located) -> str:
    """What is wrong with a value: expected this, got that (and a hint where one helps)."""
    err = loc.error
    kind, ctx, found = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "studyrun_any_of":
        return f"expected {' or '.join(dict.fromkeys(err['expected']))}, got {describe(found)}"
    if kind in ("literal_error", "enum"):
        return _choice_message(found, _quoted(ctx.get("expected", "")), "value")
    if kind in ("value_error", "assertion_error"):
        message = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if kind == "assertion_error":
            message = message.split("\n")[0]  # below: the assert's own introspection, if any
        return " ".join(message.split())  # one line per problem
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {describe(ctx.get(key))}, got {describe(found)}"
    if kind in ("too_short", "too_long"):
        limit = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        return (f"expected {'at least' if kind == 'too_short' else 'at most'} {limit} "
                f"item{'s' if limit != 1 else ''}, got {ctx.get('actual_length')}")
    if kind == "string_too_long":
        return (f"must be at most {ctx.get('max_length')} characters long, got "
                f"{len(str(found))} characters")
    if kind == "string_pattern_mismatch":
        return f"must match the pattern {ctx.get('pattern')}, got {describe(found)}"
    if kind == "string_type" and found is not None and not isinstance(found, (dict, list)):
        reads_as = _YAML_KINDS.get(type(found).__name__, "a value")
        return (f"expected a text value, got {describe(found)} "
                f"(YAML reads this as {reads_as}; put it in quotes for text)")
    expected = _expectation(loc)
    if expected:
        return f"expected {expected}, got {describe(found)}"
    message = str(err["msg"]).replace("Input should be", "must be")
    return message if "got" in message else f"{message}, got {describe(found)}"


def _missing_problem(loc: _Located, source: Source) -> Problem:
    path, name = loc.path, loc.error["loc"][-1] if loc.error["loc"] else "?"
    if isinstance(name, int):
        count = len(loc.data) if isinstance(loc.data, list) else 0
        return source.problem(path, f"too few items: expected at least {name + 1}, got {count}")
    file = source.where(path)[0]
    value_at = source.positions.get(path + (VALUE,))
    if path and value_at is not None and value_at[0] != file:  # e.g. the top of an included file
        return replace(source.problem(path, f"missing required key '{name}'"),
                       file=value_at[0], line=value_at[1], col=value_at[2])
    return source.problem(path, f"missing required key '{name}'")


def _tag_problem(loc: _Located, source: Source) -> Problem:
    err, path, data = loc.error, loc.path, loc.data
    ctx = err.get("ctx") or {}
    choices = _union_tags(loc.end_type) or _quoted(ctx.get("expected_tags", ""))
    discriminator = str(ctx.get("discriminator", "")).strip("'")
    field_key = discriminator if isinstance(data, dict) and discriminator in data else None
    if field_key is None and isinstance(data, dict) and "tag" in ctx:
        field_key = next((k for k, v in data.items() if v == ctx["tag"]), None)  # a callable's tag
    if err["type"] == "union_tag_not_found":
        if discriminator.endswith("()") or not discriminator:  # a callable discriminator
            return source.problem(path, f"cannot tell what kind of {_name_of(path)} this is (it can be: "
                                        f"{', '.join(choices)}); got {describe(data)}")
        if not isinstance(data, dict):
            return source.problem(path, f"expected a mapping of keys, got {describe(data)}")
        return source.problem(path, f"missing required key '{discriminator}' (one of: {', '.join(choices)})")
    what = f"{_name_of(path)} type" if field_key in (None, "type") else field_key
    where = path + (field_key,) if field_key is not None else path
    return source.problem(where, _choice_message(ctx.get("tag"), choices, what))
