"""The `command` model: an external program run once per run in a private working directory.

Execute step. For each run the evaluator makes `run-<id as 16 hex digits>/` under the batch's
workdir, writes the run's parameter values there (JSON, YAML, or a text template), runs the argv
list with `shell=False` (placeholders are filled element by element, so no value ever reaches a
shell), and reads the results file back. Every way a run can go wrong (exit status, signal,
timeout, missing or malformed results, program not found) is recorded on that run, never raised.

Conventions (what a Dakota or EasyVVUQ user would expect, made explicit):

- Placeholders in `run`: `{params_file}`, `{results_file}` (absolute paths in the run's workdir),
  `{workdir}`, `{study_dir}` (absolute) and `{run_id}` (the 16 hex digits of the workdir name).
  Only `{identifier}` is replaced; any other brace text is left alone; there is no escaping.
  Programs run with the run's workdir as current directory, so refer to files of the study
  as `"{study_dir}/sim.py"`. A relative program path (`bin/sim`) is resolved against the study
  folder; a bare name is looked up on PATH, then in the study folder.
- Templates (`params_file: {template: in.tmpl, file: in.txt}`) replace `{name}` by the value of
  parameter `name` (or one of the placeholders above), written with `repr(float)`, e.g. `0.1`,
  `1e-20`. An unknown name fails every run of the batch with a message naming it.
- Results, `.json`: one object; a number (or null for NaN, true/false for 1/0) is a scalar
  output, a list of numbers is a series on the optional `"time"` list (else on 0, 1, 2, ...).
  Results, `.csv`: a header with a `time` column and one column per series; empty cells are NaN.
  A run that lacks an output other runs of the batch have fails (write null instead).
- Series of a batch share the grid of the first successful run. A run on another grid is
  interpolated linearly onto it when its grid covers that range, and fails otherwise.
- `keep_workdirs`: `failed` (default) removes the workdirs of successful runs; `all` keeps
  every one; `none` removes every one. stdout.txt and stderr.txt are written in each workdir.
- `memory_limit` (`512MB`, `2GiB`, or bytes; KB/MB/GB are powers of 1000 and KiB/MiB/GiB of
  1024, as in Dask) caps the address space with RLIMIT_AS (POSIX; not enforced on macOS).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Union

import numpy as np
from pydantic import (BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator,
                      model_validator)

from ..errors import Problem, StudyError
from .base import ModelOutput, ModelSpec, RunContext

_NAME = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
PLACEHOLDERS = ("params_file", "results_file", "workdir", "study_dir", "run_id")
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_BYTES = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(|b|[kmgt]i?b?)\s*$", re.IGNORECASE)
_STDERR_LINES = 20
MAX_BYTES = 2**63 - 1  # what setrlimit takes


def parse_bytes(text: str | int) -> int:
    """Bytes in `512MB`, `2GiB`, `1e9`-free integer text, or an int; ValueError if malformed."""
    if isinstance(text, int) and not isinstance(text, bool):
        number, unit = (float(text) if abs(text) <= MAX_BYTES else math.inf), ""
    else:
        match = _BYTES.match(str(text))
        if not match:
            raise ValueError(f"not a memory size: {text!r} (try '512MB' or '2GiB')")
        number, unit = float(match[1]), match[2].lower().removesuffix("b")
    try:
        size = int(number * _UNITS[unit])
    except (OverflowError, ValueError):  # a number beyond float64 (inf)
        size = MAX_BYTES + 1
    if size <= 0:
        raise ValueError(f"must be positive; got {text!r}")
    if size > MAX_BYTES:
        raise ValueError(f"too large: {str(text)[:40]!r} is more than 2**63 bytes")
    return size


def _split(text: str) -> tuple[str, ...]:
    """Literal text and placeholder names, alternating: ('lit', 'name', 'lit', ...)."""
    return tuple(_NAME.split(text))


def _render(parts: tuple[str, ...], values: dict[str, str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return "".join(p if k % 2 == 0 else values[p] for k, p in enumerate(parts))


def _check_relative(name: str) -> str:
    path = Path(name)
    if not name or path.is_absolute() or ".." in path.parts or not path.name:
        raise ValueError(f"must be a file name inside the run's working directory; got {name!r}")
    if not name.isprintable():  # a NUL byte or a line break no file system takes as meant
        raise ValueError(f"must be a file name without control characters; got {name!r}")
    return name


class Template(BaseModel):
    """`params_file: {template: in.tmpl, file: in.txt}`: a text file with `{name}` fields."""

    model_config = ConfigDict(extra="forbid")

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
            unknown = [n for n in _NAME.findall(arg) if n not in PLACEHOLDERS]
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

    @field_validator("memory_limit")
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
        if not _NAME.search(self.run[0].replace("{study_dir}", "")):
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

    def build(self, study_dir: Path) -> CommandEvaluator:
        """A picklable evaluator holding the resolved argv, template text and options."""
        study_dir = Path(study_dir).resolve()
        argv = [_split(a) for a in self.run]  # before any path is filled in: a folder named
        # {x} stays a folder name, never a placeholder
        if not _NAME.search(self.run[0].replace("{study_dir}", "")):
            program = self.run[0].replace("{study_dir}", str(study_dir))
            argv[0] = (_resolve_program(program, study_dir, self.env) or program,)
        template, params_name = None, self.params_file
        if isinstance(self.params_file, Template):
            path = study_dir / self.params_file.template
            try:
                template = _split(path.read_text())
            except OSError as exc:
                raise StudyError(f"cannot read template {path}: {exc.strerror}",
                                 path="model.params_file.template") from None
            params_name = self.params_file.file
        return CommandEvaluator(
            argv=tuple(argv), study_dir=str(study_dir),
            params_name=params_name, template=template, results_name=self.results_file,
            timeout=self.timeout, env=tuple(self.env.items()), keep=self.keep_workdirs,
            memory_limit=None if self.memory_limit is None else parse_bytes(self.memory_limit),
            memory_text=None if self.memory_limit is None else str(self.memory_limit))


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


def _is_file(path: Path) -> bool:
    """Whether path is a file; False, not OSError, for a name too long or a folder unreadable."""
    try:
        return path.is_file()
    except OSError:
        return False


class _RunFailed(Exception):
    """One run's failure message, raised and caught inside the batch loop."""


