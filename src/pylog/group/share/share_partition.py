"""One share partition: a share group's view of one topic partition (KIP-932; Kafka's
``SharePartition``), as a sans-IO state machine.

Offsets below the share-partition start offset (SPSO, ``start_offset``) are done with
(acknowledged or archived). Offsets from ``end_offset`` (the SPEO: one past the last offset
ever acquired) on have never been delivered. In between lie the in-flight records, each in
one state::

    AVAILABLE ──acquire──> ACQUIRED ──ACCEPT──────────────> ACKNOWLEDGED
        ^                     │  ├────REJECT / GAP────────> ARCHIVED
        │                     │  └──RELEASE / lock expired─> AVAILABLE, or ARCHIVED when
        └─────────────────────┘                               delivery_count reached the limit

Offsets a share group must never deliver (transaction markers; aborted transactions' data
under read_committed) are archived by ``acquire`` when a read reaches them (its ``skip``
ranges), never acquired. Every acquisition counts a delivery (the first delivery has count 1). A record acquired
``group.share.delivery.count.limit`` times is archived instead of being made available again
(Kafka archives at release or lock expiry once ``deliveryCount >= limit``). Acquired records
carry a lock that expires ``group.share.record.lock.duration.ms`` after the acquisition
(``expire_locks``); a member that leaves or whose share session closes gives its records back
(``release_member``). The SPSO moves past a prefix of acknowledged/archived records;
``group.share.partition.max.record.locks`` bounds the window ``end_offset - start_offset``
(no new records are acquired beyond it, as Kafka's in-flight bound).

The state is kept per offset (at most max.record.locks entries by the window bound), and the
durable form (``state_batches``) is Kafka's ``ShareSnapshotValue``: runs of equal (state,
delivery count), ACQUIRED written as AVAILABLE (a lock does not survive a restart).

Not thread-safe: the broker's event loop owns every share partition.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from pylog.errors import InvalidRecordStateError, InvalidRequestError

_MAX_OFFSET = (1 << 63) - 1

__all__ = ["AcknowledgeType", "RecordState", "SharePartition", "StateBatch", "AcquiredRange"]


class RecordState(IntEnum):
    """Kafka's ``RecordState`` ids (the durable ``DeliveryState`` uses 0, 2 and 4)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """The AcknowledgeTypes of ShareFetch / ShareAcknowledge (4, Renew, is v2's)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True)
