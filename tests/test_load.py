"""Tests of the load step: YAML with positions, includes, and pydantic errors mapped to lines."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Annotated, Literal, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from studyrun.core.errors import Problem, StudyError
from studyrun.study.loading import Source, format_problems, include_files, read_yaml, validate

# ---------------------------------------------------------------------------------- test models


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Uniform(Strict):
    distribution: Literal["uniform"] = "uniform"
    low: float
    high: float

    @field_validator("high")
    @classmethod
    def check_high(cls, value: float) -> float:
        if value > 1e6:
            raise ValueError("must be at most 1e6 (got a huge bound)")
        return value


class Normal(Strict):
    distribution: Literal["normal"]
    mean: float
    std: float = Field(gt=0)


class Bounds(Strict):
    bounds: tuple[float, float]


def parameter_kind(value):
    """The callable discriminator: a bare number, `bounds:` or a `distribution:`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "fixed"
    if isinstance(value, dict):
        return "bounds" if "bounds" in value else value.get("distribution", "uniform")
    return None


Parameter = Annotated[
    Union[
        Annotated[Uniform, Tag("uniform")],
        Annotated[Normal, Tag("normal")],
        Annotated[Bounds, Tag("bounds")],
        Annotated[float, Tag("fixed")],
    ],
    Discriminator(parameter_kind),
]


class Sobol(Strict):
    type: Literal["sobol"]
    samples: int
    second_order: bool = False


class Morris(Strict):
    type: Literal["morris"]
    trajectories: int = 10
    levels: int = 4


class Model(Strict):
    type: Literal["python"]
    function: str
    constants: dict[str, float] = {}


class Case(Strict):
    x: float
    label: str = ""


class Study(Strict):
    name: str
    seed: int = 0
    model: Model
    parameters: dict[str, Parameter]
    analysis: Annotated[Union[Sobol, Morris], Field(discriminator="type")]
    cases: list[Case] = []
    method: Literal["euler", "rk4", "RK45"] = "euler"
    workers: int | Literal["auto"] = "auto"


GOOD = """\
name: flowers
seed: 7
model:
  type: python
  function: sim:run
  constants: {a: 1, b: 2.5}
parameters:
  k: {distribution: uniform, low: 0.8, high: 1.2}
  r: {distribution: normal, mean: 0.2, std: 0.02}
  area: {bounds: [800, 1200]}
  fixed: 3
analysis:
  type: sobol
  samples: 1024
cases:
  - x: 1
  - {x: 2, label: two}
"""


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(tmp_path: Path, text: str, model=Study) -> list[Problem]:
    path = write(tmp_path, text)
    with pytest.raises(StudyError) as caught:
        validate(model, include_files(read_yaml(path)))
    return caught.value.problems


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, format_problems(problems)
    return problems[0]


# ---------------------------------------------------------------------------------- reading


def test_reads_data_like_safe_load_and_validates(tmp_path):
    import yaml

    source = read_yaml(write(tmp_path, GOOD))
    assert source.data == yaml.safe_load(GOOD)
    study = validate(Study, source)
    assert study.analysis.samples == 1024
    assert isinstance(study.parameters["r"], Normal)
    assert study.parameters["fixed"] == 3.0


def test_positions_of_nested_keys_values_and_list_items(tmp_path):
    path = write(tmp_path, GOOD)
    source = read_yaml(path)
    name = str(path)
    assert source.positions[("name",)] == (name, 1, 1)
    assert source.positions[("name", "<value>")] == (name, 1, 7)
    assert source.positions[("model", "constants", "b")] == (name, 6, 21)
    assert source.positions[("parameters", "k", "high")] == (name, 8, 40)
    assert source.positions[("parameters", "area", "bounds", 1)] == (name, 10, 24)
    assert source.positions[("cases", 0)] == (name, 16, 5)
    assert source.positions[("cases", 1, "label")] == (name, 17, 12)
    # where() walks back up to the nearest recorded ancestor
    assert source.where(("cases", 1, "nothing", 3)) == (name, 17, 5)
    assert source.where(()) == (name, 1, 1)
    problem = source.problem(("cases", 1, "label"), "too long")
    assert str(problem) == f"{name}:17:12: cases[1].label: too long"


