"""Fuzzing the safe expression language (issue 8, point 4): random expression trees of names,
numbers, operators and calls, mixed with what the language refuses (attributes, subscripts,
lambdas, f-strings, walrus, comprehensions...) and hostile snippets.

Properties: parsing ends in an Expr or an ExprError within a time limit; an accepted expression
holds only whitelisted nodes, evaluates over a batch without raising, and pickles; nothing
reaches `exec`, a shell, a subprocess or the file system (an audit hook watches); the same text
as a quantity, a rate, an auxiliary or an initial value of a study ends in a valid study or a
located StudyError.
"""

from __future__ import annotations

import ast
import copy
import pickle
import sys
import time

import cloudpickle
import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_common import FAST, STUDIES, examples, load_cleanly, time_limit, watched

from studyrun.blocks.expr import BUILTINS, MAX_DEPTH, Expr, ExprError, parse
from studyrun.blocks.quantities import FUNCTIONS, Quantities, parse_quantity
from studyrun.core.batch import ModelOutput

# ------------------------------------------------------------------------------ expressions

NAMES = ["x", "y", "time", "population", "growth", "rate", "capacity", "initial_population",
         "area", "a_b", "inf", "nan", "e", "pi", "True", "None", "_x", "__import__", "__builtins__",
         "os", "eval", "exec", "open", "globals", "self", "lambda_", "print", "\u00e9t\u00e9"]
FUNCTION_NAMES = [*BUILTINS, "final", "initial", "max", "min", "mean", "integral", "at", "series",
                  "growth_multiplier", "sum", "__import__", "getattr", "eval", "exec", "open",
                  "type", "globals", "vars", "print", "maxx", "EXP", "Exp"]
NUMBER_TEXT = st.one_of(
    st.integers(0, 10**6).map(str), st.integers(0, 10**400).map(str),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["1e400", "1e-400", "0x10", "0o7", "0b1", "1_000", "1j", ".5", "5.", "0",
                     "00", "1e", "9" * 400, "1" * 4400, "4.2e-1_0"]),
)
ATOMS = st.one_of(st.sampled_from(NAMES), NUMBER_TEXT,
                  st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,6}\Z"),
                  st.sampled_from(["'x'", "b'x'", "f'{x}'", "...", "None", "True", "''", "r'\\n'"]))
BINARY = ["+", "-", "*", "/", "**", "%", "//", "^", "@", "<<", ">>", "&", "|", " and ", " or ",
          "<", "<=", ">", ">=", "==", "!=", " is ", " in ", " is not ", " not in "]
UNARY = ["-", "+", "~", "not ", "- -"]


FORMS = [  # how a node combines its parts: the language's own forms first, then refused ones
    lambda d, p: f"{p(d)} {d(st.sampled_from(BINARY))} {p(d)}",
    lambda d, p: f"{d(st.sampled_from(UNARY))}{p(d)}",
    lambda d, p: f"{d(st.sampled_from(FUNCTION_NAMES))}({', '.join(p(d) for _ in range(d(st.integers(0, 4))))})",
    lambda d, p: f"({p(d)})",
    lambda d, p: f"if_then_else({p(d)}, {p(d)}, {p(d)})",
    lambda d, p: f"({p(d)}) < {p(d)} <= 3",
    lambda d, p: f"({p(d)}).{d(st.sampled_from(['__class__', 'real', '__bases__', 'system', 'T']))}",
    lambda d, p: f"({p(d)})[{p(d)}]",
    lambda d, p: f"lambda: {p(d)}",
    lambda d, p: f"{p(d)} if {p(d)} else {p(d)}",
    lambda d, p: f"(n := {p(d)})",
    lambda d, p: f"({p(d)}, {p(d)})",
    lambda d, p: f"[{p(d)}]",
    lambda d, p: f"{{{p(d)}: {p(d)}}}",
    lambda d, p: f"[v for v in {p(d)}]",
    lambda d, p: f"max(*{p(d)})",
    lambda d, p: f"max(x, key={p(d)})",
    lambda d, p: f"f'{{{p(d)}}}'",
    lambda d, p: f"await {p(d)}",
    lambda d, p: f"{p(d)}()",
    lambda d, p: f"{p(d)} # comment",
    lambda d, p: f"{p(d)}\n+ 1",
]


@st.composite
def expressions(draw, depth: int = 0) -> str:
    """The text of a random expression tree, at most 5 levels deep (mostly the language's
    own forms: the first six of FORMS are drawn two times in three)."""
    if depth >= 5 or draw(st.integers(0, 3)) == 0:
        return draw(ATOMS)
    own = draw(st.integers(0, 2)) < 2
    form = draw(st.sampled_from(FORMS[:6] if own else FORMS))
    return form(draw, lambda d: d(expressions(depth + 1)))


VALID_NAMES = ["x", "y", "time", "rate", "population", "area"]
VALID_ATOMS = st.one_of(st.sampled_from(VALID_NAMES), st.integers(0, 10**6).map(str),
                        st.floats(min_value=0, allow_nan=False).map(repr).filter(lambda t: "inf" not in t),
                        st.sampled_from(["1e400", "1e-400", "0", ".5", "9" * 300]))
