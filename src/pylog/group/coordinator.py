"""The classic group coordinator as a sans-IO state machine (Kafka's ``GroupMetadataManager``).

One ``GroupCoordinator`` hosts the groups of one ``__consumer_offsets`` partition (Kafka's
coordinator shard). It owns every transition of every group it hosts: the request methods
and the timers below are the only code that calls ``ClassicGroup.transition_to``.

How the asyncio glue drives it (it never sleeps, reads sockets or writes files itself):

- Requests are method calls. Those that may have to wait return a ``Pending`` (JoinGroup
  until the rebalance completes; SyncGroup until the leader's assignment is stored;
  OffsetCommit, DeleteGroups and OffsetDelete until their records are in the log); the
  others return their result at once.
- Time comes from the injected clock: call ``tick()`` when ``next_deadline_ms()`` (monotonic
  milliseconds) has passed, and after it as after every request call, ``take_writes()``.
- ``take_writes()`` hands over the records to append to this partition, in order; report
  each with ``Write.complete()`` or ``Write.fail(code)``.
- Loading: ``begin_load()``, ``replay(key, value)`` for every record from log start to end,
  ``complete_load()``. Losing the partition: ``unload()``.

Rules follow Kafka's classic protocol (``GroupMetadataManager``, ``ClassicGroup``; the error
each request gets in each state is the one Kafka returns). Membership lives here; offset
commits, fetches, expiry and the admin APIs are in ``pylog.group.admin``, transactional
offset commits (TxnOffsetCommit and the markers that end them) in
``pylog.group.txn_offsets``: mixins of this class kept apart for size. JoinGroup, SyncGroup,
Heartbeat and LeaveGroup for a KIP-848 consumer group go to ``pylog.group.classic_members``
(classic members of consumer groups); conversions between the two group types are
``pylog.group.migration``'s.

Not thread-safe: call everything from one thread (the broker's event loop).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pylog._clock import Clock
from pylog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from pylog.protocol._records import GroupMetadataValue

from .admin import AdminMixin, map_append_error
from .classic import ClassicGroup, GroupState, Member
from .classic_members import ClassicMembers
from .config import GroupCoordinatorConfig
from .consumer_coordinator import ConsumerGroups, TopicsView
from .heartbeats import HeartbeatsMixin
from .migration import Migration
from .offsets import OffsetMetadataManager
from .records import encode_group_metadata
from .results import (
    NONE,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupMemberResult,
    LeaveGroupResult,
    Pending,
    SyncGroupResult,
    Write,
)
from .share.coordinator import ShareGroups
from .timers import Timers
from .txn_offsets import TxnOffsetsMixin

_S = GroupState

UNKNOWN_MEMBER_ID = ""  # the member id of a member that has none yet (JoinGroup)


class GroupCoordinator(HeartbeatsMixin, TxnOffsetsMixin, AdminMixin):
    """The groups of one ``__consumer_offsets`` partition. See the module docstring."""

    def __init__(self, clock: Clock, config: GroupCoordinatorConfig | None = None, *,
                 new_uuid: Callable[[], str] | None = None) -> None:
        self._clock = clock
        self.config = config or GroupCoordinatorConfig()
        self._new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        self._groups: dict[str, ClassicGroup] = {}
        self._offsets = OffsetMetadataManager(self.config.offset_metadata_max_bytes)
        self._timers = Timers()
        self._writes: list[Write] = []
        self._loading = False
        self._loaded_groups: dict[str, GroupMetadataValue] = {}
        # KIP-848 consumer groups: their own component, sharing this shard's clock, timers,
        # write queue and group-id namespace.
        self.consumer = ConsumerGroups(self.config, mono_ms=self._mono_ms, timers=self._timers,
                                       write=self._write, new_uuid=self._new_uuid, classic_groups=self._groups)
        # Online migration between the protocols, and classic members in consumer groups.
        self.consumer.migration = Migration(self)
        self.classic_members = ClassicMembers(self.consumer, self._new_uuid)
        # KIP-932 share groups: another component on the same shard and namespace.
        self.share = ShareGroups(self.config, mono_ms=self._mono_ms, timers=self._timers, write=self._write,
                                 other_groups=lambda gid: gid in self._groups or gid in self.consumer.groups,
                                 wall_ms=self._wall_ms)
        self._schedule_expiry()

    # ------------------------------------------------------------------ driving

    def _mono_ms(self) -> int:
        # round, not int: a manual clock sums float seconds and 2.9999999 s must be 3000 ms.
        return round(self._clock.monotonic() * 1000)

    def _wall_ms(self) -> int:
        return self._clock.time_ms()

    def next_deadline_ms(self) -> int | None:
        """The earliest timer deadline, in milliseconds of the clock's monotonic time."""
        return self._timers.next_deadline()

    def tick(self) -> None:
        """Fire every timer that is due by the clock's current monotonic time."""
        # One timer at a time, re-reading the table after each: a firing timer may schedule
        # or cancel others (a session expiry completes a join, which restarts heartbeats).
        # "now" is read once so that timers scheduled by callbacks wait for the next tick.
        now = self._mono_ms()
        while True:
            fn = self._timers.pop_due(now)
            if fn is None:
                return
            fn()

    def take_writes(self) -> list[Write]:
        """The writes produced since the last call, in the order they must be appended."""
        writes, self._writes = self._writes, []
        return writes

    def _write(self, group_id: str, records: list[tuple[bytes, bytes | None]],
               on_done: Callable[[int], None] | None = None, producer_id: int = -1,
               producer_epoch: int = -1) -> Write:
        # Writes are handed out in emission order and must complete in that order: the
        # offsets in memory are rebuilt from them in the same order a reload would use.
        write = Write(group_id, records, on_done or (lambda code: None), producer_id, producer_epoch)
        self._writes.append(write)
        return write

    @property
    def loading(self) -> bool:
        return self._loading

    # ------------------------------------------------------------------ shared checks

    def _validate_member(self, group: ClassicGroup, member_id: str, group_instance_id: str | None) -> int:
        """Kafka's ``ClassicGroup.validateMember``: the error code for an unknown or fenced
        member, NONE when ``member_id`` (with its instance id) is a current member."""
        if group_instance_id is not None:
            existing = group.static_member_id(group_instance_id)
            if existing is None:
                return UnknownMemberIdError.code
            if existing != member_id:
                # Another process with the same group.instance.id took the slot since.
                return FencedInstanceIdError.code
        if not group.has_member(member_id):
            return UnknownMemberIdError.code
        return NONE

    def _session_timer(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        # One timer per member id, keyed so that rescheduling replaces it: a heartbeat,
        # a commit or a completed join all push the same deadline forward.
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        key = ("heartbeat", group.group_id, member.member_id)
        self._timers.schedule(key, self._mono_ms() + timeout,
                              lambda: self._on_heartbeat_expired(group.group_id, member.member_id))

    # ------------------------------------------------------------------ JoinGroup

    def join_group(
        self,
        group_id: str,
        member_id: str,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int = -1,
        group_instance_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        api_version: int = 9,
        reason: str | None = None,
        topics: TopicsView | Callable[[], TopicsView] | None = None,
    ) -> Pending[JoinGroupResult]:
        """JoinGroup (v0-9). Returns a handle completed when the member's join is answered.

        ``rebalance_timeout_ms`` -1 (v0 has no such field) means the session timeout.
        ``api_version`` decides MEMBER_ID_REQUIRED (v4+) and SkipAssignment (v9+).
        ``reason`` (v8+) is informational, as in Kafka (which logs it). ``topics`` (the
        broker's topic metadata, or a function giving it) is read when the group is a
        consumer group.

        Returns:
            A ``Pending[JoinGroupResult]``; refused joins come back completed. The result's
            ``member_id`` is the id to use next (also on MEMBER_ID_REQUIRED), ``members``
            is filled for the leader only.
        """
        def done(code: int, mid: str = member_id) -> Pending[JoinGroupResult]:
            return Pending.completed(JoinGroupResult(code, member_id=mid))

        if self._loading:
            return done(CoordinatorLoadInProgressError.code)
        if not group_id:
            return done(InvalidGroupIdError.code)
        cfg = self.config
        # The session timeout bounds how long a dead member holds partitions; the broker
        # refuses values outside group.min/max.session.timeout.ms before anything else.
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            return done(InvalidSessionTimeoutError.code)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        protocols = [(name, bytes(meta)) for name, meta in protocols]
        args = (protocol_type, protocols, session_timeout_ms, rebalance_timeout_ms, group_instance_id,
                client_id, client_host, api_version)

        cgroup = self.consumer.groups.get(group_id)
        if cgroup is not None and not cgroup.is_empty():
            # A classic member of a consumer group (pylog.group.classic_members).
            return self.classic_members.join(cgroup, member_id, protocol_type, protocols, session_timeout_ms,
                                             rebalance_timeout_ms, group_instance_id, client_id, client_host,
                                             api_version, (topics() if callable(topics) else topics) or {})
        if cgroup is not None:
            # An empty consumer group is replaced by the classic group (any policy).
            self._write(group_id, self.consumer.delete_records(cgroup))
        if group_id in self.share.groups:
            return done(InconsistentGroupProtocolError.code)
        # Only a joiner without a member id may create the group; a member id for a group
        # we do not know means the group was deleted or moved (the client rejoins afresh).
        group = self._groups.get(group_id)
        is_new_group = group is None
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return done(UnknownMemberIdError.code)
            group = self._groups[group_id] = ClassicGroup(group_id, self._wall_ms())

        # group.max.size comes first, for known members too: a member over the limit is
        # removed, which is how a group shrinks after the limit is lowered.
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member_and_update(group, member, "group.max.size reached")
            result = done(GroupMaxSizeReachedError.code, UNKNOWN_MEMBER_ID)
        elif member_id == UNKNOWN_MEMBER_ID:
            result = self._join_new_member(group, *args)
        else:
            result = self._join_existing_member(group, member_id, *args)

        if is_new_group:
            if group.is_empty() and not group.pending_members and not self._has_waiters(group):
                # Nothing joined (refused): the group was never created.
                del self._groups[group_id]
            else:
                self._write_new_group_record(group, result)
        return result

    def _has_waiters(self, group: ClassicGroup) -> bool:
        return any(m.awaiting_join for m in group.members.values())

    def _write_new_group_record(self, group: ClassicGroup, result: Pending[JoinGroupResult]) -> None:
        # A newly created group is persisted at once as an empty group (protocol type "",
        # generation 0), as Kafka does, so that it exists after a restart.
        value = group.metadata_value()
        value.protocol_type, value.generation, value.protocol, value.leader, value.members = "", 0, None, None, []

        def on_done(code: int) -> None:
            if code != NONE and not result.done:
                result._complete(JoinGroupResult(map_append_error(code)))
        self._write(group.group_id, [encode_group_metadata(group.group_id, value)], on_done)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """group.max.size (Kafka's ``acceptJoiningMember``): during a rebalance, count the
        members that have joined it; otherwise all members. Known members always pass
        outside a rebalance, so a group over the limit (after a config change) shrinks at
        its next rebalance."""
        limit = self.config.max_size
        if group.is_in(_S.EMPTY, _S.DEAD):
            return True
        if group.is_in(_S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.awaiting_join_count() < limit
        return group.has_member(member_id) or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, protocol_type: str, protocols: list[tuple[str, bytes]],
                         session_ms: int, rebalance_ms: int, instance_id: str | None, client_id: str,
                         client_host: str, api_version: int) -> Pending[JoinGroupResult]:
        if group.is_in(_S.DEAD):
            return Pending.completed(JoinGroupResult(CoordinatorNotAvailableError.code))
        if not group.supports_protocols(protocol_type, {n for n, _ in protocols}):
            return Pending.completed(JoinGroupResult(InconsistentGroupProtocolError.code))
        new_id = f"{instance_id if instance_id is not None else client_id}-{self._new_uuid()}"
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                return self._update_static_member(group, existing, new_id, protocols, session_ms, rebalance_ms,
                                                  api_version)
            return self._add_member(group, new_id, instance_id, client_id, client_host, protocol_type, protocols,
                                    session_ms, rebalance_ms)
        if api_version >= 4:
            # KIP-394: hand out the id first and let the member rejoin with it, so that a
            # client that times out and retries does not leave a defunct member behind.
            group.pending_members.add(new_id)
            self._timers.schedule(("heartbeat", group.group_id, new_id), self._mono_ms() + session_ms,
                                  lambda: self._on_heartbeat_expired(group.group_id, new_id))
            return Pending.completed(JoinGroupResult(MemberIdRequiredError.code, member_id=new_id))
        return self._add_member(group, new_id, None, client_id, client_host, protocol_type, protocols,
                                session_ms, rebalance_ms)

    def _join_existing_member(self, group: ClassicGroup, member_id: str, protocol_type: str,
                              protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int,
                              instance_id: str | None, client_id: str, client_host: str,
                              api_version: int) -> Pending[JoinGroupResult]:
        def done(code: int) -> Pending[JoinGroupResult]:
            return Pending.completed(JoinGroupResult(code, member_id=member_id))

        if group.is_in(_S.DEAD):
            return done(CoordinatorNotAvailableError.code)
        if not group.supports_protocols(protocol_type, {n for n, _ in protocols}):
            return done(InconsistentGroupProtocolError.code)
        if member_id in group.pending_members:
            # The second JoinGroup of a v4+ member that got MEMBER_ID_REQUIRED.
            return self._add_member(group, member_id, instance_id, client_id, client_host, protocol_type,
                                    protocols, session_ms, rebalance_ms)
        error = self._validate_member(group, member_id, instance_id)
        if error != NONE:
            return done(error)
        member = group.members[member_id]
        # A known member: what its join means depends on where the group is.
        if group.is_in(_S.PREPARING_REBALANCE):
            # Part of the rebalance in progress: park until the join phase ends.
            return self._update_member(group, member, protocols, session_ms, rebalance_ms)
        if group.is_in(_S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # A retry of a join already answered: answer it again, same generation.
                return Pending.completed(self._join_response(group, member))
            return self._update_member(group, member, protocols, session_ms, rebalance_ms)
        if group.is_in(_S.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining means it wants a new assignment (e.g. topics changed).
                return self._update_member(group, member, protocols, session_ms, rebalance_ms)
            return Pending.completed(self._join_response(group, member, with_members=False))
        return done(UnknownMemberIdError.code)

    def _join_response(self, group: ClassicGroup, member: Member, with_members: bool = True,
                       leader: str | None = None, skip_assignment: bool = False) -> JoinGroupResult:
        # Only the leader gets the member list (with each member's metadata for the chosen
        # protocol): it runs the assignor; followers wait for the result in SyncGroup.
        members: list[JoinGroupMember] = []
        if with_members and group.is_leader(member.member_id):
            members = [JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinGroupResult(
            NONE, generation_id=group.generation_id, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, leader=leader if leader is not None else (group.leader_id or ""),
            skip_assignment=skip_assignment, member_id=member.member_id, members=members,
        )

    def _add_member(self, group: ClassicGroup, member_id: str, instance_id: str | None, client_id: str,
                    client_host: str, protocol_type: str, protocols: list[tuple[str, bytes]], session_ms: int,
                    rebalance_ms: int) -> Pending[JoinGroupResult]:
        pending: Pending[JoinGroupResult] = Pending()
        member = Member(member_id, instance_id, client_id, client_host, rebalance_ms, session_ms, protocol_type,
                        protocols, join_pending=pending, is_new=True)
        if group.is_in(_S.PREPARING_REBALANCE) and group.previous_state == _S.EMPTY:
            group.new_member_added = True  # extends the initial rebalance delay
        group.pending_members.discard(member_id)
        group.add(member)
        # A new member cannot heartbeat while its join is parked: it is bounded by the
        # new-member join timeout instead of its session timeout.
        self._session_timer(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group)
        return pending

    def _update_member(self, group: ClassicGroup, member: Member, protocols: list[tuple[str, bytes]],
                       session_ms: int, rebalance_ms: int) -> Pending[JoinGroupResult]:
        if member.awaiting_join and member.join_pending is not None:
            # A retried join replaces the parked one; the old request is answered so that no
            # response is left hanging.
            member.join_pending._complete(JoinGroupResult(RebalanceInProgressError.code, member_id=member.member_id))
        member.protocols = protocols
        member.session_timeout_ms = session_ms
        member.rebalance_timeout_ms = rebalance_ms
        pending: Pending[JoinGroupResult] = Pending()
        member.join_pending = pending
        self._maybe_prepare_rebalance_or_complete_join(group)
        return pending

    def _update_static_member(self, group: ClassicGroup, old_id: str, new_id: str,
                              protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int,
                              api_version: int) -> Pending[JoinGroupResult]:
        """A static member came back with an empty member id (a restarted process): it takes
        over its slot under a new id and the old id is fenced. In Stable, when the protocol
        the group would select does not change, there is no rebalance: the member keeps its
        assignment and gets the current generation once the new id is persisted."""
        # Remembered for pre-KIP-814 leaders, which are told the old leader id (see below).
        current_leader = group.leader_id or ""
        old = group.members[old_id]
        # Fence whatever the old process still has parked.
        fenced = JoinGroupResult(FencedInstanceIdError.code, member_id=old_id)
        if old.join_pending is not None:
            old.join_pending._complete(fenced)
        if old.sync_pending is not None:
            old.sync_pending._complete(SyncGroupResult(FencedInstanceIdError.code))
        old.join_pending = old.sync_pending = None
        self._timers.cancel(("heartbeat", group.group_id, old_id))
        member = group.replace_static_member(old_id, new_id)
        self._session_timer(group, member)
        # Kept to undo the update if the record naming the new id cannot be written.
        saved = (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms)
        member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = protocols, session_ms, rebalance_ms
        pending: Pending[JoinGroupResult] = Pending()
        member.join_pending = pending

        if group.is_in(_S.STABLE):
            # The point of static membership: a restart (same instance id, same protocols)
            # must not move partitions. Only if the protocol the group would now select
            # changes is a rebalance needed to keep assignment and protocol consistent.
            if group.protocol_name == group.select_protocol():
                def on_done(code: int) -> None:
                    if member.join_pending is not pending or pending.done:
                        # Superseded while the record was being written (a rebalance answered
                        # this join, or the member retried): the newer path owns the member.
                        return
                    if code != NONE:
                        # Not persisted: put the old id back, as if this join never happened.
                        member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = saved
                        member.join_pending = None
                        if group.has_member(new_id):
                            group.replace_static_member(new_id, old_id)
                            self._timers.cancel(("heartbeat", group.group_id, new_id))
                            self._session_timer(group, member)
                        pending._complete(JoinGroupResult(
                            map_append_error(code), generation_id=group.generation_id,
                            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                            leader=current_leader))
                        return
                    member.join_pending = None
                    if api_version >= 9:
                        # KIP-814: the leader learns the members but must not reassign.
                        leader = group.is_leader(new_id)
                        pending._complete(self._join_response(group, member, with_members=leader,
                                                              skip_assignment=leader))
                    else:
                        # Older leaders would compute a new assignment if told they lead:
                        # name the previous leader id so they behave as followers.
                        pending._complete(self._join_response(group, member, with_members=False,
                                                              leader=current_leader))
                self._write(group.group_id, [encode_group_metadata(group.group_id, group.metadata_value())], on_done)
                return pending
            self._maybe_prepare_rebalance_or_complete_join(group)
            return pending
        if group.is_in(_S.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old id: only a new rebalance is safe.
            self._prepare_rebalance(group)
            return pending
        self._maybe_complete_join(group)
        return pending

    # ------------------------------------------------------------------ rebalance core

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        # From Empty, CompletingRebalance or Stable a change starts a rebalance; during
        # one, it may be the change that lets the join phase end.
        if group.can_rebalance():
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(_S.COMPLETING_REBALANCE):
            # Members waiting for an assignment of the generation being abandoned rejoin.
            self._reset_and_propagate_assignment_error(group, RebalanceInProgressError.code)
        self._timers.cancel(("sync", group.group_id))
        initial = group.is_in(_S.EMPTY)
        group.transition_to(_S.PREPARING_REBALANCE, self._wall_ms())
        key = ("join", group.group_id)
        if initial:
            # group.initial.rebalance.delay.ms: wait for more members of a starting
            # application; every newcomer extends the wait, up to the rebalance timeout.
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._timers.schedule(key, self._mono_ms() + delay,
                                  lambda: self._initial_delay_expired(group.group_id, delay, remaining))
            return
        # A later rebalance ends as soon as every member has rejoined, or at the longest
        # member rebalance timeout, when the ones still missing are dropped.
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            self._schedule_join_timeout(group)

    def _schedule_join_timeout(self, group: ClassicGroup) -> None:
        self._timers.schedule(("join", group.group_id), self._mono_ms() + group.rebalance_timeout_ms(),
                              lambda: self._join_timeout(group.group_id))

    def _join_timeout(self, group_id: str) -> None:
        group = self._groups.get(group_id)
        if group is not None and group.is_in(_S.PREPARING_REBALANCE):
            self._complete_join(group)

    def _initial_delay_expired(self, group_id: str, delay: int, remaining: int) -> None:
        group = self._groups.get(group_id)
        if group is None or not group.is_in(_S.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self._timers.schedule(("join", group_id), self._mono_ms() + new_delay,
                                  lambda: self._initial_delay_expired(group_id, new_delay, new_remaining))
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        # Not during the initial rebalance: that one always waits for its delay.
        if (group.is_in(_S.PREPARING_REBALANCE) and group.previous_state != _S.EMPTY
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop dynamic members that did not rejoin, choose the next
        generation and answer every parked join (the leader gets the member list)."""
        self._timers.cancel(("join", group.group_id))
        for member in [m for m in group.members.values() if not m.awaiting_join and not m.is_static]:
            self._timers.cancel(("heartbeat", group.group_id, member.member_id))
            self._drop(group, member)
        if group.is_in(_S.DEAD):
            return
        leader = group.members.get(group.leader_id or "")
        if leader is not None and not leader.awaiting_join:
            rejoined = next((m for m in group.members.values() if m.awaiting_join), None)
            if rejoined is None:
                # Only static members that have not rejoined are left: wait for them (or
                # for their session timeouts) one more rebalance timeout.
                self._schedule_join_timeout(group)
                return
            group.leader_id = rejoined.member_id
        # The next generation. Its number is what SyncGroup, Heartbeat and OffsetCommit
        # check, so anything from an older generation is refused from here on.
        now = self._wall_ms()
        group.generation_id += 1
        if group.is_empty():
            # Nobody rejoined: the group empties, and says so in the log (so that a reload
            # does not resurrect the last generation's members).
            group.protocol_name = None
            group.transition_to(_S.EMPTY, now)
            self._write(group.group_id, [encode_group_metadata(group.group_id, group.metadata_value())])
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(_S.COMPLETING_REBALANCE, now)
        for member in list(group.members.values()):
            # Every member is answered now and must sync; its session timer restarts, as
            # it could not heartbeat while its join was parked.
            pending = member.join_pending
            member.join_pending = None
            member.is_new = False
            if pending is not None:
                pending._complete(self._join_response(group, member))
            self._session_timer(group, member)
            group.pending_sync.add(member.member_id)
        # Members that never send SyncGroup are removed after the rebalance timeout.
        generation = group.generation_id
        self._timers.schedule(("sync", group.group_id), self._mono_ms() + group.rebalance_timeout_ms(),
                              lambda: self._pending_sync_expired(group.group_id, generation))

    def _pending_sync_expired(self, group_id: str, generation: int) -> None:
        group = self._groups.get(group_id)
        if group is None or group.generation_id != generation or not group.pending_sync:
            return
        if not group.is_in(_S.COMPLETING_REBALANCE, _S.STABLE):
            return
        # A member that joined but never synced would hold the group in CompletingRebalance
        # (or keep partitions unassigned in Stable): remove it and rebalance without it.
        for member_id in list(group.pending_sync):
            self._timers.cancel(("heartbeat", group_id, member_id))
            member = group.members.get(member_id)
            if member is not None:
                self._drop(group, member)
        group.pending_sync.clear()
        self._prepare_rebalance(group)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, code: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_pending is not None:
                member.sync_pending._complete(SyncGroupResult(code))
                member.sync_pending = None

    def _drop(self, group: ClassicGroup, member: Member) -> None:
        """Remove a member, answering anything it has parked with UNKNOWN_MEMBER_ID."""
        if member.join_pending is not None:
            member.join_pending._complete(JoinGroupResult(UnknownMemberIdError.code))
        if member.sync_pending is not None:
            member.sync_pending._complete(SyncGroupResult(UnknownMemberIdError.code))
        member.join_pending = member.sync_pending = None
        group.remove(member.member_id)

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        self._timers.cancel(("heartbeat", group.group_id, member.member_id))
        self._drop(group, member)
        if group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(_S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is None or group.is_in(_S.DEAD):
            return
        if member_id in group.pending_members:
            # A MEMBER_ID_REQUIRED id that never came back.
            group.pending_members.discard(member_id)
            if group.is_in(_S.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # Members parked in a rebalance need not heartbeat (their timer restarts when the
        # join completes); new members time out even while parked.
        if member.is_new or not (member.awaiting_join or member.awaiting_sync):
            self._remove_member_and_update(group, member, "session timeout")

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: list[tuple[str, bytes]] | None = None,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Pending[SyncGroupResult]:
        """SyncGroup (v0-5). ``assignments`` are (member id, bytes) from the leader; the
        protocol type and name are given from v5 on (None before)."""
        def done(code: int) -> Pending[SyncGroupResult]:
            return Pending.completed(SyncGroupResult(code))

        if self._loading:
            return done(CoordinatorLoadInProgressError.code)
        if not group_id:
            return done(InvalidGroupIdError.code)
        cgroup = self.consumer.groups.get(group_id)
        if cgroup is not None and not cgroup.is_empty():
            return self.classic_members.sync(cgroup, generation_id, member_id, group_instance_id, protocol_type,
                                             protocol_name)
        group = self._groups.get(group_id)
        if group is None or group.is_empty():
            return done(UnknownMemberIdError.code)
        if group.is_in(_S.DEAD):
            return done(CoordinatorNotAvailableError.code)
        error = self._validate_member(group, member_id, group_instance_id)
        if error != NONE:
            return done(error)
        if generation_id != group.generation_id:
            return done(IllegalGenerationError.code)
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            return done(InconsistentGroupProtocolError.code)
        if group.is_in(_S.PREPARING_REBALANCE):
            return done(RebalanceInProgressError.code)
        member = group.members[member_id]
        self._remove_pending_sync(group, member_id)
        if group.is_in(_S.STABLE):
            return Pending.completed(SyncGroupResult(NONE, group.protocol_type, group.protocol_name,
                                                     member.assignment))
        # CompletingRebalance: park until the leader's assignment is stored.
        if member.sync_pending is not None:
            member.sync_pending._complete(SyncGroupResult(RebalanceInProgressError.code))
        pending: Pending[SyncGroupResult] = Pending()
        member.sync_pending = pending
        # The leader's sync carries everyone's assignment. It is written to the log first;
        # only once durable does anyone get it and does the group become Stable, so that a
        # coordinator failover never hands out an assignment it has lost.
        if group.is_leader(member_id):
            given = {mid: bytes(data) for mid, data in (assignments or [])}
            # Members the leader left out get an empty assignment.
            full = {mid: given.get(mid, b"") for mid in group.members}
            record = encode_group_metadata(group_id, group.metadata_value(full))

            def on_done(code: int) -> None:
                if not group.is_in(_S.COMPLETING_REBALANCE) or group.generation_id != generation_id:
                    return  # the generation moved on meanwhile; its syncs were answered
                if code != NONE:
                    self._reset_and_propagate_assignment_error(group, map_append_error(code))
                    self._maybe_prepare_rebalance_or_complete_join(group)
                    return
                for mid, m in group.members.items():
                    m.assignment = full.get(mid, b"")
                    if m.sync_pending is not None:
                        m.sync_pending._complete(SyncGroupResult(NONE, group.protocol_type, group.protocol_name,
                                                                 m.assignment))
                        m.sync_pending = None
                group.transition_to(_S.STABLE, self._wall_ms())
            self._write(group_id, [record], on_done)
        return pending

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel(("sync", group.group_id))

    # ------------------------------------------------------------------ Heartbeat

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> int:
        """Heartbeat (v0-4): the response's error code."""
        if self._loading:
            return NONE  # Kafka answers heartbeats with NONE while loading
        if not group_id:
            return InvalidGroupIdError.code
        cgroup = self.consumer.groups.get(group_id)
        if cgroup is not None:
            return self.classic_members.heartbeat(cgroup, generation_id, member_id, group_instance_id)
        group = self._groups.get(group_id)
        if group is None:
            return UnknownMemberIdError.code
        if group.is_in(_S.DEAD):
            return CoordinatorNotAvailableError.code
        error = self._validate_member(group, member_id, group_instance_id)
        if error != NONE:
            return error
        if generation_id != group.generation_id:
            return IllegalGenerationError.code
        if group.is_in(_S.EMPTY):
            return UnknownMemberIdError.code
        # Any heartbeat that passed the checks keeps the member alive, even the ones that
        # tell it to rejoin.
        self._session_timer(group, group.members[member_id])
        if group.is_in(_S.PREPARING_REBALANCE):
            return RebalanceInProgressError.code  # the member must rejoin
        return NONE

    # ------------------------------------------------------------------ LeaveGroup

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        """LeaveGroup: ``members`` are (member id, group instance id); v0-2 send one member
        with no instance id and carry only the top-level error (use the member's error)."""
        if self._loading:
            return LeaveGroupResult(CoordinatorLoadInProgressError.code)
        if not group_id:
            return LeaveGroupResult(InvalidGroupIdError.code)
        cgroup = self.consumer.groups.get(group_id)
        if cgroup is not None:
            return self.classic_members.leave(cgroup, members)
        group = self._groups.get(group_id)
        if group is None:
            return LeaveGroupResult(NONE, [LeaveGroupMemberResult(mid, iid, UnknownMemberIdError.code)
                                           for mid, iid in members])
        if group.is_in(_S.DEAD):
            return LeaveGroupResult(CoordinatorNotAvailableError.code)
        # Each member is judged alone (v3+ batches): one unknown id does not stop the rest.
        out: list[LeaveGroupMemberResult] = []
        removed = False
        for mid, iid in members:
            if mid == UNKNOWN_MEMBER_ID:
                # A static member leaving by instance id alone (the admin's removeMembers).
                target = group.static_member_id(iid)
                if target is None:
                    out.append(LeaveGroupMemberResult(mid, iid, UnknownMemberIdError.code))
                    continue
            elif mid in group.pending_members:
                group.pending_members.discard(mid)
                self._timers.cancel(("heartbeat", group_id, mid))
                out.append(LeaveGroupMemberResult(mid, iid, NONE))
                removed = True
                continue
            else:
                error = self._validate_member(group, mid, iid)
                if error != NONE:
                    out.append(LeaveGroupMemberResult(mid, iid, error))
                    continue
                target = mid
            self._timers.cancel(("heartbeat", group_id, target))
            self._drop(group, group.members[target])
            out.append(LeaveGroupMemberResult(mid, iid, NONE))
            removed = True
        # One rebalance for the whole batch, not one per member.
        if removed:
            if group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(_S.PREPARING_REBALANCE):
                self._maybe_complete_join(group)
        return LeaveGroupResult(NONE, out)
