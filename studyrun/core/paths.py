"""Whether a file lies in a folder once links are followed: the one check of it, for errors that
must not quote a private file and for the modules a python model imports."""

from __future__ import annotations

import os
from pathlib import Path


def within(path: str | Path, *folders: str | Path) -> bool:
    """True when `path`, links followed, is one of `folders` or lies under one, links followed
    too (a study's `../x`, or a link in it to /etc/passwd, is not); False for a path no file can
    have (a NUL byte)."""
    try:
        real = Path(os.path.realpath(path))
        # a folder that a real path lies under lexically is real itself: most calls stop here
        return (any(real.is_relative_to(folder) for folder in folders)
                or any(real.is_relative_to(os.path.realpath(folder)) for folder in folders))
    except (OSError, ValueError):
        return False
