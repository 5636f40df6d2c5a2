"""Build ``luma/syntax/tables.py`` — the parse tables — from ``grammar/luma.lark``.

Lark analyses the grammar here (LALR(1), ``strict=True``, the contextual lexer); the tables it
builds are written out as plain Python data, so that parsing needs neither Lark nor its analysis
at run time. ``luma/syntax/parse.py`` runs them with the same meaning as Lark's parser:

* the parse table, states renumbered in a fixed order so that the file does not depend on
  the order of Python's sets;
* every terminal's regular expression, the order Lark tries them in, and, per parser state,
  which terminals its contextual lexer knows (keywords a state does not accept lex as names);
* per rule, how Lark shapes the children handed to the transformer (``_rule`` children spliced
  in, ``None`` for an absent ``[optional]``, a ``?rule`` with one child replaced by it).

Regenerate after editing the grammar, and commit the result::

    .venv/bin/python -m luma.syntax.tablegen            # rewrite luma/syntax/tables.py
    .venv/bin/python -m luma.syntax.tablegen --check    # exit 1 when it is out of date
    .venv/bin/python -m luma.syntax.tablegen --show     # print the large tables as JSON
"""

from __future__ import annotations

import hashlib
import importlib
import json
import marshal
import pprint
import sys
from pathlib import Path
from typing import Any

from luma.syntax.grammar import LARK_OPTIONS, grammar_text

TABLES_PATH = Path(__file__).with_name("tables.py")

def build_lark(grammar: str, **options: Any) -> Any:
    """Lark's parser for ``grammar``, analysed now (not cached)."""
    from lark import Lark

    from luma.syntax.lexer import NewlinePostLexer

    return Lark(grammar, postlex=NewlinePostLexer(), **LARK_OPTIONS, **options)


