"""The commit and dirty flag of the git repository holding a study, read without letting the
repository run any program.

A repository's own configuration can name programs git runs: `git status` starts core.fsmonitor,
runs the post-index-change hook when it refreshes the index, and runs a clean filter
(filter.<driver>.clean or .process, chosen by .gitattributes) on every file whose stat data is
stale; a pager, an external diff or textconv, ssh or a transport (a lazy fetch in a partial clone)
can run too. Every git call here overrides each of those on its command line, which outranks
every configuration file, with the filter and diff drivers named in the configuration listed
first. A driver whose name git cannot take on its command line leaves the dirty flag unknown
(None) rather than run status. A filtered file whose stat data is stale is compared unfiltered,
so it may show as dirty (a false alarm, never a missed change of an unfiltered file).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TIMEOUT = 5  # seconds for each git call
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
            "GIT_PAGER": "cat"}


def git_state(folder: Path) -> dict:
    """{'commit': the HEAD commit or None (no repository, no commit, no git), 'dirty': whether a
    tracked file differs from HEAD, None when that cannot be read safely}."""
    base = safe_options()
    commit = run_git(folder, base + ["rev-parse", "--verify", "-q", "HEAD^{commit}"])
    if not commit:
        return {"commit": None, "dirty": None}
    drivers = driver_overrides(folder, base)
    if drivers is None:
        return {"commit": commit, "dirty": None}
    changes = run_git(folder, base + drivers + ["status", "--porcelain", "--untracked-files=no",
                                                "--ignore-submodules=all"])
    return {"commit": commit, "dirty": None if changes is None else bool(changes)}


def safe_options() -> list[str]:
    """`-c key=value` for each fixed setting that could run a program."""
    return ["--no-pager", "--no-optional-locks",
            *(arg for key, value in SAFE_CONFIG for arg in ("-c", f"{key}={value}"))]


def driver_overrides(folder: Path, base: list[str]) -> list[str] | None:
    """`-c` options emptying the command of every filter, diff and hook driver the
    configuration names (from any file it includes); None if one cannot be overridden."""
    listing = run_git(folder, base + ["config", "--list", "--null"], strip=False)
    if listing is None:
        return None
    drivers = set()
    for entry in filter(None, listing.split("\0")):
        section, _, rest = entry.split("\n", 1)[0].partition(".")
        name = rest.rpartition(".")[0]
        if section in DRIVER_COMMANDS and name:
            drivers.add((section, name))
    if any("=" in name for _, name in drivers):  # `-c` splits at the first '=': cannot override
        return None
    options = []
    for section, name in sorted(drivers):
        options += [f"{section}.{name}.{command}=" for command in DRIVER_COMMANDS[section]]
        if section == "filter":
            options.append(f"filter.{name}.required=false")
    return [arg for option in options for arg in ("-c", option)]


def run_git(folder: Path, args: list[str], strip: bool = True) -> str | None:
    """git's output in `folder`, or None if git is missing, fails or takes too long; the
    environment's GIT_* variables (a hook's GIT_DIR, a caller's -c) are left out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | SAFE_ENV
    try:
        done = subprocess.run(["git", *args], cwd=folder, env=env, capture_output=True,
                              stdin=subprocess.DEVNULL, text=True, errors="replace",
                              timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() if strip else done.stdout
