"""The partition leader's side of share groups (Kafka's ``SharePartitionManager``): the share
partitions this broker leads, the share sessions, the acquisition-lock timer, the group
configs and the durable state. The ShareFetch and ShareAcknowledge handlers call it.

- A share partition (``SharePartition``) is made on first use by this broker as the leader
  of its topic partition, from the state its share coordinator keeps (``SharePersister``:
  ReadShareGroupState with the partition's leader epoch, a direct call when this broker is
  the coordinator; ``ShareStateStore``: ``__share_group_state``); when its start offset is
  -1 (the group coordinator initialized it, Kafka 4.1), at the offset
  ``share.auto.offset.reset`` names: ``latest`` (the default) the high watermark,
  ``earliest`` the log start, ``by_duration:D`` the first record at most D old (the time
  index; the high watermark when there is none). A share partition the coordinator has no
  state for (never initialized, or deleted: INVALID_REQUEST) is not made; the failure is
  reported once to the request that uses it (``take_load_failure``). The load runs in a task (one per share partition):
  ShareFetch skips a share partition that is loading and is woken when it is loaded
  (``waiter_key``); ShareAcknowledge waits for it. The group coordinator's heartbeat handler
  starts the loads of a new assignment at once (``initialize``), as Kafka initializes a
  share partition when it is first assigned, so "latest" means "from the assignment on".
- A share partition belongs to the leader epoch it was loaded in: when this broker stops
  leading the topic partition (``on_leadership``) or leads it again in a newer epoch, it is
  dropped and loaded again from the coordinator by whoever leads it; a new epoch of a
  leadership that went on (an ISR change) keeps it; a write the coordinator fences
  (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH: another leader took over) drops it too.
- Acquisition locks: one ``DeadlineTimer`` at the earliest lock deadline of any share
  partition; when it fires, expired records become available again (or are archived at
  the delivery limit), fetches waiting on those partitions are woken and the state is
  written.
- Every change of a share partition's state (acquisitions, acknowledgements, releases,
  archived records, SPSO moves) is written through the persister (WriteShareGroupState);
  ShareFetch and ShareAcknowledge answer after ``flushed``. Acquired records are written as
  available with their delivery count: a lock does not survive a leader change.
- Members: when a member leaves its share group or its share session closes, what it
  holds is released at once.

Event-loop affinity: the broker's loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.coordinator.runtime import DeadlineTimer
from pylog.group.group_configs import reset_duration_ms

from .persister import SharePersister
from .sessions import ShareSessionCache
from .share_partition import SharePartition
from .state_store import (
    SHARE_GROUP_STATE_TOPIC_NAME,
    UNINITIALIZED_START_OFFSET,
    ShareState,
    ShareStateStore,
)

if TYPE_CHECKING:
    from pylog.broker.server import Broker

__all__ = ["ShareService", "waiter_key"]

log = logging.getLogger("pylog.share")

ShareKey = tuple[str, uuid.UUID, int]  # group id, topic id, partition

#: Write errors after which this broker's share partition is stale: another leader took over
#: (FENCED_LEADER_EPOCH), an admin reset its state (FENCED_STATE_EPOCH), or its state was
#: deleted (INVALID_REQUEST: the share coordinator has no state for it, Kafka 4.1's "Write
#: operation on uninitialized share partition not allowed.").
_FENCED = frozenset({errors.FencedLeaderEpochError.code, errors.FencedStateEpochError.code,
                     errors.InvalidRequestError.code})


def waiter_key(group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[Any, ...]:
    """The ``PartitionWaiters`` key woken when records of a share partition become
    available again (released, lock expired) or the share partition was loaded."""
    return ("share", group_id, topic_id, partition)


class ShareService:
    """See the module docstring. One per broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.enabled = bool(cfg["group.share.enable"])
        self.sessions = ShareSessionCache()
        self.partitions: dict[ShareKey, SharePartition] = {}
        # The leader epoch each share partition was loaded in; loads under way.
        self.epochs: dict[ShareKey, int] = {}
        self._loads: dict[ShareKey, asyncio.Task[SharePartition | None]] = {}
        # Loads whose state read failed (error code, message), until a request reports it
        # (``take_load_failure``); no new load starts meanwhile, so a fetch waiting on the
        # share partition does not read the state again and again.
        self._load_failures: dict[ShareKey, tuple[int, str | None]] = {}
        self._by_id: dict[uuid.UUID, Any] = {}
        self.group_configs = broker.group_configs  # pylog.group.group_configs
        # The share coordinator's side (__share_group_state partitions led here) and the
        # share-partition leader's way to it. None when share groups are off.
        self.state: ShareStateStore | None = ShareStateStore(broker) if self.enabled else None
        self.persister: SharePersister | None = None if self.state is None else SharePersister(broker, self.state)
        self._timer = DeadlineTimer(broker.clock, self._expire)
        if self.persister is not None:
            self.persister.on_failed = self._drop_fenced

    async def start(self) -> None:
        """Single node: load the saved state before any share partition is made. Cluster
        mode: the coordinator's partitions load as this broker becomes their leader."""
        if self.state is None:
            return
        await self.state.start()
        if len(self.state):
            log.info("loaded the state of %d share partitions", len(self.state))

    def mark(self) -> int | None:
        """Taken by a request before its changes, given to ``flushed`` (``SharePersister.mark``)."""
        return None if self.persister is None else self.persister.mark()

    async def flushed(self, since: int | None = None) -> dict[ShareKey, int]:
        """Wait until the state changes made so far are written; the share partitions whose
        write failed, with the error codes, including those of flushes since the ``mark``
        ``since`` that ended before this call."""
        if self.persister is None:
            return {}
        return await self.persister.flushed(since)

    def _drop_fenced(self, failed: dict[ShareKey, int]) -> None:
        """After every flush: a share partition whose write was fenced (another leader took
        over, or an admin reset its state epoch) is stale: dropped, so its next use loads
        the coordinator's state, as Kafka's ``SharePartition`` is fenced and removed."""
        for key, code in failed.items():
            if code in _FENCED and key in self.partitions:
                log.info("share partition %s was fenced by its coordinator (%d): dropped", key, code)
                self._drop(key)
        self.arm()

    def forget(self, key: ShareKey) -> None:
        """The share partition's state was changed or deleted at its coordinator by an admin
        call: drop what this broker holds of it (its next use loads the new state). A load
        under way is left to finish (a fetch may be waiting on it): if it read the old state,
        its share partition's first write is fenced (FENCED_STATE_EPOCH) and it is dropped."""
        self._drop(key)
        self.arm()

    # ------------------------------------------------------------------ settings

    def lock_duration_ms(self, group_id: str) -> int:
        return self.group_configs.get(group_id, "share.record.lock.duration.ms")

    def delivery_count_limit(self, group_id: str) -> int:
        return self.group_configs.get(group_id, "share.delivery.count.limit")

    def max_record_locks(self, group_id: str) -> int:
        return self.group_configs.get(group_id, "share.partition.max.record.locks")

    def renew_enabled(self, group_id: str) -> bool:
        """``share.renew.acknowledge.enable`` (true by default): RENEW acknowledgements are
        refused with INVALID_RECORD_STATE when false, as in Kafka."""
        return bool(self.group_configs.get(group_id, "share.renew.acknowledge.enable"))

    def isolation_level(self, group_id: str) -> str:
        """``share.isolation.level``: read_uncommitted (the default) or read_committed."""
        return self.group_configs.get(group_id, "share.isolation.level")

    def _mono_ms(self) -> int:
        return round(self.broker.clock.monotonic() * 1000)

    # ------------------------------------------------------------------ topics

    def topic_of(self, topic_id: uuid.UUID) -> Any:
        """The local ``Topic`` with this id, or None. A cache by id, checked against the
        log manager's table (a topic deleted or re-created under its name is looked up
        again), so a fetch does not scan every topic for each partition."""
        topics = self.broker.log_manager.topics
        t = self._by_id.get(topic_id)
        if t is not None and topics.get(t.name) is t:
            return t
        self._by_id = {t.topic_id: t for t in topics.values()}
        return self._by_id.get(topic_id)

    def leader_bounds(self, topic: Any, partition: int) -> tuple[Any, int] | None:
        """(partition log, high watermark) when this broker leads the partition, else None."""
        p = topic.partitions[partition]
        replicas = self.broker.replicas
        if replicas.active:
            state = replicas.partitions.get((p.topic, p.index))
            if state is None or state.leader is None:
                return None
            return p.log, state.high_watermark
        if self.broker.cluster is not None:
            return None
        return p.log, p.log.log_end_offset

    def leader_epoch(self, topic: Any, partition: int) -> int:
        """This broker's leader epoch of the partition (0 on a single node)."""
        replicas = self.broker.replicas
        if replicas.active:
            state = replicas.partitions.get((topic.name, partition))
            if state is not None:
                return int(state.leader_epoch)
        return 0

    # ------------------------------------------------------------------ share partitions

    def loaded(self, group_id: str, topic: Any, partition: int) -> SharePartition | None:
        """The share partition when this broker leads the topic partition and has it loaded
        in the current leader epoch; else None, and when this broker leads the partition its
        load is started (``leads`` tells the two Nones apart)."""
        if self.leader_bounds(topic, partition) is None:
            return None
        key = (group_id, topic.topic_id, partition)
        epoch = self.leader_epoch(topic, partition)
        sp = self.partitions.get(key)
        if sp is not None and self.epochs.get(key) != epoch:
            self._drop(key)  # led again in a newer epoch: the coordinator has the state
            sp = None
        if sp is None:
            if key not in self._load_failures:
                self._start_load(key, topic, partition, epoch)
            return None
        sp.delivery_count_limit = self.delivery_count_limit(group_id)
        sp.max_in_flight = self.max_record_locks(group_id)
        sp.move_start(topic.partitions[partition].log.log_start_offset)
        return sp

    def leads(self, topic: Any, partition: int) -> bool:
        return self.leader_bounds(topic, partition) is not None

    async def share_partition(self, group_id: str, topic: Any, partition: int) -> SharePartition | None:
        """The share partition, loaded if need be (waits for the load); None when this
        broker does not lead the topic partition or the state could not be read."""
        sp = self.loaded(group_id, topic, partition)
        if sp is not None:
            return sp
        task = self._loads.get((group_id, topic.topic_id, partition))
        if task is None:
            return None
        await asyncio.shield(task)
        return self.loaded(group_id, topic, partition)

    async def wait_loaded(self, group_id: str, partitions: list[tuple[uuid.UUID, int]], timeout_s: float) -> None:
        """Start the loads of the share partitions this broker leads among ``partitions``
        (topic id, partition) and wait for them, at most ``timeout_s``."""
        tasks = []
        for topic_id, index in partitions:
            topic = self.topic_of(topic_id)
            if topic is None or not 0 <= index < len(topic.partitions) or self.loaded(group_id, topic, index):
                continue
            task = self._loads.get((group_id, topic_id, index))
            if task is not None:
                tasks.append(task)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    def _start_load(self, key: ShareKey, topic: Any, partition: int, epoch: int) -> None:
        task = self._loads.get(key)
        if task is not None and not task.done():
            return
        self._loads[key] = asyncio.get_running_loop().create_task(self._load(key, topic, partition, epoch))

    async def _load(self, key: ShareKey, topic: Any, partition: int, epoch: int) -> SharePartition | None:
        """ReadShareGroupState, then the share partition (at the reset offset when the start
        offset is -1, which is written at once)."""
        try:
            assert self.persister is not None
            r = await self.persister.read(key, epoch)
            bounds = self.leader_bounds(topic, partition)
            if bounds is None or self.leader_epoch(topic, partition) != epoch:
                return None  # no longer the leader (of this epoch)
            if r.error_code or r.state is None:
                # INVALID_REQUEST: its state was never initialized (not assigned yet, or the
                # group's state was deleted): Kafka 4.1's group coordinator initializes it.
                log.log(logging.DEBUG if r.error_code == errors.InvalidRequestError.code else logging.WARNING,
                        "cannot read the state of share partition %s-%d of group %s: error %d (%s)",
                        topic.name, partition, key[0], r.error_code, r.error_message)
                self._load_failures[key] = (r.error_code or errors.UnknownServerError.code, r.error_message)
                return None
            plog, hw = bounds
            group_id = key[0]
            limit = self.delivery_count_limit(group_id)
            max_locks = self.max_record_locks(group_id)
            st = r.state
            if st.start_offset != UNINITIALIZED_START_OFFSET:
                sp = SharePartition(max(st.start_offset, plog.log_start_offset), delivery_count_limit=limit,
                                    max_in_flight=max_locks, batches=st.batches)
                sp.state_epoch = st.state_epoch
                fresh = False
            else:
                start = await self._reset_offset(group_id, plog, hw)
                if self.leader_epoch(topic, partition) != epoch or self.leader_bounds(topic, partition) is None:
                    return None  # leadership moved while the time index was searched
                sp = SharePartition(start, delivery_count_limit=limit, max_in_flight=max_locks)
                sp.state_epoch = st.state_epoch
                fresh = True
            self.partitions[key] = sp
            self.epochs[key] = epoch
            if fresh:
                self._persist(key, sp)
            log.debug("share partition %s-%s[%d] of group %s starts at %d (leader epoch %d)", topic.name,
                      topic.topic_id, partition, group_id, sp.start_offset, epoch)
            return sp
        finally:
            if self._loads.get(key) is asyncio.current_task():
                del self._loads[key]
            self.broker.waiters.notify(waiter_key(*key))

    async def _reset_offset(self, group_id: str, plog: Any, hw: int) -> int:
        """Where a share partition without state starts (``share.auto.offset.reset``):
        earliest, the log start; latest, the high watermark; ``by_duration:D``, the first
        record whose timestamp is at least now - D (the time index, as ListOffsets by
        timestamp), else the high watermark."""
        reset = self.group_configs.get(group_id, "share.auto.offset.reset")
        if reset == "earliest":
            return int(plog.log_start_offset)
        duration = reset_duration_ms(reset)
        if duration is None:
            return hw
        found = await self.broker.io.run(plog.offset_for_timestamp, self.broker.clock.time_ms() - duration)
        if found is None or found.offset >= hw:
            return hw
        return max(int(found.offset), int(plog.log_start_offset))

    def take_load_failure(self, key: ShareKey) -> tuple[int, str | None] | None:
        """The error of the last failed load of ``key`` (then forgotten: the next use loads
        again), or None."""
        return self._load_failures.pop(key, None)

    def initialize(self, group_id: str, assignment: dict[uuid.UUID, set[int]]) -> None:
        """Start loading the share partitions of an assignment that this broker leads
        (their start offset is fixed then, not at the first fetch); a failed load of them is
        forgotten (they are assigned: their state was initialized since)."""
        for topic_id, parts in assignment.items():
            for p in parts:
                self._load_failures.pop((group_id, topic_id, p), None)
            topic = self.topic_of(topic_id)
            if topic is None:
                continue
            for p in parts:
                if 0 <= p < len(topic.partitions) and (group_id, topic_id, p) not in self.partitions:
                    self.loaded(group_id, topic, p)

    def _drop(self, key: ShareKey) -> None:
        """Forget a share partition (its records' locks go with it) and wake its fetches."""
        self._load_failures.pop(key, None)
        if self.partitions.pop(key, None) is not None:
            self.epochs.pop(key, None)
            self.broker.waiters.notify(waiter_key(*key))

    def on_leadership(self, topic: str, index: int, leader: bool, continued: bool = False) -> None:
        """The replica manager: this broker starts or stops leading ``topic``-``index``. On
        a resignation its share partitions go (the new leader reads their state). A new
        leader epoch of a leadership that went on (``continued``: the ISR changed) keeps them,
        their records' locks included: nobody else led the partition in between, and their
        writes carry the new epoch from now on."""
        t = self.broker.log_manager.topics.get(topic)
        if t is None:
            return
        keys = [k for k in self.partitions if k[1] == t.topic_id and k[2] == index]
        if leader and continued:
            epoch = self.leader_epoch(t, index)
            for key in keys:
                self.epochs[key] = epoch
            return
        for key in keys:
            self._drop(key)
        self.arm()

    def changed(self, key: ShareKey, sp: SharePartition, woke: bool = False) -> None:
        """After a change of ``sp``: write its state, wake fetches when records became
        available, re-arm the lock timer."""
        self._persist(key, sp)
        if woke:
            self.broker.waiters.notify(waiter_key(*key))
        self.arm()

    def _persist(self, key: ShareKey, sp: SharePartition) -> None:
        if self.persister is not None and self.partitions.get(key) is sp:
            self.persister.write(key, ShareState(sp.state_epoch, self.epochs.get(key, 0), sp.start_offset,
                                                 sp.state_batches()))

    def arm(self) -> None:
        deadlines = [d for d in (sp.next_deadline_ms() for sp in self.partitions.values())
                     if d is not None]
        self._timer.arm(min(deadlines) if deadlines else None)

    def _expire(self) -> None:
        now = self._mono_ms()
        for key, sp in self.partitions.items():
            if sp.expire_locks(now):
                self._persist(key, sp)
                self.broker.waiters.notify(waiter_key(*key))
        self.arm()

    # ------------------------------------------------------------------ members

    def release_member(self, group_id: str, member_id: str) -> None:
        """Give back what ``member_id`` holds in every share partition of ``group_id``."""
        for key, sp in self.partitions.items():
            if key[0] == group_id and sp.release_member(member_id):
                self._persist(key, sp)
                self.broker.waiters.notify(waiter_key(*key))
        self.arm()

    def on_member_removed(self, group_id: str, member_id: str) -> None:
        """The group coordinator removed a member (left, session timed out). Its share
        session stays: a closing consumer sends its final acknowledgements (epoch -1) after
        or alongside its leave heartbeat; the cache's bound and epoch -1 end sessions."""
        self.release_member(group_id, member_id)

    def on_group_deleted(self, group_id: str) -> None:
        """A share group was deleted (its state was deleted at the coordinators before, by
        ``pylog.group.share.lifecycle``): its share partitions and sessions here go."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            self._drop(key)
        self.sessions.remove_group(group_id)
        self.arm()

    def on_topic_deleted(self, topic: Any) -> None:
        """A topic was deleted (single node): its share partitions and their state go; if
        it was ``__share_group_state`` itself, the state store resigns (the topic is made
        again by the next write; share partitions that do not change are not rewritten)."""
        if self.state is not None and topic.name == SHARE_GROUP_STATE_TOPIC_NAME:
            self.state.on_topic_deleted()
            return
        for key in [k for k in self.partitions if k[1] == topic.topic_id]:
            self._drop(key)
            if self.persister is not None:
                self.persister.delete(key)
        self.arm()

    async def shutdown(self) -> None:
        self._timer.cancel()
        for task in list(self._loads.values()):
            task.cancel()
        if self.persister is not None:
            await self.persister.close()
        if self.state is not None:
            await self.state.shutdown()
