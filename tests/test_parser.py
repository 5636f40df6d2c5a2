"""The parser: AST shapes, precedence, the newline rules, strings, and worded syntax errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from luma.syntax import ast
from luma.syntax.parse import parse_text
from luma.syntax.source import SourceFile

PROGRAMS = Path(__file__).parent / "programs"


def parse_ok(text: str) -> ast.Program:
    program, diags = parse_text(text)
    assert diags == [], [d.message for d in diags]
    assert program is not None
    return program


def only_expr(text: str) -> ast.Expr:
    program = parse_ok(text)
    (stmt,) = program.statements
    assert isinstance(stmt, ast.ExprStmt)
    return stmt.expr


def error_of(text: str) -> tuple[str, int, int, str | None]:
    program, diags = parse_text(text)
    assert program is None
    (d,) = diags
    line, col = SourceFile("<input>", text).line_col(d.span.start)
    assert d.code == "E001"
    return d.message, line, col, d.hint


def test_tour_parses_with_every_construct() -> None:
    program = parse_ok((PROGRAMS / "syntax_tour.luma").read_text())
    kinds = {type(i).__name__ for i in program.items}
    assert {"SchemaDecl", "UnionDecl", "ToolDecl", "ModelDecl", "AgentDecl", "Assign",
            "ExprStmt"} <= kinds
    (agent,) = program.agents
    run = agent.fn("run")
    assert run is not None and [type(s).__name__ for s in run.body] == [
        "Assign", "If", "For", "Try", "Assign", "ExprStmt"]


def test_schema_fields_optional_and_annotations() -> None:
    program = parse_ok('schema O {\n  note?: string @length(0, 500) @desc("x")\n  tags: string[][] @default([])\n}')
    (schema,) = program.schemas
    assert isinstance(schema, ast.SchemaDecl)
    note, tags = schema.fields
    assert note.optional and isinstance(note.type, ast.PrimitiveType)
    assert [a.name for a in note.annotations] == ["length", "desc"]
    assert isinstance(tags.type, ast.ListType) and isinstance(tags.type.item, ast.ListType)
    assert not tags.optional


def test_types_enum_map_named() -> None:
    program = parse_ok('schema S { a: enum["x", "y",], b: map[Order], c: Order[] }\nschema Order {}')
    a, b, c = program.schemas[0].fields  # type: ignore[union-attr]
    assert isinstance(a.type, ast.EnumType) and a.type.values == ("x", "y")
    assert isinstance(b.type, ast.MapType) and isinstance(b.type.value, ast.NamedType)
    assert isinstance(c.type, ast.ListType)


def test_union_and_tool_with_needs() -> None:
    program = parse_ok(
        'schema Document = Invoice | Receipt tagged by kind\n'
        'tool db_write(\n  table: string,\n  value?: int @default(1),\n) -> R {\n'
        '  needs db: Database\n  side_effects: "write", idempotency_key: input.request_id\n}')
    union, tool = program.declarations
    assert isinstance(union, ast.UnionDecl)
    assert [m.name for m in union.members] == ["Invoice", "Receipt"] and union.tag == "kind"
    assert isinstance(tool, ast.ToolDecl)
    assert [p.name for p in tool.params] == ["table", "value"]
    assert [n.name for n in tool.needs] == ["db"]
    assert [e.key for e in tool.config] == ["side_effects", "idempotency_key"]
    key = tool.entry("idempotency_key")
    assert key is not None and isinstance(key.value, ast.Member)


@pytest.mark.parametrize("text, shape", [
    ("a or b and not c == d", "(or a (and b (not (== c d))))"),
    ("1 + 2 * 3 - 4", "(- (+ 1 (* 2 3)) 4)"),
    ("-x.y[0](1)", "(neg (call (index (. x y) 0) 1))"),
    ("a < b + 1", "(< a (+ b 1))"),
    ("(1 + 2) * 3", "(* (+ 1 2) 3)"),
    ("-7", "-7"),
    ("Other.run(x, 2)", "(call (. Other run) x 2)"),
])
def test_precedence(text: str, shape: str) -> None:
    def show(e: ast.Expr) -> str:
        if isinstance(e, ast.Binary):
            return f"({e.op} {show(e.left)} {show(e.right)})"
        if isinstance(e, ast.Unary):
            return f"({'neg' if e.op == '-' else e.op} {show(e.operand)})"
        if isinstance(e, ast.Member):
            return f"(. {show(e.obj)} {e.name})"
        if isinstance(e, ast.Index):
            return f"(index {show(e.obj)} {show(e.index)})"
        if isinstance(e, ast.Call):
            return "(call " + " ".join([show(e.callee), *map(show, e.args)]) + ")"
        if isinstance(e, ast.Name):
            return e.id
        assert isinstance(e, ast.Literal)
        return repr(e.value)
    assert show(only_expr(text)) == shape


def test_newline_after_call_starts_a_new_statement() -> None:
    program = parse_ok('b = tool calculate({ a: 2, b: 3, operation: "add" })\n[a, b]')
    first, second = program.statements
    assert isinstance(first, ast.Assign) and isinstance(first.value, ast.ToolCall)
    assert isinstance(second, ast.ExprStmt) and isinstance(second.expr, ast.ListLit)


def test_object_literal_over_lines_inside_call_and_trailing_commas() -> None:
    program = parse_ok('x = tool f({\n  a: 1\n  b: 2,\n  "c-d": [1,\n 2,],\n})')
    (stmt,) = program.statements
    assert isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.ToolCall)
    arg = stmt.value.arg
    assert isinstance(arg, ast.ObjectLit)
    assert [e.key for e in arg.entries] == ["a", "b", "c-d"]


def test_line_continues_after_operator_and_else_on_next_line() -> None:
    program = parse_ok('x = 1 +\n  2\nif x > 2 {\n  y = 1\n}\nelse {\n  y = 2\n}\ntry { z = 1 }\ncatch e { z = 2 }')
    assign, if_stmt, try_stmt = program.statements
    assert isinstance(assign, ast.Assign) and isinstance(assign.value, ast.Binary)
    assert isinstance(if_stmt, ast.If) and if_stmt.orelse is not None
    assert isinstance(try_stmt, ast.Try) and try_stmt.err_name == "e"


def test_statements_separated_by_commas_and_comments() -> None:
    program = parse_ok('a = 1, b = 2 // c\n/* block\n comment */ c = 3')
    assert [s.target for s in program.statements] == ["a", "b", "c"]  # type: ignore[union-attr]


def test_else_if_chain() -> None:
    program = parse_ok('if a { x = 1 } else if b { x = 2 } else { x = 3 }')
    (stmt,) = program.statements
    assert isinstance(stmt, ast.If) and stmt.orelse is not None
    (inner,) = stmt.orelse
    assert isinstance(inner, ast.If) and inner.orelse is not None


def test_ask_with_using_tool_and_list_type() -> None:
    e = only_expr('ask "Settle: {text}" -> Answer[] using tool calculate')
    assert isinstance(e, ast.Ask) and e.using_tool == "calculate"
    assert isinstance(e.type, ast.ListType)
    assert isinstance(e.prompt, ast.StringLit)
    assert [type(p).__name__ for p in e.prompt.parts] == ["str", "Placeholder"]


def test_string_escapes_and_placeholders() -> None:
    e = only_expr(r'"""a\"b\\c\n\t \{lit\} {stats.words[0]} {x["k"]} {bad thing}"""')
    assert isinstance(e, ast.StringLit)
    texts = [p for p in e.parts if isinstance(p, str)]
    assert texts[0] == 'a"b\\c\n\t {lit} '
    phs = [p for p in e.parts if isinstance(p, ast.Placeholder)]
    assert phs[0].root == "stats" and [(s.name, s.index) for s in phs[0].steps] == [
        ("words", None), (None, 0)]
    assert phs[1].root == "x" and phs[1].steps[0].index == "k"
    assert any(isinstance(p, ast.BadPlaceholder) for p in e.parts)


