"""The study's own modules are compiled from their source on every import, never read from
bytecode: Python reuses a `__pycache__` file while the source's modification time (in whole
seconds) and size match the ones it recorded, so a module edited in place within a second and to
the same size would run its old code under its new identity. "The study's own" is what a run's
identity hashes (models/imports.py): every module whose file lies outside the installed folders.
No bytecode is written for them either. This file imports nothing of studyrun: a fresh
interpreter loads it on its own (models/imports.py).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from contextlib import contextmanager
from typing import Iterator


class SourceOnly(importlib.machinery.SourceFileLoader):
    """A source file's loader that compiles the file it reads and caches nothing."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


class SourceFinder(importlib.abc.MetaPathFinder):
    """Finds a module as the finders after it do, then gives it a SourceOnly loader when it is
    a source file outside the folders `installed` (real paths)."""

    def __init__(self, installed: tuple[str, ...]) -> None:
        self.installed = installed

    def find_spec(self, name, path, target=None):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if type(loader) is not importlib.machinery.SourceFileLoader or self.inside(loader.path):
            return spec
        spec.loader = SourceOnly(loader.name, loader.path)
        spec.cached = None
        return spec

    def inside(self, path: str) -> bool:
        """core/paths.within for real folders, here since this file imports nothing of studyrun."""
        real = os.path.realpath(path)
        return any(real == folder or real.startswith(folder + os.sep) for folder in self.installed)


@contextmanager
def compiled_from_source(installed: tuple[str, ...]) -> Iterator[None]:
    """While it lasts, the modules imported from outside `installed` are compiled from source."""
    finder = SourceFinder(installed)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
