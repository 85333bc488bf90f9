"""The `python` model: a function `package.module:callable`, importable from the study's folder.

A scalar function is called once per run with keyword arguments and returns a number (the output
`value`), a dict of numbers, or time series as a dict of arrays with a `time` key (each run's
own: runs may stop at different times). A vectorized function (`vectorized: true`) is called
once per batch with arrays and returns arrays on one grid.

A function that declares a keyword argument `rng` gets each run's numpy Generator, one that
declares `seed` each run's integer seed (0 <= seed < 2**31), both derived from the run's
identity (core/seeds.py); a vectorized function gets a list of Generators and an array of seeds,
one per run. A parameter or constant of that name is passed instead.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import inspect
import re
import sys
import threading
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
from pydantic import Field, field_validator

from studyrun.blocks.dependencies import file_digest, text_digest
from studyrun.blocks.params import Whole
from studyrun.core.batch import Evaluator, ModelOutput, RunContext
from studyrun.core.errors import Problem, describe
from studyrun.core.interrupts import fails_the_run
from studyrun.core.plugin import Example
from studyrun.core.prints import escaped_prints
from studyrun.core.seeds import run_seed, run_seed_sequence
from studyrun.models.base import ModelSpec
from studyrun.models.imports import imported_files, installed_folders, locate_module, source_files
from studyrun.models.sources import compiled_from_source

_FUNCTION = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_LOADED: dict[tuple[str, str], tuple[str, Callable[..., Any]]] = {}  # -> (code, function)
_IMPORTING = threading.Lock()
SEED_ARGUMENTS = ("rng", "seed")  # what a function may declare to get its run's random numbers


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


class Python(ModelSpec):
    """A Python function as the model."""

    type: Literal["python"]
    example = Example({"model": {"type": "python", "function": "toy:toy"},
                       "quantities": {"final": "final", "peak": "max(y)"}})
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
            with escaped_prints():  # an import runs the module, and its prints
                function = import_function(self.function, study_dir)
        except Exception as error:  # an import runs user code: any failure is the user's to see
            return [Problem(f"cannot import {self.function!r}: {type(error).__name__}: {error}",
                            path="function")]
        if not callable(function):
            return [Problem(f"{self.function!r} is not callable", path="function")]
        return []

    def uses_seed(self, study_dir: Path, run_code: bool = True) -> bool:
        """Whether the function declares `rng` or `seed` (that no constant sets); without
        `run_code`, as its `def` in the module's source declares them (nothing is imported)."""
        if not run_code:
            return bool(declared_seed_arguments(self.function, study_dir) - set(self.constants))
        try:
            function = import_function(self.function, study_dir)
        except Exception:  # reported by check()
            return False
        return bool(seed_arguments(function) - set(self.constants))

    def dependencies(self, study_dir: Path) -> dict[str, Path]:
        """The function's module and every module it imports from outside the environment."""
        return {f.name: f.path for f in imported_files(self.module, study_dir)}

    def static_dependencies(self, study_dir: Path) -> dict[str, Path]:
        """The function's module and the modules its import statements name, and theirs, found
        by reading their source: nothing is imported."""
        return {f.name: f.path for f in source_files(self.module, study_dir)[0]}

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
        with escaped_prints():  # the model's prints, wherever it runs
            function = import_function(self.function, Path(self.study_dir), self.code,
                                       self.modules)
            n = len(context.run_ids)
            missing = {name: np.full(n, value) for name, value in self.constants
                       if name not in inputs}
            inputs = {**missing, **inputs} if missing else inputs
            wanted = seed_arguments(function) - set(inputs)
            if self.vectorized:
                return call_vectorized(function, inputs, n, seeded(wanted, context.run_ids, True))
            return call_per_run(function, inputs, n, seeded(wanted, context.run_ids))

    def prepare(self) -> None:
        with escaped_prints():
            import_function(self.function, Path(self.study_dir), self.code, self.modules)

    def with_code(self, digest: str) -> "PythonEvaluator":
        return dataclasses.replace(self, code=digest)


