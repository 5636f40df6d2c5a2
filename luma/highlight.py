"""A Pygments lexer for ``.luma`` files, registered as the ``pygments.lexers`` entry point
``luma``: ``pygmentize -l luma``, and Sphinx or MkDocs highlight ```` ```luma ```` blocks once
Luma is installed. Pygments itself is not a dependency of Luma; this module is imported only
by Pygments."""

from __future__ import annotations

from typing import Any, ClassVar

from pygments.lexer import RegexLexer, bygroups, include, words  # type: ignore[import-untyped]
from pygments.token import (  # type: ignore[import-untyped]
    Comment, Keyword, Name, Number, Operator, Punctuation, String, Whitespace,
)

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


class LumaLexer(RegexLexer):  # type: ignore[misc]
    """The Luma contract language."""

    name = "Luma"
    aliases: ClassVar[list[str]] = ["luma"]
    filenames: ClassVar[list[str]] = ["*.luma"]
    mimetypes: ClassVar[list[str]] = ["text/x-luma"]
    url = "https://pypi.org/project/luma/"

    tokens: ClassVar[dict[str, Any]] = {
        "root": [
            (r"\s+", Whitespace),
            (r"//[^\n]*", Comment.Single),
            (r"/\*[\s\S]*?\*/", Comment.Multiline),
            (r'"""', String.Double, "long-string"),
            (r'"', String.Double, "string"),
            (rf"(schema|model|agent|datasource)(\s+)({_NAME})(?=\s*[{{=])",
             bygroups(Keyword.Declaration, Whitespace, Name.Class)),
            # a declaration's list holds parameters (`name:`) or nothing; a call's, a value
            (rf"(tool|query|command)(\s+)({_NAME})(?=\s*\(\s*(?:\)|{_NAME}\??\s*:|$))",
             bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            (rf"(fn)(\s+)({_NAME})", bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            # a test: `test "name" {`, and its entries `mock tool NAME returns|throws ...`,
            # `assert EXPR` and `check EXPR` (a word followed by `=`, `:`, `.` or `(` is a name)
            (r'(test)(?=\s+")', Keyword.Declaration),
            (rf"(mock)(\s+)(tool)(\s+)({_NAME})(\s+)(returns|throws)\b",
             bygroups(Keyword, Whitespace, Keyword, Whitespace, Name.Function, Whitespace,
                      Keyword)),
            (r"(assert|check)\b(?=[ \t]+[^\s=:.(,)])", Keyword),
            (rf"(tool)(\s+)({_NAME})", bygroups(Keyword, Whitespace, Name.Function)),
            (rf"(needs)(\s+)({_NAME})", bygroups(Keyword, Whitespace, Name.Variable)),
            (rf"(@)({_NAME})", bygroups(Name.Decorator, Name.Decorator)),
            (words(("if", "else", "for", "in", "return", "try", "catch", "throw", "ask",
                    "using", "tagged", "by", "needs", "tool"), suffix=r"\b"), Keyword),
            (words(("and", "or", "not"), suffix=r"\b"), Operator.Word),
            (words(("true", "false", "null"), suffix=r"\b"), Keyword.Constant),
            (words(("string", "int", "float", "bool", "any", "enum", "map"), suffix=r"\b"),
             Keyword.Type),
            (rf"({_NAME})(\??)(\s*)(:)(?!:)", bygroups(Name.Property, Operator, Whitespace,
                                                     Punctuation)),
            (rf"{_NAME}(?=\s*\()", Name.Function),
            (_NAME, Name),
            (r"[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+", Number.Float),
            (r"[0-9]+", Number.Integer),
            (r"->|==|!=|<=|>=|[-+*/%<>=|?]", Operator),
            (r"[{}()\[\],.:]", Punctuation),
        ],
        "escapes": [
            (r'\\["\\ntr{}]', String.Escape),
            (r"\{" + _NAME + r"(?:\.[A-Za-z_][A-Za-z0-9_]*|\[(?:-?[0-9]+|\"[^\"\\]*\")\])*\}",
             String.Interpol),
        ],
        "string": [
            include("escapes"),
            (r'"', String.Double, "#pop"),
            (r'[^"\\{\n]+', String.Double),
            (r"\{", String.Double),
            (r"\\.", String.Double),
        ],
        "long-string": [
            include("escapes"),
            (r'"""', String.Double, "#pop"),
            (r'[^"\\{]+', String.Double),
            (r'"|\{', String.Double),
            (r"\\[\s\S]", String.Double),
        ],
    }
