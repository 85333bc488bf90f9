"""The conformance suite (issue 15, section 3): the same checks over every model and analysis
type, as scikit-learn checks every estimator. The quick ones are studyrun.testing's, shipped for
outside types too; the examples are the types' own (conformance_table.py), and a type without
one fails its `check_declaration`.

Checks: a design is the same for the same seed and its chunks make it whole; the spec is
unchanged by loading, validation and a run; an evaluator pickles and gives the same output after
a round trip; results and runs do not depend on batch size, workers or scheduler; analyses
tolerate failed runs and NaN quantities where their method allows and say how many runs they
dropped (or say clearly that they cannot); the report is rebuilt from analysis.json and the
store alone. Every check that runs a study is `slow` (a second or more of CPU each, some start
processes); each study runs once per setting and serves every check that reads it.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import patch

import cloudpickle
import numpy as np
import pytest
from conformance_table import ALL, ANALYSES, Example, merged
from conftest import analysis_schema_problems
from hostile_html import PAYLOAD, live, text_of, views

from studyrun.commands import pipeline
from studyrun.commands.open_results import rebuild_report
from studyrun.commands.pipeline import make_job, run_study
from studyrun.core.batch import RunContext
from studyrun.core.runtable import CSV_FIXED
from studyrun.plan.study import plan_study
from studyrun.study.loading import include_files, load_study, read_yaml, validate
from studyrun.study.spec import Study
from studyrun.study.spec.registry import registry
from studyrun.testing import parametrize_with_checks


@dataclass(frozen=True)
class Setting:
    """How a study is executed: scheduler, workers (None: the default) and batch size."""

    scheduler: str
    workers: int | None
    batch_size: int | str

    @property
    def name(self) -> str:
        return f"{self.scheduler}-{self.workers or 'default'}-{self.batch_size}"


BASELINE = Setting("sync", None, "auto")  # the pilot's growing batches, then larger ones
THREADS = Setting("threads", 2, 1)  # every example
LARGE = Setting("threads", 2, 64)  # where a batch's runs are evaluated or grouped together
PROCESS = Setting("local", 2, "auto")  # a short study: a python model's runs in a child process
CLUSTER = Setting("local", 2, 1)  # a fixed batch size always starts a real LocalCluster
IN_LARGE_BATCHES = {"analysis-sobol", "analysis-optimize", "model-pysd", "python-vectorized",
                    "ragged-montecarlo", "ragged-sobol"}
IN_A_PROCESS = {"python-vectorized", "ragged-montecarlo"}
# one real LocalCluster per group of analyses: sampling, block designs (with runs whose series
# differ in length), local, iterative; and the command model's subprocesses
ON_A_CLUSTER = ["analysis-montecarlo", "ragged-sobol", "analysis-local", "analysis-calibrate",
                "model-command"]


@dataclass
class Run:
    """A finished study: its folder, analysis.json and runs.csv rows (run order), and its spec
    as validated afresh, after loading, and after the run (one Loaded throughout)."""

    study: Path
    out: Path
    analysis: dict[str, Any]
    rows: list[dict[str, str]]
    specs: tuple[dict, dict, dict]

    def runs(self) -> list[dict[str, str]]:
        """runs.csv without what may differ from one execution to another."""
        return [{k: v for k, v in row.items() if k not in ("run.duration", "run.worker")}
                for row in sorted(self.rows, key=lambda row: int(row["run.index"]))]


class Runs:
    """Studies run once per example and setting in this session, then reused by every check."""

    def __init__(self, root: Path) -> None:
        self.root, self.done = root, {}

    def get(self, name: str, setting: Setting = BASELINE, example: Example | None = None,
            variant: str = "") -> Run:
        key = (name, setting, variant)
        if key not in self.done:
            folder = self.root / name / (variant or "plain") / setting.name
            study = (example or ALL[name]).write(folder, batch_size=setting.batch_size)
            out = folder / "out"
            loaded = load_study(study)
            loaded_spec = loaded.study.model_dump()
            with patch.object(pipeline, "load_study", lambda *_, **__: loaded):  # this object
                # the same runs executed otherwise give the baseline's report: they draw none
                run_study(study, out, scheduler=setting.scheduler, workers=setting.workers,
                          quiet=True, report=setting == BASELINE)
            with open(out / "runs.csv", newline="") as handle:
                rows = list(csv.DictReader(handle))
            analysis = json.loads((out / "analysis.json").read_text())
            specs = (as_validated(study), loaded_spec, loaded.study.model_dump())
            self.done[key] = Run(study, out, analysis, rows, specs)
        return self.done[key]


@pytest.fixture(scope="module", autouse=True)
def translations(tmp_path_factory):
    """PySD's translations cached in this module's own folder, not the user's."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(scope="session")  # once per test process, however pytest-xdist splits the module
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory.mktemp("conformance"))


