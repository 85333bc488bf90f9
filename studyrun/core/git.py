"""Every call of git in studyrun, made so that the repository cannot run a program: `git_state`
(the commit and dirty flag of provenance) and the reads of a revision's files `studyrun diff
--rev` makes (`toplevel`, `resolve`, `entries`, `names_under`, `present`, `save_blob`). Nothing
else in the package starts git.

A repository's own configuration can name programs git runs: `git status` starts core.fsmonitor,
runs the post-index-change hook when it refreshes the index, and runs a clean filter
(filter.<driver>.clean or .process, chosen by .gitattributes) on every file whose stat data is
stale; a pager, an external diff or textconv, ssh or a transport (a lazy fetch in a partial clone)
can run too. Every call overrides each of those on its command line, which outranks every
configuration file, with the filter and diff drivers named in the configuration listed first; a
repository naming a driver whose name git cannot take on its command line is not read at all.
A filtered file whose stat data is stale is compared unfiltered, so it may show as dirty (a
false alarm, never a missed change of an unfiltered file). A revision given by a user is
resolved to a commit id first, and only that id reaches later calls: a text starting with '-'
is refused, so it is never read as an option (`--output=FILE`, `--remote=ext::...`).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from studyrun.core.errors import StudyrunError

TIMEOUT = 5  # seconds for each git call of provenance
READ_TIMEOUT = 60  # ... and for each read of a revision's files (a large tree, a large file)
SAFE_CONFIG = (
    ("core.fsmonitor", "false"), ("core.untrackedCache", "false"),
    ("core.hooksPath", os.devnull), ("core.pager", "cat"), ("diff.external", ""),
    ("core.sshCommand", ""), ("core.gitProxy", ""), ("core.askPass", ""),
    ("credential.helper", ""), ("protocol.allow", "never"), ("safe.bareRepository", "explicit"),
    ("status.submoduleSummary", "false"), ("submodule.recurse", "false"),
)
DRIVER_COMMANDS = {"filter": ("clean", "smudge", "process"), "diff": ("textconv", "command"),
                   "hook": ("command",)}  # hook.<name>.command: git 2.5x config hooks
SAFE_ENV = {"GIT_ALLOW_PROTOCOL": "none",  # no transport, whatever protocol.<name>.allow says
            "GIT_NO_LAZY_FETCH": "1", "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat", "GIT_LITERAL_PATHSPECS": "1"}  # a path is a path, never a glob
COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # SHA-1 or SHA-256
ARGV_BUDGET = 64 * 1024  # characters of paths per call


class GitError(StudyrunError):
    """git failed, is missing, took too long, or the repository cannot be read safely."""


def git(folder: Path, *args: str, timeout: float = TIMEOUT, output: IO[bytes] | None = None) -> str:
    """git's output in `folder` (or written to `output`), with every setting and driver that
    could run a program overridden; GitError if git fails."""
    base = safe_options()
    return call(folder, [*base, *driver_overrides(folder, base), *args], timeout, output)


def call(folder: Path, argv: list[str], timeout: float, output: IO[bytes] | None = None) -> str:
    """The one place git is started; the environment's GIT_* variables (a hook's GIT_DIR, a
    caller's GIT_CONFIG_PARAMETERS) are left out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | SAFE_ENV
    command = next((a for a in argv if not a.startswith("-") and "=" not in a), "")
    try:
        done = subprocess.run(["git", *argv], cwd=folder, env=env, stdin=subprocess.DEVNULL,
                              stdout=output if output is not None else subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise GitError(f"git {command} took more than {timeout:g} s in {folder}") from None
    except OSError as error:
        raise GitError(f"cannot run git in {folder}: {error.strerror or error} (is git "
                       "installed and on PATH?)") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git {command} failed in {folder}: "
                       f"{said[0] if said else f'exit status {done.returncode}'}")
    return "" if output is not None else done.stdout.decode(errors="surrogateescape")


def safe_options() -> list[str]:
    """`-c key=value` for each fixed setting that could run a program."""
    return ["--no-pager", "--no-optional-locks",
            *(arg for key, value in SAFE_CONFIG for arg in ("-c", f"{key}={value}"))]


def driver_overrides(folder: Path, base: list[str]) -> list[str]:
    """`-c` options emptying the command of every filter, diff and hook driver the
    configuration names (from any file it includes)."""
    listing = call(folder, base + ["config", "--list", "--null"], TIMEOUT)
    drivers = set()
    for entry in filter(None, listing.split("\0")):
        section, _, rest = entry.split("\n", 1)[0].partition(".")
        name = rest.rpartition(".")[0]
        if section in DRIVER_COMMANDS and name:
            drivers.add((section, name))
    if any("=" in name for _, name in drivers):  # `-c` splits at the first '=': cannot override
        raise GitError(f"the git configuration of {folder} names a filter, diff or hook driver "
                       "with '=' in its name, which git cannot be told not to run; it is not read")
    options = []
    for section, name in sorted(drivers):
        options += [f"{section}.{name}.{command}=" for command in DRIVER_COMMANDS[section]]
        if section == "filter":
            options.append(f"filter.{name}.required=false")
    return [arg for option in options for arg in ("-c", option)]


