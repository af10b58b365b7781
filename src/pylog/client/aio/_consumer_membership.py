"""Group membership on the consumer group protocol (KIP-848), client side.

With ``group.protocol=consumer`` the broker assigns: a member sends
ConsumerGroupHeartbeat (API 68) at the interval the coordinator returns, and each answer
may carry the member's new epoch and its target assignment (topic ids and partitions). The
member moves to the target one step at a time, and a partition never has two owners. The
Java client's ``ConsumerMembershipManager``, ``AbstractMembershipManager`` and
``ConsumerHeartbeatRequestManager`` are the reference; the rules followed here:

- **Joining.** Member epoch 0, with a member id this client chose (a random UUID, KIP-1082;
  heartbeat v1: a v0 coordinator names it in its answer), the subscription (topic names or
  ``SubscribedTopicRegex``), the rebalance timeout (``max.poll.interval.ms``),
  ``group.remote.assignor``, ``group.instance.id``, ``client.rack`` and no partitions.
- **Heartbeats** carry the group id, member id, epoch and instance id every time and the
  other fields only when they changed since the last one sent; after an error or a lost
  connection everything is sent again. The next one goes after the coordinator's
  ``HeartbeatIntervalMs``, at once to acknowledge a reconciled assignment.
- **Reconciliation** (``_reconcile``, a task ``poll`` starts, so the callbacks run inside
  ``poll`` as Kafka runs them): topic ids are resolved to names through Metadata (an id
  the metadata does not know yet waits for the next refresh); partitions no longer in the
  target are revoked first (fetching stops, auto commit of what was consumed,
  ``on_revoke``), then the new ones are added (``on_assign``, called on every change, also
  when nothing was added), then the next heartbeat acknowledges the owned set at once. The
  coordinator hands a partition over only after its previous owner acknowledged giving it
  up, so the members that keep theirs never stop.
- **Errors.** FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID: the partitions are lost
  (``on_lost``, no commit) and the member joins again with epoch 0 and the same member id.
  NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and a lost connection: the coordinator is
  looked up again and the heartbeat resent in full; COORDINATOR_LOAD_IN_PROGRESS: retried
  after a backoff. UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
  UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, INVALID_REQUEST,
  GROUP_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION and unknown codes are fatal: ``poll``
  raises the error until ``unsubscribe`` (or a new ``subscribe``) starts over.
- **Leaving.** ``close`` and ``unsubscribe`` revoke the partitions (callback), then send
  epoch -1 (a static member, ``group.instance.id``, sends -2: the coordinator keeps its
  partitions for it until the session times out, and the same instance joining again takes
  them over without a rebalance). A member that has not polled for ``max.poll.interval.ms``
  sends the leave at once and is *stale*: its partitions are lost at its next ``poll``,
  which joins again.

The member states are Kafka's ``MemberState`` (``_set_state`` checks each transition
against ``TRANSITIONS``). Finding the coordinator is ``_group_base.py``; offsets (commits
with the member epoch as generation, OffsetFetch with member id and epoch) are
``_group_offsets.py``, asking ``commit_generation``/``commit_error``/``fetch_member``.

Event-loop affinity: one loop, the consumer's; not thread-safe.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import logging
import uuid
from typing import Any

from pylog import errors
from pylog.client.aio._cluster import Cluster
from pylog.client.aio._group_base import (
    COMMIT_FAILED,
    ConsumerOwner,
    CoordinatorLink,
    Generation,
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
from pylog.protocol.messages import ConsumerGroupHeartbeatRequest

__all__ = ["ConsumerMembership", "MemberState", "TRANSITIONS", "LEAVE_GROUP_MEMBER_EPOCH",
           "LEAVE_GROUP_STATIC_MEMBER_EPOCH", "new_member_id"]

log = logging.getLogger("pylog.client.consumer")

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# An assignment as the coordinator speaks it: (topic id, partition) pairs.
Assignment = frozenset[tuple[uuid.UUID, int]]
_NOTHING: Assignment = frozenset()


def new_member_id() -> str:
    """A member id as Kafka's ``Uuid.randomUuid().toString()`` prints it: 16 random bytes
    in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class MemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"  # not subscribed: no heartbeats (commits as a simple member)
    JOINING = "joining"  # heartbeats with epoch 0 until an epoch comes back
    RECONCILING = "reconciling"  # a target assignment differs from what is owned
    ACKNOWLEDGING = "acknowledging"  # reconciled: the next heartbeat goes now, with the owned set
    STABLE = "stable"  # owns its target; heartbeats on the interval
    FENCED = "fenced"  # the coordinator dropped it: lose the partitions, then join again
    PREPARE_LEAVING = "prepare-leaving"  # revoking before the leave heartbeat
    LEAVING = "leaving"  # the leave heartbeat (epoch -1 / -2) is going out
    FATAL = "fatal"  # a non-retriable error; poll raises it
    STALE = "stale"  # left after max.poll.interval.ms; the next poll loses and rejoins