@parametrize_with_checks([*registry().models.values(), *registry().analyses.values()],
                         runs=False)
def test_every_type_passes_the_shipped_checks(check, tmp_path):
    """studyrun.testing's checks that run no study: the declaration and example, the design and
    its chunks, the memory footprint, the evaluator's pickling."""
    check(tmp_path)


def test_an_analysis_type_without_a_results_model_is_an_error_where_it_is_defined():
    from typing import Literal

    from studyrun.analyses.base import FixedDesignAnalysis
    from studyrun.results.records import results_model

    with pytest.raises(TypeError, match="'unmodelled' .* declares no results_model"):
        class Unmodelled(FixedDesignAnalysis):
            type: Literal["unmodelled"]

            def design(self, context, seed):
                raise AssertionError

            def analyse(self, outcome, context):
                raise AssertionError
    assert results_model("unmodelled") is None
    assert {kind: results_model(kind) for kind in ANALYSES} == {
        kind: cls.results_model for kind, cls in registry().analyses.items()}


def as_validated(path: Path) -> dict:
    """The study file validated afresh, nothing else done with it."""
    return validate(Study, include_files(read_yaml(path))).model_dump()


SMALL_BY_CONSTRUCTION = {"local", "gradient"}  # a few runs a parameter: no size of their own


def test_only_analyses_small_by_construction_state_no_memory(tmp_path):
    """The shipped footprint check accepts None; here, only for the analyses that are small."""
    loaded = {name: load_study(example.write(tmp_path / name))
              for name, example in ANALYSES.items()}
    assert {name for name, study in loaded.items()
            if study.study.analysis.footprint(study.context) is None} == SMALL_BY_CONSTRUCTION


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ALL))
def test_the_spec_is_unchanged_by_loading_validation_and_a_run(runs, name):
    validated, loaded, after_the_run = runs.get(name).specs
    assert loaded == validated
    assert after_the_run == validated


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in ALL if not name.startswith("analysis-")])
def test_the_evaluator_pickles_and_gives_the_same_output_after_a_round_trip(name, tmp_path):
    """The evaluator with pickle; the whole job with cloudpickle, as Dask and the pilot's process
    ship it (its quantities hold closures)."""
    loaded = load_study(ALL[name].write(tmp_path / "study"))
    job = make_job(loaded, tmp_path / "out")
    plan = plan_study(loaded)
    rows = slice(0, min(3, plan.size))
    context = RunContext(plan.run_ids[rows], tmp_path / "work")
    evaluators = [job.evaluator, pickle.loads(pickle.dumps(job.evaluator)),
                  cloudpickle.loads(cloudpickle.dumps(job)).evaluator]
    first, *others = (comparable(e(plan.inputs(rows), context)) for e in evaluators)
    assert first["errors"] == [None] * len(plan.run_ids[rows])
    assert others == [first, first]


def comparable(output) -> dict[str, Any]:
    """A ModelOutput as plain lists, so that NaN compares equal to NaN (as text)."""
    def plain(value):
        return repr(np.asarray(value).tolist()) if value is not None else None

    return {"errors": output.errors, "scalars": {k: plain(v) for k, v in output.scalars.items()},
            "groups": [(plain(np.arange(len(output.errors))[g.rows]), plain(g.time),
                        {k: plain(v) for k, v in g.series.items()})
                       for g in output.series_groups()]}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ALL))
def test_results_do_not_depend_on_batch_size_workers_or_scheduler(runs, name):
    settings = [THREADS, *[LARGE] * (name in IN_LARGE_BATCHES), *[PROCESS] * (name in IN_A_PROCESS)]
    reference = runs.get(name)
    assert reference.analysis["runs"]["failed"] == 0
    for setting in settings:
        assert_same(runs.get(name, setting), reference, setting)
    if name in IN_A_PROCESS:
        assert runs.get(name, PROCESS).analysis["execution"]["scheduler"] == "process"


@pytest.mark.thorough
@pytest.mark.slow
@pytest.mark.parametrize("name", ON_A_CLUSTER)
def test_results_are_the_same_on_a_local_cluster(runs, name):
    run = runs.get(name, CLUSTER)
    assert run.analysis["execution"]["scheduler"] == "local"
    assert_same(run, runs.get(name), CLUSTER)


def assert_same(run: Run, reference: Run, setting: Setting) -> None:
    """The same results, runs (by run: parameters, identities, values, errors) and counts."""
    assert run.analysis["results"] == reference.analysis["results"], setting
    assert run.runs() == reference.runs(), setting
    assert run.analysis["runs"] == reference.analysis["runs"], setting


