"""``dump-log`` for the small files: producer snapshots, transaction indexes, checkpoints.

Layouts (docs/formats.md; Kafka's ``ProducerStateManager``, ``TransactionIndex`` /
``AbortedTxn``, ``CheckpointFile``, ``PartitionMetadataFile``):

``<offset>.snapshot``, all big-endian::

    0 version int16 (1) | 2 crc uint32 (CRC-32C of bytes 6..end) | 6 count int32 |
    10 count x { producer_id int64, producer_epoch int16, last_sequence int32,
                 last_offset int64, offset_delta int32, timestamp int64,
                 coordinator_epoch int32, current_txn_first_offset int64 }   (46 bytes)

``<offset>.txnindex``: 34-byte entries, one per aborted transaction::

    0 version int16 (0) | 2 producer_id int64 | 10 first_offset int64 |
    18 last_offset int64 | 26 last_stable_offset int64

Checkpoints are text: version, count, then ``topic partition offset`` lines (offset
checkpoints) or ``leader_epoch start_offset`` lines (``leader-epoch-checkpoint``).

Snapshots and transaction indexes are streamed (a fixed-size buffer whatever the file
size); checkpoints are read whole up to :data:`MAX_TEXT_FILE` bytes.
"""

from __future__ import annotations

import os
import struct

import logcore
from logcore.checkpoint import read_checkpoint_file
from pylog.cli._dump_output import DumpReport
from pylog.cli._dump_segments import segment_base

SNAPSHOT_VERSION = 1
_SNAPSHOT_PREFIX = struct.Struct(">hIi")  # version, crc, count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
_TXN_ENTRY = struct.Struct(">hqqqq")  # 34 bytes
TXN_INDEX_VERSION = 0
_CHUNK_ENTRIES = 4096  # entries read per pread
MAX_TEXT_FILE = 64 * 1024 * 1024  # a checkpoint this large is not one

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


