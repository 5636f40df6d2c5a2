"""``luma lsp``: the language server, on pygls, over stdio.

Small handlers over one document model (``luma.lsp.index.Analysis``): each edit is analysed
again (parse and check) after a short pause, so a burst of keystrokes costs one analysis; a
request that needs the current text analyses it at once if the pause has not ended yet.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

import luma.lsp.features as features
from luma.lsp.index import Analysis, Key, analyse
from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.source import SourceFile, Span

DEBOUNCE_SECONDS = 0.02

_SYMBOL_KINDS = {"schema": lsp.SymbolKind.Struct, "tool": lsp.SymbolKind.Function,
                 "model": lsp.SymbolKind.Object, "datasource": lsp.SymbolKind.Module,
                 "agent": lsp.SymbolKind.Class,
                 "fn": lsp.SymbolKind.Method, "field": lsp.SymbolKind.Field,
                 "test": lsp.SymbolKind.Event}
_COMPLETION_KINDS = {"keyword": lsp.CompletionItemKind.Keyword,
                     "type": lsp.CompletionItemKind.TypeParameter,
                     "schema": lsp.CompletionItemKind.Struct,
                     "tool": lsp.CompletionItemKind.Function,
                     "model": lsp.CompletionItemKind.Module,
                     "agent": lsp.CompletionItemKind.Class,
                     "key": lsp.CompletionItemKind.Property,
                     "value": lsp.CompletionItemKind.Value,
                     "annotation": lsp.CompletionItemKind.Keyword}


class LumaServer(LanguageServer):
    def __init__(self) -> None:
        from luma import __version__

        super().__init__("luma", __version__,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.analyses: dict[str, tuple[int | None, Analysis]] = {}
        self.last_parsed: dict[str, ast.Program] = {}  # the last version of each that parsed
        self.pending: dict[str, asyncio.TimerHandle] = {}

    def analysis(self, uri: str) -> Analysis:
        """The analysis of the document's current text."""
        doc = self.workspace.get_text_document(uri)
        known = self.analyses.get(uri)
        if known is not None and known[0] == doc.version and known[1].source.text == doc.source:
            return known[1]
        result = analyse(doc.source, _path_of(uri))
        self.analyses[uri] = (doc.version, result)
        if result.program is not None:
            self.last_parsed[uri] = result.program
        return result

    def schedule(self, uri: str) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        loop = asyncio.get_running_loop()
        self.pending[uri] = loop.call_later(DEBOUNCE_SECONDS, self.publish, uri)

    def publish(self, uri: str) -> None:
        self.pending.pop(uri, None)
        if uri not in self.workspace.text_documents:  # closed meanwhile
            return
        result = self.analysis(uri)
        diagnostics = [_diagnostic(d, result.source, uri) for d in result.diagnostics]
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics,
                                         version=self.analyses[uri][0]))


def _path_of(uri: str) -> str:
    from pygls.uris import to_fs_path

    return to_fs_path(uri) or uri


def _units(char: str) -> int:
    """How many code units of the encoding agreed with the client ``char`` takes."""
    encoding = server.server_capabilities.position_encoding or lsp.PositionEncodingKind.Utf16
    if encoding == lsp.PositionEncodingKind.Utf8:
        return len(char.encode("utf-8"))
    if encoding == lsp.PositionEncodingKind.Utf32:
        return 1
    return 2 if ord(char) > 0xFFFF else 1


def _position(source: SourceFile, offset: int) -> lsp.Position:
    line, col = source.line_col(offset)
    text = source.line_text(line)[:col - 1]
    return lsp.Position(line=line - 1, character=sum(_units(c) for c in text))


def _range(source: SourceFile, span: Span) -> lsp.Range:
    return lsp.Range(start=_position(source, span.start), end=_position(source, span.end))


def _offset(source: SourceFile, position: lsp.Position) -> int:
    line = source.line_text(position.line + 1)
    units = 0
    col = 0
    while col < len(line) and units < position.character:
        units += _units(line[col])
        col += 1
    starts = source.line_starts
    if position.line >= len(starts):
        return len(source.text)
    return starts[position.line] + col


def _diagnostic(d: Diagnostic, source: SourceFile, uri: str) -> lsp.Diagnostic:
    message = d.message + (f"\nhint: {d.hint}" if d.hint else "")
    related = [lsp.DiagnosticRelatedInformation(
        location=lsp.Location(uri=uri, range=_range(source, r.span)), message=r.message)
        for r in d.related] or None
    severity = lsp.DiagnosticSeverity.Error if d.is_error else lsp.DiagnosticSeverity.Warning
    fix = features.fix_of(d.hint)
    return lsp.Diagnostic(range=_range(source, d.span), message=message, severity=severity,
                          code=d.code, source="luma", related_information=related,
                          data={"fix": fix} if fix else None)


server = LumaServer()


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LumaServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.publish(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: LumaServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: LumaServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: LumaServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    handle = ls.pending.pop(uri, None)
    if handle is not None:
        handle.cancel()
    ls.analyses.pop(uri, None)
    ls.last_parsed.pop(uri, None)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: LumaServer, params: lsp.HoverParams) -> lsp.Hover | None:
    a = ls.analysis(params.text_document.uri)
    text = features.hover(a, _offset(a.source, params.position))
    if text is None:
        return None
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text))


