"""Pipeline step *load*: a YAML study file to plain data with source positions, then validation.

`read_yaml` composes the YAML node tree with the safe loader and converts it itself, so every key
and value keeps its FILE:LINE:COL; `include_files` splices `model: {file: ...}` in; `validate`
runs a pydantic model and maps every error back to the line a user has to fix.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import BaseModel, ValidationError

from .errors import Problem, StudyError

VALUE = "<value>"  # a path suffix: the position of a key's value rather than of the key
MAX_ALIAS_GROWTH = 100_000  # aliases may add at most this many nodes (billion laughs guard)
MAX_DEPTH = 100  # nesting deeper than this is a mistake, not a study
EMPTY = "the file is empty; a study needs at least model, parameters and analysis"
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"


@dataclass
class Source:
    """Plain data read from YAML plus where each key and value stands."""

    data: Any
    positions: dict[tuple, tuple[str, int, int]]
    file: str = ""  # the file the data was read from (its top level)
    includes: dict[str, str] = field(default_factory=dict)  # key -> path of the spliced-in file

    def where(self, path: Sequence[str | int]) -> tuple[str, int | None, int | None]:
        """The deepest recorded position along `path` (walking back to the nearest ancestor)."""
        path = tuple(path)
        for end in range(len(path), -1, -1):
            if path[:end] in self.positions:
                return self.positions[path[:end]]
        return (self.file or "<study>", None, None)

    def problem(self, path: Sequence[str | int], message: str) -> Problem:
        """A Problem at `path`, with its dotted name (`cases[2].x`) and position."""
        file, line, col = self.where(path)
        return Problem(message, path=format_path(path), file=file, line=line, col=col)


def format_path(path: Sequence[str | int]) -> str:
    """`('cases', 2, 'x')` -> `cases[2].x`; the `<value>` marker is left out."""
    text = ""
    for part in path:
        if part == VALUE:
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def format_problems(problems: Sequence[Problem]) -> str:
    """One `FILE:LINE:COL: path: message` line per problem."""
    return "\n".join(str(p) for p in problems)


# ---------------------------------------------------------------------------------- reading YAML


def read_yaml(path: Path) -> Source:
    """Read a YAML file safely into a `Source`; every mistake is a StudyError with its position.

    Mapping keys are always strings, as written (`on:` stays "on", `1:` stays "1"); values are
    what `yaml.safe_load` gives. Duplicate keys are errors, and aliases may not blow up the data.
    """
    name = str(path)
    text = _read_text(Path(path), name)
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        raise StudyError([_syntax_problem(exc, name)]) from None
    except yaml.YAMLError as exc:  # a ReaderError: a character YAML does not allow
        line, col = _line_col(text, getattr(exc, "position", 0))
        raise StudyError(f"not a valid YAML text: {exc}".split("\n")[0], file=name, line=line, col=col) from None
    except RecursionError:
        raise StudyError(f"nested too deeply (more than {MAX_DEPTH} levels)", file=name, line=1, col=1) from None
    if root is None or (isinstance(root, yaml.ScalarNode) and root.value == "" and root.style is None):
        raise StudyError(EMPTY, file=name, line=1, col=1)  # nothing, or only `---`
    return _convert_document(root, loader, name)


def _read_text(path: Path, name: str) -> str:
    """The file's text, or a StudyError for a missing, unreadable or binary file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise StudyError("file not found", file=name, line=1, col=1) from None
    except IsADirectoryError:
        raise StudyError("is a folder, not a file", file=name, line=1, col=1) from None
    except OSError as exc:
        raise StudyError(f"cannot read the file: {exc.strerror or exc}", file=name, line=1, col=1) from None
    if b"\x00" in raw:
        line, col = _line_col(raw, raw.index(b"\x00"))
        raise StudyError("not a text file (it contains NUL bytes); save it as UTF-8 text", file=name, line=line, col=col)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _line_col(raw, exc.start)
        raise StudyError(f"not a text file (byte 0x{raw[exc.start]:02x} is not UTF-8); save it as UTF-8 text",
                         file=name, line=line, col=col) from None
    if not text.strip():
        raise StudyError(EMPTY, file=name, line=1, col=1)
    return text


