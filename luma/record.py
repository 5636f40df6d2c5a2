"""``Record``: the base of the small value classes the front end makes.

A record lists its fields in ``__match_args__`` (so ``case Span(file, start, end)`` works), sets
them in its own ``__init__`` and gets from here what ``@dataclass`` would have written: a repr
that names each field, equality with another record of the same class field by field, and a
hash of the fields. A record that changes after it is made sets ``__hash__ = None``, as a
``dataclass`` that is not frozen does.

Plain classes rather than ``@dataclass``: ``dataclasses`` imports ``inspect`` and compiles each
class's methods with ``exec`` when the class is created, on every start of ``luma check``.
"""

from __future__ import annotations


class Record:
    __slots__ = ()
    __match_args__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            assert isinstance(other, Record)
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())