@server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
def definition(ls: LumaServer, params: lsp.DefinitionParams) -> lsp.Location | None:
    uri = params.text_document.uri
    a = ls.analysis(uri)
    occ = a.at(_offset(a.source, params.position))
    if occ is None or occ.key not in a.definitions:
        return None
    return lsp.Location(uri=uri, range=_range(a.source, a.definitions[occ.key]))


@server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
def references(ls: LumaServer, params: lsp.ReferenceParams) -> list[lsp.Location]:
    uri = params.text_document.uri
    a = ls.analysis(uri)
    occ = a.at(_offset(a.source, params.position))
    if occ is None:
        return []
    include = params.context.include_declaration
    return [lsp.Location(uri=uri, range=_range(a.source, o.span)) for o in a.references(occ.key)
            if include or not o.is_definition]


@server.feature(lsp.TEXT_DOCUMENT_RENAME)
def rename(ls: LumaServer, params: lsp.RenameParams) -> lsp.WorkspaceEdit | None:
    import re

    uri = params.text_document.uri
    a = ls.analysis(uri)
    key = features.rename_target(a, _offset(a.source, params.position))
    if key is None:
        return None
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", params.new_name) \
            or params.new_name in features.KEYWORDS:
        raise ValueError(f"'{params.new_name}' is not a name Luma accepts")
    edits = [lsp.TextEdit(range=_range(a.source, o.span), new_text=params.new_name)
             for o in a.references(key)]
    return lsp.WorkspaceEdit(changes={uri: edits})


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbols(ls: LumaServer,
                     params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
    a = ls.analysis(params.text_document.uri)
    program = a.program or ls.last_parsed.get(params.text_document.uri)
    if program is None or a.program is None:
        return []

    def symbol(kind: str, name: str, node: Any, name_span: Span,
               children: list[lsp.DocumentSymbol] | None = None) -> lsp.DocumentSymbol:
        return lsp.DocumentSymbol(name=name, kind=_SYMBOL_KINDS[kind],
                                  range=_range(a.source, node.span),
                                  selection_range=_range(a.source, name_span),
                                  detail=kind, children=children)

    out: list[lsp.DocumentSymbol] = []
    for d in a.program.declarations:
        if isinstance(d, ast.SchemaDecl):
            out.append(symbol("schema", d.name, d, d.name_span,
                              [symbol("field", f.name, f, f.name_span) for f in d.fields]))
        elif isinstance(d, ast.UnionDecl):
            out.append(symbol("schema", d.name, d, d.name_span))
        elif isinstance(d, ast.ToolDecl):
            out.append(symbol("tool", d.name, d, d.name_span))
        elif isinstance(d, ast.ModelDecl):
            out.append(symbol("model", d.name, d, d.name_span))
        elif isinstance(d, ast.DatasourceDecl):
            out.append(symbol("datasource", d.name, d, d.name_span))
        elif isinstance(d, ast.AgentDecl):
            out.append(symbol("agent", d.name, d, d.name_span,
                              [symbol("fn", f.name, f, f.name_span) for f in d.fns]))
        elif isinstance(d, ast.TestDecl):
            out.append(symbol("test", d.name, d, d.name_span))
    return out


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION,
                lsp.CompletionOptions(trigger_characters=["@", ":", "[", " "]))
def completion(ls: LumaServer, params: lsp.CompletionParams) -> lsp.CompletionList:
    uri = params.text_document.uri
    a = ls.analysis(uri)
    offset = _offset(a.source, params.position)
    program = a.program or _without_line(a.source.text, offset) or ls.last_parsed.get(uri)
    candidates = features.complete(a, program, offset)
    items = [lsp.CompletionItem(label=c.label, kind=_COMPLETION_KINDS[c.kind],
                                detail=c.detail or c.kind, insert_text=c.insert)
             for c in candidates]
    return lsp.CompletionList(is_incomplete=False, items=items)


def _without_line(text: str, offset: int) -> ast.Program | None:
    """The program without the line being typed, when that much parses: the names it declares
    are what may be written there."""
    from luma.syntax.parse import parse_text

    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    program, _ = parse_text(text[:start] + (text[end:] if end >= 0 else ""))
    return program


@server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
def formatting(ls: LumaServer, params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit]:
    from luma.syntax.format import FormatError, format_text

    doc = ls.workspace.get_text_document(params.text_document.uri)
    try:
        out = format_text(doc.source, _path_of(params.text_document.uri))
    except FormatError:
        return []  # a syntax error: the diagnostics already say where
    if out == doc.source:
        return []
    source = SourceFile("", doc.source)
    whole = lsp.Range(start=lsp.Position(line=0, character=0),
                      end=_position(source, len(doc.source)))
    return [lsp.TextEdit(range=whole, new_text=out)]


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
def code_actions(ls: LumaServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    actions = []
    for d in params.context.diagnostics:
        fix = d.data.get("fix") if isinstance(d.data, dict) else None
        if d.source != "luma" or not isinstance(fix, str):
            continue
        edit = lsp.WorkspaceEdit(changes={uri: [lsp.TextEdit(range=d.range, new_text=fix)]})
        actions.append(lsp.CodeAction(title=f"Change to '{fix}'",
                                      kind=lsp.CodeActionKind.QuickFix, diagnostics=[d],
                                      edit=edit, is_preferred=True))
    return actions


def run_stdio() -> None:
    import gc

    gc.freeze()  # what start-up made lives as long as the server: no collection need scan it
    server.start_io()


__all__ = ["Key", "LumaServer", "run_stdio", "server"]
