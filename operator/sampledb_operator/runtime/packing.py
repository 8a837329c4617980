"""Packer: how a Store keeps its objects in memory, as compressed JSON decoded on each read.

A parsed Kubernetes object costs about six times its JSON size as Python dicts and strings (a
StatefulSet ~27 KiB, its JSON ~4.4 KiB), and the objects of one resource differ from one another in
a few names, uids and versions only. So each object is kept as its compact JSON, raw-deflated with a
preset dictionary: the JSON of the first object the Packer packed (zlib's zdict, at most the 32 KiB
window). Every later object of the resource is mostly a back-reference into it: a cached StatefulSet
takes ~170 bytes, measured (docs/benchmarks.md), and packing or unpacking one takes tens of
microseconds.

Invariants:
- unpack(pack(obj)) == obj for any JSON-compatible object (dict/list/str/int/float/bool/None, str
  keys); key order is kept;
- the dictionary is fixed by the first pack() and never changes afterwards, so every packed value
  stays readable for the Packer's lifetime (a dictionary that fits later objects badly only
  compresses less);
- unpack returns a new object on each call: a reader may change it without touching the cache;
- a packed value is one byte (whether orjson wrote its JSON: jsoncodec.dumps_marked) and the raw deflate of
  that JSON; it is read back by orjson alone when orjson wrote it.
"""

from __future__ import annotations

import zlib
from typing import Any

from sampledb_operator.kube import jsoncodec

WINDOW = 32 * 1024  # deflate's window: the part of a dictionary that back-references can reach
# Level 3 with a quarter of the default hash memory: the preset dictionary makes most of an object one long
# match, which the lazier search of level 6 barely shortens; ~24 % less CPU a pack for ~1 % more bytes cached
# (bench_cache_sync --mode cpu, bench_cache_memory: docs/benchmarks.md, session v).
LEVEL = 3
MEM_LEVEL = 4
_RAW = -15  # raw deflate: no header or checksum per value (the value is never read from outside)
# A packed value's first byte: whether orjson wrote its JSON (jsoncodec.dumps_marked), so that it is read back
# without jsoncodec.loads' check for integers beyond 64 bits, which orjson would read as floats.
_MARKED, _UNMARKED = b"o", b"j"


class Packer:
    """Packs and unpacks the objects of one resource against one preset dictionary."""

    __slots__ = ("_zdict",)

    def __init__(self) -> None:
        self._zdict: bytes | None = None

    def pack(self, obj: Any) -> bytes:
        raw, marked = jsoncodec.dumps_marked(obj)
        if self._zdict is None:
            self._zdict = raw[-WINDOW:]
        packer = zlib.compressobj(LEVEL, zlib.DEFLATED, _RAW, MEM_LEVEL, zdict=self._zdict)
        return (_MARKED if marked else _UNMARKED) + packer.compress(raw) + packer.flush()

    def unpack(self, data: bytes) -> Any:
        if self._zdict is None:
            raise ValueError("nothing was packed with this Packer")
        unpacker = zlib.decompressobj(_RAW, zdict=self._zdict)
        raw = unpacker.decompress(memoryview(data)[1:])
        rest = unpacker.flush()
        return jsoncodec.loads_marked(raw + rest if rest else raw, data[0] == _MARKED[0])
