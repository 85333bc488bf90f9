"""Scenario discovery (`type: scenarios`): PRIM recovers an exact box, keeps the right
dimensions with flipped labels, finds two boxes by covering and restricts a categorical
parameter as a set; CART recovers an axis-aligned rule; failed runs are counted apart; the
command line end to end (validate, plan, run, report --box), batch sizes, SIGKILL, `from:`; and
located mistakes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import STUDIES, killed_and_resumed, run_cli, write_study

import studyrun
from studyrun.analyses.scenarios.cart import cart
from studyrun.analyses.scenarios.condition import condition
from studyrun.analyses.scenarios.prim import Data, covering, quantile

NAMES = [f"x{i}" for i in range(1, 6)]
EXAMPLE = "capacity-plan-scenarios"


def uniform(seed: int, n: int = 5000) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 5))


def prim(x, y, threshold, boxes=1, mass_min=0.05, categorical=()):
    return covering(Data(NAMES, x, y, frozenset(categorical)), threshold, 0.05, 0.05, mass_min,
                    boxes, None)


def test_prim_recovers_an_exact_box():
    x = uniform(1)
    y = (x[:, 0] > 0.7) & (x[:, 1] < 0.3)
    (box,), _ = prim(x, y, 1.0)
    assert box["restricted"] == ["x1", "x2"]
    assert box["limits"]["x1"]["lower"] == pytest.approx(0.7, abs=0.02)
    assert box["limits"]["x2"]["upper"] == pytest.approx(0.3, abs=0.02)
    assert box["density"] == 1 and box["coverage"] > 0.95
    assert box["trajectory"][box["step"]]["coverage"] == box["coverage"]
    assert box["trajectory"][0]["restricted"] == [] and box["trajectory"][0]["mass"] == 1
    assert box["limits"]["x1"]["p_lower"] < 1e-10 and "p_upper" not in box["limits"]["x1"]


# EMA Workbench 2.5.3's prim.Prim(x, y, threshold=1).find_box() on uniform(1) (as
# benchmarks/bench_scenarios.py runs it): steps of its trajectory, (coverage, density, x1's lower
# limit and its quasi-p-value, x2's upper limit and its quasi-p-value).
EMA_STEPS = {10: (1.0, 0.15183946488294314, 0.4051121643590083, 6.635007484779089e-27, None, None),
             30: (1.0, 0.4262910798122066, 0.6872561422641241, 1.737747301549059e-125,
                  0.697555056745315, 2.2405841925907203e-19),
             47: (0.9647577092511013, 1.0, 0.7003885890703695, 9.990700915579025e-227,
                  0.286734636808053, 2.1172947052836332e-222)}


def test_the_trajectory_is_ema_workbench_s():
    x = uniform(1)
    (box,), _ = prim(x, (x[:, 0] > 0.7) & (x[:, 1] < 0.3), 1.0)
    trajectory = box["trajectory"]
    assert len(trajectory) == 48
    for step, (coverage, density, low, p_low, high, p_high) in EMA_STEPS.items():
        found = trajectory[step]
        assert (found["coverage"], found["density"]) == pytest.approx((coverage, density), rel=1e-12)
        assert found["limits"]["x1"]["lower"] == pytest.approx(low, rel=1e-12)
        assert found["limits"]["x1"]["p_lower"] == pytest.approx(p_low, rel=1e-6)
        if high is not None:
            assert found["limits"]["x2"]["upper"] == pytest.approx(high, rel=1e-12)
            assert found["limits"]["x2"]["p_upper"] == pytest.approx(p_high, rel=1e-6)


def test_flipped_labels_keep_the_box_on_x1_and_x2():
    x = uniform(2)
    flipped = np.random.default_rng(5).random(len(x)) < 0.1
    y = ((x[:, 0] > 0.7) & (x[:, 1] < 0.3)) ^ flipped
    (box,), _ = prim(x, y, 0.8)
    assert {"x1", "x2"} <= set(box["restricted"])
    for name in set(box["restricted"]) - {"x1", "x2"}:
        assert min(v for k, v in box["limits"][name].items() if k.startswith("p_")) > 0.05
    assert box["limits"]["x1"]["p_lower"] < 1e-10 and box["limits"]["x2"]["p_upper"] < 1e-10
    # the whole trajectory is kept: a later step restricting more is there to choose
    assert len(box["trajectory"]) > box["step"]


def test_covering_finds_two_separate_boxes():
    x = uniform(3)
    a = (x[:, 0] > 0.8) & (x[:, 1] > 0.5)
    b = (x[:, 2] > 0.7) & (x[:, 3] > 0.7) & (x[:, 0] < 0.8)
    boxes, notes = prim(x, a | b, 1.0, boxes=3, mass_min=0.02)
    assert len(boxes) == 2 and "does not reach the threshold" in notes[0]
    first, second = (box["limits"] for box in boxes)
    assert first["x1"]["lower"] == pytest.approx(0.8, abs=0.02)
    assert first["x2"]["lower"] == pytest.approx(0.5, abs=0.03)
    assert second["x3"]["lower"] == pytest.approx(0.7, abs=0.02)
    assert second["x4"]["lower"] == pytest.approx(0.7, abs=0.02)
    assert all(box["density"] == 1 for box in boxes)
    assert sum(box["coverage"] for box in boxes) > 0.9


def test_a_categorical_parameter_is_restricted_as_a_set():
    x = uniform(4)
    x[:, 4] = np.random.default_rng(6).integers(1, 5, len(x))  # categories 1..4
    y = (x[:, 0] > 0.5) & np.isin(x[:, 4], [1, 3])
    (box,), _ = prim(x, y, 1.0, categorical=["x5"])
    assert box["limits"]["x5"]["values"] == [1.0, 3.0]
    assert box["limits"]["x5"]["p_value"] < 1e-10
    assert box["limits"]["x1"]["lower"] == pytest.approx(0.5, abs=0.025)  # one peel step


def test_the_peel_quantile_moves_past_ties_as_ema_workbench_does():
    assert quantile(np.array([1.0, 2, 3, 4, 5]), 0.3) == 2.5
    assert quantile(np.array([1.0, 2, 3, 4, 5]), 0.25) == 2.5  # an exact index moves on too
    assert quantile(np.array([1.0, 1, 1, 2]), 0.05) == 1.5  # past the tied 1s
    assert quantile(np.array([1.0, 2, 2, 2]), 0.95) == 1.5


def test_cart_recovers_an_axis_aligned_rule():
    x = uniform(1)
    y = (x[:, 0] > 0.7) & (x[:, 1] < 0.3)
    found = cart(Data(NAMES, x, y, frozenset()), 6, 0.05)
    assert found["depth"] == 2
    best = found["leaves"][0]
    assert best["predicted"] == "of interest" and best["density"] == 1
    assert best["restricted"] == ["x1", "x2"] and best["coverage"] > 0.99
    assert best["limits"]["x1"]["lower"] == pytest.approx(0.7, abs=0.005)
    assert best["limits"]["x2"]["upper"] == pytest.approx(0.3, abs=0.005)


def test_the_condition_joins_comparisons_and_leaves_undecided_runs_apart():
    test = condition("not (cost < 100) and reliability < 0.9 or cost > 1e6")
    hit, decided = test.evaluate({"cost": np.array([150, 50, 150, np.nan, np.inf]),
                                  "reliability": np.array([0.5, 0.5, 0.95, 0.1, 0.1])}, 5)
    assert hit.tolist() == [True, False, False, False, False]
    assert decided.tolist() == [True, True, True, False, False]
    assert test.names == {"cost", "reliability"}


@pytest.mark.parametrize("text, words", [
    ("cost", "is not a condition"), ("cost > 1 and reliability", "is not a condition"),
    ("__import__('os') > 1", "names starting with '_'"), ("cost > 1 and", "invalid syntax"),
    ("not " * 4000 + "cost > 1", "nested too deeply"), ("cost > 1 or " * 200 + "cost > 1",
                                                       "more than 100 comparisons"),
])
def test_a_bad_condition_is_refused(text, words):
    with pytest.raises(ValueError, match=words):
        condition(text)


def example(folder, **changes):
    shutil.copy(STUDIES / "capacity_plan.py", folder / "capacity_plan.py")
    text = (STUDIES / f"{EXAMPLE}.yaml").read_text()
    for old, new in changes.items():
        assert old.replace("_", " ") in text or old in text, old
        text = text.replace(old, new)
    return write_study(folder, text)


def test_the_example_finds_the_known_region_end_to_end(tmp_path):
    path = example(tmp_path)
    for command in ("validate", "plan"):
        done = run_cli(command, path, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    done = run_cli("run", path, "--out", tmp_path / "out", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    results = json.loads((out / "analysis.json").read_text())["results"]
    box = results["boxes"][0]
    assert box["restricted"] == ["demand_growth", "capacity_cost", "supplier"]
    assert box["limits"]["demand_growth"]["lower"] == pytest.approx(0.0259, abs=0.002)
    assert box["limits"]["supplier"]["values"] == [1, 3]
    assert box["density"] >= 0.8
    report = (out / "report.md").read_text()
    assert "`cost > 100 and reliability < 0.9`" in report
    assert "cost &gt; 100" in (out / "report.html").read_text()
    for name in ("trajectory", "limits", "pairs"):
        assert (out / "figures" / f"scenarios-{name}-1.png").is_file()
    # another box from the trajectory, without running again: analysis.json unchanged
    before = (out / "analysis.json").read_bytes()
    done = run_cli("report", out, "--box", "5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "| 5 | 1 |" in (out / "report.md").read_text()
    assert "Box 1 is step 5" in (out / "report.md").read_text()
    assert (out / "analysis.json").read_bytes() == before
    last = len(box["trajectory"])
    done = run_cli("report", out, "--box", str(last), cwd=tmp_path)
    assert done.returncode == 2 and f"steps 0 to {last - 1}" in done.stderr
    assert "Traceback" not in done.stderr


def test_box_chosen_in_the_study_and_cart(tmp_path):
    path = example(tmp_path, **{"  boxes: 2": "  boxes: 2\n  box: 3"})
    box = studyrun.run(path, tmp_path / "out", scheduler="sync").results["boxes"][0]
    assert box["step"] == 3 and box == {**box["trajectory"][3], "step": 3,
                                        "trajectory": box["trajectory"]}
    path = example(tmp_path, **{"method: prim": "method: cart", "  threshold: 0.75\n": "",
                                "  boxes: 2\n": ""})
    results = studyrun.run(path, tmp_path / "cart", scheduler="sync").results
    assert results["depth"] >= 2 and results["leaves"][0]["density"] > 0.8
    assert "Classification tree" in (tmp_path / "cart" / "report.md").read_text()
    done = run_cli("report", tmp_path / "cart", "--box", "1", cwd=tmp_path)
    assert done.returncode == 2 and "--box picks a step of a PRIM box" in done.stderr


def test_failed_and_nan_runs_are_counted_apart(tmp_path):
    (tmp_path / "flaky.py").write_text(
        "import math\n"
        "def f(a, b):\n"
        "    if a > 0.9:\n"
        "        raise ValueError('no')\n"
        "    return {'y': math.nan if b > 0.9 else a + b, 'z': math.inf if b < 0.05 else 1.0}\n")
    path = write_study(tmp_path, """
        name: flaky
        seed: 1
        model: {type: python, function: flaky:f}
        parameters: {a: {bounds: [0, 1]}, b: {bounds: [0, 1]}}
        quantities: {y: y, z: z}
        analysis: {type: scenarios, of_interest: "y > 1.2 and z > 0", samples: 400}
        execution: {on_failure: continue}
        """)
    done = studyrun.run(path, tmp_path / "out", scheduler="sync", report=False)
    results = done.results
    failed = done.analysis["runs"]["failed"]
    # a NaN or inf quantity fails its run: more runs than those of a > 0.9
    assert results["dropped_runs"] == failed > 0.1 * 400 + 20
    assert results["runs"] + results["dropped_runs"] == 400
    assert "neither of interest nor not" in results["warnings"][0]


def test_no_run_of_interest_every_run_of_interest_and_a_box_past_the_trajectory(tmp_path):
    x = uniform(7, 300)
    (box,), notes = prim(x, np.zeros(300, bool), 0.8, boxes=3)
    assert len(box["trajectory"]) == 1 and box["restricted"] == [] and box["density"] == 0
    assert notes == []
    found = cart(Data(NAMES, x, np.ones(300, bool), frozenset()), 6, 0.05)
    assert found["leaves"] == [] and "nothing for a tree to separate" in found["warnings"][0]
    x[:, 2] = 0.5  # a parameter that never varies in the runs is never restricted
    (box,), _ = prim(x, x[:, 0] > 0.5, 1.0)
    assert "x3" not in box["restricted"] and box["density"] == 1
    path = example(tmp_path, **{"samples: 2000": "samples: 200", "  boxes: 2": "  box: 10000"})
    results = studyrun.run(path, tmp_path / "out", scheduler="sync", report=False).results
    last = len(results["boxes"][0]["trajectory"]) - 1
    assert results["boxes"][0]["step"] == last
    assert any("box: 10000 is beyond the trajectory's last step" in w for w in results["warnings"])
    path = example(tmp_path, **{"samples: 2000": "samples: 50", "cost > 100": "cost > 1e9"})
    results = studyrun.run(path, tmp_path / "none", scheduler="sync", report=False).results
    assert results["runs_of_interest"] == 0 and results["boxes"][0]["restricted"] == []
    assert "no run is of interest" in results["warnings"][0]


def test_a_condition_on_an_output_the_model_does_not_give_is_refused(tmp_path):
    (tmp_path / "one.py").write_text("def f(a):\n    return {'y': a}\n")
    path = write_study(tmp_path, """
        name: one
        model: {type: python, function: one:f}
        parameters: {a: {bounds: [0, 1]}}
        analysis: {type: scenarios, of_interest: "z > 1", samples: 20}
        """)
    done = run_cli("run", "--no-report", path, "--out", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 2 and "'z' is not a quantity of the runs (quantities: y)" in done.stderr
    assert "Traceback" not in done.stderr


def test_results_do_not_depend_on_the_batch_size(tmp_path):
    found = []
    for size in (1, "auto", 64):
        folder = tmp_path / str(size)
        folder.mkdir()
        path = example(folder, **{"samples: 2000": "samples: 300"})
        path.write_text(path.read_text() + f"execution: {{scheduler: sync, batch_size: {size}}}\n")
        studyrun.run(path, folder / "out", report=False)
        found.append(json.loads((folder / "out" / "analysis.json").read_text())["results"])
    assert found[0] == found[1] == found[2]
    assert found[0]["boxes"][0]["restricted"]


@pytest.mark.slow
def test_resumes_after_sigkill_with_the_same_result(tmp_path):
    path = example(tmp_path, **{"vectorized: true": "vectorized: false",
                                "samples: 2000": "samples: 3000"})
    path.write_text(path.read_text() + "execution: {scheduler: sync, batch_size: 50}\n")
    stored, analysis = killed_and_resumed(path, tmp_path / "out", 1000)
    assert 0 < stored < 3000, stored
    assert analysis["runs"]["reused"] >= stored - 100
    fresh = studyrun.run(path, tmp_path / "fresh", report=False)
    assert analysis["results"] == json.loads(json.dumps(fresh.results))


def test_from_a_results_folder_and_a_csv(tmp_path):
    first = example(tmp_path, **{"samples: 2000": "samples: 500"})
    ran = studyrun.run(first, tmp_path / "first", scheduler="sync", report=False)
    again = example(tmp_path, **{"  samples: 2000\n": "  from: first\n"})
    given = studyrun.run(again, tmp_path / "again", scheduler="sync", report=False).results
    assert given == ran.results
    rows = ["demand_growth,capacity_cost,supplier,discount,cost,reliability"]
    rng = np.random.default_rng(0)
    for g, c in rng.random((400, 2)):
        rows.append(f"{0.05 * g},{200 + 400 * c},1,0.03,{0.25 * (200 + 400 * c)},"
                    f"{min(1, 150 / (100 * (1 + 0.05 * g) ** 20))}")
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    csv = example(tmp_path, **{"  samples: 2000\n": "  from: runs.csv\n"})
    box = studyrun.run(csv, tmp_path / "csv", scheduler="sync", report=False).results["boxes"][0]
    assert {"demand_growth", "capacity_cost"} <= set(box["restricted"])


@pytest.mark.parametrize("change, words", [
    (('of_interest: "cost > 100 and reliability < 0.9"', 'of_interest: "cost + 1"'),
     "analysis.of_interest: 'cost + 1' is not a condition"),
    (('of_interest: "cost > 100 and reliability < 0.9"', 'of_interest: "cots > 100"'),
     "analysis.of_interest: 'cots' is not a quantity of the study"),
    (("method: prim", "method: cart"), "threshold is a key of method: prim"),
    (("threshold: 0.75", "threshold: 1.5"), "analysis.threshold"),
    (("samples: 2000", "samples: 2000\n  from: runs.csv"), "give samples (runs to make) or from"),
    (("samples: 2000", "samples: 2000000"), "analysis.samples"),
    (("boxes: 2", "boxes: 2\n  max_depth: 3"), "max_depth is a key of method: cart"),
    (("model:", "x_model:"), "a study needs a model"),
])
def test_mistakes_are_located(tmp_path, change, words):
    path = example(tmp_path, **{change[0]: change[1]})
    done = run_cli("validate", path, cwd=tmp_path)
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 2
