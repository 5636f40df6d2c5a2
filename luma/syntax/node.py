"""``@node``: what ``@dataclass(frozen=True, slots=True)`` makes of a class, without its cost.

``dataclass`` writes each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` as source text and compiles it with ``exec`` when the class
is created, on every start of the program: for the forty-odd AST classes that was the largest
single cost of starting ``luma check``. The methods written out for each class's fields
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``) are generated once, ahead of time, into
``luma/syntax/node_methods.py`` (``python -m luma.syntax.nodegen``), which Python compiles to
bytecode once like any module; the rest (refusing ``__setattr__`` and ``__delattr__``, pickling)
are closures made here. This decorator puts them on the class.

One difference, on purpose: setting an attribute that is not a field raises
``FrozenInstanceError`` as on any frozen dataclass, where Python 3.11's slotted one raises a
``TypeError`` from ``super()`` (its ``__setattr__`` refers to the class before slots).

The result is a dataclass in every way the ``dataclasses`` module looks at one:
``is_dataclass``, ``fields``, ``replace``, ``asdict`` and ``astuple`` work, with the same fields,
defaults and types as ``dataclass(frozen=True, slots=True)`` gives. The ``Field`` objects
(``__dataclass_fields__``) are made by ``dataclasses`` itself, on the first question. Tests
compare every class with the one ``dataclass`` makes of the same declaration
(``tests/test_speed_ast.py``).

A class whose declaration no longer matches the generated methods (a field added, renamed or
retyped without regenerating) is made by ``dataclass`` itself, so it stays correct, only slower;
the tests fail until the methods are regenerated.

``dataclasses`` itself (with ``inspect``, which it imports) is loaded only when something asks
for the fields, makes a fallback class or raises ``FrozenInstanceError``: ``luma check`` does
not load it.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    import dataclasses
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:
    def dataclass_transform(**_: object) -> object:
        """What ``typing.dataclass_transform`` means is for type checkers only."""
        return lambda function: function

# Classes ``dataclass`` had to make because their generated methods were missing or stale.
FALLBACKS: list[str] = []


@dataclass_transform(frozen_default=True)
def node(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen, slotted dataclass with value equality and a readable repr."""
    from luma.syntax import node_methods

    name = cls.__name__
    annotations: dict[str, Any] = cls.__dict__.get("__annotations__", {})
    defaults = {k: cls.__dict__[k] for k in annotations if k in cls.__dict__}
    generated = node_methods.NODES.get(name)
    if generated is None or generated[0] != _signature(annotations, defaults) \
            or cls.__bases__ != (object,):
        import dataclasses

        FALLBACKS.append(name)
        made: type[T] = dataclasses.dataclass(frozen=True, slots=True)(cls)
        return made
    doc: str = generated[1]
    make_methods: Any = generated[2]

    namespace = dict(cls.__dict__)
    for key in ("__dict__", "__weakref__", *annotations):
        namespace.pop(key, None)
    namespace["__slots__"] = tuple(annotations)
    namespace["__match_args__"] = tuple(annotations)
    namespace["__dataclass_fields__"] = _Fields(defaults)
    namespace["__dataclass_params__"] = _PARAMS
    if not namespace.get("__doc__"):
        namespace["__doc__"] = doc
    metaclass: Any = type(cls)
    new: type[T] = metaclass(name, cls.__bases__, namespace)
    new.__qualname__ = cls.__qualname__
    methods: dict[str, Any] = {**make_methods(new), **_frozen_methods(new, tuple(annotations))}
    for method_name, method in methods.items():
        method.__qualname__ = f"{new.__qualname__}.{method_name}"
        setattr(new, method_name, method)
    return new


def _frozen_methods(cls: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """``__setattr__`` and ``__delattr__`` that refuse, and ``__getstate__`` and
    ``__setstate__`` for pickling and copying, as ``dataclass`` gives a frozen slotted class."""
    setters = [getattr(cls, n).__set__ for n in names]

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise frozen_error("assign to", name)
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise frozen_error("delete", name)
        super(cls, self).__delattr__(name)

    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, n) for n in names]

    def __setstate__(self: Any, state: list[Any]) -> None:
        for set_field, value in zip(setters, state):
            set_field(self, value)

    return {"__setattr__": __setattr__, "__delattr__": __delattr__,
            "__getstate__": __getstate__, "__setstate__": __setstate__}


def _signature(annotations: dict[str, Any], defaults: dict[str, Any]) -> tuple[Any, ...]:
    """What the generated methods depend on: field names, annotations and defaults."""
    return tuple((k, v, repr(_default(defaults[k])) if k in defaults else None)
                 for k, v in annotations.items())


def _default(value: Any) -> Any:
    """A default as written: ``field(default=x)`` is ``x`` (a ``Field`` exists only once
    ``dataclasses`` is loaded)."""
    module = sys.modules.get("dataclasses")
    return value.default if module is not None and isinstance(value, module.Field) else value


class _Fields:
    """``__dataclass_fields__``, made on first access by ``dataclasses`` from the declaration
    (a class with the same annotations and defaults, processed with nothing generated)."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = defaults

    def __get__(self, instance: Any, owner: type) -> dict[str, dataclasses.Field[Any]]:
        import dataclasses

        shadow = type(owner.__name__, (), {
            "__module__": owner.__module__, "__qualname__": owner.__qualname__,
            "__doc__": owner.__doc__, "__annotations__": dict(owner.__annotations__),
            **self.defaults})
        dataclasses.dataclass(init=False, repr=False, eq=False, match_args=False)(shadow)
        fields: dict[str, dataclasses.Field[Any]] = shadow.__dataclass_fields__  # type: ignore[attr-defined]
        type.__setattr__(owner, "__dataclass_fields__", fields)
        return fields


class _Params:
    """``__dataclass_params__``: those of ``dataclass(frozen=True, slots=True)``, read from a
    class it makes, on first access."""

    def __get__(self, instance: Any, owner: type) -> Any:
        global _PROBE
        if _PROBE is None:
            import dataclasses

            @dataclasses.dataclass(frozen=True, slots=True)
            class Probe:
                """A class for its dataclass parameters."""

            _PROBE = Probe
        return _PROBE.__dataclass_params__  # type: ignore[attr-defined]


_PROBE: type | None = None
_PARAMS = _Params()


def frozen_error(action: str, name: str) -> AttributeError:
    import dataclasses

    return dataclasses.FrozenInstanceError(f"cannot {action} field {name!r}")
