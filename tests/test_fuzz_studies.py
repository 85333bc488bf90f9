"""Fuzzing the load step (issue 8, point 4): random YAML text and bytes, and mutations of the valid
studies in studies/, each loaded with the real `load_study`.

Every example must end as a valid study or a StudyError whose every line is FILE:LINE:COL: ...,
within a few seconds, with nothing else raised.
"""

from __future__ import annotations

import copy
import math
import typing

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from test_fuzz_common import FAST, copy_studies, examples, load_cleanly, study_files

from studyrun.blocks.params import ParameterSpec
from studyrun.study import spec
from studyrun.study.loading import include_files, read_yaml
from studyrun.study.spec.execution import Cluster


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A copy of studies/ to write mutants into (they find the models and modules they name)."""
    return copy_studies(tmp_path_factory.mktemp("fuzz") / "studies")


def originals(folder) -> dict[str, tuple[str, dict]]:
    """Each example study's text, and its data with the model file spliced in."""
    found = {}
    for name in study_files():
        path = folder / name
        found[name] = (path.read_text(), include_files(read_yaml(path)).data)
    return found


_CACHE: dict = {}


def original(folder, name: str) -> tuple[str, dict]:
    if not _CACHE:
        _CACHE.update(originals(folder))
    text, data = _CACHE[name]
    return text, copy.deepcopy(data)


# ------------------------------------------------------------------------------ values

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
HOSTILE_TEXT = st.sampled_from([
    "", " ", "nan", ".inf", "-.inf", "~", "null", "yes", "no", "on", "off", "0x1F", "0o17", "1e309",
    "-0", "2026-12-02", "../../outside", "/etc/passwd", "$(touch /tmp/pwned)", "`id`", "; rm -rf x",
    "{params_file}", "{unknown}", "{", "}", "__import__('os').system('x')", "9**9**9",
    "().__class__.__bases__", "lambda: 1", "x[0]", "a.b", "f'{x}'", "(y:=1)", "tcp://", "local ",
    "euler", "RK45", "sobol", "uniform", "x" * 500, "\u00e9t\u00e9", "a\tb", "line\nbreak",
])
NUMBERS = st.one_of(
    st.integers(-10**6, 10**6), st.integers(-10**40, 10**40),
    st.sampled_from([0, -1, 1, 2**31, 2**63, -2**63 - 1, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, -0.0, 0.5, 1e-300]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT, HOSTILE_TEXT, st.dates())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(TEXT, HOSTILE_TEXT), inner, max_size=4)),
    max_leaves=12,
)


def deep(kind: str, depth: int):
    value = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


DEEP = st.builds(deep, st.sampled_from(["list", "dict"]), st.integers(1, 150))
WRONG = st.one_of(SCALARS, VALUES, DEEP)


# ------------------------------------------------------------------------------ mutations


def _members(union) -> list[type]:
    """The classes of a (possibly annotated) union."""
    found = []
    for arg in typing.get_args(union):
        if typing.get_origin(arg) in (typing.Union, typing.Annotated):
            found += _members(arg)
        elif isinstance(arg, type) and issubclass(arg, BaseModel):
            found.append(arg)
    return found


def _fields(classes) -> dict[str, list[str]]:
    """type tag (or class name) -> the keys that class accepts."""
    table = {}
    for cls in classes:
        tag = cls.model_fields.get("type") or cls.model_fields.get("distribution")
        default = tag.default if tag is not None and isinstance(tag.default, str) else None
        literal = typing.get_args(tag.annotation) if tag is not None else ()
        table[default or (literal[0] if literal else cls.__name__)] = [
            info.alias or name for name, info in cls.model_fields.items()]
    return table


SECTIONS = {"model": _fields(_members(spec.ModelUnion)),
            "analysis": _fields(_members(spec.AnalysisUnion)),
            "parameters": _fields(_members(ParameterSpec)),
            "execution": {"": list(spec.Execution.model_fields)},
            "scheduler": {"": list(Cluster.model_fields)}}
PLAUSIBLE = st.one_of(NUMBERS, st.lists(NUMBERS, max_size=4), HOSTILE_TEXT,
                      st.lists(HOSTILE_TEXT, max_size=3),
                      st.dictionaries(st.sampled_from(["x", "a", "PATH", "A=B", "time"]),
                                      st.one_of(NUMBERS, HOSTILE_TEXT), max_size=3))