def test_placeholder_spans_point_into_the_source() -> None:
    src = 'x = "hello {name.first}!"'
    e = parse_ok(src).statements[0].value  # type: ignore[union-attr]
    ph = next(p for p in e.parts if isinstance(p, ast.Placeholder))
    assert src[ph.span.start:ph.span.end] == "{name.first}"
    assert src[ph.root_span.start:ph.root_span.end] == "name"


def test_triple_quoted_string_is_dedented() -> None:
    e = only_expr('"""\n    first\n      second {x}\n    """')
    assert isinstance(e, ast.StringLit)
    assert e.value == "first\n  second {x}"


def test_declaration_strings_keep_braces_as_text() -> None:
    program = parse_ok('model M { provider: "test", name: "{not interpolated}" }')
    entry = program.models[0].entry("name")
    assert entry is not None and isinstance(entry.value, ast.StringLit)
    assert entry.value.value == "{not interpolated}"


def test_numbers() -> None:
    e = only_expr("[0, 42, -7, 1.5, -0.25, 1e6, 2.5E-3]")
    assert isinstance(e, ast.ListLit)
    assert [x.value for x in e.items] == [0, 42, -7, 1.5, -0.25, 1e6, 2.5e-3]  # type: ignore[union-attr]
    assert isinstance(e.items[5].value, float)  # type: ignore[union-attr]


