"""Kafka's checkpoint files: small text files replaced atomically.

Format (``server-common/.../CheckpointFile.java`` in apache/kafka), UTF-8, one item a line,
fields separated by a single space::

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- entries (offset checkpoints: topic partition offset)
    my-topic 1 88

``leader-epoch-checkpoint`` entries are ``leader_epoch start_offset``. A write goes to
``<name>.tmp``, is flushed and fsynced, renamed over the old file, and the directory is
fsynced so that the rename itself survives a crash. A reader that finds a malformed file
raises CorruptRecordError naming the file and the line.

The clean-shutdown marker ``.kafka_cleanshutdown`` (KIP-966) is JSON
``{"version":0,"brokerEpoch":-1}``; only its presence matters to recovery.

Thread-safety: the functions keep no state; callers serialise writes to one path.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from .errors import CorruptRecordError, LogDirError

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CURRENT_VERSION = 0

T = TypeVar("T")


def fsync_dir(path: str) -> None:
    """fsync a directory so that renames and unlinks in it are durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint_file(path: str, lines: Sequence[str], version: int = CURRENT_VERSION) -> None:
    """Atomically replace ``path`` with a checkpoint holding ``lines`` (no newlines in them).

    Raises:
        LogDirError: the directory is not writable (disk full, I/O error, ...).
    """
    tmp = path + ".tmp"
    text = f"{version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        raise LogDirError(exc.errno, f"cannot write checkpoint {path}: {exc.strerror}") from exc