def _line_col(text: str | bytes, offset: int) -> tuple[int, int]:
    newline = "\n" if isinstance(text, str) else b"\n"
    before = text[:offset]
    return before.count(newline) + 1, offset - (before.rfind(newline) + 1) + 1


def _syntax_problem(exc: yaml.MarkedYAMLError, name: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    message = exc.problem or exc.context or "invalid YAML"
    if exc.context and exc.problem:
        message = f"{exc.problem} ({exc.context}"
        if exc.context_mark is not None and exc.context_mark is not mark:
            message += f" at line {exc.context_mark.line + 1}"
        message += ")"
    if "'\\t'" in message:
        message += "; indent with spaces, not tabs"
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return Problem(f"YAML syntax error: {message}", file=name, line=line, col=col)


def _convert_document(root: yaml.Node, loader: yaml.SafeLoader, name: str) -> Source:
    """Check the node tree's size and shape, then convert it to a Source (or raise all problems)."""
    _check_alias_growth(root, name)
    converter = _Converter(loader, name)
    data = converter.convert(root, ())
    if not isinstance(data, dict) and not converter.problems:
        kind = "a list" if isinstance(data, list) else f"a single value ({_describe(data)})"
        converter.problems.append(Problem(
            f"the top level must be a mapping of keys (model, parameters, analysis, ...); got {kind}",
            file=name, line=root.start_mark.line + 1, col=root.start_mark.column + 1))
    if converter.problems:
        raise StudyError(sorted(converter.problems, key=_sort_key))
    converter.positions.setdefault((), (name, 1, 1))
    return Source(data, converter.positions, file=name)


def _check_alias_growth(root: yaml.Node, name: str) -> None:
    """Refuse recursive aliases and aliases that expand the data far beyond what is written."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in busy:
            m = node.start_mark
            raise StudyError("an alias refers to a node that contains it (a recursive structure)",
                             file=name, line=m.line + 1, col=m.column + 1)
        if depth > MAX_DEPTH:
            m = node.start_mark
            raise StudyError(f"nested too deeply (more than {MAX_DEPTH} levels)",
                             file=name, line=m.line + 1, col=m.column + 1)
        busy.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        busy.discard(key)
        sizes[key] = total
        return total

    expanded = size(root, 0)
    if expanded > len(sizes) + MAX_ALIAS_GROWTH:
        raise StudyError(f"aliases expand this file to {expanded:,} values (more than {MAX_ALIAS_GROWTH:,} "
                         "beyond what is written); is it an alias bomb?", file=name, line=1, col=1)


class _Converter:
    """Turns a composed node tree into plain data, recording positions and collecting problems."""

    def __init__(self, loader: yaml.SafeLoader, name: str) -> None:
        self.loader, self.name = loader, name
        self.positions: dict[tuple, tuple[str, int, int]] = {}
        self.problems: list[Problem] = []

    def at(self, node: yaml.Node) -> tuple[str, int, int]:
        return (self.name, node.start_mark.line + 1, node.start_mark.column + 1)

    def fail(self, node: yaml.Node, path: tuple, message: str) -> None:
        _, line, col = self.at(node)
        self.problems.append(Problem(message, path=format_path(path), file=self.name, line=line, col=col))

    def convert(self, node: yaml.Node, path: tuple) -> Any:
        self.positions[path + (VALUE,)] = self.at(node)
        if isinstance(node, yaml.ScalarNode):
            return self.convert_scalar(node, path)
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            items = []
            for index, child in enumerate(node.value):
                self.positions[path + (index,)] = self.at(child)
                items.append(self.convert(child, path + (index,)))
            return items
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
            return self.convert_mapping(node, path)
        self.fail(node, path, f"unsupported YAML tag {_short_tag(node.tag)}")
        return None

    def convert_scalar(self, node: yaml.ScalarNode, path: tuple) -> Any:
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError:
            self.fail(node, path, f"unsupported YAML tag {_short_tag(node.tag)}")
        except Exception:  # noqa: BLE001 - e.g. `!!int abc`: PyYAML raises ValueError and others
            self.fail(node, path, f"cannot read {node.value!r} as {_short_tag(node.tag)}")
        return None

    def convert_mapping(self, node: yaml.MappingNode, path: tuple) -> dict:
        result: dict[str, Any] = {}
        for key_node, value_node, explicit in self.pairs(node, path):
            if not isinstance(key_node, yaml.ScalarNode):
                self.fail(key_node, path, "a key must be a plain name, not a list or a mapping")
                continue
            key = key_node.value
            if key in result:
                if explicit:
                    _, first, _ = self.positions[path + (key,)]
                    self.fail(key_node, path + (key,), f"duplicate key '{key}' (first at line {first}); "
                              "YAML would silently keep only the last one")
                continue
            self.positions[path + (key,)] = self.at(key_node)
            result[key] = self.convert(value_node, path + (key,))
        return result

    def pairs(self, node: yaml.MappingNode, path: tuple):
        """(key, value, explicit) node pairs: the mapping's own first, then `<<: *merged` ones."""
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merges.extend(value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node])
            else:
                yield key_node, value_node, True
        for merged in merges:
            if isinstance(merged, yaml.MappingNode) and merged.tag == _MAP:
                yield from ((k, v, False) for k, v, _ in self.pairs(merged, path))
            else:
                self.fail(merged, path, "a merge key (<<) needs a mapping or a list of mappings")


