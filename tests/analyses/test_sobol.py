"""Sobol' analysis against analytic answers (Ishigami, linear model), with real SALib."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import context_of, write_study
from pydantic import ValidationError

import studyrun
from studyrun.analyses.sobol import Sobol
from studyrun.blocks.params import Uniform
from studyrun.core.design import Outcome

ISHIGAMI_S1 = [0.3139, 0.4424, 0.0]
ISHIGAMI_ST = [0.5576, 0.4424, 0.2437]


def uniform(low: float, high: float) -> Uniform:
    return Uniform(distribution="uniform", low=low, high=high)


def ishigami(x, a=7.0, b=0.1):
    return np.sin(x[:, 0]) + a * np.sin(x[:, 1]) ** 2 + b * x[:, 2] ** 4 * np.sin(x[:, 0])


def ishigami_parameters():
    return {name: uniform(-np.pi, np.pi) for name in ("x1", "x2", "x3")}


def run(spec, parameters, model, seed=20261202, **quantities):
    design = spec.design(context_of(parameters), np.random.SeedSequence(seed))
    y = model(design.matrix)
    return Outcome(design=design, values={"y": y, **quantities}, ok=np.ones(len(y), bool))


def test_ishigami_indices_match_analytic_values():
    parameters = ishigami_parameters()
    outcome = run(Sobol(type="sobol", samples=8192), parameters, ishigami)
    assert outcome.design.matrix.shape == (8192 * 5, 3)
    result = Sobol(type="sobol", samples=8192).analyse(outcome, context_of(parameters))["y"]
    for name, s1, st in zip(parameters, ISHIGAMI_S1, ISHIGAMI_ST):
        assert result["S1"][name] == pytest.approx(s1, abs=0.03)
        assert result["ST"][name] == pytest.approx(st, abs=0.03)
    assert result["effective_N"] == 8192 and result["dropped_blocks"] == 0
    assert result["convergence"]["N"] == [2048, 4096, 8192]
    assert result["convergence"]["ST"]["x1"][-1] == pytest.approx(result["ST"]["x1"])
    json.dumps(result, allow_nan=False)


def test_linear_model_first_order_are_squared_normalised_coefficients():
    c = np.array([1.0, 2.0, 3.0, 0.5])
    parameters = {f"p{i}": uniform(0.0, 1.0) for i in range(len(c))}
    spec = Sobol(type="sobol", samples=4096)
    result = spec.analyse(run(spec, parameters, lambda x: x @ c), context_of(parameters))["y"]
    expected = c**2 / np.sum(c**2)
    for name, value in zip(parameters, expected):
        assert result["S1"][name] == pytest.approx(value, abs=0.02)
        assert result["ST"][name] == pytest.approx(value, abs=0.02)


def test_failed_runs_drop_whole_blocks_and_indices_stay_close():
    parameters = ishigami_parameters()
    spec = Sobol(type="sobol", samples=8192)
    outcome = run(spec, parameters, ishigami)
    rng = np.random.default_rng(1)
    failed = rng.choice(len(outcome.ok), size=300, replace=False)
    outcome.values["y"][failed] = np.nan
    outcome.ok[failed[:150]] = False
    result = spec.analyse(outcome, context_of(parameters))["y"]
    blocks = len(np.unique(failed // 5))
    assert result["dropped_blocks"] == blocks
    assert result["effective_N"] == 8192 - blocks
    assert any("dropped" in w for w in result["warnings"])
    for name, s1, st in zip(parameters, ISHIGAMI_S1, ISHIGAMI_ST):
        assert result["S1"][name] == pytest.approx(s1, abs=0.03)
        assert result["ST"][name] == pytest.approx(st, abs=0.03)


def test_too_few_surviving_blocks_is_an_error_entry():
    parameters = ishigami_parameters()
    spec = Sobol(type="sobol", samples=8)
    outcome = run(spec, parameters, ishigami)
    outcome.values["y"][::5] = np.nan
    result = spec.analyse(outcome, context_of(parameters))["y"]
    assert "error" in result and result["effective_N"] == 0


def test_samples_must_be_a_power_of_two():
    with pytest.raises(ValidationError, match=r"must be a power of 2 for sobol; got 1000 \(try 1024\)"):
        Sobol(type="sobol", samples=1000)
    with pytest.raises(ValidationError):
        Sobol(type="sobol", samples=1024, extra_key=1)
    with pytest.raises(ValidationError, match="strictly between 0 and 1"):
        Sobol(type="sobol", confidence=95)


def test_groups_must_name_varied_parameters():
    spec = Sobol(type="sobol", groups={"g": ["x1", "nope"]})
    problems = spec.check(context_of(ishigami_parameters()))
    assert problems and problems[0].path == "groups" and "'nope'" in problems[0].message


def test_design_is_deterministic_and_second_order_blocks():
    parameters = ishigami_parameters()
    spec = Sobol(type="sobol", samples=256, second_order=True)
    first = spec.design(context_of(parameters), np.random.SeedSequence(5))
    second = spec.design(context_of(parameters), np.random.SeedSequence(5))
    np.testing.assert_array_equal(first.matrix, second.matrix)
    assert first.matrix.shape == (256 * 8, 3)
    json.dumps(first.info)


@pytest.mark.parametrize("d, base, second_order, groups", [
    (1, 4, False, None), (3, 16, True, None), (5, 8, True, ["g", "a", "g", "b", "a"]),
    (4, 4, False, ["a", "a", "b", "b"]), (300, 4, False, None)])
def test_saltelli_rows_are_salibs_bit_for_bit(d, base, second_order, groups):
    """The design built with numpy is SALib.sample.sobol's (whose loop took 30 s at D = 1,000)."""
    from SALib.sample import sobol as sobol_sample

    from studyrun.analyses.salib import unit_problem
    from studyrun.analyses.salib.saltelli import saltelli_unit

    problem = unit_problem([f"x{i}" for i in range(d)], groups)
    expected = sobol_sample.sample(problem, base, calc_second_order=second_order, seed=20261204)
    assert np.array_equal(saltelli_unit(d, base, second_order, 20261204, groups), expected)


