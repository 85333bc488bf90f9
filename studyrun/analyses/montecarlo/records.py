"""montecarlo's results in analysis.json: each quantity's distribution over the runs."""

from __future__ import annotations

from pydantic import RootModel

from studyrun.results.records import STRICT, ByName, Count, Entry, Number


class MontecarloQuantity(Entry):
    """A quantity's summary: its moments, percentiles and rank correlations with the inputs."""

    n: Count | None = None  # runs that gave a finite value
    mean: Number = None
    std: Number = None  # ddof 1
    min: Number = None
    max: Number = None
    percentiles: ByName = {}  # percent -> value
    correlations: ByName = {}  # parameter -> Spearman's rank correlation
    mean_ci: Number = None
    percentiles_ci: ByName = {}


class MontecarloResults(RootModel[dict[str, MontecarloQuantity]]):
    """Quantity -> its summary."""

    model_config = STRICT
