"""The doe analysis: designs, alias structure, response-surface fits and predictions, against known answers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import context_of
from pydantic import ValidationError

from studyrun.analyses.doe import Doe, describe_design, predict
from studyrun.analyses.doe.designs import coded_matrix
from studyrun.analyses.doe.fractions import describe_fraction
from studyrun.analyses.doe.interpret import find_pareto_front
from studyrun.analyses.doe.surface import fit_surface
from studyrun.analyses.doe.terms import name_term, parse_formula, standard_terms
from studyrun.core.design import Outcome
from studyrun.core.errors import StudyError


class Box:
    """A stand-in parameter: only its bounds matter to doe."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    def bounds(self) -> tuple[float, float]:
        return self.lo, self.hi


PARAMS3 = {"a": Box(0.0, 2.0), "b": Box(10.0, 20.0), "c": Box(-1.0, 1.0)}
CENTER3, HALF3 = np.array([1.0, 15.0, 0.0]), np.array([1.0, 5.0, 1.0])
TRUE_QUADRATIC = {"1": 1.5, "x1": 2.0, "x2": -1.0, "x3": 0.25, "x1*x2": 0.75, "x1*x3": 0.5,
                  "x2*x3": -0.3, "x1^2": 3.0, "x2^2": 0.4, "x3^2": -1.0}


def quadratic(x: np.ndarray, coefs: dict[str, float] = TRUE_QUADRATIC) -> np.ndarray:
    """Evaluate a coded-unit polynomial given as term -> coefficient."""
    from studyrun.analyses.doe.surface import parse_term
    from studyrun.analyses.doe.terms import build_matrix

    terms = [parse_term(t, x.shape[1]) for t in coefs]
    return build_matrix(x, terms) @ np.array(list(coefs.values()))


def run(spec: dict, params: dict, function, seed: int = 1) -> tuple[Doe, Outcome, dict]:
    """Plan, evaluate `function` on the coded design, analyse; checks the results are strict JSON."""
    doe = Doe.model_validate({"type": "doe", **spec})
    design = doe.design(context_of(params), np.random.SeedSequence(seed))
    y = function(coded_matrix(design))
    outcome = Outcome(design=design, values={"y": y}, ok=np.ones(len(y), bool))
    results = doe.analyse(outcome, context_of(params))
    json.dumps(results, allow_nan=False)
    json.dumps(design.info, allow_nan=False)
    return doe, outcome, results


# ---- spec -------------------------------------------------------------------------------------


def test_spec_defaults_and_alias_of_design_key():
    doe = Doe.model_validate({"type": "doe"})
    assert doe.model_dump()["design"] == "ccd"
    assert doe.kind == "ccd" and doe.response_model() == "quadratic"
    assert Doe.model_validate({"type": "doe", "design": "fractional"}).response_model() == "linear"
    dumped = doe.model_dump(by_alias=True)
    assert dumped["design"] == "ccd"
    assert Doe.model_validate(dumped) == doe
    assert "design" in Doe.model_json_schema()["properties"]


@pytest.mark.parametrize("bad", [
    {"design": "ccd", "samples": 10},
    {"design": "lhs", "generators": "a b ab"},
    {"design": "csv"},
    {"design": "full", "levels": 1},
    {"design": "fractional", "resolution": 3, "generators": "a b ab"},
    {"design": "lhs", "center": 2},
    {"response": "cubic!"},
    {"design": "box"},
    {"pareto": {"y": "smallest"}},
])
def test_spec_rejects_bad_keys(bad):
    with pytest.raises(ValidationError):
        Doe.model_validate({"type": "doe", **bad})


def test_formula_terms_are_named_as_in_the_contract():
    terms = parse_formula("x1 + b + x1*x3 + a^2 + c*a", ["a", "b", "c"])
    assert [name_term(t) for t in terms] == ["1", "x1", "x2", "x1*x3", "x1^2"]
    assert [name_term(t) for t in standard_terms(3, "quadratic")] == list(TRUE_QUADRATIC)
    with pytest.raises(StudyError):
        parse_formula("x4", ["a", "b", "c"])


