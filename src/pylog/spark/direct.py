"""Direct mode: the source reads a data directory's segment files with logcore, no broker.

The ``path`` option names a directory laid out as a broker's ``log.dirs`` (pylog's or
Kafka's): one ``<topic>-<partition>`` directory per partition. Topics and partitions are
found from those directory names. Each partition is opened as a ``logcore.ReadOnlyLog``:
no lock, no write, no recovery, so a broker may be running on the directory and appending
meanwhile; only records in complete batches are read (see ``logcore.readonly``), and
when the directory holds Kafka's ``replication-offset-checkpoint``, nothing at or above
the high watermark it records (records a leader may still truncate).

Reads (one Spark task per offset range) take whole batches from disk with ``pread``,
``DIRECT_READ_BYTES`` at a time, decode them with ``logcore.decode_columns`` and hand Spark
Arrow record batches: no Python object per record.

Thread-safety: ``DirectLookup`` is used by one thread (Spark's planner); ``read_range``
opens what it reads and shares nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

import logcore
from logcore.checkpoint import read_offset_checkpoint
from pylog.spark.offsets import TP, OffsetRange, lost, tp_str
from pylog.spark.options import SourceOptions, SparkOptionError

__all__ = ["DirectLookup", "read_range", "DIRECT_READ_BYTES", "DataDirectoryError"]

#: Bytes of whole batches read from a segment per step (about 60,000 records of 100 B:
#: one Arrow record batch).
DIRECT_READ_BYTES = 8 << 20
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"


class DataDirectoryError(SparkOptionError):
    """The ``path`` cannot be read as a data directory."""


def _check_dir(path: str) -> None:
    if not os.path.exists(path):
        raise DataDirectoryError(f"path {path!r} does not exist: give the data directory a "
                                 "broker or the embedded client writes (log.dirs)")
    if not os.path.isdir(path):
        raise DataDirectoryError(f"path {path!r} is not a directory: give the data directory "
                                 "a broker or the embedded client writes (log.dirs)")
    if not os.access(path, os.R_OK | os.X_OK):
        raise DataDirectoryError(f"path {path!r} cannot be read (permission denied): run the "
                                 "Spark job as a user that can read the data directory")


def list_topics(path: str) -> dict[str, list[int]]:
    """``{topic: [partitions]}`` from the ``<topic>-<partition>`` directories in ``path``."""
    _check_dir(path)
    topics: dict[str, list[int]] = {}
    try:
        entries = list(os.scandir(path))
    except OSError as exc:
        raise DataDirectoryError(f"cannot list data directory {path!r}: {exc.strerror}") from None
    for entry in entries:
        m = _PARTITION_DIR.match(entry.name)
        if m is None or not entry.is_dir():
            continue  # also skips <topic>-<n>.<uuid>-delete directories of deleted topics
        topics.setdefault(m.group(1), []).append(int(m.group(2)))
    return {t: sorted(ps) for t, ps in topics.items()}


def high_watermarks(path: str) -> dict[tuple[str, int], int]:
    """Kafka's recorded high watermarks, when the data directory has them (a pylog
    broker on one node serves up to the log end: it has none)."""
    try:
        return read_offset_checkpoint(os.path.join(path, _HIGH_WATERMARK_CHECKPOINT)) or {}
    except (logcore.CorruptRecordError, OSError):
        return {}


def open_partition(path: str, tp: TP, hws: Mapping[tuple[str, int], int] | None = None
                   ) -> logcore.ReadOnlyLog:
    directory = os.path.join(path, f"{tp[0]}-{tp[1]}")
    hw = (hws if hws is not None else high_watermarks(path)).get(tp)
    try:
        return logcore.ReadOnlyLog(directory, max_offset=hw)
    except logcore.LogDirError as exc:
        if not os.path.isdir(directory):
            raise DataDirectoryError(
                f"partition {tp_str(tp)} has no directory {directory!r} in the data directory "
                "(the topic was deleted, or this is not the directory the broker writes)"
            ) from None
        raise DataDirectoryError(f"cannot read partition directory {directory!r}: {exc}"
                                 ) from None


class DirectLookup:
    """Offsets of a data directory's partitions, for planning (a ``Lookup``)."""

    def __init__(self, options: SourceOptions) -> None:
        assert options.path is not None
        self.options = options
        self.path = os.path.abspath(options.path)
        _check_dir(self.path)
        self.where = f"in data directory {self.path}"

    def topics(self) -> dict[str, list[int]]:
        return list_topics(self.path)

    def _each(self, tps: Iterable[TP], fn: Any) -> dict[TP, Any]:
        hws = high_watermarks(self.path)
        out = {}
        for tp in tps:
            with open_partition(self.path, tp, hws) as ro:
                out[tp] = fn(ro)
        return out

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._each(tps, lambda ro: ro.log_start_offset)

    def latest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._each(tps, lambda ro: ro.log_end_offset)

    def for_times(self, wanted: Mapping[TP, int]) -> dict[TP, int | None]:
        hws = high_watermarks(self.path)
        out: dict[TP, int | None] = {}
        for tp, ts in wanted.items():
            with open_partition(self.path, tp, hws) as ro:
                found = ro.offset_for_timestamp(ts)
                out[tp] = found.offset if found is not None else None
        return out

    def close(self) -> None:
        pass


