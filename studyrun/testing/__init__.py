"""The checks every model and analysis type must pass, shipped with studyrun so that an outside
package's type is checked as studyrun's own are (tests/conformance runs them over the registry):

    from studyrun.testing import parametrize_with_checks

    @parametrize_with_checks([MyAnalysis])
    def test_my_analysis(check, tmp_path):
        check(tmp_path)

Each check runs the type's `example` (core/plugin.py) in the toy study below: it validates; a
design is the same for a seed and its chunks make it whole; its memory is stated and refused
beyond the limit; results, runs and the report do not depend on batch size or workers and are
rebuilt from analysis.json and the store alone; the spec is unchanged by a run; failed runs are
dropped, refused, nulled, named or steered around as the example says; an evaluator pickles.
"""

from __future__ import annotations

import copy
import csv
import functools
import json
import os
import pickle
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import yaml

from studyrun.core.plugin import Example, type_tag

# The toy model every example runs unless it gives its own. `fail=1` makes a run raise where
# a > 0.9 and gives a NaN `final` where b > 0.9 (which fails the run too).
TOY = '''
import numpy as np

TIME = np.linspace(0.0, 2.0, 5)


def toy(a, b, fail=0):
    if fail and a > 0.9:
        raise ValueError("a is too large")
    y = a * np.exp(-b * TIME) + b
    return {"time": TIME, "y": y, "final": float("nan") if fail and b > 0.9 else float(y[-1]),
            "sum": a + 2 * b + a * b}
'''
TOY_STUDY: dict[str, Any] = {
    "seed": 11, "model": {"type": "python", "function": "toy:toy"},
    "parameters": {"a": {"bounds": [0.1, 1.0]}, "b": {"bounds": [0.1, 1.0]}},
    "quantities": {"final": "final"}, "analysis": {"type": "montecarlo", "samples": 8},
    "execution": {"on_failure": "continue"}}
FAILING = {"model": {"constants": {"fail": 1}}}  # the toy's failing variant