def test_keys_are_strings_as_written_and_merge_keys_work(tmp_path):
    source = read_yaml(write(tmp_path, """\
        base: &base {low: 1, high: 2}
        on: yes
        1: one
        k: {<<: *base, high: 3}
        """))
    assert source.data["on"] is True and source.data["1"] == "one"
    assert source.data["k"] == {"low": 1, "high": 3}
    assert source.positions[("k", "low")][1] == 1  # a merged key points at its definition


def test_yaml_syntax_error_has_its_line(tmp_path):
    path = write(tmp_path, "name: x\nanalysis:\n  type: sobol\n samples: [1, 2\n")
    with pytest.raises(StudyError) as caught:
        read_yaml(path)
    problem = only(caught.value.problems)
    assert problem.file == str(path) and problem.line == 4
    assert problem.message.startswith("YAML syntax error")
    assert "Traceback" not in str(caught.value)


def test_tab_indentation_gets_a_hint(tmp_path):
    with pytest.raises(StudyError) as caught:
        read_yaml(write(tmp_path, "name: x\nanalysis:\n\ttype: sobol\n"))
    problem = only(caught.value.problems)
    assert problem.line == 3 and "tabs" in problem.message


def test_duplicate_keys_are_all_reported(tmp_path):
    path = write(tmp_path, """\
        name: a
        analysis: {type: sobol, samples: 8, samples: 16}
        name: b
        """)
    with pytest.raises(StudyError) as caught:
        read_yaml(path)
    first, second = caught.value.problems
    assert (first.line, first.path) == (2, "analysis.samples")
    assert "duplicate key 'samples'" in first.message
    assert (second.line, second.col, second.path) == (3, 1, "name")
    assert "first at line 1" in second.message


