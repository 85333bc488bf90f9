"""Correlated inputs (`correlation:`): the Gaussian copula and Iman-Conover against known
answers, the located errors of a bad matrix, the analyses that refuse it, and the correlated sum
end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import STUDIES, context_of, run_cli, write_study
from scipy import stats
from scipy.special import ndtri

from studyrun.analyses.delta import Delta
from studyrun.analyses.montecarlo import Montecarlo
from studyrun.analyses.pawn import Pawn
from studyrun.blocks.params import Normal, Uniform, correlate_unit, sample_unit
from studyrun.blocks.params.correlation import correlation_matrix, iman_conover
from studyrun.blocks.params.union import ParameterSpec

SAMPLINGS = ["random", "sobol", "lhs"]
SUM = "a + b with a, b ~ N(0, 1) correlated 0.8"


def unit(n: int, method: str, d: int = 2, seed: int = 7) -> np.ndarray:
    return sample_unit(n, d, method, np.random.SeedSequence(seed))


def test_matrix_completes_unlisted_pairs_with_zero():
    matrix = correlation_matrix([["c", "a", 0.3]], ["a", "b", "c"])
    assert matrix.tolist() == [[1, 0, 0.3], [0, 1, 0], [0.3, 0, 1]]
    assert correlation_matrix([], ["a", "b"]) is None


@pytest.mark.parametrize("method", SAMPLINGS)
def test_normal_scores_get_the_asked_correlation(method):
    matrix = correlation_matrix([["a", "b", 0.8], ["b", "c", -0.4]], ["a", "b", "c"])
    z = ndtri(correlate_unit(unit(4096, method, d=3), matrix, method))
    achieved = np.corrcoef(z, rowvar=False)
    # 3 standard errors of a Pearson estimate at r = 0.8 and n = 4096: (1 - r^2) / sqrt(n) * 3
    assert achieved[0, 1] == pytest.approx(0.8, abs=0.02)
    assert achieved[1, 2] == pytest.approx(-0.4, abs=0.04)
    assert achieved[0, 2] == pytest.approx(0.0, abs=0.05)


def test_independent_points_stay_as_drawn():
    u = unit(100, "random")
    assert correlate_unit(u, None, "random") is u
    assert abs(np.corrcoef(ndtri(u), rowvar=False)[0, 1]) < 0.3


def test_a_latin_hypercube_keeps_one_point_per_stratum():
    n = 500
    u = unit(n, "lhs", d=3)
    matrix = correlation_matrix([["a", "b", 0.9], ["a", "c", 0.5], ["b", "c", 0.45]],
                                ["a", "b", "c"])
    v = iman_conover(u, matrix)
    for j in range(3):
        assert sorted(np.floor(v[:, j] * n).astype(int).tolist()) == list(range(n))
        assert np.array_equal(np.sort(v[:, j]), np.sort(u[:, j]))  # the same values, rearranged
    assert np.corrcoef(ndtri(v), rowvar=False)[0, 1] == pytest.approx(0.9, abs=0.01)


@pytest.mark.parametrize("method", SAMPLINGS)
@pytest.mark.parametrize("kinds", [("uniform", "uniform"), ("lognormal", "uniform")])
def test_non_normal_marginals_get_the_copulas_spearman_correlation(method, kinds):
    """The Gaussian copula's rank correlation is (6 / pi) asin(r / 2), whatever the marginals."""
    r = -0.7
    specs = {"uniform": {"distribution": "uniform", "low": 2, "high": 5},
             "lognormal": {"distribution": "lognormal", "mu": 0, "sigma": 1.5}}
    parameters = {name: spec_of(specs[kind]) for name, kind in zip("ab", kinds)}
    context = context_of(parameters)
    context = type(context)(**{**context.__dict__,
                               "correlation": correlation_matrix([["a", "b", r]], ["a", "b"])})
    design = Montecarlo(type="montecarlo", samples=50_000, sampling=method).design(
        context, np.random.SeedSequence(3))
    spearman = stats.spearmanr(design.matrix).statistic
    # -0.6829, 0.017 from r itself: within 0.008 of it (3 standard errors for random points) is
    # not r
    assert spearman == pytest.approx(6 / math.pi * math.asin(r / 2), abs=0.008)
    achieved = design.info["achieved_correlation"]
    assert achieved["spearman"]["a"]["b"] == pytest.approx(spearman)
    assert design.info["correlation"]["b"]["a"] == r


