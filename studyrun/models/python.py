"""The `python` model: a function `package.module:callable`, importable from the study's folder.

A scalar function is called once per run with keyword arguments and returns a number (the output
`value`), a dict of numbers, or time series as a dict of arrays with a `time` key (each run's
own: runs may stop at different times). A vectorized function (`vectorized: true`) is called
once per batch with arrays and returns arrays on one grid.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
from pydantic import Field, field_validator

from ..core.batch import Evaluator, ModelOutput, RunContext
from ..core.errors import Problem, describe
from ..dependencies import file_digest, text_digest
from ..interrupts import fails_the_run
from ..params import Whole
from .base import ModelSpec
from .imports import imported_files, installed_folders
from .sources import compiled_from_source

_FUNCTION = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_LOADED: dict[tuple[str, str], tuple[str, Callable[..., Any]]] = {}  # -> (code, function)
_IMPORTING = threading.Lock()


def import_function(reference: str, study_dir: Path, code: str = "",
                    modules: tuple[str, ...] = ()) -> Callable[..., Any]:
    """Import `module:callable`, the study's folder first on sys.path (cached per process).

    A module of the same name imported earlier from another folder (another study in the same
    process) is replaced, so each study runs its own code. `code` is the digest of the files the
    function imports (`modules`): when it differs from the one imported here before (a file was
    edited since), those modules are imported afresh, so a long-lived worker runs the new code.
    The modules it imports from outside the installed folders, those `code` covers, are
    compiled from their source, never from bytecode (sources.py): the code that runs is the code
    whose digest is `code`.
    """
    key = (reference, str(study_dir))
    with _IMPORTING:
        cached = _LOADED.get(key)
        if cached is not None and (not code or cached[0] in ("", code)):
            if code:
                _LOADED[key] = (code, cached[1])
            return cached[1]
        module_name, attribute = reference.split(":")
        folder = str(study_dir)
        if folder in sys.path:
            sys.path.remove(folder)
        sys.path.insert(0, folder)
        spec = locate_module(module_name, study_dir)
        loaded = sys.modules.get(module_name)
        stale = cached is not None or (spec is not None and loaded is not None
                                       and getattr(loaded, "__file__", None) != spec.origin)
        if stale:
            forget_modules([module_name, *modules])
        with compiled_from_source(installed_folders()):
            module = importlib.import_module(module_name)
        _LOADED[key] = (code, getattr(module, attribute))
        return _LOADED[key][1]


def forget_modules(names: list[str]) -> None:
    """Drop modules (and their submodules) from sys.modules, so the next import reads their files."""
    for name in [n for n in sys.modules if any(n == m or n.startswith(m + ".") for m in names)]:
        del sys.modules[name]
    importlib.invalidate_caches()


def locate_module(module_name: str, study_dir: Path):
    """The spec of `module_name` as found from the study's folder first, ignoring sys.modules."""
    search = [str(study_dir), *sys.path]
    spec = None
    for part in module_name.split("."):
        spec = importlib.machinery.PathFinder.find_spec(part, search)
        if spec is None:
            return None
        search = list(spec.submodule_search_locations or [])
    return spec


class Python(ModelSpec):
    """A Python function as the model."""

    type: Literal["python"]
    function: str = Field(description="package.module:callable, importable from the study's folder")
    vectorized: bool = Field(False, description="called once per batch with arrays")
    constants: dict[str, Whole | float] = Field(
        default_factory=dict, description="fixed keyword arguments (an integer arrives as an int)")

    @field_validator("function")
    @classmethod
    def _check_reference(cls, value: str) -> str:
        if not _FUNCTION.match(value):
            raise ValueError(f"expected 'package.module:callable'; got {value!r}")
        return value

    def defaults(self) -> dict[str, float | int]:
        return dict(self.constants)

    def check(self, study_dir: Path) -> list[Problem]:
        try:
            function = import_function(self.function, study_dir)
        except Exception as error:  # an import runs user code: any failure is the user's to see
            return [Problem(f"cannot import {self.function!r}: {type(error).__name__}: {error}",
                            path="function")]
        if not callable(function):
            return [Problem(f"{self.function!r} is not callable", path="function")]
        return []

    def dependencies(self, study_dir: Path) -> dict[str, Path]:
        """The function's module and every module it imports from outside the environment."""
        return {f.name: f.path for f in imported_files(self.module, study_dir)}

    @property
    def module(self) -> str:
        return self.function.split(":")[0]

    def build(self, study_dir: Path) -> "PythonEvaluator":
        found = imported_files(self.module, study_dir)
        code = text_digest([(f.name, file_digest(f.path)) for f in found])
        return PythonEvaluator(self.function, self.vectorized, str(study_dir),
                               tuple(self.constants.items()), code,
                               tuple(f.module for f in found))


