"""Runs' series in the run store: compressed blocks of runs x points, written a batch at a time.

A block holds the series of some runs of one batch that share a grid: their ids, the grid, and
per output one (runs, points) float64 array, encoded losslessly (int64 second differences of the
values' bits along time, bytes shuffled, deflated: a smooth series takes 3-5 bytes a value, noise
about 7) and read back bit for bit. A run's latest block holds its series. Workers pack the blocks
(`pack`), so what crosses to the driver is compressed already.
"""

from __future__ import annotations

import sqlite3
import zlib
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from studyrun.core.batch import ModelOutput
from studyrun.core.errors import StoreError

CODEC = "d2-shuffle-deflate"
BLOCK_BYTES = 8 << 20  # raw bytes of one output's array in a block, at most (one run at least)
TIME = "time"  # the grid's row among a block's outputs (no output may take this name)

Stored = dict[str, np.ndarray]  # one run's series by output, and its grid as "time"


@dataclass
class Block:
    """The series of some runs sharing a grid, encoded: what a batch sends back and the store keeps."""

    ids: np.ndarray  # int64 (runs,)
    points: int
    data: dict[str, bytes]  # output (and "time": the grid, one row) -> encoded values


def encode(values: np.ndarray) -> bytes:
    """A (runs, points) float64 array as bytes: second differences of the int64 bit patterns
    along each row (wrapping: exactly undone by two cumulative sums), little-endian bytes shuffled
    so that the k-th bytes of every value lie together, deflated."""
    bits = np.ascontiguousarray(values, dtype="<f8").view("<i8")
    residue = np.diff(np.diff(bits, axis=-1, prepend=0), axis=-1, prepend=0)
    shuffled = np.ascontiguousarray(residue.view(np.uint8).reshape(-1, 8).T)
    packer = zlib.compressobj(1, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    return packer.compress(shuffled.data) + packer.flush()


def decode(data: bytes, runs: int, points: int) -> np.ndarray:
    """The (runs, points) float64 array `encode` was given, bit for bit."""
    shuffled = np.frombuffer(zlib.decompress(data), dtype=np.uint8).reshape(8, runs * points)
    residue = np.ascontiguousarray(shuffled.T).view("<i8").reshape(runs, points)
    bits = np.cumsum(np.cumsum(residue, axis=-1), axis=-1)
    return bits.view("<f8")


def pack(out: ModelOutput, run_ids: np.ndarray, outputs: Iterable[str] | None = None) -> list[Block]:
    """A batch's series as blocks of at most BLOCK_BYTES an output, by grid; only the named
    outputs (None: every one). A run in no group of series (a failed one) gets no block."""
    wanted = None if outputs is None else set(outputs)
    blocks = []
    for group in out.series_groups():
        names = sorted(n for n in group.series if wanted is None or n in wanted)
        with_grid = group.time is not None and (names or wanted is None or TIME in wanted)
        if not names and not with_grid:  # (`series(time)` keeps the grid alone)
            continue
        ids = np.asarray(run_ids, dtype=np.int64)[group.rows]
        points = (np.shape(group.series[names[0]])[1] if names
                  else 0 if group.time is None else len(group.time))
        step = max(1, BLOCK_BYTES // (8 * max(points, 1)))
        grid = encode(np.asarray(group.time, float)[None, :]) if with_grid else None
        for start in range(0, len(ids), step):
            data = {name: encode(np.asarray(group.series[name])[start:start + step])
                    for name in names}
            if grid is not None:
                data[TIME] = grid
            blocks.append(Block(ids[start:start + step], points, data))
    return blocks


def create(db: sqlite3.Connection) -> None:
    """The tables of blocks: a row per block (its runs) and one per block and output."""
    db.execute("CREATE TABLE IF NOT EXISTS series_blocks (block INTEGER PRIMARY KEY, "
               "ids BLOB NOT NULL, points INTEGER NOT NULL, codec TEXT NOT NULL)")
    db.execute("CREATE TABLE IF NOT EXISTS series_values (block INTEGER NOT NULL, "
               "output TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (block, output))")


def write(db: sqlite3.Connection, blocks: list[Block]) -> None:
    """Append blocks, inside the caller's transaction (a batch's runs and series commit together)."""
    create(db)
    for block in blocks:
        cursor = db.execute("INSERT INTO series_blocks (ids, points, codec) VALUES (?, ?, ?)",
                            (np.asarray(block.ids, "<i8").tobytes(), block.points, CODEC))
        db.executemany("INSERT INTO series_values VALUES (?, ?, ?)",
                       [(cursor.lastrowid, name, data) for name, data in block.data.items()])


def extract(db: sqlite3.Connection, run_ids: np.ndarray) -> list[Block]:
    """The blocks of these runs' series, to copy into another store: blocks as stored, narrowed
    to these runs (re-encoded only where a block holds others too)."""
    run_ids = np.asarray(run_ids, dtype=np.int64)
    reader = Reader(db)
    blocks, rows, found = reader.locate(run_ids)
    out = []
    for block in np.unique(blocks[found]).tolist():
        mine = found & (blocks == block)
        ids, points, _ = reader.blocks[block]
        if np.array_equal(np.sort(run_ids[mine]), np.sort(ids)):  # the whole block: as it is
            data = dict(db.execute("SELECT output, data FROM series_values WHERE block = ?",
                                   (block,)))
            out.append(Block(ids, points, data))
            continue
        picked = rows[mine]
        arrays = reader.decoded(block, None)
        out.append(Block(ids[picked], points, {
            name: encode(values[None, :] if name == TIME else values[picked])
            for name, values in arrays.items()}))
    return out


class Reader:
    """Reads runs' series from a store: which block and row holds each run's latest series is
    kept in memory (from the blocks' ids), brought up to date with the blocks written since
    before each read; a read decodes each block it touches once."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.blocks: dict[int, tuple[np.ndarray, int, str]] = {}
        self._ids = self._blocks = self._rows = np.zeros(0, np.int64)
        self.refresh()

    def refresh(self) -> None:
        """Take in the blocks written since the last look."""
        tables = {row[0] for row in self.db.execute("SELECT name FROM sqlite_master "
                                                    "WHERE type = 'table'")}
        if "series_blocks" not in tables:
            return
        parts = [(self._ids, self._blocks, self._rows)]
        for block, ids, points, codec in self.db.execute(
                "SELECT block, ids, points, codec FROM series_blocks WHERE block > ? ORDER BY block",
                (max(self.blocks, default=0),)):
            self.blocks[block] = (np.frombuffer(ids, "<i8").astype(np.int64), points, codec)
            parts.append((self.blocks[block][0], np.full(len(self.blocks[block][0]), block),
                          np.arange(len(self.blocks[block][0]))))
        if len(parts) == 1:
            return
        ids, blocks, rows = (np.concatenate([p[k] for p in parts]) for k in range(3))
        order = np.lexsort((blocks, ids))  # by id, the latest block last
        ids, blocks, rows = ids[order], blocks[order], rows[order]
        last = np.r_[ids[1:] != ids[:-1], True] if len(ids) else np.zeros(0, bool)
        self._ids, self._blocks, self._rows = ids[last], blocks[last], rows[last]

    def longest(self) -> int:
        """The most points a stored series has (0 for a store of none)."""
        self.refresh()
        return max((points for _, points, _ in self.blocks.values()), default=0)

    def locate(self, run_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(block, row, found) of each run's latest series."""
        self.refresh()
        run_ids = np.asarray(run_ids, dtype=np.int64)
        if not len(self._ids):
            zeros = np.zeros(len(run_ids), np.int64)
            return zeros, zeros, np.zeros(len(run_ids), bool)
        at = np.minimum(np.searchsorted(self._ids, run_ids), len(self._ids) - 1)
        found = self._ids[at] == run_ids
        return self._blocks[at], self._rows[at], found

    def decoded(self, block: int, outputs: set[str] | None) -> dict[str, np.ndarray]:
        """A block's arrays (the grid as "time", shape (points,)), the named outputs only."""
        ids, points, codec = self.blocks[block]
        if codec != CODEC:
            raise StoreError(f"series block {block} is in a format this studyrun cannot read "
                             f"({codec}); a newer studyrun wrote it")
        arrays = {}
        for name, data in self.db.execute("SELECT output, data FROM series_values WHERE block = ?",
                                          (block,)):
            if name == TIME:
                arrays[name] = decode(data, 1, points)[0]
            elif outputs is None or name in outputs:
                arrays[name] = decode(data, len(ids), points)
        return arrays

    def read(self, run_ids: np.ndarray, outputs: Iterable[str] | None = None) -> list[Stored | None]:
        """Each run's series ({output: values, "time": grid}; the named outputs only), in the
        order asked; None where the store holds none. Values are views of the decoded blocks."""
        run_ids = np.asarray(run_ids, dtype=np.int64)
        wanted = None if outputs is None else set(outputs)
        blocks, rows, found = self.locate(run_ids)
        result: list[Stored | None] = [None] * len(run_ids)
        for block in np.unique(blocks[found]).tolist():
            arrays = self.decoded(block, wanted)
            for i in np.flatnonzero(found & (blocks == block)).tolist():
                row = rows[i]
                result[i] = {name: values if name == TIME else values[row]
                             for name, values in arrays.items()}
        return result

    def grids(self, run_ids: np.ndarray) -> list[np.ndarray | None]:
        """Each run's grid alone (None: no series, or none with a grid): cheap, a grid a block."""
        run_ids = np.asarray(run_ids, dtype=np.int64)
        blocks, _, found = self.locate(run_ids)
        grids: dict[int, np.ndarray | None] = {}
        for block in np.unique(blocks[found]).tolist():
            row = self.db.execute("SELECT data FROM series_values WHERE block = ? AND output = ?",
                                  (block, TIME)).fetchone()
            grids[block] = None if row is None else decode(row[0], 1, self.blocks[block][1])[0]
        return [grids[b] if f else None for b, f in zip(blocks.tolist(), found.tolist())]
