"""A read-only look at a results folder's run store, without its lock: what `status`, `runs` and
`plan` read while a study runs (WAL lets a reader see every committed batch, never half of one).
"""

from __future__ import annotations

from pathlib import Path

from studyrun.core.errors import StoreError
from studyrun.store.run_store import RunStore

MASK = 2**64 - 1


def run_name(run_id: int) -> str:
    """A run's identity as its working directory names it: 16 hex digits."""
    return f"{int(run_id) & MASK:016x}"


class StoreView:
    """A read-only look at a results folder's run store."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / "runs.sqlite"
        self.store = RunStore.open_readonly(self.path)
        if self.store.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
            self.store.close()
            raise StoreError(f"{self.path}: holds no runs yet")
        self.meta = {key: self.store.meta(key) for (key,) in
                     self.store.db.execute("SELECT key FROM meta").fetchall()}

    def close(self) -> None:
        self.store.close()
