"""Provenance for analysis.json: versions, the study file's hash, git state, seed and times."""

from __future__ import annotations

import functools
import hashlib
import platform
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from studyrun.core.git import git_state

PACKAGES = ("numpy", "scipy", "SALib", "statsmodels", "pandas", "dask", "distributed", "pydantic",
            "PyYAML", "matplotlib", "pydoe")


def now() -> str:
    """The current UTC time in ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def package_versions(more: tuple[str, ...] = ()) -> dict[str, str]:
    """Installed versions of the libraries a result depends on, and of `more` (the model's:
    pysd), without importing them."""
    versions = {}
    for name in PACKAGES + more:
        version = installed_version(name)
        if version is not None:
            versions[name] = version
    return versions


def studyrun_version() -> str:
    return installed_version("studyrun") or "0.1.0"


@functools.cache
def installed_version(name: str) -> str | None:
    """The installed version of a distribution, or None; read once a process, from the
    metadata's header lines (metadata.version parses the whole file as an e-mail: 1 ms a
    package, a tenth of a small study's cost)."""
    try:
        found = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    for line in (found.read_text("METADATA") or found.read_text("PKG-INFO") or "").splitlines():
        if not line:  # the headers end at the first blank line
            break
        if line.startswith("Version:"):
            return line[len("Version:"):].strip()
    return found.version


def collect(study_file: Path, seed: int, started: str, packages: tuple[str, ...] = ()) -> dict:
    """The provenance block of analysis.json; `packages`, those the model needs besides."""
    return {
        "studyrun": studyrun_version(),
        "python": platform.python_version(),
        "packages": package_versions(packages),
        "study_file": str(study_file.resolve()),
        "study_sha256": hashlib.sha256(study_file.read_bytes()).hexdigest(),
        "git": git_state(study_file.resolve().parent),
        "seed": seed,
        "started": started,
        "finished": now(),
    }
