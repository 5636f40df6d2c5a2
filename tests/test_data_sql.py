"""Reading SQL text (DATA.md §1, §3): placeholders, what is not one, statements, the styles of
``luma.data.placeholders``, and where the checker points inside the ``sql:`` string."""

from __future__ import annotations

import pytest

from luma.compile import check_text
from luma.data import placeholders
from luma.data.sql import scan

TRICKY = ("SELECT a::int, ':no', \"col:no\", $$ :no $$, $t$ :no $t$ FROM t -- :no\n"
          " WHERE x = :x AND y = :y /* :z */ AND w LIKE '5%' AND x2 = :x")


def test_only_real_placeholders_are_found() -> None:
    assert [p.name for p in scan(TRICKY).placeholders] == ["x", "y", "x"]
    assert scan("SELECT 'it''s :no' || :yes").placeholders[0].name == "yes"


@pytest.mark.parametrize("style, sql, values", [
    ("qmark", "x = ? AND y = ? ", [1, 2, 1]),
    ("format", "x = %s AND y = %s ", [1, 2, 1]),
    ("numeric", "x = $1 AND y = $2 ", [1, 2]),
    ("pyformat", "x = %(x)s AND y = %(y)s ", {"x": 1, "y": 2}),
    ("named", "x = :x AND y = :y ", {"x": 1, "y": 2}),
])
def test_placeholder_styles(style: str, sql: str, values: object) -> None:
    text, got = placeholders(TRICKY, style, {"x": 1, "y": 2})
    assert got == values
    assert sql in text
    assert ("LIKE '5%%'" in text) == (style in ("format", "pyformat"))
    assert "':no'" in text and "-- :no" in text and "$$ :no $$" in text


def test_an_unknown_style_and_a_missing_value() -> None:
    with pytest.raises(ValueError, match="unknown placeholder style 'dollar'"):
        placeholders("SELECT :x", "dollar", {"x": 1})
    with pytest.raises(KeyError):
        placeholders("SELECT :x", "qmark", {})


def test_statements() -> None:
    assert scan("SELECT 1;").extra_statements == ()
    assert scan("SELECT 1;  -- done\n").extra_statements == ()
    assert scan("SELECT ';'; ").extra_statements == ()
    assert scan("SELECT 1; SELECT 2").extra_statements == (8,)


def test_the_error_points_at_the_placeholder_inside_the_sql() -> None:
    text = '''schema Row { id: string }
datasource Db { description: "A database." }
query find(id: string) -> Row {
  datasource: Db
  sql: """
    SELECT id FROM rows
    WHERE id = :idd
  """
}
'''
    checked = check_text(text, "find.luma")
    (error,) = [d for d in checked.diagnostics if d.code == "E052"]
    assert error.message == "Query 'find' uses :idd, which is not one of its parameters."
    assert text[error.span.start:error.span.end] == ":idd"
    assert checked.source.line_col(error.span.start) == (7, 16)
    assert error.hint == "did you mean 'id'?"


def test_an_escape_before_the_placeholder_keeps_the_span_exact() -> None:
    text = ('schema Row { id: string }\ndatasource Db { description: "A database." }\n'
            'query find(id: string) -> Row {\n  datasource: Db\n'
            '  sql: "SELECT \\"id\\" FROM rows WHERE id = :ib"\n}\n')
    checked = check_text(text, "find.luma")
    (error,) = [d for d in checked.diagnostics if d.code == "E052"]
    assert text[error.span.start:error.span.end] == ":ib"
