"""``ReplicaManager``: the leader and follower roles of this broker's partitions.

Event-loop affinity: every method runs on the broker's loop (disk work goes to the broker's
I/O threads, ZooKeeper writes to a worker thread). ``PartitionLeader`` objects are only
touched here and from the Produce / Fetch handlers, on the same loop.

Roles come from LeaderAndIsr (``become_leader_or_follower``), as in Kafka's
``ReplicaManager.becomeLeaderOrFollower``:

- a request from an older controller epoch is refused (STALE_CONTROLLER_EPOCH);
- per partition, a leader epoch older than the one applied, or the same epoch with a
  partition epoch that is not newer, is ignored (STALE_CONTROLLER_EPOCH for it);
- a partition this broker does not list as a replica gets UNKNOWN_TOPIC_OR_PARTITION;
- a local log whose topic id differs from the request's (v5+) gets INCONSISTENT_TOPIC_ID;
- missing local logs are created (topic configs from ``broker.cluster.topic_config`` in
  cluster mode);
- **leader**: records the epoch's start offset in the leader-epoch cache, stops fetching,
  and starts a ``PartitionLeader`` (high watermark, ISR, acks=all) from the follower's high
  watermark; a broker that was already the leader keeps its followers' offsets
  (``PartitionLeader.continue_from``);
- **follower**: fails the produces waiting on the partition (NOT_LEADER_OR_FOLLOWER), and
  hands it to the fetcher for its leader (``num.replica.fetchers`` per leader); truncation
  happens in the fetcher, from the diverging epoch of Fetch v12+.

In single-node mode no LeaderAndIsr ever comes: ``active`` stays False and the request
paths never look here (no cost on them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from logcore.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from pylog import errors
from pylog.cluster.isr import IsrChange, PartitionLeader, follower_high_watermark

if TYPE_CHECKING:
    from pylog.broker.server import Broker
    from pylog.replication.fetcher import ReplicaFetcher

log = logging.getLogger("pylog.replication")

NO_LEADER = -1
#: Kafka's high-watermark checkpoint in each log directory (``topic partition offset``).
HW_CHECKPOINT = "replication-offset-checkpoint"


@dataclasses.dataclass(frozen=True)
class PartitionInfo:
    """One partition state of a LeaderAndIsr request, protocol-neutral."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    controller_epoch: int = 0
    topic_id: uuid.UUID | None = None


@dataclasses.dataclass(eq=False)
class ReplicaPartition:
    """What this broker knows of one replicated partition."""

    topic: str
    index: int
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    #: Set while this broker leads the partition.
    leader: PartitionLeader | None = None
    #: A follower's high watermark (min of the leader's and its own log end offset).
    follower_hw: int = 0
    #: The local log (logcore ``Log``): told when the high watermark moves.
    log: Any = None

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def high_watermark(self) -> int:
        return self.leader.high_watermark if self.leader is not None else self.follower_hw


class ReplicaManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.broker_id = broker.node_id
        self.partitions: dict[tuple[str, int], ReplicaPartition] = {}
        #: False until the first LeaderAndIsr: the request paths skip the manager then.
        self.active = False
        self.controller_epoch = -1
        self.live_leaders: dict[int, tuple[str, int]] = {}
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        # acks=all produces waiting for the high watermark, per partition.
        self._waiting: dict[tuple[str, int], list[tuple[int, asyncio.Future[int]]]] = {}
        self._isr_task: asyncio.Task[None] | None = None
        self._hw_task: asyncio.Task[None] | None = None
        # High watermarks read from the checkpoint at the first LeaderAndIsr (None: not yet).
        self._checkpointed: dict[tuple[str, int], int] | None = None
        self._isr_writes: set[asyncio.Task[None]] = set()
        #: Every ISR change applied, as (topic, partition, new ISR) (logged too).
        self.isr_changes: list[tuple[str, int, tuple[int, ...]]] = []
        #: ISR shrinks and expansions applied as a leader (Kafka's IsrShrinksPerSec,
        #: IsrExpandsPerSec; read by pylog.metrics).
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._lock = asyncio.Lock()

    # -- LeaderAndIsr / StopReplica ----------------------------------------------------------

    async def become_leader_or_follower(self, controller_id: int, controller_epoch: int,
                                        broker_epoch: int, partition_states: Iterable[PartitionInfo],
                                        live_leaders: Mapping[int, tuple[str, int]]
                                        ) -> dict[tuple[str, int], int]:
        """Apply a LeaderAndIsr request; returns an error code per partition.

        Raises:
            StaleControllerEpochError: the request comes from an older controller.
        """
        async with self._lock:
            if controller_epoch < self.controller_epoch:
                raise errors.StaleControllerEpochError(
                    f"LeaderAndIsr from controller {controller_id} with epoch {controller_epoch}; "
                    f"the current controller epoch is {self.controller_epoch}")
            self.controller_epoch = controller_epoch
            self.live_leaders.update(live_leaders)
            self.active = True
            self._start_isr_task()
            if self._checkpointed is None:
                self._checkpointed = await asyncio.get_running_loop().run_in_executor(
                    self.broker.executor, self._read_hw_checkpoint)
            results: dict[tuple[str, int], int] = {}
            for info in partition_states:
                key = (info.topic, info.partition)
                try:
                    results[key] = await self._apply(info)
                except errors.ApiError as exc:
                    log.warning("LeaderAndIsr for %s-%d from controller %d refused: %s",
                                info.topic, info.partition, controller_id, exc)
                    results[key] = exc.code
            return results

    async def _apply(self, info: PartitionInfo) -> int:
        key = (info.topic, info.partition)
        if self.broker_id not in info.replicas:
            log.warning("ignoring LeaderAndIsr for %s-%d: broker %d is not among its replicas %s",
                        info.topic, info.partition, self.broker_id, list(info.replicas))
            return errors.UnknownTopicOrPartitionError.code
        current = self.partitions.get(key)
        if current is not None and (
                info.leader_epoch < current.leader_epoch
                or (info.leader_epoch == current.leader_epoch
                    and info.partition_epoch <= current.partition_epoch)):
            log.info("ignoring LeaderAndIsr for %s-%d: leader epoch %d (partition epoch %d) is not "
                     "newer than the applied %d (%d)", info.topic, info.partition,
                     info.leader_epoch, info.partition_epoch, current.leader_epoch,
                     current.partition_epoch)
            return errors.StaleControllerEpochError.code
        partition = await self._ensure_log(info)
        if current is not None:
            hw = current.high_watermark
        else:  # a restart: the high watermark last checkpointed (Kafka's initial HW)
            hw = (self._checkpointed or {}).get(key, 0)
        state = ReplicaPartition(info.topic, info.partition, info.leader, info.leader_epoch,
                                 info.partition_epoch, info.replicas, info.isr,
                                 follower_hw=min(hw, partition.log.log_end_offset),
                                 log=partition.log)
        # Transactions whose marker is above the high watermark stay unstable (the LSO).
        partition.log.track_high_watermark(state.follower_hw)
        if info.leader == self.broker_id:
            await self._become_leader(state, partition, current)
        else:
            self._become_follower(state, partition, current)
        return 0

    async def _ensure_log(self, info: PartitionInfo) -> Any:
        """The local partition, its topic created (or given more partitions) when missing."""
        broker = self.broker
        manager = broker.log_manager
        topic = manager.topics.get(info.topic)
        if topic is None:
            configs: dict[str, Any] = {}
            cluster = getattr(broker, "cluster", None)
            if cluster is not None:
                configs = await cluster.topic_config(info.topic)
            try:
                topic = await manager.create_topic_async(
                    broker.executor, info.topic, info.partition + 1, 1, configs,
                    topic_id=info.topic_id)
                log.info("created the local log of %s for partitions up to %d (replica)",
                         info.topic, info.partition)
            except errors.TopicAlreadyExistsError:
                topic = manager.topics[info.topic]
        if info.topic_id is not None and topic.topic_id != info.topic_id:
            raise errors.InconsistentTopicIdError(
                f"the local log of {info.topic} has topic id {topic.topic_id}, the controller "
                f"names {info.topic_id}: the topic was deleted and created again; delete the "
                "stale local copy (StopReplica with delete) first")
        if len(topic.partitions) <= info.partition:
            topic = await manager.create_partitions_async(broker.executor, info.topic,
                                                          info.partition + 1)
        return topic.partitions[info.partition]

    async def _become_leader(self, state: ReplicaPartition, partition: Any,
                             previous: ReplicaPartition | None) -> None:
        key = state.key
        self._remove_from_fetchers(key)
        plog = partition.log
        broker = self.broker
        # After any append or truncation queued for the partition (the fetcher's).
        await broker.io.run_ordered(key, plog.assign_leader_epoch, state.leader_epoch)
        leo = plog.log_end_offset
        leader = PartitionLeader(
            broker_id=self.broker_id, replicas=state.replicas, isr=state.isr,
            leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch,
            log_end_offset=leo, high_watermark=min(state.follower_hw, leo),
            min_insync_replicas=partition.config["min.insync.replicas"],
            replica_lag_time_max_ms=broker.config["replica.lag.time.max.ms"],
            clock=broker.clock)
        state.leader = leader
        self.partitions[key] = state
        moved = False
        if previous is not None and previous.leader is not None:
            # Still the leader (a new leader or partition epoch): the followers' offsets
            # stay known, the high watermark need not wait for their next fetches.
            moved = leader.continue_from(previous.leader)
        if leader.on_append(leo) or moved:
            self._hw_moved(key)
        log.info("%s-%d: leader in epoch %d from offset %d (ISR %s, high watermark %d)",
                 state.topic, state.index, state.leader_epoch, leo, list(state.isr),
                 leader.high_watermark)
        await self._on_leadership(state.topic, state.index, True,
                                  continued=previous is not None and previous.leader is not None)

    def _become_follower(self, state: ReplicaPartition, partition: Any,
                         previous: ReplicaPartition | None) -> None:
        key = state.key
        was_leader = previous is not None and previous.leader is not None
        self.partitions[key] = state
        self._fail_waiting(key, errors.NotLeaderOrFollowerError.code)
        self._remove_from_fetchers(key)
        if state.leader_id != NO_LEADER:
            self._fetcher_for(state.leader_id, key).add(key)
        log.info("%s-%d: follower of broker %d in epoch %d from offset %d",
                 state.topic, state.index, state.leader_id, state.leader_epoch,
                 partition.log.log_end_offset)
        if was_leader:
            asyncio.ensure_future(self._on_leadership(state.topic, state.index, False))

    async def _on_leadership(self, topic: str, index: int, leader: bool, continued: bool = False) -> None:
        """Coordinator partitions: load on leading, unload on losing (when the services
        offer it). Other partitions: the share partitions of a partition no longer led
        here go (KIP-932: the new leader reads their state from the share coordinator);
        ``continued``: this broker led the partition until this new epoch."""
        from pylog.log.internal_topics import (
            GROUP_METADATA_TOPIC_NAME,
            SHARE_GROUP_STATE_TOPIC_NAME,
        )
        service: Any = None
        if topic == GROUP_METADATA_TOPIC_NAME:
            service = self.broker.groups
        elif topic == "__transaction_state":
            service = self.broker.txns
        elif topic == SHARE_GROUP_STATE_TOPIC_NAME:
            service = self.broker.share.state
        else:
            share = getattr(self.broker, "share", None)
            if share is not None:
                share.on_leadership(topic, index, leader, continued)
        if service is None:
            return
        hook = getattr(service, "on_become_leader" if leader else "on_resign", None)
        if hook is not None:
            await hook(index)

    async def stop_replicas(self, controller_id: int, controller_epoch: int,
                            partitions: Iterable[tuple[str, int, bool]]) -> dict[tuple[str, int], int]:
        """StopReplica: stop fetching (and leading) these partitions; delete their logs when
        asked. ``partitions``: (topic, partition, delete). Returns a code per partition.

        A broker holds a topic's partitions as one dense list, so a deleted partition whose
        topic still has other partitions replicated here is emptied in place (every segment
        deleted, restarted empty at offset 0, as a reassignment that moves one partition
        away needs); the topic's local log goes once none of its partitions is replicated
        here."""
        async with self._lock:
            if controller_epoch < self.controller_epoch:
                raise errors.StaleControllerEpochError(
                    f"StopReplica from controller {controller_id} with epoch {controller_epoch}; "
                    f"the current controller epoch is {self.controller_epoch}")
            self.controller_epoch = controller_epoch
            results: dict[tuple[str, int], int] = {}
            to_delete: dict[str, list[int]] = {}
            for topic, index, delete in partitions:
                key = (topic, index)
                self._remove_from_fetchers(key)
                self._fail_waiting(key, errors.NotLeaderOrFollowerError.code)
                state = self.partitions.pop(key, None)
                if state is not None and state.leader is not None:
                    await self._on_leadership(topic, index, False)
                results[key] = 0
                if delete:
                    to_delete.setdefault(topic, []).append(index)
            manager = self.broker.log_manager
            for topic, indexes in to_delete.items():
                if topic not in manager.topics:
                    continue
                if not any(k[0] == topic for k in self.partitions):
                    await manager.delete_topic_async(self.broker.executor, topic)
                    log.info("deleted the local log of %s (StopReplica)", topic)
                    continue
                for index in sorted(set(indexes)):
                    partition = manager.get_partition(topic, index)
                    if partition is not None:
                        await self.broker.io.run_ordered(
                            (topic, index), partition.log.truncate_fully_and_start_at, 0)
                        log.info("emptied the local log of %s-%d (StopReplica; other partitions "
                                 "of the topic stay on this broker)", topic, index)
            return results

    # -- fetchers ----------------------------------------------------------------------------

    def _fetcher_for(self, leader_id: int, key: tuple[str, int]) -> ReplicaFetcher:
        from pylog.replication.fetcher import ReplicaFetcher
        n = self.broker.config["num.replica.fetchers"]
        slot = (leader_id, hash(key) % n)
        fetcher = self._fetchers.get(slot)
        if fetcher is None:
            fetcher = ReplicaFetcher(self, leader_id, slot[1])
            self._fetchers[slot] = fetcher
            fetcher.start()
        return fetcher

    def _remove_from_fetchers(self, key: tuple[str, int]) -> None:
        for fetcher in self._fetchers.values():
            fetcher.remove(key)

    def leader_address(self, leader_id: int) -> tuple[str, int] | None:
        cluster = getattr(self.broker, "cluster", None)
        if cluster is not None:
            address = getattr(cluster, "broker_address", None)
            if address is not None:
                found = address(leader_id)
                if found is not None:
                    return tuple(found)  # type: ignore[return-value]
        return self.live_leaders.get(leader_id)

    def follower_state(self, key: tuple[str, int], leader_id: int) -> ReplicaPartition | None:
        """The partition's state if this broker still follows ``leader_id`` for it."""
        state = self.partitions.get(key)
        if state is None or state.leader is not None or state.leader_id != leader_id:
            return None
        return state

    def on_follower_fetched(self, state: ReplicaPartition, leader_hw: int, leo: int) -> None:
        hw = max(state.follower_hw, follower_high_watermark(leader_hw, leo))
        if hw != state.follower_hw:
            state.follower_hw = hw
            state.log.on_high_watermark(hw)

    # -- the leader side of Produce and Fetch ------------------------------------------------

    def on_local_append(self, key: tuple[str, int], log_end_offset: int) -> None:
        """The leader appended (Produce or a coordinator): the HW may move (ISR [self])."""
        state = self.partitions.get(key)
        if state is not None and state.leader is not None and \
                state.leader.on_append(log_end_offset):
            self._hw_moved(key)

    def on_follower_fetch(self, state: ReplicaPartition, replica_id: int, fetch_offset: int,
                          log_start_offset: int, log_end_offset: int) -> None:
        """Record a follower's position (its fetch offset is its log end offset).
        ``log_end_offset``: the leader's log now (an append finished on a thread may not
        have been reported by ``on_local_append`` yet).

        Raises:
            NotLeaderOrFollowerError / OffsetOutOfRangeError: from the leader's state.
        """
        leader = state.leader
        assert leader is not None
        moved = leader.on_append(log_end_offset) if log_end_offset > leader.log_end_offset else False
        moved_by_fetch, change = leader.on_follower_fetch(replica_id, fetch_offset,
                                                          log_start_offset)
        moved = moved or moved_by_fetch
        if change is not None:
            self._persist_isr(state, change)
        if moved:
            self._hw_moved(state.key)

    def _hw_moved(self, key: tuple[str, int]) -> None:
        state = self.partitions.get(key)
        if state is not None and state.leader is not None:
            state.log.on_high_watermark(state.leader.high_watermark)
        self._check_waiting(key)
        self.broker.waiters.notify(key)

    async def wait_for_acks(self, key: tuple[str, int], required_offset: int,
                            timeout_ms: int) -> int:
        """acks=all: wait until the high watermark reaches ``required_offset``; returns an
        error code (0, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER,
        REQUEST_TIMED_OUT)."""
        state = self.partitions.get(key)
        if state is None or state.leader is None:
            return errors.NotLeaderOrFollowerError.code
        done, error = state.leader.acks_all_outcome(required_offset)
        if done:
            return error.code if error is not None else 0
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        self._waiting.setdefault(key, []).append((required_offset, fut))
        # The future itself is awaited, with a timer that answers it: asyncio.wait_for would
        # add a wrapping waiter, one more loop iteration between the high watermark moving
        # and the produce resuming, on every acks=all request.
        timer = loop.call_later(max(timeout_ms, 0) / 1000.0, _time_out, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            entries = self._waiting.get(key)
            if entries is not None:
                entries[:] = [e for e in entries if e[1] is not fut]
                if not entries:
                    del self._waiting[key]

    def _check_waiting(self, key: tuple[str, int]) -> None:
        entries = self._waiting.get(key)
        if not entries:
            return
        state = self.partitions.get(key)
        if state is None or state.leader is None:
            self._fail_waiting(key, errors.NotLeaderOrFollowerError.code)
            return
        for required, fut in entries:
            if fut.done():
                continue
            done, error = state.leader.acks_all_outcome(required)
            if done:
                fut.set_result(error.code if error is not None else 0)

    def _fail_waiting(self, key: tuple[str, int], code: int) -> None:
        for _required, fut in self._waiting.pop(key, []):
            if not fut.done():
                fut.set_result(code)

    def waiting_count(self) -> int:
        return sum(len(v) for v in self._waiting.values())

    # -- ISR changes -------------------------------------------------------------------------

    def _start_isr_task(self) -> None:
        if self._isr_task is None:
            self._isr_task = asyncio.ensure_future(self._isr_expiration_loop())
            self._hw_task = asyncio.ensure_future(self._hw_checkpoint_loop())

    # -- the high-watermark checkpoint -------------------------------------------------------

    def _hw_path(self) -> str:
        return os.path.join(self.broker.log_manager.log_dir, HW_CHECKPOINT)

    def _read_hw_checkpoint(self) -> dict[tuple[str, int], int]:
        try:
            return read_offset_checkpoint(self._hw_path()) or {}
        except Exception as exc:  # noqa: BLE001 - a bad file costs only the initial HWs
            log.warning("ignoring %s: %s (high watermarks start at 0 and are learnt again "
                        "from the followers)", self._hw_path(), exc)
            return {}

    def checkpoint_high_watermarks(self) -> None:
        """Write every replicated partition's high watermark (blocking: a worker thread)."""
        offsets = {key: state.high_watermark for key, state in list(self.partitions.items())}
        write_offset_checkpoint(self._hw_path(), offsets)

    async def _hw_checkpoint_loop(self) -> None:
        interval = self.broker.config["replica.high.watermark.checkpoint.interval.ms"] / 1000.0
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            try:
                await loop.run_in_executor(self.broker.executor, self.checkpoint_high_watermarks)
            except Exception:  # noqa: BLE001 - retried at the next interval
                log.exception("writing %s failed", self._hw_path())

    async def _isr_expiration_loop(self) -> None:
        """Kafka's ``isr-expiration`` task: every replica.lag.time.max.ms / 2."""
        interval = self.broker.config["replica.lag.time.max.ms"] / 2000.0
        while True:
            await asyncio.sleep(interval)
            self.maybe_shrink_isr()

    def maybe_shrink_isr(self) -> None:
        for state in list(self.partitions.values()):
            if state.leader is not None:
                change = state.leader.maybe_shrink_isr()
                if change is not None:
                    self._persist_isr(state, change)

    def _persist_isr(self, state: ReplicaPartition, change: IsrChange) -> None:
        task = asyncio.ensure_future(self._write_isr(state, change))
        self._isr_writes.add(task)
        task.add_done_callback(self._isr_writes.discard)

    async def _write_isr(self, state: ReplicaPartition, change: IsrChange) -> None:
        """Persist an ISR change: conditionally on the partition epoch in ZooKeeper
        (docs/replication.md), or in memory when there is no cluster (tests, single node).

        A write that loses (another partition epoch in ZooKeeper) or fails (a lost
        connection: it may or may not have been applied) is followed by a read of the
        state ZooKeeper holds, as Kafka's ZooKeeper-mode leaders checked it: when it is the
        one proposed, the write went through (its answer was lost); when it still names this
        broker as leader in this leader epoch (the controller removed a dead replica, or an
        earlier write of ours landed unseen), the leader takes that ISR and partition epoch.
        Without this a leader whose cached partition epoch fell behind, with no LeaderAndIsr
        coming to correct it, would fail every later ISR change and keep a caught-up
        follower out of the ISR for good."""
        leader = state.leader
        assert leader is not None
        what = "expand" if change.expand else "shrink"
        cluster = getattr(self.broker, "cluster", None)
        new_epoch: int | None
        found: Any = None
        if cluster is None:
            new_epoch = change.partition_epoch + 1
        else:
            try:
                new_epoch, found = await asyncio.get_running_loop().run_in_executor(
                    None, _zk_write_isr, cluster.store, state, change, self.controller_epoch)
            except Exception:  # noqa: BLE001 - a failed write is retried by the next check
                log.exception("%s-%d: writing the ISR %s failed", state.topic, state.index,
                              list(change.new_isr))
                new_epoch = None
        if self.partitions.get(state.key) is not state or state.leader is not leader:
            return  # leadership changed meanwhile: the new state decides
        new_isr = change.new_isr
        if new_epoch is None:
            adopted = _adoptable(found, self.broker_id, change.leader_epoch)
            if adopted is None:
                log.info("%s-%d: ISR %s to %s lost to a newer partition state; waiting for the "
                         "controller", state.topic, state.index, what, list(change.new_isr))
                leader.on_isr_change_failed()
                return
            new_isr, new_epoch = adopted
            log.info("%s-%d: ISR %s to %s not written (partition epoch %d in ZooKeeper, %d "
                     "here); taking ZooKeeper's ISR %s", state.topic, state.index, what,
                     list(change.new_isr), new_epoch, change.partition_epoch, list(new_isr))
        state.isr = new_isr
        state.partition_epoch = new_epoch
        self.isr_changes.append((state.topic, state.index, new_isr))
        if change.expand:
            self.isr_expands += 1
        else:
            self.isr_shrinks += 1
        log.info("%s-%d: ISR %s from %s to %s (partition epoch %d)", state.topic, state.index,
                 what, sorted(leader.isr), list(new_isr), new_epoch)
        if leader.on_isr_change_persisted(new_isr, new_epoch):
            self._hw_moved(state.key)
        else:
            self._check_waiting(state.key)

    # -- lifecycle ---------------------------------------------------------------------------

    async def stop_fetchers(self) -> None:
        """Stop following (a controlled shutdown succeeded: a broker on its way out must
        not fetch itself back into an ISR, where acks=all would wait for it)."""
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        tasks = [t for fetcher in fetchers for t in fetcher.stop()]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def shutdown(self) -> None:
        tasks: list[asyncio.Task[Any]] = list(self._isr_writes)
        for task in (self._isr_task, self._hw_task):
            if task is not None:
                task.cancel()
                tasks.append(task)
        await self.stop_fetchers()
        await asyncio.gather(*tasks, return_exceptions=True)
        for key in list(self._waiting):
            self._fail_waiting(key, errors.NotLeaderOrFollowerError.code)
        if self.active:
            try:
                await asyncio.get_running_loop().run_in_executor(
                    self.broker.executor, self.checkpoint_high_watermarks)
            except Exception:  # noqa: BLE001 - shutdown goes on
                log.exception("writing %s at shutdown failed", self._hw_path())


def _time_out(fut: asyncio.Future[int]) -> None:
    if not fut.done():
        fut.set_result(errors.RequestTimedOutError.code)


def _zk_write_isr(store: Any, state: ReplicaPartition, change: IsrChange,
                  controller_epoch: int) -> tuple[int | None, Any]:
    """On a worker thread: the conditional write and the isr_change notification. Returns
    (the new partition epoch, None), or (None, the state ZooKeeper holds as
    ``(PartitionState, zk version)``, or None) when the write lost or failed; a write found
    applied after all is a success (and its notification is written)."""
    from pylog.cluster import zk_data
    from pylog.cluster.zk_store import Updated
    new = zk_data.PartitionState(leader=state.leader_id, leader_epoch=change.leader_epoch,
                                 isr=change.new_isr, controller_epoch=controller_epoch)
    try:
        result: Any = store.update_partition_state(state.topic, state.index, new,
                                                   change.partition_epoch)
    except Exception:  # noqa: BLE001 - maybe applied: ZooKeeper's state says
        log.warning("%s-%d: the ISR write failed; reading ZooKeeper's state", state.topic,
                    state.index, exc_info=True)
        result = None
    if isinstance(result, Updated):
        store.notify_isr_change([(state.topic, state.index)])
        return int(result.zk_version), None
    found = store.get_partition_state(state.topic, state.index)
    if found is not None and found[0].leader == state.leader_id \
            and found[0].leader_epoch == change.leader_epoch \
            and tuple(found[0].isr) == tuple(change.new_isr):
        # Our write landed and its answer was lost: tell the controller as a success would.
        store.notify_isr_change([(state.topic, state.index)])
        return int(found[1]), None
    return None, found


def _adoptable(found: Any, broker_id: int, leader_epoch: int
               ) -> tuple[tuple[int, ...], int] | None:
    """ZooKeeper's (ISR, partition epoch) when its state still names ``broker_id`` as the
    leader in ``leader_epoch`` (an ISR change made by someone else, which a LeaderAndIsr
    would bring); None when leadership moved on (the controller's LeaderAndIsr decides)."""
    if found is None:
        return None
    ps, version = found
    if ps.leader != broker_id or ps.leader_epoch != leader_epoch or broker_id not in ps.isr:
        return None
    return tuple(ps.isr), int(version)
