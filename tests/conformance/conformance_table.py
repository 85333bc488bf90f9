"""The conformance suite's table: each registered model and analysis type's own example
(`example` on its class, as studyrun.testing runs it) and a few extra cases.

A new type joins the suite by declaring its `example`; studyrun.testing's `check_declaration`
fails for one that has none.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from studyrun.study.spec.registry import registry
from studyrun.testing import TOY, ExampleStudy, example_study, merged

TESTS = Path(__file__).resolve().parents[1]
Example = ExampleStudy

# The extra cases' python models: the toy of studyrun.testing, vectorized, and with ragged series.
EXTRA_TOY = TOY + '''

def toy_batch(a, b):
    """The same model, vectorized: one call per batch."""
    y = a[:, None] * np.exp(-b[:, None] * TIME) + b[:, None]
    return {"time": TIME, "y": y, "final": y[:, -1], "sum": a + 2 * b + a * b}


def ragged(a, b):
    """Runs stop at different times (an event): each run's series has its own length."""
    time = np.arange(0.0, 1.0 + round(2 * a, 1) + 1e-9, 0.25)
    return {"time": time, "y": np.exp(-b * time) + a * time}
'''
AB = {"a": {"bounds": [0.1, 1.0]}, "b": {"bounds": [0.1, 1.0]}}


def model_study(name: str, model: dict[str, Any], parameters: dict[str, Any],
                quantities: dict[str, str], analysis: dict[str, Any] | None = None) -> Example:
    study = {"name": name, "seed": 5, "model": model, "parameters": parameters,
             "quantities": quantities, "analysis": analysis or {"type": "montecarlo", "samples": 8}}
    return Example(study, {"toy.py": EXTRA_TOY})


ANALYSES: dict[str, Example] = {kind: example_study(cls)
                                for kind, cls in registry().analyses.items()}
MODELS: dict[str, Example] = {kind: example_study(cls) for kind, cls in registry().models.items()}

# Cases beyond one per member: a vectorized python model, and runs whose series differ in
# length, summarised by quantities and analysed as time series (on the first run's grid).
EXTRAS: dict[str, Example] = {
    "python-vectorized": model_study("vectorized", {"type": "python", "function": "toy:toy_batch",
                                                    "vectorized": True},
                                     copy.deepcopy(AB), {"final": "final", "peak": "max(y)"}),
    "ragged-montecarlo": model_study("ragged", {"type": "python", "function": "toy:ragged"},
                                     copy.deepcopy(AB), {"final": "final(y)", "mean": "mean(y)"}),
    "ragged-sobol": model_study("ragged-sobol", {"type": "python", "function": "toy:ragged"},
                                copy.deepcopy(AB), {"final": "final(y)"},
                                analysis={"type": "sobol", "samples": 8, "resamples": 10,
                                          "outputs": ["y"]}),
}
# correlated inputs (the study's `correlation:`), in a fixed design and an iterative one
for _name in ("montecarlo", "surrogate"):
    _example = ANALYSES[_name]
    EXTRAS[f"correlated-{_name}"] = Example(
        merged(_example.study, {"correlation": [["a", "b", 0.7]]}), _example.files)

# optimize's Bayesian search (its own package), which the type's one example does not reach
EXTRAS["optimize-bayesian"] = Example(
    merged(ANALYSES["optimize"].study, {"analysis": {"method": "bayesian", "max_evaluations": 10,
                                                     "batch": 2}}), ANALYSES["optimize"].files)


ALL: dict[str, Example] = {**{f"analysis-{k}": v for k, v in ANALYSES.items()},
                           **{f"model-{k}": v for k, v in MODELS.items()}, **EXTRAS}
