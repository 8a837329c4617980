"""Kubernetes timestamps (RFC 3339, e.g. "2026-01-02T03:04:05Z"): the one parser.

Pure. `parse` accepts only timestamps with a zone ("Z" or an offset), as the API server writes them,
and answers None for anything else (absent, not a string, unreadable, no zone), so every caller
compares aware datetimes only.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse(value: object) -> datetime | None:
    """The aware datetime of an RFC 3339 timestamp, or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None



def format(value: datetime) -> str:
    """`value` (aware) as the API server writes a timestamp: UTC, whole seconds, "Z"."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
