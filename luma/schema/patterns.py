"""Which ``@pattern`` expressions match in bounded time.

Python's ``re`` backtracks: a pattern that can match the same text in several ways can take
time exponential in the input (``(a+)+``), or polynomial (``\\d+\\d+``: quadratic), and ``re`` has
no timeout. ``matching_time`` finds both from the pattern alone, as in Weideman, van der Merwe,
Berglund and Watson, "Analyzing matching time behavior of backtracking regular expression
matchers by using ambiguity of NFA" (2016):

* the pattern becomes its position automaton (one state per character or class it matches);
* *exponential*: some state has two different paths back to itself that read the same text;
* *polynomial*: two different states ``p`` and ``q`` and one text that leads from ``p`` to
  ``p``, from ``p`` to ``q`` and from ``q`` to ``q``.

A pattern with neither is matched by ``re`` in time linear in the input for a given pattern. The
checker refuses the others (E049); the validator refuses to run them (``SchemaError``).
Character classes are compared on a sample of characters (all of ASCII, the pattern's own
characters and range ends, and a few from other scripts), so the analysis knows ``\\d`` and
``[0-9a-f]`` share ``7``. Zero-width assertions (``^ $ \\b``, lookarounds) are taken as matching
everywhere, which can only find more ambiguity, never less.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re._constants as sre  # type: ignore[import-not-found]  # a pattern as re reads it
import re._parser as sre_parse  # type: ignore[import-not-found]

from luma.graphs import strongly_connected

# Past this many steps the analysis stops and calls the pattern too complex to be sure of.
_WORK_LIMIT = 300_000
# A bounded repetition ``x{2,5}`` is written out as that many copies when it stays this small;
# a larger one is analysed as an unbounded repetition (which can only find more ambiguity).
_EXPAND_LIMIT = 200

_EXTRA_SAMPLES = "\u00a0\u00e9\u00df\u0130\u017f\u03bb\u0663\u2028\u212a\u4e2d\U0001f600"
_CATEGORIES: dict[Any, re.Pattern[str]] = {
    sre.CATEGORY_DIGIT: re.compile(r"\d"), sre.CATEGORY_NOT_DIGIT: re.compile(r"\D"),
    sre.CATEGORY_SPACE: re.compile(r"\s"), sre.CATEGORY_NOT_SPACE: re.compile(r"\S"),
    sre.CATEGORY_WORD: re.compile(r"\w"), sre.CATEGORY_NOT_WORD: re.compile(r"\W"),
}


@dataclass(frozen=True, slots=True)
class MatchingTime:
    """``kind`` is "linear", "polynomial", "exponential" or "unknown" (too complex to tell);
    ``example`` a text the ambiguous part can read in more than one way."""

    kind: str
    example: str = ""

    @property
    def is_bounded(self) -> bool:
        return self.kind == "linear"

    def describe(self, pattern_shown: str) -> str:
        """The diagnostic for a pattern that is not bounded (``pattern_shown`` as written)."""
        text = _shown(self.example)
        if self.kind == "exponential":
            return (f"@pattern {pattern_shown} can take exponential time to match: a repetition "
                    f"in it can match {text} in more than one way.")
        if self.kind == "polynomial":
            return (f"@pattern {pattern_shown} can take polynomial time to match: two "
                    f"repetitions in a row can both match {text}.")
        return (f"@pattern {pattern_shown} is too complex to be sure it matches in linear "
                "time.")


HINT = ("write it so each part of a text can match only one way: e.g. (a+)+ as a+, "
        "\\d+\\d+ as \\d{2,}, (a|ab)* as (ab?)*")


def _shown(text: str) -> str:
    import json

    return json.dumps(text[:40] + ("..." if len(text) > 40 else ""), ensure_ascii=False)


@lru_cache(maxsize=512)
def matching_time(pattern: str) -> MatchingTime:
    """How long ``re.fullmatch(pattern, text)`` can take, in the length of ``text``. The
    pattern must compile."""
    try:
        parsed = sre_parse.parse(pattern)
        automaton = _Automaton(_samples(parsed), parsed.state.flags)
        automaton.build(parsed)
        return automaton.matching_time()
    except (_TooComplex, RecursionError):
        return MatchingTime("unknown")


class _TooComplex(Exception):
    pass


def _samples(parsed: Any) -> str:
    chars = {chr(i) for i in range(128)} | set(_EXTRA_SAMPLES)


    def walk(items: Iterable[Any]) -> None:
        for op, av in items:
            if op in (sre.LITERAL, sre.NOT_LITERAL):
                chars.update((chr(av), chr(av).lower(), chr(av).upper()))
            elif op is sre.RANGE:
                for c in (av[0], av[0] + 1, av[1] - 1, av[1]):
                    if 0 <= c <= 0x10FFFF:
                        chars.add(chr(c))
            elif op is sre.IN:
                walk(av)
            elif op is sre.BRANCH:
                for branch in av[1]:
                    walk(branch)
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
                walk(av[2])
            elif op is sre.SUBPATTERN:
                walk(av[3])
            elif op is sre.ATOMIC_GROUP:
                walk(av)
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                walk(av[1])
            elif op is sre.GROUPREF_EXISTS:
                walk(av[1])
                if av[2] is not None:
                    walk(av[2])

    walk(parsed)
    # in the order examples prefer them: bit 0 of a label is its nicest character
    return "".join(sorted(chars, key=_nice))


def _nice(c: str) -> tuple[bool, bool, str]:
    return not c.isalnum(), not c.isprintable() or c.isspace(), c


class _Automaton:
    """The position automaton of a pattern: ``labels[p]`` the sampled characters state ``p``
    reads, ``follow[p]`` the states that can come next, each with the number of ways the
    pattern leads there (``(a*)*`` leads from ``a`` back to ``a`` two ways); state 0 is the
    start."""

    def __init__(self, samples: str, flags: int) -> None:
        self.samples = samples
        self.flags = flags
        self.labels: list[int] = [0]  # bit i: the state reads samples[i]
        self.follow: list[dict[int, int]] = [{}]
        self.work = 0

    def _link(self, sources: Iterable[int], targets: set[int]) -> None:
        for p in sources:
            ways = self.follow[p]
            for q in targets:
                ways[q] = ways.get(q, 0) + 1

    # ------------------------------------------------------------------- construction
    def build(self, parsed: Any) -> None:
        first, _last, _nullable = self._sequence(list(parsed), self.flags)
        self._link([0], first)

    def _position(self, member: Callable[[str], bool]) -> tuple[set[int], set[int], bool]:
        if len(self.labels) > 20_000:
            raise _TooComplex
        self.labels.append(sum(1 << i for i, c in enumerate(self.samples) if member(c)))
        self.follow.append({})
        p = len(self.labels) - 1
        return {p}, {p}, False

    def _sequence(self, items: list[Any], flags: int) -> tuple[set[int], set[int], bool]:
        first: set[int] = set()
        last: set[int] = set()
        nullable = True
        for item in items:
            f, l, n = self._node(item, flags)
            self._link(last, f)
            if nullable:
                first |= f
            last = l | last if n else l
            nullable = nullable and n
        return first, last, nullable

    def _node(self, item: tuple[Any, Any], flags: int) -> tuple[set[int], set[int], bool]:
        op, av = item
        fold = bool(flags & re.IGNORECASE)
        if op is sre.LITERAL:
            return self._position(_literal(av, fold))
        if op is sre.NOT_LITERAL:
            same = _literal(av, fold)
            return self._position(lambda c: not same(c))
        if op is sre.ANY:
            dotall = bool(flags & re.DOTALL)
            return self._position(lambda c: dotall or c != "\n")
        if op is sre.IN:
            return self._position(_class(av, fold))
        if op is sre.BRANCH:
            first, last, nullable = set(), set(), False
            for branch in av[1]:
                f, l, n = self._sequence(branch, flags)
                first |= f
                last |= l
                nullable = nullable or n
            return first, last, nullable
        if op is sre.SUBPATTERN:
            _group, add, remove, body = av
            return self._sequence(body, (flags | add) & ~remove)
        if op is sre.ATOMIC_GROUP:
            return self._sequence(av, flags)
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            return self._repeat(av[0], av[1], list(av[2]), flags)
        if op is sre.GROUPREF_EXISTS:
            f1, l1, n1 = self._sequence(av[1], flags)
            f2, l2, n2 = self._sequence(av[2] or [], flags)
            return f1 | f2, l1 | l2, n1 or n2
        if op is sre.GROUPREF:
            # the text of a group: taken as any text, which can only find more ambiguity
            return self._repeat(0, sre.MAXREPEAT, [(sre.ANY, None)], flags | re.DOTALL)
        return set(), set(), True  # AT, ASSERT, ASSERT_NOT: zero width

    def _repeat(self, low: int, high: int, body: list[Any],
                flags: int) -> tuple[set[int], set[int], bool]:
        if high == 0:
            return set(), set(), True
        size = _size(body)
        unbounded = high == sre.MAXREPEAT or high * size > _EXPAND_LIMIT
        # x{2,4} is x x (x (x)?)?: the optional copies nest, so each count is read one way
        copies = max(min(low, 2), 1) if unbounded else high
        if unbounded and low == high:
            # x{1000}: two copies show how neighbouring copies can share a text, and no loop
            unbounded, copies, low = False, 2, 2
        first: set[int] = set()
        last: set[int] = set()
        previous: set[int] = set()  # where the copy before this one can end
        nullable = True
        f: set[int] = set()
        l: set[int] = set()
        for i in range(copies):
            f, l, n = self._sequence(body, flags)
            self._link(previous, f)
            if nullable:
                first |= f
            if i < low:
                last = l | last if n else l
                nullable = nullable and n
            else:
                last = last | l
                nullable = nullable and (n or i >= low)
            previous = l | previous if n else l
        if low == 0:
            nullable = True
        if unbounded:
            self._link(l, f)  # the last copy repeats
        return first, last, nullable

    # ---------------------------------------------------------------------- analysis
    def matching_time(self) -> MatchingTime:
        components = strongly_connected(range(len(self.labels)), lambda p: self.follow[p])
        component_of = {p: i for i, c in enumerate(components) for p in c}
        cyclic = [c for c in components if len(c) > 1 or c[0] in self.follow[c[0]]]
        for c in cyclic:
            example = self._two_loops(c)
            if example is not None:
                return MatchingTime("exponential", example)
        # Two loops in a row: p and q in different cycles, q's reachable from p's. (Within one
        # cycle, two paths that part and meet again are the exponential case, found above.)
        later = self._reachable(components, component_of)
        for c in cyclic:
            for d in cyclic:
                i, j = component_of[c[0]], component_of[d[0]]
                if i == j or j not in later[i]:
                    continue
                for p in c:
                    for q in d:
                        example = self._loop_to_loop(p, q, set(c), set(d))
                        if example is not None:
                            return MatchingTime("polynomial", example)
        return MatchingTime("linear")

    def _reachable(self, components: list[list[int]],
                   component_of: dict[int, int]) -> list[set[int]]:
        """Per component, the components a path from it can reach (itself included)."""
        later: list[set[int]] = [set() for _ in components]
        # Tarjan's algorithm lists a component after every component it reaches
        for i, component in enumerate(components):
            later[i].add(i)
            for p in component:
                for q in self.follow[p]:
                    j = component_of[q]
                    if j != i:
                        later[i] |= later[j]
        return later

    def _pick(self, label: int) -> str:
        """The character an example shows for a label: the nicest it reads."""
        return self.samples[(label & -label).bit_length() - 1]

    def _step(self) -> None:
        self.work += 1
        if self.work > _WORK_LIMIT:
            raise _TooComplex

    def _two_loops(self, component: list[int]) -> str | None:
        """A text that some state of ``component`` reads back to itself on two different
        paths (pairs of states reading the same characters)."""
        inside = set(component)
        graph: dict[tuple[int, int], list[tuple[tuple[int, int], str]]] = {}
        doubled: set[tuple[int, int]] = set()  # a step two ways: the paths part and meet again
        frontier = [(a, a) for a in component]  # only the pairs two paths from one state reach
        while frontier:
            a, b = node = frontier.pop()
            if node in graph:
                continue
            edges = []
            for a2 in self.follow[a].keys() & inside:
                for b2 in self.follow[b].keys() & inside:
                    self._step()
                    common = self.labels[a2] & self.labels[b2]
                    if common:
                        edges.append(((a2, b2), self._pick(common)))
                        if (a2, b2) not in graph:
                            frontier.append((a2, b2))
                        if a == b and a2 == b2 and self.follow[a][a2] > 1:
                            doubled.add((a, a2))
            graph[node] = edges
        nodes = list(graph)
        index = {n: i for i, n in enumerate(nodes)}
        pair_components = strongly_connected(range(len(nodes)),
                                             lambda i: [index[m] for m, _ in graph[nodes[i]]])
        for pc in pair_components:
            members = [nodes[i] for i in pc]
            diagonal = [m for m in members if m[0] == m[1]]
            apart = [m for m in members if m[0] != m[1]]
            within = set(members)
            for a, a2 in doubled:
                if (a, a) in within and (a2, a2) in within:
                    back = _path(graph, (a2, a2), (a, a), within)
                    return self._pick(self.labels[a]) + (back or "") + \
                        self._pick(self.labels[a2])
            if diagonal and apart:
                there = _path(graph, diagonal[0], apart[0], within)
                back = _path(graph, apart[0], diagonal[0], within)
                return self._pick(self.labels[diagonal[0][0]]) + (there or "") + (back or "")
        return None

    def _loop_to_loop(self, p: int, q: int, around_p: set[int], around_q: set[int]) -> str | None:
        """A text that leads from p to p, from p to q and from q to q (triples of states)."""
        start, goal = (p, p, q), (p, q, q)
        seen = {start: ""}
        frontier = [start]
        while frontier:
            nxt = []
            for a, b, c in frontier:
                text = seen[(a, b, c)]
                for a2 in self.follow[a].keys() & around_p:
                    for c2 in self.follow[c].keys() & around_q:
                        common_ac = self.labels[a2] & self.labels[c2]
                        if not common_ac:
                            continue
                        for b2 in self.follow[b]:
                            self._step()
                            common = common_ac & self.labels[b2]
                            node = (a2, b2, c2)
                            if common and node not in seen:
                                seen[node] = text + self._pick(common)
                                if node == goal:
                                    return seen[node]
                                nxt.append(node)
            frontier = nxt
        return None


def _path(graph: dict[tuple[int, int], list[tuple[tuple[int, int], str]]], start: tuple[int, int],
          goal: tuple[int, int], within: set[tuple[int, int]]) -> str | None:
    seen = {start: ""}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for m, char in graph[node]:
                if m in within and m not in seen:
                    seen[m] = seen[node] + char
                    if m == goal:
                        return seen[m]
                    nxt.append(m)
        frontier = nxt
    return seen.get(goal)


def _size(body: list[Any]) -> int:
    """How many positions one copy of ``body`` makes, roughly (for the expansion limit)."""
    total = 0
    for op, av in body:
        if op is sre.BRANCH:
            total += sum(_size(b) for b in av[1])
        elif op is sre.SUBPATTERN:
            total += _size(av[3])
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            high = av[1] if av[1] != sre.MAXREPEAT else 2
            total += _size(list(av[2])) * min(high, _EXPAND_LIMIT)
        else:
            total += 1
    return max(total, 1)


def _literal(code: int, fold: bool) -> Callable[[str], bool]:
    char = chr(code)
    if not fold:
        return lambda c: c == char
    folded = char.casefold()
    return lambda c: c.casefold() == folded or c.lower() == char.lower()


def _class(items: list[Any], fold: bool) -> Callable[[str], bool]:
    negate = bool(items) and items[0][0] is sre.NEGATE
    tests: list[Callable[[str], bool]] = []
    for op, av in items[1 if negate else 0:]:
        if op is sre.LITERAL:
            tests.append(_literal(av, fold))
        elif op is sre.RANGE:
            tests.append(_in_range(av[0], av[1], fold))
        elif op is sre.CATEGORY:
            regex = _CATEGORIES.get(av)
            # a category this analysis does not know is taken as any character
            tests.append(regex.match if regex is not None else bool)  # type: ignore[arg-type]
    if negate:
        return lambda c: not any(t(c) for t in tests)
    return lambda c: any(t(c) for t in tests)


def _in_range(low: int, high: int, fold: bool) -> Callable[[str], bool]:
    if not fold:
        return lambda c: low <= ord(c) <= high
    return lambda c: any(low <= ord(x) <= high for x in (c, c.lower(), c.upper()) if len(x) == 1)