def add_known_key(data, draw) -> None:
    """A key the schema knows (timeout, memory_limit, rtol, second_order...) with an odd value,
    in the model, the analysis, a parameter, execution or a cluster block."""
    section = draw(st.sampled_from(list(SECTIONS)))
    if section == "parameters":
        params = data.get("parameters")
        if not isinstance(params, dict) or not params:
            return
        target = params[draw(st.sampled_from(sorted(params)))]
        kind = target.get("distribution", "") if isinstance(target, dict) else ""
    elif section == "scheduler":
        execution = data.setdefault("execution", {})
        if not isinstance(execution, dict):
            return
        if not isinstance(execution.get("scheduler"), dict):
            execution["scheduler"] = {"cluster": draw(st.sampled_from(
                ["slurm", "pbs", "sge", "lsf", "htcondor"]))}
        target, kind = execution["scheduler"], ""
    else:
        target = data.setdefault(section, {})
        kind = target.get("type", "") if isinstance(target, dict) else ""
    if not isinstance(target, dict):
        return
    table = SECTIONS[section]
    keys = (table.get(kind) if isinstance(kind, str) else None) or sorted({k for keys in table.values() for k in keys})
    target[draw(st.sampled_from(keys))] = draw(st.one_of(PLAUSIBLE, WRONG))


def paths(data, prefix=()):
    """Every key and item path in the data."""
    found = []
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return found
    for key, value in items:
        found.append(prefix + (key,))
        found += paths(value, prefix + (key,))
    return found


def parent_of(data, path):
    for key in path[:-1]:
        data = data[key]
    return data


def typo(word: str, draw) -> str:
    """A misspelling: a letter dropped, doubled, swapped or changed, or the case changed."""
    if not word:
        return "x"
    i = draw(st.integers(0, len(word) - 1))
    how = draw(st.sampled_from(["drop", "double", "swap", "change", "case", "space"]))
    if how == "drop":
        out = word[:i] + word[i + 1:]
    elif how == "double":
        out = word[:i] + word[i] + word[i:]
    elif how == "swap" and len(word) > 1:
        j = min(i + 1, len(word) - 1)
        chars = list(word)
        chars[i], chars[j] = chars[j], chars[i]
        out = "".join(chars)
    elif how == "case":
        out = word.swapcase()
    elif how == "space":
        out = word + " "
    else:
        out = word[:i] + draw(st.sampled_from("aeioux_-0")) + word[i + 1:]
    return out if out != word else word + "s"


def mutate(data, draw) -> None:
    """One random mutation of the data, in place."""
    where = paths(data)
    how = draw(st.sampled_from(["delete", "typo", "replace", "replace", "swap", "add", "type",
                                "deep", "include", "known", "known"]))
    if how == "known":
        add_known_key(data, draw)
        return
    if how == "include":
        data["model"] = {"file": draw(st.one_of(HOSTILE_TEXT, TEXT, st.sampled_from([
            "../../../../etc/hostname", "/dev/null", "/dev/zero", "models", ".", "study.yaml",
            "ishigami.py", "/proc/self/status", "models/flowers.yaml"])))}
        return
    if not where:
        data["x"] = draw(WRONG)
        return
    path = draw(st.sampled_from(where))
    parent, key = parent_of(data, path), path[-1]
    if how == "delete":
        del parent[key]
    elif how == "typo" and isinstance(key, str):
        parent[typo(key, draw)] = parent.pop(key)
    elif how == "swap":  # a number as text, text as a number
        value = parent[key]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            parent[key] = str(value)
        elif isinstance(value, str):
            parent[key] = draw(NUMBERS)
        else:
            parent[key] = draw(SCALARS)
    elif how == "add":
        target = parent[key] if isinstance(parent[key], dict) else parent
        if isinstance(target, dict):
            target[draw(st.one_of(TEXT, HOSTILE_TEXT))] = draw(WRONG)
    elif how == "type":
        target = parent[key] if isinstance(parent[key], dict) else parent
        if isinstance(target, dict):
            target["type"] = draw(st.one_of(TEXT, HOSTILE_TEXT, SCALARS))
    elif how == "deep":
        parent[key] = draw(DEEP)
    else:
        parent[key] = draw(WRONG)


