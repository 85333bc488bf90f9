"""The safe expression language shared by equation models and quantities of interest.

Text is parsed with :mod:`ast` (``mode="eval"``), checked against a whitelist of node types and
functions, and compiled into a tree of Python closures over numpy ufuncs that evaluates a whole
batch of runs at once. No text ever reaches ``eval``, ``exec`` or ``compile``.

The language: numbers, names, ``+ - * / **``, unary ``-``/``+``, comparisons (chainable; they
yield 1.0 or 0.0) and calls of whitelisted functions by plain name (:data:`BUILTINS` plus extra
functions such as a model's lookups). ``time`` is the clock: the functions that take time
(``step``, ``pulse``, ``ramp``) read it from the env key ``"time"``. Python's keywords but
``True``, ``False`` and ``None`` are names like any other, written as they are: ``yield * price``,
``lambda + 1`` (engineering models call things ``yield``, ``lambda`` and ``in``).

Values are float64 throughout: integer literals become floats, so ``2 ** -1`` is 0.5.
"""

from __future__ import annotations

import ast
import functools
import io
import keyword
import re
import threading
import tokenize
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from studyrun.core.text import suggest

# CPython 3.11 keeps ast.parse's recursion count in module state: two threads parsing at once (the
# threads scheduler, a worker's task beside the driver's) fail with "AST constructor recursion
# depth mismatch". One parse at a time.
PARSING = threading.Lock()  # hold it around any ast.parse of expression text

__all__ = ["ExprError", "FunctionDef", "BUILTINS", "Expr", "parse", "check_names", "to_sympy"]

TIME = "time"
MAX_LENGTH = 20_000
MAX_DEPTH = 200  # nesting of operators and calls (as Python's own limit on parentheses), so that
# checking, compiling and evaluating never meet the interpreter's recursion limit, on any worker
UNBOUNDED = 1_000_000  # max_args of a function that takes any number of arguments