def spec_of(data: dict):
    from pydantic import TypeAdapter

    return TypeAdapter(ParameterSpec).validate_python(data)


def correlated_context(r: float = 0.8):
    parameters = {"a": Normal(distribution="normal", mean=0, std=1),
                  "b": Uniform(distribution="uniform", low=0, high=1)}
    context = context_of(parameters)
    return type(context)(**{**context.__dict__,
                            "correlation": correlation_matrix([["a", "b", r]], ["a", "b"])})


@pytest.mark.parametrize("method", SAMPLINGS)
def test_same_seed_same_design_and_chunks_concatenated_equal_it(method):
    context = correlated_context()
    analysis = Montecarlo(type="montecarlo", samples=1000, sampling=method)
    whole = analysis.design(context, np.random.SeedSequence(11))
    again = analysis.design(context, np.random.SeedSequence(11))
    chunks = list(analysis.design_chunks(context, np.random.SeedSequence(11), rows=300))
    assert np.array_equal(whole.matrix, again.matrix)
    assert np.array_equal(whole.matrix, np.vstack([c.matrix for c in chunks]))
    assert len(chunks) == (1 if method == "lhs" else 4)
    assert chunks[0].info["correlation"]["a"]["b"] == 0.8
    uncorrelated = analysis.design(context_of(context.parameters), np.random.SeedSequence(11))
    assert not np.array_equal(whole.matrix, uncorrelated.matrix)


@pytest.mark.parametrize("kind", [Delta, Pawn])
def test_delta_and_pawn_draw_their_samples_correlated(kind):
    analysis = kind(type=kind.__name__.lower(), samples=2000)
    design = analysis.design(correlated_context(0.6), np.random.SeedSequence(5))
    scores = np.column_stack([design.matrix[:, 0], ndtri(design.matrix[:, 1])])  # a: N(0, 1)
    assert np.corrcoef(scores, rowvar=False)[0, 1] == pytest.approx(0.6, abs=0.02)
    assert design.info["correlation"]["a"]["b"] == 0.6


UNIFORM = "{distribution: uniform, low: 0, high: 1}"
SUM_STUDY = """
    name: correlated
    model: {{type: python, function: "linear:linear", vectorized: true}}
    parameters:
      a: {{distribution: normal, mean: 0, std: 1}}
      b: {{distribution: normal, mean: 0, std: 1}}
      c: {c}
    correlation:
    {pairs}
    analysis: {analysis}
"""


def validate(folder, pairs: str, analysis: str = "{type: montecarlo, samples: 100}",
             c: str = UNIFORM):
    path = write_study(folder, SUM_STUDY.format(pairs=pairs, analysis=analysis, c=c))
    done = run_cli("validate", path)
    return done.returncode, done.stderr


@pytest.mark.parametrize("pairs, where, words", [
    ("  - [a, bb, 0.5]", "8:9: correlation[0][1]", ["'bb' is not a parameter", "did you mean 'b'"]),
    ("  - [a, a, 0.5]", "8:5: correlation[0]", ["paired with itself"]),
    ("  - [a, b, 0.5]\n      - [b, a, 0.2]", "9:5: correlation[1]",
     ["given twice", "correlation[0]"]),
    ("  - [a, b, 1.5]", "8:12: correlation[0][2]", ["lies in [-1, 1]", "1.5"]),
    ("  - [a, b, .nan]", "8:12: correlation[0][2]", ["finite"]),
    ("  - [a, b]", "8:5: correlation[0]", ["at least 3"]),
    ("  - [a, b, 0.9]\n      - [b, c, 0.9]\n      - [a, c, -0.9]", "7:1: correlation:",
     ["not positive definite", "smallest eigenvalue -0.8", "weaken"]),
    ("  - [a, b, 1]", "7:1: correlation:",
     ["not positive definite", "smallest eigenvalue", "weaken"]),
])
def test_a_bad_matrix_is_a_located_error(study_dir, pairs, where, words):
    code, stderr = validate(study_dir, pairs)
    assert code == 2, stderr
    assert f"study.yaml:{where}" in stderr
    assert all(word in stderr for word in words), stderr
    assert "Traceback" not in stderr


