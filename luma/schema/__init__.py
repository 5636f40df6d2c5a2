"""Luma types as JSON Schema, and the one validator.

``SchemaCompiler`` turns a program's types into neutral JSON Schema (Draft 2020-12);
``validate`` / ``validate_and_fill`` check JSON values against such a schema.

The names below are loaded on first use, so importing one submodule (the checker needs only
``luma.schema.values``) does not load the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from luma.schema.compile import SchemaCompiler, tool_input_name
    from luma.schema.validate import (
        SchemaError,
        SchemaValidator,
        Violation,
        format_violations,
        validate,
        validate_and_fill,
        validator_for,
    )
    from luma.schema.values import constant_value

_HOMES = {
    "SchemaCompiler": "compile",
    "tool_input_name": "compile",
    "SchemaError": "validate",
    "SchemaValidator": "validate",
    "Violation": "validate",
    "format_violations": "validate",
    "validate": "validate",
    "validate_and_fill": "validate",
    "validator_for": "validate",
    "constant_value": "values",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'luma.schema' has no attribute '{name}'")
    return getattr(importlib.import_module(f"luma.schema.{home}"), name)