def salib_sobol(y, factors, second_order, resamples, confidence, seed):
    """SALib's own `sobol.analyze` on a unit problem of `factors` variables."""
    import warnings

    from SALib.analyze import sobol as sobol_analyze

    from studyrun.analyses.salib import unit_problem

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its "Constant values encountered"
        return sobol_analyze.analyze(unit_problem([f"x{i}" for i in range(factors)]), y,
                                     calc_second_order=second_order, num_resamples=resamples,
                                     conf_level=confidence, seed=seed)


def assert_bit_for_bit(mine, salib, second_order):
    for key in ("S1", "S1_conf", "ST", "ST_conf") + (("S2", "S2_conf") if second_order else ()):
        expected = np.asarray(salib[key])
        assert mine[key].shape == expected.shape, key
        assert np.array_equal(mine[key], expected, equal_nan=True), key


@pytest.mark.parametrize("factors, n, second_order, resamples, threads", [
    (3, 64, False, 100, 1), (3, 64, False, 100, 2), (3, 64, False, 100, 3), (1, 16, False, 2, 2),
    (4, 32, False, 17, 2), (4, 32, False, 33, 2), (2, 8, True, 3, 2), (5, 32, True, 37, 3),
    (2, 1024, False, 18, 2)])
def test_bootstrap_is_salibs_bit_for_bit_whatever_the_threads(factors, n, second_order,
                                                               resamples, threads):
    """studyrun's Sobol' estimators and bootstrap give SALib's numbers exactly, on any number of
    threads, with resample counts that leave a last group of one column (33) or two (18, with
    N large enough that a sum in another order would differ) or fewer than a group (2, 3, 17)."""
    from studyrun.analyses.sobol.bootstrap import analyze

    step = (2 if second_order else 1) * factors + 2
    rng = np.random.default_rng(factors * 1000 + n)
    y = rng.normal(size=n * step) ** 3 + np.repeat(rng.normal(size=n), step)
    mine = analyze(y, factors, second_order, resamples, 0.9, 20261206, threads=threads)
    assert_bit_for_bit(mine, salib_sobol(y, factors, second_order, resamples, 0.9, 20261206),
                       second_order)


