"""Classes that tool modules are handed, rebuilt so that nothing of Luma is reachable from them.

A function's ``__globals__`` is its module's namespace, and from there every module it imported
is one attribute away (``LumaToolError.__init__.__globals__["__builtins__"]["eval"]``). The
classes a tool module imports or receives — ``LumaToolError``, ``Signal`` and the error a
``Signal`` raises — are therefore rebuilt by :func:`sealed`: each function keeps its code, but
its globals are a namespace of only the names it uses, and its builtins are a few types (never
a builtin *function*, whose ``__self__`` is the ``builtins`` module).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import FunctionType
from typing import Any, TypeVar

T = TypeVar("T", bound=type)

#: The builtins a sealed method may use: types only.
SEALED_BUILTINS: Mapping[str, Any] = {
    "super": super, "dict": dict, "list": list, "tuple": tuple, "str": str, "bool": bool,
    "int": int, "float": float, "type": type, "Exception": Exception,
    "BaseException": BaseException,
}


def sealed(names: Mapping[str, Any] | None = None) -> Callable[[T], T]:
    """A class decorator: rebind the class's functions (and properties') globals to a namespace
    holding only ``names`` and :data:`SEALED_BUILTINS`."""

    def seal(cls: T) -> T:
        namespace: dict[str, Any] = {"__builtins__": dict(SEALED_BUILTINS),
                                     "__name__": cls.__module__}
        namespace.update(names or {})
        namespace[cls.__name__] = cls
        for attr, value in list(vars(cls).items()):
            if isinstance(value, FunctionType):
                setattr(cls, attr, _rebound(value, namespace))
            elif isinstance(value, property):
                fget, fset, fdel = (_rebound(f, namespace) if f else None
                                    for f in (value.fget, value.fset, value.fdel))
                setattr(cls, attr, property(fget, fset, fdel, value.__doc__))
        return cls

    return seal


def _rebound(function: Any, namespace: dict[str, Any]) -> FunctionType:
    new = FunctionType(function.__code__, namespace, function.__name__, function.__defaults__,
                       function.__closure__)
    new.__kwdefaults__ = function.__kwdefaults__
    new.__doc__ = function.__doc__
    new.__qualname__ = function.__qualname__
    new.__module__ = function.__module__
    new.__annotations__ = {}
    return new