class ExprError(ValueError):
    """An expression is malformed, unsafe or calls what it cannot; says where in the text."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.message = message
        self.offset = offset
        super().__init__(message if offset is None else f"{message} (at column {offset + 1})")


@dataclass(frozen=True)
class FunctionDef:
    """A function the language may call; ``impl`` gets evaluated arguments (and ``time=`` if asked)."""

    name: str
    min_args: int
    max_args: int
    impl: Callable[..., Any]
    takes_time: bool = False

    def describe_arity(self) -> str:
        if self.max_args >= UNBOUNDED:
            return f"at least {self.min_args} argument{'s' if self.min_args != 1 else ''}"
        if self.min_args == self.max_args:
            return f"{self.min_args} argument{'s' if self.min_args != 1 else ''}"
        return f"{self.min_args} to {self.max_args} arguments"


# ---------------------------------------------------------------- builtin functions
# Module-level functions (not lambdas) so that expressions pickle.


def _minimum(*args):
    return functools.reduce(np.minimum, args)


def _maximum(*args):
    return functools.reduce(np.maximum, args)


def _if_then_else(cond, a, b):
    out = np.where(cond, a, b)
    return out if out.ndim else float(out)


def _step(height, t0, *, time):
    """Vensim STEP: ``height`` from ``t0`` on, 0 before."""
    out = np.where(np.greater_equal(time, t0), height, 0.0)
    return out if out.ndim else float(out)


def _pulse(t0, width, *, time):
    """Vensim PULSE: 1 where ``t0 <= time < t0 + width``, else 0."""
    inside = np.logical_and(np.greater_equal(time, t0), np.less(time, np.add(t0, width)))
    out = inside.astype(np.float64)
    return out if out.ndim else float(out)


def _ramp(slope, t0, t1=None, *, time):
    """Vensim RAMP: 0 before ``t0``, ``slope * (time - t0)`` after, held constant from ``t1``."""
    t = np.maximum(time, t0) if t1 is None else np.clip(time, t0, np.maximum(t0, t1))
    out = np.multiply(slope, np.subtract(t, t0))
    return out if np.ndim(out) else float(out)


BUILTINS: dict[str, FunctionDef] = {
    f.name: f
    for f in [
        FunctionDef("exp", 1, 1, np.exp),
        FunctionDef("log", 1, 1, np.log),
        FunctionDef("log10", 1, 1, np.log10),
        FunctionDef("sqrt", 1, 1, np.sqrt),
        FunctionDef("sin", 1, 1, np.sin),
        FunctionDef("cos", 1, 1, np.cos),
        FunctionDef("tan", 1, 1, np.tan),
        FunctionDef("abs", 1, 1, np.abs),
        FunctionDef("floor", 1, 1, np.floor),
        FunctionDef("ceil", 1, 1, np.ceil),
        FunctionDef("min", 2, UNBOUNDED, _minimum),
        FunctionDef("max", 2, UNBOUNDED, _maximum),
        FunctionDef("if_then_else", 3, 3, _if_then_else),
        FunctionDef("step", 2, 2, _step, takes_time=True),
        FunctionDef("pulse", 2, 2, _pulse, takes_time=True),
        FunctionDef("ramp", 2, 3, _ramp, takes_time=True),
    ]
}

# ---------------------------------------------------------------- checking

_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
           ast.Pow: np.power}
_BINOP_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_CMPOPS = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
           ast.Eq: np.equal, ast.NotEq: np.not_equal}
_REJECTED_BINOP_HINTS = {
    ast.BitXor: "'^' is not a power; use '**'",
    ast.Mod: "'%' is not allowed",
    ast.FloorDiv: "'//' is not allowed; use floor(a / b)",
    ast.MatMult: "'@' is not allowed",
}
_REJECTED_NODE_HINTS = {
    ast.Attribute: "attribute access is not allowed",
    ast.Subscript: "subscripts are not allowed",
    ast.Lambda: "lambdas are not allowed",
    ast.IfExp: "'a if c else b' is not allowed; use if_then_else(c, a, b)",
    ast.BoolOp: "'and'/'or' are not allowed; use if_then_else, min or max",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.JoinedStr: "strings are not allowed",
    ast.Tuple: "tuples are not allowed",
    ast.List: "lists are not allowed",
    ast.Dict: "dicts are not allowed",
    ast.Set: "sets are not allowed",
    ast.NamedExpr: "assignment expressions are not allowed",
    ast.Starred: "starred arguments are not allowed",
}


_NUMBER = re.compile(r"[0-9a-zA-Z_.]+([eE][-+]?[0-9_]+)?")  # a literal as written (loosely)


def too_large(literal: str) -> str:
    """Why a number written as `literal` is refused: values are float64."""
    if len(literal) > 24:
        digits = len(re.sub(r"^0[xXoObB]|[^0-9a-fA-F]", "", literal))
        literal = f"{literal[:12]}... ({digits:,} digits)"
    return f"the number {literal} is too large; numbers are floats, at most about 1.8e308"


def _offset(text: str, node: ast.AST, shift: int) -> int | None:
    """Character offset of a node within the original text (ast counts UTF-8 bytes per line)."""
    col = getattr(node, "col_offset", None)
    if col is None:
        return None
    return shift + len(text.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


class _Checker:
    """Walks a parsed tree, rejecting anything outside the language; collects names and calls."""

    def __init__(self, text: str, shift: int, functions: Mapping[str, FunctionDef]):
        self.text, self.shift, self.functions = text, shift, functions
        self.names: set[str] = set()
        self.calls: set[str] = set()
        self.depth = 0

    def fail(self, message: str, node: ast.AST) -> ExprError:
        return ExprError(message, _offset(self.text, node, self.shift))

    def visit(self, node: ast.AST) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"expression nested too deeply (more than {MAX_DEPTH} levels of "
                            "operators and calls); split it into auxiliaries", node)
        try:
            self.visit_node(node)
        finally:
            self.depth -= 1

    def visit_node(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant):
            self.check_constant(node)
        elif isinstance(node, ast.Name):
            self.check_name(node.id, node)
            self.names.add(node.id)
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINOPS:
                hint = _REJECTED_BINOP_HINTS.get(type(node.op), "operator not allowed")
                raise self.fail(f"{hint}; allowed: + - * / **", node)
            self.visit(node.left)
            self.visit(node.right)
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd)):
                raise self.fail("only unary '-' and '+' are allowed", node)
            self.visit(node.operand)
        elif isinstance(node, ast.Compare):
            for op in node.ops:
                if type(op) not in _CMPOPS:
                    raise self.fail("only the comparisons < <= > >= == != are allowed", node)
            self.visit(node.left)
            for comparator in node.comparators:
                self.visit(comparator)
        elif isinstance(node, ast.Call):
            self.check_call(node)
        else:
            hint = _REJECTED_NODE_HINTS.get(type(node), f"{type(node).__name__} is not allowed")
            raise self.fail(hint, node)

    def check_constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, str):
            raise self.fail("strings are not allowed", node)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"{value!r} is not a number; only numbers are allowed", node)
        try:
            finite = np.isfinite(float(value))  # 1e999 and 9.9...9 of 400 digits are inf
        except OverflowError:  # an integer literal beyond float64
            finite = False
        if not finite:
            raise self.fail(too_large(self.literal(node)), node)

    def literal(self, node: ast.AST) -> str:
        """A number as written in the text (never str() of a huge int: Python refuses those)."""
        start = _offset(self.text, node, 0) or 0
        match = _NUMBER.match(self.text, start)
        return match.group() if match else "?"

    def check_name(self, name: str, node: ast.AST) -> None:
        if name.startswith("__") or name.startswith("_"):
            raise self.fail(f"names starting with '_' are not allowed: {name!r}", node)

    def check_call(self, node: ast.Call) -> None:
        if not isinstance(node.func, ast.Name):
            raise self.fail("only plain function names may be called (no attributes or calls "
                            "of calls)", node)
        name = node.func.id
        self.check_name(name, node)
        if node.keywords:
            raise self.fail(f"keyword arguments are not allowed in a call of {name!r}", node)
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise self.fail("starred arguments are not allowed", arg)
        fdef = self.functions.get(name)
        if fdef is None:
            raise self.fail(f"unknown function {name!r}{suggest(name, self.functions)}",
                            node)
        if not fdef.min_args <= len(node.args) <= fdef.max_args:
            raise self.fail(f"{name}() takes {fdef.describe_arity()}; got {len(node.args)}", node)
        self.calls.add(name)
        if fdef.takes_time:
            self.names.add(TIME)
        for arg in node.args:
            self.visit(arg)


# ---------------------------------------------------------------- compiling to closures

Env = Mapping[str, Any]
Closure = Callable[[Env], Any]


class _Const:
    """Marks a folded constant so parents can fold further and pick fast paths: a float, or an
    array of values per run when names are fixed by :meth:`Expr.bind`."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value if np.ndim(value) else float(value)


