"""Handler types for a program's tools, in Python or TypeScript (``--generate-tool-types``).

The language follows the output file's name: ``.py``/``.pyi`` → Python ``TypedDict``s,
``.d.ts``/``.ts`` → TypeScript declarations. The program is not run.
"""

from __future__ import annotations

from pathlib import Path

from luma.codegen.plan import CodegenError, pascal_case
from luma.syntax import ast

__all__ = ["CodegenError", "generate_tool_types", "pascal_case", "write_tool_types"]


def tool_types_language(out_path: str) -> str:
    """``"python"`` or ``"typescript"`` for an output file name; ``ValueError`` for any other."""
    name = Path(out_path).name.lower()
    if name.endswith((".py", ".pyi")):
        return "python"
    if name.endswith(".ts"):  # .d.ts included
        return "typescript"
    raise ValueError(
        f"Cannot tell the language of '{out_path}' from its name: "
        "use .py or .pyi for Python, .d.ts or .ts for TypeScript."
    )


def generate_tool_types(program: ast.Program, out_path: str, source_name: str) -> str:
    """The text of the tool-types file for ``program``, in the language ``out_path`` names.

    ``source_name`` is the program's file as the header line names it. Raises ``ValueError``
    for an output name of no known language, and :class:`CodegenError` (a ``ValueError``) for a
    program whose types do not resolve.
    """
    if tool_types_language(out_path) == "python":
        from luma.codegen.python import generate_python

        return generate_python(program, source_name)
    from luma.codegen.typescript import generate_typescript

    return generate_typescript(program, source_name)


def write_tool_types(program: ast.Program, out_path: str, source_name: str) -> str:
    """Generate the tool-types file, write it to ``out_path`` (UTF-8) and return its text."""
    text = generate_tool_types(program, out_path, source_name)
    Path(out_path).write_text(text, encoding="utf-8", newline="\n")
    return text