@pytest.mark.parametrize("second_order", [False, True])
def test_bootstrap_is_salibs_where_a_and_b_do_not_vary(second_order):
    """Only the cross-samples vary: SALib's estimators give 0 (not NaN) for every index and
    resample, and so do studyrun's."""
    from studyrun.analyses.sobol.bootstrap import analyze

    factors, n = 3, 16
    step = (2 if second_order else 1) * factors + 2
    blocks = np.random.default_rng(3).normal(size=(n, step))
    blocks[:, 0] = blocks[:, -1] = 1.5
    mine = analyze(blocks.ravel(), factors, second_order, 10, 0.95, 7, threads=2)
    assert_bit_for_bit(mine, salib_sobol(blocks.ravel(), factors, second_order, 10, 0.95, 7),
                       second_order)
    assert not mine["S1"].any() and not mine["ST_conf"].any()


@pytest.mark.parametrize("second_order, factors", [(False, 100), (True, 40)])
def test_bootstrap_memory_does_not_grow_with_factors_times_samples(second_order, factors):
    """With many factors the bootstrap holds one factor's resampled cross-samples at a time, as
    SALib does: within BOOTSTRAP_BYTES a base sample and resample, besides the inputs and the
    resampled indices (a version that gathered every factor's first took 3 MB more here)."""
    import tracemalloc

    from studyrun.analyses.sobol import BOOTSTRAP_BYTES
    from studyrun.analyses.sobol.bootstrap import analyze

    n, resamples = 256, 32
    step = (2 if second_order else 1) * factors + 2
    y = np.random.default_rng(5).normal(size=n * step)
    analyze(y[:4 * step], factors, second_order, 2, 0.95, 3)  # imports, outside the count
    tracemalloc.start()
    try:
        analyze(y, factors, second_order, resamples, 0.95, 3, threads=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    indices = 4 * factors * resamples * 8 + 2 * factors * factors * 8
    assert peak <= BOOTSTRAP_BYTES * n * resamples + 3 * y.nbytes + indices


def test_analysis_results_are_salibs_with_groups_and_failed_blocks():
    """Through the analysis: grouped factors and dropped blocks give SALib's numbers exactly."""
    parameters = {f"x{i}": uniform(0, 1) for i in range(4)}
    spec = Sobol(type="sobol", samples=64, groups={"g": ["x0", "x2"]}, resamples=30)
    design = spec.design(context_of(parameters), np.random.SeedSequence(11))
    y = design.matrix @ [1.0, 2.0, 3.0, 4.0] + design.matrix[:, 0] * design.matrix[:, 1]
    ok = np.ones(len(y), bool)
    ok[[5, 40]] = False  # two blocks of 5 runs dropped
    entry = spec.analyse(Outcome(design=design, values={"y": y}, ok=ok), context_of(parameters))["y"]
    keep = np.repeat(~(~ok).reshape(-1, 5).any(axis=1), 5)
    salib = salib_sobol(y[keep], 3, False, 30, 0.95, design.info["bootstrap_seed"])
    for key in ("S1", "S1_conf", "ST", "ST_conf"):
        assert list(entry[key]) == ["g", "x1", "x3"]
        assert list(entry[key].values()) == [float(v) for v in salib[key]], key


def test_second_order_ishigami_interaction():
    parameters = ishigami_parameters()
    spec = Sobol(type="sobol", samples=4096, second_order=True)
    result = spec.analyse(run(spec, parameters, ishigami), context_of(parameters))["y"]
    assert result["S2"]["x1"]["x3"] == pytest.approx(0.2437, abs=0.06)
    assert abs(result["S2"]["x1"]["x2"]) < 0.06
    assert set(result["S2_conf"]["x1"]) == {"x2", "x3"}


def test_groups_give_indices_per_group():
    parameters = ishigami_parameters()
    spec = Sobol(type="sobol", samples=4096, groups={"g13": ["x1", "x3"]})
    result = spec.analyse(run(spec, parameters, ishigami), context_of(parameters))["y"]
    assert set(result["S1"]) == {"g13", "x2"}
    assert result["S1"]["x2"] == pytest.approx(0.4424, abs=0.03)
    assert result["ST"]["g13"] == pytest.approx(1 - 0.4424, abs=0.03)


def test_time_resolved_indices():
    parameters = {"a": uniform(0.0, 1.0), "b": uniform(0.0, 1.0)}
    spec = Sobol(type="sobol", samples=1024, outputs=["x"])
    design = spec.design(context_of(parameters), np.random.SeedSequence(3))
    time = np.linspace(0.0, 1.0, 5)
    # x(t) = a (1 - t) + b t: a alone at the start, b alone at the end, half each midway
    series = design.matrix[:, :1] * (1 - time) + design.matrix[:, 1:] * time
    outcome = Outcome(design=design, values={}, ok=np.ones(len(series), bool),
                      series={"x": series}, time=time)
    result = spec.analyse(outcome, context_of(parameters))["x"]
    assert result["time"] == list(time)
    assert result["S1"]["a"][0] == pytest.approx(1.0, abs=0.03)
    assert result["S1"]["b"][-1] == pytest.approx(1.0, abs=0.03)
    assert result["S1"]["a"][2] == pytest.approx(0.5, abs=0.03)
    json.dumps(result, allow_nan=False)


def test_report_writes_tables_and_figures(tmp_path):
    from studyrun.results.report.figures import Figures

    parameters = ishigami_parameters()
    spec = Sobol(type="sobol", samples=512)
    outcome = run(spec, parameters, ishigami)
    analysis = {"analysis": "sobol", "results": spec.analyse(outcome, context_of(parameters))}
    text = spec.report(analysis, outcome, Figures(tmp_path / "figures"))
    assert "| x1 |" in text and "figures/" in text
    assert list((tmp_path / "figures").glob("*.png"))


def test_report_draws_time_resolved_indices(tmp_path):
    from studyrun.results.report.figures import Figures

    parameters = {"a": uniform(0.0, 1.0), "b": uniform(0.0, 1.0)}
    spec = Sobol(type="sobol", samples=64, outputs=["x"])
    design = spec.design(context_of(parameters), np.random.SeedSequence(3))
    time = np.linspace(0.0, 1.0, 4)
    series = (design.matrix[:, :1] + 2 * design.matrix[:, 1:]) * time  # zero at t = 0
    outcome = Outcome(design=design, values={"x_final": series[:, -1]},
                      ok=np.ones(len(series), bool), series={"x": series}, time=time)
    analysis = {"analysis": "sobol", "results": spec.analyse(outcome, context_of(parameters))}
    assert analysis["results"]["x"]["S1"]["a"][0] is None  # no variance at t = 0
    assert analysis["results"]["x"]["S1"]["b"][-1] == pytest.approx(0.8, abs=0.1)
    text = spec.report(analysis, outcome, Figures(tmp_path / "figures"))
    assert "sobol-x-time.png" in text


def test_constant_quantity_has_zero_indices_and_a_warning():
    parameters = ishigami_parameters()
    spec = Sobol(type="sobol", samples=64, second_order=True)
    result = spec.analyse(run(spec, parameters, lambda x: np.full(len(x), 3.0)), context_of(parameters))["y"]
    assert result["ST"] == {"x1": 0.0, "x2": 0.0, "x3": 0.0}
    assert result["S2"]["x1"] == {"x2": 0.0, "x3": 0.0}
    assert "same in every run" in result["warnings"][0]


@pytest.mark.slow
def test_an_unknown_output_is_refused_at_validate_where_the_model_declares_its_outputs(tmp_path):
    from conftest import STUDIES, run_cli

    text = (STUDIES / "flowers-sobol.yaml").read_text()
    text = text.replace("models/flowers.yaml", str(STUDIES / "models" / "flowers.yaml"))
    (tmp_path / "study.yaml").write_text(text.replace("outputs: [area]", "outputs: [area, areas]"))
    done = run_cli("validate", tmp_path / "study.yaml")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"{tmp_path / 'study.yaml'}:20:19: analysis.outputs[1]: the model "
                                   "has no output 'areas'; did you mean 'area'? (outputs: area, "
                                   "decay, fraction_occupied, growth)")