@dataclass(frozen=True)
class PythonEvaluator(Evaluator):
    """Calls the user's function per run (or once per batch when vectorized)."""

    runs_user_code = True

    function: str
    vectorized: bool
    study_dir: str
    constants: tuple[tuple[str, float | int], ...] = ()  # keyword arguments no parameter sets
    code: str = ""  # digest of the files runs depend on: a new one makes a worker re-import modules
    modules: tuple[str, ...] = ()  # the modules of those files

    def __call__(self, inputs: dict[str, np.ndarray], context: RunContext) -> ModelOutput:
        function = import_function(self.function, Path(self.study_dir), self.code, self.modules)
        n = len(context.run_ids)
        missing = {name: np.full(n, value) for name, value in self.constants if name not in inputs}
        inputs = {**missing, **inputs} if missing else inputs
        if self.vectorized:
            return call_vectorized(function, inputs, n)
        return call_per_run(function, inputs, n)

    def prepare(self) -> None:
        import_function(self.function, Path(self.study_dir), self.code, self.modules)

    def with_code(self, digest: str) -> "PythonEvaluator":
        return dataclasses.replace(self, code=digest)


def call_per_run(function: Callable[..., Any], inputs: dict[str, np.ndarray], n: int) -> ModelOutput:
    """Loop over the batch; collect numbers, dicts of numbers, or series with a `time` key."""
    names = list(inputs)
    columns = [np.broadcast_to(inputs[name], (n,)).tolist() for name in names]
    results: list[Any] = [None] * n
    out = ModelOutput(n)
    rows = zip(*columns) if columns else [()] * n
    for i, row in enumerate(rows):
        try:
            results[i] = function(**dict(zip(names, row)))
        except BaseException as error:  # sys.exit and KeyboardInterrupt too: only this run fails
            if not fails_the_run(error):
                raise
            out.errors[i] = describe(error)
    gather_results(results, out)
    return out


def gather_results(results: list[Any], out: ModelOutput) -> None:
    """Turn per-run return values into batch arrays; a run of the wrong shape fails alone.
    Each run's series stay on its own `time` (runs sharing a grid are stacked)."""
    if results and all(e is None for e in out.errors) and all(
            isinstance(r, (float, int)) for r in results):
        out.scalars = {"value": np.array(results, dtype=float)}  # the common case, in one step
        return
    scalars: dict[str, np.ndarray] = {}
    runs: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]] = {}
    for i, result in enumerate(results):
        if out.errors[i] is not None:
            continue
        try:
            numbers, series = split_result(result if isinstance(result, dict) else {"value": result})
        except (TypeError, ValueError) as error:
            out.errors[i] = f"bad return value: {error}"
            continue
        for key, value in numbers.items():
            if key not in scalars:  # columns made once, not per run: a batch is long
                scalars[key] = np.full(out.n, np.nan)
            scalars[key][i] = value
        if series is not None:
            runs[i] = series
    out.scalars = scalars
    out.put_runs(runs)


def split_result(result: dict) -> tuple[dict[str, float], tuple | None]:
    """One run's numbers, and its (time, series) when it returned a `time`."""
    time = result.get("time")
    if time is not None:
        time = np.asarray(time, dtype=float)
        if time.ndim != 1 or not len(time) or not np.all(np.diff(time) > 0):
            raise ValueError("'time' must be a non-empty list of strictly increasing numbers")
    numbers, series = {}, {}
    for key, value in result.items():
        if key == "time":
            continue
        array = np.asarray(value, dtype=float)
        if array.ndim == 0:
            numbers[key] = float(array)
        elif time is not None and array.shape == time.shape:
            series[key] = array
        else:
            raise ValueError(f"output {key!r} has shape {array.shape}; expected a number "
                             "or a series as long as 'time'")
    return numbers, None if time is None else (time, series)


def call_vectorized(function: Callable[..., Any], inputs: dict[str, np.ndarray], n: int) -> ModelOutput:
    """One call for the whole batch; an exception fails every run of the batch."""
    out = ModelOutput(n)
    try:
        result = function(**{k: np.broadcast_to(v, (n,)) for k, v in inputs.items()})
        if not isinstance(result, dict):
            result = {"value": result}
        time = result.get("time")
        out.time = None if time is None else np.asarray(time, dtype=float)
        for key, value in result.items():
            if key == "time":
                continue
            array = np.asarray(value, dtype=float)
            if array.ndim <= 1:
                out.scalars[key] = np.broadcast_to(array, (n,)).copy()
            elif array.shape[0] == n and out.time is not None and array.shape[1] == len(out.time):
                out.series[key] = array
            else:
                raise ValueError(f"output {key!r} has shape {array.shape}; expected ({n},) or "
                                 f"({n}, len(time))")
    except BaseException as error:
        if not fails_the_run(error):
            raise
        out.errors = [describe(error)] * n
    return out
