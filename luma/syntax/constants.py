"""Constants of the language the checker needs without the schema package: the constant value
of a declaration expression (annotation arguments, config values) and the names ``@format``
accepts. ``luma.schema`` uses them too; the checker imports them from here, so that checking a
program loads the validator only for a program that needs it."""

from __future__ import annotations

from luma.syntax import ast

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

FORMATS = ("email", "uri", "date", "date-time", "uuid")


def constant_value(expr: ast.Expr) -> tuple[bool, Any]:
    """Return ``(True, value)`` when ``expr`` is a constant JSON value, else ``(False, None)``.

    Constants are ``null``, booleans, numbers, strings (their constant text, braces literal)
    and list or object literals made only of constants. A negated number literal counts too.
    """
    if isinstance(expr, ast.Literal):
        return True, expr.value
    if isinstance(expr, ast.StringLit):
        return True, expr.value
    if isinstance(expr, ast.ListLit):
        items = []
        for item in expr.items:
            ok, value = constant_value(item)
            if not ok:
                return False, None
            items.append(value)
        return True, items
    if isinstance(expr, ast.ObjectLit):
        obj: dict[str, Any] = {}
        for entry in expr.entries:
            ok, value = constant_value(entry.value)
            if not ok:
                return False, None
            obj[entry.key] = value
        return True, obj
    if (isinstance(expr, ast.Unary) and expr.op == "-" and isinstance(expr.operand, ast.Literal)
            and type(expr.operand.value) in (int, float)):
        return True, -expr.operand.value  # type: ignore[operator]
    return False, None
