"""The files a python model's module imports from outside the installed environment.

They are found by importing the module in a fresh interpreter (this one may hold other studies'
modules, and studyrun's own) with this process's `sys.path`, the study folder first, and listing
`sys.modules` afterwards. A module counts unless its file lies in the standard library, a
site-packages folder or studyrun itself: the study folder's modules and the user's own packages
(on PYTHONPATH, or installed in editable mode) count. A module imported only when the function is
called, not when its module is, is not seen.

`source_files` finds them without importing anything: by reading the import statements of the
module's source, and of the modules they name, in turn (a module imported by a name computed at
run time is not seen).
"""

from __future__ import annotations

import ast
import importlib.machinery
import json
import os
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from studyrun.blocks.dependencies import file_digest, file_name
from studyrun.core.errors import StudyError
from studyrun.core.paths import within

# The module's own prints go to stderr, so the answer on the saved stdout stays clean; the
# modules outside the installed folders are compiled from their source (sources.py), as a run
# imports them, so that stale bytecode cannot name other imports than the files' own.
_CHILD = r"""
import importlib, importlib.util, json, os, sys
paths, module, sources, installed = json.loads(sys.stdin.read())
answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
spec = importlib.util.spec_from_file_location("_studyrun_sources", sources)
finder = importlib.util.module_from_spec(spec)
spec.loader.exec_module(finder)
sys.meta_path.insert(0, finder.SourceFinder(tuple(installed)))
sys.path[:] = paths
started = set(sys.modules)  # the interpreter's own start-up (site, a sitecustomize): not the model's
importlib.import_module(module)
files = {}
for name, loaded in [(n, m) for n, m in list(sys.modules.items()) if n not in started]:
    try:
        files[name] = loaded.__file__
    except Exception:
        pass
json.dump({name: file for name, file in files.items() if isinstance(file, str)}, answer)
"""


@dataclass(frozen=True)
class ModuleFile:
    """One imported module: its name, its file, and the file's name in a run's identity."""

    module: str
    path: Path
    name: str


_FOUND: dict[tuple, tuple[list[ModuleFile], list[str]]] = {}


def imported_files(module: str, study_dir: Path) -> list[ModuleFile]:
    """The module's file and every file it imports from outside the environment, by module name.

    Remembered per process while none of those files' contents changed (a new import must be
    written in one of them), so planning and building a study import it once.
    """
    paths = [str(study_dir), *[p for p in sys.path if p != str(study_dir)]]
    key = (module, tuple(paths))
    if key in _FOUND:
        found, digests = _FOUND[key]
        if [file_digest(f.path) for f in found] == digests:
            return found
    found = find_in_fresh_interpreter(module, paths, Path(study_dir))
    _FOUND[key] = (found, [file_digest(f.path) for f in found])
    return found


def find_in_fresh_interpreter(module: str, paths: list[str], study_dir: Path) -> list[ModuleFile]:
    """Import the module in a new interpreter with these paths; keep the modules that are the user's."""
    environment = environment_folders()
    question = [paths, module, str(Path(__file__).with_name("sources.py")), installed_folders()]
    done = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(question),
                          capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise StudyError(f"cannot import {module!r} in a fresh interpreter to find the files it "
                         f"imports: {last}", path="model.function")
    found = []
    for name, file in sorted(json.loads(done.stdout).items()):
        path = Path(file)
        if (name == module or not within(path, *environment)) and path.is_file():
            found.append(ModuleFile(name, path, module_file_name(name, path, study_dir)))
    return found


def source_files(module: str, study_dir: Path) -> tuple[list[ModuleFile], set[str]]:
    """The module's file and those of the modules its import statements name, and theirs, as
    imported_files keeps them (outside the environment); and the names those statements give
    that no file in the study folder holds. Nothing is imported or run."""
    environment, folder = environment_folders(), Path(os.path.realpath(study_dir))
    found: dict[str, ModuleFile] = {}
    outside: set[str] = set()
    todo, seen = [module], {module}
    while todo:
        name = todo.pop()
        spec = locate_module(name, study_dir)
        path = Path(spec.origin) if spec is not None and spec.has_location and spec.origin else None
        if path is None or not path.is_file():
            outside.add(name)
            continue
        if not within(path, folder):
            outside.add(name)
        if name != module and within(path, *environment):
            continue
        found[name] = ModuleFile(name, path, module_file_name(name, path, Path(study_dir)))
        if path.suffix == ".py":
            package = name if path.stem == "__init__" else name.rpartition(".")[0]
            for named in imported_names(path, package) - seen:
                seen.add(named)
                todo.append(named)
    return sorted(found.values(), key=lambda f: f.module), outside


def locate_module(module_name: str, study_dir: Path):
    """The spec of `module_name` as found from the study's folder first, ignoring sys.modules;
    no code runs (a package's __init__ is found, not executed)."""
    search = [str(study_dir), *sys.path]
    spec = None
    for part in module_name.split("."):
        spec = importlib.machinery.PathFinder.find_spec(part, search)
        if spec is None:
            return None
        search = list(spec.submodule_search_locations or [])
    return spec


def imported_names(path: Path, package: str) -> set[str]:
    """Every module an import statement of the file names (with each package above it), a
    relative import resolved against `package`; none for a file that does not parse."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    continue
                parent = ".".join(parts[:len(parts) - (node.level - 1)])
                base = ".".join(filter(None, [parent, base]))
            if base:
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return {".".join(n.split(".")[:i + 1]) for n in names for i in range(n.count(".") + 1)
            if all(part.isidentifier() for part in n.split("."))}


@lru_cache(maxsize=1)
def installed_folders() -> tuple[str, ...]:
    """environment_folders() as strings, for sources.py."""
    return tuple(map(str, environment_folders()))


def environment_folders() -> list[Path]:
    """Where installed code lives: the standard library, site-packages folders, studyrun."""
    folders = {Path(__file__).resolve().parents[1]}
    for prefixes in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=prefixes)
        folders.update(Path(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    folders.update(Path(p) for p in site.getsitepackages())
    folders.add(Path(site.getusersitepackages()))
    return sorted({Path(os.path.realpath(f)) for f in folders})


def module_file_name(module: str, path: Path, study_dir: Path) -> str:
    """Its path relative to the study folder; outside it, its path in its package (mylib/io.py),
    so neither moving the study folder nor the library's folder changes an identity."""
    name = file_name(path, study_dir)
    if not Path(name).is_absolute():
        return name
    parts = module.split(".")
    folders = parts if path.stem == "__init__" else parts[:-1]
    return "/".join([*folders, path.name])
