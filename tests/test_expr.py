"""The safe expression language: parsing, rejection, batch evaluation, symbolic form."""

from __future__ import annotations

import pickle
import re
import time as clock

import numpy as np
import pytest
import sympy

from studyrun.blocks.expr import BUILTINS, ExprError, FunctionDef, check_names, parse, to_sympy


def ev(text, **env):
    return parse(text)(env)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1 + 2 * 3", 7.0),
        ("(1 + 2) * 3", 9.0),
        ("2 ** 3 ** 2", 512.0),
        ("-2 ** 2", -4.0),
        ("2 ** -1", 0.5),
        ("7 / 2", 3.5),
        ("+3 - -2", 5.0),
        ("1 < 2", 1.0),
        ("1 < 2 < 0", 0.0),
        ("(1 <= 1) + (2 != 2) + (3 == 3)", 2.0),
        ("42", 42.0),
        ("1e-3 * 1000", 1.0),
    ],
)
def test_arithmetic_and_precedence(text, expected):
    assert ev(text) == pytest.approx(expected)


def test_plain_numbers_are_expressions():
    assert parse(3)({}) == 3.0
    assert parse(2.5)({}) == 2.5
    assert parse(2.5).constant == 2.5
    assert parse("x").constant is None


def test_names_and_broadcasting():
    x = np.linspace(0, 1, 5)
    out = ev("a * x + b", x=x, a=np.full(5, 2.0), b=1.0)
    np.testing.assert_allclose(out, 2 * x + 1)
    grid = ev("x * y", x=np.arange(3.0)[:, None], y=np.arange(4.0)[None, :])
    assert grid.shape == (3, 4)


def test_names_and_calls_are_reported():
    e = parse("a * exp(-b) + max(c, 1) + step(1, 2)")
    assert e.names == {"a", "b", "c", "time"}
    assert e.calls == {"exp", "max", "step"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("exp(0)", 1.0),
        ("log(exp(2))", 2.0),
        ("log10(1000)", 3.0),
        ("sqrt(16)", 4.0),
        ("sin(0) + cos(0) + tan(0)", 1.0),
        ("abs(-3)", 3.0),
        ("min(3, 1, 2)", 1.0),
        ("max(3, 1, 2, 5)", 5.0),
        ("floor(2.7) + ceil(2.1)", 5.0),
        ("if_then_else(1 > 0, 10, 20)", 10.0),
        ("if_then_else(0, 10, 20)", 20.0),
    ],
)
def test_builtin_functions(text, expected):
    assert ev(text) == pytest.approx(expected)


def test_functions_are_elementwise():
    x = np.array([-1.0, 0.5, 2.0])
    np.testing.assert_allclose(ev("max(x, 0)", x=x), [0, 0.5, 2])
    np.testing.assert_allclose(ev("min(x, 1, 2 * x)", x=x), [-2, 0.5, 1])
    np.testing.assert_allclose(ev("if_then_else(x > 0, x, -x)", x=x), [1, 0.5, 2])
    assert set(BUILTINS) >= {"exp", "log", "ramp", "pulse", "step", "if_then_else"}


def test_step_pulse_ramp_semantics():
    t = np.arange(0.0, 6.0, 0.5)
    np.testing.assert_allclose(ev("step(3, 2)", time=t), np.where(t >= 2, 3.0, 0.0))
    np.testing.assert_allclose(ev("pulse(1, 2)", time=t), ((t >= 1) & (t < 3)).astype(float))
    np.testing.assert_allclose(ev("ramp(2, 1)", time=t), 2 * np.maximum(t - 1, 0))
    np.testing.assert_allclose(ev("ramp(2, 1, 3)", time=t), 2 * (np.clip(t, 1, 3) - 1))
    assert ev("step(5, 1)", time=1.0) == 5.0
    assert ev("step(5, 1)", time=0.999) == 0.0
    # per-run parameters against a scalar clock
    np.testing.assert_allclose(ev("step(h, 2)", h=np.array([1.0, 2.0]), time=3.0), [1, 2])


