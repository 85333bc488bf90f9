"""The one registry of types (issue 30, point 4): the unions, `studyrun predict`'s dispatch, the
results folder's files and the correlated analyses all come from what the classes declare."""

from __future__ import annotations

import json
import typing

import pytest

from studyrun.commands.open_results import Results
from studyrun.core.errors import StudyError
from studyrun.results import outputs
from studyrun.study.spec import AnalysisUnion, ModelUnion
from studyrun.study.spec.registry import registry


def members(union) -> list[str]:
    return [typing.get_args(cls.model_fields["type"].annotation)[0]
            for cls in typing.get_args(typing.get_args(union)[0])]


def test_the_unions_are_the_registry_in_the_order_users_meet_them():
    assert members(ModelUnion) == list(registry().models) == [
        "python", "command", "ode", "stockflow", "pysd"]
    assert members(AnalysisUnion) == list(registry().analyses) == [
        "montecarlo", "sweep", "sobol", "shapley", "morris", "fast", "rbd_fast", "delta", "pawn",
        "dgsm", "doe", "local", "gradient", "surrogate", "calibrate", "optimize", "reliability",
        "scenarios"]


def test_predict_dispatches_on_what_a_type_declares(tmp_path):
    assert registry().predicting() == ["doe", "surrogate"]
    assert registry().predictor("doe").__module__ == "studyrun.analyses.doe.surface"
    assert registry().predictor("surrogate").__module__ == "studyrun.analyses.surrogate.predict"
    assert registry().predictor("sobol") is None and registry().predictor(["doe"]) is None
    with pytest.raises(StudyError, match="predict needs the results of a doe or surrogate "
                                         "analysis; this folder holds a sobol analysis"):
        Results(tmp_path, {"analysis": "sobol", "results": {}}).predict({"a": 0.5})


def test_another_studys_folder_loses_the_files_its_analysis_wrote(tmp_path):
    assert registry().results_files() == ("residuals.csv", "fitted.csv", "mcmc-samples.csv")
    (tmp_path / "study.yaml").write_text("name: fit\n")
    for name in ("residuals.csv", "fitted.csv", "mcmc-samples.csv", "analysis.json"):
        (tmp_path / name).write_text(json.dumps({}))
    outputs.claim(tmp_path, "name: other\n", fresh=False, files=registry().results_files())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.yaml"]


def test_the_analyses_that_take_correlated_inputs_say_so_on_their_class():
    assert registry().correlated() == ["delta", "montecarlo", "pawn", "reliability", "scenarios",
                                       "shapley", "sobol", "surrogate"]
