"""Parameter kinds: ppf against scipy, boxes, medians, nominal values, validation, sampling."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from scipy import stats

from studyrun.blocks.params import (
    DISTRIBUTIONS,
    TAGS,
    TAIL,
    Bounds,
    Discrete,
    Fixed,
    LogNormal,
    ParameterBase,
    ParameterSpec,
    map_unit,
    sample_unit,
    sample_unit_range,
    varied,
)


class M(BaseModel):
    p: ParameterSpec


def load(raw) -> ParameterBase:
    return M.model_validate({"p": raw}).p


def only_error(raw) -> str:
    """The single error message a bad parameter gives."""
    with pytest.raises(ValidationError) as info:
        load(raw)
    errors = info.value.errors()
    assert len(errors) == 1, errors
    return errors[0]["msg"]


Q = np.array([0.001, 0.05, 0.25, 0.5, 0.75, 0.95, 0.999])

# (study-file mapping, the scipy distribution it must equal, whether it is bounded)
KINDS = [
    ({"distribution": "uniform", "low": 0.8, "high": 1.2}, stats.uniform(0.8, 0.4), True),
    ({"distribution": "normal", "mean": 0.2, "std": 0.02}, stats.norm(0.2, 0.02), False),
    ({"distribution": "lognormal", "mu": 0.5, "sigma": 0.3},
     stats.lognorm(s=0.3, scale=math.exp(0.5)), False),
    ({"distribution": "truncnormal", "mean": 1, "std": 2, "low": 0, "high": 3},
     stats.truncnorm(-0.5, 1.0, loc=1, scale=2), True),
    ({"distribution": "triangular", "low": 1, "mode": 2, "high": 5},
     stats.triang(0.25, loc=1, scale=4), True),
    ({"distribution": "loguniform", "low": 1e-3, "high": 10}, stats.loguniform(1e-3, 10), True),
    ({"distribution": "beta", "alpha": 2, "beta": 5, "low": -1, "high": 3},
     stats.beta(2, 5, loc=-1, scale=4), True),
    ({"distribution": "gamma", "shape": 2.5, "scale": 0.5, "loc": 1},
     stats.gamma(2.5, loc=1, scale=0.5), False),
    ({"bounds": [800, 1200]}, stats.uniform(800, 400), True),
]
IDS = [k[0].get("distribution", "bounds") for k in KINDS]


@pytest.mark.parametrize("raw, dist, bounded", KINDS, ids=IDS)
def test_ppf_median_bounds_match_scipy(raw, dist, bounded):
    p = load(raw)
    np.testing.assert_allclose(p.ppf(Q), dist.ppf(Q), rtol=1e-12)
    assert p.median() == pytest.approx(dist.median(), rel=1e-12)
    expected = dist.support() if bounded else (dist.ppf(TAIL), dist.ppf(1 - TAIL))
    assert p.bounds() == pytest.approx(expected, rel=1e-12)
    assert p.ppf(np.zeros((3, 2))).shape == (3, 2)


# one valid example per union member: every member goes through the same contract checks
EXAMPLES = {
    **{raw.get("distribution", "bounds"): raw for raw, _, _ in KINDS},
    "lognormal": {"distribution": "lognormal", "mean": 2, "std": 0.5, "nominal": 1.5},
    "truncnormal": {"distribution": "truncnormal", "mean": 1, "std": 1, "low": 0},
    "discrete": {"distribution": "discrete", "values": [3, 1, 2], "weights": [1, 2, 1]},
    "fixed": 4.5,
}


def test_every_member_has_an_example():
    assert set(EXAMPLES) == set(TAGS)


@pytest.mark.parametrize("tag", TAGS)
def test_contract(tag):
    p = load(EXAMPLES[tag])
    assert p.kind == tag
    for dumped in (p.model_dump(), p.model_dump(mode="json"), p.model_dump(exclude_none=True)):
        assert load(dumped) == p  # round trip, as the resolved study.yaml is written
    assert load(p) == p  # an instance passes through
    lo, hi = p.bounds()
    assert math.isfinite(lo) and math.isfinite(hi) and lo <= p.median() <= hi
    x = p.ppf(sample_unit(64, 1, "sobol", np.random.SeedSequence(5))[:, 0])
    assert x.shape == (64,) and np.isfinite(x).all()
    assert p.nominal_value(None) == (p.nominal if p.nominal is not None else
                                     getattr(p, "value", p.median()))


def test_lognormal_mean_std_is_of_the_variable():
    p = load({"distribution": "lognormal", "mean": 2.0, "std": 0.5})
    mu, sigma = p.log_params()
    dist = stats.lognorm(s=sigma, scale=math.exp(mu))
    assert dist.mean() == pytest.approx(2.0) and dist.std() == pytest.approx(0.5)
    assert p.to_salib() == ("lognorm", [mu, sigma])


def test_truncnormal_one_sided_box_uses_a_quantile_on_the_open_side():
    p = load({"distribution": "truncnormal", "mean": 1, "std": 1, "low": 0})
    dist = stats.truncnorm(-1, np.inf, loc=1, scale=1)
    assert p.bounds() == pytest.approx((0, dist.ppf(1 - TAIL)))
    np.testing.assert_allclose(p.ppf(Q), dist.ppf(Q))


def test_discrete_ppf_follows_cumulative_weights_in_value_order():
    p = load({"distribution": "discrete", "values": [3, 1, 2], "weights": [1, 2, 1]})
    # sorted: 1 (0.5), 2 (0.25), 3 (0.25) -> CDF 0.5, 0.75, 1
    np.testing.assert_array_equal(p.ppf([0.01, 0.5, 0.51, 0.75, 0.76, 1.0]), [1, 1, 2, 2, 3, 3])
    assert p.median() == 1 and p.bounds() == (1, 3)
    equal = load({"distribution": "discrete", "values": [10, 20, 30, 40]})
    np.testing.assert_array_equal(equal.ppf([0.1, 0.3, 0.6, 0.9]), [10, 20, 30, 40])
    zero = load({"distribution": "discrete", "values": [1, 2, 3], "weights": [1, 0, 1]})
    assert 2 not in zero.ppf(np.linspace(0.001, 0.999, 999))


def test_fixed_from_a_bare_number_and_its_forms():
    for raw in (3, 3.0, "3", {"value": 3, "description": "a constant"}):
        p = load(raw)
        assert isinstance(p, Fixed) and p.value == 3
    p = load(2.5)
    assert p.bounds() == (2.5, 2.5) and p.median() == 2.5
    np.testing.assert_array_equal(p.ppf([0.1, 0.9]), [2.5, 2.5])
    assert p.nominal_value(7.0) == 2.5  # the study fixes it; the model's value does not win
    assert load("1e-3").value == 0.001  # YAML reads 1e-3 without a dot as text


def test_nominal_value_precedence():
    p = load({"distribution": "normal", "mean": 1, "std": 0.1})
    assert p.nominal_value(None) == pytest.approx(1.0)  # median
    assert p.nominal_value(1.05) == 1.05  # the model's own value
    q = load({"distribution": "normal", "mean": 1, "std": 0.1, "nominal": 0.9})
    assert q.nominal_value(1.05) == 0.9
    assert load({"bounds": [0, 4]}).nominal_value(None) == 2.0


def test_to_salib_entries():
    assert load({"distribution": "uniform", "low": 0, "high": 2}).to_salib() == ("unif", [0, 2])
    assert load({"bounds": [1, 3]}).to_salib() == ("unif", [1, 3])
    assert load({"distribution": "normal", "mean": 1, "std": 2}).to_salib() == ("norm", [1, 2])
    assert load({"distribution": "triangular", "low": 0, "mode": 1, "high": 4}).to_salib() == \
        ("triang", [0, 4, 0.25])
    assert load({"distribution": "truncnormal", "mean": 1, "std": 2, "low": 0, "high": 3}
                ).to_salib() == ("truncnorm", [0, 3, 1, 2])
    assert load({"distribution": "loguniform", "low": 1, "high": 10}).to_salib() == \
        ("logunif", [1, 10])
    with pytest.raises(NotImplementedError, match="ppf"):
        load({"distribution": "gamma", "shape": 2, "scale": 1}).to_salib()


def test_to_salib_agrees_with_salib_scaling():
    import SALib.util as salib_util

    u = np.linspace(0.01, 0.99, 7)
    for raw in ({"distribution": "lognormal", "mean": 2, "std": 0.5},
                {"distribution": "triangular", "low": 1, "mode": 2, "high": 5},
                {"distribution": "truncnormal", "mean": 1, "std": 2, "low": 0, "high": 3},
                {"distribution": "loguniform", "low": 0.1, "high": 10}):
        p = load(raw)
        dist, bounds = p.to_salib()
        mapped = salib_util._nonuniform_scale_samples(u[:, None], [bounds], [dist])[:, 0]
        np.testing.assert_allclose(mapped, p.ppf(u), rtol=1e-10)


# --- validation: one clear error each ----------------------------------------------------------

INVALID = [
    ({"distribution": "normal", "mean": 0, "std": 0}, "std must be above 0; got std=0"),
    ({"distribution": "normal", "mean": 0, "std": -2}, "got std=-2 (try 2)"),
    ({"distribution": "uniform", "low": 5, "high": 1}, "low must be below high; got low=5, high=1"),
    ({"distribution": "uniform", "low": 1, "high": 1}, "low must be below high"),
    ({"distribution": "beta", "alpha": 1, "beta": 1, "low": 2, "high": 1}, "low must be below high"),
    ({"bounds": [5, 1]}, "bounds must be [low, high] with low below high; got [5, 1] (write [1, 5])"),
    ({"distribution": "triangular", "low": 0, "mode": 7, "high": 5},
     "mode must lie within [low, high]; got mode=7 with low=0, high=5"),
    ({"distribution": "discrete", "values": [1, 2], "weights": [1]},
     "weights must have one entry per value; got 1 weights for 2 values"),
    ({"distribution": "discrete", "values": [1, 2], "weights": [0, 0]}, "sum to more than 0"),
    ({"distribution": "discrete", "values": [1, 2], "weights": [2, -1]}, "at least 0"),
    ({"distribution": "discrete", "values": [4]}, "at least two different values"),
    ({"distribution": "loguniform", "low": 0, "high": 5}, "loguniform low must be above 0; got low=0"),
    ({"distribution": "loguniform", "low": -1, "high": 5}, "got low=-1"),
    ({"distribution": "lognormal", "mean": 1, "std": 0.1, "mu": 0, "sigma": 1},
     "exactly one pair; got mean, std, mu, sigma"),
    ({"distribution": "lognormal"}, "exactly one pair; got neither"),
    ({"distribution": "lognormal", "mu": 0}, "needs both mu and sigma"),
    ({"distribution": "lognormal", "mean": -1, "std": 1}, "mean must be above 0"),
    ({"distribution": "gamma", "shape": 0, "scale": 1}, "shape must be above 0"),
    ({"distribution": "truncnormal", "mean": 0, "std": 1}, "truncnormal needs low, high or both"),
    ({"distribution": "uniform", "low": 0, "high": 1, "nominal": 3},
     "nominal must lie within [0, 1], the values this uniform parameter can take; got nominal=3"),
    ({"distribution": "lognormal", "mu": 0, "sigma": 1, "nominal": -1}, "got nominal=-1"),
    ({"value": 1, "nominal": 2}, "takes no nominal"),
    ({"distribution": "uniform", "low": 0, "high": 1, "bounds": [0, 1]}, "truncnormal"),
    ({"distribution": "uniform", "low": 0, "high": 1, "sd": 1}, "Extra inputs are not permitted"),
    ({"distribution": "uniform", "low": 0}, "Field required"),
    ({"distribution": "normal", "mean": float("nan"), "std": 1}, "finite number"),
    ({"low": 1, "high": 2}, "add `distribution: uniform`?"),
    ({"mean": 1, "std": 2}, "add `distribution: normal`?"),
    ({"dist": "normal", "mean": 1, "std": 2}, "write `distribution:` instead of `dist:`"),
    ([1, 2], "bounds: [1, 2]"),
    (True, "a boolean"),
    ("fast", "got the text 'fast'"),
    (None, "a parameter is a number"),
]


@pytest.mark.parametrize("raw, message", INVALID, ids=[str(i) for i in range(len(INVALID))])
def test_invalid_input_gives_one_clear_error(raw, message):
    msg = only_error(raw)
    assert message in msg
    assert msg.count("Value error") <= 1 and "union" not in msg.lower()


@pytest.mark.parametrize("name, suggestion", [
    ("normall", "did you mean 'normal'?"), ("Normal", "did you mean 'normal'?"),
    ("gaussian", "did you mean 'normal'?"), ("lognorm", "did you mean 'lognormal'?"),
    ("truncnorm", "did you mean 'truncnormal'?"), ("unifrom", "did you mean 'uniform'?"),
    ("triang", "did you mean 'triangular'?"), ("log-uniform", "did you mean 'loguniform'?"),
    ("fixed", "write the bare number"), ("bounds", "without `distribution:`"),
])
def test_unknown_distribution_lists_names_and_suggests(name, suggestion):
    msg = only_error({"distribution": name, "mean": 0, "std": 1})
    assert f"got {name!r}" in msg and suggestion in msg
    assert all(d in msg for d in DISTRIBUTIONS)


def test_unknown_distribution_without_a_close_name_still_lists_the_names():
    msg = only_error({"distribution": "zzzz"})
    assert "distribution must be one of uniform, normal" in msg and "did you mean" not in msg


def test_error_messages_carry_the_offending_key():
    with pytest.raises(ValidationError) as info:
        load({"distribution": "normal", "mean": 0, "std": -1})
    assert info.value.errors()[0]["loc"][-1] == "std"


def test_json_schema_accepts_bare_numbers_and_requires_the_tag():
    schema = M.model_json_schema()
    defs = schema["$defs"]
    assert {"type": "number"} in defs["Fixed"]["anyOf"]
    assert "distribution" in defs["Normal"]["required"]
    assert "bounds" in defs["Bounds"]["properties"]
    assert defs["Normal"]["properties"]["std"]["exclusiveMinimum"] == 0
    assert "ln(x)" in defs["LogNormal"]["properties"]["mu"]["description"]


@pytest.mark.parametrize("raw, valid", [
    (3, True), ({"value": 2}, True), ({"bounds": [0, 1]}, True),
    ({"distribution": "normal", "mean": 0, "std": 1}, True),
    ({"distribution": "lognormal", "mu": 0, "sigma": 1}, True),
    ({"low": 1, "high": 2}, False), ({"distribution": "normall", "mean": 0, "std": 1}, False),
    ({"distribution": "normal", "mean": 0, "std": 0}, False), (True, False), ("x", False),
])
def test_json_schema_agrees_with_validation(raw, valid):
    import jsonschema

    errors = list(jsonschema.Draft202012Validator(M.model_json_schema()).iter_errors({"p": raw}))
    assert (not errors) == valid


# --- sampling ----------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["random", "lhs", "sobol"])
def test_sample_unit_shape_range_and_determinism(method, recwarn):
    a = sample_unit(100, 3, method, np.random.SeedSequence(42))
    b = sample_unit(100, 3, method, np.random.SeedSequence(42))
    c = sample_unit(100, 3, method, np.random.SeedSequence(43))
    assert a.shape == (100, 3) and np.all((a > 0) & (a < 1))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not [w for w in recwarn if "sobol" in str(w.message).lower() or "balance" in str(w.message)]
    assert sample_unit(0, 3, method, np.random.SeedSequence(1)).shape == (0, 3)


def test_sample_unit_is_stratified_for_lhs_and_a_prefix_for_sobol():
    u = sample_unit(50, 2, "lhs", np.random.SeedSequence(7))
    for j in range(2):  # one point per stratum in every column
        np.testing.assert_array_equal(np.sort(np.floor(u[:, j] * 50)), np.arange(50))
    full = sample_unit(64, 2, "sobol", np.random.SeedSequence(7))
    np.testing.assert_array_equal(sample_unit(50, 2, "sobol", np.random.SeedSequence(7)), full[:50])


def test_sample_unit_rejects_unknown_method():
    with pytest.raises(ValueError, match="random, lhs, sobol"):
        sample_unit(4, 1, "halton", np.random.SeedSequence(0))


@pytest.mark.parametrize("method", ["random", "lhs", "sobol"])
def test_monte_carlo_moments(method):
    u = sample_unit(20000, 2, method, np.random.SeedSequence(2026))
    normal = load({"distribution": "normal", "mean": 0.2, "std": 0.02}).ppf(u[:, 0])
    lognormal = load({"distribution": "lognormal", "mean": 2.0, "std": 0.5}).ppf(u[:, 1])
    assert normal.mean() == pytest.approx(0.2, abs=4 * 0.02 / math.sqrt(20000))
    assert normal.std() == pytest.approx(0.02, rel=0.03)
    assert lognormal.mean() == pytest.approx(2.0, abs=4 * 0.5 / math.sqrt(20000))
    assert lognormal.std() == pytest.approx(0.5, rel=0.05)


def test_map_unit_and_varied():
    study = {"fixed": load(1), "box": load({"bounds": [0, 10]}),
             "noise": load({"distribution": "normal", "mean": 0, "std": 1})}
    assert list(varied(study)) == ["box", "noise"]
    u = np.array([[0.5, 0.5], [0.1, 0.975]])
    np.testing.assert_allclose(map_unit(varied(study), u), [[5, 0], [1, 1.959963984540054]])


# --- properties: ppf is monotone and stays in the box for bounded kinds --------------------------

finite = st.floats(-1e6, 1e6, allow_nan=False)
positive = st.floats(1e-3, 1e3)


@st.composite
def bounded_kinds(draw):
    low = draw(finite)
    high = low + draw(st.floats(1e-3, 1e6))
    kind = draw(st.sampled_from(["uniform", "bounds", "truncnormal", "triangular", "loguniform",
                                 "beta", "discrete"]))
    if kind == "uniform":
        return {"distribution": "uniform", "low": low, "high": high}
    if kind == "bounds":
        return {"bounds": [low, high]}
    if kind == "truncnormal":
        return {"distribution": "truncnormal", "mean": draw(finite), "std": draw(positive),
                "low": low, "high": high}
    if kind == "triangular":
        return {"distribution": "triangular", "low": low, "high": high,
                "mode": low + draw(st.floats(0, 1)) * (high - low)}
    if kind == "loguniform":
        a = draw(st.floats(1e-6, 1e3))
        return {"distribution": "loguniform", "low": a, "high": a * draw(st.floats(1.01, 1e6))}
    if kind == "beta":
        return {"distribution": "beta", "alpha": draw(positive), "beta": draw(positive),
                "low": low, "high": high}
    values = draw(st.lists(finite, min_size=2, max_size=8, unique=True))
    weights = draw(st.lists(st.floats(0.01, 10), min_size=len(values), max_size=len(values)))
    return {"distribution": "discrete", "values": values, "weights": weights}


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(raw=bounded_kinds(), u=st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_ppf_is_monotone_and_within_bounds(raw, u):
    p = load(raw)
    u = np.sort(np.asarray(u))
    x = p.ppf(u)
    lo, hi = p.bounds()
    numbers = [abs(v) for v in raw.values() if isinstance(v, (int, float))] + [abs(lo), abs(hi)]
    rounding = 1e3 * np.finfo(float).eps * max(numbers)  # far-tail truncnormal: loc + scale * z
    assert not np.isnan(x).any()
    assert np.all(np.diff(x) >= -rounding)
    assert np.all((x >= lo) & (x <= hi))


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(mean=finite, std=positive, u=st.lists(st.floats(1e-12, 1 - 1e-12), min_size=2, max_size=30))
def test_unbounded_ppf_is_monotone(mean, std, u):
    for p in (load({"distribution": "normal", "mean": mean, "std": std}),
              load({"distribution": "gamma", "shape": std, "scale": 1, "loc": mean}),
              LogNormal(mu=mean / 1e6, sigma=std / 1e3)):
        x = p.ppf(np.sort(u))
        rounding = 1e-12 * np.abs(x[1:])  # scipy's inverse CDFs are monotone to rounding only
        assert np.all(np.diff(x) >= -rounding)


def test_ppf_survives_extreme_tails():
    """scipy's beta solver gives NaN (and non-monotone values) for subnormal u."""
    p = load({"distribution": "beta", "alpha": 36, "beta": 145})
    x = p.ppf(np.array([0.0, 5e-324, 1e-310, 1e-300, 1e-16, 0.5, 1.0]))
    assert not np.isnan(x).any() and np.all(np.diff(x) >= 0)
    assert x[0] == 0 and x[-1] == 1
    assert np.isnan(p.ppf([-0.1, 1.1, np.nan])).all()


