"""Leader-side replication state of one partition: high watermark, ISR changes, acks=all.

Sans-IO: the replica manager feeds it the leader's appends and each
follower's fetch offset, asks it what ISR change to persist, and tells it when a change was
persisted or refused. Time comes from an injected ``Clock`` (its monotonic clock, in ms).
Not thread-safe: one owner (the partition's lock or event loop) drives it.

Rules, from Kafka's ``Partition.scala`` and ``Replica.scala`` (3.7+):

- **Follower state** on each fetch at offset ``f`` with the leader's end offset ``L``:
  its log end offset (LEO) becomes ``f``; it was caught up at this fetch's time if ``f >= L``,
  else at the previous fetch's time if ``f`` reached the leader's LEO as of that fetch.
  A follower is *caught up* when its LEO equals the leader's or it was caught up within
  ``replica.lag.time.max.ms`` (30,000).
- **High watermark** = the minimum LEO over the leader and every follower that is in the
  maximal ISR (or is caught up and eligible to join it). It only moves forward, and does not
  move at all while the ISR is smaller than ``min(min.insync.replicas, replica count)``
  (KAFKA-15583). A new leader starts from its own high watermark and does not know its
  followers' LEOs until they fetch, so it holds the high watermark until every ISR member has
  fetched. A leader that stays leader (a new leader epoch or partition epoch: an ISR change,
  a reassignment) keeps what it knew of its followers (``continue_from``, Kafka's
  ``resetReplicaState`` with ``isNewLeader=false``).
- **Shrink**: the ISR members (other than the leader) that are not caught up.
  **Expand**: a follower outside the ISR whose LEO is at least the high watermark and at
  least the offset where this leader's epoch began (its LEO when elected), whose broker is
  eligible (alive). One ISR change in flight at a time: while an expansion is pending the
  maximal ISR already counts the new member (acks=all waits for it); while a shrink is
  pending the removed followers still count (the high watermark waits for them) until the
  change is persisted.
- **acks=all**: refused before the append with NOT_ENOUGH_REPLICAS when the ISR is smaller
  than the effective min ISR; otherwise the produce completes once the high watermark passes
  its last offset, with NONE if the maximal ISR still has at least min ISR members, else
  NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records are written but under-replicated).

The ISR is persisted by its leader (conditionally on the partition epoch, see
docs/replication.md), so a leader that lost its leadership cannot shrink the ISR to itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from pylog._clock import SYSTEM_CLOCK, Clock
from pylog.errors import (
    ApiError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)

UNKNOWN_OFFSET = -1
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000  # replica.lag.time.max.ms
DEFAULT_MIN_INSYNC_REPLICAS = 1  # min.insync.replicas


@dataclass
class FollowerState:
    """What the leader knows about one follower replica (Kafka's ``ReplicaState``)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    # None = never (Kafka uses 0 on a wall clock; our monotonic clock may start at 0).
    last_fetch_time_ms: int | None = None
    last_caught_up_time_ms: int | None = None

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_max_ms: int) -> bool:
        return (leader_end_offset == self.log_end_offset
                or (self.last_caught_up_time_ms is not None
                    and now_ms - self.last_caught_up_time_ms <= lag_max_ms))


