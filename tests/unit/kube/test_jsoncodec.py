"""jsoncodec: the same values as the standard library's json, whichever library does the work."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sampledb_operator.kube import jsoncodec

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@given(VALUES)
def test_what_dumps_writes_loads_reads_back_equal_and_json_reads_the_same(value: Any) -> None:
    written = jsoncodec.dumps(value)
    assert isinstance(written, bytes)
    assert jsoncodec.loads(written) == value
    assert json.loads(written) == value
    assert jsoncodec.loads(json.dumps(value)) == value


@given(VALUES)
def test_what_dumps_marked_writes_loads_marked_reads_back_equal_with_its_mark(value: Any) -> None:
    written, marked = jsoncodec.dumps_marked(value)
    assert written == jsoncodec.dumps(value)
    back = jsoncodec.loads_marked(written, marked)
    assert back == value and json.loads(written) == value


def test_a_text_with_an_integer_beyond_64_bits_is_not_marked() -> None:
    for big in ({"n": 2**64}, {"n": -(2**63) - 1}, {1: "a"}):
        written, marked = jsoncodec.dumps_marked(big)
        assert not marked
        assert jsoncodec.loads_marked(written, marked) == json.loads(written)
    written, marked = jsoncodec.dumps_marked({"n": 2**64 - 1, "m": -(2**63)})  # what orjson writes and reads
    assert marked and type(jsoncodec.loads_marked(written, marked)["n"]) is int


def test_integers_beyond_64_bits_and_non_string_keys_go_through_the_standard_library() -> None:
    big = {"n": 2**80, "m": -(2**70)}
    assert jsoncodec.loads(json.dumps(big)) == big
    assert jsoncodec.loads(jsoncodec.dumps(big)) == big
    assert jsoncodec.loads(jsoncodec.dumps({1: "a"})) == {"1": "a"}


def test_a_non_finite_float_is_written_as_null_not_as_the_standard_librarys_invalid_json() -> None:
    assert jsoncodec.dumps([float("inf"), float("nan")]) == b"[null,null]"


def test_key_order_is_kept_and_the_output_is_compact_utf8() -> None:
    assert jsoncodec.dumps({"b": 1, "a": ["é", None]}) == '{"b":1,"a":["é",null]}'.encode()
    assert list(jsoncodec.loads(b'{"z": 1, "a": 2}')) == ["z", "a"]


@pytest.mark.parametrize("text", [b"", b"{", b"nope", b'{"a": }'])
def test_text_that_is_not_json_raises_value_error(text: bytes) -> None:
    with pytest.raises(ValueError):
        jsoncodec.loads(text)