def test_clock_missing_is_a_clear_error():
    with pytest.raises(ExprError, match="time"):
        ev("step(1, 2)")


def test_unknown_name_at_run_time_is_a_clear_error():
    with pytest.raises(ExprError, match="'y'"):
        ev("x + y", x=1.0)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("x.__class__", "attribute"),
        ("__import__('os')", "not allowed"),
        ("__builtins__", "not allowed"),
        ("x[0]", "subscript"),
        ("(lambda: 1)()", "plain function names"),
        ("lambda: 1", "lambda"),
        ("'abc'", "string"),
        ("f'{x}'", "string"),
        ("max(x, y=2)", "keyword"),
        ("max(*x)", "starred"),
        ("[i for i in x]", "comprehension"),
        ("(x for x in y)", "comprehension"),
        ("x if y else z", "if_then_else"),
        ("x and y", "if_then_else"),
        ("not x", "unary"),
        ("x ^ 2", "**"),
        ("x % 2", "not allowed"),
        ("x // 2", "floor"),
        ("(x, y)", "tuple"),
        ("[x]", "list"),
        ("{1: 2}", "dict"),
        ("(y := 2)", "assignment"),
        ("True", "number"),
        ("None", "number"),
        ("1j", "number"),
        ("open('f')", "unknown function"),
        ("x # comment", "comment"),
        ("x +", "syntax"),
        ("", "empty"),
        ("exp(1)(2)", "plain function names"),
    ],
)
def test_rejections(text, fragment):
    with pytest.raises(ExprError) as info:
        parse(text)
    assert fragment in info.value.message


def test_error_offsets_point_into_the_text():
    with pytest.raises(ExprError) as info:
        parse("a + b.c")
    assert info.value.offset == 4
    with pytest.raises(ExprError) as info:
        parse("  a + exq(b)")
    assert info.value.offset == 6


def test_non_string_input_is_rejected():
    with pytest.raises(ExprError):
        parse(True)
    with pytest.raises(ExprError):
        parse([1, 2])  # type: ignore[arg-type]


def test_unknown_function_did_you_mean():
    with pytest.raises(ExprError, match="did you mean 'sqrt'"):
        parse("sqr(x)")
    lookups = {"growth_multiplier": FunctionDef("growth_multiplier", 1, 1, np.abs)}
    with pytest.raises(ExprError, match="did you mean 'growth_multiplier'"):
        parse("growth_multiplyer(x)", lookups)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("exp(1, 2)", "exp() takes 1 argument; got 2"),
        ("max(1)", "max() takes at least 2 arguments; got 1"),
        ("ramp(1)", "ramp() takes 2 to 3 arguments; got 1"),
        ("if_then_else(1, 2)", "if_then_else() takes 3 arguments; got 2"),
    ],
)
def test_arity_errors(text, fragment):
    with pytest.raises(ExprError) as info:
        parse(text)
    assert fragment in info.value.message


def test_extra_functions_and_time_taking_functions():
    table = FunctionDef("double", 1, 1, lambda x: 2 * np.asarray(x))
    clock = FunctionDef("since", 1, 1, lambda t0, *, time: np.subtract(time, t0), takes_time=True)
    e = parse("double(x) + since(1)", {"double": table, "since": clock})
    assert e({"x": 3.0, "time": 5.0}) == pytest.approx(10.0)
    assert "time" in e.names


def test_check_names_did_you_mean():
    e = parse("area * growth_rate + time")
    messages = check_names(e, ["area", "growth_rat", "decay"])
    assert len(messages) == 1
    assert "'growth_rate'" in messages[0] and "did you mean 'growth_rat'?" in messages[0]
    assert check_names(e, ["area", "growth_rate"]) == []
    assert "did you mean" not in check_names(parse("zzz"), ["area"])[0]


