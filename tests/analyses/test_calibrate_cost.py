"""FME modCost against numbers worked out by hand; data files and their located mistakes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import run_cli, write_study

import studyrun
from studyrun.analyses.calibrate.cost import CostFunction
from studyrun.analyses.calibrate.data import DataBlock, read_blocks
from studyrun.core.errors import StudyError

TIME = np.array([0.0, 1, 2, 3, 4])
SERIES = {"A": TIME[None, :].copy(), "B": TIME[None, :] ** 2}  # A = t, B = t^2 on the grid
LONG = "name,time,value,sd\nA,0.5,1.0,0.5\nA,2,1.5,1\nA,3.5,3,2\nB,1.5,2,1\nB,3,10,2\n"
WIDE = "time,A,B\n0.5,1.0,\n1.5,,2\n2,1.5,NA\n3,,10\n3.5,3,\n"
# model at the observations: A 0.5, 2, 3.5; B (1 + 4)/2 = 2.5 and 9
# residuals mod - obs: A -0.5, 0.5, 0.5 (sum of squares 0.75); B 0.5, -1 (1.25)
LOG2PI = math.log(2 * math.pi) / 2
SD_A2, SD_B2 = 13 / 12, 32.0  # variances of A's (1, 1.5, 3) and B's (2, 10) observations
MEAN_A, MEAN_B = 11 / 6, 6.0  # mean |obs|
CASES = {  # weight -> (SSR_A, SSR_B, sum of log err)
    "none": (0.75, 1.25, 0.0),
    "std": (0.75 / SD_A2, 1.25 / SD_B2, 1.5 * math.log(SD_A2) + math.log(SD_B2)),
    "mean": (0.75 / MEAN_A ** 2, 1.25 / MEAN_B ** 2, 3 * math.log(MEAN_A) + 2 * math.log(MEAN_B)),
}


def cost_of(tmp_path, text, **block):
    (tmp_path / "obs.csv").write_text(text)
    data = read_blocks([DataBlock(file=str(tmp_path / "obs.csv"), **block)], tmp_path)
    costs = CostFunction(data)
    return costs, costs.compute(TIME, SERIES)


@pytest.mark.parametrize("layout", ["long", "wide"])
@pytest.mark.parametrize("weight", ["none", "std", "mean"])
@pytest.mark.parametrize("scale_var", [False, True])
def test_modcost_by_hand(tmp_path, layout, weight, scale_var):
    text = LONG if layout == "long" else WIDE
    costs, c = cost_of(tmp_path, text, format=layout, weight=weight, scale_var=scale_var)
    ssr_a, ssr_b, log_err = CASES[weight]
    table = costs.variables_from({"ssr": c.ssr, "ssr_unweighted": c.ssr_unweighted})
    assert table["A"]["N"] == 3 and table["B"]["N"] == 2
    assert table["A"]["SSR"] == pytest.approx(ssr_a) and table["B"]["SSR"] == pytest.approx(ssr_b)
    assert table["A"]["SSR_unweighted"] == pytest.approx(0.75)
    assert table["B"]["SSR_unweighted"] == pytest.approx(1.25)
    scale_a, scale_b = (1 / 3, 1 / 2) if scale_var else (1, 1)
    assert table["A"]["scale"] == pytest.approx(scale_a)
    assert c.cost[0] == pytest.approx(scale_a * ssr_a + scale_b * ssr_b)
    assert c.minlogp[0] == pytest.approx((ssr_a + ssr_b) / 2 + log_err + 5 * LOG2PI)


@pytest.mark.parametrize("scale_var", [False, True])
def test_modcost_with_an_error_column(tmp_path, scale_var):
    costs, c = cost_of(tmp_path, LONG, err="sd", scale_var=scale_var)
    # weighted residuals: A -1, 0.5, 0.25; B 0.5, -0.5
    ssr_a, ssr_b = 1 + 0.25 + 0.0625, 0.5
    assert c.ssr[0] == pytest.approx([ssr_a, ssr_b])
    assert c.ssr_unweighted[0] == pytest.approx([0.75, 1.25])
    expected = ssr_a / 3 + ssr_b / 2 if scale_var else ssr_a + ssr_b
    assert c.cost[0] == pytest.approx(expected)
    log_err = math.log(0.5) + math.log(2) + math.log(2)
    assert c.minlogp[0] == pytest.approx((ssr_a + ssr_b) / 2 + log_err + 5 * LOG2PI)
    rows = costs.residual_table(c)
    assert rows[0] == {"name": "A", "x": 0.5, "obs": 1.0, "mod": 0.5, "weight": 2.0,
                       "res_unweighted": -0.5, "res": -1.0}


def test_map_window_and_two_files_add_up(tmp_path):
    (tmp_path / "one.csv").write_text("time,a_obs\n0.5,1\n2,1.5\n3.5,3\n")
    (tmp_path / "two.csv").write_text("name,time,value\nA,1,2\nB,3,10\n")
    data = read_blocks([DataBlock(file=str(tmp_path / "one.csv"), format="wide", map={"a_obs": "A"},
                                  window=(0, 3)),
                        DataBlock(file="two.csv")], tmp_path)
    costs = CostFunction(data)
    c = costs.compute(TIME, SERIES)
    assert [t.key for t in costs.terms] == ["a_obs", "A", "B"]
    assert [t.output for t in costs.terms] == ["A", "A", "B"]
    assert c.ssr[0] == pytest.approx([0.5, 1.0, 1.0])  # window drops x = 3.5
    assert c.cost[0] == pytest.approx(2.5)


def test_a_repeated_variable_gets_a_numbered_key(tmp_path):
    (tmp_path / "one.csv").write_text("name,time,value\nA,1,2\n")
    blocks = [DataBlock(file=str(tmp_path / "one.csv"))] * 2
    assert [t.key for t in CostFunction(read_blocks(blocks, tmp_path)).terms] == ["A", "A[2]"]


@pytest.mark.parametrize("text, block, where, message", [
    ("name,time,value\nA,1,2\nA,two,3\n", {}, ":3:3", "x 'two' in column 'time' is not a number"),
    ("name,time,value\nA,1,2\nA,\"2\",x\n", {}, ":3:7", "value 'x' in column 'value'"),
    ("name,t,value\nA,1,2\n", {}, ":1:1", "no column 'time' (data.x)"),
    ("name,time,value,sd\nA,1,2,0\n", {"err": "sd"}, ":2:7", "error 0 must be above 0"),
    ("time,A\n1,2\n", {"format": "wide", "weight": "std"}, ":1:6", "weight: std needs"),
    ("name,time,value\n,1,2\n", {}, ":2:1", "no variable name"),
])
def test_data_mistakes_are_located_in_the_csv(tmp_path, text, block, where, message):
    path = tmp_path / "obs.csv"
    path.write_text(text)
    with pytest.raises(StudyError) as error:
        read_blocks([DataBlock(file=str(path), **block)], tmp_path)
    assert f"obs.csv{where}: " in str(error.value) and message in str(error.value)


MODEL = '''
import numpy as np

def series(a=1.0, b=1.0):
    t = np.linspace(0, 4, 5)
    return {"time": t, "A": a * t, "B": b * t ** 2}
'''

STUDY = """
name: handmade
model: {type: python, function: "handmade:series"}
parameters:
  a: {bounds: [0.1, 3], nominal: 1}
  b: {bounds: [0.1, 3], nominal: 1}
