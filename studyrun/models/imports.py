"""The files a python model's module imports from outside the installed environment.

They are found by importing the module in a fresh interpreter (this one may hold other studies'
modules, and studyrun's own) with this process's `sys.path`, the study folder first, and listing
`sys.modules` afterwards. A module counts unless its file lies in the standard library, a
site-packages folder or studyrun itself: the study folder's modules and the user's own packages
(on PYTHONPATH, or installed in editable mode) count. A module imported only when the function is
called, not when its module is, is not seen. From a process's second question on, that
interpreter is a child forked from one that has imported numpy, scipy and pandas (those of them
this process has), unless the question's paths would import another file under one of those
names: the same answer, without importing them anew for each study (Zygote).

`source_files` finds them without importing anything: by reading the import statements of the
module's source, and of the modules they name, in turn (a module imported by a name computed at
run time is not seen).
"""

from __future__ import annotations

import ast
import atexit
import importlib.machinery
import json
import os
import shutil
import site
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from studyrun.blocks.dependencies import file_digest, file_name
from studyrun.core.errors import StudyError
from studyrun.core.paths import within

# The module's own prints go to stderr, so the answers on the saved stdout stay clean; the
# modules outside the installed folders are compiled from their source (sources.py), as a run
# imports them, so that stale bytecode cannot name other imports than the files' own. `once`
# answers the question on stdin; otherwise the interpreter imports the installed packages named
# in its argument, says where they are, and forks a child per question line (Zygote).
_INTERPRETER = r"""
import importlib, importlib.util, json, os, sys, traceback

def answer(paths, module, sources, installed):
    spec = importlib.util.spec_from_file_location("_studyrun_sources", sources)
    finder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(finder)
    sys.meta_path.insert(0, finder.SourceFinder(tuple(installed)))
    sys.path[:] = paths
    started = set(sys.modules)  # start-up (site, a sitecustomize) and preloads: not the model's
    importlib.import_module(module)
    files = {}
    for name, loaded in [(n, m) for n, m in list(sys.modules.items()) if n not in started]:
        try:
            files[name] = loaded.__file__
        except Exception:
            pass
    return {name: file for name, file in files.items() if isinstance(file, str)}

reply = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
if sys.argv[1:] == ["once"]:
    json.dump({"files": answer(*json.loads(sys.stdin.read()))}, reply)
    raise SystemExit(0)
preload, address = json.loads(sys.argv[1]), sys.argv[2]
for name in preload:
    importlib.import_module(name)
import select, signal, socket
server = socket.socket(socket.AF_UNIX)
server.bind(address)
server.listen(64)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped as they end
reply.write(json.dumps({n: os.path.realpath(sys.modules[n].__file__) for n in preload}) + "\n")
reply.flush()
while True:
    ready, _, _ = select.select([server, sys.stdin], [], [])
    if sys.stdin in ready:  # the process that started it closed its end: ended
        break
    connection, _ = server.accept()
    if os.fork() == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        server.close()
        stream = connection.makefile("rw")
        try:
            question = json.loads(stream.readline())
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.chdir(question["cwd"])
            os.environ.clear()
            os.environ.update(question["env"])
            result = {"files": answer(*question["ask"])}
        except BaseException as error:  # the last line of a fresh interpreter's traceback
            result = {"error": traceback.format_exception_only(error)[-1].strip()}
        stream.write(json.dumps(result) + "\n")
        stream.flush()
        os._exit(0)
    connection.close()
# every holder of its stdin has ended (the one that started it killed, perhaps): its folder goes
import shutil
shutil.rmtree(os.path.dirname(address), ignore_errors=True)
"""
# Installed packages a question's child finds imported already, when this process has them: a
# model's module that imports numpy made each fresh interpreter import it anew (0.15 s of CPU).
PRELOAD = ("numpy", "scipy", "pandas")


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
    found = []
    for name, file in sorted(ask(question).items()):
        path = Path(file)
        if (name == module or not within(path, *environment)) and path.is_file():
            found.append(ModuleFile(name, path, module_file_name(name, path, study_dir)))
    return found