def test_check_reports_problems_that_need_the_parameters():
    two = {"a": Box(0, 1), "b": Box(0, 1)}
    paths = {p.path for p in Doe(type="doe", design="bbd").check(context_of(two))}
    assert paths == {"design"}
    problems = Doe(type="doe", design="fractional", generators="a b ab").check(context_of(two))
    assert [p.path for p in problems] == ["generators"]
    assert Doe(type="doe", design="full", levels={"zz": 3}).check(context_of(two))[0].path == "levels"
    assert Doe(type="doe", response="x1 + x3").check(context_of(two))[0].path == "response"
    problem = Doe(type="doe").check(context_of({"a": Box(0, np.inf), "b": Box(0, 1)}))[0]
    assert problem.path == "design" and problem.message.startswith("a: doe needs finite bounds")
    assert Doe(type="doe").check(context_of(PARAMS3)) == []


# ---- designs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, runs", [
    ({"design": "full"}, 8), ({"design": "full", "levels": {"a": 3}}, 12),
    ({"design": "ccd"}, 15), ({"design": "ccd", "alpha": "rotatable", "center": 3}, 17),
    ({"design": "bbd"}, 13), ({"design": "plackett_burman"}, 4),
    ({"design": "lhs", "samples": 12}, 12), ({"design": "fractional", "resolution": 3}, 4),
])
def test_designs_have_expected_runs_and_stay_in_bounds(spec, runs):
    doe = Doe.model_validate({"type": "doe", **spec})
    design = doe.design(context_of(PARAMS3), np.random.SeedSequence(3))
    assert design.matrix.shape == (runs, 3) and design.info["runs"] == runs
    assert design.info["type"] == spec["design"]
    coded = coded_matrix(design)
    assert np.all(np.abs(coded) <= 1 + 1e-12)
    np.testing.assert_allclose(design.matrix, CENTER3 + coded * HALF3)
    json.dumps(design.info, allow_nan=False)


def test_plackett_burman_of_any_number_of_factors_is_an_orthogonal_two_level_design():
    """40 factors: pydoe has no Hadamard matrix of 44 runs and failed; the design takes the
    next it has (48). Sizes pydoe builds stay as they were (the same runs for the same study)."""
    import pydoe

    from studyrun.analyses.doe.designs import plackett_burman

    for k in range(2, 65):
        coded = plackett_burman(k)
        runs = len(coded)
        assert runs % 4 == 0 and runs > k and coded.shape == (runs, k)
        np.testing.assert_array_equal(coded.T @ coded, runs * np.eye(k))  # orthogonal, balanced
        try:
            np.testing.assert_array_equal(coded, pydoe.pbdesign(k))
        except ValueError:  # 24-27, 32-35, 40-43, 48-59 factors: pydoe has none
            assert runs > 4 * (k // 4 + 1)
    assert len(plackett_burman(40)) == 48
    names = {f"p{i}": Box(0.0, 1.0) for i in range(40)}
    design = Doe(type="doe", design="plackett_burman").design(context_of(names),
                                                              np.random.SeedSequence(1))
    assert design.matrix.shape == (48, 40) and design.info["runs"] == 48


def test_lhs_is_reproducible_from_the_seed():
    doe = Doe(type="doe", design="lhs", samples=9)
    one = doe.design(context_of(PARAMS3), np.random.SeedSequence(5)).matrix
    two = doe.design(context_of(PARAMS3), np.random.SeedSequence(5)).matrix
    other = doe.design(context_of(PARAMS3), np.random.SeedSequence(6)).matrix
    np.testing.assert_array_equal(one, two)
    assert not np.allclose(one, other)
    # Latin: each factor has one run in each of the 9 strata
    coded = coded_matrix(doe.design(context_of(PARAMS3), np.random.SeedSequence(5)))
    for column in coded.T:
        assert sorted(np.floor((column + 1) / 2 * 9).astype(int)) == list(range(9))


def test_rotatable_ccd_is_inscribed_with_the_rotatable_ratio():
    design = Doe(type="doe", design="ccd", alpha="rotatable").design(context_of(PARAMS3), None)
    coded = coded_matrix(design)
    factorial = np.abs(coded[:8]).max()
    assert np.isclose(1 / factorial, 8 ** 0.25)  # alpha = F^(1/4) for F = 2^3 factorial runs
    assert np.isclose(design.info["alpha_value"], 8 ** 0.25)


def test_csv_design_reads_natural_units(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("c,a,b\n0,1,15\n1,2,20\n-1,0,10\n")
    design = Doe(type="doe", design="csv", file=str(path)).design(context_of(PARAMS3), None)
    np.testing.assert_allclose(design.matrix, [[1, 15, 0], [2, 20, 1], [0, 10, -1]])
    with pytest.raises(StudyError, match="lacks columns"):
        Doe(type="doe", design="csv", file=str(path)).design(context_of(PARAMS3 | {"d": Box(0, 1)}), None)


def test_designs_that_need_more_factors_say_so():
    with pytest.raises(StudyError, match="at least 3"):
        Doe(type="doe", design="bbd").design(context_of({"a": Box(0, 1), "b": Box(0, 1)}), None)
    with pytest.raises(StudyError, match="finite bounds"):
        Doe(type="doe", design="ccd").design(context_of({"a": Box(0, np.inf), "b": Box(0, 1)}), None)


def test_alias_structure_of_the_textbook_quarter_fraction():
    """Montgomery's 2^(5-2)_III with D = AB, E = AC: I = ABD = ACE = BCDE."""
    params = {n: Box(0, 1) for n in "ABCDE"}
    design = Doe(type="doe", design="fractional", generators="a b c ab ac").design(context_of(params), None)
    info = design.info
    assert info["runs"] == 8 and info["resolution"] == 3
    assert info["generators"] == ["d = ab", "e = ac"]
    assert info["defining_relation"] == "I = abd = ace = bcde"
    chains = {chain.split(" = ")[0]: set(chain.split(" = ")[1:]) for chain in info["aliases"]}
    assert chains["a"] == {"bd", "ce", "abcde"}
    assert chains["b"] == {"ad", "cde", "abce"}
    assert chains["c"] == {"ae", "bde", "abcd"}
    assert chains["d"] == {"ab", "bce", "acde"}
    assert chains["e"] == {"ac", "bcd", "abde"}
    assert chains["bc"] == {"de", "abe", "acd"}
    assert chains["be"] == {"cd", "abc", "ade"}
    text = describe_design(design)
    assert "I = abd = ace = bcde" in text and "resolution: 3" in text


def test_signed_generators_and_full_factorial_aliases():
    import pydoe

    info = describe_fraction(pydoe.fracfact("a b c -ab"))
    assert info["defining_relation"] == "I = -abd" and info["resolution"] == 3
    assert describe_fraction(pydoe.ff2n(3))["resolution"] is None


@pytest.mark.parametrize("k, resolution, runs", [(5, 5, 16), (6, 4, 16), (7, 3, 8), (4, 4, 8)])
def test_fraction_by_resolution_is_smallest_and_meets_it(k, resolution, runs):
    params = {f"p{i}": Box(0, 1) for i in range(k)}
    info = Doe(type="doe", design="fractional", resolution=resolution).design(context_of(params), None).info
    assert info["runs"] == runs and info["resolution"] >= resolution


# ---- fits -------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [{"design": "ccd", "alpha": "face"}, {"design": "bbd"},
                                  {"design": "ccd", "alpha": "orthogonal", "center": 2}])
