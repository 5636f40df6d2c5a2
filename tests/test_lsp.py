"""``luma lsp`` against a real client over stdio: initialize, open, change, diagnostics, hover,
definition, references, rename, symbols, completion, formatting, code actions, shutdown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lsp_client import LspClient
from luma.compile import check_text

PROGRAM = """\
schema Order {
  id: string @desc("Order id")
  total: float
}

tool lookup(id: string) -> Order {
  description: "Read an order."
  side_effects: "read"
}

model M {
  provider: "test"
}

agent Clerk {
  model: M
  tools: [lookup]

  fn run(id: string) -> Order {
    order = tool lookup({ id: id })
    order
  }
}
"""


@pytest.fixture(scope="module")
def client() -> Iterator[LspClient]:
    c = LspClient()
    try:
        c.initialize()
        yield c
    finally:
        c.close()


def open_doc(client: LspClient, name: str, text: str) -> tuple[str, list[dict[str, Any]]]:
    uri = f"file:///work/{name}.luma"
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "luma", "version": 1, "text": text}})
    return uri, client.diagnostics(uri)


def at(text: str, needle: str, nth: int = 0, delta: int = 0) -> dict[str, int]:
    offset = -1
    for _ in range(nth + 1):
        offset = text.index(needle, offset + 1)
    offset += delta
    line = text.count("\n", 0, offset)
    return {"line": line, "character": offset - (text.rfind("\n", 0, offset) + 1)}


def test_initialize_announces_the_features() -> None:
    c = LspClient()
    try:
        caps = c.initialize()["capabilities"]
        for feature in ("hoverProvider", "definitionProvider", "referencesProvider",
                        "renameProvider", "documentSymbolProvider", "completionProvider",
                        "documentFormattingProvider", "codeActionProvider"):
            assert caps.get(feature), feature
        assert caps["textDocumentSync"]["change"] == 2  # incremental
        assert c.shutdown() == 0
    finally:
        c.close()


@pytest.mark.parametrize(("offered", "column"), [
    (None, 12),  # UTF-16, the protocol's default: the emoji is two units, é one
    (["utf-8"], 15),  # four bytes and two
    (["utf-32"], 11),
])
def test_columns_are_counted_in_the_agreed_encoding(offered: list[str] | None,
                                                    column: int) -> None:
    c = LspClient()
    try:
        caps = c.initialize({"general": {"positionEncodings": offered}} if offered else None)
        assert caps["capabilities"].get("positionEncoding", "utf-16") == (
            offered[0] if offered else "utf-16")
        text = 'x = "\U0001F600é" + yy\n'
        uri, diagnostics = open_doc(c, "encoding", text)
        assert diagnostics[0]["message"] == "Unknown name 'yy'."
        assert diagnostics[0]["range"]["start"] == {"line": 0, "character": column}
        refs = c.request("textDocument/references", {
            "textDocument": {"uri": uri}, "position": {"line": 0, "character": column + 1},
            "context": {"includeDeclaration": True}})
        assert refs == []  # 'yy' is no variable: the position was read back as 'yy'
        hovered = c.request("textDocument/definition", {
            "textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
        assert hovered["range"]["end"] == {"line": 0, "character": 1}
        assert c.shutdown() == 0
    finally:
        c.close()


def test_diagnostics_on_open_and_change_are_the_checkers(client: LspClient) -> None:
    uri, diagnostics = open_doc(client, "diag", PROGRAM)
    assert diagnostics == []
    broken = PROGRAM.replace("total: float", "total: flaot")
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": {"start": at(PROGRAM, "float"),
                                      "end": at(PROGRAM, "float", delta=5)},
                            "text": "flaot"}]})
    published = client.diagnostics(uri)
    expected = check_text(broken, "/work/diag.luma").diagnostics
    assert [(d["code"], d["message"]) for d in published] == [
        (d.code, d.message + (f"\nhint: {d.hint}" if d.hint else "")) for d in expected]
    first = published[0]
    assert first["code"] == "E007" and first["severity"] == 1 and first["source"] == "luma"
    assert first["message"].startswith("Unknown type 'flaot'")
    assert "did you mean 'float'?" in first["message"]
    assert first["range"] == {"start": at(broken, "flaot"), "end": at(broken, "flaot", delta=5)}


def test_a_burst_of_edits_is_checked_once_at_its_end(client: LspClient) -> None:
    import queue
    import time

    uri, _ = open_doc(client, "burst", "x = 1\n")
    for version in range(2, 7):
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"text": f"x = {'y' * version}\n"}]})
    published = []
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            message = client.notifications.get(timeout=0.05)
        except queue.Empty:
            continue
        if message["params"].get("uri") == uri:
            published.append(message["params"])
    # one analysis for the burst (two if the machine paused the client between two edits)
    assert 1 <= len(published) <= 2
    last = published[-1]
    assert (last["version"], [d["message"] for d in last["diagnostics"]]) == (
        6, ["Unknown name 'yyyyyy'."])


def test_related_information_carries_secondary_spans(client: LspClient) -> None:
    text = "schema A { x: int }\n\nschema A { y: int }\n"
    _, diagnostics = open_doc(client, "related", text)
    duplicate = next(d for d in diagnostics if d["code"] == "E004")
    assert duplicate["message"].startswith("'A' is declared more than once.\nhint: ")
    related = duplicate["relatedInformation"][0]
    assert related["location"]["range"]["start"] == at(text, "A")
    assert related["message"]


def test_a_syntax_error_still_gets_the_parsers_diagnostic(client: LspClient) -> None:
    _, diagnostics = open_doc(client, "syntax", "schema {\n")
    assert [(d["code"], d["message"]) for d in diagnostics] == [
        ("E001", "expected a name after the keyword 'schema', found '{'")]
    assert diagnostics[0]["range"]["start"] == {"line": 0, "character": 7}


def test_hover(client: LspClient) -> None:
    uri, _ = open_doc(client, "hover", PROGRAM)

    def hover(position: dict[str, int]) -> str:
        result = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                       "position": position})
        return str(result["contents"]["value"])

    tool = hover(at(PROGRAM, "lookup", nth=2, delta=2))
    assert "tool lookup(id: string) -> Order" in tool
    assert "side effects: `read`" in tool and "cache: `false`" in tool
    assert "idempotent: `false`" in tool
    assert '"required": [\n    "id"\n  ]' in tool  # the JSON Schema a model sees
    schema = hover(at(PROGRAM, "-> Order", delta=3))
    assert 'schema Order {\n  id: string @desc("Order id")\n  total: float\n}' in schema
    assert "provider: `test`" in hover(at(PROGRAM, "M\n", delta=0))
    assert "description" in hover(at(PROGRAM, "desc", delta=1))
    assert hover(at(PROGRAM, "side_effects", delta=3)) == (
        '`side_effects` (tool): the side-effect class, `"none"`, `"read"` or `"write"`; '
        "`tool_policy` builds on it")
    assert hover(at(PROGRAM, "tools:")).startswith("`tools` (agent): ")


def test_definition_and_references(client: LspClient) -> None:
    uri, _ = open_doc(client, "defs", PROGRAM)
    found = client.request("textDocument/definition", {"textDocument": {"uri": uri},
                                                       "position": at(PROGRAM, "Order", nth=2)})
    assert found["uri"] == uri
    assert found["range"] == {"start": at(PROGRAM, "Order"), "end": at(PROGRAM, "Order", delta=5)}
    local = client.request("textDocument/definition", {
        "textDocument": {"uri": uri}, "position": at(PROGRAM, "order\n", delta=1)})
    assert local["range"]["start"] == at(PROGRAM, "order =")
    refs = client.request("textDocument/references", {
        "textDocument": {"uri": uri}, "position": at(PROGRAM, "lookup"),
        "context": {"includeDeclaration": True}})
    assert sorted(r["range"]["start"]["line"] for r in refs) == [5, 16, 19]


def test_rename_changes_every_use_in_the_file(client: LspClient) -> None:
    uri, _ = open_doc(client, "rename", PROGRAM)
    edit = client.request("textDocument/rename", {
        "textDocument": {"uri": uri}, "position": at(PROGRAM, "Order"), "newName": "Purchase"})
    starts = sorted((e["range"]["start"]["line"], e["newText"]) for e in edit["changes"][uri])
    assert starts == [(0, "Purchase"), (5, "Purchase"), (18, "Purchase")]
    variable = client.request("textDocument/rename", {
        "textDocument": {"uri": uri}, "position": at(PROGRAM, "order\n"), "newName": "found"})
    assert sorted(e["range"]["start"]["line"] for e in variable["changes"][uri]) == [19, 20]
    field = client.request("textDocument/rename", {
        "textDocument": {"uri": uri}, "position": at(PROGRAM, "total"), "newName": "sum"})
    assert field is None


def test_document_symbols(client: LspClient) -> None:
    uri, _ = open_doc(client, "symbols", PROGRAM)
    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert [(s["name"], s["detail"]) for s in symbols] == [
        ("Order", "schema"), ("lookup", "tool"), ("M", "model"), ("Clerk", "agent")]
    assert [c["name"] for c in symbols[0]["children"]] == ["id", "total"]
    assert [c["name"] for c in symbols[3]["children"]] == ["run"]


TESTED = PROGRAM + """
test "looks up" {
  model: M
  mock tool lookup returns { id: "o-1", total: 1 }
  order = Clerk.run("o-1")
  assert order.id == "o-1"
  if order.total > 0 {
    mock tool lookup returns { id: "o-2", total: 2 }
  }
}
"""


def test_a_test_is_a_symbol_and_its_body_uses_the_declarations(client: LspClient) -> None:
    uri, diagnostics = open_doc(client, "tested", TESTED)
    assert [d["message"] for d in diagnostics if d["severity"] == 1] == []
    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert (symbols[-1]["name"], symbols[-1]["detail"]) == ("looks up", "test")
    refs = client.request("textDocument/references", {
        "textDocument": {"uri": uri}, "position": at(TESTED, "lookup"),
        "context": {"includeDeclaration": True}})
    mock_line = TESTED.splitlines().index('  mock tool lookup returns { id: "o-1", total: 1 }')
    nested = TESTED.splitlines().index('    mock tool lookup returns { id: "o-2", total: 2 }')
    assert {mock_line, nested} <= {r["range"]["start"]["line"] for r in refs}
    model = client.request("textDocument/references", {
        "textDocument": {"uri": uri}, "position": at(TESTED, "M {"),
        "context": {"includeDeclaration": False}})
    assert TESTED.splitlines().index("  model: M") in [r["range"]["start"]["line"] for r in model]


def completion_labels(client: LspClient, name: str, text: str, needle: str) -> list[str]:
    uri, _ = open_doc(client, name, text)
    result = client.request("textDocument/completion", {
        "textDocument": {"uri": uri}, "position": at(text, needle, delta=len(needle))})
    return [item["label"] for item in result["items"]]


def test_completion(client: LspClient) -> None:
    typed = PROGRAM.replace("  total: float\n", "  total: float\n  note: \n")
    labels = completion_labels(client, "c1", typed, "note: ")
    assert "Order" in labels and "string" in labels and "lookup" not in labels
    tools = PROGRAM.replace("tools: [lookup]", "tools: [")
    assert completion_labels(client, "c2", tools, "tools: [") == ["lookup"]
    effects = PROGRAM.replace('side_effects: "read"', "side_effects: ")
    assert completion_labels(client, "c3", effects, "side_effects: ") == [
        '"none"', '"read"', '"write"']
    keys = PROGRAM.replace('  provider: "test"\n', '  provider: "test"\n  te\n')
    labels = completion_labels(client, "c4", keys, "  te")
    assert "temperature" in labels and "max_tokens" in labels and "tools" not in labels
    annotations = PROGRAM.replace("total: float", "total: float @")
    assert "range" in completion_labels(client, "c5", annotations, "float @")
    call = PROGRAM.replace("order = tool lookup", "order = tool ")
    assert completion_labels(client, "c6", call, "= tool ") == ["lookup"]
    top = PROGRAM + "\n"
    assert "agent" in completion_labels(client, "c7", top, "}\n}\n")


def test_formatting_is_luma_fmt(client: LspClient) -> None:
    ugly = "schema A{x:int}\nschema B { y : string }\n"
    uri, _ = open_doc(client, "fmt", ugly)
    edits = client.request("textDocument/formatting", {
        "textDocument": {"uri": uri}, "options": {"tabSize": 4, "insertSpaces": True}})
    assert edits == [{"range": {"start": {"line": 0, "character": 0},
                                "end": {"line": 2, "character": 0}},
                      "newText": "schema A { x: int }\n\nschema B { y: string }\n"}]
    bad_uri, _ = open_doc(client, "fmt_bad", "schema {\n")
    assert client.request("textDocument/formatting", {
        "textDocument": {"uri": bad_uri}, "options": {"tabSize": 2, "insertSpaces": True}}) == []


def test_code_action_applies_the_did_you_mean(client: LspClient) -> None:
    text = PROGRAM.replace("-> Order {\n  description", "-> Ordr {\n  description")
    uri, diagnostics = open_doc(client, "actions", text)
    unknown = next(d for d in diagnostics if "'Ordr'" in d["message"])
    actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": unknown["range"],
        "context": {"diagnostics": [unknown]}})
    assert [a["title"] for a in actions] == ["Change to 'Order'"]
    assert actions[0]["edit"]["changes"][uri] == [{"range": unknown["range"], "newText": "Order"}]


def test_without_the_extra_the_command_says_which_to_install() -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules['pygls'] = None; from luma.cli import main; "
            "sys.exit(main(['lsp']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert done.stderr == ("luma lsp: error: luma lsp needs the language server extra: "
                           "pip install 'luma[lsp]'\n")


def test_a_python_generic_gets_the_luma_type_as_a_quick_fix(client: LspClient) -> None:
    text = "schema Basket {\n  items: list[int]\n  counts: dict[str, float]\n}\n"
    uri, diagnostics = open_doc(client, "generic", text)
    assert [d["message"] for d in diagnostics] == [
        "'list[int]' is not a Luma type\nhint: did you mean 'int[]'?"]
    actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": diagnostics[0]["range"],
        "context": {"diagnostics": diagnostics}})
    assert actions[0]["edit"]["changes"][uri] == [{
        "range": {"start": at(text, "list"), "end": at(text, "int]", delta=4)},
        "newText": "int[]"}]
    fixed = text.replace("list[int]", "int[]")
    assert check_syntax(fixed) == ["'dict[str, float]' is not a Luma type"]
    assert check_syntax(fixed.replace("dict[str, float]", "map[float]")) == []


def check_syntax(text: str) -> list[str]:
    return [d.message for d in check_text(text).diagnostics]


def test_closing_a_document_clears_its_diagnostics(client: LspClient) -> None:
    uri, diagnostics = open_doc(client, "closing", "x = yy\n")
    assert [d["message"] for d in diagnostics] == ["Unknown name 'yy'."]
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": "x = zz\n"}]})
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == []
    assert client.request("textDocument/documentSymbol", {
        "textDocument": {"uri": open_doc(client, "after", PROGRAM)[0]}})  # still serving


def test_shutdown_ends_the_server(client: LspClient) -> None:
    assert client.shutdown() == 0


DATA = """\
schema Row {
  id: string
}

