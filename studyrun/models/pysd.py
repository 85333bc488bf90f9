"""The `pysd` model: a Vensim (.mdl) or XMILE/Stella (.xmile, .xml, .stmx) model run with PySD.

PySD is an optional dependency (``pip install studyrun[pysd]``), imported only where it is used.
The model file is translated to Python once, when the study is validated, into a cache folder
(``$XDG_CACHE_HOME/studyrun/pysd/``, by default ``~/.cache/...``) keyed by the model file's
content and PySD's version, never beside the user's model; each run then loads a fresh model
object from the translation, so no state leaks from one run to the next. Parameters must name
components of the model (checked at validate). A variable has one name in the study, made from
its name in the model file as plain_name makes it, however the study writes it: Vensim's
"Contact Rate", "Contact_Rate" and PySD's ``contact_rate`` are ``contact_rate``, "Input" (PySD's
``input_1``) is ``input``; parameters and ``outputs:`` are renamed so when the study is read,
and passed to PySD under the model file's own names. A model that reads external data files
(GET XLS DATA, ...) finds them relative to the translation: give such a model as a translation
``.py`` made beside it, which is run as it is.
Every column PySD returns becomes an output series under that name: lowercase, runs of other
characters than letters and digits replaced by ``_`` ("Teacup Temperature" ->
``teacup_temperature``, an element "stock[A,B]" -> ``stock_a_b``; a parameter sets a variable
whole, every element alike). A run that raises is a failed run. The time settings (INITIAL
TIME, FINAL TIME, TIME STEP, SAVEPER) are set through PySD's run options, from ``model.time`` or
from parameters of those names, so a study may vary them; runs on other grids are kept each on
its own.

PySD's RANDOM functions (RANDOM UNIFORM, RANDOM NORMAL, ...) draw from numpy's global generator
(and ignore their seed argument): it is seeded afresh for each run from the run's identity
(core/seeds.py), and a model whose translation draws random numbers has the study's seed in its
runs' identities. A lock keeps two runs in threads of one process from sharing the generator.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import re
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from studyrun.blocks.dependencies import file_name
from studyrun.core.batch import Evaluator, ModelOutput, RunContext
from studyrun.core.errors import Problem, StudyError, outside
from studyrun.core.plugin import Example
from studyrun.core.seeds import run_seed_sequence
from studyrun.models.base import ModelSpec

_SUFFIXES = {".mdl": "read_vensim", ".xmile": "read_xmile", ".xml": "read_xmile",
             ".stmx": "read_xmile", ".py": None}
_COMPONENTS: dict[tuple[str, int, int], set[str]] = {}  # model file's stamp -> its components
_DRAWS = re.compile(r"\b(?:np|numpy)\.random\.|\.rvs\(")  # how a translation draws random numbers
# Vensim's RANDOM functions and XMILE's, as a model file names them; a .py model as translated.
_NAMES_RANDOM = re.compile(r"(?i)\bRANDOM[ _]|\b(?:UNIFORM|NORMAL|EXPRND|POISSON)\s*\(|"
                           + _DRAWS.pattern)
# The time settings: set through PySD's run options, whether in `model.time` or as parameters
# (PySD's `params` would replace the variable but not the clock: a run of one step).
CONTROL_VARIABLES = ("initial_time", "final_time", "time_step", "saveper")
MAX_TRANSLATION_BYTES = 64 * 2**20  # a translation read for its names: larger is not one
_GLOBAL_GENERATOR = threading.Lock()  # numpy's global generator: one per process


# The example's model (studyrun.testing): Vensim's teacup, cooling to the room's temperature.
EXAMPLE_MODEL = """{UTF-8}
Characteristic Time = 10 ~ Minutes ~ |
Heat Loss to Room = (Teacup Temperature - Room Temperature) / Characteristic Time ~ F/Minute ~ |
Room Temperature = 70 ~ F ~ |
Teacup Temperature = INTEG(-Heat Loss to Room, 180) ~ F ~ |
FINAL TIME = 30 ~ Minute ~ |
INITIAL TIME = 0 ~ Minute ~ |
SAVEPER = TIME STEP ~ Minute ~ |
TIME STEP = 0.125 ~ Minute ~ |
"""

class PysdTime(BaseModel):
    """Overrides of the model's own time settings (INITIAL TIME, FINAL TIME, TIME STEP, SAVEPER)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    initial_time: float | None = None
    final_time: float | None = None
    time_step: float | None = Field(None, gt=0)
    saveper: float | None = Field(None, gt=0)