def test_numpy_scalars_are_numbers():
    assert load(np.float32(1.5)).value == 1.5 and load(np.int64(3)).value == 3


def test_python_construction_needs_no_tag():
    assert Bounds(bounds=(0, 1)).bounds() == (0, 1)
    assert Discrete(values=[1, 2]).median() == 1
    assert isinstance(load(Fixed(value=2)), Fixed)


NOT_FINITE = [
    ({"distribution": "lognormal", "mu": 1000, "sigma": 1}, "inf to inf"),
    ({"distribution": "lognormal", "mean": 1e-300, "std": 1e300}, "not all finite"),
    ({"distribution": "normal", "mean": 0, "std": 1e308}, "-inf to inf"),
    ({"distribution": "gamma", "shape": 1e300, "scale": 1e10}, "0 to inf"),
    ({"distribution": "truncnormal", "mean": 0, "std": 1e308, "low": 0}, "0 to inf"),
    ({"bounds": [-1.7e308, 1.7e308]}, "a range wider than the largest float"),
    ({"distribution": "uniform", "low": -1e308, "high": 1e308}, "a range wider than"),
    ({"distribution": "beta", "alpha": 1, "beta": 2, "low": -1e308, "high": 1e308}, "a range wider"),
]


@pytest.mark.parametrize("raw, found", NOT_FINITE, ids=[str(r) for r, _ in NOT_FINITE])
def test_a_distribution_whose_values_overflow_is_refused(raw, found):
    message = only_error(raw)
    assert "values are not all finite numbers" in message and found in message