def read_checkpoint_file(
    path: str, parse: Callable[[list[str]], T], version: int = CURRENT_VERSION
) -> list[T] | None:
    """Parse a checkpoint file; None when it does not exist.

    Args:
        parse: turns one entry's whitespace-split fields into a value; raises ValueError
            (or IndexError) on bad input.

    Raises:
        CorruptRecordError: wrong version, count mismatch or a malformed line
            (``path`` and ``position`` = 1-based line number are set), or bytes that are
            not UTF-8 (``position`` = their byte offset).
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(
            f"malformed checkpoint file {path}: byte {exc.start} is not UTF-8 text",
            path=path, position=exc.start) from None
    if lines and lines[-1] == "":
        lines.pop()

    def bad(lineno: int, why: str) -> CorruptRecordError:
        return CorruptRecordError(
            f"malformed checkpoint file {path} at line {lineno}: {why}", path=path, position=lineno
        )

    if len(lines) < 2:
        raise bad(len(lines) + 1, "missing version or count line")
    try:
        found_version = int(lines[0].strip())
    except ValueError:
        raise bad(1, f"version {lines[0]!r} is not an integer") from None
    if found_version != version:
        raise bad(1, f"unsupported version {found_version} (expected {version})")
    try:
        count = int(lines[1].strip())
    except ValueError:
        raise bad(2, f"count {lines[1]!r} is not an integer") from None
    entries = lines[2:]
    if count < 0 or count != len(entries):
        raise bad(2, f"count says {count} entries, file has {len(entries)}")
    out: list[T] = []
    for i, line in enumerate(entries):
        try:
            out.append(parse(line.split()))
        except (ValueError, IndexError) as exc:
            raise bad(i + 3, f"entry {line!r}: {exc}") from None
    return out


def _parse_offset_entry(fields: list[str]) -> tuple[str, int, int]:
    if len(fields) != 3:
        raise ValueError("expected 'topic partition offset'")
    return fields[0], int(fields[1]), int(fields[2])


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int] | None:
    """``recovery-point-offset-checkpoint`` style: {(topic, partition): offset}; None if absent."""
    entries = read_checkpoint_file(path, _parse_offset_entry)
    if entries is None:
        return None
    return {(t, p): o for t, p, o in entries}


def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    """Write ``topic partition offset`` entries (sorted for stable output)."""
    for topic in {t for t, _p in offsets}:
        if not topic or any(c.isspace() for c in topic):
            raise ValueError(f"topic name {topic!r} cannot be written to a checkpoint")
    write_checkpoint_file(path, [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])


def _parse_epoch_entry(fields: list[str]) -> tuple[int, int]:
    if len(fields) != 2:
        raise ValueError("expected 'leader_epoch start_offset'")
    epoch, start = int(fields[0]), int(fields[1])
    if epoch < 0 or start < 0:
        raise ValueError("negative epoch or offset")
    return epoch, start


class LeaderEpochCache:
    """The partition's ``leader-epoch-checkpoint``: (leader_epoch, start_offset) pairs.

    Epochs and start offsets strictly increase. ``assign`` writes through to the file (a
    new epoch must be on disk before data of that epoch). The truncations take
    ``write=False`` from a Log that holds its append lock: they only mark the cache dirty,
    and the Log calls ``write_if_dirty`` once the lock is released (Kafka's
    ``truncateFromStartAsyncFlush``). A file behind the cache after a crash is harmless:
    the next open truncates the cache to the recovered log start and end offsets again.

    Thread-safety: mutations need the Log's append lock; ``write_if_dirty`` runs on any
    thread, and every file write is serialised by the cache's own (innermost) lock.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._file_lock = threading.Lock()
        #: The entries changed since the file was last written.
        self.dirty = False
        entries = read_checkpoint_file(path, _parse_epoch_entry)
        self._entries: list[tuple[int, int]] = []
        for epoch, start in entries or ():
            if self._entries and (epoch <= self._entries[-1][0] or start < self._entries[-1][1]):
                raise CorruptRecordError(
                    f"leader epochs out of order in {path}: {(epoch, start)} after "
                    f"{self._entries[-1]}",
                    path=path,
                )
            self._entries.append((epoch, start))

    @property
    def entries(self) -> list[tuple[int, int]]:
        """A copy of the (leader_epoch, start_offset) list, oldest first."""
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op if it is already the latest).

        A new epoch below the latest, or a start offset below the latest start, replaces
        the entries it conflicts with (Kafka's ``assign`` keeps the cache monotonic).
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"negative leader epoch {epoch} or start offset {start_offset}")
        if self._entries and self._entries[-1][0] == epoch:
            return
        kept = [(e, s) for e, s in self._entries if e < epoch and s < start_offset]
        self._entries = kept + [(epoch, start_offset)]
        self._flush(True)

    def assign_many(self, pairs: Iterable[tuple[int, int]]) -> None:
        for epoch, start in pairs:
            self.assign(epoch, start)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``epoch``, the offset where it ended).

        Returns (-1, -1) when ``epoch`` is older than every entry.
        """
        best = -1
        for i, (e, _s) in enumerate(self._entries):
            if e <= epoch:
                best = i
        if best < 0:
            return -1, -1
        end = self._entries[best + 1][1] if best + 1 < len(self._entries) else log_end_offset
        return self._entries[best][0], end

    def truncate_from_end(self, end_offset: int, *, write: bool = True) -> None:
        """Drop epochs that start at or after ``end_offset`` (the log was truncated there).
        With ``write=False`` the file is left to ``write_if_dirty``."""
        kept = [(e, s) for e, s in self._entries if s < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._flush(write)

    def truncate_from_start(self, start_offset: int, *, write: bool = True) -> None:
        """Forget epochs wholly below ``start_offset``; the one covering it starts there.
        With ``write=False`` the file is left to ``write_if_dirty``."""
        kept: list[tuple[int, int]] = []
        for i, (e, s) in enumerate(self._entries):
            nxt = self._entries[i + 1][1] if i + 1 < len(self._entries) else None
            if nxt is not None and nxt <= start_offset:
                continue
            kept.append((e, max(s, start_offset)))
        if kept != self._entries:
            self._entries = kept
            self._flush(write)

    def clear(self, *, write: bool = True) -> None:
        if self._entries:
            self._entries = []
            self._flush(write)

    def write_if_dirty(self) -> bool:
        """Write the current entries if a change has not reached the file yet (any thread,
        without the Log's append lock). Returns True if the file was written."""
        with self._file_lock:
            if not self.dirty:
                return False
            self._write()
            return True

    def _flush(self, write: bool) -> None:
        self.dirty = True
        if write:
            with self._file_lock:
                self._write()

    def _write(self) -> None:
        # Caller holds _file_lock. The entries list is replaced, never changed in place,
        # so this reads one consistent state even while the owner changes the cache.
        self.dirty = False  # before: a change during the write marks it again
        entries = self._entries
        try:
            write_checkpoint_file(self.path, [f"{e} {s}" for e, s in entries])
        except BaseException:
            self.dirty = True
            raise


def write_clean_shutdown_marker(directory: str) -> None:
    path = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"version": 0, "brokerEpoch": -1}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(directory)
    except OSError as exc:
        raise LogDirError(exc.errno, f"cannot write {path}: {exc.strerror}") from exc


def consume_clean_shutdown_marker(directory: str) -> bool:
    """True if the marker was present; it is removed (the log is now open, hence unclean)."""
    path = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_dir(directory)
    return True