class Pysd(ModelSpec):
    """``type: pysd``: a system-dynamics model file run with PySD, one fresh model per run."""

    type: Literal["pysd"]
    example = Example({"model": {"type": "pysd", "file": "teacup.mdl", "time": {"final_time": 10}},
                       "parameters": {"characteristic_time": {"bounds": [5, 15]},
                                      "room_temperature": 70},
                       "quantities": {"final": "final(teacup_temperature)"}},
                      files={"teacup.mdl": EXAMPLE_MODEL})
    file: str = Field(description="the model file (.mdl, .xmile, .stmx, or a PySD translation "
                                  ".py), relative to the study's folder")
    outputs: list[str] | None = Field(None, description="model variables to return (default: "
                                                        "all)")
    time: PysdTime = Field(default_factory=PysdTime)

    @classmethod
    def names_in_study(cls, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Parameters' and outputs' names made one however written (Vensim's `Contact Rate`,
        PySD's `contact_rate`, and PySD's own Python name of a variable it renames: `input_1`
        for `Input`, in quantities' expressions too)."""
        data = dict(data)
        aliases = {**written_names(data), **python_aliases(data["model"], context)}
        if isinstance(data.get("parameters"), dict):
            data["parameters"] = dict(zip(study_names(list(data["parameters"]), "parameters",
                                                      aliases),
                                          data["parameters"].values()))
        model = data["model"]
        if isinstance(model.get("outputs"), list):
            data["model"] = {**model, "outputs": study_names(model["outputs"], "model.outputs",
                                                             aliases)}
        if aliases and isinstance(data.get("quantities"), dict):
            named = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, aliases)) + r")(?!\w)")
            data["quantities"] = {q: named.sub(lambda m: aliases[m.group(1)], text)
                                  if isinstance(text, str) else text
                                  for q, text in data["quantities"].items()}
        return data

    def model_path(self, study_dir: Path) -> Path:
        path = Path(self.file)
        return path if path.is_absolute() else Path(study_dir) / path

    def check(self, study_dir: Path) -> list[Problem]:
        problems = []
        path = self.model_path(study_dir)
        if path.suffix.lower() not in _SUFFIXES:
            problems.append(Problem(f"unknown model file type {path.suffix!r}; expected one of "
                                    f"{', '.join(_SUFFIXES)}", "file"))
        if not path.is_file():
            problems.append(Problem(f"no such file: {path}", "file"))
        if importlib.util.find_spec("pysd") is None:
            problems.append(Problem("the pysd model type needs PySD: pip install "
                                    "'studyrun[pysd]'", "type"))
        if not problems:
            try:
                _COMPONENTS[file_stamp(path)] = component_names(translate(path))
            except StudyError as error:
                if outside(path, study_dir):  # what the translator quotes of a private file
                    problems.append(Problem(f"PySD cannot read {path} (its messages are not shown: "
                                            "the file lies outside the study's folder, and an "
                                            "error never quotes such a file)", "file"))
                else:
                    problems += [Problem(p.message, "file") for p in error.problems]
        return problems

    def input_names(self, study_dir: Path | None = None) -> set[str] | None:
        """The model's components a parameter may set (known once check() translated the file
        as it is now)."""
        if study_dir is None:
            return None
        try:
            return _COMPONENTS.get(file_stamp(self.model_path(study_dir)))
        except OSError:
            return None

    def check_inputs(self, study_dir: Path, parameters: list[str],
                     varied: list[str]) -> list[Problem]:
        """A time setting given both as a parameter and in `model.time` is given twice."""
        return [Problem(f"{name} is both a parameter and model.time.{name}; give it once (as a "
                        "parameter to vary it)", f"parameters.{name}")
                for name in parameters if getattr(self.time, name, None) is not None
                and name in CONTROL_VARIABLES]

    def dependencies(self, study_dir: Path) -> dict[str, Path]:
        """Runs depend on the model file's content."""
        path = self.model_path(study_dir)
        return {file_name(path, study_dir): path} if path.is_file() else {}

    def static_dependencies(self, study_dir: Path) -> dict[str, Path]:
        return self.dependencies(study_dir)  # its check runs the model; its files read none

    def uses_seed(self, study_dir: Path, run_code: bool = True) -> bool:
        """Whether the model draws random numbers (its translation calls numpy.random or a
        scipy.stats distribution's rvs, as PySD's RANDOM functions do); without `run_code`,
        whether the model file names a random function (translating imports the model)."""
        path = self.model_path(study_dir)
        try:
            if not run_code:
                return _NAMES_RANDOM.search(path.read_text(errors="replace")) is not None
            return draws_random(translate(path))
        except (OSError, StudyError):
            return False

    def packages(self) -> tuple[str, ...]:
        return ("pysd",)

    def build(self, study_dir: Path) -> PysdEvaluator:
        problems = self.check(study_dir)
        if problems:
            raise StudyError(problems)
        return PysdEvaluator(str(translate(self.model_path(study_dir))), self.outputs,
                             self.time.model_dump(exclude_none=True))