def test_exact_quadratic_is_recovered(spec):
    _, _, results = run(spec, PARAMS3, quadratic)
    fit = results["y"]
    assert fit["r2"] == pytest.approx(1.0, abs=1e-12)
    assert fit["dropped_terms"] == []
    for term, value in TRUE_QUADRATIC.items():
        assert fit["coefficients"][term]["estimate"] == pytest.approx(value, abs=1e-8)
    assert fit["rmse"] < 1e-8


def test_resolution_three_fraction_recovers_an_additive_model():
    params = {f"p{i}": Box(0, 10) for i in range(7)}
    truth = np.array([0.5, -2.0, 1.0, 3.0, 0.0, -0.7, 1.2])

    def additive(x):
        return 4.0 + x @ truth

    doe, outcome, results = run({"design": "fractional", "resolution": 3}, params, additive)
    assert outcome.design.info["runs"] == 8 and outcome.design.info["resolution"] == 3
    fit = results["y"]
    assert fit["dropped_terms"] == [] and fit["df_resid"] == 0
    assert fit["coefficients"]["1"]["estimate"] == pytest.approx(4.0)
    for i, value in enumerate(truth):
        assert fit["coefficients"][f"x{i + 1}"]["estimate"] == pytest.approx(value, abs=1e-10)
    # saturated: no residual degrees of freedom, so no standard errors, and a note says why
    assert fit["coefficients"]["x1"]["std_error"] is None and fit["covariance"] is None
    assert any("degrees of freedom" in note for note in fit["notes"])


def test_quadratic_on_two_level_factorial_drops_square_terms():
    _, _, results = run({"design": "full", "response": "quadratic"}, PARAMS3, quadratic)
    fit = results["y"]
    assert fit["dropped_terms"] == ["x1^2", "x2^2", "x3^2"]
    assert fit["dropped_aliases"]["x1^2"] == {"1": 1.0}
    assert "x1^2" not in fit["coefficients"]
    assert fit["stationary_point"] is None
    assert np.all(np.isfinite([c["estimate"] for c in fit["coefficients"].values()]))


