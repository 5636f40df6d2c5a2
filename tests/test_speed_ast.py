"""``@node`` against ``@dataclass(frozen=True, slots=True)``: every AST class is the dataclass
that decorator makes of the same declaration — fields, signature, repr, equality, hashing,
immutability, pickling, ``replace`` — and its generated methods are up to date."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest

from luma.syntax import ast, node, nodegen

REFERENCE = nodegen.reference_module()
CLASSES = nodegen.node_classes(REFERENCE)
NAMES = [c.__name__ for c in CLASSES]


def test_generated_methods_are_up_to_date() -> None:
    assert nodegen.generate() == nodegen.METHODS_PATH.read_text(encoding="utf-8"), \
        "luma/syntax/node_methods.py is out of date: run python -m luma.syntax.nodegen"


def test_no_class_fell_back_to_dataclass() -> None:
    assert node.FALLBACKS == []


def test_every_node_class_is_generated() -> None:
    assert len(CLASSES) >= 40
    for name in NAMES:
        cls = getattr(ast, name)
        assert "__init__" in cls.__dict__ and cls.__init__.__module__ == "luma.syntax.node_methods"


def samples(cls: type, salt: int) -> list[Any]:
    """Field values of several kinds, different for each ``salt``."""
    values: list[Any] = []
    for i, f in enumerate(dataclasses.fields(cls)):
        kind = (i + salt) % 4
        values.append([f"v{salt}", salt * 10 + i, (f"t{salt}", i), None][kind])
    return values


def pair(name: str, salt: int = 1) -> tuple[Any, Any]:
    mine, theirs = getattr(ast, name), getattr(REFERENCE, name)
    args = samples(theirs, salt)
    return mine(*args), theirs(*args)


@pytest.mark.parametrize("name", NAMES)
def test_class_matches_the_dataclass(name: str) -> None:
    mine, theirs = getattr(ast, name), getattr(REFERENCE, name)
    assert dataclasses.is_dataclass(mine)
    assert mine.__slots__ == theirs.__slots__
    assert mine.__match_args__ == theirs.__match_args__
    assert mine.__doc__ == theirs.__doc__
    assert mine.__qualname__ == theirs.__qualname__
    assert str(inspect.signature(mine)) == str(inspect.signature(theirs))
    assert mine.__init__.__annotations__ == theirs.__init__.__annotations__
    assert repr(mine.__dataclass_params__) == repr(theirs.__dataclass_params__)
    attributes = ("name", "type", "default", "default_factory", "init", "repr", "hash",
                  "compare", "metadata", "kw_only", "_field_type")
    assert [tuple(getattr(f, a) for a in attributes) for f in dataclasses.fields(mine)] == \
        [tuple(getattr(f, a) for a in attributes) for f in dataclasses.fields(theirs)]
    assert not hasattr(mine(*samples(theirs, 0)), "__dict__")
    assert {m for m in vars(mine) if not m.startswith("__")} == \
        {m for m in vars(theirs) if not m.startswith("__")}, "methods and properties kept"


@pytest.mark.parametrize("name", NAMES)
def test_instances_behave_as_the_dataclass_instances(name: str) -> None:
    a, ref = pair(name, 1)
    b, _ = pair(name, 1)
    c, _ = pair(name, 2)
    assert repr(a) == repr(ref)
    assert a == b and hash(a) == hash(b) and not (a != b)
    assert a != c and (a == ref) is False  # another class, even with the same fields
    assert dataclasses.astuple(a) == dataclasses.astuple(ref)
    assert dataclasses.asdict(a) == dataclasses.asdict(ref)
    assert pickle.loads(pickle.dumps(a)) == a
    assert copy.copy(a) == a and copy.deepcopy(a) == a
    first = dataclasses.fields(a)[0].name
    changed = dataclasses.replace(a, **{first: "changed"})
    assert getattr(changed, first) == "changed" and type(changed) is type(a)
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field '{first}'"):
        setattr(a, first, "x")
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field '{first}'"):
        delattr(a, first)
    with pytest.raises(AttributeError):
        a.not_a_field = 1  # type: ignore[attr-defined]
    assert a.__match_args__ == tuple(f.name for f in dataclasses.fields(a))


def test_defaults_and_keywords_work() -> None:
    span = ast.Span("f", 0, 1)
    program = ast.Program(items=(), span=span)
    assert program.declarations == () and program.statements == ()
    ask = ast.Ask(prompt=ast.Name("p", span), type=ast.NamedType("T", span), using_tool=None,
                  span=span)
    assert ask.using_span is None
    with pytest.raises(TypeError):
        ast.Name("x")  # type: ignore[call-arg]
    match ask:
        case ast.Ask(ast.Name(id), ast.NamedType(type_name)):
            assert (id, type_name) == ("p", "T")
        case _:
            pytest.fail("match arguments")


def test_a_stale_declaration_is_made_by_dataclass(monkeypatch: pytest.MonkeyPatch) -> None:
    fallbacks: list[str] = []
    monkeypatch.setattr(node, "FALLBACKS", fallbacks)

    @node.node
    class Name:  # same name as a generated class, one more field
        id: str
        span: ast.Span
        extra: int = 0

    assert fallbacks == ["Name"]
    assert dataclasses.is_dataclass(Name)
    assert repr(Name("x", ast.Span("f", 0, 1))) == \
        "test_a_stale_declaration_is_made_by_dataclass.<locals>.Name(id='x', " \
        "span=Span(file='f', start=0, end=1), extra=0)"