def test_an_output_no_run_gave_is_named_not_blamed_on_failed_runs(tmp_path):
    """A python model declares no outputs: the run finds the missing series and says so."""
    import shutil

    from conftest import STUDIES, write_study

    import studyrun

    shutil.copy(STUDIES / "decay.py", tmp_path)
    path = write_study(tmp_path, """
        name: decay-sobol
        model: {type: python, function: "decay:decay"}
        parameters:
          k: {bounds: [0.2, 1.0]}
          y0: {bounds: [50, 150]}
        quantities: {final_y: final(y)}
        analysis: {type: sobol, samples: 16, outputs: [y, nosuch]}
        execution: {scheduler: sync}
        """)
    result = studyrun.run(path, tmp_path / "out")
    assert result.analysis["runs"]["failed"] == 0
    assert "error" not in result.results["y"] and len(result.results["y"]["time"]) == 41
    assert result.results["nosuch"] == {"error": "no run gave a time series named 'nosuch': it is "
                                        "not an output of the model; name one of the model's "
                                        "outputs in `outputs:`"}
    assert "no run gave a time series named 'nosuch'" in (tmp_path / "out" / "report.md").read_text()


G_FUNCTION = """import numpy as np
A = [0, 1, 4.5, 9, 99, 99, 99, 99]
def g(x1, x2, x3, x4, x5, x6, x7, x8):
    y = 1.0
    for x, a in zip((x1, x2, x3, x4, x5, x6, x7, x8), A):
        y = y * (np.abs(4 * x - 2) + a) / (1 + a)
    return y
"""


