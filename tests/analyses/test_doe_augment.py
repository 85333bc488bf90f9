"""Designs that grow (doe `from:` + `augment:`): a fold-over that de-aliases main effects, a
factorial grown into a central composite design, a Latin hypercube grown space-filling; the
earlier runs copied by identity, never made again, and nothing copied once the model changed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas
import pytest
from conftest import run_cli

import studyrun
from studyrun.analyses.doe.augment import augment_lhs

pytestmark = pytest.mark.slow  # every test here runs studies

SEVENS = '''
import os
import numpy as np

def sevens(x1, x2, x3, x4, x5, x6, x7):
    with open(os.path.join(os.path.dirname(__file__), "evaluated.txt"), "a") as log:
        log.write(f"{np.size(x1)}\\n")
    return {"y": 3 * np.asarray(x1, float) + 2 * np.asarray(x2) * np.asarray(x3)}
'''

BOWL = '''
import numpy as np

def bowl(a, b, c):
    x1, x2, x3 = (a - 1) / 1, (b - 15) / 5, c
    return {"y": 1.5 + 2 * x1 - x2 + 0.25 * x3 + 0.75 * x1 * x2 + 0.5 * x1 * x3 - 0.3 * x2 * x3
                 + 3 * x1**2 + 0.4 * x2**2 - x3**2}
'''
BOWL_COEFFICIENTS = {"1": 1.5, "x1": 2.0, "x2": -1.0, "x3": 0.25, "x1*x2": 0.75, "x1*x3": 0.5,
                     "x2*x3": -0.3, "x1^2": 3.0, "x2^2": 0.4, "x3^2": -1.0}
SEVEN_PARAMETERS = "\n".join(f"  x{i}: {{bounds: [-1, 1]}}" for i in range(1, 8))


def study(folder: Path, name: str, model: str, parameters: str, analysis: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\nseed: 3\nmodel: {model}\nparameters:\n{parameters}\n"
                    f"quantities: {{y: y}}\nanalysis: {analysis}\n")
    return path


def run(path: Path, report: bool = False) -> dict:
    """The study run in this process (a changed model file is imported afresh), its
    analysis.json as written."""
    out = path.parent / "results" / path.stem
    studyrun.run(path, out, scheduler="sync", quiet=True, report=report)
    return json.loads((out / "analysis.json").read_text())


def evaluated(folder: Path) -> int:
    """Runs the model has been called on so far (it logs each call's size)."""
    log = folder / "evaluated.txt"
    return sum(map(int, log.read_text().split())) if log.exists() else 0


@pytest.fixture
def fraction(tmp_path: Path) -> Path:
    """A 2^(7-4) resolution III fraction, run: x1 = x2*x3 in it (generators a b ab c ac bc abc)."""
    (tmp_path / "sevens.py").write_text(SEVENS)
    path = study(tmp_path, "fraction", '{type: python, function: "sevens:sevens", vectorized: true}',
                 SEVEN_PARAMETERS, '{type: doe, design: fractional, generators: "a b ab c ac bc abc"}')
    analysis = run(path)
    fit = analysis["results"]["y"]
    assert analysis["design"]["resolution"] == 3
    assert fit["coefficients"]["x1"]["estimate"] == pytest.approx(5.0, abs=1e-12)  # 3 + 2 (x2*x3)
    assert fit["aliases"]["x1"] == {"x2*x3": 1.0, "x4*x5": 1.0, "x6*x7": 1.0}
    assert evaluated(tmp_path) == 8
    return tmp_path


def test_a_fold_over_clears_main_effects_of_two_factor_interactions(fraction):
    folded = study(fraction, "folded", '{type: python, function: "sevens:sevens", vectorized: true}',
                   SEVEN_PARAMETERS, "{type: doe, from: results/fraction, augment: foldover}")
    plan = run_cli("plan", folded, "--out", fraction / "results" / "folded")
    assert plan.returncode == 0, plan.stderr
    assert "grown by foldover" in plan.stdout and "holds 8 of the 16 runs" in plan.stdout
    assert "every run would run" not in plan.stdout  # 8 are copied
    analysis = run(folded, report=True)
    fit = analysis["results"]["y"]
    assert fit["coefficients"]["x1"]["estimate"] == pytest.approx(3.0, abs=1e-12)
    assert all(not chain for chain in fit["aliases"].values())  # every main effect clear of 2FIs
    assert analysis["design"]["resolution"] == 4
    assert analysis["runs"] | {} == {"planned": 16, "succeeded": 16, "failed": 0, "reused": 8,
                                     "adopted": 8}
    assert evaluated(fraction) == 8 + 8  # the earlier runs were not made again
    assert analysis["provenance"]["grows"]["study"] == "fraction"
    before = pandas.read_csv(fraction / "results" / "fraction" / "runs.csv")
    after = pandas.read_csv(fraction / "results" / "folded" / "runs.csv")
    assert after["run.id"][:8].tolist() == before["run.id"].tolist()
    names = [f"x{i}" for i in range(1, 8)]
    np.testing.assert_array_equal(after[names][8:].to_numpy(), -before[names].to_numpy())
    assert "Every estimate is clear" in (fraction / "results" / "folded" / "report.md").read_text()


def test_a_changed_model_reuses_nothing(fraction):
    (fraction / "sevens.py").write_text(SEVENS.replace("3 * np", "3.0 * np"))  # same numbers
    folded = study(fraction, "folded", '{type: python, function: "sevens:sevens", vectorized: true}',
                   SEVEN_PARAMETERS, "{type: doe, from: results/fraction, augment: foldover}")
    analysis = run(folded)
    assert analysis["runs"]["reused"] == 0 and analysis["runs"]["adopted"] == 0
    assert evaluated(fraction) == 8 + 16  # every run made again, with the model as it is now
    assert analysis["results"]["y"]["coefficients"]["x1"]["estimate"] == pytest.approx(3.0, abs=1e-12)


def test_changed_quantities_reuse_nothing(fraction):
    folded = study(fraction, "folded", '{type: python, function: "sevens:sevens", vectorized: true}',
                   SEVEN_PARAMETERS, "{type: doe, from: results/fraction, augment: foldover}")
    folded.write_text(folded.read_text().replace("quantities: {y: y}", "quantities: {y: 2 * y}"))
    analysis = run(folded)
    assert analysis["runs"]["reused"] == 0 and evaluated(fraction) == 8 + 16
    assert analysis["results"]["y"]["coefficients"]["x1"]["estimate"] == pytest.approx(6.0, abs=1e-12)


def test_a_factorial_grown_into_a_ccd_recovers_an_exact_quadratic(tmp_path):
    (tmp_path / "bowl.py").write_text(BOWL)
    model = '{type: python, function: "bowl:bowl", vectorized: true}'
    parameters = "  a: {bounds: [0, 2]}\n  b: {bounds: [10, 20]}\n  c: {bounds: [-1, 1]}"
    factorial = run(study(tmp_path, "factorial", model, parameters, "{type: doe, design: full}"))
    assert factorial["design"]["runs"] == 8
    analysis = run(study(tmp_path, "grown", model, parameters,
                         "{type: doe, from: results/factorial, augment: ccd, center: 2}"))
    assert analysis["design"]["type"] == "ccd" and analysis["design"]["runs"] == 8 + 6 + 2
    assert analysis["runs"]["reused"] == 8
    fit = analysis["results"]["y"]
    assert analysis["design"]["response"] == "quadratic"
    estimates = {term: c["estimate"] for term, c in fit["coefficients"].items()}
    assert estimates == pytest.approx(BOWL_COEFFICIENTS, abs=1e-9)
    assert fit["lack_of_fit"]["df_pure_error"] == 1  # the two centre points


def test_a_latin_hypercube_grows_space_filling(tmp_path):
    (tmp_path / "bowl.py").write_text(BOWL)
    model = '{type: python, function: "bowl:bowl", vectorized: true}'
    parameters = "  a: {bounds: [0, 2]}\n  b: {bounds: [10, 20]}\n  c: {bounds: [-1, 1]}"
    run(study(tmp_path, "cube", model, parameters, "{type: doe, design: lhs, samples: 12}"))
    analysis = run(study(tmp_path, "more", model, parameters,
                         "{type: doe, from: results/cube, augment: lhs}"))
    assert analysis["runs"]["reused"] == 12 and analysis["design"]["runs"] == 24
    assert analysis["design"]["strata"].startswith("one point in each of the 24 strata")
    runs = pandas.read_csv(tmp_path / "results" / "more" / "runs.csv")
    unit = (runs[["a", "b", "c"]].to_numpy() - [0, 10, -1]) / [2, 10, 2]
    for column in unit.T:  # a Latin hypercube of 24: one point in each stratum of every column
        assert sorted(np.floor(column * 24).astype(int)) == list(range(24))
    assert min_distance(unit) >= np.mean([min_distance(fresh_lhs(24, 3, s)) for s in range(20)])


def min_distance(points: np.ndarray) -> float:
    from scipy.spatial.distance import pdist

    return float(pdist(points).min())


def fresh_lhs(n: int, k: int, seed: int) -> np.ndarray:
    from scipy.stats import qmc

    return qmc.LatinHypercube(k, seed=seed).random(n)


@pytest.mark.parametrize("earlier, more", [(10, 5), (10, 10), (7, 20), (5, 1)])
def test_lhs_augmentation_fills_strata_no_earlier_point_occupies(earlier, more):
    rng = np.random.default_rng(earlier * 100 + more)
    unit = fresh_lhs(earlier, 4, earlier)
    added = augment_lhs(unit, more, rng)
    n = earlier + more
    assert added.shape == (more, 4) and np.all((added >= 0) & (added < 1))
    for j in range(4):
        new, old = np.floor(added[:, j] * n), np.floor(unit[:, j] * n)
        assert len(set(new)) == more and not set(new) & set(old)
        if n % earlier == 0:  # each earlier stratum splits evenly: a Latin hypercube on n
            assert len(set(new) | set(old)) == n


def test_wrong_earlier_folders_are_located_errors(fraction):
    model = '{type: python, function: "sevens:sevens", vectorized: true}'
    cases = {
        "missing": ("{type: doe, from: results/nowhere, augment: foldover}", "analysis.from",
                    "no analysis.json"),
        "foldtwice": (None, "analysis.augment", "repeats its runs"),
        "ccd-on-iii": ("{type: doe, from: results/fraction, augment: ccd}", "analysis.augment",
                       "resolution V"),
        "lhs-on-fraction": ("{type: doe, from: results/fraction, augment: lhs}",
                            "analysis.augment", "grows a Latin hypercube"),
        "bounds": ("{type: doe, from: results/fraction, augment: foldover}", "analysis.from",
                   "bounds"),
        "alone": ("{type: doe, augment: foldover}", "analysis", "augment and from go together"),
        "design-too": ("{type: doe, design: ccd, from: results/fraction, augment: foldover}",
                       "analysis", "design do not apply with augment"),
    }
    folded = run(study(fraction, "folded", model, SEVEN_PARAMETERS,
                       "{type: doe, from: results/fraction, augment: foldover}"))
    assert folded["design"]["resolution"] == 4
    paths = {}
    for name, (analysis, _, _) in cases.items():
        analysis = analysis or "{type: doe, from: results/folded, augment: foldover}"
        parameters = (SEVEN_PARAMETERS.replace("x7: {bounds: [-1, 1]}", "x7: {bounds: [-1, 2]}")
                      if name == "bounds" else SEVEN_PARAMETERS)
        paths[name] = study(fraction, name, model, parameters, analysis)
    done = run_cli("validate", *paths.values())  # one command, every file's errors
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    for name, (_, where, words) in cases.items():
        lines = [line for line in done.stderr.splitlines() if f"/{name}.yaml:" in line]
        assert any(f"{name}.yaml:13:" in line and f"{where}:" in line and words in line
                   for line in lines), (name, lines)


def test_a_ccd_grows_only_face_centred():
    from pydantic import ValidationError

    from studyrun.analyses.doe import Doe

    with pytest.raises(ValidationError, match="would leave the parameters' bounds"):
        Doe.model_validate({"type": "doe", "from": "x", "augment": "ccd", "alpha": "rotatable"})
    assert Doe.model_validate({"type": "doe", "from": "x", "augment": "lhs",
                               "samples": 4}).response_model() == "quadratic"
    assert Doe.model_validate({"type": "doe", "from": "x",
                               "augment": "foldover"}).response_model() == "linear"


def test_the_grown_design_is_the_earlier_one_bit_for_bit(tmp_path):
    """Bounds whose coded values do not round-trip: the earlier runs are read from the store, not
    recomputed, so every one keeps its identity."""
    (tmp_path / "bowl.py").write_text(BOWL)
    model = '{type: python, function: "bowl:bowl", vectorized: true}'
    parameters = "  a: {bounds: [0.1, 0.7]}\n  b: {bounds: [10.3, 20.9]}\n  c: {bounds: [-0.3, 1.1]}"
    run(study(tmp_path, "cube", model, parameters, "{type: doe, design: lhs, samples: 9}"))
    analysis = run(study(tmp_path, "more", model, parameters,
                         "{type: doe, from: results/cube, augment: lhs, samples: 4}"))
    assert analysis["runs"]["reused"] == 9


def test_the_examples_grow_a_screen_into_a_ccd(tmp_path):
    """studies/bowl-screen -> bowl-foldover -> bowl-grown-ccd in turn, the last from the command
    line."""
    import shutil

    from conftest import STUDIES

    folder = tmp_path / "studies"
    folder.mkdir()
    for name in ("bowl.py", "bowl-screen.yaml", "bowl-foldover.yaml", "bowl-grown-ccd.yaml"):
        shutil.copy(STUDIES / name, folder / name)
    fits = {}
    for name in ("bowl-screen", "bowl-foldover", "bowl-grown-ccd"):
        if name == "bowl-grown-ccd":  # the last step as a user runs it
            done = run_cli("run", "--no-report", folder / f"{name}.yaml", "--quiet", "--scheduler", "sync",
                           cwd=tmp_path)
            assert done.returncode == 0, done.stderr
        else:
            studyrun.run(folder / f"{name}.yaml", tmp_path / "results" / name, scheduler="sync",
                         quiet=True, report=False)
        fits[name] = json.loads((tmp_path / "results" / name / "analysis.json").read_text())
    screen = fits["bowl-screen"]["results"]["process_yield"]
    assert screen["coefficients"]["x3"]["estimate"] == pytest.approx(0.5 + 1.5)  # + x1*x2
    assert fits["bowl-foldover"]["runs"]["adopted"] == 4
    folded = fits["bowl-foldover"]["results"]["process_yield"]["coefficients"]
    assert folded["x3"]["estimate"] == pytest.approx(0.5) and folded["x1*x2"]["estimate"] == pytest.approx(1.5)
    ccd = fits["bowl-grown-ccd"]
    assert ccd["runs"]["adopted"] == 8 and ccd["design"]["runs"] == 17
    estimates = {t: c["estimate"] for t, c in ccd["results"]["process_yield"]["coefficients"].items()}
    assert estimates == pytest.approx({"1": 80, "x1": 2, "x2": 1, "x3": 0.5, "x1*x2": 1.5,
                                       "x1*x3": 0, "x2*x3": 0, "x1^2": -4, "x2^2": -3,
                                       "x3^2": -2}, abs=1e-9)


def test_earlier_runs_are_read_in_plan_order_with_their_latest_record(tmp_path):
    """The store holds runs in the order they finished and a failure replaced by a success;
    runs.csv gives the plan's order."""
    from studyrun.store.finished_runs import read_finished_runs
    from studyrun.store.run_store import Batch, RunStore

    def batch(ids, ok, inputs):
        n = len(ids)
        return Batch(ids=np.array(ids), ok=np.array(ok), errors=[None] * n,
                     inputs=np.array(inputs, dtype=float), values=np.zeros((n, 1)),
                     duration=0.1, worker="w")

    with RunStore.open(tmp_path / "runs.sqlite") as store:
        store.prepare(["a", "b"], ["y"])
        store.write(batch([30, 10], [True, False], [[0.3, 1 / 3], [0.1, 1 / 7]]))
        store.write(batch([20, 10], [True, True], [[0.2, 2 / 3], [0.1, 1 / 7]]))
    (tmp_path / "runs.csv").write_text("run,id,status\r\n2,30,ok\r\n0,10,ok\r\n1,20,ok\r\n")
    runs = read_finished_runs(tmp_path)
    assert runs.names == ["a", "b"] and runs.ids.tolist() == [10, 20, 30]
    assert runs.ok.tolist() == [True, True, True]
    assert runs.inputs.tolist() == [[0.1, 1 / 7], [0.2, 2 / 3], [0.3, 1 / 3]]


def test_a_study_may_not_grow_the_folder_it_writes(fraction):
    path = study(fraction, "fraction", '{type: python, function: "sevens:sevens", vectorized: true}',
                 SEVEN_PARAMETERS, "{type: doe, from: results/fraction, augment: foldover}")
    done = run_cli("run", "--no-report", path, "--out", fraction / "results" / "fraction", "--quiet")
    assert done.returncode == 2 and "names the folder this run writes" in done.stderr
    assert json.loads((fraction / "results" / "fraction" / "analysis.json").read_text())[
        "design"]["runs"] == 8  # the earlier results are left as they were
