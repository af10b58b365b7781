"""An independent reader of Kafka's on-disk partition layout, for tests.

Written from the documented format (docs/formats.md; Kafka's OffsetIndex.java,
TimeIndex.java, CheckpointFile.java, DefaultRecordBatch.java), sharing no code with
logcore: it uses only struct, os and the third-party ``crc32c`` package. Tests compare
what logcore writes against what this reader sees, so a mistake shared by logcore's
writer and reader cannot hide.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass

import crc32c as _crc32c

_HDR = struct.Struct(">qiibIhiqqqhii")
_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")


@dataclass(frozen=True)
class BatchHeader:
    position: int
    size: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    magic: int
    crc_ok: bool
    attributes: int
    base_timestamp: int
    max_timestamp: int
    records_count: int


def segment_base_offsets(directory: str) -> list[int]:
    """Base offsets of the ``.log`` files, ascending (names are 20-digit offsets)."""
    return sorted(
        int(m.group(1)) for m in (_SEGMENT_RE.match(n) for n in os.listdir(directory)) if m
    )


def segment_path(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, f"{base_offset:020d}{suffix}")


def read_batches(path: str, *, stop_at_invalid: bool = True) -> tuple[list[BatchHeader], int]:
    """Walk a ``.log`` file batch by batch.

    Returns (batches, valid_end): every complete, CRC-valid v2 batch from the start, and
    the byte position where the valid prefix ends.
    """
    with open(path, "rb") as f:
        data = f.read()
    out: list[BatchHeader] = []
    pos = 0
    while pos + _HDR.size <= len(data):
        (base, length, epoch, magic, crc, attrs, lod, bts, mts, _pid, _pep, _bseq, n) = (
            _HDR.unpack_from(data, pos)
        )
        size = 12 + length
        if length < 49 or pos + size > len(data) or magic != 2:
            break
        ok = _crc32c.crc32c(data[pos + 21 : pos + size]) == crc
        if not ok and stop_at_invalid:
            break
        out.append(BatchHeader(pos, size, base, base + lod, epoch, magic, ok, attrs, bts, mts, n))
        pos += size
    return out, pos


def read_offset_index(path: str) -> list[tuple[int, int]]:
    """``.index``: (relative_offset int32, position int32) big-endian entries."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) % 8:
        raise ValueError(f"{path}: length {len(data)} is not a multiple of 8")
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def read_time_index(path: str) -> list[tuple[int, int]]:
    """``.timeindex``: (timestamp int64, relative_offset int32) big-endian entries."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) % 12:
        raise ValueError(f"{path}: length {len(data)} is not a multiple of 12")
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data), 12)]


def read_checkpoint(path: str) -> tuple[int, list[list[str]]]:
    """A checkpoint text file: (version, entries as whitespace-split fields)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    version = int(lines[0])
    count = int(lines[1])
    entries = [line.split() for line in lines[2:]]
    if len(entries) != count:
        raise ValueError(f"{path}: count {count} but {len(entries)} entries")
    return version, entries


