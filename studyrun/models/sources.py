"""The study's own modules are compiled from their source on every import, never read from
bytecode: Python reuses a `__pycache__` file while the source's modification time (in whole
seconds) and size match the ones it recorded, so a module edited in place within a second and to
the same size would run its old code under its new identity. No bytecode is written for them
either. This file imports nothing of studyrun: a fresh interpreter loads it on its own
(models/imports.py).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading


class SourceOnly(importlib.machinery.SourceFileLoader):
    """A source file's loader that compiles the file it reads and caches nothing."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


class SourceFinder(importlib.abc.MetaPathFinder):
    """Finds a module as the finders after it do, then gives a source file's module a
    SourceOnly loader: the modules named in `names`, or with `names` None every module whose
    file lies outside the folders `installed`."""

    def __init__(self, names: set[str] | None = None, installed: tuple[str, ...] = ()) -> None:
        self.names, self.installed = names, installed

    def find_spec(self, name, path, target=None):
        if self.names is not None and name not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if type(loader) is not importlib.machinery.SourceFileLoader or (
                self.names is None and _inside(loader.path, self.installed)):
            return spec
        spec.loader = SourceOnly(loader.name, loader.path)
        spec.cached = None
        return spec


def _inside(path: str, folders: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    return any(real == folder or real.startswith(folder + os.sep) for folder in folders)


_FINDER = SourceFinder(set())
_LOCK = threading.Lock()


def from_source(names) -> None:
    """Import these modules (by their full names) from their source from now on, in this
    process; a module already imported is not touched (drop it from sys.modules to re-import)."""
    with _LOCK:
        _FINDER.names.update(names)
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
