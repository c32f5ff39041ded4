"""`calculator`: a small local tool that really computes, for agents that use tools.

Arithmetic only (`+ - * / **` and unary minus on numbers), read with `ast` and never
`eval`-ed, so whatever a model writes into it can do nothing but arithmetic.

Example:
    >>> calculate("3 * 120 * 1.2")
    '432'
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

from autogen_core.tools import FunctionTool

__all__ = ["calculate", "calculator"]

_OPERATORS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
}


def calculate(expression: str) -> str:
    """Work out an arithmetic expression, such as 3 * 120 * 1.2."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.operand))
        raise ValueError(f"not arithmetic: {ast.unparse(node)}")

    return f"{value(ast.parse(expression, mode='eval').body):g}"


#: :func:`calculate` as an autogen-core tool.
calculator = FunctionTool(calculate, description="Work out an arithmetic expression.")
