"""A share group's state (KIP-932; Kafka's ``ShareGroup`` and ``ShareGroupMember``) and its
server-side assignor.

A share group has no reconciliation: partitions are shared, never owned, so nothing is
revoked. A member's epoch moves to the group's assignment epoch on its next heartbeat and
it gets the target assignment at once. States (``ShareGroupState``): Empty (no members),
Stable (members), Dead (deleted).

The ``simple`` assignor (Kafka's ``SimpleAssignor``): every member gets every partition of
every topic it subscribes to, so several members share each partition and the share
partitions (``pylog.group.share.share_partition``) hand each record to one of them.

Not thread-safe: owned by the coordinator's thread.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ShareGroup", "ShareGroupMember", "ShareGroupState", "simple_assign", "SHARE_ASSIGNOR"]

TopicPartitions = dict[uuid.UUID, set[int]]

SHARE_ASSIGNOR = "simple"
LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    assigned: TopicPartitions = field(default_factory=dict)


class ShareGroup:
    """One share group: members, epochs, subscribed topics' metadata, target assignment."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        # Subscribed topics: name -> (topic id, number of partitions).
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.target: dict[str, TopicPartitions] = {}
        self.dead = False

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}


def simple_assign(members: Mapping[str, ShareGroupMember],
                  metadata: Mapping[str, tuple[uuid.UUID, int]],
                  assignable: Mapping[uuid.UUID, set[int]]) -> dict[str, TopicPartitions]:
    """Kafka's ``simple`` share assignor: each member gets all partitions of its subscribed
    topics that exist and are ``assignable`` (topic id -> partitions whose share-partition
    state is initialized: Kafka's ``withTopicAssignablePartitionsMap``). A subscribed topic
    that does not exist yet, or whose state is not initialized yet, is assigned later."""
    out: dict[str, TopicPartitions] = {}
    for mid, m in members.items():
        parts: TopicPartitions = {}
        for name in m.subscribed_topic_names:
            meta = metadata.get(name)
            if meta is None:
                continue
            ps = set(assignable.get(meta[0], ())) & set(range(meta[1]))
            if ps:
                parts[meta[0]] = ps
        out[mid] = parts
    return out
