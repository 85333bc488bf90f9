"""A study's files at a git revision, and only those, written into a folder for `studyrun diff
--rev`: the study file, the model file it includes, every file a string of the study names (a
data file, a template, a program; a folder: the files in it, as of a results folder `from:`
names), the files `execution.depends_on` matches, and a python model's module with the modules
its import statements name, in turn. Then what the working tree holds beside the revision's files
(a results folder or data git does not track) is linked in, so the revision's study finds it
where the current one does.

Nothing of the revision runs here: files are read with `git ls-tree` and `git cat-file blob`
(no filter), streamed to disk, each at most MAX_FILE bytes; a file the study does not name is
never opened, whatever its size.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from studyrun.core.errors import StudyError, StudyrunError
from studyrun.core.git import Entry, entries, names_under, present, resolve, save_blob, toplevel
from studyrun.core.paths import within
from studyrun.core.text import shorten

MAX_FILE = 100 * 2**20  # bytes of one file (GitHub refuses larger ones)
MAX_TOTAL = 2**30  # bytes of all the files read from a revision
MAX_FILES = 10_000  # files read from a revision
MAGIC = re.compile(r"[*?[]")  # a glob's special characters


@dataclass
class Checkout:
    """A study's files at a commit, in `folder`: where the study file is, and what was left out."""

    root: Path  # the repository's top folder
    commit: str
    folder: Path
    study: Path  # the study file at the commit, in `folder`
    notes: list[str] = field(default_factory=list)


def check_out(study: Path, revision: str, into: Path) -> Checkout:
    """The files the study at `revision` needs, written under `into` at their paths in the
    repository; StudyrunError if the study is not there or a file is too large."""
    study = Path(study).resolve()
    root = toplevel(study.parent).resolve()
    if not within(study, root):
        raise StudyrunError(f"{study} is not inside its git repository {root}")
    relative = study.relative_to(root).as_posix()
    reader = Reader(root, resolve(root, revision), Path(into), revision)
    if not reader.fetch([relative]):
        raise StudyrunError("; ".join([f"{relative} is not a file in revision {revision} "
                                       f"({reader.commit[:12]}) of {root}", *reader.notes]))
    checkout = Checkout(root, reader.commit, Path(into), Path(into) / relative, reader.notes)
    fetch_named(reader, checkout.study, relative)
    link_untracked(reader, Path(into))
    return checkout


def fetch_named(reader: Reader, study: Path, relative: str) -> None:
    """The files the study (written out at `study`, `relative` in the repository) names."""
    from studyrun.study.loading import include_files
    from studyrun.study.source import read_yaml

    here = posixpath.dirname(relative)
    try:
        source = read_yaml(study)
    except StudyError:
        return  # comparing it says what is wrong with it
    data, model = source.data, source.data.get("model") if isinstance(source.data, dict) else None
    if isinstance(model, dict) and list(model) == ["file"] and isinstance(model["file"], str):
        if not inside(here, [model["file"]]):  # never show a file of this machine as the revision's
            raise StudyrunError(f"{relative} at {reader.revision}: model.file: "
                                f"{shorten(model['file'])!r} is outside the repository; studyrun "
                                "diff --rev reads only the repository's files of a revision")
        reader.fetch(inside(here, [model["file"]]))
        try:
            data = include_files(source).data
        except StudyError:
            pass  # a model file git does not track: the working tree's, linked in later
    if not isinstance(data, dict):
        return
    reader.fetch(inside(here, named(data)), folders=True)
    execution = data.get("execution")
    patterns = execution.get("depends_on") if isinstance(execution, dict) else None
    for pattern in patterns if isinstance(patterns, list) else []:
        if isinstance(pattern, str):
            reader.fetch_matching(here, pattern)
    model = data.get("model")
    if isinstance(model, dict) and model.get("type") == "python":
        reader.fetch_modules(here, str(model.get("function", "")).partition(":")[0])