def test_expressions_pickle():
    e = parse("a * exp(-b * time)")
    clone = pickle.loads(pickle.dumps(e))
    env = {"a": 2.0, "b": 0.5, "time": 1.0}
    assert clone(env) == e(env)


def test_to_sympy_arithmetic_and_derivatives():
    x, y = sympy.symbols("x y")
    s = to_sympy(parse("x**2 * sin(y) + log10(x) + abs(y) - sqrt(x) / 2"), {"x": x, "y": y})
    assert sympy.simplify(sympy.diff(s, x) - (2 * x * sympy.sin(y) + 1 / (x * sympy.log(10))
                                             - 1 / (4 * sympy.sqrt(x)))) == 0
    assert to_sympy(parse("3"), {}) == 3


def test_to_sympy_piecewise_functions_agree_with_numpy():
    t = sympy.Symbol("time")
    for text in ["step(2, 1)", "pulse(1, 2)", "ramp(2, 1)", "ramp(2, 1, 3)",
                 "if_then_else(time > 2, time, 0)", "(time > 1) * 5", "max(time, 2)"]:
        s = to_sympy(parse(text), {"time": t})
        for value in [0.0, 1.0, 1.5, 2.5, 3.5]:
            assert float(s.subs(t, value)) == pytest.approx(ev(text, time=value)), text


def test_to_sympy_rejects_lookups():
    lookups = {"g": FunctionDef("g", 1, 1, np.abs)}
    with pytest.raises(ExprError, match="no symbolic form"):
        to_sympy(parse("g(x)", lookups), {})


def test_overflow_does_not_raise():
    with np.errstate(all="ignore"):
        assert ev("exp(x)", x=np.array([1e5]))[0] == np.inf
        assert np.isnan(ev("(-8) ** (1/3)"))


def test_batch_evaluation_is_about_the_cost_of_numpy():
    n = 10_000
    rng = np.random.default_rng(1)
    env = {k: rng.random(n) for k in "abcd"}
    env["time"] = 3.0
    e = parse("a * b / (c + 1) - exp(-d) * sqrt(a) + max(a, b) ** 2 + step(1, 2)")
    e(env)
    start = clock.thread_time()
    for _ in range(200):
        e(env)
    per_call = (clock.thread_time() - start) / 200
    assert per_call < 1e-3  # about 12 numpy ops on 10,000 floats: tens of microseconds of CPU


def test_multiline_text_and_unicode_offsets():
    assert ev("a +\n  b", a=1.0, b=2.0) == 3.0  # YAML folded text
    for text in ["αβ + x.y", "a +\n b.c"]:
        with pytest.raises(ExprError) as info:
            parse(text)
        assert text[info.value.offset:] in ("x.y", "b.c")