def mutate_text(text: str, draw) -> str:
    """One random edit of the file's text: a line duplicated (duplicate keys), dropped, cut or
    indented with a tab, or a fragment of YAML syntax inserted."""
    lines = text.splitlines(keepends=True)
    i = draw(st.integers(0, max(len(lines) - 1, 0)))
    how = draw(st.sampled_from(["duplicate", "drop", "tab", "insert", "cut", "swap"]))
    if not lines:
        return text
    if how == "duplicate":
        lines.insert(i, lines[i])
    elif how == "drop":
        del lines[i]
    elif how == "tab":
        lines[i] = "\t" + lines[i].lstrip(" ")
    elif how == "swap" and len(lines) > 1:
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif how == "cut":
        return text[:draw(st.integers(0, len(text)))]
    else:
        k = draw(st.integers(0, len(lines[i])))
        fragment = draw(st.sampled_from([":", " - ", "{", "}", "[", "]", ",", "&a ", "*a", "<<: ",
                                         "!!int ", "!!python/object:os.system ", "'", '"', "?",
                                         "|", ">", "%", "@", "`", "\u0007", "\ufeff", " #",
                                         "\n  extra: 1\n", "\nname: again\n"]))
        lines[i] = lines[i][:k] + fragment + lines[i][k:]
    return "".join(lines)


def dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**6)


# ------------------------------------------------------------------------------ tests


def test_every_example_study_loads(folder):
    """The mutation base: each example study is valid as it stands."""
    for name in study_files():
        assert load_cleanly(folder / name) == "valid", name


@pytest.mark.thorough
@pytest.mark.slow
@pytest.mark.parametrize("name", study_files())
def test_every_number_of_an_example_at_an_edge_ends_in_a_located_error(folder, name):
    """Each number of the example's model, analysis and execution blocks in turn set to 0, -1,
    false, true, 1e30 and 0.5: valid, or refused in located lines. `population: 0` of an nsga2
    study divided by zero as its memory was sized (found by the random mutations above)."""
    _, data = original(folder, name)
    numbers = [at for at in paths(data) if at[0] in ("model", "analysis", "execution")
               and type(parent_of(data, at)[at[-1]]) in (int, float)]  # bool is not a number here
    for at in numbers:
        for value in (0, -1, False, True, 10**30, 0.5):
            mutant = copy.deepcopy(data)
            parent_of(mutant, at)[at[-1]] = value
            path = folder / "edge.yaml"
            path.write_text(dump(mutant))
            load_cleanly(path)


@pytest.mark.slow
@settings(FAST, max_examples=examples(200))
@given(name=st.sampled_from(study_files()), count=st.integers(1, 3), draw=st.data())
def test_mutated_studies_end_in_a_located_error(folder, name, count, draw):
    _, data = original(folder, name)
    for _ in range(count):
        mutate(data, draw.draw)
    path = folder / "mutant.yaml"
    path.write_text(dump(data))
    load_cleanly(path)


@pytest.mark.slow
@settings(FAST, max_examples=examples(125))
@given(name=st.sampled_from(study_files()), count=st.integers(1, 3), draw=st.data())
def test_edited_study_text_ends_in_a_located_error(folder, name, count, draw):
    text, _ = original(folder, name)
    for _ in range(count):
        text = mutate_text(text, draw.draw)
    path = folder / "edited.yaml"
    path.write_text(text)
    load_cleanly(path)


YAMLISH = st.lists(st.one_of(
    st.sampled_from(["name", "model", "analysis", "parameters", "quantities", "execution", "type",
                     "ode", "stockflow", "command", "python", "sobol", "montecarlo", "samples",
                     "bounds", "distribution", "states", "rates", "run", "file", ":", ": ", " ",
                     "  ", "\n", "\n  ", "- ", "{", "}", "[", "]", ",", "&a ", "*a", "<<: ",
                     "!!int ", "!!float ", "!!binary ", "!!set ", "!!omap ", "!!python/name:os.system ",
                     "'", '"', "#", "---", "...", "\t", "1", "-2.5e3", ".nan", ".inf", "~", "yes",
                     "? ", "|", ">", "%YAML 1.1\n", "%TAG ! tag:x,2000:\n", "\x07", "\ufeff", "\r\n",
                     "\u2028", "!", "!x ", "@", "`"]),
    TEXT), max_size=60).map("".join)


@pytest.mark.slow
@settings(FAST, max_examples=examples(125))
@given(text=st.one_of(YAMLISH, st.text(max_size=300)))
def test_random_yaml_text_ends_in_a_located_error(folder, text):
    path = folder / "random.yaml"
    path.write_bytes(text.encode("utf-8", errors="replace"))
    load_cleanly(path)


@pytest.mark.slow
@settings(FAST, max_examples=examples(75))
@given(raw=st.one_of(st.binary(max_size=300),
                     st.builds(lambda head, tail: head + tail,
                               st.sampled_from([b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf", b"name: ",
                                                b"\x00", b"model:\n  type: ode\n"]),
                               st.binary(max_size=100))))
def test_random_bytes_end_in_a_located_error(folder, raw):
    path = folder / "bytes.yaml"
    path.write_bytes(raw)
    load_cleanly(path)
