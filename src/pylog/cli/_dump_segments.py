"""``dump-log`` for segments: ``.log`` batches and records, ``.index`` and ``.timeindex``.

Output and checks follow Kafka's ``kafka.tools.DumpLogSegments`` (``dumpLog``,
``dumpIndex``, ``dumpTimeIndex``); byte layouts are in docs/formats.md. A batch header,
big-endian (Kafka's ``DefaultRecordBatch``)::

    0 base_offset int64 | 8 batch_length int32 | 12 partition_leader_epoch int32 |
    16 magic int8 | 17 crc uint32 (CRC-32C of bytes 21..end) | 21 attributes int16 |
    23 last_offset_delta int32 | 27 base_timestamp int64 | 35 max_timestamp int64 |
    43 producer_id int64 | 51 producer_epoch int16 | 53 base_sequence int32 |
    57 records_count int32 | 61 records

Memory stays bounded whatever the segment size: the file is read with ``pread`` one
batch header at a time; a batch's CRC is computed over 1 MiB chunks; only a batch whose
records are printed (``--deep-iteration``) or whose record timestamps a time-index check
needs is read whole, and then only if its CRC is valid or it is at most
``--max-message-size`` bytes. Records are decoded by ``logcore.RecordBatch``.

A walk stops at the first bytes that cannot be a batch (Kafka's ``FileLogInputStream``
checks: fewer than 17 bytes, a length below the minimum, a batch running past the end, a
magic that is not a record batch) and reports them with their position.
"""

from __future__ import annotations

import base64
import bisect
import json
import os
import struct
from collections.abc import Iterator
from typing import Any, NamedTuple

import logcore
from pylog.cli._dump_offsets import decode_offsets_record
from pylog.cli._dump_output import DumpOptions, DumpReport

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header above
LOG_OVERHEAD = 12  # base_offset + batch_length
HEADER_SIZE_UP_TO_MAGIC = 17  # Kafka reads no batch from fewer bytes
MIN_BATCH_LENGTH = 49  # batch_length of a v2 batch without records
LEGACY_MIN_LENGTH = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: below it, corrupt
CRC_START = 21
READ_CHUNK = 1 << 20  # batches up to this size are read in one pread
INT32_MAX = 2**31 - 1

ATTR_CODEC, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL = 0x07, 0x08, 0x10
ATTR_CONTROL, ATTR_DELETE_HORIZON = 0x20, 0x40
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Kafka's ControlRecordType ids.
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}

_I16, _CONTROL_KEY, _END_TXN = struct.Struct(">h"), struct.Struct(">hh"), struct.Struct(">hi")

# Text escapes for keys and values: control characters, backslash, and the bytes that are
# not UTF-8 (decoded with surrogateescape to U+DC80..U+DCFF) become \n, \\, \xNN.
_ESCAPES: dict[int, str] = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}
_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", ord("\\"): "\\\\"})
_ESCAPES.update({0xDC00 + b: f"\\x{b:02x}" for b in range(0x80, 0x100)})


def printable(data: bytes) -> str:
    """Bytes as UTF-8 text with escapes, safe on one line and unambiguous."""
    return data.decode("utf-8", "surrogateescape").translate(_ESCAPES)


def segment_base(name: str) -> int | None:
    """The base offset a segment file's name carries (``00000000000000000042.log``)."""
    prefix = name.split(".", 1)[0]
    return int(prefix) if prefix.isdigit() else None


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: sequences wrap after int32 max."""
    if sequence < 0:
        return -1
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class Header(NamedTuple):
    """A batch header and where it sits in its file."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & ATTR_LOG_APPEND_TIME else "CreateTime"

    @property
    def codec(self) -> str:
        c = self.attributes & ATTR_CODEC
        return CODECS[c] if c < len(CODECS) else f"unknown({c})"

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