def check_partition(directory: str) -> list[BatchHeader]:
    """Assert the invariants of a closed or recovered partition directory.

    Every batch passes its CRC; offsets increase across the whole log; each segment's
    first batch starts at or after its base offset; offset-index entries point at batch
    starts whose append ends at the indexed offset, increasing; time-index timestamps
    increase and each entry names the last offset of a batch holding its timestamp (what
    Kafka's DumpLogSegments checks). Returns all batches in order.
    """
    allb: list[BatchHeader] = []
    bases = segment_base_offsets(directory)
    for i, base in enumerate(bases):
        log = segment_path(directory, base, ".log")
        batches, end = read_batches(log)
        assert end == os.path.getsize(log), f"{log}: invalid bytes from {end}"
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        for b in batches:
            assert b.base_offset >= base, (log, b)
            assert nxt is None or b.last_offset < nxt, (log, b)
            if allb:
                assert b.base_offset > allb[-1].last_offset, (log, b, allb[-1])
            allb.append(b)
        starts = {b.position: b for b in batches}
        idx_path = segment_path(directory, base, ".index")
        if os.path.exists(idx_path):
            prev = -1
            for rel, pos in read_offset_index(idx_path):
                if rel == 0 and pos == 0 and prev >= 0:
                    break  # preallocated tail of an active index
                assert pos in starts, (idx_path, rel, pos)
                assert base + rel >= starts[pos].last_offset, (idx_path, rel, pos)
                assert rel > prev, (idx_path, rel, prev)
                prev = rel
        ti_path = segment_path(directory, base, ".timeindex")
        if os.path.exists(ti_path):
            last_ts = -1
            ends = {b.last_offset: b for b in batches}
            for ts, rel in read_time_index(ti_path):
                if ts == 0 and rel == 0:
                    break
                # Kafka's DumpLogSegments.dumpTimeIndex: timestamps strictly increase, and
                # each entry names the last offset of a batch whose largest timestamp is
                # the entry's (else "Indexed offset: X, found log offset: Y").
                assert ts > last_ts, (ti_path, ts, last_ts)
                last_ts = ts
                if batches:
                    assert base <= base + rel <= batches[-1].last_offset, (ti_path, rel)
                    holder = ends.get(base + rel)
                    assert holder is not None, (
                        f"{ti_path}: entry ({ts}, {base + rel}) names no batch's last offset")
                    assert holder.max_timestamp == ts, (ti_path, ts, holder)
    return allb


def write_kafka_partition(
    directory: str, batches: list[bytes], segment_bytes: int, index_interval_bytes: int = 4096
) -> list[BatchHeader]:
    """Lay out a partition directory as a Kafka broker leaves it after a clean shutdown.

    Assigns offsets (patching base_offset, which the CRC does not cover), rolls segments
    at ``segment_bytes``, writes trimmed ``.index`` / ``.timeindex`` files at Kafka's
    cadence (an entry once more than ``index_interval_bytes`` were appended since the
    last one), plus ``partition.metadata``, a producer ``.snapshot`` and
    ``leader-epoch-checkpoint``. Kafka's recovery-point and log-start checkpoints live in
    the parent log dir, so none are written here. Returns the batch headers.
    """
    os.makedirs(directory, exist_ok=True)
    segs: list[tuple[int, list[bytes]]] = []
    nxt = 0
    size = 0
    for raw in batches:
        b = bytearray(raw)
        lod = struct.unpack_from(">i", b, 23)[0]
        struct.pack_into(">q", b, 0, nxt)
        if not segs or size + len(b) > segment_bytes:
            segs.append((nxt, []))
            size = 0
        segs[-1][1].append(bytes(b))
        size += len(b)
        nxt += lod + 1
    for base, blist in segs:
        pos = since = 0
        oidx: list[tuple[int, int]] = []
        tidx: list[tuple[int, int]] = []
        max_ts, off_max = -1, base
        with open(segment_path(directory, base, ".log"), "wb") as f:
            for b in blist:
                bo, _len, _e, _m, _crc, _a, lod, _bts, mts, *_rest = _HDR.unpack_from(b, 0)
                if mts > max_ts:
                    max_ts, off_max = mts, bo + lod
                if since > index_interval_bytes:
                    oidx.append((bo + lod - base, pos))
                    if not tidx or max_ts > tidx[-1][0]:
                        tidx.append((max_ts, off_max - base))
                    since = 0
                since += len(b)
                f.write(b)
                pos += len(b)
        if max_ts >= 0 and (not tidx or max_ts > tidx[-1][0]):
            tidx.append((max_ts, off_max - base))  # the entry Kafka forces at roll/close
        with open(segment_path(directory, base, ".index"), "wb") as f:
            f.write(b"".join(struct.pack(">ii", *e) for e in oidx))
        with open(segment_path(directory, base, ".timeindex"), "wb") as f:
            f.write(b"".join(struct.pack(">qi", *e) for e in tidx))
    with open(os.path.join(directory, "partition.metadata"), "w") as f:
        f.write("version: 0\ntopic_id: 7u3vyAbnRDSqTZ_5kGqKcw\n")
    with open(segment_path(directory, nxt, ".snapshot"), "wb") as f:
        f.write(b"\0" * 10)
    with open(os.path.join(directory, "leader-epoch-checkpoint"), "w") as f:
        f.write("0\n1\n0 0\n")
    return check_partition(directory)
