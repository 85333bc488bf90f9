"""The `command` spec: the pydantic model, its field checks, program lookup, and `build`."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from studyrun.blocks.dependencies import file_name
from studyrun.core.errors import Problem, StudyError, outside
from studyrun.core.plugin import Example
from studyrun.core.sizes import parse_bytes
from studyrun.core.text import suggest
from studyrun.models.base import ModelSpec
from studyrun.models.command.evaluator import CommandEvaluator
from studyrun.models.command.placeholders import (
    PLACEHOLDERS,
    FieldError,
    Parts,
    fields,
    line_col,
    parse,
    render,
    spec_problem,
)

MAX_TEMPLATE = 10 * 2**20  # bytes: a template is read whole, once per batch
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_relative(name: str) -> str:
    path = Path(name)
    if not name or path.is_absolute() or ".." in path.parts or not path.name:
        raise ValueError(f"must be a file name inside the run's working directory; got {name!r}")
    if not name.isprintable():  # a NUL byte or a line break no file system takes as meant
        raise ValueError(f"must be a file name without control characters; got {name!r}")
    return name


# The example's program (studyrun.testing): y = a * exp(-b * t), read from and written as JSON.
EXAMPLE_PROGRAM = """import json, math, sys
p = json.load(open(sys.argv[1]))
time = [4 * k / 4 for k in range(5)]
y = [p["a"] * math.exp(-p["b"] * t) for t in time]
json.dump({"time": time, "y": y, "final": y[-1]}, open(sys.argv[2], "w"))
"""

class Template(BaseModel):
    """`params_file: {template: in.tmpl, file: in.txt}`: a text file with `{name}` or
    `{name:spec}` fields (a parameter or a placeholder, a Python format spec such as `d` or
    `.6e`), written for each run; `{{name}}` is the text `{name}`, any other brace is text.
    Whole numbers are written as integers, reals with every digit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: str = Field(min_length=1, description="template file, relative to the study folder")
    file: str = Field(description="the file written in each run's working directory")

    @field_validator("file")
    @classmethod
    def _file_inside_workdir(cls, value: str) -> str:
        return _check_relative(value)


def _check_argument(value: str) -> str:
    try:
        parse(value)
    except FieldError as exc:
        raise ValueError(f"{exc} (at character {exc.at + 1} of {value!r})") from None
    return value


def _params_kind(value) -> str:
    return "Template" if isinstance(value, (dict, Template)) else "name"


ParamsFile = Annotated[Union[Annotated[str, Tag("name")], Annotated[Template, Tag("Template")]],
                       Discriminator(_params_kind)]


