"""JSON in and out: orjson, with the standard library wherever orjson refuses a value.

JSON is, after TLS, most of what the operator's CPU does: every watch event, answer and request body,
and every object the caches pack (runtime/packing.py). orjson parses ~2.6x and writes ~6.7x faster
than the standard library's json (measured on the operator's cached objects: 16.4 -> 6.3 us to parse
a watch event, 26.7 -> 4.0 us to write an object; docs/benchmarks.md).

Invariants:
- loads accepts every text json.loads accepts and gives the same value: a text orjson refuses, or one
  with a run of 19 or more digits (orjson reads an integer beyond 64 bits as a float: 18 digits always
  fit), is parsed by json.loads; a text neither accepts raises ValueError (json.JSONDecodeError and
  orjson.JSONDecodeError both are);
- dumps gives compact UTF-8 JSON bytes that loads turns back into an equal value, keys in their order;
  a value orjson cannot write (an integer beyond 64 bits, a non-str key) goes through json.dumps. The
  one difference from json.dumps: a non-finite float (not JSON; never in a value read from JSON) is
  written as null.
- dumps_marked is dumps that also says whether orjson wrote the text; such a text has no integer beyond
  64 bits (orjson refuses to write one), so loads_marked, orjson alone, reads it back as an equal value
  without loads' check for long digit runs (a text dumps_marked did not mark goes through loads).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_DIGITS_AS_ZERO = bytes(48 if 48 <= c <= 57 else 120 for c in range(256))  # b"0" for a digit, b"x" else
_LONG_RUN = b"0" * 19


def _has_long_digit_run(data: bytes) -> bool:
    """Whether `data` holds 19 or more digits in a row (a C-speed translate and search: a regular
    expression took 4x as long as parsing the text)."""
    return _LONG_RUN in data.translate(_DIGITS_AS_ZERO)


def loads(data: bytes | str) -> Any:
    raw = data.encode() if isinstance(data, str) else data
    if not _has_long_digit_run(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def dumps(value: Any) -> bytes:
    return dumps_marked(value)[0]


def dumps_marked(value: Any) -> tuple[bytes, bool]:
    """dumps(value), and whether orjson wrote it (then loads_marked reads it back)."""
    try:
        return orjson.dumps(value), True
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(), False


def loads_marked(data: bytes, marked: bool) -> Any:
    """The value of a text dumps_marked wrote, given its mark: orjson reads what orjson wrote as it was (the
    check loads makes, a translate of the whole text, costs about half of orjson's parse of a cached object)."""
    return orjson.loads(data) if marked else loads(data)