def test_a_fixed_parameter_cannot_be_correlated(study_dir):
    code, stderr = validate(study_dir, "  - [a, c, 0.5]", c="3")
    assert code == 2
    assert ("study.yaml:8:9: correlation[0][1]: 'c' is fixed; only varied parameters can be "
            "correlated (varied: a, b)") in stderr


def test_every_mistake_of_the_block_is_reported_at_once(study_dir):
    code, stderr = validate(study_dir, "  - [a, x, 0.5]\n      - [c, c, 0.1]\n      - [a, b, -2]")
    assert code == 2 and len(stderr.strip().splitlines()) == 3, stderr


@pytest.mark.parametrize("analysis", [
    "{type: morris}", "{type: fast, samples: 100}",
    "{type: rbd_fast, samples: 100}", "{type: dgsm, samples: 64}",
])
def test_analyses_that_assume_independent_inputs_refuse_correlations(study_dir, analysis):
    code, stderr = validate(study_dir, "  - [a, b, 0.5]", analysis)
    assert code == 2
    kind = analysis[7:].split(",")[0].rstrip("}")
    assert (f"study.yaml:7:1: correlation: {kind} cannot take correlated inputs: its estimators "
            "assume independent inputs (for the sensitivities of correlated inputs, use type: "
            "shapley); remove `correlation:`, or use an analysis that supports it: delta, "
            "montecarlo, pawn, reliability, scenarios, shapley, sobol, surrogate") in stderr


@pytest.mark.parametrize("analysis", ["{type: doe, design: full}", "{type: local, outputs: [y]}"])
def test_analyses_that_do_not_sample_the_distributions_refuse_them_too(study_dir, analysis):
    code, stderr = validate(study_dir, "  - [a, b, 0.5]", analysis)
    assert code == 2 and "does not draw from the parameters' joint distribution" in stderr


@pytest.mark.parametrize("analysis", ["{type: delta, samples: 100}", "{type: pawn, samples: 100}",
                                      "{type: surrogate, samples: 50}", "{type: sobol, samples: 64}",
                                      "{type: shapley}"])
def test_analyses_that_draw_correlated_inputs_accept_them(study_dir, analysis):
    code, stderr = validate(study_dir, "  - [a, b, 0.5]", analysis)
    assert code == 0, stderr


@pytest.mark.slow
def test_the_correlated_sum_has_the_known_standard_deviation(tmp_path):
    """std(a + b) = sqrt(2 + 2 r) = sqrt(3.6) = 1.897, not sqrt(2) = 1.414 (the independent sum)."""
    out = tmp_path / "sum"
    done = run_cli("run", STUDIES / "correlated-sum-montecarlo.yaml", "--out", out, "--quiet",
                   "--scheduler", "threads")
    assert done.returncode == 0, done.stderr
    analysis = json.loads((out / "analysis.json").read_text())
    y = analysis["results"]["y"]
    standard_error = math.sqrt(3.6) / math.sqrt(2 * y["n"])  # of a normal sample's std
    assert abs(y["std"] - math.sqrt(3.6)) < 3 * standard_error, y["std"]
    assert abs(y["std"] - math.sqrt(2)) > 10 * standard_error
    design = analysis["design"]
    assert design["correlation"]["a"]["b"] == 0.8
    assert design["achieved_correlation"]["pearson"]["a"]["b"] == pytest.approx(0.8, abs=0.01)
    assert design["achieved_correlation"]["spearman"]["a"]["b"] == pytest.approx(
        6 / math.pi * math.asin(0.4), abs=0.01)
    assert "### Input correlations" in (out / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["pce", "gp"])
