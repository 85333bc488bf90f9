"""The cost of model runs against observed data, FME's modCost (Soetaert & Petzoldt 2010;
docs/methods.md, "The cost of a model against data"), for a whole batch of runs at once.

Per observed variable j: the model output linearly interpolated at the observations' x, the
residuals r = mod - obs, the errors err (the err column, or 1, sd(obs) or mean|obs| by `weight`),
the weighted residuals w = r / err, SSR_j = sum w^2, SSR_unweighted_j = sum r^2, N_j, and
scale_j = 1 or 1/N_j (`scale_var`: the FME manual's reading; FME's code divides by N_j^3 and its
Marquardt fit ignores the option, see the docs). The model cost is sum_j scale_j SSR_j; minlogp is
sum [w^2/2 + log err + log(2 pi)/2]. Several data blocks add up, their tables concatenated; a
variable observed in more than one block is listed once per block, as `name`, `name[2]`, ...
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from studyrun.analyses.calibrate.data import Observations

FAILED_RESIDUAL = 1e8  # weighted residual given to every point of a failed run, so fits avoid it


@dataclass
class Term:
    """One variable of one data block, ready to be compared with model output."""

    key: str  # its name in the results: the label, or label[k] when repeated
    output: str
    file: str
    x: np.ndarray
    obs: np.ndarray
    err: np.ndarray
    scale: float
    start: int  # its slice in the concatenated residual vector
    stop: int

    @property
    def n(self) -> int:
        return len(self.x)


@dataclass
class Costs:
    """The cost pieces of k runs: arrays with one row per run."""

    mod: np.ndarray  # (k, N) model at the observations
    res: np.ndarray  # (k, N) mod - obs
    wres: np.ndarray  # (k, N) (mod - obs) / err
    ssr: np.ndarray  # (k, terms) weighted
    ssr_unweighted: np.ndarray  # (k, terms)
    cost: np.ndarray  # (k,) model cost
    minlogp: np.ndarray  # (k,)
    ok: np.ndarray  # (k,) every interpolated value finite

    def vector(self, scales: np.ndarray) -> np.ndarray:
        """Residuals whose sum of squares is the model cost, for least squares; huge where a
        run failed."""
        out = self.wres * np.sqrt(scales)
        return np.where(np.isfinite(out), out, FAILED_RESIDUAL)


class CostFunction:
    """modCost against every data block, vectorized over runs."""

    def __init__(self, data: list[Observations]) -> None:
        self.terms: list[Term] = []
        seen: dict[str, int] = {}
        start = 0
        for block in data:
            for v in block.variables:
                seen[v.label] = seen.get(v.label, 0) + 1
                key = v.label if seen[v.label] == 1 else f"{v.label}[{seen[v.label]}]"
                err = v.err if v.err is not None else np.full(len(v.obs), weight_of(v.obs, block.block.weight))
                scale = 1.0 / len(v.x) if block.block.scale_var else 1.0
                self.terms.append(Term(key, v.output, block.file, v.x, v.obs, err, scale,
                                       start, start + len(v.x)))
                start += len(v.x)
        self.n = start
        self.obs = np.concatenate([t.obs for t in self.terms])
        self.err = np.concatenate([t.err for t in self.terms])
        self.scales = np.concatenate([np.full(t.n, t.scale) for t in self.terms])
        self.outputs = list(dict.fromkeys(t.output for t in self.terms))
        self._time: np.ndarray | None = None

    def interpolation(self, time: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per term: the left grid index and the fraction towards the next point of each x."""
        time = np.asarray(time, float)
        out = []
        for t in self.terms:
            i = np.clip(np.searchsorted(time, t.x, side="right") - 1, 0, max(len(time) - 2, 0))
            if len(time) < 2:
                out.append((i, np.zeros(len(t.x))))
                continue
            out.append((i, np.clip((t.x - time[i]) / (time[i + 1] - time[i]), 0.0, 1.0)))
        return out

    def model_at_observations(self, time: np.ndarray, series: dict[str, np.ndarray]) -> np.ndarray:
        """The model output linearly interpolated at every observation, (k, N)."""
        k = len(next(iter(series.values())))
        mod = np.empty((k, self.n))
        for t, (i, f) in zip(self.terms, self.interpolation(time)):
            s = np.asarray(series[t.output], float).reshape(k, -1)
            if s.shape[1] == 1:
                mod[:, t.start:t.stop] = s[:, :1]
                continue
            right = np.where(f > 0, s[:, np.minimum(i + 1, s.shape[1] - 1)], 0.0)
            mod[:, t.start:t.stop] = s[:, i] * (1 - f) + right * f
        return mod

    def compute(self, time: np.ndarray, series: dict[str, np.ndarray]) -> Costs:
        """The cost pieces of k runs from their series (output -> (k, T)) on the grid `time`."""
        mod = self.model_at_observations(time, series)
        res = mod - self.obs
        wres = res / self.err
        ssr = np.column_stack([np.sum(wres[:, t.start:t.stop] ** 2, axis=1) for t in self.terms])
        ssr_u = np.column_stack([np.sum(res[:, t.start:t.stop] ** 2, axis=1) for t in self.terms])
        scales = np.array([t.scale for t in self.terms])
        cost = ssr @ scales
        minlogp = np.sum(wres ** 2 / 2 + np.log(self.err) + math.log(2 * math.pi) / 2, axis=1)
        ok = np.isfinite(mod).all(axis=1)
        return Costs(mod, res, wres, ssr, ssr_u, np.where(ok, cost, np.inf),
                     np.where(ok, minlogp, np.inf), ok)

    def variables_from(self, summary: dict[str, np.ndarray], row: int = 0) -> dict[str, dict]:
        """The per-variable table of one run (summary: `ssr`, `ssr_unweighted` (k, terms))."""
        return {t.key: {"N": t.n, "SSR": float(summary["ssr"][row, j]),
                        "SSR_unweighted": float(summary["ssr_unweighted"][row, j]),
                        "scale": t.scale,
                        "rms": math.sqrt(summary["ssr_unweighted"][row, j] / t.n)}
                for j, t in enumerate(self.terms)}

    def residual_table(self, costs: Costs, row: int = 0) -> list[dict]:
        """FME's residuals table of one run: name, x, obs, mod, weight, res_unweighted, res."""
        rows = []
        for t in self.terms:
            for i in range(t.start, t.stop):
                rows.append({"name": t.key, "x": float(t.x[i - t.start]), "obs": float(self.obs[i]),
                             "mod": float(costs.mod[row, i]), "weight": 1.0 / float(self.err[i]),
                             "res_unweighted": float(costs.res[row, i]),
                             "res": float(costs.wres[row, i])})
        return rows


def weight_of(obs: np.ndarray, weight: str) -> float:
    """The error of every point of a variable without an err column."""
    if weight == "std":
        return float(np.std(obs, ddof=1))
    if weight == "mean":
        return float(np.mean(np.abs(obs)))
    return 1.0
