"""Tiny, safe arithmetic over named variables, for config strings.

Used for bounds that depend on contexts (``lower: "a - 1"``) and for linear domain
constraints among inputs (``"responsedelay >= ascertainmentdelay"``).  We parse
with :mod:`ast` and allow only numbers, names, + - * / ** and unary minus, so a
config can never execute code.
"""

from __future__ import annotations

import ast
import keyword
import operator
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}


#: Names an expression cannot use as variables: Python's keywords (``lambda``, ``if``,
#: ``True`` ...), which the parser reads as syntax (``lambda + y <= 1`` is a syntax
#: error, not a sum).  The language has no functions, so no function name is taken;
#: a function added to it must be added here, so the name rule refuses it as an input.
RESERVED_NAMES: frozenset[str] = frozenset(keyword.kwlist)


class ExpressionError(ValueError):
    """An expression uses something other than numbers, names and + - * / **."""


def names_in(expr: str) -> set[str]:
    tree = _parse(expr)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _parse(expr: str) -> ast.Expression:
    try:
        return ast.parse(str(expr), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"cannot parse {expr!r}: {exc.msg}") from None


def evaluate(expr: str | float | int, env: Mapping[str, object]) -> object:
    """Evaluate ``expr`` with variables from ``env`` (scalars or numpy arrays)."""
    if isinstance(expr, int | float):
        return float(expr)

    def ev(node: ast.AST) -> object:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ExpressionError(f"unknown name {node.id!r} in {expr!r}; "
                                      f"known: {sorted(env)}")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            val = ev(node.operand)
            return -val if isinstance(node.op, ast.USub) else val  # type: ignore[operator]
        raise ExpressionError(f"unsupported syntax in {expr!r}: only numbers, names and "
                              "+ - * / ** are allowed")

    try:
        return ev(_parse(str(expr)))
    except (OverflowError, ZeroDivisionError) as exc:
        raise ExpressionError(f"cannot evaluate {expr!r}: {exc}") from None


@dataclass(frozen=True)
class LinearConstraint:
    """``sum(coefs[name] * name) <sense> rhs`` with sense ``<=`` or ``==``
    (``>=`` is normalised to ``<=`` by negation)."""

    coefs: dict[str, float]
    sense: str
    rhs: float
    text: str

    def residual(self, env: Mapping[str, np.ndarray]) -> np.ndarray:
        """lhs - rhs; feasible when <= 0 (or == 0 for equalities)."""
        total = 0.0
        for name, c in self.coefs.items():
            total = total + c * np.asarray(env[name], dtype=float)
        return np.asarray(total, dtype=float) - self.rhs

    def satisfied(self, env: Mapping[str, np.ndarray], tol: float = 1e-9) -> np.ndarray:
        r = self.residual(env)
        return np.abs(r) <= tol if self.sense == "==" else r <= tol


def _linear_terms(node: ast.AST, expr: str) -> tuple[dict[str, float], float]:
    """Return (coefficients, constant) of a linear expression."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return {}, float(node.value)
    if isinstance(node, ast.Name):
        return {node.id: 1.0}, 0.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        c, k = _linear_terms(node.operand, expr)
        s = -1.0 if isinstance(node.op, ast.USub) else 1.0
        return {n: s * v for n, v in c.items()}, s * k
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        c1, k1 = _linear_terms(node.left, expr)
        c2, k2 = _linear_terms(node.right, expr)
        s = 1.0 if isinstance(node.op, ast.Add) else -1.0
        out = dict(c1)
        for n, v in c2.items():
            out[n] = out.get(n, 0.0) + s * v
        return out, k1 + s * k2
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
        return _product_terms(node, expr)
    raise ExpressionError(f"{expr!r} is not a linear expression of numbers and names")


def _product_terms(node: ast.BinOp, expr: str) -> tuple[dict[str, float], float]:
    """(coefficients, constant) of ``left * right`` or ``left / right``: linear only
    when at most one side has variables (and never the divisor)."""
    c1, k1 = _linear_terms(node.left, expr)
    c2, k2 = _linear_terms(node.right, expr)
    if isinstance(node.op, ast.Div):
        if c2:
            raise ExpressionError(f"{expr!r} is not linear (division by a variable)")
        return {n: v / k2 for n, v in c1.items()}, k1 / k2
    if c1 and c2:
        raise ExpressionError(f"{expr!r} is not linear (product of variables)")
    if c1:
        return {n: v * k2 for n, v in c1.items()}, k1 * k2
    return {n: v * k1 for n, v in c2.items()}, k1 * k2


def parse_linear_constraint(text: str) -> LinearConstraint:
    """Parse ``"lhs <= rhs"``, ``">="`` or ``"=="`` with linear sides."""
    tree = _parse(text).body
    if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1):
        raise ExpressionError(f"{text!r} must be one comparison: lhs <= rhs, lhs >= rhs or "
                              "lhs == rhs")
    op = tree.ops[0]
    cl, kl = _linear_terms(tree.left, text)
    cr, kr = _linear_terms(tree.comparators[0], text)
    coefs = dict(cl)
    for n, v in cr.items():
        coefs[n] = coefs.get(n, 0.0) - v
    rhs = kr - kl
    if isinstance(op, ast.LtE | ast.Lt):
        sense = "<="
    elif isinstance(op, ast.GtE | ast.Gt):
        coefs = {n: -v for n, v in coefs.items()}
        rhs = -rhs
        sense = "<="
    elif isinstance(op, ast.Eq):
        sense = "=="
    else:
        raise ExpressionError(f"{text!r}: use <=, >= or ==")
    coefs = {n: v for n, v in coefs.items() if v != 0.0}
    if not coefs:
        raise ExpressionError(f"{text!r} has no variables")
    return LinearConstraint(coefs=coefs, sense=sense, rhs=rhs, text=text)