@pytest.mark.parametrize("raw", [{"distribution": "lognormal", "mu": 700, "sigma": 1},
                                 {"distribution": "normal", "mean": 1e308, "std": 1e306},
                                 {"bounds": [1e308, 1.7e308]}])
def test_distributions_near_the_float_limit_but_finite_are_accepted(raw):
    assert np.isfinite(load(raw).bounds()).all()


@pytest.mark.slow
def test_a_lognormal_that_overflows_is_located_by_the_cli(tmp_path):
    """`mu: 1000` validated, then raised OverflowError when sampled."""
    from conftest import run_cli

    (tmp_path / "m.py").write_text("def f(k):\n    return k\n")
    path = tmp_path / "study.yaml"
    path.write_text("name: t\nmodel: {type: python, function: 'm:f'}\nparameters:\n"
                    "  k: {distribution: lognormal, mu: 1000, sigma: 1}\n"
                    "analysis: {type: montecarlo, samples: 4}\n")
    for command in ("validate", "run"):
        done = run_cli(command, path, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"{path}:4:3: parameters.k: this lognormal parameter's "
                                      "values are not all finite numbers: its values reach about "
                                      "inf to inf"), done.stderr


def test_uniform_kinds_give_scipys_numbers_exactly_without_importing_it():
    """bounds and uniform map the unit cube, and check a nominal, as scipy.stats.uniform does,
    bit for bit, but without importing scipy.stats (a second of a small study's CPU)."""
    tiny = np.finfo(float).tiny
    u = np.r_[0.0, 5e-324, tiny, Q, np.nextafter(1, 0), 1.0, -0.1, 1.1, np.nan]
    for raw, (low, high) in (({"bounds": [0.1, 0.7]}, (0.1, 0.7)),
                             ({"distribution": "uniform", "low": -3e5, "high": 7.3}, (-3e5, 7.3))):
        p, dist = load(raw), stats.uniform(low, high - low)
        # what ppf did with scipy: subnormals raised to tiny, the result kept within the limits
        expected = np.clip(dist.ppf(np.where((u > 0) & (u < tiny), tiny, u)), low, high)
        np.testing.assert_array_equal(p.ppf(u), expected)
        assert p._support() == tuple(float(x) for x in dist.support())
    code = ("import sys; from studyrun.blocks.params import Bounds, Uniform; "
            "Bounds(bounds=[0, 1], nominal=0.5).ppf([0.2, 0.9]); "
            "Uniform(low=1, high=2, nominal=2).ppf([0.3]); "
            "assert not [m for m in sys.modules if m.startswith('scipy')], 'scipy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_normal_gives_scipys_numbers_exactly_without_importing_scipy_stats():
    """A normal maps the unit cube as scipy.stats.norm does, bit for bit, through scipy.special
    alone (importing scipy.stats is a second of every Monte Carlo of normal inputs)."""
    tiny = np.finfo(float).tiny
    u = np.r_[0.0, 5e-324, tiny, Q, np.nextafter(1, 0), 1.0, -0.1, 1.1, np.nan]
    for mean, std in ((0.0, 1.0), (-3e5, 7.3), (2.5, 1e-9)):
        p, dist = load({"distribution": "normal", "mean": mean, "std": std}), stats.norm(mean, std)
        np.testing.assert_array_equal(p.ppf(u), dist.ppf(np.where((u > 0) & (u < tiny), tiny, u)))
        assert p._support() == tuple(float(x) for x in dist.support())
    code = ("import sys; from studyrun.blocks.params import Normal; "
            "Normal(mean=1, std=2, nominal=3).ppf([0.2, 0.9]); "
            "assert 'scipy.stats' not in sys.modules, 'scipy.stats imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("method", ["random", "lhs", "sobol"])
def test_the_same_seed_object_gives_the_same_sample_every_time(method):
    """scipy's qmc engines spawn from the generator's seed; a second call must not see that."""
    seed = np.random.SeedSequence(42)
    first = sample_unit(100, 3, method, seed)
    assert np.array_equal(sample_unit(100, 3, method, seed), first)
    if method != "lhs":  # one sequence: a larger sample begins with the smaller one
        assert np.array_equal(sample_unit(300, 3, method, seed)[:100], first)
        assert np.array_equal(sample_unit_range(100, 300, 3, method, seed),
                              sample_unit(300, 3, method, seed)[100:])