def test_a_surrogate_of_correlated_inputs_gives_their_moments_and_shapley_effects(study_dir, method):
    text = SUM_STUDY.format(pairs="  - [a, b, 0.8]", c=UNIFORM,
                            analysis=f"{{type: surrogate, method: {method}, samples: 40}}")
    path = write_study(study_dir, text)
    done = run_cli("run", "--no-report", path, "--out", study_dir / "out", "--quiet", "--scheduler", "threads")
    assert done.returncode == 0, done.stderr
    y = json.loads((study_dir / "out" / "analysis.json").read_text())["results"]["y"]
    # y = 2a - 3b + c: var = 4 + 9 - 12 r + 1/12 with r = 0.8 (c independent of both)
    assert y["std"] == pytest.approx(math.sqrt(13 - 12 * 0.8 + 1 / 12), rel=0.01)
    assert y["std"] != pytest.approx(math.sqrt(13 + 1 / 12), rel=0.1)
    assert y["S1"] == {"a": None, "b": None, "c": None}
    assert y["correlation"]["a"]["b"] == 0.8
    assert any("Sobol' indices" in w and "shapley" in w for w in y["warnings"])
    # Shapley effects of 2a - 3b + c (c ~ U(0, 1)): the linear Gaussian part's, from the
    # conditional variances of a and b (var 1, corr r), and c's own 1/12, over the variance
    r, c = 0.8, 1 / 12
    gaussian = 4 + 9 - 12 * r
    total = gaussian + c
    alone_a, alone_b = 4 * (1 - r**2), 9 * (1 - r**2)  # c(J) for J = {a}, {b}
    effects = {"a": (alone_a + gaussian - alone_b) / 2 / total,
               "b": (alone_b + gaussian - alone_a) / 2 / total, "c": c / total}
    assert y["shapley"] == pytest.approx(effects, abs=0.02)
    assert set(y["kucherenko"]) == {"S1", "S1_conf", "ST", "ST_conf"}


def test_every_batch_of_a_surrogate_is_correlated():
    """The first Latin hypercube and a later `until:` batch (a hypercube of its own)."""
    from studyrun.analyses.surrogate import Surrogate

    context = correlated_context(0.8)
    analysis = Surrogate(type="surrogate", samples=400)
    seed = np.random.SeedSequence(2)
    for start, stop in ((0, 400), (400, 800)):
        x = analysis.sequence(context, seed, start, stop)
        scores = np.column_stack([x[:, 0], ndtri(x[:, 1])])
        assert np.corrcoef(scores, rowvar=False)[0, 1] == pytest.approx(0.8, abs=0.01)
        assert sorted(np.floor(x[:, 1] * 400).astype(int).tolist()) == list(range(400))


@pytest.mark.slow
def test_plan_names_the_correlations():
    done = run_cli("plan", STUDIES / "correlated-sum-montecarlo.yaml")
    assert done.returncode == 0, done.stderr
    assert "correlated (normal scores): a-b 0.8\n" in done.stdout


@pytest.mark.parametrize("analysis", ["{type: montecarlo, from: runs.csv}",
                                      "{type: delta, from: runs.csv}"])
def test_rows_given_keep_their_own_correlation(study_dir, analysis):
    (study_dir / "runs.csv").write_text("a,b,c,y\n0.1,0.2,0.5,0.3\n-0.4,0.1,0.5,-0.3\n")
    code, stderr = validate(study_dir, "  - [a, b, 0.5]", analysis)
    assert code == 2
    assert "study.yaml:7:1: correlation:" in stderr
    assert "as given, with the correlations they have" in stderr


def test_a_surrogate_trained_on_given_rows_takes_correlations(study_dir):
    (study_dir / "runs.csv").write_text("a,b,c,y\n0.1,0.2,0.5,0.3\n-0.4,0.1,0.5,-0.3\n")
    code, stderr = validate(study_dir, "  - [a, b, 0.5]", "{type: surrogate, from: runs.csv}")
    assert code == 0, stderr