def generate(grammar: str) -> str:
    """The text of ``tables.py`` for ``grammar``."""
    import lark
    from lark.lexer import PatternStr, UnlessCallback
    from lark.parse_tree_builder import (
        ChildFilterLALR,
        ChildFilterLALR_NoPlaceholders,
        ExpandSingleChild,
        ParseTreeBuilder,
    )
    from lark.parsers.lalr_analysis import Shift
    from lark.tree import Tree

    parser = build_lark(grammar)
    table = parser.parser.parser.parser.parse_table
    contextual = parser.parser.lexer.lexer
    terminals = {t.name: t for t in parser.terminals}

    # ---- states, renumbered breadth-first from the start state, symbols in name order
    start, end = table.start_states["start"], table.end_states["start"]
    order = [start]
    index = {start: 0}
    for old in order:
        for sym in sorted(table.states[old]):
            action, arg = table.states[old][sym]
            if action is Shift and arg not in index:
                index[arg] = len(order)
                order.append(arg)
    assert len(order) == len(table.states), "a state is unreachable from the start state"

    rules: list[Any] = []
    rule_index: dict[Any, int] = {}
    for rule in parser.rules:
        rule_index[rule] = len(rules)
        rules.append(rule)

    actions: list[dict[str, int]] = []
    for old in order:
        row: dict[str, int] = {}
        for sym in sorted(table.states[old]):
            action, arg = table.states[old][sym]
            row[str(sym)] = index[arg] if action is Shift else -1 - rule_index[arg]
        actions.append(row)

    # ---- rule shapes, read from the tree builder Lark itself would use
    builder = ParseTreeBuilder(parser.rules, Tree, propagate_positions=False, ambiguous=False,
                               maybe_placeholders=True)  # type: ignore[no-untyped-call]
    shapes: list[tuple[str, int, str | None, tuple[tuple[int, bool, int], ...] | None, int, bool]]
    shapes = []
    for rule, chain in builder.rule_builders:
        expand1 = False
        include: tuple[tuple[int, bool, int], ...] | None = None
        append_none = 0
        for wrapper in chain:
            if wrapper is ExpandSingleChild:
                expand1 = True
            elif getattr(wrapper, "func", None) is ChildFilterLALR:
                to_include, append_none = wrapper.args
                include = tuple((i, bool(x), n) for i, x, n in to_include)
            elif getattr(wrapper, "func", None) is ChildFilterLALR_NoPlaceholders:
                (to_include,) = wrapper.args
                include = tuple((i, bool(x), 0) for i, x in to_include)
            else:
                raise AssertionError(f"unexpected tree-builder step {wrapper!r} for {rule}")
        assert rule.options.template_source is None
        name = str(rule.alias or rule.origin.name)
        # A `_rule` is spliced into its parent; every other rule is a transformer method.
        callback = None if name.startswith("_") else name
        if include is not None and include == tuple((i, False, 0) for i in range(len(rule.expansion))) \
                and not append_none:
            include = None  # the children as they are
        shapes.append((str(rule.origin.name), len(rule.expansion), callback, include, append_none,
                       expand1))
    assert [r for r, _ in builder.rule_builders] == rules

    # ---- lexers: the root one (every terminal) and one per set of terminals a state knows
    def scanner_of(basic: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(terminals in the order tried, keywords a NAME becomes)."""
        names = tuple(t.name for t in basic.scanner.terminals)
        keywords: tuple[str, ...] = ()
        for kind, callback in basic.callback.items():
            assert isinstance(callback, UnlessCallback) and kind == "NAME", (kind, callback)
            for t in callback.scanner.terminals:
                assert isinstance(t.pattern, PatternStr) and not t.pattern.flags, t
            keywords = tuple(sorted(t.name for t in callback.scanner.terminals))
        pattern = "|".join(f"(?P<{n}>{terminals[n].pattern.to_regexp()})" for n in names)
        assert [m.pattern for m in basic.scanner._mres] == [pattern], "one regex per lexer"
        return names, keywords

    root_order, root_keywords = scanner_of(contextual.root_lexer)
    keywords = {terminals[k].pattern.value: k for k in root_keywords}
    ignore = tuple(sorted(parser.ignore_tokens))

    lexers: list[tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]] = []
    lexer_index: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}
    state_lexer: list[int] = []
    for old in order:
        key = scanner_of(contextual.lexers[old])
        if key not in lexer_index:
            lexer_index[key] = len(lexers)
            lexers.append((key[0], key[1], _fast_kinds(key[0], root_order, terminals)))
        state_lexer.append(lexer_index[key])

    skippable = _skippable_run(ignore, root_order, lexers, terminals)
    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()
    data = {
        "TERMINALS": {n: terminals[n].pattern.to_regexp() for n in sorted(terminals)},
        "MASTER": root_order,
        "KEYWORDS": dict(sorted(keywords.items())),
        "IGNORE": ignore,
        "SKIP_BEFORE_TOKEN": skippable,
        "LEXERS": tuple(lexers),
        "STATE_LEXER": tuple(state_lexer),
        "START": 0,
        "END": index[end],
        "ACTIONS": tuple(actions),
        "RULES": tuple(shapes),
    }
    out = [
        f'"""The Luma parse tables, generated by ``python -m luma.syntax.tablegen`` from\n'
        f'``grammar/luma.lark`` with Lark {lark.__version__}. Do not edit: regenerate.\n\n'
        "The large tables (LEXERS, ACTIONS, RULES) are in ``marshal``'s format, the one of\n"
        "Python's own bytecode files, as the lists and dicts ``json.loads`` would give: the\n"
        "quickest for Python to read (reading them as JSON cost ``luma check`` a tenth of its\n"
        "start-up, and the same data as literals takes Python 86 ms to compile where no bytecode\n"
        "is kept). They are read when first asked for: a program the recursive descent parses\n"
        "needs none of them. ``python -m luma.syntax.tablegen --show`` prints them as JSON.\n"
        '"""\n',
        "# fmt: off",
        "# mypy: ignore-errors",
        "from marshal import loads",
        "",
        f"GRAMMAR_SHA256 = {digest!r}",
        f"LARK_VERSION = {lark.__version__!r}",
    ]
    large = []
    for name, value in data.items():
        if isinstance(value, tuple) and value and isinstance(value[0], (tuple, dict)):
            large.append(name)
            out.append(f"_{name} = (\n{_bytes_lines(_marshalled(value))})")
        else:
            out.append(f"{name} = {pprint.pformat(value, width=100, sort_dicts=False, compact=True)}")
    out += [
        "",
        "",
        "def __getattr__(name):",
        "    if name not in " + repr(tuple(large)) + ":",
        "        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')",
        "    value = globals()[name] = loads(globals()['_' + name])",
        "    return value",
    ]
    return "\n".join(out) + "\n"


def _marshalled(value: Any) -> bytes:
    """``value`` as JSON would give it back (lists, dicts with string keys), in ``marshal``'s
    format (version 4, which every Python since 3.4 reads)."""
    return marshal.dumps(json.loads(json.dumps(value)), 4)


def _bytes_lines(data: bytes, width: int = 96) -> str:
    """A bytes literal written as adjacent literals of at most ``width`` characters a line."""
    lines, line = [], ""
    for i in range(len(data)):
        piece = repr(data[i:i + 1])[2:-1].replace("'", "\\'")
        if len(line) + len(piece) > width:
            lines.append(f"    b'{line}'")
            line = ""
        line += piece
    lines.append(f"    b'{line}'")
    return "\n".join(lines)