_S = MemberState
TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    _S.UNSUBSCRIBED: frozenset({_S.JOINING, _S.FATAL}),
    _S.JOINING: frozenset({_S.RECONCILING, _S.FENCED, _S.PREPARE_LEAVING, _S.FATAL}),
    _S.RECONCILING: frozenset({_S.ACKNOWLEDGING, _S.STABLE, _S.FENCED, _S.PREPARE_LEAVING,
                               _S.FATAL}),
    _S.ACKNOWLEDGING: frozenset({_S.RECONCILING, _S.STABLE, _S.FENCED, _S.PREPARE_LEAVING,
                                 _S.FATAL}),
    _S.STABLE: frozenset({_S.RECONCILING, _S.FENCED, _S.PREPARE_LEAVING, _S.FATAL}),
    _S.FENCED: frozenset({_S.JOINING, _S.UNSUBSCRIBED}),
    _S.PREPARE_LEAVING: frozenset({_S.LEAVING, _S.FENCED, _S.FATAL}),
    _S.LEAVING: frozenset({_S.UNSUBSCRIBED, _S.STALE, _S.FENCED, _S.FATAL}),
    # Kafka's FATAL is final; here unsubscribe() (or a new subscribe()) starts over.
    _S.FATAL: frozenset({_S.UNSUBSCRIBED}),
    _S.STALE: frozenset({_S.JOINING, _S.UNSUBSCRIBED}),
}

# States in which the member is in the group with an epoch of its own.
_IN_GROUP = frozenset({_S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE, _S.PREPARE_LEAVING})
# States whose heartbeat goes out without waiting for the interval.
_URGENT = frozenset({_S.JOINING, _S.ACKNOWLEDGING})
# States that send no heartbeats.
_SILENT = frozenset({_S.UNSUBSCRIBED, _S.FENCED, _S.FATAL, _S.STALE, _S.PREPARE_LEAVING,
                     _S.LEAVING})

# Heartbeat errors a member cannot recover from by itself (Kafka's handleFatalFailure).
_HINTS = {
    errors.UnreleasedInstanceIdError.code: "another member of the group still uses "
                                           "group.instance.id {instance!r}",
    errors.FencedInstanceIdError.code: "another consumer took over group.instance.id "
                                       "{instance!r}",
    errors.GroupMaxSizeReachedError.code: "the group already has the broker's "
                                          "group.consumer.max.size members",
    errors.UnsupportedAssignorError.code: "the broker has no assignor named by "
                                          "group.remote.assignor {assignor!r}",
    errors.InvalidRegularExpressionError.code: "the broker refused the subscription's "
                                               "regular expression",
    errors.UnsupportedVersionError.code: "the cluster does not serve the consumer group "
                                         "protocol: set group.protocol=classic",
    errors.GroupIdNotFoundError.code: "the group is a classic group with members that the "
                                      "broker does not convert (its group.consumer.migration."
                                      "policy, or a protocol type other than consumer)",
}


