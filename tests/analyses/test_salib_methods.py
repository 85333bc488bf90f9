"""FAST, RBD-FAST, delta and PAWN against known answers, with real SALib."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import context_of
from pydantic import ValidationError

from studyrun.analyses.delta import Delta
from studyrun.analyses.dgsm import Dgsm
from studyrun.analyses.fast import Fast
from studyrun.analyses.pawn import Pawn
from studyrun.analyses.rbd_fast import RbdFast
from studyrun.analyses.sobol import Sobol
from studyrun.blocks.params import Normal, Uniform
from studyrun.core.design import Outcome

ISHIGAMI_S1 = [0.3139, 0.4424, 0.0]
ISHIGAMI_ST = [0.5576, 0.4424, 0.2437]


def ishigami(x, a=7.0, b=0.1):
    return np.sin(x[:, 0]) + a * np.sin(x[:, 1]) ** 2 + b * x[:, 2] ** 4 * np.sin(x[:, 0])


def ishigami_parameters():
    return {name: Uniform(low=-np.pi, high=np.pi) for name in ("x1", "x2", "x3")}


def run(spec, parameters, model, seed=11):
    design = spec.design(context_of(parameters), np.random.SeedSequence(seed))
    y = model(design.matrix)
    return Outcome(design=design, values={"y": y}, ok=np.ones(len(y), bool))


def analyse(spec, parameters, model):
    result = spec.analyse(run(spec, parameters, model), context_of(parameters))["y"]
    json.dumps(result, allow_nan=False)
    return result


def test_fast_ishigami():
    parameters = ishigami_parameters()
    spec = Fast(type="fast", samples=2048)
    result = analyse(spec, parameters, ishigami)
    for name, s1, st in zip(parameters, ISHIGAMI_S1, ISHIGAMI_ST):
        assert result["S1"][name] == pytest.approx(s1, abs=0.04)
        assert result["ST"][name] == pytest.approx(st, abs=0.05)
    assert set(result) >= {"S1_conf", "ST_conf", "effective_N", "warnings"}


def test_fast_refuses_incomplete_curves():
    parameters = ishigami_parameters()
    spec = Fast(type="fast", samples=256)
    outcome = run(spec, parameters, ishigami)
    outcome.values["y"][5] = np.nan
    result = spec.analyse(outcome, context_of(parameters))["y"]
    assert "error" in result and result["dropped_runs"] == 1
    with pytest.raises(ValidationError, match="must exceed 4 M"):
        Fast(type="fast", samples=64)


def test_rbd_fast_ishigami_with_failed_runs_left_out():
    parameters = ishigami_parameters()
    spec = RbdFast(type="rbd_fast", samples=4096)
    outcome = run(spec, parameters, ishigami)
    outcome.values["y"][:100] = np.nan
    outcome.ok[200:250] = False
    result = spec.analyse(outcome, context_of(parameters))["y"]
    assert result["dropped_runs"] == 150 and result["effective_N"] == 4096 - 150
    for name, s1 in zip(parameters, ISHIGAMI_S1):
        assert result["S1"][name] == pytest.approx(s1, abs=0.05)
    assert any("left out" in w for w in result["warnings"])


def test_delta_is_refused_below_its_minimum_where_salib_can_give_null_indices():
    """45 runs of two triangular parameters (a draw found by searching) leave SALib's balanced
    bootstrap 5 bins of at least 10 runs to draw 45 // 5 = 9 from each, fewer than its 10:
    parameter a gets null indices, S1 too. Such sizes are refused, but for S1 alone."""
    from scipy import stats

    from studyrun.analyses.delta import MIN_RUNS
    from studyrun.analyses.salib import convert_indices, unit_problem

    x = stats.triang(0.3, loc=-1, scale=2).ppf(np.random.default_rng(1).random((45, 2)))
    result = Delta(type="delta", resamples=2).call_salib(unit_problem(["a", "b"]), x,
                                                         x[:, 0] + x[:, 1] ** 2, 2)
    indices = convert_indices(result, ["a", "b"])
    assert indices["delta_balanced"]["a"] is None and indices["S1"]["a"] is None
    assert any("Dataset too small for no. bins" in str(note) for note in result["notes"])
    assert 45 < MIN_RUNS
    context = context_of({"a": Uniform(low=0, high=1), "b": Uniform(low=0, high=1)})
    [problem] = Delta(type="delta", samples=MIN_RUNS - 1).check(context)
    assert problem.path == "samples" and problem.message.startswith(
        f"delta needs at least {MIN_RUNS} runs") and f"got samples: {MIN_RUNS - 1}" in problem.message
    assert Delta(type="delta", samples=MIN_RUNS).check(context) == []
    assert Delta(type="delta", samples=20, method="sobol").check(context) == []


def test_delta_minimum_is_the_fewest_runs_salibs_bins_always_hold_enough_for():
    """The minimum measured: from delta.MIN_RUNS runs, however they fall, SALib's balanced and
    step bootstraps find at least 10 (5) runs to draw per bin; below it, some draws fall short."""
    from SALib.analyze.delta import check_specified_bininfo, obtain_resampled_subset
    from scipy import stats

    from studyrun.analyses.delta import MIN_RUNS

    short = {True: 0, False: 0}
    for law in (stats.uniform(-0.5), stats.norm(0.2), stats.triang(0.3, loc=-1, scale=2),
                stats.gamma(2, loc=-1), stats.expon(-0.5), stats.lognorm(0.5, loc=-1)):
        for n in (45, 55, 65, 75, MIN_RUNS, MIN_RUNS + 1, MIN_RUNS + 5, MIN_RUNS + 9, 150):
            for seed in range(40):
                x = law.ppf(np.random.default_rng(seed).random(n))
                edges, _ = check_specified_bininfo(None, x.min(), x.max(), "p")
                for mode in ("balanced", "step"):
                    if mode == "step" and min(np.sum(x <= 0), np.sum(x > 0)) < 10:
                        continue  # SALib's step index is null by design: one side too small
                    try:
                        obtain_resampled_subset(x, n, mode, edges, "p", 10)
                    except ValueError as error:
                        assert "Dataset size error" in str(error)
                        short[n >= MIN_RUNS] += 1
    assert short[True] == 0 and short[False] > 0


@pytest.mark.slow
def test_delta_ranks_a_linear_model_and_keeps_global_state():
    parameters = {name: Uniform(low=0.0, high=1.0) for name in ("a", "b", "c")}
    c = np.array([3.0, 2.0, 0.5])
    spec = Delta(type="delta", samples=256, resamples=10)
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    result = analyse(spec, parameters, lambda x: x @ c)
    assert np.random.random() == expected_next  # SALib's np.random.seed() was undone
    assert result["delta_balanced"]["a"] > result["delta_balanced"]["b"] > result["delta_balanced"]["c"]
    for name, s1 in zip(parameters, c**2 / np.sum(c**2)):
        assert result["S1"][name] == pytest.approx(s1, abs=0.1)


def test_pawn_ranks_a_linear_model():
    parameters = {name: Uniform(low=0.0, high=1.0) for name in ("a", "b", "c")}
    spec = Pawn(type="pawn", samples=2000)
    result = analyse(spec, parameters, lambda x: 4 * x[:, 0] + x[:, 1] + 0.01 * x[:, 2])
    assert result["median"]["a"] > result["median"]["b"] > result["median"]["c"]
    assert set(result) >= {"minimum", "mean", "median", "maximum", "CV", "stdev"}
    with pytest.raises(ValidationError, match="at least 10 S"):
        Pawn(type="pawn", samples=50)


def test_unbounded_parameters_give_finite_designs():
    parameters = {"a": Normal(mean=0.0, std=1.0), "b": Uniform(low=0.0, high=1.0)}
    for spec in (Sobol(type="sobol", samples=256), RbdFast(type="rbd_fast", samples=256),
                 Fast(type="fast", samples=128)):
        matrix = spec.design(context_of(parameters), np.random.SeedSequence(2)).matrix
        assert np.isfinite(matrix).all()


def test_designs_are_deterministic():
    parameters = ishigami_parameters()
    for spec in (Fast(type="fast", samples=128), RbdFast(type="rbd_fast", samples=128),
                 Delta(type="delta", samples=128, sampling="sobol"), Pawn(type="pawn"),
                 Dgsm(type="dgsm", samples=64)):
        first = spec.design(context_of(parameters), np.random.SeedSequence(9))
        second = spec.design(context_of(parameters), np.random.SeedSequence(9))
        np.testing.assert_array_equal(first.matrix, second.matrix)
        json.dumps(first.info)


def test_generic_report(tmp_path):
    from studyrun.results.report.figures import Figures

    parameters = ishigami_parameters()
    spec = RbdFast(type="rbd_fast", samples=512)
    analysis = {"analysis": "rbd_fast", "results": spec.analyse(run(spec, parameters, ishigami),
                                                                 context_of(parameters))}
    text = spec.report(analysis, None, Figures(tmp_path / "figures"))
    assert "| x2 |" in text and "figures/rbd_fast-y.png" in text


def test_every_method_accepts_varied_parameters():
    """(A study without one is refused by the study's own check: test_validate_cli.py.)"""
    from studyrun.analyses.morris import Morris

    for spec in (Sobol(type="sobol"), Morris(type="morris"), Fast(type="fast"),
                 RbdFast(type="rbd_fast"), Delta(type="delta"), Pawn(type="pawn"),
                 Dgsm(type="dgsm")):
        assert spec.check(context_of(ishigami_parameters())) == []
    with pytest.raises(ValidationError, match="strictly between 0 and 1"):
        RbdFast(type="rbd_fast", confidence=1.5)


def test_dgsm_linear_model_and_bound_on_total_indices():
    c = np.array([1.0, 2.0, 3.0])
    parameters = {name: Uniform(low=0.0, high=2.0) for name in ("a", "b", "c")}
    spec = Dgsm(type="dgsm", samples=1024)
    outcome = run(spec, parameters, lambda x: x @ c)
    assert outcome.design.matrix.shape == (1024 * 4, 3)
    outcome.values["y"][[1, 2, 10]] = np.nan  # base points 0 and 2
    result = spec.analyse(outcome, context_of(parameters))["y"]
    json.dumps(result, allow_nan=False)
    assert result["dropped_blocks"] == 2 and result["effective_N"] == 1022
    for name, ci in zip(parameters, c):
        assert result["vi"][name] == pytest.approx(ci ** 2, rel=1e-6)  # (dy/dx)^2
        assert result["dgsm"][name] == pytest.approx(12 / np.pi**2 * ci**2 / np.sum(c**2),
                                                     rel=0.05)
    ishigami_result = analyse(Dgsm(type="dgsm", samples=512), ishigami_parameters(), ishigami)
    for name, st in zip(ishigami_parameters(), ISHIGAMI_ST):
        assert ishigami_result["dgsm"][name] >= st - 0.02


@pytest.mark.slow
def test_delta_report_shows_every_index_salib_gives(tmp_path):
    """SALib 1.6's delta_step is in analysis.json and in the report's table; a parameter whose
    name SALib refuses (ending in _step) is analysed, and its notes carry its name."""
    from studyrun.results.report.figures import Figures

    parameters = {"a_step": Uniform(low=-1.0, high=1.0), "b": Uniform(low=0.0, high=1.0)}
    spec = Delta(type="delta", samples=128, resamples=5)
    analysis = {"analysis": "delta", "results": spec.analyse(
        run(spec, parameters, lambda x: 3 * x[:, 0] + x[:, 1]), context_of(parameters))}
    result = analysis["results"]["y"]
    indices = {k for k, v in result.items() if isinstance(v, dict)}
    assert indices == {"delta_balanced", "delta_balanced_conf", "delta_raw", "delta_raw_conf",
                       "delta_step", "delta_step_conf", "S1", "S1_conf"}
    assert result["delta_step"]["a_step"] > 0 and result["delta_step"]["b"] is None  # b > 0 only
    assert "SALib: b: Step: too few samples. 0 (<=0)" in " ".join(result["warnings"])
    text = spec.report(analysis, None, Figures(tmp_path / "figures"))
    header = next(line for line in text.splitlines() if line.startswith("| parameter"))
    assert header.split(" | ")[1:] == [*spec.keys[:-1], "S1_conf |"]
    assert "delta_step" in header and "| delta |" not in text


@pytest.mark.slow
def test_a_delta_above_one_is_flagged():
    """A very skewed quantity defeats SALib's density estimate: a delta (at most 1) comes out
    far above 1, and the result says so."""
    parameters = {"k": Uniform(low=-0.2, high=1.0), "y0": Uniform(low=50.0, high=150.0)}
    spec = Delta(type="delta", samples=300, resamples=5)
    result = analyse(spec, parameters, lambda x: x[:, 1] * np.exp(-10 * x[:, 0]))
    assert result["delta_balanced"]["k"] > 1
    assert any(w.startswith("delta above 1 for k:") for w in result["warnings"])