def _collect_headers(buf: Any, lo: int, hi: int) -> list[tuple[str, bytes | None]]:
    """Headers of the records with offsets in [lo, hi) of ``buf``, in order (a Python walk:
    ``decode_columns`` only counts headers)."""
    flat: list[tuple[str, bytes | None]] = []
    for batch in logcore.iter_batches(buf):
        if batch.is_control or batch.last_offset < lo or batch.base_offset >= hi:
            continue
        for r in batch:
            if lo <= r.offset < hi:
                flat.extend(r.headers)
    return flat


def read_range(options: SourceOptions, rng: OffsetRange,
               read_bytes: int = DIRECT_READ_BYTES) -> Iterator[Any]:
    """The records of ``rng`` as ``pyarrow.RecordBatch``es, read from the segment files.

    Raises:
        DataLoss: records of the range are gone (retention, truncation) and
            ``failOnDataLoss`` is true (else a warning and what is left is read).
        DataDirectoryError: the partition directory cannot be read.
        CorruptRecordError: a batch fails its CRC or is malformed (named by file/offset).
    """
    from pylog.spark import arrow

    assert options.path is not None
    tp = rng.tp
    until = rng.until_offset
    with open_partition(os.path.abspath(options.path), tp) as ro:
        pos = rng.from_offset
        if pos < ro.log_start_offset:
            lost(options, f"Cannot fetch offsets [{pos}, {min(ro.log_start_offset, until)}) of "
                          f"{tp_str(tp)} from {options.path}: the log now starts at "
                          f"{ro.log_start_offset}")
            pos = ro.log_start_offset
        if ro.log_end_offset < until:
            # Planned from an earlier look at the log, which has since become shorter
            # (its owner truncated it: a crash's torn tail, or the topic was recreated).
            lost(options, f"Cannot fetch offsets [{max(pos, ro.log_end_offset)}, {until}) of "
                          f"{tp_str(tp)} from {options.path}: the log now ends at "
                          f"{ro.log_end_offset}")
            until = ro.log_end_offset
        while pos < until:
            region = ro.read(pos, read_bytes)
            if region.size == 0:
                break
            buf = region.read()
            if options.isolation_level == "read_committed":
                _refuse_transactions(buf, tp)
            cols = logcore.decode_columns(buf)
            offs = cols.offsets
            lo = int(np.searchsorted(offs, pos)) if offs.size and offs[0] < pos else 0
            hi = int(np.searchsorted(offs, until)) if offs.size and offs[-1] >= until else offs.size
            if hi > lo:
                headers = None
                if options.include_headers and cols.header_counts[lo:hi].any():
                    headers = arrow.headers_array(
                        cols.header_counts[lo:hi],
                        _collect_headers(buf, int(offs[lo]), int(offs[hi - 1]) + 1))
                yield arrow.columns_to_batch(cols, tp[0], tp[1], lo, hi,
                                             include_headers=options.include_headers,
                                             headers=headers)
            pos = region.last_offset + 1


def _refuse_transactions(buf: Any, tp: TP) -> None:
    for batch in logcore.iter_batches(buf):
        if batch.is_transactional:
            raise SparkOptionError(
                f"{tp_str(tp)} holds transactional batches (offset {batch.base_offset}): direct "
                "mode cannot honour kafka.isolation.level=read_committed for them yet; read "
                "through a broker (kafka.bootstrap.servers) instead")