FAILING = [name for name, example in ANALYSES.items() if example.failing is not None]
FAILING_IN_THREADS = {"montecarlo", "sobol", "calibrate"}  # failed runs in batches of one too
ONLY_RAISING = {"morris", "local", "gradient", "calibrate", "optimize"}  # no run of theirs gives a NaN


@pytest.mark.slow
@pytest.mark.parametrize("name", FAILING)
def test_analyses_tolerate_failed_runs_and_say_how_many_they_dropped(runs, name):
    example = ANALYSES[name]
    run = runs.get(f"analysis-{name}", example=example.with_failures(), variant="failing")
    failed = run.analysis["runs"]["failed"]
    assert failed == sum(row["run.status"] == "failed" for row in run.rows) > 0
    kinds = {"nan" if "is nan" in row["run.error"] else "raised" for row in run.rows if row["run.error"]}
    assert kinds == ({"raised"} if name in ONLY_RAISING else {"raised", "nan"})
    results = run.analysis["results"]
    quantities = {k: v for k, v in results.items() if k in quantity_names(run, example)}
    if example.failures == "drops":  # a count per quantity; blocks with a failed run go whole
        for quantity, entry in quantities.items():
            assert "error" not in entry and numbers(entry), (quantity, entry)
            if "dropped_blocks" in entry:
                assert entry["dropped_runs"] >= failed and entry["dropped_blocks"] > 0
            else:
                assert entry["dropped_runs"] == failed, (quantity, entry)
    elif example.failures == "refuses":  # says so, with the count, rather than give numbers
        for entry in quantities.values():
            assert "error" in entry and entry["dropped_runs"] == failed
    elif example.failures == "nulls":  # a null value for each failed run
        for entry in quantities.values():
            assert sum(v is None for v in entry["values"]) == failed
    elif example.failures == "names":  # nulls for the parameters whose runs failed, named
        assert any("failed for a" in note for note in results["notes"]), results["notes"]
        entry = results["gradient"] if name == "gradient" else results["y"]["L1"]
        assert entry["a"] is None and entry["b"] is not None
    else:  # an iterative fit steers around failed runs and ends where the model runs
        assert example.failures == "steers"
        assert run.rows[0]["run.status"] == "ok"
        final = results["cost" if name == "calibrate" else "objective"]["final"]
        assert final is not None and np.isfinite(final)
    if name in FAILING_IN_THREADS:
        assert_same(runs.get(f"analysis-{name}", THREADS, example.with_failures(), "failing"),
                    run, THREADS)


def numbers(entry: Any) -> list[float]:
    """The finite numbers anywhere in a result entry, but its counts."""
    if isinstance(entry, dict):
        return [x for value in entry.values() for x in numbers(value)]
    if isinstance(entry, list):
        return [x for value in entry for x in numbers(value)]
    return [entry] if isinstance(entry, float) and np.isfinite(entry) else []


def quantity_names(run: Run, example: Example) -> set[str]:
    """The quantity columns of runs.csv."""
    fixed = {*CSV_FIXED, *example.study["parameters"]}
    return set(run.rows[0]) - fixed


STEERING = [name for name, example in ANALYSES.items() if example.failures == "steers"]


@pytest.mark.slow
@pytest.mark.parametrize("name", STEERING)
def test_a_fit_whose_every_run_fails_says_so(runs, name):
    example = ANALYSES[name].with_failures()
    example = Example(merged(example.study, {"parameters": {"a": {"nominal": 0.95}}}),
                      example.files, None, example.failures)
    results = runs.get(f"analysis-{name}", example=example, variant="failed-start").analysis[
        "results"]
    assert results["converged"] is False
    assert any("every run" in note for note in results["notes"]), results["notes"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in ALL if name != "python-vectorized"])
def test_the_report_is_rebuilt_from_analysis_json_and_the_store_alone(runs, name, tmp_path):
    run = runs.get(name)
    alone = tmp_path / "alone"
    alone.mkdir()
    for file in ("study.yaml", "analysis.json", "runs.sqlite"):
        shutil.copy(run.out / file, alone / file)
    away = run.study.parent.with_name(run.study.parent.name + "-away")
    run.study.parent.rename(away)  # the study, its model files and runs.csv are gone meanwhile
    try:
        report = rebuild_report(alone)
    finally:
        away.rename(run.study.parent)
    assert report.read_text() == (run.out / "report.md").read_text()
    figures = sorted(p.name for p in (run.out / "figures").glob("*"))
    assert sorted(p.name for p in (alone / "figures").glob("*")) == figures


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ALL))
def test_analysis_json_follows_its_published_schema(runs, name):
    """Every example's analysis.json, each analysis type's among them, against
    schemas/analysis.schema.json: what the model writes is what the schema says."""
    assert analysis_schema_problems(runs.get(name).out / "analysis.json") == []