class Command(ModelSpec):
    """An external program, run once per run with its parameters in a file (JSON, YAML or a
    template) and its outputs read back from a file (JSON, CSV with a header, or a table whose
    `columns` the block names); docs/reference/command.md."""

    type: Literal["command"]
    example = Example({"model": {"type": "command", "timeout": 60, "run": [
        sys.executable, "{study_dir}/sim.py", "{params_file}", "results.json"]},
        "quantities": {"final": "final", "mean": "mean(y)"}}, files={"sim.py": EXAMPLE_PROGRAM})
    runs_code_to_check: ClassVar[bool] = False  # it looks for the program, never starts it
    run: list[Annotated[str, AfterValidator(_check_argument)]] = Field(
        min_length=1, description="argv list; fields such as {params_file} or {n} (a parameter)")
    params_file: ParamsFile = "params.json"
    columns: list[str] | None = Field(
        None, min_length=1, max_length=10_000, description="the columns of a results file that "
        "is a table of numbers without a header (separated by spaces, tabs or commas); `time` "
        "among them makes the others series over it, else the file holds one row of scalars")
    results_file: str = "results.json"
    timeout: float | None = Field(None, gt=0, description="seconds per run")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    keep_workdirs: Literal["failed", "all", "none"] = "failed"
    memory_limit: str | int | None = Field(None, description="address-space cap, e.g. 512MB")
    max_output: str | int = Field("100MB", description="largest results file a run may write "
                                  "(e.g. 500MB); a larger one fails that run")
    # The inputs written as whole numbers: set from the parameters when the study is loaded
    # (with_whole_numbers, which replaces whatever a study file wrote), not in the schema.
    whole_numbers: SkipJsonSchema[frozenset[str]] = frozenset()

    @field_validator("run", mode="before")
    @classmethod
    def _run_is_a_list(cls, value):
        if isinstance(value, str):
            hint = json.dumps(value.split())
            raise ValueError(f"must be a list of arguments, not a shell string; got {value!r} "
                             f"(write it as a list, e.g. {hint})")
        return value

    @field_validator("params_file")
    @classmethod
    def _params_suffix(cls, value):
        if isinstance(value, str):
            _check_relative(value)
            if Path(value).suffix.lower() not in (".json", ".yaml", ".yml"):
                raise ValueError(f"must end in .json, .yaml or .yml; got {value!r} (for another "
                                 "format use {template: in.tmpl, file: in.txt})")
        return value

    @field_validator("columns")
    @classmethod
    def _column_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            if not _NAME.match(name):
                raise ValueError(f"{name!r} cannot name a column: use letters, digits and _")
        twice = sorted({n for n in value or [] if value.count(n) > 1})  # type: ignore[union-attr]
        if twice:
            raise ValueError(f"names the column {twice[0]!r} twice; name each column once")
        return value

    @field_validator("results_file")
    @classmethod
    def _results_suffix(cls, value: str, info: ValidationInfo) -> str:
        _check_relative(value)
        suffix = Path(value).suffix.lower()
        if info.data.get("columns") is None and suffix not in (".json", ".csv"):
            raise ValueError(f"must end in .json or .csv, or be a table of numbers whose "
                             f"columns: the model names (e.g. columns: [time, y]); got {value!r}")
        if info.data.get("columns") is not None and suffix == ".json":
            raise ValueError("a .json results file names its own outputs; columns: is for a "
                             "table of numbers without a header (out.txt, out.csv): drop it")
        return value

    @field_validator("env")
    @classmethod
    def _environment(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not name or "=" in name or "\x00" in name or "\x00" in text:
                raise ValueError(f"cannot set the environment variable {name!r} (a name is not "
                                 "empty and has no '=' nor NUL; a value has no NUL)")
        return value

    @field_validator("memory_limit", "max_output")
    @classmethod
    def _memory(cls, value):
        if value is not None:
            parse_bytes(value)
        return value

    @model_validator(mode="after")
    def _memory_needs_posix(self):
        if self.memory_limit is not None and os.name != "posix":
            raise ValueError("memory_limit needs a POSIX system (Linux); remove it on Windows")
        return self

    def uses_seed(self, study_dir: Path, run_code: bool = True) -> bool:
        """Whether an argument of `run` or the template names `{seed}`."""
        texts = list(self.run)
        if isinstance(self.params_file, Template):
            try:
                texts.append((Path(study_dir) / self.params_file.template).read_text())
            except (OSError, UnicodeDecodeError):  # check() says why
                pass
        return any(re.search(r"(?<!\{)\{seed(:[^{}\n]*)?\}", text) for text in texts)

    def check(self, study_dir: Path) -> list[Problem]:
        """A missing or unreadable template, or a program neither on PATH nor a file (nor
        executable)."""
        problems = []
        if isinstance(self.params_file, Template):
            try:
                self._template_text(Path(study_dir))
            except StudyError as error:
                problems += [Problem(p.message, path="params_file.template") for p in error.problems]
        program = _fixed_text(self.run[0], Path(study_dir).resolve())
        if program is not None:
            where = _resolve_program(program, Path(study_dir), self.env)
            if where is None:
                problems.append(Problem(
                    f"program not found: {program!r} is not on PATH nor a file in {study_dir}",
                    path="run.0"))
            elif os.sep in where and not os.access(where, os.X_OK):
                problems.append(Problem(
                    f"{where} is not executable (chmod +x it, or name its interpreter first: "
                    f"[python3, {program}])", path="run.0"))
        return problems

    def with_whole_numbers(self, names: set[str]) -> "Command":
        return self.model_copy(update={"whole_numbers": frozenset(names)})

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        """The block as written, and the inputs it writes as whole numbers: how its files are
        written is part of every run's identity."""
        data = handler(self)
        if isinstance(data, dict):
            if self.whole_numbers:
                data["whole_numbers"] = sorted(self.whole_numbers)
            else:
                data.pop("whole_numbers", None)
        return data

    def check_inputs(self, study_dir: Path, parameters: list[str],
                     varied: list[str]) -> list[Problem]:
        """Every field of `run` and of the template names a parameter or a placeholder, with a
        format spec that fits its value; every varied parameter is written somewhere (a JSON or
        YAML params file holds them all)."""
        kinds = {**dict.fromkeys(PLACEHOLDERS, "text"), "seed": "whole",
                 **{n: "whole" if n in self.whole_numbers else "real" for n in parameters}}
        problems, named = [], set()
        texts: list[tuple[str, str, str | None]] = [
            (f"model.run[{i}]", arg, None) for i, arg in enumerate(self.run)]
        template = self.params_file if isinstance(self.params_file, Template) else None
        if template is not None:
            try:
                text = self._template_text(Path(study_dir))
            except StudyError:
                return []  # check() says why
            texts.append(("model.params_file.template", text, template.template))
        for path, text, file in texts:
            try:
                parts = parse(text)
            except FieldError as exc:  # an argument's are refused when the block is validated
                problems.append(Problem(f"{_at(file, text, exc.at)}{exc}", path=path))
                continue
            for field in fields(parts):
                named.add(field.name)
                where = _at(file, text, field.at) if file else ""
                if field.name not in kinds:
                    problems.append(Problem(
                        f"{where}{field} names no parameter nor placeholder"
                        f"{suggest(field.name, kinds)} (parameters: {', '.join(parameters)}; "
                        f"placeholders: {', '.join('{%s}' % p for p in PLACEHOLDERS)})", path=path))
                elif field.name in PLACEHOLDERS and field.name in parameters:
                    problems.append(Problem(
                        f"{field.name!r} names both a parameter and the placeholder {{{field.name}}}"
                        ", so {" + field.name + "} would be ambiguous; rename the parameter",
                        path=f"parameters.{field.name}"))
                elif (why := spec_problem(field, kinds[field.name])) is not None:
                    problems.append(Problem(where + why, path=path))
        if template is not None:
            for name in varied:
                if name not in named:
                    problems.append(Problem(
                        f"the command model never reads {name}: its template {template.template} "
                        f"has no {{{name}}} and no argument of run names it, so varying {name} "
                        f"would change nothing; write {{{name}}} in {template.template} (or an "
                        f"argument such as --{name}={{{name}}}), or fix {name} to a number",
                        path=f"parameters.{name}"))
        problems = list(dict.fromkeys(problems))
        if template is not None and outside(Path(study_dir) / template.template, Path(study_dir)):
            quoting = [p for p in problems if p.path == "model.params_file.template"]
            if quoting:  # they quote its fields: name the file, never what it holds
                real = (Path(study_dir) / template.template).resolve()
                problems = [p for p in problems if p not in quoting] + [Problem(
                    f"template {template.template} ({real}) has {len(quoting)} field(s) that do "
                    "not fit the study, not shown: it lies outside the study's folder, and an "
                    "error never quotes such a file; copy it into the study's folder to see "
                    "them", path="model.params_file.template")]
        return problems

    def dependencies(self, study_dir: Path) -> dict[str, Path]:
        """The program, every existing file its argv names by an absolute or `{study_dir}` path
        (also after `--option=`), and the template copied into each run's folder."""
        study_dir = Path(study_dir).resolve()
        files = []
        if isinstance(self.params_file, Template):
            files.append(study_dir / self.params_file.template)
        for index, arg in enumerate(self.run):
            text = _fixed_text(arg, study_dir)
            if text is None:
                continue  # names a file of the run, made when it runs
            if index == 0:
                files.append(_program_file(text, study_dir, self.env))
            files += [Path(c) for c in (text, text.partition("=")[2]) if c and Path(c).is_absolute()]
        return {file_name(f, study_dir): f for f in files if f is not None and _is_file(f)}

    def with_timeout(self, seconds: float) -> "Command":
        return self if self.timeout is not None else self.model_copy(update={"timeout": seconds})

    def build(self, study_dir: Path) -> CommandEvaluator:
        """A picklable evaluator holding the parsed argv, template and options."""
        study_dir = Path(study_dir).resolve()
        argv = [parse(a) for a in self.run]  # before any path is filled in: a folder named {x}
        # stays a folder name, never a field
        program = _fixed_text(self.run[0], study_dir)
        if program is not None:
            argv[0] = (_resolve_program(program, study_dir, self.env) or program,)
        template, params_name = None, self.params_file
        if isinstance(self.params_file, Template):
            text = self._template_text(study_dir)
            try:
                template = parse(text)
            except FieldError as exc:
                raise StudyError(f"{_at(self.params_file.template, text, exc.at)}{exc}",
                                 path="model.params_file.template") from None
            params_name = self.params_file.file
        return CommandEvaluator(
            argv=tuple(argv), study_dir=str(study_dir),
            params_name=params_name, template=template, results_name=self.results_file,
            timeout=self.timeout, env=tuple(self.env.items()), keep=self.keep_workdirs,
            memory_limit=None if self.memory_limit is None else parse_bytes(self.memory_limit),
            memory_text=None if self.memory_limit is None else str(self.memory_limit),
            max_output=parse_bytes(self.max_output), max_output_text=str(self.max_output),
            whole=self.whole_numbers, columns=None if self.columns is None else tuple(self.columns))

    def _template_text(self, study_dir: Path) -> str:
        """The template's text; StudyError when it is missing, too large or not UTF-8 text."""
        assert isinstance(self.params_file, Template)
        path = study_dir / self.params_file.template
        try:
            if not _is_file(path):
                raise StudyError(f"template file not found: {path}",
                                 path="model.params_file.template")
            size = path.stat().st_size
            if size > MAX_TEMPLATE:
                raise StudyError(f"template {path} is {size:,} bytes, more than the "
                                 f"{MAX_TEMPLATE // 2**20} MiB a template may have",
                                 path="model.params_file.template")
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or "not a UTF-8 text file"
            raise StudyError(f"cannot read template {path}: {why}",
                             path="model.params_file.template") from None


def _at(file: str | None, text: str, at: int) -> str:
    """`in.tmpl:3:7: ` for offset `at` of a template's text; '' for an argument."""
    if file is None:
        return ""
    line, col = line_col(text, at)
    return f"{file}:{line}:{col}: "


def _fixed_text(arg: str, study_dir: Path) -> str | None:
    """An argument with `{study_dir}` filled in; None when it has another field (it is made per
    run)."""
    parts: Parts = parse(arg)
    if any(f.name != "study_dir" or f.spec for f in fields(parts)):
        return None
    return render(parts, {"study_dir": str(study_dir)})


def _resolve_program(program: str, study_dir: Path, env: dict[str, str]) -> str | None:
    """The program's path: a relative path against the study folder, a bare name on PATH first."""
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(program) if Path(program).is_absolute() else study_dir / program
        return str(path) if _is_file(path) else None
    found = shutil.which(program, path=env.get("PATH", os.environ.get("PATH", os.defpath)))
    if found:
        return program  # leave PATH lookup to exec, as a shell would
    local = study_dir / program
    return str(local) if _is_file(local) else None


def _program_file(program: str, study_dir: Path, env: dict[str, str]) -> Path | None:
    """The file a program name runs: a path as `_resolve_program` finds it, a bare name on PATH."""
    where = _resolve_program(program, study_dir, env)
    if where is not None and os.sep not in where:
        where = shutil.which(where, path=env.get("PATH", os.environ.get("PATH", os.defpath)))
    return None if where is None else Path(where)


def _is_file(path: Path) -> bool:
    """Whether path is a file; False, not OSError, for a name too long or a folder unreadable."""
    try:
        return path.is_file()
    except OSError:
        return False
