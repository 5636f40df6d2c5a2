"""Luma types as JSON Schema, and the one validator.

``SchemaCompiler`` turns a program's types into neutral JSON Schema (Draft 2020-12);
``validate`` / ``validate_and_fill`` check JSON values against such a schema.
"""

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
from luma.syntax.constants import constant_value

__all__ = [
    "SchemaCompiler",
    "SchemaError",
    "SchemaValidator",
    "Violation",
    "constant_value",
    "format_violations",
    "tool_input_name",
    "validate",
    "validate_and_fill",
    "validator_for",
]