@pytest.mark.parametrize("text", ["", "\n\n   \n", "# only a comment\n", "---\n"])
def test_empty_file(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(StudyError) as caught:
        read_yaml(path)
    assert str(caught.value) == (
        f"{path}:1:1: the file is empty; a study needs at least model, parameters and analysis"
    )


@pytest.mark.parametrize("raw", [b"name: x\n\x00\x01\x02", b"\x89PNG\r\n\x1a\n\xff\xfe",
                                 "name: \u00e9".encode("latin-1")])
def test_binary_garbage_is_not_a_text_file(tmp_path, raw):
    path = tmp_path / "study.yaml"
    path.write_bytes(raw)
    with pytest.raises(StudyError) as caught:
        read_yaml(path)
    problem = only(caught.value.problems)
    assert "not a text file" in problem.message and problem.line is not None


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(StudyError) as caught:
        read_yaml(path)
    assert str(caught.value) == f"{path}:1:1: file not found"


@pytest.mark.parametrize("text, got", [("- a\n- b\n", "a list"), ("just text\n", "a single value")])
def test_top_level_must_be_a_mapping(tmp_path, text, got):
    with pytest.raises(StudyError) as caught:
        read_yaml(write(tmp_path, text))
    problem = only(caught.value.problems)
    assert "top level must be a mapping" in problem.message and got in problem.message
    assert problem.line == 1


def test_python_tags_are_refused(tmp_path):
    with pytest.raises(StudyError) as caught:
        read_yaml(write(tmp_path, "name: !!python/object/apply:os.system [echo hi]\n"))
    assert "unsupported YAML tag" in only(caught.value.problems).message


def test_alias_bomb_ends_quickly_with_an_error(tmp_path):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = write(tmp_path, "\n".join(lines) + "\n")
    start, cpu = time.perf_counter(), time.thread_time()
    with pytest.raises(StudyError) as caught:
        read_yaml(path)
    assert time.thread_time() - cpu < 2 and time.perf_counter() - start < 10  # as check_ends_cleanly
    assert "alias" in only(caught.value.problems).message


def test_recursive_alias_is_an_error(tmp_path):
    with pytest.raises(StudyError) as caught:
        read_yaml(write(tmp_path, "a: &a [1, *a]\n"))
    assert "recursive" in only(caught.value.problems).message


def test_modest_alias_use_is_fine(tmp_path):
    source = read_yaml(write(tmp_path, "grid: &g [1, 2, 3]\ncases: [*g, *g]\n"))
    assert source.data["cases"] == [[1, 2, 3], [1, 2, 3]]


# ---------------------------------------------------------------------------------- validation


def test_unknown_key_inside_a_union_member_suggests_the_field(tmp_path):
    text = GOOD.replace("samples: 1024", "smaples: 1024")
    problem = only(problems_of(tmp_path, text))
    assert (problem.line, problem.col, problem.path) == (14, 3, "analysis.smaples")
    assert problem.message == "unknown key 'smaples'; did you mean 'samples'?"


def test_unknown_key_in_a_callable_union_member(tmp_path):
    text = GOOD.replace("low: 0.8", "lwo: 0.8")
    problem = only(problems_of(tmp_path, text))
    assert (problem.line, problem.path) == (8, "parameters.k.lwo")
    assert problem.message == "unknown key 'lwo'; did you mean 'low'?"


def test_unknown_key_without_a_close_match_lists_allowed_keys(tmp_path):
    text = GOOD.replace("  - x: 1\n", "  - x: 1\n    zzz: 2\n")
    problem = only(problems_of(tmp_path, text))
    assert problem.path == "cases[0].zzz" and problem.line == 17
    assert problem.message == "unknown key 'zzz'; allowed: x, label"


def test_wrong_type(tmp_path):
    problem = only(problems_of(tmp_path, GOOD.replace("samples: 1024", "samples: abc")))
    assert (problem.line, problem.path) == (14, "analysis.samples")
    assert problem.message == "expected a whole number, got 'abc'"


def test_wrong_type_in_a_list_item(tmp_path):
    problem = only(problems_of(tmp_path, GOOD.replace("bounds: [800, 1200]", "bounds: [800, lots]")))
    assert (problem.line, problem.col, problem.path) == (10, 24, "parameters.area.bounds[1]")
    assert problem.message == "expected a number, got 'lots'"


def test_value_error_has_no_prefix(tmp_path):
    problem = only(problems_of(tmp_path, GOOD.replace("high: 1.2", "high: 1e9")))
    assert problem.path == "parameters.k.high" and problem.line == 8
    assert problem.message == "must be at most 1e6 (got a huge bound)"


def test_constraint_message(tmp_path):
    problem = only(problems_of(tmp_path, GOOD.replace("std: 0.02", "std: -1")))
    assert problem.path == "parameters.r.std" and problem.message == "must be greater than 0, got -1"


def test_missing_key_points_at_the_parent_mapping(tmp_path):
    text = GOOD.replace("  samples: 1024\n", "")
    problem = only(problems_of(tmp_path, text))
    assert (problem.line, problem.col, problem.path) == (12, 1, "analysis")
    assert problem.message == "missing required key 'samples'"


def test_unknown_union_tag_suggests_the_tag(tmp_path):
    problem = only(problems_of(tmp_path, GOOD.replace("type: sobol", "type: sobolx")))
    assert (problem.line, problem.col, problem.path) == (13, 3, "analysis.type")
    assert problem.message == "unknown analysis type 'sobolx'; did you mean 'sobol'? allowed: sobol, morris"


def test_unknown_tag_of_a_callable_discriminator(tmp_path):
    problem = only(problems_of(tmp_path, GOOD.replace("distribution: normal", "distribution: normla")))
    assert (problem.line, problem.path) == (9, "parameters.r.distribution")
    assert problem.message == (
        "unknown distribution 'normla'; did you mean 'normal'? allowed: uniform, normal, bounds, fixed"
    )


def test_missing_union_tag(tmp_path):
    problem = only(problems_of(tmp_path, GOOD.replace("  type: sobol\n", "")))
    assert problem.path == "analysis" and problem.message == "missing required key 'type' (one of: sobol, morris)"


def test_literal_with_did_you_mean(tmp_path):
    problem = only(problems_of(tmp_path, GOOD + "method: eular\n"))
    assert problem.path == "method" and problem.line == 18
    assert problem.message == "unknown value 'eular'; did you mean 'euler'? allowed: euler, rk4, RK45"


def test_plain_union_reports_one_problem(tmp_path):
    problem = only(problems_of(tmp_path, GOOD + "workers: many\n"))
    assert problem.path == "workers"
    assert problem.message == "expected a whole number or 'auto', got 'many'"


def test_several_errors_at_once_sorted_by_line(tmp_path):
    text = GOOD.replace("seed: 7", "seed: soon").replace("low: 0.8", "low: [1]")
    text = text.replace("type: sobol", "type: sobol\n  colour: red").replace("  - x: 1\n", "  - x: one\n")
    problems = problems_of(tmp_path, text)
    assert [(p.line, p.path) for p in problems] == [
        (2, "seed"), (8, "parameters.k.low"), (14, "analysis.colour"), (17, "cases[0].x")]
    error = StudyError(problems)
    assert len(str(error).splitlines()) == 4
    assert format_problems(problems) == str(error)


def test_a_wrong_type_for_a_whole_section(tmp_path):
    problems = problems_of(tmp_path, GOOD.replace("cases:\n  - x: 1\n  - {x: 2, label: two}\n", "cases: 3\n"))
    assert [(p.path, p.message) for p in problems] == [("cases", "expected a list, got 3")]


def test_context_reaches_validators(tmp_path):
    class WithContext(Strict):
        name: str

        @field_validator("name")
        @classmethod
        def check_name(cls, value, info):
            if value in info.context["taken"]:
                raise ValueError(f"name '{value}' is taken")
            return value

    source = read_yaml(write(tmp_path, "name: flowers\n"))
    with pytest.raises(StudyError) as caught:
        validate(WithContext, source, context={"taken": {"flowers"}})
    assert only(caught.value.problems).message == "name 'flowers' is taken"


# ---------------------------------------------------------------------------------- includes


def test_include_points_errors_into_the_included_file(tmp_path):
    model_file = write(tmp_path, "# the model\ntype: python\nfunction: sim:run\nconstants: {a: one}\n", "models/m.yaml")
    study_text = GOOD.replace("model:\n  type: python\n  function: sim:run\n  constants: {a: 1, b: 2.5}\n",
                              "model: {file: models/m.yaml}\n")
    study_text = study_text.replace("samples: 1024", "samples: x")
    problems = problems_of(tmp_path, study_text)
    assert [(p.file, p.line, p.path) for p in problems] == [
        (str(tmp_path / "study.yaml"), 11, "analysis.samples"),
        (str(model_file), 4, "model.constants.a"),
    ]
    assert str(problems[1]).startswith(f"{model_file}:4:13: model.constants.a: expected a number")


def test_include_splices_data(tmp_path):
    write(tmp_path, "type: python\nfunction: sim:run\n", "m.yaml")
    source = include_files(read_yaml(write(tmp_path, "model: {file: m.yaml}\n")))
    assert source.data == {"model": {"type": "python", "function": "sim:run"}}
    assert source.where(("model", "function"))[0] == str(tmp_path / "m.yaml")
    assert source.where(("model",)) == (str(tmp_path / "study.yaml"), 1, 1)
    assert source.includes == {"model": str(tmp_path / "m.yaml")}


def test_missing_key_at_the_top_of_an_included_file(tmp_path):
    write(tmp_path, "type: python\n", "m.yaml")
    problem = only(problems_of(tmp_path, GOOD.replace(
        "model:\n  type: python\n  function: sim:run\n  constants: {a: 1, b: 2.5}\n", "model: {file: m.yaml}\n")))
    assert (problem.file, problem.line, problem.message) == (
        str(tmp_path / "m.yaml"), 1, "missing required key 'function'")


def test_include_of_a_missing_file_points_at_the_file_value(tmp_path):
    path = write(tmp_path, "name: x\nmodel:\n  file: models/none.yaml\n")
    with pytest.raises(StudyError) as caught:
        include_files(read_yaml(path))
    problem = only(caught.value.problems)
    assert (problem.file, problem.line, problem.col, problem.path) == (str(path), 3, 9, "model.file")
    assert "file not found" in problem.message


def test_included_top_level_must_be_a_mapping(tmp_path):
    included = write(tmp_path, "- 1\n- 2\n", "m.yaml")
    with pytest.raises(StudyError) as caught:
        include_files(read_yaml(write(tmp_path, "model: {file: m.yaml}\n")))
    problem = only(caught.value.problems)
    assert problem.file == str(included) and "top level must be a mapping" in problem.message


def test_model_with_more_keys_than_file_is_not_an_include(tmp_path):
    source = read_yaml(write(tmp_path, "model: {file: m.yaml, type: python}\n"))
    assert include_files(source) is source


# ---------------------------------------------------------------------------------- robustness


def check_ends_cleanly(path: Path) -> None:
    start, cpu = time.perf_counter(), time.thread_time()
    try:
        validate(Study, include_files(read_yaml(path)))
    except StudyError as error:
        assert error.problems and all(p.file for p in error.problems)
        str(error)
    # a blow-up costs CPU time, which a busy machine does not stretch; a hang, wall time
    assert time.thread_time() - cpu < 1 and time.perf_counter() - start < 10


yamlish = st.lists(
    st.sampled_from(["name", "model", "analysis", "type", "samples", ":", " ", "  ", "\n", "- ", "{", "}", "[", "]",
                     ",", "&a ", "*a", "<<", "!!int ", "!!python/name:os.system", "'", '"', "#", "---", "\t",
                     "sobol", "1", "-2.5e3", "~", "yes", "? ", "|", ">", "%YAML 1.1", "\x07", "file"]),
    max_size=40,
).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=300), yamlish))
def test_random_text_ends_in_a_value_or_a_study_error(tmp_path, text):
    path = tmp_path / "random.yaml"
    path.write_bytes(text.encode("utf-8", errors="replace"))  # lone surrogates become '?'
    check_ends_cleanly(path)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300))