def seed_arguments(function: Callable[..., Any]) -> set[str]:
    """The arguments of SEED_ARGUMENTS that the function declares by name."""
    try:
        declared = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a callable without a signature Python can read
        return set()
    return {name for name in SEED_ARGUMENTS if name in declared and declared[name].kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def declared_seed_arguments(reference: str, study_dir: Path) -> set[str]:
    """The arguments of SEED_ARGUMENTS that the module's top-level `def` of the function names,
    read from its source without importing it (a function made otherwise: none)."""
    import ast

    module, _, name = reference.partition(":")
    spec = locate_module(module, study_dir)
    if spec is None or not spec.origin or not str(spec.origin).endswith(".py"):
        return set()
    try:
        tree = ast.parse(Path(spec.origin).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            named = node.args.args + node.args.kwonlyargs
            return {a.arg for a in named} & set(SEED_ARGUMENTS)
    return set()


def seeded(wanted: set[str], run_ids: np.ndarray, vectorized: bool = False) -> dict[str, Any]:
    """The run-by-run values of the seed arguments the function wants: `rng`, a list of numpy
    Generators, and `seed`, a list of ints (an int64 array for a vectorized function)."""
    extra: dict[str, Any] = {}
    if "rng" in wanted:
        extra["rng"] = [np.random.default_rng(run_seed_sequence(r)) for r in run_ids.tolist()]
    if "seed" in wanted:
        seeds = [run_seed(r) for r in run_ids.tolist()]
        extra["seed"] = np.array(seeds, dtype=np.int64) if vectorized else seeds
    return extra


def call_per_run(function: Callable[..., Any], inputs: dict[str, np.ndarray], n: int,
                 extra: dict[str, list] | None = None) -> ModelOutput:
    """Loop over the batch; collect numbers, dicts of numbers, or series with a `time` key.
    `extra` gives more arguments, a list of n values each (a run's Generator, its seed)."""
    extra = extra or {}
    values = {name: np.broadcast_to(inputs[name], (n,)).tolist() for name in inputs}
    values.update(extra)
    order = positional_order(function, list(values))
    names = order or list(values)
    rows = zip(*(values[name] for name in names)) if names else [()] * n
    results: list[Any] = [None] * n
    out = ModelOutput(n)
    for i, row in enumerate(rows):
        try:
            results[i] = function(*row) if order else function(**dict(zip(names, row)))
        except BaseException as error:  # sys.exit and KeyboardInterrupt too: only this run fails
            if not fails_the_run(error):
                raise
            out.errors[i] = describe(error)
    gather_results(results, out)
    return out


def positional_order(function: Callable[..., Any], names: list[str]) -> list[str] | None:
    """The names in the order of a plain function's first parameters when they are exactly
    those (then a positional call binds as the keyword call does, and costs less a run), else
    None. Only a `def` or lambda: a wrapper's own code, not the signature it shows, decides."""
    code = getattr(function, "__code__", None)
    if type(function) is not types.FunctionType or code is None or code.co_posonlyargcount:
        return None
    first = list(code.co_varnames[:len(names)])
    return first if len(names) <= code.co_argcount and set(first) == set(names) else None


def gather_results(results: list[Any], out: ModelOutput) -> None:
    """Turn per-run return values into batch arrays; a run of the wrong shape fails alone.
    Each run's series stay on its own `time` (runs sharing a grid are stacked)."""
    if results and out.errors.count(None) == len(out.errors) and all(
            issubclass(kind, (float, int)) for kind in set(map(type, results))):
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


def call_vectorized(function: Callable[..., Any], inputs: dict[str, np.ndarray], n: int,
                    extra: dict[str, Any] | None = None) -> ModelOutput:
    """One call for the whole batch (with `extra` arguments, one value a run each); an exception
    fails every run of the batch."""
    out = ModelOutput(n)
    try:
        result = function(**{k: np.broadcast_to(v, (n,)) for k, v in inputs.items()},
                          **(extra or {}))
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
