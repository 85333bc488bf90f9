"""`of_interest:`, the condition that marks a run as one of interest: comparisons in the
expression language joined by `and`, `or` and `not` (which the language itself leaves out);
a run whose quantities the condition reads are not all finite is undecided, never "not of
interest"."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

import numpy as np

from studyrun.blocks.expr import MAX_LENGTH, PARSING, ExprError, parse

MAX_TERMS = 100  # comparisons in one condition


@dataclass(frozen=True)
class Condition:
    """A parsed `of_interest`: the quantities it reads and a function of them."""

    text: str
    names: frozenset[str]
    test: Callable[[dict[str, np.ndarray]], np.ndarray]

    def evaluate(self, values: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
        """(of interest, decided) per run: decided where every quantity read is finite."""
        decided = np.ones(n, bool)
        for name in self.names:
            decided &= np.isfinite(np.asarray(values[name], float))
        with np.errstate(all="ignore"):
            hit = np.broadcast_to(np.asarray(self.test(values), bool), (n,))
        return hit & decided, decided


def condition(text: str) -> Condition:
    """Parse `of_interest`; ExprError says what is wrong and what is allowed."""
    if len(text) > MAX_LENGTH:
        raise ExprError(f"of_interest is too long ({len(text)} characters; at most {MAX_LENGTH})")
    flat = text.replace("\r", " ").replace("\n", " ").replace("\t", " ").strip()
    try:
        with PARSING:
            tree = ast.parse(flat, mode="eval").body
    except (SyntaxError, ValueError):
        tree = None  # a keyword used as a name (`yield > 1`): the language's parser reads it
    except (RecursionError, MemoryError):
        raise ExprError("of_interest is nested too deeply") from None
    if tree is None or not isinstance(tree, (ast.BoolOp, ast.UnaryOp)):
        return leaf(parse(text), text)
    names: set[str] = set()
    try:
        test = build(tree, flat, [0], names)
    except RecursionError:
        raise ExprError("of_interest is nested too deeply") from None
    return Condition(text, frozenset(names), test)


def leaf(expr, text: str) -> Condition:
    body = expr.tree.body
    if not isinstance(body, ast.Compare):
        raise ExprError(f"{text!r} is not a condition: write comparisons of quantities, joined "
                        "by and, or, not, such as 'cost > 100 and reliability < 0.9'")
    return Condition(text, frozenset(expr.names), lambda values: expr(values) != 0)


def build(node: ast.AST, source: str, terms: list[int], names: set[str]) -> Callable:
    """The test of a boolean tree whose leaves are comparisons parsed by the language."""
    if isinstance(node, ast.BoolOp):
        parts = [build(value, source, terms, names) for value in node.values]
        join = np.logical_and if isinstance(node.op, ast.And) else np.logical_or

        def joined(values):
            result = parts[0](values)
            for part in parts[1:]:
                result = join(result, part(values))
            return result
        return joined
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = build(node.operand, source, terms, names)
        return lambda values: np.logical_not(inner(values))
    terms[0] += 1
    if terms[0] > MAX_TERMS:
        raise ExprError(f"more than {MAX_TERMS} comparisons in one condition")
    segment = ast.get_source_segment(source, node)
    if segment is None:
        raise ExprError(f"cannot read {source!r} as a condition")
    found = leaf(parse(segment), segment)
    names |= found.names
    return found.test
