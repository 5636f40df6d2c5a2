"""Constant values of declaration expressions (annotation arguments, config values): defined in
``luma.syntax.constants``, which the checker imports without loading this package."""

from luma.syntax.constants import constant_value

__all__ = ["constant_value"]
