"""The conformance suite's table: one small, fast example study per member of the model and
analysis unions (and a few extra cases), and how to write one into a folder.

A new model or analysis type joins the suite by adding an entry here; `missing_examples` names
the union members that have none, and the suite fails on them.
"""

from __future__ import annotations

import copy
import shutil
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from studyrun.study.spec import AnalysisUnion, ModelUnion

TESTS = Path(__file__).resolve().parents[1]

# The examples' python models. `fail=1` makes a run raise where a > 0.9 and gives a NaN `final` where
# b > 0.9 (which fails the run too): failed runs and NaN quantities for the `failing` variants.
TOY = '''
import numpy as np

TIME = np.linspace(0.0, 2.0, 5)


def toy(a, b, fail=0):
    if fail and a > 0.9:
        raise ValueError("a is too large")
    y = a * np.exp(-b * TIME) + b
    return {"time": TIME, "y": y, "final": float("nan") if fail and b > 0.9 else float(y[-1]),
            "sum": a + 2 * b + a * b}


def toy_batch(a, b):
    """The same model, vectorized: one call per batch."""
    y = a[:, None] * np.exp(-b[:, None] * TIME) + b[:, None]
    return {"time": TIME, "y": y, "final": y[:, -1], "sum": a + 2 * b + a * b}


def ragged(a, b):
    """Runs stop at different times (an event): each run's series has its own length."""
    time = np.arange(0.0, 1.0 + round(2 * a, 1) + 1e-9, 0.25)
    return {"time": time, "y": np.exp(-b * time) + a * time}
'''

# observations of the toy model's y at a = 0.5, b = 0.3 (calibrate's data)
OBSERVED = "name,time,value\n" + "".join(
    f"y,{t:g},{0.5 * 2.718281828459045 ** (-0.3 * t) + 0.3:.12g}\n"
    for t in (0.0, 0.5, 1.0, 1.5, 2.0))

AB = {"a": {"bounds": [0.1, 1.0]}, "b": {"bounds": [0.1, 1.0]}}
TOY_MODEL = {"type": "python", "function": "toy:toy"}
FAILING = {"model": {"constants": {"fail": 1}}}  # the toy's failing variant
FINAL = {"final": "final"}  # one quantity: each one costs the report its figures


@dataclass
class Example:
    """A small study (as a dict) and the files it needs beside it."""

    study: dict[str, Any]
    files: dict[str, str | Path] = field(default_factory=dict)  # name -> text, or a file to copy
    failing: dict[str, Any] | None = None  # merged into `study` for the failed-runs check
    # what the analysis does with failed runs: "drops" them (counted per quantity in
    # dropped_runs), "refuses" (an error entry saying why, with the count), "nulls" (a null
    # value per failed run), "names" (null sensitivities for the parameters whose runs failed,
    # named in the notes) or "steers" (an iterative fit steers away; analysis.json counts them)
    failures: str = "drops"

    def write(self, folder: Path, name: str = "study.yaml", **execution: Any) -> Path:
        """The study file (its execution block updated) and its files, in `folder`."""
        folder.mkdir(parents=True, exist_ok=True)
        for file, content in self.files.items():
            if isinstance(content, Path):
                shutil.copy(content, folder / file)
            else:
                (folder / file).write_text(content)
        study = copy.deepcopy(self.study)
        study.setdefault("execution", {}).update(execution)
        path = folder / name
        path.write_text(yaml.safe_dump(study, sort_keys=False))
        return path

    def with_failures(self) -> "Example":
        """The variant whose runs partly fail and partly give NaN quantities."""
        assert self.failing is not None
        return Example(merged(self.study, self.failing), self.files, None, self.failures)