def _short_tag(tag: str) -> str:
    return "'!!" + tag[len("tag:yaml.org,2002:"):] + "'" if tag.startswith("tag:yaml.org,2002:") else repr(tag)


# ---------------------------------------------------------------------------------- includes


def include_files(source: Source, key: str = "model") -> Source:
    """Splice `key: {file: relative/path.yaml}` in from that file, keeping its own positions."""
    if not isinstance(source.data, dict):
        return source
    value = source.data.get(key)
    if not (isinstance(value, dict) and list(value) == ["file"]):
        return source
    target = value["file"]
    if not isinstance(target, str) or not target.strip():
        raise StudyError([source.problem((key, "file", VALUE), f"expected the path of a YAML file, got {_describe(target)}")])
    path = Path(source.file).parent / target
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "file not found"
        raise StudyError([source.problem((key, "file", VALUE), f"{what}: {target} (relative to {Path(source.file).parent}/)")])
    included = read_yaml(path)
    positions = {p: pos for p, pos in source.positions.items() if not (len(p) > 1 and p[0] == key)}
    for p, pos in included.positions.items():
        positions[(key,) + p if p else (key, VALUE)] = pos
    data = dict(source.data)
    data[key] = included.data
    return Source(data, positions, file=source.file, includes={**source.includes, key: str(path)})


# ---------------------------------------------------------------------------------- validation


def validate(model_cls: type[BaseModel], source: Source, context: dict | None = None) -> BaseModel:
    """Validate `source.data` with pydantic; raise one StudyError holding every mistake, located."""
    try:
        return model_cls.model_validate(source.data, context=context)
    except ValidationError as exc:
        problems = _problems_from(exc.errors(include_url=False), model_cls, source)
    raise StudyError(problems)


def _sort_key(problem: Problem) -> tuple:
    return (problem.file or "", problem.line or 0, problem.col or 0, problem.path)


@dataclass
class _Located:
    """One pydantic error walked through the data and the model's types."""

    error: dict
    path: tuple  # the keys/indices present in the data
    parent_type: Any  # the type of the mapping holding the last key of `path`
    end_type: tuple  # (type, discriminator) the error is about
    union: tuple | None  # (where, branch) when the error came from a branch of a plain union
    data: Any  # the data at `path`


_UNKNOWN = object()
_ABSENT = object()


