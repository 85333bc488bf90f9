"""Time-resolved Sobol' indices of series too large to hold at once: the estimators of
`analyse_series`, summed over chunks of whole Saltelli blocks in one pass.

S1 = mean(B (AB_j - A)) / V and ST = mean((A - AB_j)^2) / 2V are unchanged by standardising the
output, so the sums are taken of the values less a shift (the first chunk's mean at each time,
which keeps them well conditioned) and the overall mean enters at the end.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from studyrun.analyses.salib import (
    MIN_BLOCKS,
    dropped_warning,
    error_entry,
    failed_rows,
    keep_whole_blocks,
)
from studyrun.core.design import Outcome
from studyrun.core.numbers import finite_or_none


class StreamedIndices:
    """Sums over the kept blocks of one series, chunk by chunk, for its S1 and ST at every time."""

    def __init__(self, name: str, info: dict[str, Any]) -> None:
        self.name, self.block, self.factors = name, info["block"], len(info["factors"])
        self.info = info
        self.kept = self.dropped = 0
        self.seen = self.succeeded = self.given = False  # the series, a succeeded run, one
        # that gave the series (else the model has no such output)
        self.shift: np.ndarray | None = None
        self.sums: dict[str, np.ndarray] = {}

    def add(self, chunk: Outcome) -> None:
        series = chunk.series.get(self.name)
        if series is None:
            return
        ok = np.asarray(chunk.ok, bool)
        self.seen, self.succeeded = True, self.succeeded or bool(ok.any())
        if not self.given:
            self.given = bool(np.isfinite(series[ok]).any())
        keep, dropped = keep_whole_blocks(failed_rows(chunk, self.name, series), self.block)
        self.dropped += dropped
        u = series[keep].reshape(-1, self.block, series.shape[1])  # a copy: shifted in place
        if not len(u):
            return
        if self.shift is None:
            self.shift = u.mean(axis=(0, 1))
        self.kept += len(u)
        self._add("top", np.maximum(u.max(axis=(0, 1)), -u.min(axis=(0, 1))), np.maximum)
        u -= self.shift
        a, b = u[:, 0], u[:, -1]
        self._add("all", u.sum(axis=(0, 1)))
        self._add("all2", np.einsum("rbt,rbt->t", u, u))
        self._add("ends", a.sum(axis=0) + b.sum(axis=0))
        self._add("ends2", np.einsum("rt,rt->t", a, a) + np.einsum("rt,rt->t", b, b))
        for j in range(self.factors):  # a factor at a time: temporaries of one run per block
            step = u[:, 1 + j] - a
            self._add(f"step{j}", step.sum(axis=0))
            self._add(f"b_step{j}", np.einsum("rt,rt->t", b, step))
            self._add(f"step2{j}", np.einsum("rt,rt->t", step, step))

    def _add(self, key: str, value: np.ndarray, merge=np.add) -> None:
        self.sums[key] = value if key not in self.sums else merge(self.sums[key], value)

    def result(self, time: np.ndarray | None, notes: list[str]) -> dict[str, Any]:
        """The entry `analyse_series` gives, from the sums."""
        if not self.seen or (self.succeeded and not self.given):  # as missing_series
            return error_entry(f"no run gave a time series named {self.name!r}: it is not an "
                               "output of the model; name one of the model's outputs in `outputs:`")
        kept, dropped = self.kept, self.dropped
        facts = {"effective_N": kept, "dropped_blocks": dropped,
                 "dropped_runs": dropped * self.block}
        if kept < MIN_BLOCKS:
            return error_entry(f"only {kept} base samples have every run of their block "
                               f"succeeded; at least {MIN_BLOCKS} are needed", **facts)
        s = self.sums
        runs = kept * self.block
        offset = s["all"] / runs  # the overall mean, less the shift
        spread = np.sqrt(np.maximum(s["all2"] / runs - offset**2, 0.0))
        variance = s["ends2"] / (2 * kept) - (s["ends"] / (2 * kept)) ** 2
        step, b_step, step2 = (np.array([s[f"{key}{j}"] for j in range(self.factors)])
                               for key in ("step", "b_step", "step2"))
        with np.errstate(invalid="ignore", divide="ignore"):
            s1 = (b_step - offset * step) / kept / variance
            st = 0.5 * step2 / kept / variance
        flat = ~(spread > np.finfo(float).eps * np.maximum(1.0, s["top"]))
        s1[..., flat] = np.nan
        st[..., flat] = np.nan
        factors = self.info["factors"]
        steps = np.arange(len(offset)) if time is None else np.asarray(time)
        entry = {"time": [float(t) for t in steps],
                 "S1": {f: [finite_or_none(v) for v in s1[j]] for j, f in enumerate(factors)},
                 "ST": {f: [finite_or_none(v) for v in st[j]] for j, f in enumerate(factors)},
                 **facts,
                 "warnings": [dropped_warning(dropped, "blocks of base samples", kept)]
                 if dropped else []}
        if notes:
            entry["warnings"] = notes + entry["warnings"]
        return entry


def streamed_series(chunks: Iterable[Outcome], names: list[str],
                    info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each named series' time-resolved entry, from chunks of whole blocks in plan order."""
    sums = {name: StreamedIndices(name, info) for name in names}
    time, notes = None, []
    for chunk in chunks:
        time, notes = chunk.time, chunk.series_notes
        for indices in sums.values():
            indices.add(chunk)
        del chunk  # before the next chunk is read
    return {name: indices.result(time, notes) for name, indices in sums.items()}