def test_spans_cover_keywords_and_brackets() -> None:
    src = "schema A {\n  x: int\n}\n"
    (schema,) = parse_ok(src).schemas
    assert src[schema.span.start:schema.span.end] == "schema A {\n  x: int\n}"
    assert src[schema.name_span.start:schema.name_span.end] == "A"


def test_empty_program_and_comment_only() -> None:
    assert parse_ok("").items == ()
    assert parse_ok("// nothing\n/* here */\n\n").items == ()


@pytest.mark.parametrize("text, message, line, col", [
    ("schema A {\n  ok bool\n}", "expected ':' after the field name 'ok'", 2, 6),
    ("schema R {}\ntool f(a int) -> R {}", "expected ':' after the parameter name 'a'", 2, 10),
    ("agent A { model GPT }", "expected ':' after the configuration key 'model'", 1, 17),
    ('x = "abc', "this string is never closed", 1, 5),
    ("x = 1 2", "expected a new line or ',' before the number 2", 1, 7),
    ("schema A { x: int", "expected '}' to close the fields of schema 'A' before the end of the file", 1, 10),
    ("x = $", "unexpected character '$'", 1, 5),
    ("x = 1 /* never closed", "this comment is never closed: '/*' needs a matching '*/'", 1, 7),
    ('x = "\\q"', "unknown escape '\\q' in a string (use \\\\ for a backslash)", 1, 6),
    ("tool f() R {}", "expected '->' after ')', found the name 'R'", 1, 10),
])
def test_syntax_errors_are_words(text: str, message: str, line: int, col: int) -> None:
    got, got_line, got_col, _ = error_of(text)
    assert (got, got_line, got_col) == (message, line, col)


def test_eof_error_is_located_at_the_end_or_the_open_bracket() -> None:
    message, line, col, hint = error_of("if x { y = 1 } else")
    assert message.startswith("unexpected end of the file; expected")
    assert (line, col) == (1, 20)


def test_keyword_as_name_gets_a_hint() -> None:
    message, _, _, hint = error_of("for = 1")
    assert hint is None or "keyword" in hint
    assert "Traceback" not in message


def test_invalid_utf8_file_is_a_diagnostic(tmp_path: Path) -> None:
    from luma.syntax.parse import parse_file
    p = tmp_path / "bad.luma"
    p.write_bytes(b"schema A { x: int }\n\xff\xfe\x00garbage")
    _, program, diags = parse_file(p)
    assert program is None and diags[0].message == "the file is not valid UTF-8 text"


@pytest.mark.parametrize("text, word, hint, line, col", [
    ("shema Order { id: string }", "shema", "did you mean 'schema'?", 1, 1),
    ("schema O { ok: bool }\ntol place(id: string) -> O {}", "tol", "did you mean 'tool'?", 2, 1),
    ("agnet Writer {}", "agnet", "did you mean 'agent'?", 1, 1),
    ("modle M { provider: \"test\" }", "modle", "did you mean 'model'?", 1, 1),
    ("agent A {\n  fn run() -> int {\n    retrun 1\n  }\n}", "retrun", "did you mean 'return'?",
     3, 5),
    ("x = aks \"Hello?\" -> string", "aks", "did you mean 'ask'?", 1, 5),
    ("agent A {\n  def run() -> int {\n    return 1\n  }\n}", "def",
     "functions are declared with 'fn'", 2, 3),
    ("def run() {\n}", "def", "functions are declared with 'fn' inside an agent", 1, 1),
    ("agent A {\n  fn run() -> int {\n    fi x { return 1 }\n  }\n}", "fi", "did you mean 'if'?",
     3, 5),
    ("agent A {\n  fn run() {\n    trhow {code: \"E\", message: \"m\"}\n  }\n}", "trhow",
     "did you mean 'throw'?", 3, 5),
])
def test_a_misspelt_keyword_gets_a_did_you_mean(text: str, word: str, hint: str, line: int,
                                                col: int) -> None:
    assert error_of(text) == (f"'{word}' is not a keyword", line, col, hint)


@pytest.mark.parametrize("text", ["result \"done\"", "x = 1 2", "agent A { model GPT }",
                                  "agent A { modle GPT }"])
def test_a_name_far_from_any_keyword_keeps_the_plain_message(text: str) -> None:
    message, _, _, _ = error_of(text)
    assert "is not a keyword" not in message
