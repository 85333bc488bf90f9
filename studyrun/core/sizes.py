"""Memory sizes: parsing them as a study writes them (`512MB`, `2GiB`, bytes), and the memory a
study's analysis may count on, against which every analysis's sizes are checked at validate."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from studyrun.core.errors import Problem, StudyError

_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_BYTES = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(|b|[kmgt]i?b?)\s*$", re.IGNORECASE)
MAX_BYTES = 2**63 - 1  # what setrlimit takes
MEMORY_SHARE = 0.8  # of the machine's memory, what an analysis may count on
MEMORY_VARIABLE = "STUDYRUN_MEMORY_LIMIT"


def parse_bytes(text: str | int) -> int:
    """Bytes in `512MB`, `2GiB`, `1e9`-free integer text, or an int; ValueError if malformed."""
    if isinstance(text, int) and not isinstance(text, bool):
        number, unit = (float(text) if abs(text) <= MAX_BYTES else math.inf), ""
    else:
        match = _BYTES.match(str(text))
        if not match:
            raise ValueError(f"not a memory size: {text!r} (try '512MB' or '2GiB')")
        number, unit = float(match[1]), match[2].lower().removesuffix("b")
    try:
        size = int(number * _UNITS[unit])
    except (OverflowError, ValueError):  # a number beyond float64 (inf)
        size = MAX_BYTES + 1
    if size <= 0:
        raise ValueError(f"must be positive; got {text!r}")
    if size > MAX_BYTES:
        raise ValueError(f"too large: {str(text)[:40]!r} is more than 2**63 bytes")
    return size


def human(size: float) -> str:
    """Bytes as a message gives them: '805 GiB', '1.2 GiB', '96 MiB'."""
    if size >= 2**70:
        return "1,024 EiB or more"
    for unit, scale in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30),
                        ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            value = size / scale
            return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"
    return f"{size:.0f} bytes"


def machine_memory() -> tuple[int, str]:
    """This machine's memory and what it is: the physical memory, or less where this process's
    cgroup (a container, a SLURM job) or `ulimit -v` allows less."""
    found = [(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's")]
    cgroup = _cgroup_limit()
    if cgroup:
        found.append((cgroup, "this process's cgroup's"))
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            found.append((soft, "`ulimit -v`'s"))
    except (ImportError, OSError, ValueError):
        pass
    return min(found)


def _cgroup_limit() -> int | None:
    """cgroup v2's memory.max for this process (None where there is none or it is `max`)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        where = next(line[3:] for line in lines if line.startswith("0::"))
        text = (Path("/sys/fs/cgroup") / where.lstrip("/") / "memory.max").read_text().strip()
        return int(text) if text.isdigit() else None
    except (OSError, StopIteration, ValueError):
        return None


def memory_limit() -> tuple[int, str]:
    """The bytes an analysis may count on and whence: STUDYRUN_MEMORY_LIMIT when set, else
    MEMORY_SHARE of the machine's memory. A malformed variable is an error (exit 2)."""
    text = os.environ.get(MEMORY_VARIABLE, "").strip()
    if text:
        try:
            return parse_bytes(text), f"{MEMORY_VARIABLE}={text}"
        except ValueError as error:
            raise StudyError(f"{MEMORY_VARIABLE}: {error}") from None
    memory, what = machine_memory()
    return int(MEMORY_SHARE * memory), (f"{MEMORY_SHARE:.0%} of {what} {human(memory)}; "
                                        f"set {MEMORY_VARIABLE}, e.g. to 64GB, for another")


@dataclass(frozen=True)
class Footprint:
    """The memory an analysis's sizes imply: `bytes_at(size)` for the size its study sets at
    `key` (its other sizes as the study has them), and what those bytes hold, in words."""

    key: str  # the analysis's key that sets `size`, e.g. "samples", "population"
    size: int
    counts: str  # what `size` counts, e.g. "training runs"
    bytes_at: Callable[[int], float]  # grows with the size
    holds: str  # e.g. "the GP's kernel matrices and their gradients, 24 bytes x samples^2 x 10"
    otherwise: str = ""  # another way out, e.g. ", or use method: pce"
    allowed: Callable[[int], int] | None = None  # the largest size the key takes up to a size
    lower: str = ""  # how to lower the size, where not by lowering the key's number

    @property
    def bytes(self) -> int:
        return int(self.bytes_at(self.size))

    def largest_fitting(self, limit: int) -> int:
        """The largest size whose bytes are at most `limit` (0 where none is)."""
        low, high = 0, self.size  # bytes_at(high) > limit
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if self.bytes_at(middle) <= limit else (low, middle)
        return self.allowed(low) if self.allowed and low else low

    def describe(self) -> str:
        """What `studyrun plan` says of it: 'about 1.2 GiB for 400 training runs (...)'."""
        return f"about {human(self.bytes)} for {self.size:,} {self.counts} ({self.holds})"


def memory_problem(footprint: Footprint) -> Problem | None:
    """The problem, at the footprint's key, of sizes that need more memory than the limit."""
    limit, whence = memory_limit()
    need = footprint.bytes
    if need <= limit:
        return None
    fits = footprint.largest_fitting(limit)
    lower = (f"{footprint.lower or f'lower {footprint.key}'} (at most {fits:,} "
             f"{footprint.counts} fit)" if fits else "run it on a machine with more memory")
    return Problem(f"{footprint.size:,} {footprint.counts} need about {human(need)} of memory "
                   f"({footprint.holds}), more than the {human(limit)} an analysis may use here "
                   f"({whence}); {lower}{footprint.otherwise}", path=footprint.key)
