"""Turn Lark's parse failures into sentences a user understands.

Never a parser state, never a token dump: what was expected, in words, after what, where.
"""

from __future__ import annotations

from typing import Any

from luma.syntax.lexer import NewlinePostLexer

_KEYWORDS = ("schema tool model agent fn if else for in return try catch throw ask using tagged "
             "by needs enum map true false null and or not datasource query command").split()

_NAMES: dict[str, str] = {
    "NAME": "a name", "INT": "a number", "FLOAT": "a number", "STRING": "a string",
    "LONG_STRING": "a string", "COLON": "':'", "COMMA": "','", "EQUAL": "'='", "ARROW": "'->'",
    "DOT": "'.'", "AT": "'@'", "VBAR": "'|'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['",
    "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "OPTIONAL": "'?'", "PLUS": "'+'",
    "MINUS": "'-'", "MUL_OP": "an operator", "COMP_OP": "a comparison", "_NL": "a new line",
    "$END": "the end of the file", "_ELSE": "'else'", "_USING": "'using'",
}
_EXPR_START = {"NAME", "INT", "FLOAT", "STRING", "LONG_STRING", "LPAR", "LSQB", "LBRACE",
               "MINUS", "NOT", "TRUE", "FALSE", "NULL", "TOOL", "ASK"}
_OPERATORS = {"PLUS", "MINUS", "MUL_OP", "COMP_OP", "AND", "OR", "DOT", "LSQB", "LPAR"}

# The keywords that begin a declaration or a statement, and those that begin an expression:
# a name just before the error, where one of these belongs, is most likely a misspelling.
_ENTRY_KEYWORDS = ("schema", "tool", "model", "agent", "if", "for", "return", "try", "throw",
                   "ask", "datasource", "query", "command")
_EXPRESSION_KEYWORDS = ("ask", "tool", "not")
# Words from other languages for a Luma keyword.
_OTHER_LANGUAGES = {
    "def": "fn", "func": "fn", "function": "fn", "fun": "fn", "struct": "schema",
    "class": "schema", "interface": "schema", "type": "schema", "raise": "throw",
    "elif": "else if", "while": "for", "foreach": "for",
}
# After these the parser starts a new entry, or an expression.
_ENTRY_START = {None, "_NL", "LBRACE", "COMMA"}
_EXPRESSION_START = {"EQUAL", "LPAR", "LSQB", "COLON", "RETURN", "THROW", "IN", "IF"}

_OWNER_WORDS = {
    "schema": "the fields of schema", "tool": "the configuration of tool",
    "model": "the configuration of model", "agent": "the body of agent",
    "fn": "the body of function", "tool_params": "the parameters of tool",
    "fn_params": "the parameters of function",
}


def _name(kind: str) -> str:
    if kind in _NAMES:
        return _NAMES[kind]
    if kind.lower() in _KEYWORDS:
        return f"'{kind.lower()}'"
    return kind.lower()


def _describe_token(tok: Any) -> str:
    kind = tok.type
    if kind == "$END":
        return "the end of the file"
    if kind == "_NL":
        return "the end of the line"
    value = str(tok.value).strip()
    if kind == "NAME":
        return f"the name '{value}'"
    if kind in ("INT", "FLOAT"):
        return f"the number {value}"
    if kind in ("STRING", "LONG_STRING"):
        value = _printable(value)
        short = value if len(value) <= 24 else value[:20] + '..."'
        return f"the string {short}"
    if value in _KEYWORDS:
        return f"the keyword '{value}'"
    return f"'{_printable(value)[:24]}'"


