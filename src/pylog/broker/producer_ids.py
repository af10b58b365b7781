"""Producer ids for idempotent producers, unique across broker restarts.

Kafka's controller hands out blocks of ids (``ProducerIdManager``, blocks of 1000) and
persists the high-water mark before a block is used. This single-node broker does the same
with a file in its log directory: ``producer-id-block`` holds one line, the first id that
has NOT been reserved yet. Taking a new block writes the new mark to a temporary file,
fsyncs it, renames it over the old one and fsyncs the directory, and only then hands out
ids from the block, so a crash can waste the rest of a block but never reuse an id.

Thread-safety: ``next_id`` takes a lock (the handler runs it on the event loop; the lock
keeps direct users safe too).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from logcore.checkpoint import fsync_dir

FILE_NAME = "producer-id-block"
BLOCK_SIZE = 1000
_MAX_ID = 2**63 - 1


class ProducerIdExhaustedError(Exception):
    """Every int64 producer id has been handed out."""


class ProducerIdAllocator:
    """Hands out increasing producer ids, reserving them ``block_size`` at a time on disk.

    Args:
        directory: where ``producer-id-block`` lives (the broker's log dir).
        block_size: ids reserved per disk write.

    Raises:
        ValueError: the file exists but does not hold a non-negative integer (never
            silently restart at 0: ids could repeat).
    """

    def __init__(self, directory: str, block_size: int = BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.path = os.path.join(directory, FILE_NAME)
        self.directory = directory
        self.block_size = block_size
        self._lock = threading.Lock()
        mark = self._read_mark()
        self._next = mark  # next id to hand out
        self._limit = mark  # first id not reserved on disk

    def _read_mark(self) -> int:
        try:
            with open(self.path, encoding="ascii") as f:
                text = f.read().strip()
        except FileNotFoundError:
            return 0
        except UnicodeDecodeError:
            text = "<not ascii>"
        if not text.isdigit():
            raise ValueError(f"{self.path} does not hold a producer id mark: {text[:40]!r}")
        return int(text)

    def _reserve(self, new_limit: int) -> None:
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            os.write(fd, f"{new_limit}\n".encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.directory)

    def next_id(self) -> int:
        """A producer id never returned before by this directory."""
        with self._lock:
            if self._next >= self._limit:
                if self._next > _MAX_ID - self.block_size:
                    raise ProducerIdExhaustedError("no producer ids left")
                new_limit = self._next + self.block_size
                self._reserve(new_limit)
                self._limit = new_limit
            pid = self._next
            self._next += 1
            return pid


class ProducerIdBlockUnavailableError(Exception):
    """No block of producer ids could be claimed right now (ZooKeeper unreachable): retry."""


class BlockProducerIdAllocator:
    """Hands out ids from blocks claimed elsewhere, one block at a time: in cluster mode each
    block comes from ZooKeeper's ``/latest_producer_id_block`` (``ZkStore.
    claim_producer_id_block``), so ids are unique across every broker of the cluster, as
    Kafka's ``ZkProducerIdManager`` makes them. A per-broker file would not be: two brokers
    would both start at 0, and two producers with one id collide on a partition.

    Args:
        claim: returns the next block, ``(first id, last id)`` inclusive; it blocks (run
            ``next_id`` off the event loop) and may raise anything on a ZooKeeper failure.

    Thread-safety: ``next_id`` takes a lock.
    """

    def __init__(self, claim: Callable[[], tuple[int, int]]) -> None:
        self._claim = claim
        self._lock = threading.Lock()
        self._next = 0
        self._limit = 0  # nothing claimed yet

    def next_id(self) -> int:
        """The next id of the current block, claiming a new block when it is used up.

        Raises:
            ProducerIdBlockUnavailableError: claiming a block failed (the cause is chained).
        """
        with self._lock:
            if self._next >= self._limit:
                try:
                    first, last = self._claim()
                except Exception as exc:
                    raise ProducerIdBlockUnavailableError(
                        f"cannot claim a producer id block: {exc!r}; the client retries") from exc
                self._next, self._limit = first, last + 1
            pid = self._next
            self._next += 1
            return pid