@dataclass(frozen=True)
class IsrChange:
    """An ISR change to persist: the full new ISR, and whether it grows or shrinks."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    expand: bool


class PartitionLeader:
    """One partition's replication state on its leader.

    Args:
        broker_id: this (the leader's) broker id.
        replicas: the assignment (leader included).
        isr: the ISR as persisted (leader included).
        leader_epoch / partition_epoch: from the LeaderAndIsr that made this broker leader.
        log_end_offset: the local log's end offset now: this epoch's start offset.
        high_watermark: the local high watermark (as a follower it was min(leader's, own LEO)).
        is_replica_isr_eligible: whether a broker may join the ISR (alive, not shutting down);
            all brokers are eligible when not given.
    """

    def __init__(self, *, broker_id: int, replicas: Sequence[int], isr: Sequence[int],
                 leader_epoch: int, partition_epoch: int, log_end_offset: int,
                 high_watermark: int,
                 min_insync_replicas: int = DEFAULT_MIN_INSYNC_REPLICAS,
                 replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
                 clock: Clock = SYSTEM_CLOCK,
                 is_replica_isr_eligible: Callable[[int], bool] | None = None) -> None:
        if broker_id not in replicas:
            raise ValueError(f"broker {broker_id} leads a partition whose replicas are "
                             f"{list(replicas)}")
        if not 0 <= high_watermark <= log_end_offset:
            raise ValueError(f"high watermark {high_watermark} is outside [0, {log_end_offset}]")
        if min_insync_replicas < 1:
            raise ValueError(f"min.insync.replicas must be at least 1, not {min_insync_replicas}")
        self.broker_id = broker_id
        self.replicas = tuple(replicas)
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.log_end_offset = log_end_offset
        self.leader_epoch_start_offset = log_end_offset
        self._high_watermark = high_watermark
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.clock = clock
        self._eligible = is_replica_isr_eligible or (lambda _broker: True)
        self._isr = frozenset(isr) | {broker_id}
        self._pending: IsrChange | None = None
        now = self._now_ms()
        # Kafka's resetReplicaState(isNewLeader=true): LEOs unknown, ISR members caught up now.
        self.followers = {
            r: FollowerState(r, last_caught_up_time_ms=now if r in self._isr else None)
            for r in self.replicas if r != broker_id}

    def _now_ms(self) -> int:
        return round(self.clock.monotonic() * 1000)

    def continue_from(self, previous: PartitionLeader) -> bool:
        """This broker was already the leader (``previous``, the state it replaces): keep
        each remaining follower's log start and end offsets, as Kafka's ``makeLeader``
        does for a leader that is not new, so that the high watermark can move without
        waiting for every ISR member to fetch again. In a new leader epoch the fetch and
        caught-up times restart (now for ISR members, never for the others) and the last
        fetch is taken to have seen this epoch's start offset; in the same epoch (a newer
        partition epoch only) everything is kept. Returns whether the high watermark
        moved.
        """
        now = self._now_ms()
        new_epoch = self.leader_epoch != previous.leader_epoch
        if not new_epoch:
            self.leader_epoch_start_offset = previous.leader_epoch_start_offset
        for broker, follower in self.followers.items():
            old = previous.followers.get(broker)
            if old is None:
                continue  # a replica added by a reassignment: unknown until it fetches
            follower.log_end_offset = old.log_end_offset
            follower.log_start_offset = old.log_start_offset
            if new_epoch:
                in_isr = broker in self._isr
                follower.last_fetch_leader_log_end_offset = self.leader_epoch_start_offset
                follower.last_fetch_time_ms = now if in_isr else None
                follower.last_caught_up_time_ms = now if in_isr else None
            else:
                follower.last_fetch_leader_log_end_offset = old.last_fetch_leader_log_end_offset
                follower.last_fetch_time_ms = old.last_fetch_time_ms
                follower.last_caught_up_time_ms = old.last_caught_up_time_ms
        return self._maybe_increment_high_watermark()

    # -- views -----------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def isr(self) -> frozenset[int]:
        """The ISR as last persisted."""
        return self._isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR plus a member being added (the set acks=all and the high watermark use)."""
        if self._pending is not None and self._pending.expand:
            return self._isr | frozenset(self._pending.new_isr)
        return self._isr

    @property
    def pending_isr_change(self) -> IsrChange | None:
        return self._pending

    @property
    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, len(self.replicas))

    @property
    def is_under_min_isr(self) -> bool:
        return len(self._isr) < self.effective_min_isr

    # -- inputs ----------------------------------------------------------------------------

    def on_append(self, new_log_end_offset: int) -> bool:
        """The leader appended locally up to ``new_log_end_offset``; returns whether the high
        watermark moved (it can, when the ISR is the leader alone)."""
        if new_log_end_offset < self.log_end_offset:
            raise ValueError(f"the leader's log end offset cannot go back from "
                             f"{self.log_end_offset} to {new_log_end_offset}")
        self.log_end_offset = new_log_end_offset
        return self._maybe_increment_high_watermark()

    def on_follower_fetch(self, replica_id: int, fetch_offset: int,
                          log_start_offset: int = UNKNOWN_OFFSET) -> tuple[bool, IsrChange | None]:
        """A follower fetched at ``fetch_offset`` (its LEO).

        Returns (high watermark moved, an ISR expansion to persist or None).

        Raises:
            NotLeaderOrFollowerError: ``replica_id`` is not a follower of this partition.
            OffsetOutOfRangeError: the fetch offset is past the leader's log end.
        """
        follower = self.followers.get(replica_id)
        if follower is None:
            raise NotLeaderOrFollowerError(
                f"broker {replica_id} is not a replica of this partition ({list(self.replicas)})")
        if not 0 <= fetch_offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"fetch offset {fetch_offset} is outside [0, {self.log_end_offset}]")
        now = self._now_ms()
        leader_end = self.log_end_offset
        caught_up = follower.last_caught_up_time_ms
        if fetch_offset >= leader_end:
            caught_up = now if caught_up is None else max(caught_up, now)
        elif fetch_offset >= follower.last_fetch_leader_log_end_offset and \
                follower.last_fetch_time_ms is not None:
            caught_up = (follower.last_fetch_time_ms if caught_up is None
                         else max(caught_up, follower.last_fetch_time_ms))
        previous_leo = follower.log_end_offset
        follower.log_start_offset = log_start_offset
        follower.log_end_offset = fetch_offset
        follower.last_fetch_leader_log_end_offset = max(leader_end,
                                                        follower.last_fetch_leader_log_end_offset)
        follower.last_fetch_time_ms = now
        follower.last_caught_up_time_ms = caught_up
        expand = self._maybe_expand_isr(follower)
        moved = self._maybe_increment_high_watermark() if (
            previous_leo != fetch_offset or expand is not None) else False
        return moved, expand

    def _maybe_expand_isr(self, follower: FollowerState) -> IsrChange | None:
        if self._pending is not None or follower.broker_id in self._isr:
            return None
        if not self._eligible(follower.broker_id):
            return None
        if follower.log_end_offset < self._high_watermark or \
                follower.log_end_offset < self.leader_epoch_start_offset:
            return None
        new_isr = tuple(r for r in self.replicas if r in self._isr or r == follower.broker_id)
        self._pending = IsrChange(new_isr, self.leader_epoch, self.partition_epoch, expand=True)
        return self._pending

    def out_of_sync_replicas(self) -> frozenset[int]:
        """ISR followers not caught up (Kafka's ``getOutOfSyncReplicas``); empty while a
        change is in flight."""
        if self._pending is not None:
            return frozenset()
        now = self._now_ms()
        return frozenset(
            r for r in self._isr - {self.broker_id}
            if not self.followers[r].is_caught_up(self.log_end_offset, now,
                                                  self.replica_lag_time_max_ms))

    def maybe_shrink_isr(self) -> IsrChange | None:
        """Run by the ``isr-expiration`` task every replica.lag.time.max.ms / 2: the shrink to
        persist, or None."""
        out = self.out_of_sync_replicas()
        if not out:
            return None
        new_isr = tuple(r for r in self.replicas if r in self._isr and r not in out)
        self._pending = IsrChange(new_isr, self.leader_epoch, self.partition_epoch, expand=False)
        return self._pending

    def on_isr_change_persisted(self, isr: Sequence[int], partition_epoch: int) -> bool:
        """The pending change (or the controller's answer to it) is in ZooKeeper at
        ``partition_epoch``; returns whether the high watermark moved."""
        self._isr = frozenset(isr) | {self.broker_id}
        self.partition_epoch = partition_epoch
        self._pending = None
        return self._maybe_increment_high_watermark()

    def on_isr_change_failed(self) -> None:
        """The write lost (the partition epoch moved: a controller changed the state). The
        caller reloads the state (a LeaderAndIsr or a re-read) before proposing again."""
        self._pending = None

    # -- high watermark and acks=all -------------------------------------------------------

    def _maybe_increment_high_watermark(self) -> bool:
        if self.is_under_min_isr:
            return False
        now = self._now_ms()
        new_hw = self.log_end_offset
        maximal = self.maximal_isr
        for follower in self.followers.values():
            if follower.log_end_offset >= new_hw:
                continue
            waits = follower.broker_id in maximal or (
                follower.is_caught_up(self.log_end_offset, now, self.replica_lag_time_max_ms)
                and self._eligible(follower.broker_id))
            if waits:
                new_hw = follower.log_end_offset
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
            return True
        return False

    def check_before_append(self, required_acks: int) -> None:
        """Raises NotEnoughReplicasError for acks=-1 when the ISR is under min ISR (Kafka
        appends nothing then)."""
        if required_acks == -1 and self.is_under_min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {sorted(self._isr)} is insufficient to satisfy "
                f"the min.isr requirement of {self.effective_min_isr}")

    def acks_all_outcome(self, required_offset: int) -> tuple[bool, type[ApiError] | None]:
        """For a produce waiting on offset ``required_offset`` (its last offset + 1):
        (done, error class or None). Not done means keep waiting (until the request timeout,
        which answers REQUEST_TIMED_OUT)."""
        if self._high_watermark < required_offset:
            return False, None
        if self.effective_min_isr <= len(self.maximal_isr):
            return True, None
        return True, NotEnoughReplicasAfterAppendError


def follower_high_watermark(leader_high_watermark: int, log_end_offset: int) -> int:
    """A follower's high watermark after a fetch response: min(leader's, own LEO)."""
    return min(leader_high_watermark, log_end_offset)


def live_eligible(live_brokers: Collection[int]) -> Callable[[int], bool]:
    """An ``is_replica_isr_eligible`` from a set of live broker ids (ZooKeeper mode: a
    registered broker may rejoin the ISR)."""
    live = frozenset(live_brokers)
    return lambda broker: broker in live