@dataclass(frozen=True)
class CommandEvaluator:
    """Runs a batch of runs one subprocess each; see the module docstring for the conventions."""

    argv: tuple[tuple[str, ...], ...]
    study_dir: str
    params_name: str
    template: tuple[str, ...] | None
    results_name: str
    timeout: float | None
    env: tuple[tuple[str, str], ...]
    keep: str
    memory_limit: int | None
    memory_text: str | None = None

    def __call__(self, inputs: dict[str, np.ndarray], context: RunContext) -> ModelOutput:
        n = len(context.run_ids)
        names = list(inputs)
        columns = [np.broadcast_to(np.asarray(inputs[k], dtype=float), (n,)) for k in names]
        values = np.column_stack(columns) if names else np.empty((n, 0))
        out = ModelOutput(n)
        try:
            base = _make_base(context.workdir)
        except OSError as exc:
            for i in range(n):
                out.fail(i, f"cannot make the working folder {context.workdir}: {exc}")
            return out
        env = {**os.environ, **dict(self.env)}
        batch_error = self._check_template(names)
        workdirs, parsed = [], []
        for i in range(n):
            run_id = f"{int(context.run_ids[i]) & 0xFFFFFFFFFFFFFFFF:016x}"
            workdir = base / f"run-{run_id}"
            workdirs.append(workdir)
            try:
                if batch_error:
                    raise _RunFailed(batch_error)
                row = dict(zip(names, values[i].tolist()))
                parsed.append(self._run_one(row, workdir, run_id, env))
            except _RunFailed as exc:
                out.fail(i, str(exc))
                parsed.append(None)
            except Exception as exc:  # a run never raises: record anything unforeseen on it
                out.fail(i, f"{type(exc).__name__}: {exc}")
                parsed.append(None)
        _assemble(out, parsed, self.results_name)
        self._clean_up(out, workdirs, base if context.workdir is None else None)
        return out

    def _check_template(self, names: list[str]) -> str | None:
        if self.template is None:
            return None
        unknown = sorted(set(self.template[1::2]) - set(names) - set(PLACEHOLDERS))
        if not unknown:
            return None
        return (f"template for {self.params_name} has unknown name {{{unknown[0]}}}; "
                f"known: {', '.join(names + list(PLACEHOLDERS))}")

    def _run_one(self, row: dict[str, float], workdir: Path, run_id: str, env: dict[str, str]):
        _make_fresh_dir(workdir)
        where = {"params_file": str(workdir / self.params_name),
                 "results_file": str(workdir / self.results_name),
                 "workdir": str(workdir), "study_dir": self.study_dir, "run_id": run_id}
        self._write_params(row, workdir / self.params_name, where)
        argv = [_render(parts, where) for parts in self.argv]
        returncode, stderr_path = self._execute(argv, workdir, env)
        if returncode != 0:
            raise _RunFailed(self._describe_exit(returncode, stderr_path))
        results = workdir / self.results_name
        if not results.is_file():
            raise _RunFailed(f"exited with status 0 but wrote no {self.results_name}"
                             + _tail(stderr_path, "; stderr ends:\n"))
        return _read_results(results)

    def _write_params(self, row: dict[str, float], path: Path, where: dict[str, str]) -> None:
        if path.parent != Path(where["workdir"]):
            path.parent.mkdir(parents=True, exist_ok=True)
        if self.template is not None:
            text = _render(self.template, {**where, **{k: repr(v) for k, v in row.items()}})
        elif path.suffix.lower() == ".json":
            text = json.dumps(row)
        else:
            import yaml
            text = yaml.safe_dump(row, sort_keys=False)
        path.write_text(text)

    def _execute(self, argv: list[str], workdir: Path, env: dict[str, str]) -> tuple[int, Path]:
        """Run argv in workdir with output to stdout.txt/stderr.txt; kill its group on timeout."""
        preexec = None
        if self.memory_limit is not None:
            import functools
            import resource
            limits = (self.memory_limit, self.memory_limit)
            preexec = functools.partial(resource.setrlimit, resource.RLIMIT_AS, limits)
        stderr_path = workdir / "stderr.txt"
        with open(workdir / "stdout.txt", "wb") as out, open(stderr_path, "wb") as err:
            try:
                proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=err, start_new_session=True,
                                        preexec_fn=preexec)
            except FileNotFoundError:
                if os.path.isfile(argv[0]):
                    raise _RunFailed(f"cannot start {argv[0]}: the interpreter on its #! line "
                                     "was not found") from None
                raise _RunFailed(f"program not found: {argv[0]!r} (not on PATH; a relative "
                                 "path is resolved against the study folder)") from None
            except PermissionError:
                raise _RunFailed(f"program not executable: {argv[0]!r}") from None
            try:
                return proc.wait(timeout=self.timeout), stderr_path
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise _RunFailed(f"timed out after {self.timeout:g} s (process group killed)"
                                 + _tail(stderr_path, "; stderr ends:\n")) from None
            finally:
                if proc.returncode is None:  # interrupted (KeyboardInterrupt, cancellation)
                    _kill_group(proc)

    def _describe_exit(self, returncode: int, stderr_path: Path) -> str:
        if returncode < 0:
            try:
                what = f"killed by signal {signal.Signals(-returncode).name}"
            except ValueError:
                what = f"killed by signal {-returncode}"
        else:
            what = f"exited with status {returncode}"
        tail = _tail(stderr_path, "")
        if self.memory_limit is not None and (returncode < 0 or re.search(
                r"MemoryError|bad_alloc|[Cc]annot allocate|[Oo]ut of memory", tail)):
            what += f" (memory_limit is {self.memory_text}: the run may have run out of memory)"
        return what + (f"; stderr ends:\n{tail}" if tail else "")

    def _clean_up(self, out: ModelOutput, workdirs: list[Path], temp_base: Path | None) -> None:
        for i, workdir in enumerate(workdirs):
            failed = out.errors[i] is not None
            if self.keep == "all" or (failed and self.keep == "failed"):
                if failed and workdir.exists():
                    out.errors[i] += f"\n(files kept in {workdir})"
                continue
            shutil.rmtree(workdir, ignore_errors=True)
        if temp_base is not None:
            try:
                temp_base.rmdir()  # only when empty
            except OSError:
                pass