def _fast_kinds(order: tuple[str, ...], root_order: tuple[str, ...],
                terminals: dict[str, Any]) -> dict[str, str]:
    """For one state's lexer: the terminals the one all-terminal regex may decide alone.

    That regex finds the first terminal, in Lark's order, that matches. A state's lexer tries
    its own terminals in the same order, so when the regex finds one of them, the state's lexer
    finds it too — unless one of its terminals that the regex does not contain (a keyword the
    regex lexes as NAME) comes first and matches. Those are literal strings; the value is their
    first characters, and when the text at the position starts with one of them the parser asks
    the state's own regex. Terminals missing here go through the state's own regex always."""
    from lark.lexer import PatternStr

    fast: dict[str, str] = {}
    hidden: set[str] = set()
    for name in order:
        if name in root_order:
            fast[name] = "".join(sorted(hidden))
        elif isinstance(terminals[name].pattern, PatternStr):
            hidden.add(terminals[name].pattern.value[0])
        else:
            break  # a regex the master does not try: nothing after it is decided alone
    return fast


def _skippable_run(ignore: tuple[str, ...], root_order: tuple[str, ...],
                   lexers: list[tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]],
                   terminals: dict[str, Any]) -> str | None:
    """An ignored terminal that is a run of characters (``WS: /[ \\t]+/``) which every state's
    lexer finds wherever one of those characters is, nothing before it in any lexer's order
    being able to start with one: the parser may skip such a run before lexing a token."""
    from lark.lexer import PatternStr

    sre = importlib.import_module("re._parser")  # the regex parser of the re module

    for name in ignore:
        parsed = list(sre.parse(terminals[name].pattern.to_regexp()))
        if len(parsed) != 1 or parsed[0][0] is not sre.MAX_REPEAT:
            continue
        low, _, body = parsed[0][1]
        chars, nullable = _first_chars(list(body))
        if low != 1 or chars is None or nullable or len(body) != 1 or body[0][0] is not sre.IN:
            continue
        if not all(name in order and fast.get(name) == "" for order, _, fast in lexers):
            continue
        before = root_order[:root_order.index(name)]
        hidden = {terminals[k].pattern.value for k in terminals
                  if k not in root_order and isinstance(terminals[k].pattern, PatternStr)}
        if all((f := _first_chars(list(sre.parse(terminals[t].pattern.to_regexp())))[0])
               is not None and not f & chars for t in before) \
                and not any(ord(h[0]) in chars for h in hidden if h):
            return name
    return None


def _first_chars(items: list[Any]) -> tuple[set[int] | None, bool]:
    """The characters a match of a parsed regex can start with (None: cannot tell), and
    whether it can match the empty string."""
    sre = importlib.import_module("re._parser")
    firsts: set[int] = set()
    for op, av in items:
        if op is sre.LITERAL:
            chars, nullable = {av}, False
        elif op is sre.IN:
            chars = set()
            for o, a in av:
                if o is sre.LITERAL:
                    chars.add(a)
                elif o is sre.RANGE:
                    chars |= set(range(a[0], a[1] + 1))
                else:
                    return None, False  # a negated set or a category: anything
            nullable = False
        elif op is sre.SUBPATTERN:
            if av[1] & sre.SRE_FLAG_IGNORECASE:
                return None, False
            chars_or_none, nullable = _first_chars(list(av[3]))
            if chars_or_none is None:
                return None, False
            chars = chars_or_none
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            chars_or_none, nullable = _first_chars(list(av[2]))
            if chars_or_none is None:
                return None, False
            chars, nullable = chars_or_none, nullable or av[0] == 0
        elif op is sre.BRANCH:
            chars, nullable = set(), False
            for branch in av[1]:
                c, n = _first_chars(list(branch))
                if c is None:
                    return None, False
                chars |= c
                nullable = nullable or n
        elif op in (sre.ASSERT, sre.ASSERT_NOT, sre.AT):
            chars, nullable = set(), True  # zero-width: consumes nothing
        else:
            return None, False
        firsts |= chars
        if not nullable:
            return firsts, False
    return firsts, True


def main(argv: list[str]) -> int:
    from luma.syntax.generated import write_or_check

    if argv == ["--show"]:
        from luma.syntax import tables

        for name in ("LEXERS", "ACTIONS", "RULES"):
            items = ",\n".join(json.dumps(item, separators=(",", ":")) for item in getattr(tables, name))
            print(f"{name} = [\n{items}\n]")
        return 0
    return write_or_check(TABLES_PATH, generate(grammar_text()), argv,
                          "python -m luma.syntax.tablegen")

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