def _printable(text: str) -> str:
    """Messages are one line: control characters are shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _summarise(expected: set[str]) -> str:
    exp = set(expected)
    words: list[str] = []
    if {"NAME", "ENUM", "MAP"} <= exp and "INT" not in exp:
        words.append("a type")
        exp -= {"NAME", "ENUM", "MAP"}
    elif "INT" in exp and "NAME" in exp:
        words.append("an expression")
        exp -= _EXPR_START
    if exp & _OPERATORS and words == []:
        exp -= _OPERATORS
        if not exp:
            return "an operator"
    exp -= _OPERATORS
    exp.discard("_NL")
    for k in sorted(exp, key=lambda k: (k not in ("COLON", "RBRACE", "RPAR", "RSQB"), k)):
        w = _name(k)
        if w not in words:
            words.append(w)
    if not words:
        return "something else"
    if len(words) > 4:
        words = words[:4]
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def describe_unexpected(exc: Any, text: str,
                        postlex: NewlinePostLexer) -> tuple[str, int, int, str | None]:
    """(message, start, end, hint) for a Lark ``UnexpectedInput``."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    frame = postlex.stack[-1] if postlex.stack else None
    if isinstance(exc, UnexpectedCharacters):
        pos = int(exc.pos_in_stream or 0)
        ch = text[pos] if pos < len(text) else ""
        if ch == '"':
            return ("this string is never closed", pos, pos + 1,
                    'a "..." string ends on its own line; use """...""" for text over several lines')
        if ch == "/" and text.startswith("/*", pos):
            return ("this comment is never closed: '/*' needs a matching '*/'", pos, pos + 2, None)
        shown = ch if ch.isprintable() and not ch.isspace() else f"U+{ord(ch):04X}" if ch else "?"
        hint = None
        if ch in "!&":
            hint = "use 'not', 'and' and 'or' for logic"
        elif ch == "'":
            hint = "strings use double quotes: \"...\""
        return (f"unexpected character '{shown}'", pos, pos + 1, hint)

    if isinstance(exc, UnexpectedEOF) or (
            isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        end = len(text)
        if frame is not None:
            closer = {"(": "')'", "[": "']'", "{": "'}'"}[frame.bracket]
            where = _frame_words(frame)
            return (f"expected {closer} to close {where} before the end of the file",
                    frame.start, frame.start + 1,
                    "the bracket opened here is never closed")
        expected = set(getattr(exc, "expected", ()) or ())
        return (f"unexpected end of the file; expected {_summarise(expected)}", end, end, None)

    assert isinstance(exc, UnexpectedToken)
    tok = exc.token
    start = tok.start_pos if tok.start_pos is not None else len(text)
    end = tok.end_pos if tok.end_pos is not None else start
    if tok.type == "_NL":
        end = start + 1
    elif tok.type in ("_ELSE", "CATCH"):
        start = end - len(str(tok.value).strip())  # the token carries the newline before it
    expected = _parser_expected(exc)
    if text.startswith("/*", max(start - 1, 0)) and "*/" not in text[start:]:
        pos = start - 1 if text.startswith("/*", start - 1) else start
        return ("this comment is never closed: '/*' needs a matching '*/'", pos, pos + 2, None)
    last = postlex.last
    prev = last[-2] if len(last) >= 2 and last[-1] is tok else (last[-1] if last else None)
    found = _describe_token(tok)
    hint = None
    if str(tok.value) in _KEYWORDS and "NAME" in expected:
        hint = f"'{tok.value}' is a keyword and cannot be used as a name"

    owner = frame.owner if frame else None
    before = last[-3] if len(last) >= 3 and last[-1] is tok else (
        last[-2] if len(last) >= 2 and last[-1] is not tok else None)
    generic = _python_generic(prev, before, tok, text)
    if generic is not None:
        return generic
    typo = _misspelt_keyword(prev, before, owner, tok)
    if typo is not None and prev is not None:
        return (f"'{prev.value}' is not a keyword", prev.start_pos, prev.end_pos, typo)
    if prev is not None and prev.type in ("NAME", "OPTIONAL") and "COLON" in expected:
        name = prev.value if prev.type == "NAME" else (
            last[-3].value if len(last) >= 3 and last[-3].type == "NAME" else None)
        # (a `?` with no field name before it falls through to the general message below)
        if name is not None and owner in ("schema", "tool_params", "fn_params"):
            role = "field" if owner == "schema" else "parameter"
            return (f"expected ':' after the {role} name '{name}'", start, end, hint)
        if name is not None and owner in ("tool", "model", "agent") \
                and len(expected - {"COLON"}) <= 2:
            return (f"expected ':' after the configuration key '{name}'", start, end, hint)

    if prev is not None and prev.type == "TEST" and not postlex.stack and tok.type != "STRING":
        return (f"expected the test's name (a string) after 'test', found {found}", start, end,
                "a top-level statement cannot begin with a variable named 'test': rename it")
    test_entry = _test_entry_problem(postlex, owner, prev, before, tok, start, end)
    if test_entry is not None:
        return test_entry
    if "_NL" in expected or "COMMA" in expected and frame is not None and frame.bracket == "{":
        if expected & _OPERATORS or tok.type != "_NL":
            return (f"expected a new line or ',' before {found}", start, end,
                    hint or "two entries on one line need a ',' between them")

    what = _summarise(expected)
    after = ""
    if prev is not None and prev.type != "_NL":
        after = f" after {_describe_token(prev)}"
    where = f" in {_frame_words(frame)}" if frame is not None and frame.owner in _OWNER_WORDS else ""
    return (f"expected {what}{after}{where}, found {found}", start, end, hint)


_TEST_ENTRIES = ("assert", "check", "mock")
_ENTRY_STARTS = (None, "_NL", "LBRACE", "COMMA")
_TEST_KEYWORDS = ("ASSERT", "CHECK", "MOCK")


def _test_entry_problem(postlex: Any, owner: str | None, prev: Any, before: Any, tok: Any,
                        start: int, end: int) -> tuple[str, int, int, str | None] | None:
    """A ``,`` between two entries of a test or of a block inside one (a test separates them
    by new lines), or an ``assert``, ``check`` or ``mock`` beginning an entry outside a test."""
    in_test = any(f.owner == "test" for f in postlex.stack)
    if in_test and owner in ("test", "block") and tok.type == "COMMA":
        return ("a test's entries are separated by new lines, not ','", start, end,
                "put each entry on its own line")
    if in_test and prev is not None and prev.type in _TEST_KEYWORDS and tok.type == "EQUAL":
        return (f"'{prev.value}' cannot be assigned in a test: it begins an assertion or a mock "
                "there", prev.start_pos, prev.end_pos, "give the variable another name")
    last = [t for t in postlex.last if t is not tok]
    if in_test and owner == "block" and len(last) >= 3 and last[-3].type == "NAME" \
            and last[-3].value == "model" and last[-2].type == "COLON" \
            and last[-1].type == "NAME" and tok.type in ("_NL", "RBRACE"):
        return ("'model:' is an entry of a test's body, not of a block inside it",
                last[-3].start_pos, last[-1].end_pos, "move it to the top of the test")
    if not in_test and prev is not None and prev.type == "NAME" \
            and prev.value in _TEST_ENTRIES \
            and (before.type if before is not None else None) in _ENTRY_STARTS:
        return (f"'{prev.value}' is only allowed in a test", prev.start_pos, prev.end_pos,
                "write it in a test \"name\" { ... } declaration")
    return None


_LIST_WORDS = ("list", "List", "tuple", "set", "Sequence", "Array")
_MAP_WORDS = ("dict", "Dict", "Mapping", "Record")


def _python_generic(prev: Any, before: Any, tok: Any,
                    text: str) -> tuple[str, int, int, str] | None:
    """``list[int]`` or ``dict[str, int]``, another language's way to write a Luma type: the
    message names it and the hint is the Luma spelling (``int[]``, ``map[int]``)."""
    if prev is None or before is None or prev.type != "LSQB" or before.type != "NAME":
        return None
    word = str(before.value)
    if word not in _LIST_WORDS + _MAP_WORDS or tok.start_pos is None:
        return None
    close = text.find("]", tok.start_pos)
    newline = text.find("\n", tok.start_pos)
    if close < 0 or 0 <= newline < close:
        return None
    inner = " ".join(text[tok.start_pos:close].split())
    if word in _LIST_WORDS:
        luma = f"{inner}[]"
    else:
        luma = f"map[{inner.rpartition(',')[2].strip()}]"
    written = f"{word}[{inner}]"
    return (f"'{written}' is not a Luma type", before.start_pos, close + 1,
            f"did you mean '{luma}'?")


def _misspelt_keyword(prev: Any, before: Any, owner: str | None, tok: Any) -> str | None:
    """A did-you-mean hint when the name just before the error stands where a keyword begins
    an entry (``shema S {``, ``retrun x``) or an expression (``= aks "..."``), and is close to
    one, or is another language's word for one (``def``)."""
    if prev is None or prev.type != "NAME" or tok.type in ("COLON", "EQUAL", "_NL", "$END"):
        return None
    word = str(prev.value)
    before_kind = before.type if before is not None else None
    if before_kind in _ENTRY_START:
        in_config = owner in ("tool", "model", "agent")  # `key: value` entries
        candidates: tuple[str, ...] = ("fn",) if owner == "agent" else (
            () if in_config else _ENTRY_KEYWORDS)
    elif before_kind in _EXPRESSION_START:
        candidates = _EXPRESSION_KEYWORDS
    else:
        return None
    other = _OTHER_LANGUAGES.get(word)
    if other is not None and (other.split()[0] in candidates or other == "fn"):
        where = " inside an agent" if other == "fn" and owner != "agent" else ""
        return f"Luma writes '{other}' here{where}" if other != "fn" else \
            f"functions are declared with 'fn'{where}"
    # a keyword one slip away (two for a longer one): a letter missing, extra, wrong or swapped
    allowed = 1 if len(word) <= 4 else 2
    close = [k for k in candidates if _slips(word.lower(), k) <= allowed]
    if not close:
        return None
    return f"did you mean '{min(close, key=lambda k: _slips(word.lower(), k))}'?"


def _slips(a: str, b: str) -> int:
    """The optimal-string-alignment distance: edits, counting a swap of neighbours as one."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def _parser_expected(exc: Any) -> set[str]:
    """The terminals the parser could take here. An error raised by the contextual lexer lists the
    lexer's terminals (the newline is always among them); the parse table is the truth."""
    parser = getattr(exc, "interactive_parser", None)
    if parser is not None:
        try:
            return {k for k in parser.choices() if k.isupper() or k.startswith("_") and k[1:].isupper()}
        except Exception:  # the table is only a better guess; never fail while reporting
            pass
    return set(exc.expected or ())


def _frame_words(frame: Any) -> str:
    words = _OWNER_WORDS.get(frame.owner)
    if words and frame.owner_name:
        return f"{words} '{frame.owner_name}'"
    return {"(": "the '('", "[": "the '['", "{": "the '{'"}[frame.bracket]
