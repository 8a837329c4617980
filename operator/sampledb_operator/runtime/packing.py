"""Packer: how a Store keeps its objects in memory, as compressed JSON decoded on each read.

A parsed Kubernetes object costs about six times its JSON size as Python dicts and strings (a
StatefulSet ~27 KiB, its JSON ~4.4 KiB), and the objects of one resource differ from one another in
a few names, uids and versions only. So each object is kept as its compact JSON, compressed with
Zstandard against a raw-content dictionary: the JSON of the first object the Packer packed (its last
WINDOW bytes). Every later object of the resource is mostly a match into it: a cached object takes ~100
bytes, measured (docs/benchmarks.md), and packing or unpacking one takes a few microseconds. The Packer
keeps one compression and one decompression context with that dictionary loaded, used again for every
object: zlib could only set its preset dictionary up again for each object (a new compressobj, its
window and hash tables, each time), which was most of what packing cost (docs/benchmarks.md, "Decisions").

Invariants:
- unpack(pack(obj)) == obj for any JSON-compatible object (dict/list/str/int/float/bool/None, str
  keys); key order is kept;
- the dictionary is fixed by the first pack() and never changes afterwards, so every packed value
  stays readable for the Packer's lifetime (a dictionary that fits later objects badly only
  compresses less);
- unpack returns a new object on each call: a reader may change it without touching the cache;
- a packed value is one byte (whether orjson wrote its JSON: jsoncodec.dumps_marked) and a magicless
  Zstandard frame of that JSON (its size in the frame; no checksum, no dictionary id: the value never
  leaves the process); it is read back by orjson alone when orjson wrote it;
- a Packer is used from one thread at a time (the event loop's: the caches are read and written there):
  its contexts are reused, and a Zstandard context is not safe for concurrent use.
"""

from __future__ import annotations

from typing import Any

import zstandard

from sampledb_operator.kube import jsoncodec

WINDOW_LOG = 15
WINDOW = 1 << WINDOW_LOG  # the part of the dictionary that matches can reach (32 KiB)
# Level 3 with small match tables (a context of ~50 KiB: one Packer per cached resource and namespace);
# the dictionary makes most of an object one long match, which larger tables barely lengthen.
LEVEL = 3
TABLE_LOG = 12
# A packed value's first byte: whether orjson wrote its JSON (jsoncodec.dumps_marked), so that it is read back
# without jsoncodec.loads' check for integers beyond 64 bits, which orjson would read as floats.
_MARKED, _UNMARKED = b"o", b"j"


class Packer:
    """Packs and unpacks the objects of one resource against one dictionary."""

    __slots__ = ("_compressor", "_decompressor")

    def __init__(self) -> None:
        self._compressor: zstandard.ZstdCompressor | None = None
        self._decompressor: zstandard.ZstdDecompressor | None = None

    def pack(self, obj: Any) -> bytes:
        raw, marked = jsoncodec.dumps_marked(obj)
        if self._compressor is None:
            self._start(raw[-WINDOW:])
        assert self._compressor is not None
        return (_MARKED if marked else _UNMARKED) + self._compressor.compress(raw)

    def unpack(self, data: bytes) -> Any:
        if self._decompressor is None:
            raise ValueError("nothing was packed with this Packer")
        raw = self._decompressor.decompress(memoryview(data)[1:])
        return jsoncodec.loads_marked(raw, data[0] == _MARKED[0])

    def _start(self, content: bytes) -> None:
        """Both contexts, with `content` as their dictionary (fixed from now on)."""
        dictionary = zstandard.ZstdCompressionDict(content, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        params = zstandard.ZstdCompressionParameters(
            compression_level=LEVEL, window_log=WINDOW_LOG, hash_log=TABLE_LOG, chain_log=TABLE_LOG,
            format=zstandard.FORMAT_ZSTD1_MAGICLESS, write_content_size=True, write_checksum=False,
            write_dict_id=False)
        self._compressor = zstandard.ZstdCompressor(dict_data=dictionary, compression_params=params)
        self._decompressor = zstandard.ZstdDecompressor(dict_data=dictionary, format=zstandard.FORMAT_ZSTD1_MAGICLESS)