def file_stamp(path: Path) -> tuple[str, int, int]:
    """A file's path, modification time and size: what tells a changed model file."""
    status = path.stat()
    return str(path), status.st_mtime_ns, status.st_size


def translation_of(path: Path, content: bytes) -> Path:
    """Where the translation of a model file of this content is kept, made or not: in the cache
    folder, keyed by the content and PySD's version (a `.py` model file is its own translation)."""
    if _SUFFIXES[path.suffix.lower()] is None:
        return path
    import pysd

    name = plain_name(path.stem)
    key = hashlib.sha256(b"\0".join([content, pysd.__version__.encode(), name.encode()]))
    return cache_folder() / key.hexdigest()[:20] / f"{name}.py"


def translate(path: Path) -> Path:
    """The PySD translation of a model file, made once per content and PySD version in the
    cache folder (a `.py` model file is its own translation)."""
    content = path.read_bytes()
    translated, reader = translation_of(path, content), _SUFFIXES[path.suffix.lower()]
    if reader is None or translated.is_file():
        return translated
    import pysd

    folder = translated.parent
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    copy = work / f"{translated.stem}{path.suffix}"
    try:
        copy.write_bytes(content)
        try:
            getattr(pysd, reader)(str(copy))
        except Exception as error:  # the translator runs on user files: report what it says
            raise StudyError(translation_error(error, content.decode(errors="replace"), path),
                             path="model.file") from None
        try:
            os.replace(work, folder)  # whole or not at all
        except OSError:
            if not translated.is_file():  # not another process that translated it first
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return translated


def translation_error(error: Exception, text: str, path: Path) -> str:
    """What PySD's translator says of a model file: a parse error (parsimonious's, holding the
    equation's text and where in it the parse stopped) at the file's line and column with the
    variable it defines; any other error as PySD says it."""
    equation, pos = getattr(error, "text", None), getattr(error, "pos", None)
    start = text.find(equation) if isinstance(equation, str) and equation.strip() else -1
    if start < 0 or not isinstance(pos, int):
        return f"PySD cannot translate the model: {type(error).__name__}: {error}"
    pos = min(pos, len(equation))
    pos += len(equation[pos:]) - len(equation[pos:].lstrip())  # at what it could not read
    at = start + pos
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    head = text[text.rfind("|", 0, start) + 1:start]  # the element's definition up to its equation
    variable = re.split(r"[=(\[]|:=", head.strip().splitlines()[-1] if head.strip() else "")[0].strip()
    found = equation[pos:pos + 30].strip() or "the end of the equation"
    return (f"{path.name}:{line}:{column}: PySD cannot parse the equation of "
            f"{variable or 'a variable'!r}: it stops at {found!r}; correct the equation there")


def cache_folder() -> Path:
    """Where translations are kept: $XDG_CACHE_HOME/studyrun/pysd (~/.cache by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "studyrun" / "pysd"


def component_names(translated: Path) -> set[str]:
    """The names a parameter may give: each variable's study name (plain_name)."""
    import pysd

    try:
        namespace = pysd.load(str(translated)).namespace
    except Exception as error:  # the translation is the user's model: report whatever it says
        raise StudyError(f"PySD cannot load the model: {type(error).__name__}: {error}",
                         path="model.file") from None
    return set(vensim_names(namespace)) - {"time"}


def draws_random(translated: Path) -> bool:
    """Whether a PySD translation draws random numbers."""
    return _DRAWS.search(translated.read_text(errors="replace")) is not None


@contextmanager
def seeded_global_generator(run_id: int) -> Iterator[None]:
    """numpy's global generator seeded from the run's identity while the run draws from it
    (alone in this process), then put back as it was."""
    with _GLOBAL_GENERATOR:
        state = np.random.get_state()
        bits = np.random.MT19937(run_seed_sequence(run_id))
        np.random.set_state(np.random.RandomState(bits).get_state())
        try:
            yield
        finally:
            np.random.set_state(state)


def plain_name(column: str) -> str:
    """A variable's name in the study, however Vensim or PySD write it: 'Teacup Temperature',
    'Teacup_Temperature' and 'teacup_temperature' are 'teacup_temperature', an element of a
    subscripted variable 'stock[A,B]' is 'stock_a_b'."""
    name = re.sub(r"[^0-9a-zA-Z]+", "_", column).strip("_").lower()
    return f"v_{name}" if not name or name[0].isdigit() else name


def study_names(names: list, where: str, aliases: dict[str, str]) -> list:
    """Each of a study's names of a PySD model's variables as plain_name makes it, PySD's own
    Python names by `aliases` (text that is no string is left to the study's own checks); two
    that name one variable are an error."""
    named = [aliases.get(plain_name(n), plain_name(n)) if isinstance(n, str) else n
             for n in names]
    for i, name in enumerate(named):
        if isinstance(name, str) and name in named[:i]:
            first = names[named.index(name)]
            raise ValueError(f"{where}: {first!r} and {names[i]!r} name the same variable of the "
                             f"model, {name!r} (Vensim's names and PySD's are one name in a "
                             "study); give it once")
    return named


