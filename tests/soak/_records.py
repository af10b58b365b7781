"""The soak's records: every one is a pure function of (seed, producer, sequence number).

A record carries its identity in its first header, ``soak.id`` = ``b"<producer>:<seq>"``; the
reader regenerates the record from the seed and that identity and compares partition, key,
value and every header byte for byte. Nothing about the data has to be remembered by the
producers, so a record read back after any number of broker kills can be checked on its own.

The mix is meant to reach the broker's different paths: keys absent, empty or long; values
absent (tombstones), empty, small, a few KiB, and one in 200 of 64-192 KiB (batches that span more
than one socket read and, with a small ``segment.bytes``, roll segments); values that compress
well (repeated text) and values that do not (random bytes); zero to four extra headers,
repeated names, empty and absent header values. Imported by the producer and consumer
scripts (run as files, so this module has no package-relative imports) and by the tests.
"""

from __future__ import annotations

import random
from typing import NamedTuple

# Each producer process uses one codec (compression.type is a producer-wide setting).
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ID_HEADER = "soak.id"

_WORDS = (b"kafka", b"log", b"segment", b"offset", b"batch", b"pylog", b"soak", b"broker",
          b"replica", b"index", b"\x00\x01\x02", b"\xff" * 7)


class Record(NamedTuple):
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _blob(rng: random.Random, size: int) -> bytes:
    if rng.random() < 0.5:  # compressible: repeated words
        out = bytearray()
        while len(out) < size:
            out += rng.choice(_WORDS)
        return bytes(out[:size])
    return rng.randbytes(size)


def _size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.80:
        return rng.randrange(1, 300)
    if r < 0.995:
        return rng.randrange(300, 8192)
    return rng.randrange(64 * 1024, 192 * 1024)


def make_record(seed: int, producer: int, seq: int, partitions: int) -> Record:
    """The record number ``seq`` of producer ``producer`` in the run seeded ``seed``."""
    rng = random.Random(f"{seed}/{producer}/{seq}")
    partition = rng.randrange(partitions)
    r = rng.random()
    key: bytes | None
    if r < 0.15:
        key = None
    elif r < 0.20:
        key = b""
    else:
        key = _blob(rng, rng.randrange(1, 100))
    r = rng.random()
    value: bytes | None
    if r < 0.03:
        value = None
    elif r < 0.06:
        value = b""
    else:
        value = _blob(rng, _size(rng))
    headers: list[tuple[str, bytes | None]] = [(ID_HEADER, b"%d:%d" % (producer, seq))]
    for _ in range(rng.choice((0, 0, 1, 2, 4))):
        name = rng.choice(("h", "trace", "content-type", "x-\u00e9t\u00e9", ""))
        r = rng.random()
        hval: bytes | None = None if r < 0.1 else b"" if r < 0.2 else _blob(rng, rng.randrange(1, 60))
        headers.append((name, hval))
    if CODECS[producer % len(CODECS)] == "lz4":
        # The lz4 producer is kafka-python, which cannot send a header without a value, nor
        # a record without both key and value.
        headers = [(n, b"-" if v is None else v) for n, v in headers]
        if key is None and value is None:
            value = b""
    return Record(partition, key, value, headers)


def parse_id(headers: list[tuple[str, bytes | None]] | None) -> tuple[int, int] | None:
    """(producer, seq) from a record's first header, or None when it carries none."""
    if not headers or headers[0][0] != ID_HEADER or headers[0][1] is None:
        return None
    try:
        producer, seq = headers[0][1].split(b":")
        return int(producer), int(seq)
    except ValueError:
        return None


def check(seed: int, partitions: int, partition: int, key: bytes | None, value: bytes | None,
          headers: list[tuple[str, bytes | None]] | None) -> tuple[int, int] | str:
    """The record's (producer, seq) if it is byte for byte what the generator made,
    otherwise a sentence saying what differs."""
    ident = parse_id(headers)
    if ident is None:
        return f"no {ID_HEADER} header (headers {headers!r:.200})"
    want = make_record(seed, ident[0], ident[1], partitions)
    got = Record(partition, key, value, list(headers or []))
    if got != want:
        diffs = [f for f in Record._fields if getattr(got, f) != getattr(want, f)]
        return f"record {ident} differs in {', '.join(diffs)}"
    return ident