class SegmentFile:
    """A ``.log`` file read with ``pread`` (no mapping, nothing held but one header)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = os.path.basename(path)
        self.fd = os.open(path, os.O_RDONLY)
        try:
            self.size = os.fstat(self.fd).st_size
        except OSError:
            os.close(self.fd)
            raise
        # Why and where the last walk stopped (None: it reached its limit cleanly).
        self.stop_position = 0
        self.stop_reason: str | None = None
        self.torn = False  # the walk stopped at a batch running past its limit

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> SegmentFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, position: int, n: int) -> bytes:
        return os.pread(self.fd, n, position)

    def header_at(self, position: int, limit: int) -> Header | str:
        """The batch header at ``position`` if a batch of at most ``limit - position``
        bytes starts there, else why not (and ``self.torn`` says whether it is cut off)."""
        self.torn = False
        remaining = limit - position
        if remaining < HEADER_SIZE_UP_TO_MAGIC:
            if remaining <= 0:
                return f"position {position} is at or past the end ({limit})"
            self.torn = True
            return f"{remaining} bytes are too few for a batch header"
        raw = self.read(position, min(HEADER.size, remaining))
        if len(raw) < HEADER_SIZE_UP_TO_MAGIC:
            self.torn = True
            return f"the file ended at {position + len(raw)} while reading"
        base_offset, batch_length = struct.unpack_from(">qi", raw, 0)
        magic = raw[16]
        if batch_length < LEGACY_MIN_LENGTH:
            return f"batch_length {batch_length} is below the minimum {MIN_BATCH_LENGTH}"
        if LOG_OVERHEAD + batch_length > remaining:
            self.torn = True
            return (f"a batch of {LOG_OVERHEAD + batch_length} bytes starts there, "
                    f"only {remaining} bytes are left")
        if magic not in (0, 1, 2):
            return f"magic {magic} is not a record batch magic (2)"
        if magic != 2:
            # Kafka's message formats v0/v1 share the offset and length fields: the walk
            # can step over them, but their contents are not read here.
            return Header(position, base_offset, batch_length, -1, magic, 0, 0, 0, -1, -1,
                          -1, -1, -1, -1)
        if batch_length < MIN_BATCH_LENGTH:
            return f"batch_length {batch_length} is below the minimum {MIN_BATCH_LENGTH}"
        if len(raw) < HEADER.size:
            self.torn = True
            return f"the file ended at {position + len(raw)} while reading"
        return Header(position, *HEADER.unpack_from(raw, 0))

    def walk(self, start: int, limit: int) -> Iterator[Header]:
        """Yield the batch headers from ``start`` up to ``limit``; then ``stop_position``
        and ``stop_reason`` say where and why the walk ended."""
        pos = start
        self.stop_reason = None
        while pos < limit:
            h = self.header_at(pos, limit)
            if isinstance(h, str):
                self.stop_reason = h
                break
            yield h
            pos += h.size
        self.stop_position = pos

    def batch_crc(self, h: Header, data: bytes | None) -> int:
        """CRC-32C of bytes 21..end of the batch (streamed when ``data`` is None)."""
        if data is not None:
            return logcore.crc32c(memoryview(data)[CRC_START:])
        crc, pos, end = 0, h.position + CRC_START, h.position + h.size
        while pos < end:
            chunk = self.read(pos, min(READ_CHUNK, end - pos))
            if not chunk:
                raise OSError(f"{self.path} shrank to {pos} bytes while being read")
            crc = logcore.crc32c(chunk, crc)
            pos += len(chunk)
        return crc

    def batch_bytes(self, h: Header) -> bytes:
        data = self.read(h.position, h.size)
        if len(data) != h.size:
            raise OSError(f"{self.path} shrank to {h.position + len(data)} bytes while being read")
        return data


# ---------------------------------------------------------------------------------- .log


def _batch_line(path: str, h: Header, valid: bool) -> tuple[str, dict[str, Any]]:
    last_seq = increment_sequence(h.base_sequence, h.last_offset_delta)
    horizon = h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None
    horizon_text = "OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"
    tx, ctl = bool(h.attributes & ATTR_TRANSACTIONAL), h.is_control
    text = (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {last_seq} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(tx).lower()} isControl: {str(ctl).lower()} "
            f"deleteHorizonMs: {horizon_text} position: {h.position} {h.timestamp_type}: "
            f"{h.max_timestamp} size: {h.size} magic: {h.magic} compresscodec: {h.codec} "
            f"crc: {h.crc} isvalid: {str(valid).lower()}")
    obj = {"type": "batch", "file": path, "baseOffset": h.base_offset, "lastOffset": h.last_offset,
           "count": h.records_count, "baseSequence": h.base_sequence, "lastSequence": last_seq,
           "producerId": h.producer_id, "producerEpoch": h.producer_epoch,
           "partitionLeaderEpoch": h.partition_leader_epoch, "isTransactional": tx,
           "isControl": ctl, "deleteHorizonMs": horizon, "position": h.position,
           "timestampType": h.timestamp_type, "maxTimestamp": h.max_timestamp,
           "size": h.size, "magic": h.magic, "compresscodec": h.codec, "crc": h.crc,
           "isvalid": valid}
    return text, obj


class _LogDump:
    """State of one ``.log`` dump (the offset of the last record, for gap notices)."""

    def __init__(self, report: DumpReport, seg: SegmentFile, opts: DumpOptions,
                 offsets_decoder: bool) -> None:
        self.report = report
        self.seg = seg
        self.path = seg.path
        self.opts = opts
        self.offsets_decoder = offsets_decoder
        self.last_record_offset = -1

    def run(self, base: int | None) -> None:
        seg, report, opts = self.seg, self.report, self.opts
        limit = seg.size if opts.max_bytes is None else min(seg.size, opts.max_bytes)
        prev_last: int | None = None
        for h in seg.walk(0, limit):
            if h.magic != 2:
                report.emit(f"offset: {h.base_offset} position: {h.position} size: {h.size} "
                            f"magic: {h.magic}",
                            {"type": "legacy_batch", "file": self.path, "offset": h.base_offset,
                             "position": h.position, "size": h.size, "magic": h.magic})
                report.problem(self.path, "unsupported_magic",
                               f"Batch at position {h.position} of {seg.name} uses message format "
                               f"v{h.magic} (magic {h.magic}), which pylog does not read; "
                               "convert the topic with Kafka's tools or re-produce it",
                               position=h.position, magic=h.magic)
                continue
            data = seg.batch_bytes(h) if h.size <= READ_CHUNK else None
            crc = seg.batch_crc(h, data)
            valid = crc == h.crc
            report.emit(*_batch_line(self.path, h, valid))
            if not valid:
                report.problem(self.path, "crc_mismatch",
                               f"CRC mismatch in the batch at position {h.position} of {seg.name}: "
                               f"stored {h.crc}, computed {crc}",
                               position=h.position, storedCrc=h.crc, computedCrc=crc)
            self._check_offsets(h, base, prev_last)
            prev_last = h.last_offset if prev_last is None else max(prev_last, h.last_offset)
            if opts.deep:
                self._records(h, data, valid)
        if seg.stop_reason is not None and not (seg.torn and limit < seg.size):
            # Kafka says nothing about a batch that --max-bytes cut; anything else left
            # after the last batch is invalid.
            pos = seg.stop_position
            report.problem(self.path, "invalid_bytes",
                           f"Found {limit - pos} invalid bytes at the end of {seg.name} "
                           f"(position {pos}): {seg.stop_reason}",
                           position=pos, bytes=limit - pos, reason=seg.stop_reason)

    def _check_offsets(self, h: Header, base: int | None, prev_last: int | None) -> None:
        name, pos = self.seg.name, h.position
        if h.last_offset_delta < 0 or h.records_count < 0:
            self.report.problem(self.path, "invalid_batch_header",
                                f"Batch at position {pos} of {name} has lastOffsetDelta "
                                f"{h.last_offset_delta} and count {h.records_count} (negative)",
                                position=pos)
        if base is not None and h.base_offset < base:
            self.report.problem(self.path, "offset_below_segment_base",
                                f"Batch at position {pos} of {name} has base offset "
                                f"{h.base_offset}, below the segment's base offset {base}",
                                position=pos, offset=h.base_offset)
        if prev_last is not None and h.base_offset <= prev_last:
            self.report.problem(self.path, "offsets_not_increasing",
                                f"Batch at position {pos} of {name} has base offset "
                                f"{h.base_offset}, not after the previous batch's last offset "
                                f"{prev_last}", position=pos, offset=h.base_offset)

    def _records(self, h: Header, data: bytes | None, valid: bool) -> None:
        report, seg = self.report, self.seg
        if data is None:
            if not valid and h.size > self.opts.max_message_size:
                report.notice(self.path, "records_not_read",
                              f"| records not read: the batch at position {h.position} has an "
                              f"invalid CRC and is larger than --max-message-size "
                              f"({self.opts.max_message_size})", stream="out", position=h.position)
                return
            data = seg.batch_bytes(h)
        try:
            for record in logcore.RecordBatch(data):
                self._record(h, record)
        except logcore.CorruptRecordError as exc:
            report.problem(self.path, "corrupt_records",
                           f"Cannot read the records of the batch at position {h.position} of "
                           f"{seg.name}: {exc}", position=h.position)

    def _record(self, h: Header, r: Any) -> None:
        report, opts = self.report, self.opts
        off = r.offset
        if self.last_record_offset != -1 and off != self.last_record_offset + 1:
            report.notice(self.path, "non_consecutive_offsets",
                          f"{self.last_record_offset} is followed by {off}",
                          group=f"Non-consecutive offsets in {os.path.abspath(self.path)}",
                          detail=f"  {self.last_record_offset} is followed by {off}",
                          previous=self.last_record_offset, offset=off)
        self.last_record_offset = off
        key, value = r.key, r.value
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        seq = increment_sequence(h.base_sequence, off - h.base_offset)
        header_keys = [k for k, _v in r.headers]
        obj: dict[str, Any] = {
            "type": "record", "file": self.path, "offset": off,
            "timestampType": h.timestamp_type, "timestamp": r.timestamp,
            "keySize": key_size, "valueSize": value_size, "sequence": seq,
            "headerKeys": header_keys}
        parts: list[str] = []
        prefix = "| "
        if not opts.skip_record_metadata:
            parts.append(f"| offset: {off} {h.timestamp_type}: {r.timestamp} keySize: {key_size} "
                         f"valueSize: {value_size} sequence: {seq} "
                         f"headerKeys: [{','.join(header_keys)}]")
            prefix = " "
            if h.is_control:
                parts.append(self._control(h, r, obj))
        if opts.print_data and not h.is_control:
            prefix = self._data(off, key, value, prefix, parts, obj)
        report.emit("".join(parts), obj)

    def _control(self, h: Header, r: Any, obj: dict[str, Any]) -> str:
        key, value = r.key, r.value
        if key is None or len(key) < _CONTROL_KEY.size:
            n = -1 if key is None else len(key)
            self.report.problem(self.path, "invalid_control_record",
                                f"Control record at offset {r.offset} (batch at position "
                                f"{h.position} of {self.seg.name}) has a key of {n} bytes, "
                                "expected at least 4", position=h.position, offset=r.offset)
            return ""
        _version, type_id = _CONTROL_KEY.unpack_from(key, 0)
        name = CONTROL_TYPES.get(type_id, "UNKNOWN")
        obj["controlType"] = name
        obj["controlTypeId"] = type_id
        if type_id in (0, 1):
            if value is None or len(value) < _END_TXN.size:
                self.report.problem(self.path, "invalid_control_record",
                                    f"Transaction marker at offset {r.offset} of {self.seg.name} "
                                    f"has a value of {-1 if value is None else len(value)} bytes, "
                                    "expected at least 6", position=h.position, offset=r.offset)
                return f" endTxnMarker: {name}"
            _v, coordinator_epoch = _END_TXN.unpack_from(value, 0)
            obj["coordinatorEpoch"] = coordinator_epoch
            return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
        return f" controlType: {name}({type_id})"

    def _data(self, off: int, key: bytes | None, value: bytes | None, prefix: str,
              parts: list[str], obj: dict[str, Any]) -> str:
        if self.offsets_decoder:
            k, payload, error = decode_offsets_record(off, key, value)
            if error is not None:
                self.report.problem(self.path, "undecodable_offsets_record",
                                    f"Record at offset {off} of {self.seg.name} is not a "
                                    f"__consumer_offsets record: {error}", offset=off)
            obj["key"] = k
            if payload is not None:  # none when the record did not decode
                obj["payload"] = None if payload == "<DELETE>" else payload
            parts.append(f"{prefix}key: {_as_text(k)}")
            if payload is not None:
                parts.append(f" payload: {_as_text(payload)}")
            return " "
        if key is not None:
            parts.append(f"{prefix}key: {printable(key)}")
            prefix = " "
            _put_bytes(obj, "key", key)
        if value is not None:
            parts.append(f" payload: {printable(value)}")
            _put_bytes(obj, "payload", value)
        return prefix


def _as_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _put_bytes(obj: dict[str, Any], field: str, data: bytes) -> None:
    try:
        obj[field] = data.decode("utf-8")
    except UnicodeDecodeError:
        obj[field + "Base64"] = base64.b64encode(data).decode("ascii")


def dump_log_file(report: DumpReport, path: str, opts: DumpOptions, offsets_decoder: bool) -> None:
    """Dump one ``.log`` segment (Kafka's ``dumpLog``)."""
    name = os.path.basename(path)
    base = segment_base(name)
    with SegmentFile(path) as seg:
        report.start_file(path, "log", baseOffset=base, size=seg.size)
        if base is not None:
            report.text(f"Log starting offset: {base}")
        _LogDump(report, seg, opts, offsets_decoder or opts.offsets_decoder).run(base)


# ------------------------------------------------------------------------- indexes


class _Entries:
    """An index's entries up to its zero-filled tail, as a sequence ``bisect`` can search."""

    def __init__(self, index: Any, base: int, offset_field: int) -> None:
        self.index = index
        self.offset_field = offset_field
        n = index.entries
        # Kafka's dump stops at the first entry after the first whose offset is the base
        # offset: the preallocated (zero-filled) tail of an active segment's index. An
        # all-zero first entry starts that tail too: neither Kafka nor logcore ever indexes
        # the batch at position 0 (an entry is added once index.interval.bytes have gone
        # by), and a real time index entry has a timestamp.
        self.count = n
        for i in range(n):
            entry = index.entry(i)
            if entry[offset_field] == base and (i > 0 or entry[1 - offset_field] == 0):
                self.count = i
                break

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> int:
        return int(self.index.entry(i)[self.offset_field])


def _index_position(offsets: _Entries | None, offset: int) -> int:
    """Position of the largest offset-index entry at or below ``offset`` (0 if none)."""
    if offsets is None:
        return 0
    i = bisect.bisect_right(offsets, offset) - 1
    return int(offsets.index.entry(i)[1]) if i >= 0 else 0


def _open_index(kind: type, path: str, base: int) -> Any:
    return kind(path, base, -1, False)


def _sibling(path: str, suffix: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, name.split(".", 1)[0] + suffix)


def _index_preamble(report: DumpReport, path: str, kind: str, entry_size: int) -> int | None:
    """Common start of an index dump: the base offset, or None when the name has none."""
    name = os.path.basename(path)
    size = os.path.getsize(path)
    report.start_file(path, kind, size=size)
    base = segment_base(name)
    if base is None:
        report.problem(path, "bad_file_name",
                       f"{name} is not named <base offset>{os.path.splitext(name)[1]}: the "
                       "entries' offsets are relative to that base offset, so they cannot be read")
        return None
    if size % entry_size:
        pos = size - size % entry_size
        report.problem(path, "invalid_bytes",
                       f"Found {size % entry_size} invalid bytes at the end of {name} (position "
                       f"{pos}): an entry is {entry_size} bytes", position=pos,
                       bytes=size % entry_size)
    return base


def _missing_log(report: DumpReport, path: str, log_path: str) -> None:
    report.problem(path, "missing_log",
                   f"{os.path.basename(log_path)} does not exist next to {os.path.basename(path)}: "
                   "the entries cannot be checked (an index without its segment is left over "
                   "from a deleted segment or a copy)")


def dump_offset_index(report: DumpReport, path: str, opts: DumpOptions) -> None:
    """Dump one ``.index`` and check each entry against the log (Kafka's ``dumpIndex``)."""
    base = _index_preamble(report, path, "index", 8)
    if base is None:
        return
    name = os.path.basename(path)
    log_path = _sibling(path, ".log")
    idx = _open_index(logcore.OffsetIndex, path, base)
    seg: SegmentFile | None = None
    try:
        entries = _Entries(idx, base, 0)
        if _empty(report, path, idx, entries):
            return
        has_log = os.path.exists(log_path)
        if opts.index_sanity_check:
            _sanity(report, path, idx, entries, os.path.getsize(log_path) if has_log else None)
            return
        if has_log:
            seg = SegmentFile(log_path)
        else:
            _missing_log(report, path, log_path)
        prev_off = prev_pos = -1
        for i in range(len(entries)):
            off, pos = idx.entry(i)
            if i and (off <= prev_off or pos <= prev_pos):
                report.problem(path, "index_out_of_order",
                               f"Index entry {i} of {name} (offset {off}, position {pos}) does not "
                               f"increase after (offset {prev_off}, position {prev_pos})",
                               entry=i, offset=off, position=pos)
            prev_off, prev_pos = off, pos
            if seg is not None:
                h = seg.header_at(pos, seg.size)
                if isinstance(h, str):
                    report.problem(path, "index_entry_not_found",
                                   f"Index entry {i} of {name} (offset {off}, position {pos}) not "
                                   f"found in {seg.name}: {h}", entry=i, offset=off, position=pos)
                elif h.last_offset != off:
                    report.problem(path, "index_mismatch",
                                   f"Index entry {i} of {name} says offset {off} is at position "
                                   f"{pos}, but the batch there ends at offset {h.last_offset}",
                                   group=f"Mismatches in :{os.path.abspath(path)}",
                                   detail=f"  Index offset: {off}, log offset: {h.last_offset}",
                                   entry=i, offset=off, position=pos, logOffset=h.last_offset)
            if not opts.verify_index_only:
                report.emit(f"offset: {off} position: {pos}",
                            {"type": "index_entry", "file": path, "offset": off, "position": pos})
        _zero_tail(report, path, idx.entries, len(entries), 8)
    finally:
        idx.close()
        if seg is not None:
            seg.close()


def _zero_tail(report: DumpReport, path: str, total: int, used: int, entry_size: int) -> None:
    if used < total:
        report.notice(path, "zero_entries",
                      f"{path}: {total - used} zero entries from position {used * entry_size} "
                      "on: the preallocated space of an active segment's index (or a torn one)",
                      position=used * entry_size, entries=total - used)


def _empty(report: DumpReport, path: str, idx: Any, entries: _Entries) -> bool:
    """Kafka's "<file> is empty." for an index without entries (zero-filled ones aside)."""
    if len(entries):
        return False
    # All zeros: the preallocated index of an active segment that has no entry yet.
    report.emit(f"{path} is empty.", {"type": "empty", "file": path, "zeroEntries": idx.entries})
    return True


def _sanity(report: DumpReport, path: str, idx: Any, entries: _Entries,
            log_size: int | None) -> None:
    """The check logcore runs when it opens an inactive segment's index."""
    try:
        idx.sanity_check(log_size)
    except logcore.CorruptRecordError as exc:
        live = ("; its zero-filled tail is that of an active segment's index, expected while "
                "a broker has the log open" if len(entries) < idx.entries else "")
        report.problem(path, "sanity_check",
                       f"{path} failed sanity check: {exc} (pylog rebuilds such an index from "
                       f"the log when it opens the segment{live})")
        return
    report.emit(f"{path} passed sanity check.", {"type": "sanity_check", "file": path,
                                                  "passed": True})


def _max_record_timestamp(seg: SegmentFile, h: Header, opts: DumpOptions) -> int:
    """Largest record timestamp of a batch (Kafka iterates the records); the header's
    max_timestamp when the records cannot be read within the bounds."""
    if h.size > max(READ_CHUNK, opts.max_message_size):
        return h.max_timestamp
    try:
        return max((r.timestamp for r in logcore.RecordBatch(seg.batch_bytes(h))), default=-1)
    except logcore.CorruptRecordError:
        return h.max_timestamp


class _BatchFinder:
    """Finds the batch holding an offset for the time index check, in bounded work.

    A walk starts at the offset index's position for the offset, or further on where the
    previous (lower) offset was found; if that misses (a corrupt offset index sent it
    astray), it walks once from the start of the log, and remembers the lowest offset a
    whole walk did not find, so that later entries do not walk the segment again.
    """

    def __init__(self, seg: SegmentFile, offsets: _Entries | None) -> None:
        self.seg = seg
        self.offsets = offsets
        self.last: Header | None = None
        self.missing_from: int | None = None

    def find(self, offset: int) -> Header | None:
        start = _index_position(self.offsets, offset)
        if self.last is not None and self.last.base_offset <= offset:
            start = max(start, self.last.position)
        h = self._walk(start, offset)
        if h is None or h.base_offset > offset:
            if start and (self.missing_from is None or offset < self.missing_from):
                h = self._walk(0, offset)
            if h is None:
                self.missing_from = offset if self.missing_from is None else min(
                    offset, self.missing_from)
        if h is not None:
            self.last = h
        return h

    def _walk(self, start: int, offset: int) -> Header | None:
        for h in self.seg.walk(start, self.seg.size):
            if h.magic == 2 and h.last_offset >= offset:
                return h
        return None


def _offset_not_found(report: DumpReport, path: str, log_name: str, i: int, off: int,
                      found: Header | None) -> None:
    """Kafka's "Indexed offset: X, found log offset: Y" for a time index entry that does
    not name the last offset of a batch (Y: the last offset of the batch found, or -1)."""
    name = os.path.basename(path)
    log_off = -1 if found is None else found.last_offset
    if found is None or found.base_offset > off:
        why = f"which is in no batch of {log_name}"
    else:
        # The record-offset form older pylog versions wrote.
        why = (f"inside the batch of offsets {found.base_offset}..{log_off} of {log_name}, not "
               "its last offset as Kafka writes (older pylog versions wrote the offset of the "
               "record holding the timestamp; pylog and Kafka brokers still look timestamps up "
               f"correctly with it). To rewrite it, stop the broker and delete {name}: it is "
               "rebuilt from the log at the next start")
    report.problem(path, "timeindex_offset_not_found",
                   f"Time index entry {i} of {name} names offset {off}, {why}",
                   group="The following indexed offsets are not found in the log.",
                   detail=f"Indexed offset: {off}, found log offset: {log_off}",
                   entry=i, offset=off, logOffset=log_off)


def dump_time_index(report: DumpReport, path: str, opts: DumpOptions) -> None:
    """Dump one ``.timeindex`` and check it against the log (Kafka's ``dumpTimeIndex``)."""
    base = _index_preamble(report, path, "timeindex", 12)
    if base is None:
        return
    name = os.path.basename(path)
    log_path, index_path = _sibling(path, ".log"), _sibling(path, ".index")
    tidx = _open_index(logcore.TimeIndex, path, base)
    oidx: Any = None
    seg: SegmentFile | None = None
    try:
        entries = _Entries(tidx, base, 1)
        if _empty(report, path, tidx, entries):
            return
        if opts.index_sanity_check:
            _sanity(report, path, tidx, entries, None)
            return
        if os.path.exists(log_path):
            seg = SegmentFile(log_path)
        else:
            _missing_log(report, path, log_path)
        if os.path.exists(index_path):
            oidx = _open_index(logcore.OffsetIndex, index_path, base)
        offsets = _Entries(oidx, base, 0) if oidx is not None and oidx.entries else None
        abspath = os.path.abspath(path)
        prev_ts = -1
        finder = _BatchFinder(seg, offsets) if seg is not None else None
        for i in range(len(entries)):
            ts, off = tidx.entry(i)
            if seg is not None and finder is not None:
                found = finder.find(off)
                if found is None or found.last_offset != off:
                    # Kafka's check: an entry names the last offset of a batch.
                    _offset_not_found(report, path, seg.name, i, off, found)
                else:
                    log_ts = _max_record_timestamp(seg, found, opts)
                    if log_ts != ts:
                        report.problem(path, "timeindex_mismatch",
                                       f"Time index entry {i} of {name} has timestamp {ts}, the "
                                       f"batch ending at offset {off} has {log_ts}",
                                       group=f"Found timestamp mismatch in :{abspath}",
                                       detail=f"  Index timestamp: {ts}, log timestamp: {log_ts}",
                                       entry=i, timestamp=ts, logTimestamp=log_ts)
                    if prev_ts >= ts:
                        report.problem(path, "timeindex_out_of_order",
                                       f"Time index entry {i} of {name} has timestamp {ts}, not "
                                       f"after the previous entry's {prev_ts}",
                                       group=f"Found out of order timestamp in :{abspath}",
                                       detail=f"  Index timestamp: {ts}, Previously indexed "
                                              f"timestamp: {prev_ts}",
                                       entry=i, timestamp=ts, previousTimestamp=prev_ts)
            if not opts.verify_index_only:
                report.emit(f"timestamp: {ts} offset: {off}",
                            {"type": "timeindex_entry", "file": path, "timestamp": ts,
                             "offset": off})
            prev_ts = ts
        _zero_tail(report, path, tidx.entries, len(entries), 12)
    finally:
        tidx.close()
        if oidx is not None:
            oidx.close()
        if seg is not None:
            seg.close()