def test_interaction_response_on_a_fraction_drops_aliased_interactions():
    params = {n: Box(0, 1) for n in "ABCDE"}
    _, _, results = run({"design": "fractional", "generators": "a b c ab ac",
                         "response": "interaction"}, params, lambda x: x.sum(axis=1))
    fit = results["y"]
    # D = AB and E = AC: x1*x2 equals x4, x1*x3 equals x5, so they cannot be estimated
    assert "x1*x2" in fit["dropped_terms"] and fit["dropped_aliases"]["x1*x2"] == {"x4": 1.0}
    assert len(fit["terms"]) == 8  # 8 runs estimate 8 terms at most


@pytest.mark.slow
def test_confidence_intervals_cover_at_their_nominal_rate():
    from scipy import stats

    doe = Doe(type="doe", design="ccd", alpha="face", center=6)
    design = doe.design(context_of(PARAMS3), None)
    coded = coded_matrix(design)
    terms = standard_terms(3, "quadratic")
    exact = quadratic(coded)
    truth = np.array(list(TRUE_QUADRATIC.values()))
    covered, total = 0, 0
    for seed in range(200):
        y = exact + np.random.default_rng(seed).normal(0.0, 0.5, len(exact))
        fit = fit_surface(coded, y, terms)
        tq = stats.t.ppf(0.975, fit["df_resid"])
        for term, true in zip(TRUE_QUADRATIC, truth):
            c = fit["coefficients"][term]
            covered += abs(c["estimate"] - true) <= tq * c["std_error"]
            total += 1
    assert 0.90 <= covered / total <= 0.99


def test_anova_and_lack_of_fit_with_replicated_centers():
    def noisy(x):
        rng = np.random.default_rng(0)
        return quadratic(x) + 0.4 * x[:, 0] ** 3 + rng.normal(0, 0.05, len(x))

    _, _, results = run({"design": "ccd", "center": 5}, PARAMS3, noisy)
    fit = results["y"]
    lof = fit["lack_of_fit"]
    assert lof["df_pure_error"] == 4 and lof["df_lack_of_fit"] == fit["df_resid"] - 4
    assert lof["F"] > 0 and 0 <= lof["p"] <= 1
    anova = fit["anova"]
    assert set(anova["orders"]) == {"linear", "interaction", "quadratic"}
    assert anova["model"]["df"] == 9 and anova["residual"]["df"] == fit["df_resid"]
    assert anova["model"]["ss"] + anova["residual"]["ss"] == pytest.approx(anova["total"]["ss"])
    # one-df partial F equals t squared
    assert anova["terms"]["x1"]["F"] == pytest.approx(fit["coefficients"]["x1"]["t"] ** 2)


def test_lack_of_fit_for_deterministic_replicates_is_explained():
    _, _, results = run({"design": "ccd", "center": 3}, PARAMS3, quadratic)
    lof = results["y"]["lack_of_fit"]
    assert lof["F"] is None and "deterministic" in lof["note"]


def test_stationary_point_of_a_bowl():
    # y = 5 + (x1 - 0.3)^2 + 2 (x2 + 0.2)^2 + 0.5 (x3 - 0.1)^2, minimum 5 at (0.3, -0.2, 0.1)
    def bowl(x):
        return 5 + (x[:, 0] - 0.3) ** 2 + 2 * (x[:, 1] + 0.2) ** 2 + 0.5 * (x[:, 2] - 0.1) ** 2

    _, _, results = run({"design": "bbd"}, PARAMS3, bowl)
    point = results["y"]["stationary_point"]
    assert point["kind"] == "minimum" and point["inside_region"]
    assert point["coded"] == pytest.approx({"x1": 0.3, "x2": -0.2, "x3": 0.1}, abs=1e-9)
    assert point["natural"] == pytest.approx({"a": 1.3, "b": 14.0, "c": 0.1}, abs=1e-9)
    assert point["predicted"] == pytest.approx(5.0, abs=1e-9)
    assert sorted(point["eigenvalues"]) == pytest.approx([0.5, 1.0, 2.0])
    _, _, flipped = run({"design": "bbd"}, PARAMS3, lambda x: -bowl(x))
    assert flipped["y"]["stationary_point"]["kind"] == "maximum"
    _, _, saddle = run({"design": "ccd"}, PARAMS3, lambda x: x[:, 0] ** 2 - x[:, 1] ** 2 + x[:, 2] ** 2)
    assert saddle["y"]["stationary_point"]["kind"] == "saddle"


