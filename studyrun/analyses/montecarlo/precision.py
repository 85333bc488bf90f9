"""Monte Carlo with a precision target: the 95% intervals of each mean (t interval) and of each
percentile asked for (percentile bootstrap, seeded), and the table of rounds."""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.analyses.precision import Round, Until

BOOTSTRAP_RESAMPLES = 200
LEVEL = 0.95


def half_widths(values: np.ndarray, percentiles: list[float],
                seed: np.random.SeedSequence) -> tuple[float | None, list[float | None]]:
    """95% half-widths of the mean (Student t) and of each percentile (bootstrap, `scipy.stats.
    bootstrap`, percentile method, the same resamples for every percentile)."""
    from scipy import stats

    n = len(values)
    if n < 2:
        return None, [None] * len(percentiles)
    mean = float(stats.t.ppf(0.5 + LEVEL / 2, n - 1) * np.std(values, ddof=1) / np.sqrt(n))
    widths: list[float | None] = []
    for p in percentiles:
        result = stats.bootstrap((values,), lambda x, axis, p=p: np.percentile(x, p, axis=axis),
                                 n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=LEVEL,
                                 method="percentile", vectorized=True, batch=20,
                                 rng=np.random.Generator(np.random.PCG64(seed)))
        low, high = result.confidence_interval
        widths.append(float(high - low) / 2 if np.isfinite([low, high]).all() else None)
    return mean, widths


def with_intervals(entry: dict[str, Any], values: np.ndarray, percentiles: list[float],
                   seed: np.random.SeedSequence) -> dict[str, Any]:
    """A quantity's summary with `mean_ci` and `percentiles_ci` (95% half-widths) added."""
    from studyrun.analyses.montecarlo import label

    mean, widths = half_widths(values, percentiles, seed)
    return entry | {"mean_ci": mean,
                    "percentiles_ci": {label(p): w for p, w in zip(percentiles, widths)}}


def target_met(entry: dict[str, Any], until: Until) -> bool:
    """The mean's interval and every percentile's are within the target."""
    if not until.met(entry["mean_ci"], entry["mean"]):
        return False
    return all(until.met(width, entry["percentiles"].get(key))
               for key, width in entry["percentiles_ci"].items())


def rounds_table(rounds: list[Round], name: str) -> dict[str, Any]:
    """N -> mean, mean_ci, each percentile and its half-width, per round."""
    entries = [r.results[name] for r in rounds]
    keys = list(entries[-1]["percentiles"])
    return {"N": [r.size for r in rounds],
            "n": [e["n"] for e in entries],
            "mean": [e["mean"] for e in entries],
            "mean_ci": [e["mean_ci"] for e in entries],
            "percentiles": {k: [e["percentiles"].get(k) for e in entries] for k in keys},
            "percentiles_ci": {k: [e["percentiles_ci"].get(k) for e in entries] for k in keys}}


def precision_section(name: str, entry: dict[str, Any], figures: Any) -> list[str]:
    """Where the rounds stopped, and the half-widths (relative with rel_ci) against N."""
    from studyrun.analyses.precision_report import reached_line, widths_plot
    from studyrun.results.report.markdown import escape

    heading = [f"### Precision: {escape(name)}", "", reached_line(entry, "runs"), ""]
    if not figures.draws(name):
        return heading
    table, target = entry["convergence"], entry["target"]
    widths = {"mean": table["mean_ci"], **{f"p{k}": v for k, v in table["percentiles_ci"].items()}}
    estimates = {"mean": table["mean"], **{f"p{k}": v for k, v in table["percentiles"].items()}}
    relative = "rel_ci" in target
    if relative:
        widths = {k: [None if w is None or not e else w / abs(e)
                      for w, e in zip(v, estimates[k])] for k, v in widths.items()}
    plot = widths_plot(name, "montecarlo", table["N"], widths, target.get("ci", target.get(
        "rel_ci")), figures, "95% half-width" + (" / |estimate|" if relative else ""))
    return [*heading, plot, ""]
