"""Helpers shared by several handlers (topic lookup with auto-creation, leader epoch)."""

from __future__ import annotations

import logging

from pylog import errors
from pylog.broker.handlers._context import RequestContext
from pylog.log import Topic, TopicNameError, validate_topic_name
from pylog.log.internal_topics import (
    CLUSTER_METADATA_TOPIC_NAME,
    GROUP_METADATA_TOPIC_NAME,
    is_internal,
)
from pylog.replication.append import LEADER_EPOCH  # noqa: F401 - re-exported to the handlers

log = logging.getLogger("pylog.broker.handlers")

# Most partitions one CreateTopics or CreatePartitions request may create, as Kafka's
# controller (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH): beyond it the whole
# request is refused with POLICY_VIOLATION instead of creating directories, files and
# index mappings for as many partitions as an int32 can name.
MAX_PARTITIONS_PER_BATCH = 10_000
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


async def lookup_topic(ctx: RequestContext, name: str, *, auto_create: bool) -> Topic:
    """The topic called ``name``, created with the broker defaults when allowed.

    Raises:
        InvalidTopicError: an illegal name.
        UnknownTopicOrPartitionError: no such topic and no auto-creation.
    """
    manager = ctx.broker.log_manager
    topic = manager.topics.get(name)
    if topic is not None:
        return topic
    if ctx.broker.cluster is not None:
        # Cluster mode: topics are created through ZooKeeper (CreateTopics, Metadata's
        # auto-creation) and local logs by LeaderAndIsr; never a local-only topic here.
        raise errors.UnknownTopicOrPartitionError("This server does not host this topic-partition.")
    if is_internal(name) or name == CLUSTER_METADATA_TOPIC_NAME:
        # Internal topics are created by their coordinators, with their own configs, never
        # as ordinary topics: __consumer_offsets by the group coordinator (as Kafka's
        # auto-creation does); __transaction_state has no coordinator yet;
        # __cluster_metadata is KRaft's metadata log, never created as a topic.
        if auto_create and ctx.broker.config["auto.create.topics.enable"] and name == GROUP_METADATA_TOPIC_NAME:
            return await ctx.broker.groups.ensure_topic()
        raise errors.UnknownTopicOrPartitionError("This server does not host this topic-partition.")
    try:
        validate_topic_name(name)
    except TopicNameError as exc:
        raise errors.InvalidTopicError(str(exc)) from None
    if not (auto_create and ctx.broker.config["auto.create.topics.enable"]):
        raise errors.UnknownTopicOrPartitionError("This server does not host this topic-partition.")
    try:
        topic = await manager.create_topic_async(ctx.broker.executor, name)
    except errors.TopicAlreadyExistsError:
        # Created by a request that ran while this one waited for the topic lock.
        return manager.topics[name]
    log.info("auto-created topic %s for %s", name, ctx.peer)
    return topic
