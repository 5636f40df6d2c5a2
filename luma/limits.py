"""The limits Luma puts on programs and values, in one place for the checker and the runtime.

Each is documented in ``docs/language.md`` (section "Limits"); a program that passes a limit gets
a located diagnostic from ``luma check``, and a value that passes one at run time a
``TYPE_INVALID`` or ``LIMIT`` error, never a crash or a hang.
"""

from __future__ import annotations

MAX_NESTING = 100
"""How deep expressions, statements and types may nest: each bracket, operator, call, member
access, block and type constructor is one level (a chain ``a + b + c`` nests one level per
operator)."""

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer magnitude Luma holds: every JSON peer (JavaScript, most JSON parsers)
reads integers up to it exactly. Integer literals and ``@range`` bounds of ``int`` stay within
``-MAX_SAFE_INTEGER .. MAX_SAFE_INTEGER``."""

MAX_LENGTH = 1_000_000
"""The largest bound ``@length`` takes: a string of a million characters or a list of a
million items."""

MAX_RETRIES = 100
"""The most retries a tool may declare."""

MAX_RETRY_DELAY_MS = 3_600_000
"""The longest ``retry_delay`` (one hour); a backed-off delay is capped at this too."""

MAX_TIMEOUT_MS = 86_400_000
"""The longest tool ``timeout`` (one day)."""

MAX_RANGE_ITEMS = 1_000_000
"""The most numbers ``range()`` gives at run time."""

MAX_SYNTHESIZED_ITEMS = 1_000
"""The longest string or list the offline test model builds for a value; a schema whose
``@length`` minimum is larger cannot be synthesized (a ``LIMIT`` error names the field)."""