datasource Shop {
  description: "The shop's database."
}

query rows() -> Row[] {
  datasource: Shop
  sql: "select id from rows"
}

command clear() {
  datasource: Shop
  sql: "delete from rows"
}
"""


@pytest.fixture()
def own_client() -> Iterator[LspClient]:
    c = LspClient()
    try:
        c.initialize()
        yield c
    finally:
        c.close()


def test_datasources_have_definition_references_hover_and_symbols(own_client: LspClient) -> None:
    client = own_client
    uri, _ = open_doc(client, "data", DATA)
    found = client.request("textDocument/definition", {
        "textDocument": {"uri": uri}, "position": at(DATA, "Shop", nth=1)})
    assert found["range"] == {"start": at(DATA, "Shop"), "end": at(DATA, "Shop", delta=4)}
    refs = client.request("textDocument/references", {
        "textDocument": {"uri": uri}, "position": at(DATA, "Shop"),
        "context": {"includeDeclaration": True}})
    assert sorted(r["range"]["start"]["line"] for r in refs) == [4, 9, 14]
    hover = client.request("textDocument/hover", {
        "textDocument": {"uri": uri}, "position": at(DATA, "Shop", nth=2)})
    assert "datasource Shop" in hover["contents"]["value"]
    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert [(s["name"], s["detail"]) for s in symbols] == [
        ("Row", "schema"), ("Shop", "datasource"), ("rows", "tool"), ("clear", "tool")]
