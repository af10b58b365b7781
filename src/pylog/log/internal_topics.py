"""The broker's own internal topics: the one registry that says which topics are internal.

Kafka flags a topic ``is_internal`` in Metadata only when it is one of its own coordinators'
topics (``org.apache.kafka.common.internals.Topic.isInternal``): ``__consumer_offsets``
(group coordinator), ``__transaction_state`` (transaction coordinator) and
``__share_group_state`` (share coordinator, KIP-932). A client's topic
whose name merely starts with ``__`` is an ordinary topic.

The group and transaction coordinators own these topics and will add what they need to their
entries here (how each is created: partition count, compaction). Immutable; safe to share
between threads.
"""

from __future__ import annotations

import dataclasses

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"
# KRaft's metadata log: not a topic clients may create (Kafka's controller refuses
# CreateTopics of it with INVALID_REQUEST). It is not "internal" in Metadata's sense.
CLUSTER_METADATA_TOPIC_NAME = "__cluster_metadata"


@dataclasses.dataclass(frozen=True)
class InternalTopic:
    """An internal topic and the coordinator that owns it."""

    name: str
    owner: str


INTERNAL_TOPICS: dict[str, InternalTopic] = {
    t.name: t
    for t in (
        InternalTopic(GROUP_METADATA_TOPIC_NAME, "group coordinator"),
        InternalTopic(TRANSACTION_STATE_TOPIC_NAME, "transaction coordinator"),
        InternalTopic(SHARE_GROUP_STATE_TOPIC_NAME, "share coordinator"),
    )
}


def is_internal(name: str) -> bool:
    """Whether ``name`` is one of the broker's own internal topics."""
    return name in INTERNAL_TOPICS
