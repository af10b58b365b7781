"""Group membership of the consumer: Kafka's classic group protocol, client side.

The Java client's ``AbstractCoordinator`` and ``ConsumerCoordinator``
(``clients/.../consumer/internals/``) are the reference; this module follows their rules:

- **Discovery.** FindCoordinator (key type 0, the group id) to any broker; the coordinator
  gets a connection of its own, so a JoinGroup parked for a whole rebalance never waits
  behind fetches. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection or a
  session without heartbeat answers mark it unknown and it is looked up again.
- **Joining** (``_join_group_if_needed``, run as a task driven by ``poll``): before each
  join, auto commit and the rebalance callbacks (``_on_join_prepare``: eager protocol
  revokes everything, cooperative only topics no longer subscribed, a reset generation
  loses everything); JoinGroup with one protocol per assignor (the subscription with owned
  partitions, generation and rack), MEMBER_ID_REQUIRED answered by rejoining with the given
  id; the leader runs the selected assignor over every member's subscription; SyncGroup;
  then the new assignment (``_on_join_complete``: cooperative revokes what moved away and
  rejoins at once).
- **Heartbeats** (``_heartbeat_loop``, a task): every ``heartbeat.interval.ms`` once
  joined. REBALANCE_IN_PROGRESS asks the next ``poll`` to rejoin; UNKNOWN_MEMBER_ID,
  ILLEGAL_GENERATION and FENCED_INSTANCE_ID reset the generation (the member id survives
  ILLEGAL_GENERATION); a fenced static member fails the next ``poll``. A member that has
  not polled for ``max.poll.interval.ms`` leaves the group.
- **Leaving**: LeaveGroup on close and unsubscribe for dynamic members only (static members
  leave by session timeout, KIP-345). A broker answers a connection's requests in order, so
  a JoinGroup (or a follower's SyncGroup) still parked on the coordinator when the join is
  called off would hold a LeaveGroup behind it until the rebalance ends (up to the
  rebalance timeout, ``max.poll.interval.ms``): that connection is abandoned (closed; the
  broker drops the parked answer) and the member leaves on a new one, so ``close`` is
  prompt. Embedded mode serves a connection's requests in order too, and does the same.
  ``close`` runs the revoke callback even when its timeout has run out (as Kafka does); the
  commits the callback makes and the LeaveGroup wait no longer than what is left of it.

The member states are an explicit machine (``MemberState``, ``_set_state`` checks every
transition against ``TRANSITIONS``). Finding the coordinator is ``_group_base.py``;
offsets (commits, committed) are ``_group_offsets.py``.

Event-loop affinity: one loop, the consumer's; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pylog import errors
from pylog.client.aio._assignors import (
    COOPERATIVE,
    EAGER,
    PartitionAssignor,
    assignors_for,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    rebalance_protocol,
)
from pylog.client.aio._cluster import Cluster
from pylog.client.aio._group_base import (
    COMMIT_FAILED,
    NO_GENERATION,
    TRANSITIONS,
    ConsumerOwner,
    CoordinatorLink,
    Generation,
    MemberState,
    SubscriptionState,
    cancel_tasks,
    rebalancing,
)
from pylog.client.errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from pylog.client.records import TopicPartition
from pylog.net.connection import Connection
from pylog.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

__all__ = ["ConsumerCoordinator", "Generation", "MemberState", "NO_GENERATION", "SubscriptionState"]

log = logging.getLogger("pylog.client.consumer")

PROTOCOL_TYPE = "consumer"
JOIN_GROUP_TIMEOUT_LAPSE = 5.0  # seconds on top of the rebalance timeout (Kafka's)


class _Retry(Exception):
    """A failed round of joining that is retried (after a backoff unless ``at_once``)."""

    def __init__(self, reason: str, at_once: bool = False) -> None:
        super().__init__(reason)
        self.at_once = at_once


def _sorted(tps: Any) -> list[TopicPartition]:
    return sorted(tps, key=lambda tp: (tp.topic, tp.partition))


class ConsumerCoordinator(CoordinatorLink):
    """One consumer's membership in its group.

    Args:
        cluster: the consumer's metadata and connections.
        settings: resolved consumer settings (``group.id`` set).
        client_id: sent in JoinGroup (the member id starts with it).
        subscription: shared with the consumer core.
        owner: the consumer core (assignment, positions, listener calls).
    """

    def __init__(self, cluster: Cluster, settings: dict[str, Any], client_id: str,
                 subscription: SubscriptionState, owner: ConsumerOwner) -> None:
        super().__init__(cluster, settings, client_id)
        self.group_instance_id: str | None = settings["group.instance.id"]
        self.rack_id: str | None = settings["client.rack"] or None
        self.session_timeout_ms: int = settings["session.timeout.ms"]
        self.rebalance_timeout_ms: int = settings["max.poll.interval.ms"]
        self.heartbeat_interval = settings["heartbeat.interval.ms"] / 1000
        self.max_poll_interval = settings["max.poll.interval.ms"] / 1000
        self.exclude_internal: bool = settings["exclude.internal.topics"]
        self.assignors: list[PartitionAssignor] = assignors_for(settings["partition.assignment.strategy"])
        self.protocol = rebalance_protocol(self.assignors)
        self.subscription = subscription
        self.owner = owner
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        self.rejoin_needed = True
        self.rejoin_reason = ""
        self.needs_join_prepare = True
        self.is_leader = False
        self.joined_subscription: frozenset[str] | None = None
        self.group_subscription: frozenset[str] = frozenset()  # leader: every member's topics
        self.metadata_snapshot: dict[str, Any] = {}
        self.assignment_snapshot: dict[str, Any] | None = None
        self._seen_version = -1
        # Tasks and timers (loop time, seconds).
        self._join_task: asyncio.Task[None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        # The last JoinGroup / SyncGroup sent (its connection and answer): the coordinator
        # parks these until the rebalance completes.
        self._parked: tuple[Connection, asyncio.Future[Any]] | None = None
        self._wakeup = asyncio.Event()
        now = asyncio.get_running_loop().time()
        self.last_poll = now
        self.last_heartbeat_ok = now
        self.next_heartbeat = now
        self.heartbeat_failures = 0
        self.fatal: BaseException | None = None

    def _on_coordinator_found(self) -> None:
        self.last_heartbeat_ok = asyncio.get_running_loop().time()  # a new session timer

    # ------------------------------------------------------------------ state machine

    def _set_state(self, new: MemberState) -> None:
        if new is self.state:
            return
        if new not in TRANSITIONS[self.state]:
            raise IllegalStateError(f"group member state {self.state.value} -> {new.value}")
        log.debug("group %s member %s: %s -> %s", self.group_id, self.generation.member_id,
                  self.state.value, new.value)
        self.state = new
        self._wakeup.set()

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info("group %s: rejoining: %s", self.group_id, reason)
        self.rejoin_reason = reason
        self.rejoin_needed = True
        self.owner.wake()

    def _reset_state_and_generation(self, reason: str, reset_member_id: bool) -> None:
        log.info("group %s: resetting generation%s: %s", self.group_id,
                 " and member id" if reset_member_id else "", reason)
        self._set_state(MemberState.UNJOINED)
        if reset_member_id:
            self.generation = NO_GENERATION
        else:
            # The member id may still be valid: keeping it spares the group waiting for the
            # old id to time out in the next rebalance.
            self.generation = Generation(-1, self.generation.member_id, None)

    def reset_state_and_rejoin(self, reason: str, reset_member_id: bool) -> None:
        self._reset_state_and_generation(reason, reset_member_id)
        self.request_rejoin(reason)
        self.needs_join_prepare = True

    def generation_if_stable(self) -> Generation | None:
        return self.generation if self.state is MemberState.STABLE else None

    # ------------------------------------------------------------------ offsets

    def commit_generation(self) -> Generation:
        """The generation a group-managed OffsetCommit carries (only a stable member commits).

        Raises:
            RebalanceInProgressError: a rebalance is under way. CommitFailedError: not in
                the group.
        """
        gen = self.generation_if_stable()
        if gen is None:
            if self.rebalance_in_progress():
                raise rebalancing("the consumer is rebalancing")
            raise CommitFailedError(
                "Offset commit cannot be completed since the consumer is not part of an active "
                "group: it left or was removed (e.g. no poll() within max.poll.interval.ms); it "
                "rejoins on its next poll().")
        return gen

    def commit_error(self, code: int, sent: Generation) -> BaseException:
        """What an OffsetCommit answered ``code`` (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
        FENCED_INSTANCE_ID) for generation ``sent`` raises; resets the generation as Kafka's
        ``OffsetCommitResponseHandler`` does (the member id survives ILLEGAL_GENERATION)."""
        changed = self.generation != sent
        if code == errors.FencedInstanceIdError.code and not changed:
            return self._fatal_error(code, "OffsetCommit")
        if changed and self.state is MemberState.PREPARING_REBALANCE:
            return rebalancing("the member already joined a newer generation")
        if code in (errors.UnknownMemberIdError.code, errors.IllegalGenerationError.code):
            name = (errors.error_for_code(code) or errors.UnknownServerError).name
            self.reset_state_and_rejoin(f"encountered {name} from OffsetCommit",
                                        code == errors.UnknownMemberIdError.code)
        return CommitFailedError(COMMIT_FAILED)

    def fetch_member(self) -> tuple[str | None, int]:
        """Member id and epoch of an OffsetFetch v9+: none (classic groups do not check)."""
        return None, -1

    def rebalance_in_progress(self) -> bool:
        return self.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)

    def _has_generation_reset(self, gen: Generation) -> bool:
        return gen.generation_id == -1 and gen.protocol_name is None

    # ------------------------------------------------------------------ poll

    def _check_fatal(self) -> None:
        if self.fatal is not None:
            exc, self.fatal = self.fatal, None
            raise exc

    async def poll(self, deadline: float, wait: bool = True) -> None:
        """Drive membership from the consumer's ``poll``: metadata for the subscription,
        (re)joining when needed, waiting for the rebalance up to ``deadline`` (loop time) if
        ``wait`` (a consumer with partitions under the cooperative protocol goes on
        fetching them meanwhile instead).

        Raises:
            The fatal errors of joining (FencedInstanceIdError, InconsistentGroupProtocolError,
            GroupAuthorizationFailedError, ...) and the first exception a rebalance callback
            raised.
        """
        loop = asyncio.get_running_loop()
        self.last_poll = loop.time()
        self._check_fatal()
        hb = self._heartbeat_task
        if hb is None or hb.done():
            if hb is not None and not hb.cancelled() and hb.exception() is not None:
                log.error("group %s: heartbeat task failed (restarted): %r", self.group_id, hb.exception())
            self._heartbeat_task = loop.create_task(self._heartbeat_loop())
        if self.cluster.needs_update():
            try:
                await asyncio.wait_for(self.cluster.update(), max(0.01, deadline - loop.time()))
            except (asyncio.TimeoutError, KafkaConnectionError, KafkaTimeoutError):
                pass
        self.maybe_update_subscription_metadata()
        if self._join_task is None and self.rejoin_needed_or_pending():
            self._join_task = loop.create_task(self._join_group_if_needed())
            self._join_task.add_done_callback(lambda _: self.owner.wake())
        task = self._join_task
        if task is not None:
            if wait and not task.done():
                await asyncio.wait({task}, timeout=max(0.0, deadline - loop.time()))
            if task.done():
                self._join_task = None
                task.result()  # raise what failed it

    def needs_poll(self) -> bool:
        """Whether ``poll`` has membership work: a rejoin to start or a finished one."""
        task = self._join_task
        if task is not None:
            return task.done()
        return self.rejoin_needed_or_pending()

    def invalidate_metadata(self) -> None:
        """The subscription changed: match the pattern again on the next poll."""
        self._seen_version = -1

    def maybe_update_subscription_metadata(self) -> None:
        """After a metadata refresh: a pattern's matches, and the snapshot whose change makes
        the leader rejoin."""
        if self.cluster.version == self._seen_version:
            return
        self._seen_version = self.cluster.version
        if self.subscription.pattern is not None:
            matched = frozenset(
                name for name, info in self.cluster.topics.items()
                if not info.error_code and self.subscription.matches(name)
                and not (self.exclude_internal and info.is_internal))
            if matched != self.subscription.topics:
                self.subscription.topics = matched
                self.owner.refresh_wanted_topics()
        self.metadata_snapshot = self._snapshot()

    def _snapshot(self) -> dict[str, Any]:
        topics = self.group_subscription | self.subscription.topics
        out: dict[str, Any] = {}
        for t in topics:
            # A topic whose leader is being elected still counts with its partitions (no
            # rebalance for a passing metadata error).
            info = self.cluster.topics.get(t)
            if info is not None and info.partitions:
                out[t] = self._partition_racks(t) if self.rack_id else info.num_partitions
        return out

    def _partition_racks(self, topic: str) -> list[frozenset[str]]:
        info = self.cluster.topics.get(topic)
        if info is None:
            return []
        racks = self.cluster.racks
        return [frozenset(r for r in (racks.get(n) for n in info.partitions[p].replicas) if r)
                if p in info.partitions else frozenset() for p in range(info.num_partitions)]

    def rejoin_needed_or_pending(self) -> bool:
        if not self.subscription.active:
            return False
        if self.assignment_snapshot is not None and self.assignment_snapshot != self.metadata_snapshot:
            if not self.rejoin_needed:
                self.request_rejoin("cached metadata has changed")
            return True
        if self.joined_subscription is not None and self.joined_subscription != self.subscription.topics:
            if not self.rejoin_needed:
                self.request_rejoin("subscription has changed")
            return True
        return self.rejoin_needed or self._join_task is not None

    # ------------------------------------------------------------------ joining

    async def _join_group_if_needed(self) -> None:
        attempts = 0
        while self.rejoin_needed_or_pending_inside():
            conn = await self.ensure_coordinator(None)
            if self.needs_join_prepare:
                self.needs_join_prepare = False
                await self._on_join_prepare()
            try:
                assignment = await self._join_and_sync(conn)
            except _Retry as retry:
                self.request_rejoin(str(retry))
                if not retry.at_once:
                    await asyncio.sleep(self.backoff(attempts))
                    attempts += 1
                continue
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self.mark_coordinator_unknown(str(exc))
                self.request_rejoin(f"rebalance failed: {exc}")
                await asyncio.sleep(self.backoff(attempts))
                attempts += 1
                continue
            except BaseException:
                self.request_rejoin("rebalance failed")
                raise
            gen, state = self.generation, self.state
            if not self._has_generation_reset(gen) and state is MemberState.STABLE:
                try:
                    await self._on_join_complete(gen, assignment)
                finally:
                    self.needs_join_prepare = True
            else:
                self.reset_state_and_rejoin(
                    f"the generation/state changed to {gen}/{state.value} before the rebalance "
                    "completed", True)
            attempts = 0

    def rejoin_needed_or_pending_inside(self) -> bool:
        """``rejoin_needed_or_pending`` as seen from the join task itself."""
        if not self.subscription.active:
            return False
        self.maybe_update_subscription_metadata()
        if self.assignment_snapshot is not None and self.assignment_snapshot != self.metadata_snapshot:
            self.request_rejoin("cached metadata has changed")
        elif self.joined_subscription is not None and self.joined_subscription != self.subscription.topics:
            self.request_rejoin("subscription has changed")
        return self.rejoin_needed

    def _protocols(self) -> list[Any]:
        self.joined_subscription = self.subscription.topics
        owned = self.owner.owned_partitions()
        return [JoinGroupRequest.JoinGroupRequestProtocol(
            name=a.name,
            metadata=encode_subscription(self.joined_subscription,
                                         a.subscription_user_data(set(self.joined_subscription)),
                                         owned, self.generation.generation_id, self.rack_id))
            for a in self.assignors]

    async def _join_and_sync(self, conn: Connection) -> bytes:
        """One JoinGroup + SyncGroup round; the assignment bytes.

        Raises:
            _Retry: retriable failure. ApiError: fatal (fenced, inconsistent protocol, ...).
        """
        self._set_state(MemberState.PREPARING_REBALANCE)
        sent = self.generation
        req = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=sent.member_id,
            group_instance_id=self.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocols=self._protocols(), reason=self.rejoin_reason[:255] or None)
        timeout = max(self.request_timeout, self.rebalance_timeout_ms / 1000 + JOIN_GROUP_TIMEOUT_LAPSE)
        resp = await self._send_parkable(conn, req, timeout)
        code = resp.error_code
        if code == 0:
            if resp.protocol_type is not None and resp.protocol_type != PROTOCOL_TYPE:
                raise errors.InconsistentGroupProtocolError(
                    f"JoinGroup: the group's protocol type is {resp.protocol_type!r}, not consumer")
            if self.state is not MemberState.PREPARING_REBALANCE:
                raise _Retry("left the group while joining")
            self.generation = Generation(resp.generation_id, resp.member_id, resp.protocol_name)
            self._set_state(MemberState.COMPLETING_REBALANCE)
            self.last_heartbeat_ok = asyncio.get_running_loop().time()
            self.next_heartbeat = self.last_heartbeat_ok + self.heartbeat_interval
            log.info("group %s: joined generation %d as %s (%s)%s", self.group_id,
                     resp.generation_id, resp.member_id, resp.protocol_name,
                     " leader" if resp.leader == resp.member_id else "")
            assignments: list[Any] = []
            if resp.leader == resp.member_id:
                groups = await self._on_leader_elected(resp)
                assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                               for m, a in groups.items()]
            else:
                self.is_leader = False
            return await self._sync(conn, assignments)
        name = (errors.error_for_code(code) or errors.UnknownServerError).name
        if code == errors.MemberIdRequiredError.code:
            # v4+: the coordinator names our member id; join again with it at once.
            self.generation = Generation(-1, resp.member_id, None)
            raise _Retry(f"need to re-join with the given member id {resp.member_id}", at_once=True)
        if code == errors.UnknownMemberIdError.code:
            if self.generation == sent:
                self.reset_state_and_rejoin(f"encountered {name} from JoinGroup", True)
            raise _Retry(name, at_once=True)
        if code in (errors.CoordinatorNotAvailableError.code, errors.NotCoordinatorError.code):
            self.mark_coordinator_unknown(name)
            raise _Retry(name)
        if code in (errors.CoordinatorLoadInProgressError.code, errors.RebalanceInProgressError.code):
            raise _Retry(name, at_once=code == errors.RebalanceInProgressError.code)
        self._set_state(MemberState.UNJOINED)
        raise self._fatal_error(code, "JoinGroup")

    async def _send_parkable(self, conn: Connection, req: Any, timeout: float | None) -> Any:
        """Send a request the coordinator may park until the rebalance completes (JoinGroup,
        a follower's SyncGroup), remembering it (``connection_parked``)."""
        fut = conn.send_nowait(req)
        assert fut is not None
        self._parked = (conn, fut)
        return await conn.wait(fut, timeout, type(req).NAME)

    def connection_parked(self) -> bool:
        """Whether the coordinator connection holds a JoinGroup / SyncGroup of a join that
        was called off (anything sent on it now waits until that rebalance ends)."""
        parked = self._parked
        return (self._join_task is None and parked is not None
                and parked[0] is self.coordinator_conn and not parked[1].done())

    def _fatal_error(self, code: int, api: str) -> errors.ApiError:
        cls = errors.error_for_code(code) or errors.UnknownServerError
        hint = {
            errors.FencedInstanceIdError.code: f": another consumer uses group.instance.id "
                                               f"{self.group_instance_id!r}",
            errors.InconsistentGroupProtocolError.code: ": the group's members share no "
                                                        "assignor (partition.assignment.strategy)",
            errors.InvalidSessionTimeoutError.code: ": session.timeout.ms is outside the "
                                                    "broker's group.min/max.session.timeout.ms",
            errors.GroupMaxSizeReachedError.code: f": group {self.group_id!r} already has "
                                                  "group.max.size members",
        }.get(code, "")
        return cls(f"{api} for group {self.group_id!r} failed: {cls.name}{hint}")

    async def _sync(self, conn: Connection, assignments: list[Any]) -> bytes:
        sent = self.generation
        req = SyncGroupRequest(
            group_id=self.group_id, generation_id=sent.generation_id, member_id=sent.member_id,
            group_instance_id=self.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocol_name=sent.protocol_name, assignments=assignments)
        resp = await self._send_parkable(conn, req, None)
        code = resp.error_code
        if code == 0:
            if resp.protocol_type is not None and resp.protocol_type != PROTOCOL_TYPE:
                raise errors.InconsistentGroupProtocolError(
                    f"SyncGroup: the group's protocol type is {resp.protocol_type!r}")
            if self._has_generation_reset(self.generation) or self.state is not MemberState.COMPLETING_REBALANCE:
                raise _Retry("the generation was reset while syncing", at_once=True)
            if resp.protocol_name is not None and resp.protocol_name != self.generation.protocol_name:
                raise errors.InconsistentGroupProtocolError(
                    f"SyncGroup: protocol {resp.protocol_name!r}, joined with "
                    f"{self.generation.protocol_name!r}")
            self._set_state(MemberState.STABLE)
            self.rejoin_needed = False
            self.rejoin_reason = ""
            return bytes(resp.assignment)
        name = (errors.error_for_code(code) or errors.UnknownServerError).name
        if code == errors.RebalanceInProgressError.code:
            raise _Retry(name, at_once=True)
        if code in (errors.UnknownMemberIdError.code, errors.IllegalGenerationError.code):
            if self.generation == sent:
                self.reset_state_and_rejoin(f"encountered {name} from SyncGroup",
                                            code == errors.UnknownMemberIdError.code)
            raise _Retry(name, at_once=True)
        if code in (errors.CoordinatorNotAvailableError.code, errors.NotCoordinatorError.code):
            self.mark_coordinator_unknown(name)
            raise _Retry(name)
        self._set_state(MemberState.UNJOINED)
        raise self._fatal_error(code, "SyncGroup")

    def _assignor(self, name: str | None) -> PartitionAssignor:
        for a in self.assignors:
            if a.name == name:
                return a
        raise IllegalStateError(f"the coordinator selected assignor {name!r}, which this "
                                "consumer did not offer")

    async def _on_leader_elected(self, resp: Any) -> dict[str, bytes]:
        assignor = self._assignor(resp.protocol_name)
        subs = [decode_subscription(m.member_id, m.group_instance_id, bytes(m.metadata))
                for m in resp.members]
        all_topics = frozenset(t for s in subs for t in s.topics)
        self.group_subscription = all_topics
        self.owner.refresh_wanted_topics()
        self.is_leader = True
        # Fresh metadata for every member's topics before assigning (Kafka waits as long as
        # it takes; a rebalance timeout bounds it on the broker's side).
        attempts = 0
        while True:
            try:
                await self.cluster.update(set(all_topics))
                break
            except (KafkaConnectionError, KafkaTimeoutError):
                await asyncio.sleep(self.backoff(attempts))
                attempts += 1
        self.maybe_update_subscription_metadata()
        self.metadata_snapshot = self._snapshot()
        if resp.skip_assignment:
            # A static leader that rejoined without a rebalance keeps the assignment (v9+).
            self.assignment_snapshot = self.metadata_snapshot
            return {}
        partitions = {t: racks for t in sorted(all_topics) if (racks := self._partition_racks(t))}
        result = assignor.assign(partitions, subs)
        if self.protocol == COOPERATIVE and assignor.name != "cooperative-sticky":
            self._validate_cooperative(subs, result)
        self.assignment_snapshot = self.metadata_snapshot
        log.info("group %s: generation %d assignment by %s: %s", self.group_id,
                 self.generation.generation_id, assignor.name,
                 {m: _sorted(tps) for m, tps in result.items()})
        return {m: encode_assignment(tps) for m, tps in result.items()}

    @staticmethod
    def _validate_cooperative(subs: list[Any], result: dict[str, list[TopicPartition]]) -> None:
        added: set[TopicPartition] = set()
        revoked: set[TopicPartition] = set()
        for s in subs:
            assigned = set(result.get(s.member_id, ()))
            added |= assigned - set(s.owned_partitions)
            revoked |= set(s.owned_partitions) - assigned
        if added & revoked:
            raise IllegalStateError("an assignor of the cooperative protocol gave partitions "
                                    f"{_sorted(added & revoked)} to a new owner before revoking them")

    async def _on_join_prepare(self) -> None:
        """Before JoinGroup: commit what was consumed, then revoke or lose partitions."""
        owned = self.owner.owned_partitions()
        if self.protocol == EAGER:
            self.owner.mark_pending_revocation(owned)
        # Auto commit, retried on retriable errors for at most the rebalance timeout.
        await self.owner.commit_before_revocation(None, self.rebalance_timeout_ms / 1000)
        failure: BaseException | None = None
        gen = self.generation
        if gen.generation_id == -1 or not gen.member_id:
            if owned:
                log.info("group %s: partitions lost (generation reset): %s", self.group_id, owned)
                failure = await self.owner.invoke_listener("lost", _sorted(owned))
                self.owner.set_assignment([])
        elif self.protocol == EAGER:
            failure = await self.owner.invoke_listener("revoked", _sorted(owned))
            self.owner.set_assignment([])
        else:
            gone = [tp for tp in owned if tp.topic not in self.subscription.topics]
            if gone:
                failure = await self.owner.invoke_listener("revoked", _sorted(gone))
                self.owner.set_assignment([tp for tp in owned if tp not in set(gone)])
        self.is_leader = False
        self.group_subscription = frozenset()
        self.owner.refresh_wanted_topics()
        self.owner.wake()
        if failure is not None:
            raise failure

    async def _on_join_complete(self, gen: Generation, data: bytes) -> None:
        if not self.is_leader:
            self.assignment_snapshot = None
        assignor = self._assignor(gen.protocol_name)
        try:
            assigned, _ = decode_assignment(data)
        except (ValueError, errors.ProtocolError) as exc:
            raise IllegalStateError(f"group {self.group_id!r}: unreadable assignment from the "
                                    f"leader ({len(data)} bytes): {exc}") from None
        if any(not self.subscription.matches(tp.topic) for tp in assigned):
            self.request_rejoin("received assignment does not match the current subscription")
            return
        owned = set(self.owner.owned_partitions())
        assigned_set = set(assigned)
        added = _sorted(assigned_set - owned)
        failure: BaseException | None = None
        if self.protocol == COOPERATIVE:
            revoked = _sorted(owned - assigned_set)
            if revoked:
                # Not in Kafka's Java client: commit what was consumed of the partitions that
                # move before giving them up, so their next owner starts there.
                self.owner.mark_pending_revocation(revoked)
                await self.owner.commit_before_revocation(revoked, self.request_timeout)
                failure = await self.owner.invoke_listener("revoked", revoked)
                self.request_rejoin("need to revoke partitions and re-join")
        if self.subscription.pattern is not None:
            extra = {tp.topic for tp in assigned} - set(self.joined_subscription or ())
            if extra:
                joined = frozenset(self.joined_subscription or ()) | extra
                self.subscription.topics = self.subscription.topics | extra
                self.joined_subscription = joined
        assignor.on_assignment(_sorted(assigned), gen.generation_id)
        self.owner.set_assignment(_sorted(assigned))
        log.info("group %s: generation %d assigned %s", self.group_id, gen.generation_id,
                 _sorted(assigned))
        self.owner.wake()
        failure2 = await self.owner.invoke_listener("assigned", added)
        failure = failure or failure2
        if failure is not None:
            raise failure

    # ------------------------------------------------------------------ heartbeats

    async def _heartbeat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.closed:
            if self.state in (MemberState.UNJOINED, MemberState.PREPARING_REBALANCE) or self.fatal:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            now = loop.time()
            if self.coordinator_unknown():
                try:
                    await self.ensure_coordinator(now + self.retry_backoff_max + self.request_timeout)
                except (KafkaTimeoutError, errors.ApiError, KafkaConnectionError):
                    await asyncio.sleep(self.retry_backoff)
            elif now - self.last_heartbeat_ok > self.session_timeout_ms / 1000:
                self.mark_coordinator_unknown("session timed out without a heartbeat answer")
            elif now - self.last_poll > self.max_poll_interval:
                log.warning(
                    "group %s: no poll() for over max.poll.interval.ms (%d ms): leaving the "
                    "group. Poll more often, or lower max.poll.records, or raise "
                    "max.poll.interval.ms.", self.group_id, self.rebalance_timeout_ms)
                await self.maybe_leave_group("consumer poll timeout has expired")
            elif now < self.next_heartbeat:
                wait = min(self.next_heartbeat - now, self.retry_backoff_max)
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), wait)
                except asyncio.TimeoutError:
                    pass
            else:
                self.next_heartbeat = now + self.heartbeat_interval
                await self._heartbeat()

    async def _heartbeat(self) -> None:
        conn = self.coordinator_conn
        if conn is None:
            return
        sent = self.generation
        req = HeartbeatRequest(group_id=self.group_id, generation_id=sent.generation_id,
                               member_id=sent.member_id, group_instance_id=self.group_instance_id)
        loop = asyncio.get_running_loop()
        try:
            resp = await conn.send(req)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self.mark_coordinator_unknown(f"heartbeat failed: {exc}")
            self._heartbeat_failed(loop)
            return
        code = resp.error_code
        if code == 0:
            self._heartbeat_ok(loop)
        elif code in (errors.CoordinatorNotAvailableError.code, errors.NotCoordinatorError.code):
            self.mark_coordinator_unknown(errors.error_for_code(code).name)  # type: ignore[union-attr]
            self._heartbeat_failed(loop)
        elif code == errors.RebalanceInProgressError.code:
            # Keep heartbeating while the group rebalances: the member stays in the group
            # until it rejoins (within the rebalance timeout).
            if self.state is MemberState.STABLE:
                self.request_rejoin("group is already rebalancing")
            self._heartbeat_ok(loop)
        elif code in (errors.IllegalGenerationError.code, errors.UnknownMemberIdError.code,
                      errors.FencedInstanceIdError.code):
            if self.generation == sent:
                name = errors.error_for_code(code).name  # type: ignore[union-attr]
                self.reset_state_and_rejoin(f"encountered {name} from Heartbeat",
                                            code != errors.IllegalGenerationError.code)
                if code == errors.FencedInstanceIdError.code:
                    self.fatal = self._fatal_error(code, "Heartbeat")
                self._heartbeat_failed(loop)
            else:
                self._heartbeat_ok(loop)  # an answer to an older generation: ignored
        elif code == errors.GroupAuthorizationFailedError.code:
            self.fatal = self._fatal_error(code, "Heartbeat")
        else:
            log.warning("group %s: heartbeat failed with error %d", self.group_id, code)
            self._heartbeat_failed(loop)

    def _heartbeat_ok(self, loop: asyncio.AbstractEventLoop) -> None:
        self.last_heartbeat_ok = loop.time()
        self.heartbeat_failures = 0

    def _heartbeat_failed(self, loop: asyncio.AbstractEventLoop) -> None:
        self.next_heartbeat = loop.time() + self.backoff(self.heartbeat_failures)
        self.heartbeat_failures += 1

    # ------------------------------------------------------------------ leaving

    async def maybe_leave_group(self, reason: str, deadline: float | None = None) -> None:
        """LeaveGroup for a dynamic member in a group (static members only time out), then
        forget the generation. ``deadline`` (loop time) bounds the wait for the answer
        (None: ``request.timeout.ms``)."""
        gen = self.generation
        conn = self.coordinator_conn
        if (self.group_instance_id is None and not self.coordinator_unknown() and conn is not None
                and self.state is not MemberState.UNJOINED and gen.member_id):
            log.info("group %s: member %s leaves (%s)", self.group_id, gen.member_id, reason)
            loop = asyncio.get_running_loop()
            try:
                if self.connection_parked():
                    log.info("group %s: a called-off JoinGroup/SyncGroup holds the coordinator "
                             "connection; leaving on a new one", self.group_id)
                    conn = await self.reconnect(deadline)
                L = LeaveGroupRequest
                version = conn.version_for(L)
                req = (L(group_id=self.group_id, members=[L.MemberIdentity(
                    member_id=gen.member_id, group_instance_id=None, reason=reason[:255])])
                       if version >= 3 else L(group_id=self.group_id, member_id=gen.member_id))
                timeout = None if deadline is None else max(0.0, deadline - loop.time())
                resp = await conn.send(req, version, timeout=timeout)
                if resp.error_code:
                    log.info("group %s: LeaveGroup answered error %d", self.group_id, resp.error_code)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self.reset_state_and_rejoin("consumer pro-actively leaving the group", True)

    async def on_leave_prepare(self) -> None:
        """Before leaving: the owned partitions are revoked (lost if the generation is gone
        or a rebalance is under way)."""
        owned = self.owner.owned_partitions()
        failure = None
        if owned:
            gen = self.generation
            kind = ("lost" if gen.generation_id == -1 or not gen.member_id or self.rebalance_in_progress()
                    else "revoked")
            failure = await self.owner.invoke_listener(kind, _sorted(owned))
            self.owner.set_assignment([])
        if failure is not None:
            raise failure

    async def stop_tasks(self) -> None:
        """Cancel joining and heartbeating (the generation is kept for a LeaveGroup)."""
        await cancel_tasks(self, "_join_task", "_heartbeat_task")

    async def unsubscribe(self) -> None:
        """``unsubscribe()``: revoke, leave, forget the subscription's join state."""
        await self.stop_tasks()
        try:
            await self.on_leave_prepare()
        finally:
            await self.maybe_leave_group("the consumer unsubscribed from all topics")
            self.joined_subscription = None
            self.assignment_snapshot = None

    async def close(self, deadline: float | None = None) -> None:
        """Stop the tasks, revoke the partitions (callbacks), leave the group (dynamic
        members; the answer awaited until ``deadline``, loop time), close the coordinator
        connection."""
        await self.stop_tasks()
        try:
            if self.subscription.active:
                await self.on_leave_prepare()
        finally:
            try:
                await self.maybe_leave_group("the consumer is being closed", deadline)
            finally:
                self._wakeup.set()
                await self.close_link()
