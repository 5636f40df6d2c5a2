"""Luma: a compiler and runtime for typed tool contracts and LLM agents."""

from luma.runtime.signal import Signal

__version__ = "0.1.0"

__all__ = ["Signal", "__version__"]