VALID_BINARY = ["+", "-", "*", "/", "**", "<", "<=", ">", ">=", "==", "!="]


@st.composite
def valid_expressions(draw, depth: int = 0) -> str:
    """The text of a random tree of the language's own forms, calls with the right arity."""
    if depth >= 6 or draw(st.integers(0, 3)) == 0:
        return draw(VALID_ATOMS)
    part = lambda: draw(valid_expressions(depth + 1))  # noqa: E731
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return f"{part()} {draw(st.sampled_from(VALID_BINARY))} {part()}"
    if kind == 1:
        return f"{draw(st.sampled_from(['-', '+', '']))}({part()})"
    name = draw(st.sampled_from(sorted(BUILTINS)))
    fdef = BUILTINS[name]
    count = draw(st.integers(fdef.min_args, min(fdef.max_args, fdef.min_args + 2)))
    return f"{name}({', '.join(part() for _ in range(count))})"


EXPRESSIONS = st.one_of(expressions(), valid_expressions())


HOSTILE = [
    "__import__('os').system('touch /tmp/studyrun-pwned')",
    "().__class__.__bases__[0].__subclasses__()",
    "().__class__.__bases__",
    "exp.__globals__",
    "(lambda: 1)()",
    "lambda: 1",
    "eval('1')",
    "exec('import os')",
    "open('/tmp/studyrun-pwned', 'w')",
    "globals()",
    "x[0]",
    "x.T",
    "f'{x}'",
    "f'{__import__(\"os\").system(\"id\")}'",
    "(y := 1)",
    "[c for c in ().__class__.__base__.__subclasses__()]",
    "__builtins__",
    "_x + 1",
    "exp(x)(1)",
    "max(*x)",
    "max(x, key=exp)",
    "x if x else y",
    "x and y",
    "not x",
    "~x",
    "x % 2",
    "x // 2",
    "x ^ 2",
    "x @ x",
    "x << 1",
    "'a' * 10**9",
    "b'x'",
    "...",
    "None",
    "True + 1",
    "1j",
    "x # ; import os",
    "yield x",
    "await x",
    "import os",
    "x; import os",
    "x\nimport os",
]
BLOW_UPS = [
    "9**9**9", "9**9**9**9", "10**10**10 * 0", "(9**9)**(9**9)", "exp(exp(exp(1e308)))",
    "2.0 ** 1e300", "(-1) ** 0.5", "0 ** -1", "1 / 0", "log(0) - log(0)", "9**9**9 * x",
    "(" * 199 + "x" + ")" * 199, "(" * 5000 + "x" + ")" * 5000, "-" * 199 + "x", "-" * 20000,
    "x" + " + x" * 199, "x" + " + x" * 4000, "max(" + ", ".join(["x"] * 3000) + ")",
    "exp(" * 150 + "x" + ")" * 150, "1" * 4300, "1" * 4400, "9" * 309, "x" * 20_001,
    "if_then_else(" * 60 + "x, 1, 2)" * 60,
]
ALLOWED_NODES = (ast.Expression, ast.Constant, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp,
                 ast.Compare, ast.Call, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.USub,
                 ast.UAdd, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


def parse_cleanly(text: str, functions=None, seconds: float = 5.0) -> Expr | None:
    """parse(text) within a time limit: an Expr, or None for an ExprError; nothing else."""
    start = time.perf_counter()
    try:
        with time_limit(seconds), watched():
            expr = parse(text, functions)
    except ExprError as error:
        assert error.message and "\n" not in error.message
        return None
    finally:
        assert time.perf_counter() - start < seconds
    check_accepted(expr, functions)
    return expr


def check_accepted(expr: Expr, functions) -> None:
    """An accepted expression holds only the language's nodes and calls known functions."""
    allowed = {**BUILTINS, **(functions or {})}
    for node in ast.walk(expr.tree):
        assert isinstance(node, ALLOWED_NODES), f"{type(node).__name__} accepted in {expr.text!r}"
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name) and node.func.id in allowed and not node.keywords
        if isinstance(node, ast.Name):
            assert not node.id.startswith("_")
        if isinstance(node, ast.Constant):
            assert type(node.value) in (int, float)
    dumps = pickle.dumps if functions is None else cloudpickle.dumps  # as dask ships quantities
    assert pickle.loads(dumps(expr)).text == expr.text


# ------------------------------------------------------------------------------ parse and evaluate


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_snippets_are_refused(text, tmp_path):
    assert parse_cleanly(text) is None
    assert parse_cleanly(text, FUNCTIONS) is None
    assert not (tmp_path / "studyrun-pwned").exists()


@pytest.mark.parametrize("text", BLOW_UPS, ids=lambda t: t[:30])
def test_blow_ups_end_quickly(text):
    """Constant folding and parsing of huge exponents, long and deep expressions stay fast, and
    what is accepted evaluates without raising."""
    cpu = time.thread_time()  # a blow-up costs CPU time, which a busy machine does not stretch
    expr = parse_cleanly(text)  # its wall-clock limit catches a hang
    if expr is not None:
        evaluate_cleanly(expr)
    assert time.thread_time() - cpu < 3.0


