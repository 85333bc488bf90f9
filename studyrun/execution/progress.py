"""A progress line with rate and ETA on a terminal; silent without one or with --quiet."""

from __future__ import annotations

import sys
import time


class Progress:
    """Counts finished runs and redraws one stderr line at most a few times a second."""

    def __init__(self, total: int, already: int = 0, enabled: bool = True) -> None:
        self.total, self.done, self.failed = total, already, 0
        self.enabled = enabled and sys.stderr.isatty()
        self.start = time.perf_counter()
        self.first = already
        self.last_draw = 0.0

    def update(self, finished: int, failed: int = 0) -> None:
        self.done += finished
        self.failed += failed
        now = time.perf_counter()
        if self.enabled and (now - self.last_draw > 0.2 or self.done >= self.total):
            self.last_draw = now
            self.draw(now)

    def draw(self, now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = (self.done - self.first) / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        eta = f"ETA {left:.0f}s" if left != float("inf") else "ETA ?"
        failed = f"  {self.failed} failed" if self.failed else ""
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} runs"
                         f"  {rate:,.0f}/s  {eta}{failed}   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            self.draw(time.perf_counter())
            sys.stderr.write("\n")
