"""The pysd model type, with a stand-in for PySD (an optional dependency not installed here)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from studyrun.errors import StudyError
from studyrun.models.base import RunContext
from studyrun.models.pysd import Pysd, plain_name


class FakeModel:
    """Newton's teacup: T' = (room - T) / characteristic_time, Euler at step 0.125."""

    loads = 0

    def __init__(self) -> None:
        FakeModel.loads += 1
        self.ran = False

    def run(self, params, progress=False, final_time=10.0, time_step=0.125, saveper=1.0,
            return_columns=None, flatten_output=False):
        assert flatten_output
        assert not self.ran, "a model object must not be reused"
        self.ran = True
        tau = params.get("Characteristic Time", 10.0)
        if tau <= 0:
            raise ValueError("characteristic time must be positive")
        temperature, rows, t = 180.0, [], 0.0
        steps = int(round(final_time / time_step))
        stride = int(round(saveper / time_step))
        for k in range(steps + 1):
            if k % stride == 0:
                rows.append((t, temperature, (70 - temperature) / tau))
            temperature += time_step * (70 - temperature) / tau
            t = (k + 1) * time_step
        frame = pd.DataFrame([r[1:] for r in rows], index=[r[0] for r in rows],
                             columns=["Teacup Temperature", "Heat Loss to Room"])
        return frame[return_columns] if return_columns else frame


@pytest.fixture
def fake_pysd(monkeypatch, tmp_path):
    module = types.ModuleType("pysd")
    translated = []

    def read_vensim(path):
        translated.append(path)
        Path(path).with_suffix(".py").write_text("# translated\n")

    module.read_vensim = read_vensim
    module.load = lambda path: FakeModel()
    monkeypatch.setitem(sys.modules, "pysd", module)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    (tmp_path / "teacup.mdl").write_text("{UTF-8}\n")
    module.translated = translated
    return module


def test_runs_get_fresh_models_and_plain_names(fake_pysd, tmp_path):
    spec = Pysd.model_validate({"type": "pysd", "file": "teacup.mdl", "time": {"final_time": 5}})
    assert spec.check(tmp_path) == []
    evaluator = spec.build(tmp_path)
    assert fake_pysd.translated and (tmp_path / "teacup.py").is_file()
    before = FakeModel.loads
    out = evaluator({"Characteristic Time": np.array([5.0, 10.0, -1.0])},
                    RunContext(run_ids=np.arange(3)))
    assert FakeModel.loads - before == 3
    assert out.time.tolist() == [0, 1, 2, 3, 4, 5]
    assert set(out.series) == {"teacup_temperature", "heat_loss_to_room"}
    assert out.series["teacup_temperature"][0, -1] < out.series["teacup_temperature"][1, -1]
    assert out.errors[:2] == [None, None]
    assert "characteristic time must be positive" in out.errors[2]
    assert np.isnan(out.series["teacup_temperature"][2]).all()


def test_translation_is_reused_until_the_model_changes(fake_pysd, tmp_path):
    spec = Pysd.model_validate({"type": "pysd", "file": "teacup.mdl"})
    spec.build(tmp_path)
    spec.build(tmp_path)
    assert len(fake_pysd.translated) == 1
    assert spec.dependencies(tmp_path) == {"teacup.mdl": tmp_path / "teacup.mdl"}


def test_missing_file_and_missing_pysd_are_problems(monkeypatch, tmp_path):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    spec = Pysd.model_validate({"type": "pysd", "file": "nowhere.mdl"})
    paths = {p.path: p.message for p in spec.check(tmp_path)}
    assert "no such file" in paths["file"] and "pip install" in paths["type"]
    with pytest.raises(StudyError):
        spec.build(tmp_path)
    bad = Pysd.model_validate({"type": "pysd", "file": "model.txt"})
    assert any("unknown model file type" in p.message for p in bad.check(tmp_path))


def test_plain_names():
    assert plain_name("Teacup Temperature") == "teacup_temperature"
    assert plain_name("stock[A,B]") == "stock_a_b"
    assert plain_name("3 things") == "v_3_things"