def test_huge_integer_literal_is_an_error_not_an_overflow():
    """Regression: a 400-digit integer raised OverflowError while constant folding."""
    with pytest.raises(ExprError, match="too large"):
        parse("1" * 400)
    with pytest.raises(ExprError, match="too large"):
        parse_quantity("2 * " + "9" * 310)
    assert parse("9" * 308).constant == float("9" * 308)  # below 1.8e308: a float


def test_nesting_is_capped_below_the_recursion_limit():
    """Regression: nesting near the interpreter's limit parsed in one process and raised
    RecursionError in another (a deeper worker stack); the cap says so at validation."""
    assert parse("x" + " + x" * (MAX_DEPTH - 1)) is not None
    with pytest.raises(ExprError, match="nested too deeply"):
        parse("x" + " + x" * MAX_DEPTH)
    with pytest.raises(ExprError, match="nested too deeply"):
        parse("-" * 450 + "x")
    deep = parse("x" + " + x" * (MAX_DEPTH - 1))

    def call_at_depth(depth: int):
        return call_at_depth(depth - 1) if depth else deep({"x": np.ones(2)})

    assert call_at_depth(sys.getrecursionlimit() - 3 * MAX_DEPTH - 50)[0] == MAX_DEPTH


def test_sympy_form_of_a_huge_power_does_not_hang():
    """Regression: to_sympy computed 9**9**9 exactly (a hang); it folds as numpy does."""
    from studyrun.blocks.expr import to_sympy

    with time_limit(10.0):
        form = to_sympy(parse("x * 9**9**9 + 2**3"), {})
    assert "oo" in str(form) and "8" in str(form)


def evaluate_cleanly(expr: Expr) -> None:
    """Every name bound to a batch of 3: the result is a number or an array, nothing raised."""
    rng = np.random.default_rng(0)
    env = {name: rng.normal(size=3) for name in expr.names}
    with time_limit(5.0), watched(), np.errstate(all="ignore"):
        value = expr(env)
    array = np.asarray(value, dtype=float)
    assert array.ndim <= 1 and array.size in (1, 3)


@pytest.mark.slow
@settings(FAST, max_examples=examples(300))
@given(text=st.one_of(EXPRESSIONS, st.sampled_from(HOSTILE + BLOW_UPS)))
def test_random_expressions_parse_or_are_refused(text):
    expr = parse_cleanly(text)
    if expr is not None:
        evaluate_cleanly(expr)


@pytest.mark.slow
@settings(FAST, max_examples=examples(150))
@given(text=EXPRESSIONS)
def test_random_quantities_evaluate_or_fail_the_runs(text):
    """As a quantity: refused at parse, or evaluated on a batch; a failure lands on the runs."""
    if parse_cleanly(text, FUNCTIONS) is None:
        return
    rng = np.random.default_rng(1)
    out = ModelOutput(n=3, scalars={"x": rng.normal(size=3), "rate": np.full(3, 0.4)},
                      series={name: rng.normal(size=(3, 5)) for name in NAMES if name != "time"},
                      time=np.linspace(0, 4, 5))
    inputs = {"y": rng.normal(size=3)}
    with time_limit(5.0), watched():
        quantities = Quantities({"q": text})
        values = quantities.evaluate(out, inputs)
    assert set(values) == ({"q"} - set(quantities.series_names))  # a series is stored, not a value
    assert all(e is None or isinstance(e, str) for e in out.errors)


# ------------------------------------------------------------------------------ inside studies


def study_with(folder, name: str, keys: tuple, text: str):
    """An example study with the model inlined and `text` at `keys` (quantities, rates...)."""
    data = copy.deepcopy(_STUDIES[name])
    target = data
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = text
    path = folder / "expression.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**6))
    return path


_STUDIES: dict = {}
PLACES = [
    ("logistic-montecarlo.yaml", ("quantities", "fuzzed")),
    ("logistic-montecarlo.yaml", ("model", "rates", "population")),
    ("logistic-montecarlo.yaml", ("model", "auxiliaries", "growth")),
    ("logistic-montecarlo.yaml", ("model", "auxiliaries", "fuzzed")),
    ("logistic-montecarlo.yaml", ("model", "states", "population")),
    ("flowers-sobol.yaml", ("model", "flows", "growth")),
    ("flowers-sobol.yaml", ("model", "stocks", "area", "initial")),
    ("flowers-sobol.yaml", ("quantities", "final_area")),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from studyrun.study.loading import include_files, read_yaml

    target = tmp_path_factory.mktemp("expressions")
    for name, _ in PLACES:
        _STUDIES.setdefault(name, include_files(read_yaml(STUDIES / name)).data)
    return target


@pytest.mark.slow
@settings(FAST, max_examples=examples(150))
@given(place=st.sampled_from(PLACES), text=st.one_of(EXPRESSIONS, st.sampled_from(HOSTILE + BLOW_UPS)))
def test_random_expressions_in_studies_end_in_a_located_error(folder, place, text):
    name, keys = place
    path = study_with(folder, name, keys, text)
    with watched():
        load_cleanly(path)