def test_predict_matches_statsmodels_intervals():
    import statsmodels.api as sm

    from studyrun.analyses.doe.terms import build_matrix

    def noisy(x):
        return quadratic(x) + np.random.default_rng(2).normal(0, 0.3, len(x))

    doe, outcome, results = run({"design": "ccd", "center": 4}, PARAMS3, noisy)
    at = {"a": 1.5, "b": 12.0, "c": -0.5}
    got = predict({"results": results}, "y", at)
    coded = coded_matrix(outcome.design)
    terms = standard_terms(3, "quadratic")
    model = sm.OLS(outcome.values["y"], build_matrix(coded, terms)).fit()
    point = build_matrix(np.array([[0.5, -0.6, -0.5]]), terms)
    frame = model.get_prediction(point).summary_frame(alpha=0.05)
    assert got["prediction"] == pytest.approx(frame["mean"][0])
    assert got["confidence"] == pytest.approx([frame["mean_ci_lower"][0], frame["mean_ci_upper"][0]])
    assert got["prediction_interval"] == pytest.approx([frame["obs_ci_lower"][0], frame["obs_ci_upper"][0]])
    assert got["coded"] == pytest.approx({"x1": 0.5, "x2": -0.6, "x3": -0.5})
    assert got["extrapolation"] is False
    assert predict(results, "y", at | {"a": 5.0})["extrapolation"] is True
    assert predict(results, "y", at, level=0.99)["confidence"][0] < got["confidence"][0]
    for quantity, point, level in [("nope", at, 0.95), ("y", at | {"zzz": 1.0}, 0.95),
                                   ("y", {"a": 1.5, "b": 12.0}, 0.95), ("y", at | {"c": np.nan}, 0.95),
                                   ("y", at | {"c": np.inf}, 0.95), ("y", at, 1.0), ("y", at, 0.0)]:
        with pytest.raises(StudyError):
            predict(results, quantity, point, level)


def test_predict_without_residual_df_gives_no_intervals():
    params = {f"p{i}": Box(0, 1) for i in range(3)}
    _, _, results = run({"design": "full", "response": "x1 + x2 + x3 + x1*x2 + x1*x3 + x2*x3 + x1*x2*x3"},
                        params, lambda x: x[:, 0] * x[:, 1] * x[:, 2])
    got = predict(results, "y", {"p0": 1.0, "p1": 1.0, "p2": 1.0})
    assert got["prediction"] == pytest.approx(1.0) and got["confidence"] is None


def test_main_effects_and_interaction_tables():
    _, _, results = run({"design": "full"}, PARAMS3, lambda x: 10 + 3 * x[:, 0] + 2 * x[:, 0] * x[:, 1])
    effects = results["y"]["main_effects"]
    assert effects["a"]["low"] == pytest.approx(7) and effects["a"]["high"] == pytest.approx(13)
    assert effects["a"]["effect"] == pytest.approx(6) and effects["b"]["effect"] == pytest.approx(0)
    assert [lv["natural"] for lv in effects["b"]["levels"]] == [10.0, 20.0]
    table = results["y"]["interactions"]["a*b"]
    np.testing.assert_allclose(table["means"], [[9, 5], [11, 15]])
    assert table["interaction"] == pytest.approx(4)  # 2 x the x1*x2 coefficient


def test_failed_runs_are_left_out():
    doe = Doe(type="doe", design="ccd")
    design = doe.design(context_of(PARAMS3), None)
    y = quadratic(coded_matrix(design))
    y[3] = np.nan
    ok = np.isfinite(y)
    results = doe.analyse(Outcome(design=design, values={"y": y}, ok=ok), context_of(PARAMS3))
    assert results["y"]["n_runs"] == 14
    assert results["y"]["coefficients"]["x1^2"]["estimate"] == pytest.approx(3.0)
    assert any("failed" in note for note in results["y"]["notes"])


def test_pareto_front_of_a_known_set():
    values = {"cost": np.array([1.0, 2.0, 3.0, 2.0, 4.0, np.nan, 1.0]),
              "gain": np.array([1.0, 3.0, 4.0, 2.0, 4.0, 9.0, 0.5])}
    assert find_pareto_front(values, {"cost": "min", "gain": "max"}) == [0, 1, 2]
    assert find_pareto_front(values, {"cost": "max", "gain": "min"}) == [3, 4, 6]