@dataclass
class ExampleStudy:
    """A study (as a dict) and the files it needs beside it, ready to write into a folder."""

    study: dict[str, Any]
    files: dict[str, str | Path] = field(default_factory=dict)
    failing: dict[str, Any] | None = None  # merged into `study` for the failed-runs check
    failures: str = "drops"  # see core/plugin.Example

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

    def with_failures(self) -> "ExampleStudy":
        """The variant whose runs partly fail and partly give NaN quantities."""
        assert self.failing is not None
        return ExampleStudy(merged(self.study, self.failing), self.files, None, self.failures)


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` merged in, mapping by mapping."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(
            out.get(key), dict) else copy.deepcopy(value)
    return out


def example_study(cls: type, name: str | None = None) -> ExampleStudy:
    """A type's `example` as a whole study: its blocks over the toy study's (a block given as
    None is left out), the toy model's file beside it."""
    example: Example | None = getattr(cls, "example", None)
    if example is None:
        raise AssertionError(f"{cls.__qualname__} declares no `example` (core/plugin.Example): "
                             "give it a small study to be checked with")
    study = {"name": name or f"example-{type_tag(cls)}", **copy.deepcopy(TOY_STUDY),
             **copy.deepcopy(dict(example.study))}
    study = {key: value for key, value in study.items() if value is not None}
    failing = None if example.failing is None else merged(FAILING, dict(example.failing))
    return ExampleStudy(study, {"toy.py": TOY, **example.files}, failing, example.failures)


# ------------------------------------------------------------------------------------ checks


def check_declaration(cls: type, folder: Path) -> None:
    """The type is a registered kind's subclass with a `type` tag, its capabilities are well
    formed and its example validates (and its analysis or model is this type)."""
    from studyrun.analyses.base import AnalysisSpec
    from studyrun.core.plugin import FAILURES
    from studyrun.study.loading import load_study
    from studyrun.study.spec.registry import BASES

    group = "analyses" if issubclass(cls, AnalysisSpec) else "models"
    assert issubclass(cls, BASES[group]), f"{cls.__qualname__}: derive from {BASES[group]}"
    tag = type_tag(cls)
    assert tag is not None, f"{cls.__qualname__}: no `type: Literal[...]` field"
    example = example_study(cls)
    assert example.failures in FAILURES, example.failures
    loaded = load_study(example.write(folder))
    block = loaded.study.analysis if group == "analyses" else loaded.study.model
    assert type(block) is cls, f"the example's {group[:-2]} is a {type(block).__qualname__}"
    if issubclass(cls, AnalysisSpec):
        for name in cls.results_files:
            assert name == Path(name).name and not name.startswith("."), name
        if cls.predicts is not None:
            from studyrun.study.spec.registry import registry

            assert callable(registry().predictor(tag)), cls.predicts


def check_design(cls: type, folder: Path) -> None:
    """A design is the same for the same seed, its chunks make it whole, and the plan, the
    description and the spec agree with it."""
    from studyrun.analyses.base import AnalysisSpec
    from studyrun.plan.study import plan_study
    from studyrun.study.loading import include_files, load_study, read_yaml, validate
    from studyrun.study.spec import Study
    from studyrun.study.spec.checks import check_study

    path = example_study(cls).write(folder)
    loaded = load_study(path)
    analysis, context = loaded.study.analysis, loaded.context
    assert check_study(loaded.study, context) == []

    def seed() -> np.random.SeedSequence:
        return np.random.SeedSequence(loaded.study.seed)

    design, again = analysis.design(context, seed()), analysis.design(context, seed())
    assert design.names == again.names == list(context.varied)
    assert design.matrix.shape[1] == len(design.names) and len(design.matrix) >= 1
    assert np.array_equal(design.matrix, again.matrix) and same(design.info, again.info)
    own_chunks = type(analysis).design_chunks is not AnalysisSpec.design_chunks
    for rows in (1, 7, len(design.matrix)):
        chunks = list(analysis.design_chunks(context, seed(), rows))
        assert all(chunk.names == design.names for chunk in chunks)
        assert np.array_equal(np.vstack([chunk.matrix for chunk in chunks]), design.matrix)
        assert not own_chunks or max(len(chunk.matrix) for chunk in chunks) <= rows
    assert isinstance(analysis.describe_design(design, context), str)
    assert plan_study(loaded).size == len(design.matrix)
    validated = validate(Study, include_files(read_yaml(path))).model_dump()
    assert loaded.study.model_dump() == validated  # nor changed by any of this


def check_footprint(cls: type, folder: Path) -> None:
    """Its footprint (None: small by construction) grows with the size at its key, and one byte
    less memory than it needs is a problem at that key."""
    from studyrun.study.loading import load_study

    loaded = load_study(example_study(cls).write(folder))
    analysis, context = loaded.study.analysis, loaded.context
    footprint = analysis.footprint(context)
    if footprint is None:
        return
    assert 0 < footprint.bytes < footprint.bytes_at(2 * footprint.size)
    assert analysis.check_size(context) == []
    before = os.environ.get("STUDYRUN_MEMORY_LIMIT")
    os.environ["STUDYRUN_MEMORY_LIMIT"] = str(footprint.bytes - 1)
    try:
        problems = analysis.check_size(context)
    finally:
        if before is None:
            del os.environ["STUDYRUN_MEMORY_LIMIT"]
        else:
            os.environ["STUDYRUN_MEMORY_LIMIT"] = before
    assert [p.path for p in problems] == [footprint.key], problems
    assert f"{footprint.size:,} {footprint.counts} need about" in problems[0].message


def check_runs(cls: type, folder: Path) -> None:
    """Run in batches as they come and in batches of one on two threads: the same results and
    runs; the spec unchanged by the run; the report rebuilt from analysis.json and the store
    alone is the same."""
    from studyrun.commands.open_results import rebuild_report
    from studyrun.study.loading import include_files, read_yaml, validate
    from studyrun.study.spec import Study

    example = example_study(cls)
    first = run(example, folder / "sync", "sync", None, "auto")
    second = run(example, folder / "threads", "threads", 2, 1)
    assert second["analysis"]["results"] == first["analysis"]["results"]
    assert second["runs"] == first["runs"]
    assert second["analysis"]["runs"] == first["analysis"]["runs"]
    study = folder / "sync" / "study.yaml"
    assert first["spec"] == validate(Study, include_files(read_yaml(study))).model_dump()
    alone = folder / "alone"
    alone.mkdir()
    for file in ("study.yaml", "analysis.json", "runs.sqlite"):
        shutil.copy(first["out"] / file, alone / file)
    report = rebuild_report(alone)
    assert report.read_text() == (first["out"] / "report.md").read_text()
    assert sorted(p.name for p in (alone / "figures").glob("*")) == sorted(
        p.name for p in (first["out"] / "figures").glob("*"))


def check_failed_runs(cls: type, folder: Path) -> None:
    """With runs that fail (or give NaN), analysis.json counts them and the analysis does with
    them what its example says."""
    example = example_study(cls)
    if example.failing is None:
        return
    done = run(example.with_failures(), folder, "sync", None, "auto")
    failed, results = done["analysis"]["runs"]["failed"], done["analysis"]["results"]
    assert failed == sum(row["run.status"] == "failed" for row in done["rows"]) > 0
    quantities = [value for key, value in results.items()
                  if key in (example.study.get("quantities") or {}) and isinstance(value, dict)]
    if example.failures == "drops":
        assert all("error" not in entry and entry["dropped_runs"] >= failed
                   for entry in quantities), quantities
    elif example.failures == "refuses":
        assert all("error" in entry and entry["dropped_runs"] == failed for entry in quantities)
    elif example.failures == "nulls":
        assert all(sum(v is None for v in entry["values"]) == failed for entry in quantities)
    elif example.failures == "names":
        assert any("failed" in note for note in results["notes"]), results["notes"]
    else:  # steers: the fit goes on around the failed runs
        assert done["rows"][0]["run.status"] == "ok"


def check_evaluator_pickles(cls: type, folder: Path) -> None:
    """The evaluator pickles and gives the same output after a round trip."""
    from studyrun.core.batch import RunContext
    from studyrun.plan.study import plan_study
    from studyrun.study.loading import load_study

    loaded = load_study(example_study(cls).write(folder / "study"))
    evaluator = loaded.context.model.build(loaded.path.parent)
    plan = plan_study(loaded)
    rows = slice(0, min(3, plan.size))
    context = RunContext(plan.run_ids[rows], folder / "work")
    outputs = [e(plan.inputs(rows), context)
               for e in (evaluator, pickle.loads(pickle.dumps(evaluator)))]
    assert outputs[0].errors == [None] * len(plan.run_ids[rows])
    assert same(outputs[0].scalars, outputs[1].scalars)


def run(example: ExampleStudy, folder: Path, scheduler: str, workers: int | None,
        batch_size: int | str) -> dict[str, Any]:
    """Run an example study: its analysis.json, runs.csv rows and runs (without what differs
    from one execution to another), its folder and its spec after the run."""
    from unittest.mock import patch

    from studyrun.commands import pipeline
    from studyrun.study.loading import load_study

    study = example.write(folder, batch_size=batch_size)
    out = folder / "out"
    loaded = load_study(study)
    with patch.object(pipeline, "load_study", lambda *_, **__: loaded):  # this object, checked
        pipeline.run_study(study, out, scheduler=scheduler, workers=workers, quiet=True)
    with open(out / "runs.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    runs = [{k: v for k, v in row.items() if k not in ("run.duration", "run.worker")}
            for row in sorted(rows, key=lambda row: int(row["run.index"]))]
    return {"analysis": json.loads((out / "analysis.json").read_text()), "rows": rows,
            "runs": runs, "out": out, "spec": loaded.study.model_dump()}


def same(a: Any, b: Any) -> bool:
    """Equal, numpy arrays and NaN included."""
    def text(value: Any) -> str:
        return json.dumps(value, sort_keys=True, default=lambda v: repr(np.asarray(v).tolist()))

    return text(a) == text(b)


ANALYSIS_CHECKS = (check_declaration, check_design, check_footprint, check_runs,
                   check_failed_runs)
MODEL_CHECKS = (check_declaration, check_evaluator_pickles, check_runs)
QUICK = (check_declaration, check_design, check_footprint, check_evaluator_pickles)


def checks(cls: type, *, runs: bool = True) -> list[Callable[[Path], None]]:
    """The checks of a type, each called with an empty folder; without `runs`, only those that
    run no study (a second each at most)."""
    from studyrun.analyses.base import AnalysisSpec

    chosen = ANALYSIS_CHECKS if issubclass(cls, AnalysisSpec) else MODEL_CHECKS
    return [_named(check, cls) for check in chosen if runs or check in QUICK]


def _named(check: Callable[[type, Path], None], cls: type) -> Callable[[Path], None]:
    bound = functools.partial(check, cls)
    bound.__name__ = f"{check.__name__}[{type_tag(cls)}]"  # type: ignore[attr-defined]
    return bound


def parametrize_with_checks(types: Iterable[type], *, runs: bool = True) -> Any:
    """A pytest mark that calls the test once per type and check, as `check`; the test calls
    `check(tmp_path)`."""
    import pytest

    cases = [check for cls in types for check in checks(cls, runs=runs)]
    return pytest.mark.parametrize("check", cases, ids=[c.__name__ for c in cases])
