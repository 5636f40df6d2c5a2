"""Checks for the ``@format`` names Luma supports: email, uri, date, date-time, uuid.

Small and dependency-free on purpose: they accept what a reasonable user means by each format
(RFC 3339 dates and times, absolute URIs, ``local@domain.tld`` addresses), not every corner of
the RFCs.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable

_EMAIL = re.compile(r"[^@\s\"(),:;<>\[\\\]]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s\x00-\x1f\x7f<>\"{}|\\^`]+")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_DATE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?"
                        r"([Zz]|[+-](\d{2}):(\d{2}))")
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def is_email(text: str) -> bool:
    return _EMAIL.fullmatch(text) is not None and len(text) <= 254


def is_uri(text: str) -> bool:
    """An absolute URI: a scheme, a colon, and no whitespace or characters URIs never hold."""
    return _URI.fullmatch(text) is not None


def is_date(text: str) -> bool:
    """An RFC 3339 full-date, ``2024-02-29``."""
    m = _DATE.fullmatch(text)
    if m is None:
        return False
    try:
        datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return False
    return True


def is_date_time(text: str) -> bool:
    """An RFC 3339 date-time with a time zone, ``2024-02-29T12:30:00Z`` or ``…+02:00``."""
    m = _DATE_TIME.fullmatch(text)
    if m is None or not is_date(m.group(1)):
        return False
    hour, minute, second = int(m.group(2)), int(m.group(3)), int(m.group(4))
    if hour > 23 or minute > 59 or second > 60:  # 60: a leap second
        return False
    if m.group(7) is not None and (int(m.group(7)) > 23 or int(m.group(8)) > 59):
        return False
    return True


def is_uuid(text: str) -> bool:
    """A UUID in its hyphenated hex form, any version."""
    return _UUID.fullmatch(text) is not None


FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    "email": is_email,
    "uri": is_uri,
    "date": is_date,
    "date-time": is_date_time,
    "uuid": is_uuid,
}
