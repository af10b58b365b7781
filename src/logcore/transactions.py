"""What a Log offers for transactions (Kafka's ``UnifiedLog`` transaction methods).

A mixin of :class:`logcore.log.Log`:

- ``append_control``: write a COMMIT or ABORT marker (a control batch, see
  :mod:`logcore.txn_index`) through the ordinary append path: the producer state checks
  its epoch and coordinator epoch and closes the producer's open transaction; an ABORT of
  a transaction with data adds an entry to the ``.txnindex`` of the segment the marker
  lands in;
- ``first_unstable_offset`` / ``last_stable_offset``: the LSO read_committed consumers
  read up to (Kafka's ``UnifiedLog.lastStableOffset``; a single node's high watermark is
  its log end offset); ``high_watermark`` (what the replica manager last reported) and
  ``cleanable_upper_bound`` (the LSO at it: where the log cleaner stops);
- ``aborted_transactions``: the aborted transactions overlapping a fetched range, from
  the ``.txnindex`` files (never by scanning data), as ``LocalLog.collectAbortedTransactions``;
- ``active_producers``: the producer state, for DescribeProducers.

Thread-safety: ``append_control`` serialises on the log's lock like ``append``;
``first_unstable_offset``, ``last_stable_offset`` and ``aborted_transactions`` take no
lock (they read values the writer publishes whole); ``active_producers`` takes the lock.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any

from .append import LogAppendInfo
from .producer_state import ProducerInfo, ProducerStateManager
from .txn_index import AbortedTxn, control_batch


class LogTransactions:
    """Mixin of :class:`logcore.log.Log`: transaction markers and the last stable offset."""

    clock: Any
    producer_state: ProducerStateManager
    _lock: threading.RLock
    _log_end_offset: int
    _log_start_offset: int
    _snapshot: Any
    #: The high watermark the owner reported (None: not replicated, a single node).
    _tracked_high_watermark: int | None = None

    def append(self, records: Any, *, assign_offsets: bool = True,
               leader_epoch: int | None = None) -> LogAppendInfo:  # pragma: no cover - Log
        raise NotImplementedError

    def append_control(self, producer_id: int, producer_epoch: int, *, commit: bool,
                       coordinator_epoch: int, leader_epoch: int | None = None,
                       timestamp_ms: int | None = None) -> LogAppendInfo:
        """Append a transaction marker for ``producer_id`` (Kafka's
        ``appendAsLeader(..., origin = COORDINATOR)`` of an end-transaction marker).

        A marker for a producer without an open transaction on this log is written all
        the same (Kafka does) and adds no ``.txnindex`` entry.

        Args:
            commit: True for COMMIT, False for ABORT.
            coordinator_epoch: the transaction coordinator's epoch (its partition's leader
                epoch); kept per producer to fence older coordinators.
            leader_epoch: stamped into the batch, as ``append``'s.
            timestamp_ms: the marker's timestamp (the log's clock when None).

        Returns:
            The append's :class:`LogAppendInfo`; ``first_offset`` is the marker's offset.

        Raises:
            InvalidProducerEpochError: the marker's epoch is older than the producer's.
            TransactionCoordinatorFencedError: ``coordinator_epoch`` is older than the
                one the log last saw for the producer.
            LogDirError: the write failed. LogcoreError: the log is closed.
        """
        if producer_id < 0:
            raise ValueError(f"a transaction marker needs a producer id, got {producer_id}")
        ts = self.clock.time_ms() if timestamp_ms is None else timestamp_ms
        batch = control_batch(producer_id, producer_epoch, commit=commit,
                              coordinator_epoch=coordinator_epoch, timestamp_ms=ts,
                              partition_leader_epoch=-1 if leader_epoch is None else leader_epoch)
        return self.append(batch, leader_epoch=leader_epoch)

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, None when none is open (no lock).
        Never below the log start offset (retention or DeleteRecords may have removed the
        transaction's first batches; Kafka clamps it the same way)."""
        first = self.producer_state.first_unstable_offset
        return None if first is None else max(first, self._log_start_offset)

    def last_stable_offset(self, high_watermark: int | None = None) -> int:
        """The offset read_committed consumers read up to: the first unstable offset when
        below ``high_watermark`` (the log end offset when None), else the high watermark.

        On a replicated log (:meth:`track_high_watermark`) a transaction whose marker is
        not below the high watermark is still unstable: a new leader elected from the
        ISR may not have that marker yet (Kafka's ``unreplicatedTxns``)."""
        hw = self._log_end_offset if high_watermark is None else high_watermark
        first = self.first_unstable_offset
        for txn_first, marker in self.producer_state.unreplicated:
            if marker >= hw and (first is None or txn_first < first):
                first = max(txn_first, self._log_start_offset)
        return hw if first is None or first > hw else first

    def track_high_watermark(self, high_watermark: int) -> None:
        """This log is replicated: from now on transactions completed by a marker stay
        unstable until :meth:`on_high_watermark` passes the marker (called by the replica
        manager when the partition becomes a leader or a follower)."""
        with self._lock:
            self._tracked_high_watermark = high_watermark
            self.producer_state.track_unreplicated = True
            self.producer_state.prune_unreplicated(high_watermark)

    def on_high_watermark(self, high_watermark: int) -> None:
        """The high watermark moved: forget the completed transactions below it."""
        self._tracked_high_watermark = high_watermark
        if self.producer_state.unreplicated:
            with self._lock:
                self.producer_state.prune_unreplicated(high_watermark)

    @property
    def high_watermark(self) -> int:
        """The high watermark last reported (:meth:`track_high_watermark`,
        :meth:`on_high_watermark`), never above the log end offset (a truncation may have
        cut below it); the log end offset on a log that is not replicated (no lock)."""
        hw = self._tracked_high_watermark
        leo = self._log_end_offset
        return leo if hw is None or hw > leo else hw

    def cleanable_upper_bound(self) -> int:
        """Where the log cleaner must stop (with the active segment's base, which
        ``first_uncleanable_offset`` adds): the last stable offset at the high watermark,
        as Kafka's ``LogCleanerManager.cleanableOffsets``. A record above the high
        watermark may still be truncated by a failover, so it must not make the cleaner
        drop the committed record of its key below; a single node's bound is its last
        stable offset at the log end (no lock)."""
        return self.last_stable_offset(self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions that overlap [fetch_offset, upper_bound): those whose
        ABORT marker is at or after ``fetch_offset`` and whose first offset is below
        ``upper_bound``, oldest marker first.

        Read from the ``.txnindex`` of the segment holding ``fetch_offset`` and the later
        ones, stopping at the first entry whose last stable offset is >= upper_bound (no
        later marker can close a transaction that started below the bound: Kafka's
        ``collectAbortedTxns``).
        """
        view = self._snapshot
        segments = view.segments
        i = max(bisect.bisect_right(view.bases, fetch_offset) - 1, 0)
        out: list[AbortedTxn] = []
        for seg in segments[i:]:
            if seg.txn_index.collect(fetch_offset, upper_bound, out):
                break
        return out

    def active_producers(self) -> list[ProducerInfo]:
        """Every producer the log tracks (DescribeProducers, Kafka's ``activeProducers``)."""
        with self._lock:
            return self.producer_state.active_producers()