def _make_base(workdir: Path | None) -> Path:
    """The batch's folder of run workdirs: the given one, or a new temporary folder."""
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix="studyrun-"))
    Path(workdir).mkdir(parents=True, exist_ok=True)
    return Path(workdir)


def _make_fresh_dir(path: Path) -> None:
    """Make the run's workdir, emptying a stale one from an earlier attempt."""
    try:
        path.mkdir()
    except FileExistsError:
        shutil.rmtree(path)
        path.mkdir()
    except OSError as exc:
        raise _RunFailed(f"cannot make working directory {path}: {exc.strerror}") from None


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the run's whole process group (it leads its own session), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()
    proc.wait()


def _tail(path: Path, prefix: str) -> str:
    """The last lines of a run's stderr (at most 20 lines of the last 8 kB), after prefix."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = text.rstrip().splitlines()[-_STDERR_LINES:]
    return prefix + "\n".join(lines) if lines else ""


def _read_results(path: Path) -> tuple[dict[str, float], dict[str, np.ndarray], np.ndarray | None]:
    """(scalars, series, time) of one run's results file; _RunFailed when malformed."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise _RunFailed(f"cannot read {path.name}: {exc.strerror}") from None
    if path.suffix.lower() == ".csv":
        return _parse_csv(text, path.name)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _RunFailed(f"{path.name} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _RunFailed(f"{path.name} must hold a JSON object of outputs; "
                         f"got {type(data).__name__}")
    scalars, series = {}, {}
    for name, value in data.items():
        if isinstance(value, list):
            series[name] = _as_numbers(value, name, path.name)
        else:
            scalars[name] = _as_numbers([value], name, path.name)[0]
    time = series.pop("time", None)
    if "time" in scalars:
        raise _RunFailed(f"{path.name}: 'time' must be a list of numbers")
    return scalars, series, _check_grid(time, series, path.name)