def test_sobols_g_function_as_salib_defines_it(tmp_path):
    """Sobol' G function with SALib's a = (0, 1, 4.5, 9, 99, 99, 99, 99): its indices are known,
    V_i = 1 / (3 (1 + a_i)^2), S1_i = V_i / V, ST_i = V_i prod_{j != i} (1 + V_j) / V with
    V = prod (1 + V_i) - 1: S1 = 0.7162, 0.1790, 0.0237, 0.0072, 0.0001 ...; ST = 0.7871,
    0.2422, 0.0343, 0.0105, 0.0001 ..."""
    (tmp_path / "gfun.py").write_text(G_FUNCTION)
    names = [f"x{i}" for i in range(1, 9)]
    parameters = "".join(f"  {name}: {{bounds: [0, 1]}}\n" for name in names)
    path = write_study(tmp_path, "name: g-function\nseed: 1\n"
                       "model: {type: python, function: gfun:g, vectorized: true}\n"
                       f"parameters:\n{parameters}quantities: {{y: value}}\n"
                       "analysis: {type: sobol, samples: 1024}\nexecution: {scheduler: sync}\n")
    found = studyrun.run(path, tmp_path / "out", quiet=True, report=False).results["y"]
    a = np.array([0, 1, 4.5, 9, 99, 99, 99, 99])
    v = 1 / (3 * (1 + a) ** 2)
    total = np.prod(1 + v) - 1
    s1, st = v / total, v * np.prod(1 + v) / (1 + v) / total
    assert [found["S1"][n] for n in names] == pytest.approx(s1, abs=0.02)
    assert [found["ST"][n] for n in names] == pytest.approx(st, abs=0.02)