TEXTS = ("error", "warnings", "notes", "message", "note", "objective")  # analysis.json's prose


def hostile(value: Any, names: dict[str, str], prose: bool = False) -> Any:
    """analysis.json (or a part) as a crafted folder could hold it: every name renamed, a payload
    after every text of its prose."""
    if isinstance(value, dict):
        pair = {"initial", "final"} <= set(value)  # a value before and after, not a quantity
        return {k if pair else names.get(k, k): hostile(v, names, k in TEXTS)
                for k, v in value.items()}
    if isinstance(value, list):
        return [hostile(v, names, prose) for v in value]
    if isinstance(value, str):
        return f"{value}{PAYLOAD}" if prose else names.get(value, value)
    return value


def with_copies(mapping: dict, keys: list[str], copies: int) -> dict:
    """`mapping` with each of `keys` copied `copies` times after every original key."""
    return {**mapping, **{f"{k}~{i}": mapping[k] for i in range(2, copies + 2) for k in keys
                          if k in mapping}}


@pytest.mark.slow
@pytest.mark.parametrize("name", [*(f"analysis-{kind}" for kind in ANALYSES),
                                  "optimize-bayesian"])  # a method with a report of its own
def test_the_report_shows_every_name_and_text_it_did_not_write_as_text(runs, name, tmp_path,
                                                                        monkeypatch):
    """The analysis's report of a crafted folder, whose names (parameters, quantities, outputs)
    and prose (errors, warnings, notes, messages) each hold a PAYLOAD: escaped in report.md,
    inert in report.html. Of more quantities than a report draws, it draws the figures of as
    many as it draws (Figures.draws), and says so."""
    from studyrun.blocks.quantities import Quantities
    from studyrun.plan.runs import read_outcome
    from studyrun.results.report import wide
    from studyrun.results.report.build import write_report
    from studyrun.store.run_store import RunStore

    run = runs.get(name)
    loaded = load_study(run.out / "study.yaml", check=False)
    study, analysis = loaded.study, run.analysis
    outcome = None
    if not study.analysis.iterative:  # read as `studyrun report` reads it
        with RunStore.open_readonly(run.out / "runs.sqlite") as store:
            outcome = read_outcome(plan_study(loaded), store, Quantities(study.quantities),
                                   study.analysis, loaded.context, series=False)
    outputs = getattr(study.analysis, "outputs", None) or []
    per_quantity = [k for k, v in analysis["results"].items() if isinstance(v, dict) and (
        k in (study.quantities or {}) or k in outputs or outcome is not None and k in outcome.values)]
    names = {n: f"{n}{PAYLOAD}" for n in [*study.parameters, *(study.quantities or {}),
                                          *outputs, *per_quantity]}
    crafted = hostile(analysis, names)
    study = study.model_copy(update={
        "description": f"{PAYLOAD}\n\n[r]: javascript:alert(6)",
        "parameters": {names[n]: p for n, p in study.parameters.items()},
        "quantities": {names[n]: text for n, text in (study.quantities or {}).items()} or None})
    if outcome is not None:
        design = outcome.design
        outcome = dataclasses.replace(outcome, values={names.get(k, k): v for k, v in
                                                       outcome.values.items()},
                                      design=dataclasses.replace(
                                          design, names=[names[n] for n in design.names],
                                          info=hostile(design.info, names)))
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    write_report(tmp_path / "a", study, crafted, outcome)
    report = (tmp_path / "a" / "report.md").read_text()
    page = (tmp_path / "a" / "report.html").read_text()
    for renderer, html in views(report).items():
        assert live(html) == [], renderer
    assert live(page, "var LONG = ") == []
    assert PAYLOAD in text_of(page) and "The figures show the first" not in report

    if not per_quantity:
        return
    quantities = [names[k] for k in per_quantity]
    crafted["results"] = with_copies(crafted["results"], quantities, 2)
    if outcome is not None:
        outcome = dataclasses.replace(outcome, values=with_copies(outcome.values, quantities, 2))
    monkeypatch.setattr(wide, "QUANTITIES_DRAWN", len(quantities))
    write_report(tmp_path / "b", study, crafted, outcome)
    drawn = {folder: sorted(p.name for p in (tmp_path / folder / "figures").glob("*.png"))
             for folder in ("a", "b")}
    assert drawn["b"] == drawn["a"]  # the originals' figures, none of the copies'
    assert (f"The figures show the first {len(quantities)} of the {3 * len(quantities)} "
            "quantities") in (tmp_path / "b" / "report.md").read_text()