class _Compiler:
    def __init__(self, text: str, functions: Mapping[str, FunctionDef],
                 fixed: Mapping[str, Any] | None = None):
        self.text, self.functions, self.fixed = text, functions, fixed or {}

    def compile(self, node: ast.AST) -> Closure | _Const:
        method = getattr(self, "compile_" + type(node).__name__)
        return method(node)

    def compile_Constant(self, node: ast.Constant) -> _Const:
        return _Const(float(node.value))

    def compile_Name(self, node: ast.Name) -> Closure | _Const:
        name, text = node.id, self.text
        if name in self.fixed:
            return _Const(self.fixed[name])

        def read(env: Env) -> Any:
            try:
                return env[name]
            except KeyError:
                raise ExprError(f"no value for name {name!r} in expression {text!r}") from None

        return read

    def compile_UnaryOp(self, node: ast.UnaryOp) -> Closure | _Const:
        operand = self.compile(node.operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(operand, _Const):
            return _Const(-operand.value)
        return lambda env: np.negative(operand(env))

    def compile_BinOp(self, node: ast.BinOp) -> Closure | _Const:
        left, right = self.compile(node.left), self.compile(node.right)
        ufunc = _BINOPS[type(node.op)]
        if isinstance(left, _Const) and isinstance(right, _Const):
            with np.errstate(all="ignore"):
                return _Const(ufunc(left.value, right.value))
        if ufunc is np.power and isinstance(right, _Const) and isinstance(right.value, float):
            special = {2.0: np.square, 0.5: np.sqrt, 1.0: None}
            if right.value in special:
                fast = special[right.value]
                return left if fast is None else (lambda env: fast(left(env)))
        if isinstance(left, _Const):
            lv = left.value
            return lambda env: ufunc(lv, right(env))
        if isinstance(right, _Const):
            rv = right.value
            return lambda env: ufunc(left(env), rv)
        return lambda env: ufunc(left(env), right(env))

    def compile_Compare(self, node: ast.Compare) -> Closure | _Const:
        operands = [self.compile(n) for n in [node.left, *node.comparators]]
        ufuncs = [_CMPOPS[type(op)] for op in node.ops]
        getters = [(lambda env, c=o.value: c) if isinstance(o, _Const) else o for o in operands]

        def compare(env: Env) -> Any:
            values = [g(env) for g in getters]
            result = ufuncs[0](values[0], values[1])
            for i in range(1, len(ufuncs)):
                result = np.logical_and(result, ufuncs[i](values[i], values[i + 1]))
            return result.astype(np.float64) if isinstance(result, np.ndarray) else float(result)

        if all(isinstance(o, _Const) for o in operands):
            return _Const(compare({}))
        return compare

    def compile_Call(self, node: ast.Call) -> Closure | _Const:
        fdef = self.functions[node.func.id]
        args = [self.compile(a) for a in node.args]
        impl = fdef.impl
        if not fdef.takes_time and all(isinstance(a, _Const) for a in args):
            with np.errstate(all="ignore"):
                return _Const(impl(*(a.value for a in args)))
        getters = [(lambda env, c=a.value: c) if isinstance(a, _Const) else a for a in args]
        if fdef.takes_time:
            text = self.text

            def call_with_time(env: Env) -> Any:
                try:
                    clock = env[TIME]
                except KeyError:
                    raise ExprError(f"{fdef.name}() needs the clock 'time', which is not set "
                                    f"where {text!r} is evaluated") from None
                return impl(*(g(env) for g in getters), time=clock)

            return call_with_time
        if len(getters) == 1:
            (only,) = getters
            return lambda env: impl(only(env))
        if len(getters) == 2:
            first, second = getters
            return lambda env: impl(first(env), second(env))
        return lambda env: impl(*(g(env) for g in getters))


# ---------------------------------------------------------------- the public face


class Expr:
    """A parsed, checked and compiled expression; call it with an env of arrays or floats."""

    __slots__ = ("text", "names", "calls", "tree", "_fn", "_constant", "_extra")

    def __init__(self, text: str, names: frozenset[str], calls: frozenset[str],
                 tree: ast.Expression, fn: Closure | _Const,
                 extra: Mapping[str, FunctionDef] | None):
        self.text, self.names, self.calls, self.tree = text, names, calls, tree
        self._extra = dict(extra) if extra else None
        if isinstance(fn, _Const):
            value = fn.value
            self._constant: float | None = value
            self._fn: Closure = lambda env: value
        else:
            self._constant = None
            self._fn = fn

    @property
    def constant(self) -> float | None:
        """The value when the expression reads no names and no clock, else None."""
        return self._constant

    def __call__(self, env: Env) -> Any:
        return self._fn(env)

    def bind(self, fixed: Mapping[str, Any]) -> Closure:
        """This expression as a closure with the names in ``fixed`` set to their values (floats
        or arrays of one value per run): the parts that read only fixed names are computed once,
        here, instead of at every call; the rest gives the same values as the expression."""
        functions = {**BUILTINS, **(self._extra or {})}
        fn = _Compiler(self.text, functions, fixed).compile(self.tree.body)
        if isinstance(fn, _Const):
            value = fn.value
            return lambda env: value
        return fn

    def __reduce__(self):
        # Closures do not pickle; re-parse on the other side (extra functions must pickle).
        return (parse, (self.text, self._extra))

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


KEYWORD_NAMES = frozenset(keyword.kwlist) - {"True", "False", "None"}  # names in expressions


def keywords_as_names(body: str) -> tuple[str, frozenset[int]]:
    """The text with each keyword (`yield`, `in`) replaced by a name of the same length, so that
    Python parses it as a name, and the UTF-8 offsets at which they stand (the parsed tree's
    names there are given their keyword back: see named_keywords)."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(body).readline)
                  if t.type == tokenize.NAME and t.string in KEYWORD_NAMES]
    except (tokenize.TokenError, SyntaxError):  # the parser says what is wrong
        return body, frozenset()
    chars = list(body)
    for token in tokens:
        chars[token.start[1]] = "_"  # a name the checker refuses, so never one the user wrote
    return "".join(chars), frozenset(len(body[:t.start[1]].encode()) for t in tokens)


def named_keywords(tree: ast.AST, body: str, spots: frozenset[int]) -> None:
    """The names keywords_as_names made, given back their keyword."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.col_offset in spots:
            start = len(body.encode()[:node.col_offset].decode())
            node.id = body[start:start + len(node.id)]


def parse(text: str | int | float, functions: Mapping[str, FunctionDef] | None = None) -> Expr:
    """Parse, check and compile ``text``; ``functions`` adds to (or overrides) :data:`BUILTINS`."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ExprError(f"an expression must be a number or a string; got {text!r}")
    if not isinstance(text, str):
        text = repr(float(text)) if isinstance(text, float) else str(text)
    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression too long ({len(text)} characters; at most {MAX_LENGTH})")
    if "#" in text:
        raise ExprError("comments ('#') are not allowed in expressions", text.index("#"))
    flat = text.replace("\r", " ").replace("\n", " ").replace("\t", " ")
    body = flat.lstrip(" ")
    shift = len(flat) - len(body)
    if not body.strip():
        raise ExprError("empty expression")
    all_functions = {**BUILTINS, **(functions or {})}
    named, spots = keywords_as_names(body)
    try:
        with PARSING:
            tree = ast.parse(named, mode="eval")
        named_keywords(tree, body, spots)
    except SyntaxError as exc:
        if spots:
            explain_keywords(body, shift, all_functions)
        offset = None if exc.offset is None else shift + max(exc.offset - 1, 0)
        huge = re.search(r"\d{4000,}", body) if "integer string conversion" in exc.msg else None
        if huge:  # more digits than Python converts (4300)
            raise ExprError(too_large(huge.group()), shift + huge.start()) from None
        detail = exc.msg.removeprefix("invalid syntax").lstrip(".:; ")  # said once
        detail = f": {detail[:1].lower()}{detail[1:]}" if detail else ""
        raise ExprError(f"invalid syntax in {text!r}{detail}", offset) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ExprError(f"cannot parse {text!r}: {exc}") from None
    checker = _Checker(body, shift, all_functions)
    try:
        checker.visit(tree.body)
        fn = _Compiler(text, all_functions).compile(tree.body)
    except RecursionError:
        raise ExprError(f"expression nested too deeply: {text[:60]!r}...") from None
    return Expr(text, frozenset(checker.names), frozenset(checker.calls), tree, fn, functions)


INEQUALITIES = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def inequality(text: str, what: str, shown: str | None = None) -> tuple[Expr, Expr, bool, bool]:
    """One inequality, `left < right` (or <=, >, >=), as its two sides parsed, whether the left
    is to be below the right, and whether strictly. Otherwise ExprError: `shown` (the text as the
    user wrote it, by default `text`) is not `what` ("an inequality: write ...")."""
    body = parse(text).tree.body
    if not (isinstance(body, ast.Compare) and len(body.ops) == 1
            and type(body.ops[0]) in INEQUALITIES):
        raise ExprError(f"{shown or text!r} is not {what}")
    source = text.replace("\r", " ").replace("\n", " ").replace("\t", " ").lstrip(" ")
    left, right = (ast.get_source_segment(source, side) for side in (body.left,
                                                                     body.comparators[0]))
    if left is None or right is None:
        raise ExprError(f"cannot read the two sides of {shown or text!r}")
    op = type(body.ops[0])
    return parse(left), parse(right), op in (ast.Lt, ast.LtE), op in (ast.Lt, ast.Gt)


def explain_keywords(body: str, shift: int, functions: Mapping[str, FunctionDef]) -> None:
    """With keywords read as names a text did not parse: when Python reads it with its keywords
    (`a and b`, `lambda x: x`, `x if c else y`), the language's own hint for what it holds."""
    try:
        with PARSING:
            tree = ast.parse(body, mode="eval")
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return
    _Checker(body, shift, functions).visit(tree.body)


def check_names(expr: Expr, known: Collection[str]) -> list[str]:
    """One message per name the expression reads that is not known (``time`` is always known)."""
    known_set = set(known) | {TIME}
    messages = []
    for name in sorted(expr.names - known_set):
        messages.append(f"unknown name {name!r} in {expr.text!r}{suggest(name, known_set)}")
    return messages


# ---------------------------------------------------------------- symbolic form


def to_sympy(expr: Expr, symbols: Mapping[str, Any]) -> Any:
    """The expression as a sympy expression (for exact Jacobians); names missing from
    ``symbols`` become plain symbols. Comparisons, if_then_else, step, pulse and ramp map to
    Piecewise; lookups and other extra functions cannot be mapped and raise ExprError."""
    import sympy

    return _SympyBuilder(sympy, expr, symbols).build(expr.tree.body)


class _SympyBuilder:
    def __init__(self, sympy: Any, expr: Expr, symbols: Mapping[str, Any]):
        self.sp, self.expr, self.symbols = sympy, expr, symbols

    def symbol(self, name: str) -> Any:
        return self.symbols[name] if name in self.symbols else self.sp.Symbol(name)

    def build(self, node: ast.AST) -> Any:
        sp = self.sp
        if isinstance(node, ast.Constant):
            v = node.value
            return sp.Integer(v) if isinstance(v, int) else sp.Float(v)
        if isinstance(node, ast.Name):
            return self.symbol(node.id)
        if isinstance(node, ast.UnaryOp):
            inner = self.build(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            a, b = self.build(node.left), self.build(node.right)
            op = type(node.op)
            if op is ast.Pow and a.is_Number and b.is_Number:
                return self.power(a, b)
            return {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                    ast.Div: lambda: a / b, ast.Pow: lambda: a**b}[op]()
        if isinstance(node, ast.Compare):
            return sp.Piecewise((sp.Integer(1), self.condition(node)), (sp.Integer(0), True))
        if isinstance(node, ast.Call):
            return self.build_call(node.func.id, node.args)
        raise ExprError(f"cannot convert {type(node).__name__} to sympy")  # unreachable: checked

    def power(self, a: Any, b: Any) -> Any:
        """A power of two numbers: exact while small, else folded in float64 as the compiled
        expression folds it (sympy would compute 9**9**9 exactly, without end)."""
        sp = self.sp
        if a.is_Integer and b.is_Integer and abs(int(a)).bit_length() * abs(int(b)) <= 4096:
            return a**b
        with np.errstate(all="ignore"):
            value = float(np.power(float(a), float(b)))
        return sp.Float(value) if np.isfinite(value) else (sp.nan if np.isnan(value)
                                                           else sp.oo if value > 0 else -sp.oo)

    def condition(self, node: ast.AST) -> Any:
        """A sympy relational for a comparison node, else 'value != 0'."""
        sp = self.sp
        if not isinstance(node, ast.Compare):
            return sp.Ne(self.build(node), 0)
        rel = {ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge, ast.Eq: sp.Eq,
               ast.NotEq: sp.Ne}
        values = [self.build(n) for n in [node.left, *node.comparators]]
        parts = [rel[type(op)](values[i], values[i + 1]) for i, op in enumerate(node.ops)]
        return sp.And(*parts) if len(parts) > 1 else parts[0]

    def build_call(self, name: str, arg_nodes: list[ast.AST]) -> Any:
        sp = self.sp
        if name not in BUILTINS or (self.expr._extra and name in self.expr._extra):
            raise ExprError(f"{name}() has no symbolic form (lookups and model functions cannot "
                            f"be differentiated exactly); in {self.expr.text!r}")
        if name == "if_then_else":
            cond = self.condition(arg_nodes[0])
            a, b = self.build(arg_nodes[1]), self.build(arg_nodes[2])
            return sp.Piecewise((a, cond), (b, True))
        args = [self.build(a) for a in arg_nodes]
        t = self.symbol(TIME)
        simple = {"exp": sp.exp, "log": sp.log, "log10": lambda x: sp.log(x, 10), "sqrt": sp.sqrt,
                  "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "abs": sp.Abs, "floor": sp.floor,
                  "ceil": sp.ceiling, "min": sp.Min, "max": sp.Max}
        if name in simple:
            return simple[name](*args)
        if name == "step":
            height, t0 = args
            return sp.Piecewise((height, sp.Ge(t, t0)), (0, True))
        if name == "pulse":
            t0, width = args
            return sp.Piecewise((1, sp.And(sp.Ge(t, t0), sp.Lt(t, t0 + width))), (0, True))
        if name == "ramp":
            slope, t0 = args[0], args[1]
            if len(args) == 2:
                return sp.Piecewise((0, sp.Lt(t, t0)), (slope * (t - t0), True))
            t1 = args[2]
            return sp.Piecewise((0, sp.Lt(t, t0)), (slope * (t - t0), sp.Lt(t, t1)),
                                (slope * (t1 - t0), True))
        raise ExprError(f"{name}() has no symbolic form")  # pragma: no cover

