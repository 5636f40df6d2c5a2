"""The version of Luma (a module of its own: reading it loads nothing else)."""

__version__ = "0.1.0"