def _problems_from(errors: list[dict], model_cls: type, source: Source) -> list[Problem]:
    located = _collapse_unions([_locate(err, model_cls, source.data) for err in errors])
    typo_targets = {(loc.path[:-1], _suggest(loc.path[-1], _allowed_keys(loc.parent_type)))
                    for loc in located if loc.error["type"] == "extra_forbidden" and loc.path}
    problems = []
    for loc in located:
        if loc.error["type"] == "missing" and (loc.path, str(loc.error["loc"][-1])) in typo_targets:
            continue  # `smaples: 1` is one mistake, reported as the unknown key
        problem = _to_problem(loc, source)
        if problem not in problems:
            problems.append(problem)
    main = source.file
    return sorted(problems, key=lambda p: (p.file != main,) + _sort_key(p))


def _locate(err: dict, model_cls: type, data: Any) -> _Located:
    path: list = []
    tp, parent, union = (model_cls, None), (None, None), None
    for index, item in enumerate(err["loc"]):
        tp = _unwrap(tp)
        if _is_union(tp[0]) and not _is_key(data, item):
            member = _member_for(tp, item)
            if tp[1] is None and union is None:
                union = (tuple(err["loc"][:index]), item)
            tp = (member, None) if member is not None else (_UNKNOWN, None)
            continue
        if _is_key(data, item):
            path.append(item)
            parent, tp, data = tp, _step(tp[0], item), data[item]
        elif _is_model(tp[0]) and isinstance(item, str) and _field(tp[0], item) is not None:
            parent, tp, data = tp, _step(tp[0], item), _ABSENT  # a missing field
    return _Located(err, tuple(path), _unwrap(parent)[0], _unwrap(tp), union, data)


def _is_key(data: Any, item: Any) -> bool:
    if isinstance(data, dict):
        return isinstance(item, str) and item in data
    return isinstance(data, list) and isinstance(item, int) and 0 <= item < len(data)


def _collapse_unions(located: list[_Located]) -> list[_Located]:
    """Keep, for each plain union, only the branch whose errors reach deepest into the data."""
    groups: dict[tuple, dict[Any, list[_Located]]] = {}
    for loc in located:
        if loc.union is not None:
            groups.setdefault(loc.union[0], {}).setdefault(loc.union[1], []).append(loc)
    keep: set[int] = set()
    merged: dict[int, _Located] = {}
    for branches in groups.values():
        depth = {b: max(len(x.path) for x in errs) for b, errs in branches.items()}
        best = [b for b in branches if depth[b] == max(depth.values())]
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
    if origin in (list, set, frozenset, typing.Sequence) or (isinstance(origin, type) and issubclass(origin, (list,))):
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
            tags += [str(v) for v in typing.get_args(annotation) if typing.get_origin(annotation) is typing.Literal]
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


def _allowed_keys(model: Any) -> list[str]:
    if not _is_model(model):
        return []
    return [info.alias or name for name, info in model.model_fields.items()]


def _suggest(word: Any, choices: Sequence[str]) -> str | None:
    if not isinstance(word, str):
        return None
    by_case = [c for c in choices if c.lower() == word.lower()]
    close = by_case or difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


# ---------------------------------------------------------------------------------- messages


_EXPECTED = {
    "int": "a whole number", "float": "a number", "bool": "true or false", "string": "a text value",
    "list": "a list", "tuple": "a list", "set": "a list", "dict": "a mapping of keys",
    "model": "a mapping of keys", "model_attributes": "a mapping of keys", "date": "a date",
    "datetime": "a date and time", "url": "a URL", "path": "a path", "decimal": "a number",
    "complex": "a number", "bytes": "a text value", "none": "nothing (null)",
}
_BOUNDS = {"greater_than": ("gt", "greater than"), "greater_than_equal": ("ge", "at least"),
           "less_than": ("lt", "less than"), "less_than_equal": ("le", "at most"),
           "multiple_of": ("multiple_of", "a multiple of")}


def _expectation(loc: _Located) -> str | None:
    kind = loc.error["type"]
    for suffix in ("_type", "_parsing", "_from_float"):
        if kind.endswith(suffix) and kind[: -len(suffix)] in _EXPECTED:
            return _EXPECTED[kind[: -len(suffix)]]
    if kind == "literal_error":
        return "one of " + ", ".join(_quoted(loc.error.get("ctx", {}).get("expected", "")))
    return None