def merged(base: dict, changes: dict) -> dict:
    """`base` with `changes` merged in, mapping by mapping."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(
            out.get(key), dict) else copy.deepcopy(value)
    return out


def toy_study(name: str, analysis: dict[str, Any], quantities: dict[str, str] | None = FINAL,
              failing: dict[str, Any] | None = FAILING, failures: str = "drops") -> Example:
    """A study of the toy model; one quantity unless told (`None`: every scalar output)."""
    study = {"name": name, "seed": 11, "model": dict(TOY_MODEL), "parameters": copy.deepcopy(AB),
             **({"quantities": quantities} if quantities else {}), "analysis": analysis,
             "execution": {"on_failure": "continue"}}
    return Example(study, {"toy.py": TOY}, failing, failures)


def model_study(name: str, model: dict[str, Any], parameters: dict[str, Any],
                quantities: dict[str, str], files: dict[str, str | Path] | None = None,
                analysis: dict[str, Any] | None = None) -> Example:
    study = {"name": name, "seed": 5, "model": model, "parameters": parameters,
             "quantities": quantities, "analysis": analysis or {"type": "montecarlo", "samples": 8}}
    return Example(study, {"toy.py": TOY} if files is None else files)


ANALYSES: dict[str, Example] = {
    "montecarlo": toy_study("mc", {"type": "montecarlo", "samples": 24}, quantities=None),
    "sweep": toy_study("sweep", {"type": "sweep", "levels": 4}, failures="nulls"),
    "sobol": toy_study("sobol", {"type": "sobol", "samples": 16, "resamples": 10},
                       failing=merged(FAILING, {"parameters": {"a": {"bounds": [0.1, 0.95]}}})),
    "morris": toy_study("morris", {"type": "morris", "trajectories": 12, "resamples": 10},
                        failing=merged(FAILING, {"parameters": {"a": {"bounds": [0.1, 0.95]},
                                                                "b": {"bounds": [0.1, 0.9]}}})),
    "fast": toy_study("fast", {"type": "fast", "samples": 24, "M": 2, "resamples": 10},
                      failures="refuses"),
    "rbd_fast": toy_study("rbd", {"type": "rbd_fast", "samples": 32, "M": 2, "resamples": 10}),
    "delta": toy_study("delta", {"type": "delta", "samples": 160, "resamples": 2}),
    "pawn": toy_study("pawn", {"type": "pawn", "samples": 32, "S": 3}),
    "dgsm": toy_study("dgsm", {"type": "dgsm", "samples": 16, "resamples": 10},
                      failing=merged(FAILING, {"parameters": {"a": {"bounds": [0.1, 0.95]}}})),
    "doe": toy_study("doe", {"type": "doe", "design": "full", "levels": 3}),
    "local": toy_study("local", {"type": "local", "outputs": ["y"]}, failures="names",
                       failing=merged(FAILING, {"parameters": {"a": {"nominal": 0.9}}})),
    "gradient": toy_study("gradient", {"type": "gradient", "objective": "integral(y)"},
                          failures="names",
                          failing=merged(FAILING, {"parameters": {"a": {"nominal": 0.9}}})),
    "surrogate": toy_study("surrogate", {"type": "surrogate", "samples": 24, "resamples": 10,
                                         "validation": 4}),
    "calibrate": toy_study("calibrate", {"type": "calibrate", "data": {"file": "observed.csv"},
                                         "max_evaluations": 60}, failures="steers",
                           failing=merged(FAILING, {"parameters": {"a": {"nominal": 0.9}}})),
    "optimize": toy_study("optimize", {"type": "optimize", "target": {"final": 0.5},
                                       "max_evaluations": 30}, failures="steers",
                          failing=merged(FAILING, {"parameters": {"a": {"nominal": 0.9}}})),
    "reliability": toy_study("reliability", {"type": "reliability", "failure": "final < 0.6",
                                             "start": 32, "max_runs": 64,
                                             "until": {"cov": 0.05}}),
}
ANALYSES["calibrate"].files["observed.csv"] = OBSERVED

PYTHON = sys.executable
MODELS: dict[str, Example] = {
    "python": model_study("python", TOY_MODEL, copy.deepcopy(AB),
                          {"final": "final", "peak": "max(y)"}),
    "command": model_study(
        "command", {"type": "command", "run": [PYTHON, "{study_dir}/sim.py", "{params_file}",
                                               "results.json"], "timeout": 60},
        copy.deepcopy(AB), {"final": "final", "mean": "mean(y)"},
        {"sim.py": TESTS / "models" / "programs" / "sim.py"}),
    "ode": model_study(
        "ode", {"type": "ode", "time": {"start": 0, "stop": 10, "step": 0.5}, "method": "RK45",
                "states": {"population": "initial_population"},
                "rates": {"population": "rate * population * (1 - population / capacity)"},
                "constants": {"initial_population": 10, "rate": 0.4, "capacity": 1000}},
        {"rate": {"bounds": [0.3, 0.5]}, "capacity": {"bounds": [800, 1200]}},
        {"final": "final(population)"}, {}),
    "stockflow": model_study(
        "stockflow", {"type": "stockflow", "time": {"start": 0, "stop": 5, "step": 0.125,
                                                    "save_every": 1}, "method": "euler",
                      "stocks": {"area": {"initial": 10, "inflows": ["growth"],
                                          "outflows": ["decay"]}},
                      "flows": {"growth": "area * growth_rate * (1 - area / 1000)",
                                "decay": "area * decay_rate"},
                      "constants": {"growth_rate": 1.0, "decay_rate": 0.2}},
        {"growth_rate": {"bounds": [0.5, 1.5]}, "decay_rate": {"bounds": [0.1, 0.3]}},
        {"final": "final(area)"}, {}),
    "pysd": model_study(
        "pysd", {"type": "pysd", "file": "teacup.mdl", "time": {"final_time": 10}},
        {"characteristic_time": {"bounds": [5, 15]}, "room_temperature": 70},
        {"final": "final(teacup_temperature)"}, {"teacup.mdl": TESTS / "models" / "teacup.mdl"}),
}

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


def member_types(union: Any) -> dict[str, type]:
    """The `type:` value of each member class of a discriminated union."""
    members = typing.get_args(typing.get_args(union)[0])
    return {typing.get_args(cls.model_fields["type"].annotation)[0]: cls for cls in members}


def missing_examples() -> list[str]:
    """Members of the unions without an example here."""
    return ([f"model {t}" for t in member_types(ModelUnion) if t not in MODELS]
            + [f"analysis {t}" for t in member_types(AnalysisUnion) if t not in ANALYSES])


ALL: dict[str, Example] = {**{f"analysis-{k}": v for k, v in ANALYSES.items()},
                           **{f"model-{k}": v for k, v in MODELS.items()}, **EXTRAS}