analysis:
  type: calibrate
  data: {file: obs.csv, err: sd}
execution: {scheduler: sync}
"""


@pytest.mark.slow
def test_initial_cost_through_the_pipeline_matches_the_hand_computation(tmp_path):
    (tmp_path / "handmade.py").write_text(MODEL)
    (tmp_path / "obs.csv").write_text(LONG)
    result = studyrun.run(write_study(tmp_path, STUDY), tmp_path / "out", report=False).results
    assert result["cost"]["initial"] == pytest.approx(1.8125)
    assert result["minlogp_initial"] == pytest.approx(1.8125 / 2 + math.log(2) + 5 * LOG2PI)
    assert result["cost"]["final"] < result["cost"]["initial"]
    assert result["variables"]["A"]["N"] == 3 and result["variables"]["B"]["N"] == 2
    # linear in a and b: the weighted least-squares answers in closed form
    a = (0.5 * 1 / 0.25 + 2 * 1.5 / 1 + 3.5 * 3 / 4) / (0.25 / 0.25 + 4 / 1 + 12.25 / 4)
    b = (2.5 * 2 / 1 + 9 * 10 / 4) / (6.25 / 1 + 81 / 4)
    assert result["parameters"]["a"]["estimate"] == pytest.approx(a, rel=1e-6)
    assert result["parameters"]["b"]["estimate"] == pytest.approx(b, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("change, where, message", [
    ("data: {file: obs.csv, err: sd}", "obs.csv:2:1", "observed variable 'C' is not an output"),
    ("data: {file: obs.csv, err: sd}", "obs.csv:3:3", "x = 9 of 'C' lies outside the model's time span"),
])
def test_data_against_the_model_from_the_command_line(tmp_path, change, where, message):
    (tmp_path / "obs.csv").write_text("name,time,value,sd\nC,1,1,1\nC,9,1,1\n")
    text = STUDY.replace('type: python, function: "handmade:series"',
                         "type: ode, states: {A: 0}, rates: {A: a}, constants: {a: 1, b: 1}, "
                         "time: {start: 0, stop: 4, step: 1}").replace("data: {file: obs.csv, err: sd}", change)
    (tmp_path / "obs.csv").write_text("name,time,value,sd\nC,1,1,1\nA,9,1,1\n")
    if "not an output" in message:
        (tmp_path / "obs.csv").write_text("name,time,value,sd\nC,1,1,1\n")
    else:
        message = message.replace("'C'", "'A'")
    done = run_cli("validate", write_study(tmp_path, text))
    assert done.returncode == 2, done.stdout
    assert where in done.stderr and message in done.stderr, done.stderr


@pytest.mark.slow
def test_a_python_models_time_span_is_checked_after_its_first_run(tmp_path):
    (tmp_path / "handmade.py").write_text(MODEL)
    (tmp_path / "obs.csv").write_text("name,time,value\nA,1,1\nA,9,2\n")
    done = run_cli("run", "--no-report", write_study(tmp_path, STUDY.replace(", err: sd", "")),
                   "--out", tmp_path / "out", "--quiet")
    assert done.returncode == 2, done.stderr
    assert "obs.csv:3:3: x = 9 of 'A' lies outside the model's time span [0, 4]" in done.stderr


FLAKY = '''
import numpy as np

def series(a=1.0, b=1.0):
    if a > 2.5:
        raise ValueError("a is too large")
    t = np.linspace(0, 4, 5)
    return {"time": t, "A": a * t, "B": b * t ** 2}
'''


@pytest.mark.slow
def test_failed_runs_count_as_an_infinite_cost_when_the_study_continues(tmp_path):
    (tmp_path / "handmade.py").write_text(FLAKY)
    (tmp_path / "obs.csv").write_text(LONG)
    text = STUDY.replace("err: sd}", "err: sd}\n  method: differential-evolution\n  generations: 15") \
        .replace("scheduler: sync}", "scheduler: sync, on_failure: continue}")
    result = studyrun.run(write_study(tmp_path, text), tmp_path / "out", report=False)
    assert result.analysis["runs"]["failed"] > 0
    a = (0.5 * 1 / 0.25 + 2 * 1.5 / 1 + 3.5 * 3 / 4) / (0.25 / 0.25 + 4 / 1 + 12.25 / 4)
    assert result.results["parameters"]["a"]["estimate"] == pytest.approx(a, rel=1e-5)


@pytest.mark.slow
def test_a_missing_data_file_is_located_in_the_study(tmp_path):
    (tmp_path / "handmade.py").write_text(MODEL)
    text = STUDY.replace("data: {file: obs.csv, err: sd}", "data:\n    file: nothere.csv\n    err: sd")
    done = run_cli("validate", write_study(tmp_path, text))
    assert done.returncode == 2
    assert "study.yaml:9:5: analysis.data.file: data file not found" in done.stderr, done.stderr