def test_pareto_block_in_results():
    doe = Doe(type="doe", design="full", pareto={"y": "min", "z": "max"})
    design = doe.design(context_of(PARAMS3), None)
    x = coded_matrix(design)
    values = {"y": x[:, 0] + 0.1 * x[:, 2], "z": x[:, 0] + x[:, 1]}
    results = doe.analyse(Outcome(design=design, values=values, ok=np.ones(8, bool)), context_of(PARAMS3))
    front = results["_pareto"]
    assert front["senses"] == {"y": "min", "z": "max"}
    assert all(x[i, 2] == -1 for i in front["runs"])  # x3 only costs, so the front has it low
    assert front["parameters"]["c"] == [-1.0] * len(front["runs"])
    with pytest.raises(StudyError, match="unknown quantities"):
        Doe(type="doe", design="full", pareto={"w": "min"}).analyse(
            Outcome(design=design, values=values, ok=np.ones(8, bool)), context_of(PARAMS3))


def test_works_with_real_parameter_specs():
    from studyrun.blocks.params import Normal, Uniform

    params = {"a": Uniform(low=0, high=2), "b": Normal(mean=1, std=0.1), "c": Uniform(low=-1, high=1)}
    design = Doe(type="doe", design="ccd").design(context_of(params), np.random.SeedSequence(0))
    lo, hi = params["b"].bounds()
    assert design.matrix[:, 1].min() == pytest.approx(lo) and design.matrix[:, 1].max() == pytest.approx(hi)


# ---- plan and report --------------------------------------------------------------------------


def test_describe_design_lists_coded_and_natural_units():
    design = Doe(type="doe", design="ccd").design(context_of(PARAMS3), None)
    text = describe_design(design)
    assert "doe design: ccd, 15 runs, 3 factors" in text
    assert "x2 (b) = b: coded -1..1 = [10, 20]" in text
    assert "| run | x1 | x2 | x3 | a | b | c |" in text
    assert "| 0 | -1 | -1 | -1 | 0 | 10 | -1 |" in text


@pytest.mark.slow
def test_report_has_tables_and_figures(tmp_path):
    from studyrun.results.report.figures import Figures

    def noisy(x):
        return quadratic(x) + np.random.default_rng(4).normal(0, 0.1, len(x))

    doe = Doe(type="doe", design="ccd", center=4, pareto={"y": "min", "z": "max"})
    design = doe.design(context_of(PARAMS3), None)
    x = coded_matrix(design)
    outcome = Outcome(design=design, values={"y": noisy(x), "z": x[:, 1] - x[:, 0] ** 2},
                      ok=np.ones(len(x), bool))
    analysis = json.loads(json.dumps({"design": design.info,
                                      "results": doe.analyse(outcome, context_of(PARAMS3))}, allow_nan=False))
    text = doe.report(analysis, outcome, Figures(tmp_path / "figures"))
    assert "| term | estimate | std error | t | p |" in text
    assert "| source | df | SS | MS | F | p |" in text and "pure error" in text
    assert "### Pareto front" in text and "None" not in text
    for name in ("doe_y_main_effects", "doe_y_interactions", "doe_y_contour", "doe_pareto"):
        assert f"figures/{name}.png" in text
        assert (tmp_path / "figures" / f"{name}.png").exists()
    # the report is rebuilt from analysis.json alone, without the runs
    assert "doe_y_contour" in doe.report(analysis, None, Figures(tmp_path / "again"))


@pytest.mark.parametrize("k, alpha, runs", [(5, "face", 27), (6, "rotatable", 45)])
def test_ccd_uses_a_resolution_five_cube_from_five_factors(k, alpha, runs):
    params = {f"p{i}": Box(-2.0, 4.0) for i in range(k)}
    rng = np.random.default_rng(k)
    terms = standard_terms(k, "quadratic")
    coefs = {name_term(t): float(v) for t, v in zip(terms, rng.normal(size=len(terms)))}
    _, outcome, results = run({"design": "ccd", "alpha": alpha}, params, lambda x: quadratic(x, coefs))
    assert outcome.design.info["runs"] == runs and "resolution V" in outcome.design.info["factorial"]
    assert np.all(np.abs(coded_matrix(outcome.design)) <= 1 + 1e-12)
    fit = results["y"]
    assert fit["dropped_terms"] == []
    for term, value in coefs.items():
        assert fit["coefficients"][term]["estimate"] == pytest.approx(value, abs=1e-8)