def _as_numbers(values: list, name: str, file: str) -> np.ndarray:
    for v in values:
        if v is not None and not isinstance(v, (int, float)):
            raise _RunFailed(f"{file}: {name!r} is not numeric (found {v!r}); outputs must be "
                             "numbers, null, or lists of them")
    return np.array([math.nan if v is None else float(v) for v in values], dtype=float)


def _parse_csv(text: str, file: str):
    import csv
    rows = [r for r in csv.reader(text.splitlines()) if r]
    if not rows:
        raise _RunFailed(f"{file} is empty")
    header = [h.strip() for h in rows[0]]
    if "time" not in header:
        raise _RunFailed(f"{file} has no 'time' column; found columns {header}")
    try:
        table = np.array([[float(c) if c.strip() else math.nan for c in r] for r in rows[1:]],
                         dtype=float).reshape(len(rows) - 1, len(header))
    except ValueError as exc:
        raise _RunFailed(f"{file}: not a table of numbers under its header ({exc})") from None
    series = {h: table[:, k] for k, h in enumerate(header)}
    return {}, series, _check_grid(series.pop("time"), series, file)


def _check_grid(time, series: dict[str, np.ndarray], file: str) -> np.ndarray | None:
    if not series:
        return None if time is None else np.asarray(time)
    lengths = {len(s) for s in series.values()}
    if time is None:
        if len(lengths) > 1:
            raise _RunFailed(f"{file}: series differ in length {sorted(lengths)} and no 'time'")
        return np.arange(lengths.pop(), dtype=float)
    if lengths != {len(time)}:
        raise _RunFailed(f"{file}: every series must have as many values as 'time' ({len(time)})")
    if not np.all(np.diff(time) > 0):
        raise _RunFailed(f"{file}: 'time' must increase strictly")
    return time


def _assemble(out: ModelOutput, parsed: list, results_name: str) -> None:
    """Fill the batch's arrays; runs whose outputs do not fit the batch's outputs fail."""
    ok = [i for i, p in enumerate(parsed) if p is not None]
    scalar_names = list(dict.fromkeys(k for i in ok for k in parsed[i][0]))
    series_names = list(dict.fromkeys(k for i in ok for k in parsed[i][1]))
    grid = next((parsed[i][2] for i in ok if parsed[i][1]), None)
    out.scalars = {k: np.full(out.n, math.nan) for k in scalar_names}
    out.series = {k: np.full((out.n, len(grid)), math.nan) for k in series_names}
    out.time = grid if series_names else None
    for i in ok:
        scalars, series, time = parsed[i]
        missing = [k for k in scalar_names if k not in scalars]
        missing += [k for k in series_names if k not in series]
        if missing:
            out.fail(i, f"{results_name} has no {missing[0]!r}, which other runs of the batch "
                        "have (write null for a value a run cannot compute)")
            continue
        try:
            rows = _onto_grid(series, time, grid)
        except _RunFailed as exc:
            out.fail(i, str(exc))
            continue
        for k in scalar_names:
            out.scalars[k][i] = scalars[k]
        for k in series_names:
            out.series[k][i] = rows[k]


def _onto_grid(series: dict[str, np.ndarray], time, grid) -> dict[str, np.ndarray]:
    if not series or (len(time) == len(grid) and np.array_equal(time, grid)):
        return series
    tol = 1e-9 * max(1.0, abs(grid[-1] - grid[0]))
    if time[0] > grid[0] + tol or time[-1] < grid[-1] - tol:
        raise _RunFailed(f"time grid [{time[0]:g}, {time[-1]:g}] does not cover the batch's "
                         f"grid [{grid[0]:g}, {grid[-1]:g}] (that of its first successful run)")
    return {k: np.interp(grid, time, v) for k, v in series.items()}