def test_chained_comparisons_elementwise_and_symbolic():
    x = np.array([0.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(ev("1 < x <= 3", x=x), [0, 1, 1, 0])
    s = to_sympy(parse("1 < x <= 3"), {})
    assert [float(s.subs("x", v)) for v in x] == [0, 1, 1, 0]


def test_constant_subtrees_are_folded():
    e = parse("x * (2 ** 10 + sqrt(16))")
    assert e({"x": 1.0}) == 1028.0
    assert parse("max(2, 3) * pulse(0, 1)").constant is None  # the clock is never folded


def test_bound_names_are_computed_once_with_the_same_values():
    calls = []

    def g(v):
        calls.append(1)
        return np.sqrt(v)

    e = parse("g(a * b) * x + if_then_else(a > 1, c, -c) - a / x", {"g": FunctionDef("g", 1, 1, g)})
    fixed = {"a": np.array([0.5, 1.5, 2.5]), "b": np.array([2.0, 3.0, 4.0]), "c": 7.0}
    bound = e.bind(fixed)
    assert len(calls) == 1  # g(a * b) computed at binding, not at each call
    for x in (np.array([1.0, 2.0, 3.0]), np.array([0.1, -4.0, 1e300])):
        np.testing.assert_array_equal(bound({"x": x}), e({**fixed, "x": x}))
    assert len(calls) == 3  # the unbound expression's own two calls
    np.testing.assert_array_equal(parse("a * b + 1").bind(fixed)({}), fixed["a"] * fixed["b"] + 1)
    assert parse("x ** 2").bind({"x": 3.0})({}) == 9.0


@pytest.mark.parametrize("literal, shown", [
    ("0x" + "f" * 4000, "0xffffffffff... (4,000 digits)"),  # was ValueError (Python's digit limit)
    ("9" * 5000, "999999999999... (5,000 digits)"),  # was an invalid-syntax message of 5000 nines
    ("1" * 400 + ".5", "111111111111... (401 digits)"),  # was inf, silently
    ("1e400", "1e400"),
])
def test_a_number_beyond_float64_is_an_error_at_its_column(literal, shown):
    with pytest.raises(ExprError) as info:
        parse(f"x + {literal}")
    assert info.value.offset == 4
    assert info.value.message == (f"the number {shown} is too large; numbers are floats, at most "
                                  "about 1.8e308")


@pytest.mark.slow
@pytest.mark.parametrize("literal", ["0x" + "f" * 4000, "9" * 5000, "1" * 4000 + ".0"])
@pytest.mark.parametrize("where", ["quantities", "model"])
def test_a_huge_literal_is_located_by_the_cli(tmp_path, literal, where):
    from conftest import run_cli

    rate = f"-k * x + 0 * {literal}" if where == "model" else "-k * x"
    quantity = f"final(x) + {literal}" if where == "quantities" else "final(x)"
    path = tmp_path / "study.yaml"
    path.write_text("name: t\nmodel:\n  type: ode\n  time: {start: 0, stop: 1, step: 0.5}\n"
                    f"  states: {{x: 1}}\n  rates: {{x: '{rate}'}}\n  constants: {{k: 1}}\n"
                    "parameters:\n  k: {bounds: [0.5, 1.5]}\n"
                    f"quantities: {{y: '{quantity}'}}\nanalysis: {{type: montecarlo, samples: 4}}\n")
    done = run_cli("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    line, key = (6, "model.rates.x") if where == "model" else (10, "quantities.y")
    assert re.match(rf"{re.escape(str(path))}:{line}:\d+: {key}: the number \S+\.\.\. \([\d,]+ "
                    r"digits\) is too large", done.stderr), done.stderr


def test_python_keywords_are_names_written_as_they_are():
    """Fails before: `yield`, `lambda`, `in` and `class` were syntax errors, so a model's
    variable of such a name could not be read (issue 29, point 3)."""
    e = parse("yield * 2 + lambda - max(in, class) + if_then_else(for > 1, 1, 0)")
    assert e.names == {"yield", "lambda", "in", "class", "for"}
    env = {"yield": np.array([1.0, 2.0]), "lambda": 0.5, "in": 3.0, "class": 4.0, "for": 2.0}
    np.testing.assert_array_equal(e(env), [2 + 0.5 - 4 + 1, 4 + 0.5 - 4 + 1])
    assert pickle.loads(pickle.dumps(e))(env).tolist() == e(env).tolist()
    assert parse("(yield)").names == {"yield"} and parse("é + in").names == {"é", "in"}
    for text, hint in [("a and b", "'and'/'or' are not allowed"), ("lambda x: x", "lambdas"),
                       ("x if c else y", "if_then_else"), ("not x", "unary"),
                       ("a in b", "comparisons"), ("_ield", "starting with '_'")]:
        with pytest.raises(ExprError, match=hint):  # the language's own hints stay
            parse(text)
    with pytest.raises(ExprError, match="invalid syntax") as caught:
        parse("yield +")
    assert caught.value.offset is not None
    with pytest.raises(ExprError, match="not a number"):  # constants are not names
        parse("True + 1")