def git_state(folder: Path) -> dict[str, Any]:
    """{'commit': the HEAD commit or None (no repository, no commit, no git, a repository that
    cannot be read safely), 'dirty': whether a tracked file differs from HEAD, None when that
    cannot be read}."""
    try:
        commit = git(folder, "rev-parse", "--verify", "-q", "HEAD^{commit}").strip()
    except GitError:
        return {"commit": None, "dirty": None}
    try:
        changes = git(folder, "status", "--porcelain", "--untracked-files=no",
                      "--ignore-submodules=all")
    except GitError:
        return {"commit": commit, "dirty": None}
    return {"commit": commit, "dirty": bool(changes.strip())}


def toplevel(folder: Path) -> Path:
    """The top folder of the work tree holding `folder`."""
    return Path(git(folder, "rev-parse", "--show-toplevel", timeout=READ_TIMEOUT).rstrip("\n"))


def resolve(root: Path, revision: str) -> str:
    """The commit id a revision names: only this id, never the user's text, reaches later calls."""
    if not revision or revision.startswith("-") or "\0" in revision:
        raise GitError(f"{revision!r} is not a revision: give a branch, tag or commit "
                       "(git log --oneline lists commits); a revision cannot start with '-'")
    try:
        commit = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                     f"{revision}^{{commit}}", timeout=READ_TIMEOUT).strip()
    except GitError:
        commit = ""
    if not COMMIT.match(commit):
        raise GitError(f"{revision!r} names no commit in {root}: give a branch, tag or commit "
                       "(git log --oneline lists commits)")
    return commit


@dataclass(frozen=True)
class Entry:
    """One entry of a commit's tree: mode, type (blob, tree, commit), object id, size, path."""

    mode: str
    type: str
    oid: str
    size: int | None
    path: str

    @property
    def is_file(self) -> bool:
        return self.type == "blob" and self.mode in ("100644", "100755")


def entries(root: Path, commit: str, paths: Iterable[str]) -> list[Entry]:
    """The entries at these paths (relative to the top folder) of the commit; a path ending in
    '/' lists the entries of that folder; a path not in it gives none. Only these entries'
    objects are looked at."""
    found = []
    for batch in batches(paths):
        listing = git(root, "ls-tree", "-z", "-l", "--full-tree", commit, "--", *batch,
                      timeout=READ_TIMEOUT)
        for record in filter(None, listing.split("\0")):
            info, _, path = record.partition("\t")
            mode, kind, oid, size = info.split()
            found.append(Entry(mode, kind, oid, int(size) if size.isdigit() else None, path))
    return found


def present(root: Path, commit: str, paths: Iterable[str]) -> set[str]:
    """Which of these paths the commit holds (files or folders); no object is read."""
    found: set[str] = set()
    for batch in batches(paths):
        listing = git(root, "ls-tree", "-z", "--name-only", "--full-tree", commit, "--", *batch,
                      timeout=READ_TIMEOUT)
        found.update(filter(None, listing.split("\0")))
    return found


def names_under(root: Path, commit: str, folder: str) -> Iterator[str]:
    """The path of every file under `folder` ('' for all) in the commit, one at a time: the
    listing goes to a temporary file, not to memory, and no object but trees is read."""
    with tempfile.TemporaryFile() as listing:
        git(root, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit, "--",
            *([f"{folder}/"] if folder else []), timeout=READ_TIMEOUT, output=listing)
        listing.seek(0)
        rest = b""
        for block in iter(lambda: listing.read(1 << 16), b""):
            *records, rest = (rest + block).split(b"\0")
            yield from (r.decode(errors="surrogateescape") for r in records if r)
        if rest:
            yield rest.decode(errors="surrogateescape")


def save_blob(root: Path, entry: Entry, target: Path) -> None:
    """The file's content written to `target`, streamed (never held in memory), unfiltered."""
    with open(target, "wb") as handle:
        git(root, "cat-file", "blob", entry.oid, timeout=READ_TIMEOUT, output=handle)
    if entry.size is not None and target.stat().st_size != entry.size:
        raise GitError(f"git cat-file gave {target.stat().st_size:,} bytes of {entry.path}, "
                       f"not the {entry.size:,} its tree says")


def batches(paths: Iterable[str]) -> Iterator[list[str]]:
    """Paths in groups that fit on one command line."""
    batch: list[str] = []
    size = 0
    for path in paths:
        if batch and size + len(path) > ARGV_BUDGET:
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += len(path) + 1
    if batch:
        yield batch