class _SentFields:
    """The fields of the last heartbeat sent that are sent again only when they change
    (Kafka's ``HeartbeatState.SentFields``); ``reset`` makes the next heartbeat full."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.rebalance_timeout_ms = -1
        self.topic_names: tuple[str, ...] | None = None
        self.topic_regex: str | None = None
        self.server_assignor: str | None = None
        self.rack_id: str | None = None
        self.owned: tuple[int, Assignment] | None = None  # (local epoch, partitions)


class ConsumerMembership(CoordinatorLink):
    """One consumer's membership in a consumer group (``group.protocol=consumer``).

    Args:
        cluster: the consumer's metadata and connections.
        settings: resolved consumer settings (``group.id`` set).
        client_id: sent in request headers.
        subscription: shared with the consumer core.
        owner: the consumer core (assignment, positions, listener calls).
    """

    protocol = "consumer"

    def __init__(self, cluster: Cluster, settings: dict[str, Any], client_id: str,
                 subscription: SubscriptionState, owner: ConsumerOwner) -> None:
        super().__init__(cluster, settings, client_id)
        self.group_instance_id: str | None = settings["group.instance.id"]
        self.rack_id: str | None = settings["client.rack"] or None
        self.server_assignor: str | None = settings["group.remote.assignor"]
        self.rebalance_timeout_ms: int = settings["max.poll.interval.ms"]
        self.max_poll_interval = settings["max.poll.interval.ms"] / 1000
        self.exclude_internal: bool = settings["exclude.internal.topics"]
        self.subscription = subscription
        self.owner = owner
        self.group_subscription: frozenset[str] = frozenset()  # classic leaders only
        self.state = MemberState.UNSUBSCRIBED
        self.member_id = new_member_id()
        self.member_epoch = 0
        # The latest target from the coordinator, and what this member owns (reconciled)
        # with the epoch it reconciled to: the owned set is what heartbeats acknowledge.
        self.target: Assignment | None = None
        self.target_epoch = 0
        self.target_version = 0  # bumped by every target received
        self.reconciled_version = 0  # the target version the owned set was reconciled to
        self.current: Assignment = _NOTHING
        self.current_epoch = 0
        self.unresolved_at = -1  # metadata version when target topic ids were unknown
        self.sent = _SentFields()
        self.fatal: BaseException | None = None
        self._announce = False  # the first reconciliation after joining calls on_assign
        self._lose_on_poll = False  # stale: the next poll loses the partitions
        self._session = 0  # bumped whenever the membership restarts (joins, fenced, leaves)
        self._seen_version = -1
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._reconcile_task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        loop = asyncio.get_running_loop()
        self.last_poll = loop.time()
        self.heartbeat_interval = 0.0  # the coordinator's, from its answers
        self.next_heartbeat = loop.time()
        self.heartbeat_failures = 0

    # ------------------------------------------------------------------ state machine

    def _set_state(self, new: MemberState) -> None:
        if new is self.state:
            return
        if new not in TRANSITIONS[self.state]:
            raise IllegalStateError(f"group member state {self.state.value} -> {new.value}")
        log.debug("group %s member %s (epoch %d): %s -> %s", self.group_id, self.member_id,
                  self.member_epoch, self.state.value, new.value)
        self.state = new
        self._wakeup.set()
        self.owner.wake()

    def _restart(self) -> None:
        """Forget the epoch, target and owned set (joining again, fenced, left)."""
        self._session += 1
        self.member_epoch = 0
        self.target, self.target_epoch = None, 0
        self.current, self.current_epoch = _NOTHING, 0
        self.unresolved_at = -1
        self.reconciled_version = self.target_version
        self.sent.reset()

    def _join(self) -> None:
        self._restart()
        self._announce = True
        self.next_heartbeat = asyncio.get_running_loop().time()
        self._set_state(MemberState.JOINING)
        log.info("group %s: member %s joining (consumer protocol%s)", self.group_id,
                 self.member_id, f", static {self.group_instance_id}" if self.group_instance_id else "")

    def _fail(self, exc: BaseException) -> None:
        log.error("group %s: member %s failed: %s", self.group_id, self.member_id, exc)
        self.fatal = exc
        self.owner.mark_pending_revocation(self.owner.owned_partitions())  # fetch no more
        self._set_state(MemberState.FATAL)

    def _fence(self, reason: str) -> None:
        """The coordinator no longer has this member at its epoch: lose and rejoin."""
        log.info("group %s: member %s (epoch %d) fenced: %s; its partitions are lost, it "
                 "joins again", self.group_id, self.member_id, self.member_epoch, reason)
        self._session += 1
        self.owner.mark_pending_revocation(self.owner.owned_partitions())
        self._set_state(MemberState.FENCED)

    @property
    def generation(self) -> Generation:
        """Member epoch (-1 outside the group) and member id, as the classic generation:
        what ``consumer_group_metadata()`` hands to a transactional producer."""
        in_group = self.state in _IN_GROUP and self.member_epoch > 0
        return Generation(self.member_epoch if in_group else -1, self.member_id, None)

    def request_rejoin(self, reason: str) -> None:
        """Classic-protocol hook (REBALANCE_IN_PROGRESS on a commit): a consumer group never
        answers it; nothing to do."""

    # ------------------------------------------------------------------ offsets

    def commit_generation(self) -> Generation:
        """Member epoch and id for a group-managed OffsetCommit (v9: the epoch is the
        generation).

        Raises:
            RebalanceInProgressError: joining (no epoch yet): poll, then commit again.
            CommitFailedError: out of the group (fenced, left, stale, failed).
        """
        if self.state in _IN_GROUP and self.member_epoch > 0:
            return Generation(self.member_epoch, self.member_id, None)
        if self.state is MemberState.JOINING:
            raise rebalancing("the consumer is joining the group")
        raise CommitFailedError(
            "Offset commit cannot be completed since the consumer is not part of an active "
            f"group (member state {self.state.value}): it left or was removed (e.g. no poll() "
            "within max.poll.interval.ms); it rejoins on its next poll().")

    def commit_error(self, code: int, sent: Generation) -> BaseException:
        """What an OffsetCommit answered ``code`` for epoch ``sent`` raises (Kafka's
        ``CommitRequestManager``): STALE_MEMBER_EPOCH is retried if a newer epoch came
        meanwhile, else, like UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION, it is a
        ``CommitFailedError`` (the heartbeat handles the membership); FENCED_INSTANCE_ID
        is fatal."""
        name = (errors.error_for_code(code) or errors.UnknownServerError).name
        if code == errors.StaleMemberEpochError.code:
            if self.member_epoch > 0 and self.member_epoch != sent.generation_id:
                exc = errors.StaleMemberEpochError(
                    f"OffsetCommit with member epoch {sent.generation_id}: STALE_MEMBER_EPOCH "
                    f"(retried with epoch {self.member_epoch})")
                exc.retriable = True
                return exc
            return CommitFailedError(f"OffsetCommit failed with stale member epoch "
                                     f"{sent.generation_id}: {COMMIT_FAILED}")
        if code == errors.FencedInstanceIdError.code:
            return self._fatal_error(code, "OffsetCommit")
        return CommitFailedError(f"OffsetCommit failed with {name}: {COMMIT_FAILED}")

    def fetch_member(self) -> tuple[str | None, int]:
        """Member id and epoch of an OffsetFetch v9 (checked by the coordinator), or none
        outside the group."""
        gen = self.generation
        return (gen.member_id, gen.generation_id) if gen.generation_id > 0 else (None, -1)

    def _fatal_error(self, code: int, api: str) -> errors.ApiError:
        cls = errors.error_for_code(code) or errors.UnknownServerError
        hint = _HINTS.get(code, "").format(instance=self.group_instance_id,
                                           assignor=self.server_assignor)
        return cls(f"{api} for group {self.group_id!r} failed: {cls.name}"
                   + (f": {hint}" if hint else ""))

    # ------------------------------------------------------------------ poll

    async def poll(self, deadline: float, wait: bool = True) -> None:
        """Drive the membership from the consumer's ``poll``: join when subscribed, lose the
        partitions of a fenced or stale member and join again, reconcile a new target
        (waiting for it up to ``deadline``, loop time, if ``wait``).

        Raises:
            The fatal heartbeat error (UnreleasedInstanceIdError, GroupMaxSizeReachedError,
            ...) and the first exception a rebalance callback raised.
        """
        loop = asyncio.get_running_loop()
        self.last_poll = loop.time()
        if self.fatal is not None:
            raise self.fatal
        if self.state is MemberState.UNSUBSCRIBED and self.subscription.active:
            self._join()
        hb = self._heartbeat_task
        if hb is None or hb.done():
            if hb is not None and not hb.cancelled() and hb.exception() is not None:
                log.error("group %s: heartbeat task failed (restarted): %r", self.group_id,
                          hb.exception())
            self._heartbeat_task = loop.create_task(self._heartbeat_loop())
        if self.cluster.needs_update():
            try:
                await asyncio.wait_for(self.cluster.update(), max(0.01, deadline - loop.time()))
            except (asyncio.TimeoutError, KafkaConnectionError, KafkaTimeoutError):
                pass
        self.maybe_update_subscription_metadata()
        if (self.state is MemberState.STABLE and self.unresolved_at >= 0
                and self.cluster.version != self.unresolved_at):
            self._set_state(MemberState.RECONCILING)  # new metadata: resolve the rest
        if self._reconcile_task is None and self._needs_reconcile():
            self._reconcile_task = loop.create_task(self._reconcile())
            self._reconcile_task.add_done_callback(lambda _: self.owner.wake())
        task = self._reconcile_task
        if task is not None:
            if wait and not task.done():
                await asyncio.wait({task}, timeout=max(0.0, deadline - loop.time()))
            if task.done():
                self._reconcile_task = None
                task.result()  # raise what failed it

    def _needs_reconcile(self) -> bool:
        return (self.state in (MemberState.RECONCILING, MemberState.FENCED)
                or (self.state is MemberState.STALE and self._lose_on_poll))

    def needs_poll(self) -> bool:
        """Whether ``poll`` has membership work: a reconciliation to start or a finished
        one, or an error to raise."""
        if self.fatal is not None:
            return True
        task = self._reconcile_task
        if task is not None:
            return task.done()
        return self._needs_reconcile() or (
            self.state is MemberState.UNSUBSCRIBED and self.subscription.active)

    def invalidate_metadata(self) -> None:
        """The subscription changed: match the pattern again, tell the coordinator soon."""
        self._seen_version = -1
        if self.fatal is not None:
            # A new subscribe() starts over after a fatal error (Kafka would stay failed).
            self.fatal = None
            self.owner.set_assignment([])
            self._restart()
            self._set_state(MemberState.UNSUBSCRIBED)
        self.next_heartbeat = asyncio.get_running_loop().time()
        self._wakeup.set()

    def maybe_update_subscription_metadata(self) -> None:
        """After a metadata refresh: a pattern's current matches (the broker resolves the
        regex itself; these are what ``subscription()`` shows and metadata is kept for)."""
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

    # ------------------------------------------------------------------ reconciliation

    def _resolve(self, target: Assignment) -> tuple[dict[TopicPartition, uuid.UUID], bool]:
        """Names of the target's topics by id from the metadata; and whether some are
        unknown yet."""
        names = {info.topic_id: name for name, info in self.cluster.topics.items()
                 if not info.error_code}
        out: dict[TopicPartition, uuid.UUID] = {}
        missing = False
        for topic_id, partition in target:
            name = names.get(topic_id)
            if name is None:
                missing = True
            else:
                out[TopicPartition(name, partition)] = topic_id
        return out, missing

    async def _reconcile(self) -> None:
        """Move the owned partitions to the target (revoke, then assign), or lose them
        (fenced, stale) and join again."""
        if self.state in (MemberState.FENCED, MemberState.STALE):
            await self._lose_and_rejoin()
            return
        if self.state is not MemberState.RECONCILING:
            return
        session, target, epoch = self._session, self.target or _NOTHING, self.target_epoch
        version = self.target_version
        resolved, missing = self._resolve(target)
        if missing:
            # A topic id this consumer's metadata does not know yet (a topic just created,
            # or a regex's new match): refresh once; what is still unknown waits.
            try:
                await asyncio.wait_for(self.cluster.update(), self.request_timeout)
            except (asyncio.TimeoutError, KafkaConnectionError, KafkaTimeoutError):
                pass
            if session != self._session:
                return
            resolved, missing = self._resolve(target)
            if missing:
                log.info("group %s: assignment names topic ids not in the metadata yet; "
                         "reconciling the rest", self.group_id)
        self.unresolved_at = self.cluster.version if missing else -1
        assigned = set(resolved)
        owned = set(self.owner.owned_partitions())
        revoked = sorted(owned - assigned, key=_order)
        added = sorted(assigned - owned, key=_order)
        failure: BaseException | None = None
        if revoked or added:
            # As Kafka's AbstractMembershipManager: auto commit of everything consumed, then
            # onPartitionsRevoked, then onPartitionsAssigned (also when nothing was added).
            # The revoked partitions stop fetching first, so the commit covers what was
            # handed out of them.
            log.info("group %s: epoch %d reconciles: revoking %s, adding %s", self.group_id,
                     epoch, revoked, added)
            self.owner.mark_pending_revocation(revoked)
            await self.owner.commit_before_revocation(None, self.rebalance_timeout_ms / 1000)
            if session != self._session:
                return  # fenced meanwhile: the partitions are lost instead
        if revoked:
            failure = await self.owner.invoke_listener("revoked", revoked)
            if session != self._session:
                return
            self.owner.set_assignment(sorted(owned - set(revoked), key=_order))
        if revoked or added or self._announce:
            self._announce = False
            self.owner.set_assignment(sorted(assigned, key=_order))
            failure2 = await self.owner.invoke_listener("assigned", added)
            failure = failure or failure2
            if session != self._session:
                return
        self.current = frozenset((topic_id, tp.partition) for tp, topic_id in resolved.items())
        self.current_epoch = epoch
        self.reconciled_version = version
        if self.state is MemberState.RECONCILING:
            self._set_state(MemberState.ACKNOWLEDGING)  # the heartbeat goes now
        if failure is not None:
            raise failure

    async def _lose_and_rejoin(self) -> None:
        owned = sorted(self.owner.owned_partitions(), key=_order)
        failure = None
        if owned:
            failure = await self.owner.invoke_listener("lost", owned)
        self.owner.set_assignment([])
        self._lose_on_poll = False
        if self.state in (MemberState.FENCED, MemberState.STALE):
            if self.subscription.active:
                self._join()
            else:
                self._restart()
                self._set_state(MemberState.UNSUBSCRIBED)
        if failure is not None:
            raise failure

    # ------------------------------------------------------------------ heartbeats

    async def _sleep(self, seconds: float | None) -> None:
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _heartbeat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.closed:
            state = self.state
            if state in _SILENT:
                await self._sleep(None)
                continue
            now = loop.time()
            poll_due = self.last_poll + self.max_poll_interval
            if now >= poll_due:
                await self._leave_on_poll_timeout()
                continue
            if self.coordinator_unknown():
                try:
                    await self.ensure_coordinator(now + self.retry_backoff_max + self.request_timeout)
                except (errors.GroupAuthorizationFailedError, errors.InvalidGroupIdError) as exc:
                    self._fail(exc)
                except (KafkaTimeoutError, errors.ApiError, KafkaConnectionError):
                    await asyncio.sleep(self.retry_backoff)
                continue
            due = self.next_heartbeat
            if state in _URGENT and self.heartbeat_failures == 0:
                due = min(due, now)
            if now < due:
                await self._sleep(min(due, poll_due) - now)
                continue
            await self._heartbeat()

    def _request(self) -> ConsumerGroupHeartbeatRequest:
        """The next heartbeat: identity always, the rest when it changed (everything when
        joining or after a reset)."""
        s, sub = self.sent, self.subscription
        joining = self.state is MemberState.JOINING
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            instance_id=self.group_instance_id)
        if joining or s.rebalance_timeout_ms != self.rebalance_timeout_ms:
            req.rebalance_timeout_ms = s.rebalance_timeout_ms = self.rebalance_timeout_ms
        if self.rack_id is not None and (joining or s.rack_id != self.rack_id):
            req.rack_id = s.rack_id = self.rack_id
        if sub.pattern is not None:
            regex = sub.pattern.pattern
            if joining or s.topic_regex != regex:
                req.subscribed_topic_regex = s.topic_regex = regex
        else:
            names = tuple(sorted(sub.topics))
            if joining or s.topic_names != names:
                req.subscribed_topic_names = list(names)
                s.topic_names = names
        if self.server_assignor is not None and (joining or s.server_assignor != self.server_assignor):
            req.server_assignor = s.server_assignor = self.server_assignor
        owned = (self.current_epoch, self.current)
        if joining or s.owned != owned:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for topic_id, partition in sorted(self.current):
                by_topic.setdefault(topic_id, []).append(partition)
            req.topic_partitions = [ConsumerGroupHeartbeatRequest.TopicPartitions(
                topic_id=t, partitions=ps) for t, ps in by_topic.items()]
            s.owned = owned
        return req

    async def _heartbeat(self) -> None:
        conn = self.coordinator_conn
        if conn is None:
            return
        loop = asyncio.get_running_loop()
        try:
            version = conn.version_for(ConsumerGroupHeartbeatRequest)
        except errors.UnsupportedVersionError:
            self._fail(self._fatal_error(errors.UnsupportedVersionError.code, "ConsumerGroupHeartbeat"))
            return
        req = self._request()
        if version < 1:
            if req.subscribed_topic_regex is not None:
                self._fail(errors.UnsupportedVersionError(
                    "subscribing to a pattern with group.protocol=consumer needs "
                    "ConsumerGroupHeartbeat v1 (SubscribedTopicRegex); the coordinator serves v0"))
                return
            if self.member_epoch == 0:
                req.member_id = ""  # v0: the coordinator names the member
        if self.state is MemberState.ACKNOWLEDGING:
            # Sent: the owned set is acknowledged; another target may be waiting already.
            self._set_state(MemberState.STABLE if self.target_version == self.reconciled_version
                            else MemberState.RECONCILING)
        session = self._session
        self.next_heartbeat = loop.time() + max(self.heartbeat_interval, self.retry_backoff)
        try:
            resp = await conn.send(req, version)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self.mark_coordinator_unknown(f"heartbeat failed: {exc}")
            self._retry_later(loop)
            return
        if session != self._session or self.state in _SILENT:
            return  # fenced, left or failed meanwhile: an answer to the old membership
        self._on_response(resp, loop)

    def _retry_later(self, loop: asyncio.AbstractEventLoop) -> None:
        self.sent.reset()  # the next heartbeat is full
        self.next_heartbeat = loop.time() + self.backoff(self.heartbeat_failures)
        self.heartbeat_failures += 1

    def _on_response(self, resp: Any, loop: asyncio.AbstractEventLoop) -> None:
        code = resp.error_code
        if code == 0:
            self.heartbeat_failures = 0
            self.heartbeat_interval = resp.heartbeat_interval_ms / 1000
            self.next_heartbeat = loop.time() + self.heartbeat_interval
            if resp.member_id:
                self.member_id = resp.member_id
            if self.state is MemberState.JOINING:
                log.info("group %s: member %s joined at epoch %d", self.group_id,
                         self.member_id, resp.member_epoch)
            self.member_epoch = resp.member_epoch
            if resp.assignment is not None:
                self.target = frozenset((t.topic_id, p) for t in resp.assignment.topic_partitions
                                        for p in t.partitions)
                self.target_epoch = resp.member_epoch
                self.target_version += 1
                self._set_state(MemberState.RECONCILING)
            elif self.state is MemberState.JOINING:
                self.target, self.target_epoch = _NOTHING, resp.member_epoch
                self.target_version += 1
                self._set_state(MemberState.RECONCILING)
            return
        cls = errors.error_for_code(code) or errors.UnknownServerError
        detail = f"{cls.name}" + (f" ({resp.error_message})" if resp.error_message else "")
        self._retry_later(loop)
        if code in (errors.NotCoordinatorError.code, errors.CoordinatorNotAvailableError.code):
            self.mark_coordinator_unknown(detail)
            self.heartbeat_failures = 0
            self.next_heartbeat = loop.time()  # as soon as the coordinator is found again
        elif code == errors.CoordinatorLoadInProgressError.code:
            log.info("group %s: heartbeat: %s; retrying", self.group_id, detail)
        elif code in (errors.FencedMemberEpochError.code, errors.UnknownMemberIdError.code):
            self.heartbeat_failures = 0
            self._fence(detail)
        else:
            exc = self._fatal_error(code, "ConsumerGroupHeartbeat")
            if resp.error_message:
                exc = cls(f"{exc} ({resp.error_message})")
            self._fail(exc)

    # ------------------------------------------------------------------ leaving

    async def _leave_on_poll_timeout(self) -> None:
        log.warning(
            "group %s: no poll() for over max.poll.interval.ms (%d ms): leaving the group. "
            "Poll more often, or lower max.poll.records, or raise max.poll.interval.ms.",
            self.group_id, self.rebalance_timeout_ms)
        self.owner.mark_pending_revocation(self.owner.owned_partitions())
        self._set_state(MemberState.PREPARE_LEAVING)
        self._set_state(MemberState.LEAVING)
        await self._send_leave("consumer poll timeout has expired", None)
        self._restart()
        self._lose_on_poll = True
        self._set_state(MemberState.STALE)

    async def _send_leave(self, reason: str, deadline: float | None) -> None:
        """The leave heartbeat: epoch -1, or -2 for a static member (its partitions wait
        for it until the session times out). ``deadline``: loop time (None: the request
        timeout)."""
        epoch = (LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.group_instance_id is not None
                 else LEAVE_GROUP_MEMBER_EPOCH)
        loop = asyncio.get_running_loop()
        log.info("group %s: member %s leaves with epoch %d (%s)", self.group_id,
                 self.member_id, epoch, reason)
        try:
            conn = await self.ensure_coordinator(
                loop.time() + self.request_timeout if deadline is None else deadline)
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            resp = await conn.send(ConsumerGroupHeartbeatRequest(
                group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                instance_id=self.group_instance_id), timeout=timeout)
            if resp.error_code:
                log.info("group %s: leave heartbeat answered error %d", self.group_id,
                         resp.error_code)
        except (KafkaConnectionError, KafkaTimeoutError, errors.ApiError) as exc:
            log.info("group %s: leave heartbeat failed: %s", self.group_id, exc)

    async def _leave(self, reason: str, deadline: float | None) -> None:
        """Revoke (callback) and leave; a fenced or stale member loses its partitions
        instead, and one that is not in the group only drops them."""
        state = self.state
        owned = sorted(self.owner.owned_partitions(), key=_order)
        failure = None
        if state in (MemberState.JOINING, *_IN_GROUP, MemberState.ACKNOWLEDGING):
            self._set_state(MemberState.PREPARE_LEAVING)
            try:
                if owned:
                    failure = await self.owner.invoke_listener("revoked", owned)
            finally:
                self.owner.set_assignment([])
                self._set_state(MemberState.LEAVING)
                await self._send_leave(reason, deadline)
                self._restart()
                self._set_state(MemberState.UNSUBSCRIBED)
        else:
            if owned and state in (MemberState.FENCED, MemberState.STALE, MemberState.LEAVING):
                failure = await self.owner.invoke_listener("lost", owned)
            self.owner.set_assignment([])
            self._restart()
            self._lose_on_poll = False
            self.fatal = None
            if state is not MemberState.UNSUBSCRIBED:
                self._set_state(MemberState.UNSUBSCRIBED)
        if failure is not None:
            raise failure

    async def stop_tasks(self) -> None:
        """Cancel heartbeating and reconciling."""
        await cancel_tasks(self, "_reconcile_task", "_heartbeat_task")

    async def unsubscribe(self) -> None:
        """``unsubscribe()``: revoke (callback) and leave the group."""
        await self.stop_tasks()
        await self._leave("the consumer unsubscribed from all topics", None)

    async def close(self, deadline: float | None = None) -> None:
        """Stop the tasks, revoke (callback), leave (the answer awaited until ``deadline``,
        loop time), close the coordinator connection."""
        await self.stop_tasks()
        try:
            await self._leave("the consumer is being closed", deadline)
        finally:
            self._wakeup.set()
            await self.close_link()


def _order(tp: TopicPartition) -> tuple[str, int]:
    return tp.topic, tp.partition