def _decrement_sequence(seq: int, by: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``: first sequence from the last."""
    if seq < by:
        return 2**31 - 1 - (by - seq) + 1
    return seq - by


def _entries(fd: int, start: int, count: int, entry: struct.Struct):
    """Yield ``(position, fields)`` for ``count`` entries from ``start``, chunk by chunk."""
    pos, left = start, count
    while left > 0:
        n = min(left, _CHUNK_ENTRIES)
        data = os.pread(fd, n * entry.size, pos)
        if len(data) != n * entry.size:
            raise OSError(f"the file shrank to {pos + len(data)} bytes while being read")
        for i, fields in enumerate(entry.iter_unpack(data)):
            yield pos + i * entry.size, fields
        pos += n * entry.size
        left -= n


def dump_producer_snapshot(report: DumpReport, path: str) -> None:
    """Kafka's ``dumpProducerIdSnapshot``: every producer of a valid snapshot."""
    name = os.path.basename(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        report.start_file(path, "snapshot", offset=segment_base(name), size=size)

        def corrupt(message: str, position: int) -> None:
            report.problem(path, "corrupt_snapshot",
                           f"Corrupt producer snapshot {name} (position {position}): {message}; "
                           "pylog deletes it at open and rebuilds the producer state from the log",
                           position=position)

        head = os.pread(fd, _SNAPSHOT_PREFIX.size, 0)
        if len(head) < _SNAPSHOT_PREFIX.size:
            corrupt(f"{size} bytes are too few for the 10-byte header", 0)
            return
        version, crc, count = _SNAPSHOT_PREFIX.unpack(head)
        if version != SNAPSHOT_VERSION:
            corrupt(f"version {version}, expected {SNAPSHOT_VERSION}", 0)
            return
        body = size - _SNAPSHOT_PREFIX.size
        if count < 0 or count * _SNAPSHOT_ENTRY.size != body:
            corrupt(f"the header counts {count} producers but {body} bytes of entries follow "
                    f"({_SNAPSHOT_ENTRY.size} bytes each)", 6)
            return
        # The CRC covers the count and the entries: check it before printing anything.
        actual = logcore.crc32c(head[6:])
        for _pos, fields in _entries(fd, _SNAPSHOT_PREFIX.size, count, _SNAPSHOT_ENTRY):
            actual = logcore.crc32c(_SNAPSHOT_ENTRY.pack(*fields), actual)
        if actual != crc:
            corrupt(f"stored CRC {crc}, computed {actual}", 2)
            return
        for pos, (pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first) in _entries(
                fd, _SNAPSHOT_PREFIX.size, count, _SNAPSHOT_ENTRY):
            if pid < 0 or delta < 0:
                corrupt(f"entry with producerId {pid} and offsetDelta {delta}", pos)
                continue
            first_seq = _decrement_sequence(last_seq, delta) if last_seq >= 0 else -1
            txn = "OptionalLong.empty" if txn_first < 0 else f"OptionalLong[{txn_first}]"
            report.emit(
                f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} "
                f"currentTxnFirstOffset: {txn} lastTimestamp: {ts} firstSequence: {first_seq} "
                f"lastSequence: {last_seq} lastOffset: {last_offset} offsetDelta: {delta} "
                f"timestamp: {ts}",
                {"type": "producer_snapshot_entry", "file": path, "producerId": pid,
                 "producerEpoch": epoch, "coordinatorEpoch": coord,
                 "currentTxnFirstOffset": None if txn_first < 0 else txn_first,
                 "lastTimestamp": ts, "firstSequence": first_seq, "lastSequence": last_seq,
                 "lastOffset": last_offset, "offsetDelta": delta, "timestamp": ts})
    finally:
        os.close(fd)


def dump_txn_index(report: DumpReport, path: str) -> None:
    """Kafka's ``dumpTxnIndex``, with ``TransactionIndex``'s checks."""
    name = os.path.basename(path)
    base = segment_base(name)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        report.start_file(path, "txnindex", baseOffset=base, size=size)
        count = size // _TXN_ENTRY.size
        for pos, (version, pid, first, last, lso) in _entries(fd, 0, count, _TXN_ENTRY):
            report.emit(f"version: {version} producerId: {pid} firstOffset: {first} "
                        f"lastOffset: {last} lastStableOffset: {lso}",
                        {"type": "aborted_txn", "file": path, "position": pos,
                         "version": version, "producerId": pid, "firstOffset": first,
                         "lastOffset": last, "lastStableOffset": lso})
            why = None
            if version != TXN_INDEX_VERSION:
                why = f"version {version}, expected {TXN_INDEX_VERSION}"
            elif base is not None and last < base:
                why = f"lastOffset {last} is below the segment's base offset {base}"
            elif first > last:
                why = f"firstOffset {first} is after lastOffset {last}"
            if why is not None:
                report.problem(path, "corrupt_txn_index",
                               f"Aborted transaction at position {pos} of {name}: {why}",
                               position=pos)
        if size % _TXN_ENTRY.size:
            pos = count * _TXN_ENTRY.size
            report.problem(path, "invalid_bytes",
                           f"Found {size - pos} invalid bytes at the end of {name} (position "
                           f"{pos}): an entry is {_TXN_ENTRY.size} bytes",
                           position=pos, bytes=size - pos)
    finally:
        os.close(fd)


def _offset_entry(fields: list[str]) -> tuple[str, int, int]:
    if len(fields) != 3:
        raise ValueError("expected 'topic partition offset'")
    return fields[0], int(fields[1]), int(fields[2])


def _epoch_entry(fields: list[str]) -> tuple[int, int]:
    if len(fields) != 2:
        raise ValueError("expected 'leader_epoch start_offset'")
    return int(fields[0]), int(fields[1])


def _too_big(report: DumpReport, path: str, what: str) -> bool:
    size = os.path.getsize(path)
    if size > MAX_TEXT_FILE:
        report.problem(path, "not_a_checkpoint",
                       f"{os.path.basename(path)} holds {size} bytes, more than any {what} "
                       f"(limit {MAX_TEXT_FILE}); it is not one", size=size)
        return True
    return False


def dump_checkpoint(report: DumpReport, path: str) -> None:
    """Parse a checkpoint file and print its entries (Kafka's tool has no such mode)."""
    report.start_file(path, "checkpoint")
    if _too_big(report, path, "checkpoint"):
        return
    try:
        if os.path.basename(path) == LEADER_EPOCH_CHECKPOINT:
            _leader_epochs(report, path, read_checkpoint_file(path, _epoch_entry))
        else:
            _offsets(report, path, read_checkpoint_file(path, _offset_entry))
    except logcore.CorruptRecordError as exc:
        report.problem(path, "corrupt_checkpoint", f"{exc}", line=exc.position)
    except UnicodeDecodeError as exc:
        # logcore's reader lets this one through (a checkpoint is UTF-8 text).
        report.problem(path, "corrupt_checkpoint",
                       f"malformed checkpoint file {path}: byte {exc.start} is not UTF-8 text",
                       position=exc.start)


def _count_line(report: DumpReport, path: str, entries: list | None) -> None:
    if entries is None:
        raise FileNotFoundError(path)
    report.emit(f"version: 0 entries: {len(entries)}",
                {"type": "checkpoint", "file": path, "version": 0, "entries": len(entries)})


def _leader_epochs(report: DumpReport, path: str, entries: list[tuple[int, int]] | None) -> None:
    _count_line(report, path, entries)
    prev_epoch = prev_start = -1
    for epoch, start in entries or ():
        report.emit(f"epoch: {epoch} startOffset: {start}",
                    {"type": "leader_epoch_entry", "file": path, "epoch": epoch,
                     "startOffset": start})
        if epoch <= prev_epoch or start < prev_start or start < 0:
            report.problem(path, "corrupt_checkpoint",
                           f"{os.path.basename(path)}: entry (epoch {epoch}, start offset "
                           f"{start}) does not follow (epoch {prev_epoch}, start offset "
                           f"{prev_start}): epochs must increase and start offsets must not "
                           "decrease")
        prev_epoch, prev_start = epoch, start


def _offsets(report: DumpReport, path: str, entries: list[tuple[str, int, int]] | None) -> None:
    _count_line(report, path, entries)
    for topic, partition, offset in entries or ():
        report.emit(f"topic: {topic} partition: {partition} offset: {offset}",
                    {"type": "checkpoint_entry", "file": path, "topic": topic,
                     "partition": partition, "offset": offset})
        if offset < 0 or partition < 0:
            report.problem(path, "corrupt_checkpoint",
                           f"{os.path.basename(path)}: entry {topic} {partition} {offset} is "
                           "negative")


def dump_partition_metadata(report: DumpReport, path: str) -> None:
    """``partition.metadata``: ``version: 0`` and ``topic_id: <base64 uuid>`` lines."""
    name = os.path.basename(path)
    report.start_file(path, "partition_metadata")
    if _too_big(report, path, "partition.metadata"):
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    version, topic_id = fields.get("version"), fields.get("topic_id")
    if version != "0" or not topic_id or len(lines) != 2:
        report.problem(path, "corrupt_partition_metadata",
                       f"{name} should hold the two lines 'version: 0' and 'topic_id: <id>', "
                       f"found {lines[:3]!r}")
        return
    report.emit(f"version: {version} topicId: {topic_id}",
                {"type": "partition_metadata", "file": path, "version": 0, "topicId": topic_id})
