"""Test driver for the sans-IO group coordinator (pylog.group.coordinator).

``GroupHarness`` plays the asyncio glue's part with a manual clock: it appends every write to
an in-memory log (or fails it with a chosen code), fires timers in deadline order as time
advances, and can load a fresh coordinator from the log to check replay. Transaction markers
(``marker``) go into the same log, as the partition side appends them, so that replay sees
records and markers in one order with their offsets.
"""

from __future__ import annotations

import itertools
from typing import Any

from pylog._clock import ManualClock
from pylog.group.config import GroupCoordinatorConfig
from pylog.group.coordinator import GroupCoordinator
from pylog.protocol._schema import ConsumerProtocolAssignment, ConsumerProtocolSubscription

MEMBER_ID_REQUIRED = 79


def subscription(*topics: str) -> bytes:
    """ConsumerProtocol subscription bytes (int16 version 0 + v0 fields)."""
    return b"\x00\x00" + ConsumerProtocolSubscription(topics=list(topics)).encode(0)


def assignment(**partitions: list[int]) -> bytes:
    parts = [ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=p) for t, p in partitions.items()]
    return b"\x00\x00" + ConsumerProtocolAssignment(assigned_partitions=parts).encode(0)


class GroupHarness:
    def __init__(self, config: GroupCoordinatorConfig | None = None, **settings: Any) -> None:
        self.clock = ManualClock()
        self.config = config or GroupCoordinatorConfig(**settings)
        counter = itertools.count(1)
        self.new_uuid = lambda: f"u{next(counter)}"
        self.coord = GroupCoordinator(self.clock, self.config, new_uuid=self.new_uuid)
        self.log: list[tuple[bytes, bytes | None]] = []  # the records, without markers
        # Everything in log order; the index is the log offset: ("record", key, value,
        # producer id or -1) or ("marker", producer id, commit).
        self.entries: list[tuple[Any, ...]] = []
        self.fail_code: int | None = None  # when set, every write fails with it
        self.writes_seen = 0

    # ------------------------------------------------------------------ glue

    def flush(self) -> None:
        while True:
            writes = self.coord.take_writes()
            if not writes:
                return
            for w in writes:
                self.writes_seen += 1
                if self.fail_code is not None:
                    w.fail(self.fail_code)
                else:
                    base = len(self.entries)
                    self.entries.extend(("record", k, v, w.producer_id) for k, v in w.records)
                    self.log.extend(w.records)
                    w.complete(base)

    def now_ms(self) -> int:
        return round(self.clock.monotonic() * 1000)

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms``, firing each timer at its own deadline."""
        target = self.now_ms() + ms
        while True:
            deadline = self.coord.next_deadline_ms()
            if deadline is None or deadline > target:
                break
            if deadline > self.now_ms():
                self.clock.advance(deadline - self.now_ms())
            self.coord.tick()
            self.flush()
        if target > self.now_ms():
            self.clock.advance(target - self.now_ms())
        self.coord.tick()
        self.flush()

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.coord, method)(*args, **kwargs)
        self.flush()
        return result

    # ------------------------------------------------------------------ shortcuts

    def join(self, group: str, member_id: str = "", *, protocols: list[tuple[str, bytes]] | None = None,
             session: int = 10_000, rebalance: int = 30_000, instance: str | None = None,
             client_id: str = "client", version: int = 5, protocol_type: str = "consumer") -> Any:
        return self.call("join_group", group, member_id, protocol_type,
                         protocols if protocols is not None else [("range", subscription("t"))],
                         session, rebalance, instance, client_id, "/127.0.0.1", version)

    def join_new(self, group: str, **kwargs: Any) -> Any:
        """Join as a new member, doing the MEMBER_ID_REQUIRED round trip when it applies."""
        first = self.join(group, **kwargs)
        if first.done and first.result.error_code == MEMBER_ID_REQUIRED:
            return self.join(group, first.result.member_id, **kwargs)
        return first

    def stable_group(self, group: str, n: int, **kwargs: Any) -> list[str]:
        """Form a Stable group of ``n`` dynamic members; returns member ids, leader first."""
        pendings = [self.join_new(group, client_id=f"c{i}", **kwargs) for i in range(n)]
        # Joiners after the first extend the initial delay once more.
        self.advance(self.config.initial_rebalance_delay_ms * (1 if n == 1 else 2))
        results = [p.result for p in pendings]
        assert all(r.error_code == 0 for r in results), results
        leader = results[0].leader
        ids = [r.member_id for r in results]
        ids.sort(key=lambda m: m != leader)
        gen = results[0].generation_id
        syncs = [self.call("sync_group", group, gen, m) for m in ids[1:]]
        syncs.append(self.call("sync_group", group, gen, leader, [(m, f"A-{m}".encode()) for m in ids]))
        assert all(s.done and s.result.error_code == 0 for s in syncs), syncs
        return ids

    def marker(self, producer_id: int, commit: bool) -> int:
        """Append a COMMIT/ABORT marker of ``producer_id`` and tell the coordinator, as the
        partition side does after WriteTxnMarkers; returns the marker's offset."""
        offset = len(self.entries)
        self.entries.append(("marker", producer_id, commit))
        self.coord.on_txn_marker(producer_id, commit, offset)
        self.flush()
        return offset

    def replayed(self) -> GroupCoordinator:
        """A fresh coordinator loaded from the records and markers written so far."""
        fresh = GroupCoordinator(self.clock, self.config, new_uuid=self.new_uuid)
        fresh.begin_load()
        for offset, entry in enumerate(self.entries):
            if entry[0] == "marker":
                fresh.on_txn_marker(entry[1], entry[2], offset)
            else:
                fresh.replay(entry[1], entry[2], offset=offset, producer_id=entry[3])
        fresh.complete_load()
        return fresh