def written_names(data: dict[str, Any]) -> dict[str, str]:
    """The study's own spellings of its parameters and outputs that a quantity can write
    (`Infectious` in `outputs: [Infectious]`) -> their study names (`infectious`)."""
    model = data.get("model")
    outputs = model.get("outputs") if isinstance(model, dict) else None
    names = [*(data.get("parameters") or {} if isinstance(data.get("parameters"), dict) else {}),
             *(outputs if isinstance(outputs, list) else [])]
    return {name: plain_name(name) for name in names if isinstance(name, str)
            and name.isidentifier() and plain_name(name) != name}


def python_aliases(model: Any, context: dict[str, Any]) -> dict[str, str]:
    """PySD's Python names that differ from the study's names of the variables of the study's
    model file (mangled_names), when its translation is at hand: made already, or made now when
    the context allows translating (a study being checked, whose code may run)."""
    study_dir, file = context.get("study_dir"), model.get("file") if isinstance(model, dict) else None
    if study_dir is None or not isinstance(file, str) or importlib.util.find_spec("pysd") is None:
        return {}
    path = Path(study_dir) / file
    try:
        if path.suffix.lower() not in _SUFFIXES or not path.is_file():
            return {}
        translated = translation_of(path, path.read_bytes())
        if not translated.is_file():
            if not context.get("translate"):
                return {}
            translated = translate(path)
        return mangled_names(translated)
    except (OSError, StudyError):  # check() reports what is wrong with the file
        return {}


def mangled_names(translated: Path) -> dict[str, str]:
    """PySD's Python name of each variable that PySD renamed (Vensim's `Input` is `input_1`,
    since `input` is Python's) -> its study name; read from the translation's
    `@component.add(name=...)` decorators, never run. A Python name that is also a study name
    stays that variable's."""
    if translated.stat().st_size > MAX_TRANSLATION_BYTES:
        return {}
    try:
        tree = ast.parse(translated.read_text(errors="replace"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    named = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) \
                    and decorator.func.attr == "add":
                for keyword in decorator.keywords:
                    if keyword.arg == "name" and isinstance(keyword.value, ast.Constant) \
                            and isinstance(keyword.value.value, str):
                        named[node.name] = plain_name(keyword.value.value)
    study = set(named.values())
    return {python: name for python, name in named.items() if python != name and python not in study}


def vensim_names(namespace: dict[str, str]) -> dict[str, str]:
    """Each variable's study name (plain_name) -> its name in the model file, as PySD takes it."""
    return {plain_name(original): original for original in namespace}


class PysdEvaluator(Evaluator):
    """Runs each member of a batch with a freshly loaded PySD model."""

    def __init__(self, translated: str, outputs: list[str] | None, time: dict[str, float]):
        self.translated, self.outputs, self.time = translated, outputs, time

    def __call__(self, inputs: dict[str, np.ndarray], context: RunContext) -> ModelOutput:
        import pysd

        n = len(context.run_ids)
        out = ModelOutput(n=n)
        runs: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]] = {}
        for m in range(n):
            params = {name: float(np.asarray(values).reshape(-1)[m])
                      for name, values in inputs.items()}
            try:
                with seeded_global_generator(context.run_ids[m]):
                    runs[m] = self.run_one(pysd, params)
            except Exception as error:  # a model's own failure is the run's, not the batch's
                out.fail(m, f"PySD: {type(error).__name__}: {error}")
        if runs:
            out.put_runs(runs)  # runs with other time settings: each grid its own group
        return out

    def run_one(self, pysd: Any, params: dict[str, float]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One run: its time grid and its series."""
        model = pysd.load(self.translated)
        original = vensim_names(model.namespace)
        time = {**self.time, **{k: v for k, v in params.items() if k in CONTROL_VARIABLES}}
        options: dict[str, Any] = {"params": {original.get(k, k): v for k, v in params.items()
                                              if k not in CONTROL_VARIABLES},
                                   "progress": False, "flatten_output": True}
        if self.outputs:
            options["return_columns"] = [original.get(k, k) for k in self.outputs]
        for key in ("final_time", "time_step", "saveper"):
            if key in time:
                options[key] = time[key]
        if "initial_time" in time:
            options["initial_condition"] = (time["initial_time"], {})
        frame = model.run(**options)
        series = {plain_name(str(c)): frame[c].to_numpy(dtype=float) for c in frame.columns}
        return frame.index.to_numpy(dtype=float), series