class StateBatch:
    """A run of offsets with one durable state and delivery count (``ShareSnapshotValue``)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class AcquiredRange:
    """An ``AcquiredRecords`` entry of a ShareFetch answer."""

    first_offset: int
    last_offset: int
    delivery_count: int


class _InFlight:
    __slots__ = ("state", "delivery_count", "member_id", "deadline_ms")

    def __init__(self, state: RecordState, delivery_count: int) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = ""
        self.deadline_ms = 0


class SharePartition:
    """The in-flight records of one (group, topic partition). See the module docstring.

    Args:
        start_offset: the SPSO to begin with (from the durable state, or from
            ``share.auto.offset.reset``: the log end for "latest", the log start for
            "earliest").
        delivery_count_limit: group.share.delivery.count.limit.
        max_in_flight: group.share.partition.max.record.locks.
        batches: the durable state's batches above ``start_offset`` (after a restart).
    """

    def __init__(self, start_offset: int, *, delivery_count_limit: int, max_in_flight: int,
                 batches: Iterable[StateBatch] = ()) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self._records: dict[int, _InFlight] = {}
        self.state_epoch = 0
        # Bumped on every change of durable state (a persister writes when it moved).
        self.version = 0
        for b in batches:
            if b.last_offset < start_offset:
                continue
            state = RecordState(b.delivery_state) if b.delivery_state in (0, 2, 4) \
                else RecordState.AVAILABLE
            for off in range(max(b.first_offset, start_offset), b.last_offset + 1):
                self._records[off] = _InFlight(state, b.delivery_count)
            self.end_offset = max(self.end_offset, b.last_offset + 1)
        # Offsets in the window with no batch (none in Kafka's snapshots) are available.
        for off in range(self.start_offset, self.end_offset):
            self._records.setdefault(off, _InFlight(RecordState.AVAILABLE, 0))
        self._advance_start()

    # ------------------------------------------------------------------ reading

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of an in-flight offset; None outside the window."""
        r = self._records.get(offset)
        return None if r is None else (r.state, r.delivery_count)

    def next_fetch_offset(self) -> int | None:
        """Where a fetch must read the log from: the first AVAILABLE in-flight offset, else
        the end offset; None when the window is full and nothing in it is available."""
        for off in range(self.start_offset, self.end_offset):
            if self._records[off].state == RecordState.AVAILABLE:
                return off
        if self.in_flight() >= self.max_in_flight:
            return None
        return self.end_offset

    def next_deadline_ms(self) -> int | None:
        """The earliest acquisition-lock deadline, or None when nothing is acquired."""
        deadlines = [r.deadline_ms for r in self._records.values() if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def acquired_count(self, member_id: str | None = None) -> int:
        return sum(1 for r in self._records.values() if r.state == RecordState.ACQUIRED
                   and (member_id is None or r.member_id == member_id))

    # ------------------------------------------------------------------ transitions

    def acquire(self, member_id: str, first_offset: int, last_offset: int, max_records: int,
                now_ms: int, lock_duration_ms: int,
                skip: Sequence[tuple[int, int]] = (), *,
                batches: Sequence[tuple[int, int]] | None = None,
                batch_size: int = 0) -> list[AcquiredRange]:
        """Acquire for ``member_id`` the acquirable offsets among ``[first_offset,
        last_offset]`` (the offsets of the batches a log read returned): AVAILABLE
        in-flight ones and new ones from ``end_offset`` on, up to ``max_records`` and the
        in-flight bound. Each acquisition counts a delivery and locks the record until
        ``now_ms + lock_duration_ms``.

        ``skip``: ascending inclusive ranges never to deliver (transaction markers, aborted
        data under read_committed: ``pylog.group.share.transactions``). Their AVAILABLE and
        new offsets met on the way are ARCHIVED (with their delivery count unchanged), and
        count neither as records nor against ``max_records``.

        ``batches``: the (base offset, last offset) of each batch of the read, ascending.
        Without them (ShareAcquireMode 1, record-limit, KIP-1206) at most ``max_records``
        offsets are acquired, splitting a batch: its other offsets stay AVAILABLE for the
        next fetch. With them (mode 0, batch-optimized) the acquisition goes on to the end
        of the batch holding the ``max_records``-th acquired offset, so ``max_records`` may
        be exceeded (as Kafka's ``lastOffsetFromBatchWithRequestOffset``); and the ranges
        are cut at a batch boundary once a range holds at least ``batch_size`` offsets
        (Kafka's ``createBatches``; 0: never cut). The in-flight bound holds in both modes.

        Returns the acquired offsets as ranges of consecutive offsets with one delivery
        count (the ``AcquiredRecords`` of the answer), in offset order.
        """
        out: list[AcquiredRange] = []
        taken = 0
        archived = 0
        deadline = now_ms + lock_duration_ms
        off = max(first_offset, self.start_offset)
        si = 0
        # Batch-optimized: once max_records are taken, go on to the end of that batch.
        finish = -1
        while off <= last_offset and (taken < max_records or off <= finish):
            while si < len(skip) and skip[si][1] < off:
                si += 1
            unreadable = si < len(skip) and skip[si][0] <= off
            r = self._records.get(off)
            if r is None:
                if off < self.end_offset:  # cannot happen: the window is dense
                    off += 1
                    continue
                if self.in_flight() >= self.max_in_flight:
                    break
                if off > self.end_offset:
                    # A read that skipped offsets (none on a dense log): those before are
                    # new and available.
                    for gap in range(self.end_offset, off):
                        self._records[gap] = _InFlight(RecordState.AVAILABLE, 0)
                r = self._records[off] = _InFlight(RecordState.AVAILABLE, 0)
                self.end_offset = off + 1
            if r.state != RecordState.AVAILABLE:
                off += 1
                continue
            if unreadable:
                r.state = RecordState.ARCHIVED
                archived += 1
                off += 1
                continue
            r.state = RecordState.ACQUIRED
            r.delivery_count += 1
            r.member_id = member_id
            r.deadline_ms = deadline
            taken += 1
            if taken == max_records and batches:
                finish = _batch_end(batches, off)
            if out and out[-1].last_offset == off - 1 and out[-1].delivery_count == r.delivery_count:
                last = out[-1]
                out[-1] = AcquiredRange(last.first_offset, off, last.delivery_count)
            else:
                out.append(AcquiredRange(off, off, r.delivery_count))
            off += 1
        if out or archived:
            self.version += 1
        if archived:
            self._advance_start()
        if batches and batch_size > 0:
            out = _split(out, batches, batch_size)
        return out

    def acknowledge(self, member_id: str, batches: Iterable[tuple[int, int, list[int]]],
                    now_ms: int = 0, lock_duration_ms: int = 0) -> bool:
        """Apply acknowledgement batches ``(first_offset, last_offset, types)``: ``types`` is
        one type for the whole range or one per offset. All-or-nothing: the batches are
        checked first.

        RENEW (KIP-1222) keeps the record ACQUIRED by the member with its delivery count and
        moves its lock deadline to ``now_ms + lock_duration_ms``; like Kafka it changes no
        durable state (a lock does not survive a restart anyway).

        Returns:
            Whether the durable state changed (False when every type was RENEW), i.e.
            whether the share partition has to be written.

        Raises:
            InvalidRequestError: a malformed batch (last < first, a types list of the wrong
                length, an unknown type).
            InvalidRecordStateError: an offset that is not ACQUIRED by ``member_id`` (Kafka's
                INVALID_RECORD_STATE: not acquired, acquired by another member, or lock
                expired).
        """
        plan: list[tuple[_InFlight, int]] = []
        for first, last, types in batches:
            if last < first or not types:
                raise InvalidRequestError(f"bad acknowledgement batch {first}-{last}")
            if len(types) != 1 and len(types) != last - first + 1:
                raise InvalidRequestError(
                    f"acknowledgement batch {first}-{last} has {len(types)} types")
            for i, off in enumerate(range(first, last + 1)):
                t = types[0] if len(types) == 1 else types[i]
                if t not in (0, 1, 2, 3, 4):
                    raise InvalidRequestError(f"unknown acknowledge type {t}")
                r = self._records.get(off)
                if t == AcknowledgeType.GAP and (r is None or off < self.start_offset):
                    continue  # a gap below the window is already done with
                if r is None or r.state != RecordState.ACQUIRED or r.member_id != member_id:
                    raise InvalidRecordStateError(
                        f"offset {off} is not acquired by member {member_id}")
                plan.append((r, t))
        durable = False
        for r, t in plan:
            if t == AcknowledgeType.RENEW:
                r.deadline_ms = now_ms + lock_duration_ms  # still acquired, lock renewed
                continue
            durable = True
            if t == AcknowledgeType.ACCEPT:
                r.state = RecordState.ACKNOWLEDGED
            elif t == AcknowledgeType.RELEASE:
                self._release(r)
                continue
            else:  # REJECT, GAP
                r.state = RecordState.ARCHIVED
            r.member_id = ""
        if durable:
            self.version += 1
            self._advance_start()
        return durable

    def _release(self, r: _InFlight) -> None:
        r.member_id = ""
        r.state = (RecordState.ARCHIVED if r.delivery_count >= self.delivery_count_limit
                   else RecordState.AVAILABLE)

    def expire_locks(self, now_ms: int) -> int:
        """Acquired records whose lock is due become available again (archived at the
        delivery limit). Returns how many were released."""
        n = 0
        for r in self._records.values():
            if r.state == RecordState.ACQUIRED and r.deadline_ms <= now_ms:
                self._release(r)
                n += 1
        if n:
            self.version += 1
            self._advance_start()
        return n

    def release_member(self, member_id: str) -> int:
        """Give back every record ``member_id`` holds (it left, or its session closed)."""
        n = 0
        for r in self._records.values():
            if r.state == RecordState.ACQUIRED and r.member_id == member_id:
                self._release(r)
                n += 1
        if n:
            self.version += 1
            self._advance_start()
        return n

    def move_start(self, log_start_offset: int) -> None:
        """The log's start moved past the SPSO (retention, DeleteRecords): those offsets
        are gone; the window starts at the new log start."""
        if log_start_offset <= self.start_offset:
            return
        for off in range(self.start_offset, min(log_start_offset, self.end_offset)):
            self._records.pop(off, None)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self.version += 1
        self._advance_start()

    def _advance_start(self) -> None:
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        records = self._records
        off = self.start_offset
        while off < self.end_offset and records[off].state in done:
            del records[off]
            off += 1
        self.start_offset = off

    # ------------------------------------------------------------------ durable form

    def state_batches(self) -> list[StateBatch]:
        """The in-flight window as ``ShareSnapshotValue`` batches (ACQUIRED as AVAILABLE)."""
        out: list[StateBatch] = []
        for off in range(self.start_offset, self.end_offset):
            r = self._records[off]
            state = RecordState.AVAILABLE if r.state == RecordState.ACQUIRED else r.state
            if out and out[-1].delivery_state == state and out[-1].delivery_count == r.delivery_count:
                b = out[-1]
                out[-1] = StateBatch(b.first_offset, off, b.delivery_state, b.delivery_count)
            else:
                out.append(StateBatch(off, off, int(state), r.delivery_count))
        return out


def _batch_end(batches: Sequence[tuple[int, int]], offset: int) -> int:
    """The last offset of the batch holding ``offset`` (``offset`` itself when none does)."""
    i = bisect.bisect_right(batches, (offset, _MAX_OFFSET)) - 1
    if i >= 0 and batches[i][0] <= offset <= batches[i][1]:
        return batches[i][1]
    return offset


def _split(ranges: list[AcquiredRange], batches: Sequence[tuple[int, int]],
           batch_size: int) -> list[AcquiredRange]:
    """Cut each range before a batch's base offset lying ``batch_size`` or more offsets past
    the start of the current piece (Kafka's ``createBatches``), so that a client gets
    pieces of about ``batch_size`` records that still end on batch boundaries."""
    out: list[AcquiredRange] = []
    for a in ranges:
        first = a.first_offset
        i = bisect.bisect_right(batches, (first, _MAX_OFFSET))
        while i < len(batches) and batches[i][0] <= a.last_offset:
            base = batches[i][0]
            if base - first >= batch_size:
                out.append(AcquiredRange(first, base - 1, a.delivery_count))
                first = base
            i += 1
        out.append(AcquiredRange(first, a.last_offset, a.delivery_count))
    return out
