"""Luma: a compiler and runtime for typed tool contracts and LLM agents."""

__version__ = "0.1.0"