def ask(question: list) -> dict[str, str]:
    """The answer to a question of imported_files (its modules' files, by name), from a fresh
    interpreter: from the first question of a process, one started for it; from the second on
    (or once a Zygote runs), a child forked from the Zygote, where its preloads are the packages
    the question's paths would import anyway."""
    with _ZYGOTE_LOCK:
        Zygote.asked += 1
        running = Zygote.running is not None and Zygote.running.alive()
        zygote = Zygote.for_paths(question[0]) if running or Zygote.asked > 1 else None
        if zygote is not None:
            reply = zygote.ask(question)
            if reply is not None:
                return reply
    done = subprocess.run([sys.executable, "-c", _INTERPRETER, "once"], input=json.dumps(question),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise cannot_import(question[1], (done.stderr.strip().splitlines() or ["(no message)"])[-1])
    return answered(question[1], done.stdout)


def answered(module: str, text: str) -> dict[str, str]:
    """The files of an interpreter's answer ({"files": ...} or {"error": ...}), or the
    StudyError it tells; a module that wrote over the answer is said to have done so."""
    try:
        reply = json.loads(text)
        if isinstance(reply, dict) and isinstance(reply.get("error"), str):
            raise cannot_import(module, reply["error"])
        files = reply["files"]
        if isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str)
                                           for k, v in files.items()):
            return files
    except (ValueError, TypeError, KeyError):
        pass
    raise cannot_import(module, "its import wrote over the interpreter's answer")


def cannot_import(module: str, why: str) -> StudyError:
    return StudyError(f"cannot import {module!r} in a fresh interpreter to find the files it "
                      f"imports: {why}", path="model.function")


class Zygote:
    """A fresh interpreter that has imported PRELOAD's packages this process has, and forks a
    child to answer each question on its socket: as a fresh interpreter answers it, but for the
    preloads' import. Started on a process's second question (or by `start`), and shared with
    the processes it forks; it ends when they all have (its stdin closes)."""

    running: "Zygote | None" = None
    failed = False
    asked = 0  # questions this process asked

    def __init__(self) -> None:
        preload = [name for name in PRELOAD if name in sys.modules]
        self.owner = os.getpid()
        self.folder = tempfile.mkdtemp(prefix="studyrun-imports-")  # private: 0700
        self.address = os.path.join(self.folder, "socket")
        quiet = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        # one BLAS thread: a process that forks starts none it would leave behind in a child
        self.process = subprocess.Popen(
            [sys.executable, "-c", _INTERPRETER, json.dumps(preload), self.address],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, **quiet})
        assert self.process.stdout is not None
        self.preloaded: dict[str, str] = json.loads(self.process.stdout.readline() or "null") or {}

    @classmethod
    def start(cls) -> "Zygote | None":
        """The running zygote, started if need be; None if it could not start (then never
        again in this process: nothing preloaded, a socket it could not make)."""
        zygote = cls.running
        if zygote is None or not zygote.alive():
            if cls.failed:
                return None
            zygote = cls.running = cls()
            atexit.register(zygote.close)
            if not zygote.preloaded:
                cls.failed = True
                zygote.close()
                return None
        return zygote

    @classmethod
    def for_paths(cls, paths: list[str]) -> "Zygote | None":
        """The running zygote (started if need be), or None when these paths would import one
        of its preloads from another file (a study's own numpy.py) or it cannot start."""
        zygote = cls.start()
        if zygote is None:
            return None
        for name, file in zygote.preloaded.items():
            spec = importlib.machinery.PathFinder.find_spec(name, paths)
            if spec is None or spec.origin is None or os.path.realpath(spec.origin) != file:
                return None
        return zygote

    def alive(self) -> bool:
        if os.getpid() == self.owner:
            return self.process.poll() is None
        try:  # a forked process cannot wait for it: poll() would call it ended
            os.kill(self.process.pid, 0)
        except OSError:
            return False
        return True

    def ask(self, question: list) -> dict[str, str] | None:
        """The answer; StudyError when the module cannot be imported; None when the zygote
        itself cannot be reached (the question then goes to an interpreter of its own)."""
        line = json.dumps({"ask": question, "cwd": os.getcwd(), "env": dict(os.environ)})
        try:
            with socket.socket(socket.AF_UNIX) as connection:
                connection.connect(self.address)
                stream = connection.makefile("rw")
                stream.write(line + "\n")
                stream.flush()
                text = stream.readline()
        except OSError:
            return None
        if not text:  # the child ended without a word: the import ended its interpreter
            raise cannot_import(question[1], "the import ended the interpreter")
        return answered(question[1], text)

    def close(self) -> None:
        """End it, from the process that started it; from one that process forked, let go of
        it (the zygote ends once every holder of its stdin has)."""
        if Zygote.running is self:
            Zygote.running = None
        if os.getpid() != self.owner:
            if self.process.stdin is not None:
                self.process.stdin.close()
            return
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


_ZYGOTE_LOCK = threading.Lock()


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
