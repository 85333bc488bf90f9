"""A read-only look at a results folder's run store, without its lock: what `status`, `runs` and
`plan` read while a study runs (WAL lets a reader see every committed batch, never half of one).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from .core.errors import StoreError
from .store import connect_readonly, unreadable

MASK = 2**64 - 1


def run_name(run_id: int) -> str:
    """A run's identity as its working directory names it: 16 hex digits."""
    return f"{int(run_id) & MASK:016x}"


class StoreView:
    """A read-only look at a results folder's run store."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / "runs.sqlite"
        self.db = connect_readonly(self.path)
        try:
            self.meta = {key: json.loads(value) for key, value in
                         self.db.execute("SELECT key, value FROM meta")}
        except sqlite3.DatabaseError as error:
            self.db.close()
            if "no such table: meta" in str(error):
                raise StoreError(f"{self.path}: holds no runs yet") from None
            raise unreadable(self.path, error) from None

    def query(self, sql: str, arguments: tuple = ()) -> list[tuple]:
        try:
            return self.db.execute(sql, arguments).fetchall()
        except sqlite3.DatabaseError as error:
            if "no such table: runs" in str(error):
                return []
            raise unreadable(self.path, error) from None

    def close(self) -> None:
        self.db.close()
