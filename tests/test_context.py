"""Specs are frozen: loading, checking, planning and running a study leave it as validated, and
what an analysis runs with (the model as prepared, the defaults, the folder) is its context."""

from __future__ import annotations

import pytest
from conftest import STUDIES
from pydantic import BaseModel, ValidationError

from studyrun.commands import pipeline
from studyrun.plan.describe import describe_plan
from studyrun.plan.study import identity_record, plan_study
from studyrun.study.loading import include_files, load_study, read_yaml, validate
from studyrun.study.spec import Study
from studyrun.study.spec.checks import check_study


def as_validated(path) -> dict:
    """The study file validated afresh, nothing else done with it."""
    return validate(Study, include_files(read_yaml(path))).model_dump()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["logistic-calibrate", "logistic-local", "flowers-optimize"])
def test_loading_checking_planning_and_running_leave_the_study_as_validated(name, tmp_path,
                                                                           monkeypatch):
    path = STUDIES / f"{name}.yaml"
    loaded = load_study(path)
    assert loaded.study.model_dump() == as_validated(path)
    assert check_study(loaded.study, loaded.context) == []
    plan = plan_study(loaded)
    identity_record(loaded)
    if not loaded.study.analysis.iterative:
        settings = pipeline.settings_for(loaded.study)
        assert plan.size > 1 and describe_plan(loaded, plan, settings)
    monkeypatch.setattr(pipeline, "load_study", lambda _: loaded)  # run this very object
    analysis = pipeline.run_study(path, tmp_path / "out", quiet=True)
    assert analysis["runs"]["succeeded"] == analysis["runs"]["planned"] > 0
    assert loaded.study.model_dump() == as_validated(path)


def test_local_runs_its_tightened_model_while_the_study_keeps_its_own(tmp_path):
    loaded = load_study(STUDIES / "logistic-local.yaml")
    model, context = loaded.study.model, loaded.context
    assert context.model.rtol < model.rtol and context.model.atol < model.atol
    assert context.notes and "rtol" in context.notes[0]
    assert plan_study(loaded).design.info["notes"][:1] == list(context.notes)
    assert identity_record(loaded)["model"] != identity_record(
        load_study(STUDIES / "logistic-calibrate.yaml"))["model"]


def test_a_spec_cannot_be_assigned_to():
    study = load_study(STUDIES / "logistic-calibrate.yaml").study
    cluster = load_study(STUDIES / "cluster-slurm.yaml").study.execution.scheduler
    for spec, key, value in [(study, "seed", 1), (study.model, "rtol", 1e-3),
                             (study.model.time, "stop", 1.0), (study.analysis, "method", "trf"),
                             (study.analysis.data, "file", "elsewhere.csv"),
                             (study.analysis.mcmc, "chains", 2),
                             (study.parameters["rate"], "nominal", 0.3),
                             (study.parameters["initial_population"], "value", 0.2),
                             (study.execution, "workers", 3), (cluster, "cores", 8)]:
        with pytest.raises(ValidationError, match="frozen"):
            setattr(spec, key, value)
    assert study.model_dump() == as_validated(STUDIES / "logistic-calibrate.yaml")


def spec_classes(cls: type[BaseModel], seen: set) -> None:
    """Every pydantic model a study is made of (subclasses of the unions' members included)."""
    if cls in seen:
        return
    seen.add(cls)
    for field in cls.model_fields.values():
        for inner in walk_types(field.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                spec_classes(inner, seen)


def walk_types(annotation) -> list:
    found = [annotation]
    for arg in getattr(annotation, "__args__", ()) or ():
        found += walk_types(arg)
    for meta in getattr(annotation, "__metadata__", ()) or ():
        found += walk_types(meta)
    return found


def test_every_spec_class_is_frozen_and_keeps_no_private_state():
    classes: set = set()
    spec_classes(Study, classes)
    names = {cls.__name__ for cls in classes}
    assert {"Study", "Calibrate", "Local", "Optimize", "DataBlock", "Ode", "Pysd", "Uniform",
            "Fixed", "Bounds", "Execution", "Cluster", "Mcmc", "PartitionSpec"} <= names
    for cls in classes:
        assert cls.model_config.get("frozen") is True, cls.__name__
        assert not cls.__private_attributes__, cls.__name__
