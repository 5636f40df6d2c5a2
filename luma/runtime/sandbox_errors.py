"""What the import guard (``sandbox``) and the effect rules (``sandbox_effects``) both refuse
with: the base of their errors, and how messages name the strict sandbox."""

from __future__ import annotations

STRICT = "sandbox 'strict'"


class SandboxViolation(Exception):
    """Something a module's rules refuse while its code runs (an import, a builtin, a hidden
    ``os`` name). Raised as the ordinary error of that situation, so the module can catch it as
    it would catch ``ImportError``, ``NameError`` or ``AttributeError``."""
