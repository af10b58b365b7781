"""Replaying the KIP-848 consumer-group records (types 3-8) read back from
``__consumer_offsets`` into ``ConsumerGroup`` objects: the loading half of
``pylog.group.consumer_coordinator``. Records are applied in log order; a tombstone of the
group epoch record removes the group (a deletion, or a conversion back to a classic group,
``pylog.group.migration``).

Not thread-safe: called from the coordinator's thread only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState
from .records import ConsumerGroupRecord

__all__ = ["replay"]


def _classic_fields(value: Any) -> dict[str, Any]:
    """The classic-member fields of a member record's ClassicMemberMetadata (absent: the
    decoder's default, an empty struct)."""
    if value is None or (value.session_timeout_ms == 0 and not value.supported_protocols):
        return {"classic_session_timeout_ms": None, "classic_protocols": None}
    return {"classic_session_timeout_ms": value.session_timeout_ms,
            "classic_protocols": [(p.name, bytes(p.metadata)) for p in value.supported_protocols]}


def replay(groups: dict[str, ConsumerGroup], rec: ConsumerGroupRecord) -> None:
    """Apply one consumer-group record read back from the log (log order)."""
    gid = rec.key.group_id
    t, v = rec.record_type, rec.value
    group = groups.get(gid)
    if group is None:
        if v is None:
            return
        group = groups[gid] = ConsumerGroup(gid)
    if t == 3:
        if v is None:
            groups.pop(gid, None)
        else:
            group.group_epoch = v.epoch
    elif t == 4:
        group.subscription_metadata = (
            {}
            if v is None
            else {tm.topic_name: (tm.topic_id, tm.num_partitions) for tm in v.topics}
        )
    elif t == 5:
        mid = rec.key.member_id
        if v is None:
            group.remove_member(mid)
            return
        old = group.members.get(mid) or ConsumerGroupMember(mid)
        group.put_member(
            dataclasses.replace(
                old,
                instance_id=v.instance_id,
                rack_id=v.rack_id,
                client_id=v.client_id,
                client_host=v.client_host,
                subscribed_topic_names=list(v.subscribed_topic_names),
                subscribed_topic_regex=v.subscribed_topic_regex or None,
                rebalance_timeout_ms=v.rebalance_timeout_ms,
                server_assignor=v.server_assignor,
                **_classic_fields(v.classic_member_metadata),
            )
        )
    elif t == 6:
        group.assignment_epoch = -1 if v is None else v.assignment_epoch
    elif t == 7:
        mid = rec.key.member_id
        if v is None:
            group.target.pop(mid, None)
        else:
            group.target[mid] = {
                tp.topic_id: set(tp.partitions) for tp in v.topic_partitions if tp.partitions
            }
    elif t == 8:
        mid = rec.key.member_id
        known = group.members.get(mid)
        if known is None and v is None:
            return
        old = known or ConsumerGroupMember(mid)
        if v is None:
            group.put_member(
                dataclasses.replace(
                    old,
                    member_epoch=0,
                    previous_member_epoch=0,
                    state=MemberState.STABLE,
                    assigned={},
                    pending_revocation={},
                )
            )
            return
        state = v.state if v.state in MemberState._value2member_map_ else MemberState.UNKNOWN
        group.put_member(
            dataclasses.replace(
                old,
                member_epoch=v.member_epoch,
                previous_member_epoch=v.previous_member_epoch,
                state=MemberState(state),
                assigned={
                    tp.topic_id: set(tp.partitions)
                    for tp in v.assigned_partitions
                    if tp.partitions
                },
                pending_revocation={
                    tp.topic_id: set(tp.partitions)
                    for tp in v.partitions_pending_revocation
                    if tp.partitions
                },
            )
        )