def _quoted(text: str) -> list[str]:
    return re.findall(r"'((?:[^'\\]|\\.)*)'", text) or ([text] if text else [])


def _describe(value: Any) -> str:
    if value is None or value is _ABSENT:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _name_of(path: tuple) -> str:
    names = [p for p in path if isinstance(p, str)]
    return names[-1] if names else "value"


def _choice_message(found: Any, choices: list[str], what: str) -> str:
    allowed = ", ".join(choices)
    hint = _suggest(found, choices)
    head = f"unknown {what} {_describe(found)}" if isinstance(found, str) else f"expected {what}, got {_describe(found)}"
    return f"{head}; did you mean '{hint}'? allowed: {allowed}" if hint else f"{head}; allowed: {allowed}"


def _to_problem(loc: _Located, source: Source) -> Problem:
    err, path = loc.error, loc.path
    kind, ctx, found = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "missing":
        return _missing_problem(loc, source)
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc.parent_type)
        hint = _suggest(path[-1] if path else None, allowed)
        key = path[-1] if path else err["loc"][-1]
        if hint:
            return source.problem(path, f"unknown key '{key}'; did you mean '{hint}'?")
        return source.problem(path, f"unknown key '{key}'" + (f"; allowed: {', '.join(allowed)}" if allowed else ""))
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return _tag_problem(loc, source)
    if kind == "studyrun_any_of":
        return source.problem(path, f"expected {' or '.join(dict.fromkeys(err['expected']))}, got {_describe(found)}")
    if kind in ("literal_error", "enum"):
        choices = _quoted(ctx.get("expected", ""))
        return source.problem(path, _choice_message(found, choices, "value"))
    if kind in ("value_error", "assertion_error"):
        message = str(err["msg"])
        for prefix in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(prefix)
        return source.problem(path, message)
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return source.problem(path, f"must be {words} {_describe(ctx.get(key))}, got {_describe(found)}")
    if kind in ("too_short", "too_long"):
        limit = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        return source.problem(path, f"expected {'at least' if kind == 'too_short' else 'at most'} {limit} "
                                    f"item{'s' if limit != 1 else ''}, got {ctx.get('actual_length')}")
    if kind == "int_from_float":
        return source.problem(path, f"expected a whole number, got {_describe(found)}")
    expected = _expectation(loc)
    if expected:
        return source.problem(path, f"expected {expected}, got {_describe(found)}")
    message = str(err["msg"]).replace("Input should be", "must be")
    return source.problem(path, f"{message}, got {_describe(found)}" if "got" not in message else message)


def _missing_problem(loc: _Located, source: Source) -> Problem:
    path, name = loc.path, loc.error["loc"][-1] if loc.error["loc"] else "?"
    if isinstance(name, int):
        count = len(loc.data) if isinstance(loc.data, list) else 0
        return source.problem(path, f"too few items: expected at least {name + 1}, got {count}")
    file = source.where(path)[0]
    value_at = source.positions.get(path + (VALUE,))
    if path and value_at is not None and value_at[0] != file:  # e.g. the top of an included file
        return Problem(f"missing required key '{name}'", path=format_path(path), file=value_at[0],
                       line=value_at[1], col=value_at[2])
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
        if not isinstance(data, dict):
            return source.problem(path, f"expected a mapping of keys, got {_describe(data)}")
        if not discriminator.endswith("()"):
            return source.problem(path, f"missing required key '{discriminator}' (one of: {', '.join(choices)})")
        return source.problem(path, f"cannot tell what kind of {_name_of(path)} this is; expected one of: "
                                    f"{', '.join(choices)}")
    what = f"{_name_of(path)} type" if field_key in (None, "type") else field_key
    where = path + (field_key,) if field_key is not None else path
    return source.problem(where, _choice_message(ctx.get("tag"), choices, what))
