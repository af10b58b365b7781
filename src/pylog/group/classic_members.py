"""Classic-protocol members in a KIP-848 consumer group (Kafka's ``classicGroup*ToConsumerGroup``).

A consumer group (after an online upgrade, ``pylog.group.migration``, or any non-empty
consumer group a classic consumer joins) serves JoinGroup, SyncGroup, Heartbeat and
LeaveGroup from members that speak the classic protocol; the broker's assignor, not a
leader, decides their partitions, and they reconcile like the others, one rejoin at a time:

- **JoinGroup** (protocol type ``consumer``, an assignor every classic member supports, else
  INCONSISTENT_GROUP_PROTOCOL; v4+ dynamic members first get MEMBER_ID_REQUIRED): the
  subscription (topics, rack, owned partitions) comes from the first protocol's
  ConsumerProtocolSubscription (malformed: UNKNOWN_SERVER_ERROR, as Kafka answers it). A
  static member with a new member id replaces the one holding its instance id, at epoch 0
  with its target; when that was the last consumer-protocol member the group goes back to
  a classic group (``Migration.maybe_downgrade_on_replacement``). A changed subscription
  bumps the group epoch, the target
  assignment is recomputed, and the member reconciles with the partitions it says it owns.
  The answer (no leader, no member list: the member just syncs) carries the member epoch as
  the generation, once the records are written; the member must then sync within its
  rebalance timeout.
- **SyncGroup**: the member's generation must be its epoch (ILLEGAL_GENERATION); if the group
  epoch moved past it (and it is not revoking), REBALANCE_IN_PROGRESS; else its assigned
  partitions as a ConsumerProtocolAssignment in its subscription's version.
- **Heartbeat**: keeps the session (the JoinGroup's session timeout) alive; answers
  REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch is ahead of its epoch,
  it has partitions to revoke, or partitions it waited for were released. A member told
  to rejoin that does not within its rebalance timeout is fenced.
- **LeaveGroup**: the members leave; one epoch bump for the batch.
- **After a load**: members that must rejoin get their rebalance timeout again
  (``complete_load``).

Not thread-safe: called from the coordinator's thread only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pylog.errors import (
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownServerError,
)

from .admin import map_append_error
from .classic import CONSUMER_PROTOCOL_TYPE
from .consumer_coordinator import ConsumerGroups, TopicsView
from .consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState, reconcile
from .migration import decode_subscription, encode_assignment, ids_to_names, names_to_ids
from .records import (
    encode_consumer_group_current_assignment,
    encode_consumer_group_epoch,
    encode_consumer_group_member,
    encode_consumer_group_target_member,
)
from .results import (
    NONE,
    JoinGroupResult,
    LeaveGroupMemberResult,
    LeaveGroupResult,
    Pending,
    SyncGroupResult,
)

__all__ = ["ClassicMembers"]

Record = tuple[bytes, bytes | None]


class ClassicMembers:
    """Classic requests against the consumer groups of ``consumer``. See the module docstring."""

    def __init__(self, consumer: ConsumerGroups, new_uuid: Callable[[], str]) -> None:
        self._cg = consumer
        self._new_uuid = new_uuid

    # ------------------------------------------------------------------ lookups

    def _find(self, group: ConsumerGroup, member_id: str, instance_id: str | None
              ) -> tuple[int, ConsumerGroupMember | None]:
        """Kafka's ``validateConsumerGroupMember`` + ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                return FencedInstanceIdError.code, None
        if member is None or not member.uses_classic_protocol:
            return UnknownMemberIdError.code, None
        return NONE, member

    def _must_rejoin(self, group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        return (member.member_epoch < group.group_epoch
                or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member)))

    def _schedule(self, kind: str, group_id: str, member_id: str, timeout_ms: int, if_absent: bool = False) -> None:
        key = (kind, group_id, member_id)
        if if_absent and self._cg._timers.has(key):
            return
        self._cg._timers.schedule(key, self._cg._mono_ms() + max(timeout_ms, 0),
                                  lambda: self._cg._expire(group_id, member_id, None))

    # ------------------------------------------------------------------ loading

    def complete_load(self) -> None:
        """After a load (the session timers are the consumer groups'): a classic member the
        log shows must rejoin (``_must_rejoin``) gets its rebalance timeout again, from now,
        so one that never rejoins is fenced even if it never heartbeats to be told. Kafka's
        ``onLoaded`` restores only the session and revocation timers, and re-arms this one
        on the member's next Heartbeat or SyncGroup (as ``heartbeat`` and ``sync`` do here).
        The must-sync timer cannot be restored: no record says whether a member synced
        since its last JoinGroup; a member that neither syncs nor heartbeats loses its
        session."""
        for gid, group in self._cg.groups.items():
            for m in group.members.values():
                if m.uses_classic_protocol and self._must_rejoin(group, m):
                    self._schedule("cg-join", gid, m.member_id, m.rebalance_timeout_ms, if_absent=True)

    # ------------------------------------------------------------------ JoinGroup

    def join(self, group: ConsumerGroup, member_id: str, protocol_type: str, protocols: list[tuple[str, bytes]],
             session_ms: int, rebalance_ms: int, instance_id: str | None, client_id: str, client_host: str,
             api_version: int, topics: TopicsView) -> Pending[JoinGroupResult]:
        def done(code: int, mid: str = member_id) -> Pending[JoinGroupResult]:
            return Pending.completed(JoinGroupResult(code, member_id=mid))

        cg, gid = self._cg, group.group_id
        unknown = member_id == ""
        if unknown:
            member_id = self._new_uuid()
        if (len(group.members) >= cg.config.consumer_max_size and member_id not in group.members
                and group.static_member(instance_id) is None):
            return done(GroupMaxSizeReachedError.code, "")
        if not protocols or not group.supports_classic_protocols(protocol_type, {n for n, _ in protocols}):
            return done(InconsistentGroupProtocolError.code, "" if unknown else member_id)
        if unknown and instance_id is None and api_version >= 4:
            return done(MemberIdRequiredError.code, member_id)
        refused = self._join_error(group, member_id, instance_id, unknown)
        if refused != NONE:
            return done(refused, member_id)
        try:
            sub = decode_subscription(protocols[0][1])
        except ValueError:
            # Kafka's deserializeSubscription throws an IllegalStateException here, which
            # its coordinator answers UNKNOWN_SERVER_ERROR (not INCONSISTENT_GROUP_PROTOCOL).
            return done(UnknownServerError.code, "")
        # The static member this join replaces or rejoins as (Kafka's staticMemberId,
        # read before the join changes the group).
        existing = group.static_member(instance_id)
        records: list[Record] = []
        member = self._join_member(group, member_id, instance_id, unknown, records)
        updated = dataclasses.replace(
            member, instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=getattr(sub, "rack_id", None) or member.rack_id,
            rebalance_timeout_ms=rebalance_ms if rebalance_ms != -1 else member.rebalance_timeout_ms,
            subscribed_topic_names=list(sub.topics), client_id=client_id, client_host=client_host,
            classic_session_timeout_ms=session_ms, classic_protocols=[(n, bytes(m)) for n, m in protocols])
        is_new = member.member_id not in group.members
        bump = is_new or updated.subscription_key() != member.subscription_key()
        if is_new or updated.metadata_key() != member.metadata_key():
            records.append(encode_consumer_group_member(gid, member_id, updated))
        group.put_member(updated)
        bump = cg._refresh_metadata(group, topics, records) or bump
        if bump:
            group.group_epoch += 1
            records.append(encode_consumer_group_epoch(gid, group.group_epoch))
        if group.group_epoch > group.assignment_epoch:
            cg._assign(group, records)
        owned = names_to_ids({tp.topic: tp.partitions for tp in getattr(sub, "owned_partitions", [])}, topics)
        after = reconcile(updated, group.assignment_epoch, group.target.get(member_id, {}),
                          group.partition_epoch, owned)
        if after is not updated or is_new:
            group.put_member(after)
            records.append(encode_consumer_group_current_assignment(gid, member_id, after))
        result = JoinGroupResult(NONE, generation_id=after.member_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE,
                                 protocol_name=protocols[0][0], leader="", member_id=member_id)
        # The last consumer-protocol member replaced by this classic static member: the group
        # goes back to a classic group, Stable, this member in it (no rebalance).
        classic = None
        if existing is not None and cg.migration is not None:
            classic = cg.migration.maybe_downgrade_on_replacement(group, member_id, records)
        if classic is not None:
            # The member syncs with the classic group's generation and protocol.
            result = dataclasses.replace(result, generation_id=classic.generation_id,
                                         protocol_name=classic.protocol_name)

        def answered() -> JoinGroupResult:
            cg._timers.cancel(("cg-join", gid, member_id))
            if cg.groups.get(gid) is group and member_id in group.members:  # not converted or left since
                cg._schedule_session_timeout(gid, member_id, session_ms)
                self._schedule("cg-sync", gid, member_id, rebalance_ms if rebalance_ms != -1 else session_ms)
            return result

        if not records:
            return Pending.completed(answered())
        pending: Pending[JoinGroupResult] = Pending()

        def on_done(code: int) -> None:
            if code != NONE:
                pending._complete(JoinGroupResult(map_append_error(code), member_id=member_id))
            else:
                pending._complete(answered())
        cg._write(gid, records, on_done)
        return pending

    @staticmethod
    def _join_error(group: ConsumerGroup, member_id: str, instance_id: str | None, unknown: bool) -> int:
        """Why the joining member may not join (Kafka's ``getOrMaybeSubscribe*ConsumerGroupMember``
        for a classic join), checked before anything changes."""
        if instance_id is None:
            member = group.members.get(member_id)
            return UnknownMemberIdError.code if member is not None and not member.uses_classic_protocol else NONE
        existing = group.static_member(instance_id)
        if existing is not None and existing.member_id != member_id and not unknown:
            return FencedInstanceIdError.code
        return NONE

    def _join_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None, unknown: bool,
                     records: list[Record]) -> ConsumerGroupMember:
        """The joining member (new, or its current state); ``_join_error`` said it may join."""
        if instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        existing = group.static_member(instance_id)
        if existing is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id, instance_id=instance_id)
        if existing.member_id == member_id:
            return existing
        # A restarted static member (new member id, whichever protocol the old one spoke):
        # it takes over the old one's place and target partitions at epoch 0, as in Kafka
        # (it then reconciles like a new member).
        replacement = dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        target = group.target.get(existing.member_id)
        self._cg._remove(group, existing.member_id, records)
        group.put_member(replacement)
        if target is not None:
            group.target[member_id] = target
            records.append(encode_consumer_group_target_member(group.group_id, member_id, target))
        records.append(encode_consumer_group_member(group.group_id, member_id, replacement))
        records.append(encode_consumer_group_current_assignment(group.group_id, member_id, replacement))
        return replacement

    # ------------------------------------------------------------------ SyncGroup

    def sync(self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None) -> Pending[SyncGroupResult]:
        def done(code: int) -> Pending[SyncGroupResult]:
            return Pending.completed(SyncGroupResult(code))

        error, member = self._find(group, member_id, instance_id)
        if member is None:
            return done(error)
        if generation_id != member.member_epoch:
            return done(IllegalGenerationError.code)
        protocols = member.classic_protocols or []
        name = protocols[0][0] if protocols else None
        if ((protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE)
                or (protocol_name is not None and protocol_name != name)):
            return done(InconsistentGroupProtocolError.code)
        gid = group.group_id
        if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            self._schedule("cg-join", gid, member.member_id, member.rebalance_timeout_ms, if_absent=True)
            return done(RebalanceInProgressError.code)
        self._cg._timers.cancel(("cg-sync", gid, member.member_id))
        self._cg._schedule_session_timeout(gid, member.member_id, member.classic_session_timeout_ms)
        names = {tid: n for n, (tid, _c) in group.subscription_metadata.items()}
        assignment = encode_assignment(ids_to_names(member.assigned, names), protocols[0][1] if protocols else b"")
        return Pending.completed(SyncGroupResult(NONE, CONSUMER_PROTOCOL_TYPE, name, assignment))

    # ------------------------------------------------------------------ Heartbeat

    def heartbeat(self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None) -> int:
        error, member = self._find(group, member_id, instance_id)
        if member is None:
            return error
        if generation_id != member.member_epoch:
            return IllegalGenerationError.code
        gid = group.group_id
        self._cg._schedule_session_timeout(gid, member.member_id, member.classic_session_timeout_ms)
        if self._must_rejoin(group, member):
            self._schedule("cg-join", gid, member.member_id, member.rebalance_timeout_ms, if_absent=True)
            return RebalanceInProgressError.code
        return NONE

    # ------------------------------------------------------------------ LeaveGroup

    def leave(self, group: ConsumerGroup, members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        out: list[LeaveGroupMemberResult] = []
        records: list[Record] = []
        for mid, iid in members:
            if iid is None:
                member = group.members.get(mid)
                code = NONE if member is not None and member.uses_classic_protocol else UnknownMemberIdError.code
            else:
                member = group.static_member(iid)
                if member is None:
                    code = UnknownMemberIdError.code
                elif mid and member.member_id != mid:
                    code = FencedInstanceIdError.code
                else:
                    code = NONE if member.uses_classic_protocol else UnknownMemberIdError.code
            if code != NONE or member is None:
                out.append(LeaveGroupMemberResult(mid, iid, code))
                continue
            self._cg._remove(group, member.member_id, records)
            out.append(LeaveGroupMemberResult(member.member_id, iid, NONE))
        if records:
            self._cg.after_removal(group, records, None)
            self._cg._write(group.group_id, records)
        return LeaveGroupResult(NONE, out)