def named(data: Any) -> list[str]:
    """Every string of the study that could name a file: each value, the part after an '='
    (`--input=data.csv`), with `{study_dir}/` taken off."""
    found, stack = [], [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and 0 < len(value) <= 4096:
            for text in (value, value.partition("=")[2]):
                if text:
                    found.append(text.replace("{study_dir}/", ""))
    return found


def inside(here: str, names: Iterable[str]) -> list[str]:
    """The names as paths from the repository's top (relative to the study's folder `here`),
    leaving out those outside it, absolute ones and those no file can have."""
    paths = []
    for name in names:
        if "\0" in name or "\n" in name or name.startswith("/"):
            continue
        path = posixpath.normpath(posixpath.join(here, name))
        if path != ".." and not path.startswith("../") and path != ".":
            paths.append(path)
    return list(dict.fromkeys(paths))


class Reader:
    """Reads files of one commit into a folder, each path once, within the bounds."""

    def __init__(self, root: Path, commit: str, into: Path, revision: str) -> None:
        self.root, self.commit, self.into, self.revision = root, commit, into, revision
        self.tried: set[str] = set()
        self.count = self.total = 0
        self.notes: list[str] = []

    def fetch(self, paths: Iterable[str], folders: bool = False) -> list[str]:
        """The files at these paths (with `folders`, a folder's files too) written out; the paths
        of those found."""
        new = [p for p in dict.fromkeys(paths) if p not in self.tried]
        self.tried.update(new)
        found = []
        for entry in entries(self.root, self.commit, new):
            if entry.type == "tree" and folders:
                found += [child.path for child in entries(self.root, self.commit, [f"{entry.path}/"])
                          if child.type != "tree" and self.save(child)]
            elif entry.type != "tree" and self.save(entry):
                found.append(entry.path)
        return found

    def save(self, entry: Entry) -> bool:
        """One file written out; a link or a submodule left out with a note."""
        if not entry.is_file:
            what = "a symbolic link" if entry.mode == "120000" else "a submodule"
            self.notes.append(f"{entry.path} is {what} at {self.revision}: not followed")
            return False
        parts = entry.path.split("/")
        if any(part in ("", ".", "..", ".git") for part in parts):
            raise StudyrunError(f"revision {self.revision} holds a path no file may have: "
                                f"{entry.path!r}")
        size = entry.size or 0
        self.count, self.total = self.count + 1, self.total + size
        if size > MAX_FILE:
            raise StudyrunError(f"{entry.path} at {self.revision} has {size:,} bytes; studyrun "
                                f"diff --rev reads files of at most {MAX_FILE // 2**20} MiB: "
                                "check the revision out and compare its results folder instead")
        if self.count > MAX_FILES or self.total > MAX_TOTAL:
            raise StudyrunError(f"the study at {self.revision} names more than {MAX_FILES:,} "
                                f"files or {MAX_TOTAL // 2**30} GiB, more than studyrun diff "
                                "--rev reads: check the revision out and compare its results "
                                "folder instead")
        target = self.into.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        save_blob(self.root, entry, target)
        if entry.mode == "100755":
            target.chmod(0o755)
        return True

    def fetch_matching(self, here: str, pattern: str) -> None:
        """The files a `depends_on` pattern matches: its folder's listing (names only) matched
        against it, `*` across folders too (a superset of what glob matches: the study's own
        check then globs the files written out)."""
        [path] = inside(here, [pattern]) or [None]
        if path is None:
            return
        if not MAGIC.search(path):
            self.fetch([path])
            return
        fixed = path[:MAGIC.search(path).start()].rpartition("/")[0]
        wanted = re.compile(glob_pattern(path))
        matches = (name for name in names_under(self.root, self.commit, fixed)
                   if wanted.fullmatch(name))
        batch: list[str] = []
        for name in matches:
            batch.append(name)
            if len(batch) == 1000:
                self.fetch(batch)
                batch = []
        self.fetch(batch)

    def fetch_modules(self, here: str, module: str) -> None:
        """A python model's module and the modules its import statements name, in turn, as far as
        the revision holds them in the study's folder; read, never imported."""
        from studyrun.models.imports import source_files

        if not all(part.isidentifier() for part in module.split(".")):
            return
        folder = self.into.joinpath(*here.split("/")) if here else self.into
        names = {module}
        while True:
            paths = [p for name in sorted(names) for p in inside(here, module_paths(name))]
            if not self.fetch(paths):
                return
            names = source_files(module, folder)[1]


def module_paths(module: str) -> list[str]:
    """Where a module's file could be, relative to a folder on sys.path: each package's
    __init__.py on the way, and the module's own file or package."""
    parts = module.split(".")
    paths = []
    for end in range(1, len(parts) + 1):
        stem = "/".join(parts[:end])
        paths += [f"{stem}/__init__.py", f"{stem}.py"]
    return paths


def glob_pattern(pattern: str) -> str:
    """A regular expression matching every path the glob could match (and a few more: `*`
    matches across folders and hidden files)."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern[i] == "*":
            out.append(".*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def link_untracked(reader: Reader, tree: Path) -> None:
    """Links into `tree` (a revision's files) what the working tree holds beside the revision's
    files in each folder written out (results folders, data left out of git), so that the
    revision's study finds them where the current one does. A file the revision holds but the
    study does not name stays out: it is not the revision's; so does compiled Python (a
    __pycache__ of the current modules)."""
    for here, folders, files in os.walk(tree):
        relative = Path(here).relative_to(tree)
        counterpart = reader.root / relative
        if not counterpart.is_dir():
            folders[:] = []
            continue
        written = set(folders) | set(files)
        others = {entry.name: entry.path for entry in os.scandir(counterpart)
                  if entry.name not in written and entry.name != "__pycache__"
                  and not (relative == Path(".") and entry.name == ".git")}
        prefix = "" if relative == Path(".") else f"{relative.as_posix()}/"
        tracked = present(reader.root, reader.commit, [prefix + name for name in others])
        for name, path in others.items():
            if prefix + name not in tracked:
                (Path(here) / name).symlink_to(path)