def test_random_bytes_end_in_a_value_or_a_study_error(tmp_path, raw):
    path = tmp_path / "random.yaml"
    path.write_bytes(raw)
    check_ends_cleanly(path)


def test_deep_nesting_is_an_error_not_a_crash(tmp_path):
    for depth in (150, 5000):
        path = write(tmp_path, "a: " + "[" * depth + "]" * depth + "\n")
        with pytest.raises(StudyError) as caught:
            read_yaml(path)
        problem = only(caught.value.problems)
        # studyrun's own limit, or (PyYAML 6.0.4 and later) libyaml's, reached first; both located
        assert ("nested too deeply" in problem.message
                or "exceeded maximum nesting depth" in problem.message), problem.message
        assert problem.line == 1 and problem.col > 1


def test_source_is_plain_data():
    source = Source({"a": 1}, {("a",): ("f.yaml", 1, 1)}, file="f.yaml")
    assert source.where(("a", "b")) == ("f.yaml", 1, 1)
    assert source.where(("z",)) == ("f.yaml", None, None)


def test_control_characters_and_utf16_are_not_text(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_bytes(b"name: x\nseed: \x07\n")
    with pytest.raises(StudyError) as caught:
        read_yaml(path)
    problem = only(caught.value.problems)
    assert (problem.line, problem.col) == (2, 7) and "control character U+0007" in problem.message
    path.write_bytes("name: x\n".encode("utf-16"))
    with pytest.raises(StudyError) as caught:
        read_yaml(path)
    assert "UTF-16" in only(caught.value.problems).message


def test_a_utf8_bom_is_fine(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_bytes("\ufeffname: x\n".encode("utf-8"))
    assert read_yaml(path).positions[("name",)] == (str(path), 1, 1)


class Mixed(Strict):
    values: int | list[int] = 0
    labels: dict[int, str] = {}
    title: str = ""
    high: float = 1.0

    @field_validator("high")
    @classmethod
    def check_high(cls, value: float) -> float:
        assert value < 100, "high must be below 100"
        return value


def test_the_union_branch_that_reaches_deepest_is_reported(tmp_path):
    problem = only(problems_of(tmp_path, "values: [1, 2, x]\n", Mixed))
    assert (problem.path, problem.col, problem.message) == ("values[2]", 16, "expected a whole number, got 'x'")


def test_a_wrong_key_of_a_mapping_says_so(tmp_path):
    problem = only(problems_of(tmp_path, "labels: {1: one, x: two}\n", Mixed))
    assert problem.path == "labels.x" and problem.message == "the key 'x': expected a whole number, got 'x'"


@pytest.mark.parametrize("value, reads_as", [("2026-12-02", "a date"), ("yes", "true or false"), ("1e3", None)])
def test_text_that_yaml_reads_as_something_else_gets_a_hint(tmp_path, value, reads_as):
    problems = problems_of(tmp_path, f"title: {value}\n", Mixed) if reads_as else None
    if reads_as is None:  # YAML 1.1 reads 1e3 (no dot) as text: fine for a text field
        assert validate(Mixed, read_yaml(write(tmp_path, f"title: {value}\n"))).title == "1e3"
        return
    assert f"YAML reads this as {reads_as}; put it in quotes" in only(problems).message


def test_assertion_in_a_validator_has_no_prefix(tmp_path):
    assert only(problems_of(tmp_path, "high: 200\n", Mixed)).message == "high must be below 100"


def test_a_whole_model_check_points_at_the_top(tmp_path):
    from pydantic import model_validator

    class Whole(Strict):
        low: float
        high: float

        @model_validator(mode="after")
        def check_order(self):
            if self.low >= self.high:
                raise ValueError("low must be below high")
            return self

    problem = only(problems_of(tmp_path, "# bounds\nlow: 2\nhigh: 1\n", Whole))
    assert str(problem) == f"{tmp_path / 'study.yaml'}:1:1: low must be below high"


def test_values_yaml_cannot_read_are_located(tmp_path):
    with pytest.raises(StudyError) as caught:
        read_yaml(write(tmp_path, "seed: !!int abc\nsign: =\nok: 1\n"))
    first, second = caught.value.problems
    assert (first.line, first.path, first.message) == (1, "seed", "cannot read 'abc' as '!!int'")
    assert (second.line, second.path) == (2, "sign") and "put it in quotes" in second.message


@pytest.mark.parametrize("text, line, words", [
    ("name: x\nanalysis:\n\ttype: sobol\n", 3, "tabs"),
    ("a: [1, 2\nb: 3\n", 2, "YAML syntax error"),
    ("a: " + "[" * 300 + "]" * 300 + "\n", 1, "nested too deeply"),
    ("a: 1\n---\nb: 2\n", 2, "YAML syntax error"),
])
def test_pure_python_yaml_gives_the_same_errors(tmp_path, monkeypatch, text, line, words):
    import yaml

    from studyrun.study import source

    path = write(tmp_path, text)
    for loader in (yaml.SafeLoader, source._LOADER):
        monkeypatch.setattr(source, "_LOADER", loader)
        with pytest.raises(StudyError) as caught:
            read_yaml(path)
        problem = only(caught.value.problems)
        assert problem.line == line and words in problem.message, (loader, problem)


class Range(Strict):
    low: float
    high: float


class Box(Strict):
    bounds: tuple[float, float]


class Either(Strict):
    span: Range | Box


@pytest.mark.parametrize("text, path, message", [
    ("span: {low: 1}\n", "span", "missing required key 'high'"),
    ("span: {bounds: [1, x]}\n", "span.bounds[1]", "expected a number, got 'x'"),
    ("span: 3\n", "span", "expected a mapping of keys, got 3"),
])
def test_a_union_of_models_reports_the_branch_the_data_fits(tmp_path, text, path, message):
    problem = only(problems_of(tmp_path, text, Either))
    assert (problem.path, problem.message) == (path, message)


def test_a_key_of_another_union_member_says_whose_it_is(tmp_path):
    text = GOOD.replace("type: sobol\n  samples: 1024", "type: morris\n  samples: 1024")
    problem = only(problems_of(tmp_path, text))
    assert problem.path == "analysis.samples"
    assert problem.message == "unknown key 'samples'; allowed: type, trajectories, levels (it is a key of sobol)"


# ---------------------------------------------------------------------------------- bounded input

BOMB_STUDY = """\
name: bomb
description: &d {text}
model:
  type: command
  run: [echo, {aliases}]
parameters:
  a: {{distribution: uniform, low: 0, high: 1}}
analysis: {{type: montecarlo, samples: 2}}
"""


@pytest.mark.slow
def test_aliases_repeating_a_long_value_are_refused_at_its_anchor(tmp_path):
    """99,000 aliases of a 10 KB string: 400 KB on disk, 1 GB once expanded (fewer values than
    the alias-growth limit); refused at the anchor, by the real CLI, for validate and plan."""
    from conftest import run_cli

    text = BOMB_STUDY.format(text="x" * 10_000, aliases=", ".join(["*d"] * 99_000))
    path = write(tmp_path, text)
    assert path.stat().st_size < 500_000
    for command in ("validate", "plan"):
        done = run_cli(command, path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"{path}:2:14: aliases of the value anchored here (1 value, "
                                      "10,000 characters) expand the file by more than"), done.stderr
        assert "1,000,000 characters" in done.stderr


def test_a_short_value_may_be_repeated_often(tmp_path):
    source = read_yaml(write(tmp_path, "a: &a 1.5\nb: [" + ", ".join(["*a"] * 50_000) + "]\n"))
    assert len(source.data["b"]) == 50_000


@pytest.mark.slow
@pytest.mark.parametrize("written, digits", [("0x" + "f" * 4000, "4,000"), ("9" * 5000, "5,000"),
                                             ("-" + "1" * 400, "400")])
def test_an_integer_beyond_float64_is_located_wherever_it_stands(tmp_path, written, digits):
    """YAML integers too large for a float (or for Python to convert to text) are refused where
    they stand: a model constant used to end in a traceback."""
    from conftest import run_cli

    text = ("name: big\nmodel:\n  type: ode\n  time: {start: 0, stop: 1, step: 0.5}\n"
            "  states: {x: 1}\n  rates: {x: -k * x}\n  constants: {k: " + written + "}\n"
            "parameters:\n  x0: 1\nanalysis: {type: montecarlo, samples: 4}\n")
    done = run_cli("validate", write(tmp_path, text))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"study.yaml:7:18: model.constants.k: the number {written.lstrip('-')[:12]}... ({digits} digits) " \
           "is too large; numbers are floats, at most about 1.8e308" in done.stderr
