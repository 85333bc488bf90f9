"""The `command` spec: the pydantic model, its field checks, program lookup, and `build`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from ...core.errors import Problem, StudyError, outside
from ...core.sizes import parse_bytes
from ...dependencies import file_name
from ..base import ModelSpec
from .evaluator import CommandEvaluator
from .placeholders import PLACEHOLDER, PLACEHOLDERS, split_placeholders


def _check_relative(name: str) -> str:
    path = Path(name)
    if not name or path.is_absolute() or ".." in path.parts or not path.name:
        raise ValueError(f"must be a file name inside the run's working directory; got {name!r}")
    if not name.isprintable():  # a NUL byte or a line break no file system takes as meant
        raise ValueError(f"must be a file name without control characters; got {name!r}")
    return name


class Template(BaseModel):
    """`params_file: {template: in.tmpl, file: in.txt}`: a text file with `{name}` fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: str = Field(min_length=1, description="template file, relative to the study folder")
    file: str = Field(description="the file written in each run's working directory")

    @field_validator("file")
    @classmethod
    def _file_inside_workdir(cls, value: str) -> str:
        return _check_relative(value)


def _params_kind(value) -> str:
    return "Template" if isinstance(value, (dict, Template)) else "name"


ParamsFile = Annotated[Union[Annotated[str, Tag("name")], Annotated[Template, Tag("Template")]],
                       Discriminator(_params_kind)]


class Command(ModelSpec):
    """An external program, run once per run with its parameters in a file."""

    type: Literal["command"]
    run: list[str] = Field(min_length=1, description="argv list; placeholders like {params_file}")
    params_file: ParamsFile = "params.json"
    results_file: str = "results.json"
    timeout: float | None = Field(None, gt=0, description="seconds per run")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    keep_workdirs: Literal["failed", "all", "none"] = "failed"
    memory_limit: str | int | None = Field(None, description="address-space cap, e.g. 512MB")
    max_output: str | int = Field("100MB", description="largest results file a run may write "
                                  "(e.g. 500MB); a larger one fails that run")

    @field_validator("run", mode="before")
    @classmethod
    def _run_is_a_list(cls, value):
        if isinstance(value, str):
            hint = json.dumps(value.split())
            raise ValueError(f"must be a list of arguments, not a shell string; got {value!r} "
                             f"(write it as a list, e.g. {hint})")
        return value

    @field_validator("run")
    @classmethod
    def _known_placeholders(cls, value: list[str]) -> list[str]:
        for arg in value:
            unknown = [n for n in PLACEHOLDER.findall(arg) if n not in PLACEHOLDERS]
            if unknown:
                raise ValueError(f"unknown placeholder {{{unknown[0]}}} in {arg!r}; allowed: "
                                 + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS))
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

    @field_validator("results_file")
    @classmethod
    def _results_suffix(cls, value: str) -> str:
        _check_relative(value)
        if Path(value).suffix.lower() not in (".json", ".csv"):
            raise ValueError(f"must end in .json or .csv; got {value!r}")
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

    def check(self, study_dir: Path) -> list[Problem]:
        """A missing template, or a program neither on PATH nor a file (nor executable)."""
        problems = []
        if isinstance(self.params_file, Template):
            template = Path(study_dir) / self.params_file.template
            if not _is_file(template):
                problems.append(Problem(f"template file not found: {template}",
                                        path="params_file.template"))
        program = self.run[0].replace("{study_dir}", str(Path(study_dir).resolve()))
        if not PLACEHOLDER.search(self.run[0].replace("{study_dir}", "")):
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

    def dependencies(self, study_dir: Path) -> dict[str, Path]:
        """The program, every existing file its argv names by an absolute or `{study_dir}` path
        (also after `--option=`), and the template copied into each run's folder."""
        study_dir = Path(study_dir).resolve()
        files = []
        if isinstance(self.params_file, Template):
            files.append(study_dir / self.params_file.template)
        for index, arg in enumerate(self.run):
            if PLACEHOLDER.search(arg.replace("{study_dir}", "")):
                continue  # names a file of the run, made when it runs
            text = arg.replace("{study_dir}", str(study_dir))
            if index == 0:
                files.append(_program_file(text, study_dir, self.env))
            files += [Path(c) for c in (text, text.partition("=")[2]) if c and Path(c).is_absolute()]
        return {file_name(f, study_dir): f for f in files if f is not None and _is_file(f)}

    def with_timeout(self, seconds: float) -> "Command":
        return self if self.timeout is not None else self.model_copy(update={"timeout": seconds})

    def build(self, study_dir: Path) -> CommandEvaluator:
        """A picklable evaluator holding the resolved argv, template text and options."""
        study_dir = Path(study_dir).resolve()
        argv = [split_placeholders(a) for a in self.run]  # before any path is filled in: a folder named
        # {x} stays a folder name, never a placeholder
        if not PLACEHOLDER.search(self.run[0].replace("{study_dir}", "")):
            program = self.run[0].replace("{study_dir}", str(study_dir))
            argv[0] = (_resolve_program(program, study_dir, self.env) or program,)
        template, params_name = None, self.params_file
        if isinstance(self.params_file, Template):
            path = study_dir / self.params_file.template
            try:
                template = split_placeholders(path.read_text())
            except (OSError, UnicodeDecodeError) as exc:
                why = getattr(exc, "strerror", None) or "not a UTF-8 text file"
                raise StudyError(f"cannot read template {path}: {why}",
                                 path="model.params_file.template") from None
            params_name = self.params_file.file
        return CommandEvaluator(
            argv=tuple(argv), study_dir=str(study_dir),
            params_name=params_name, template=template, results_name=self.results_file,
            timeout=self.timeout, env=tuple(self.env.items()), keep=self.keep_workdirs,
            memory_limit=None if self.memory_limit is None else parse_bytes(self.memory_limit),
            memory_text=None if self.memory_limit is None else str(self.memory_limit),
            max_output=parse_bytes(self.max_output), max_output_text=str(self.max_output),
            outside_template=str(path) if template is not None and outside(path, study_dir) else "")


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
