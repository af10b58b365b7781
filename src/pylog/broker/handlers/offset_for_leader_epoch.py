"""OffsetForLeaderEpoch (key 23), versions 2-4 (KIP-320 truncation detection).

A single node has been the leader since epoch 0: the end offset of epoch 0 (and of any
later epoch a client asks about, which cannot exist yet) is the log end offset. A client
whose current leader epoch is newer than ours is told UNKNOWN_LEADER_EPOCH; older, FENCED.
A replicated partition (cluster mode) is answered by its leader from the leader-epoch cache
(followers truncating and clients checking for truncation alike); a follower answers
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, cluster_allowed, denied
from pylog.broker.handlers._common import LEADER_EPOCH
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import OffsetForLeaderEpochResponse
from pylog.replication.epochs import epoch_end_offset

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = OffsetForLeaderEpochResponse


def _part(index: int, code: int, epoch: int = -1, end: int = -1) -> Any:
    return _R.EpochEndOffset(error_code=code, partition=index, leader_epoch=epoch, end_offset=end)


def _replicated(state: Any, p: Any, plog: Any) -> Any:
    """A replicated partition (cluster mode): answered by its leader from the leader-epoch
    cache (Kafka's ``LeaderEpochFileCache.endOffsetFor``), for followers and clients."""
    if state.leader is None:
        return _part(p.partition, errors.NotLeaderOrFollowerError.code)
    if p.current_leader_epoch > state.leader_epoch:
        return _part(p.partition, errors.UnknownLeaderEpochError.code)
    if 0 <= p.current_leader_epoch < state.leader_epoch:
        return _part(p.partition, errors.FencedLeaderEpochError.code)
    epoch, end = epoch_end_offset(plog.leader_epoch_cache.entries, p.leader_epoch,
                                  plog.log_end_offset)
    return _part(p.partition, 0, epoch, end)


async def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.log_manager
    replicas = ctx.broker.replicas
    topics = []
    unauthorized: set[str] = set()  # followers: CLUSTER_ACTION; clients: DESCRIBE per topic
    if ctx.broker.authorizer is not None and not cluster_allowed(
            ctx, AclOperation.CLUSTER_ACTION, log_denied=False):
        unauthorized = denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                              (t.topic for t in request.topics))
    for t in request.topics:
        topic = manager.topics.get(t.topic)
        parts = []
        for p in t.partitions:
            if t.topic in unauthorized:
                parts.append(_part(p.partition, errors.TopicAuthorizationFailedError.code))
                continue
            state = (replicas.partitions.get((t.topic, p.partition)) if replicas.active
                     else None)
            if topic is None or not 0 <= p.partition < len(topic.partitions):
                parts.append(_part(p.partition, errors.UnknownTopicOrPartitionError.code))
            elif state is not None:
                parts.append(_replicated(state, p, topic.partitions[p.partition].log))
            elif p.current_leader_epoch > LEADER_EPOCH:
                parts.append(_part(p.partition, errors.UnknownLeaderEpochError.code))
            elif 0 <= p.current_leader_epoch < LEADER_EPOCH:  # pragma: no cover - epoch is 0
                parts.append(_part(p.partition, errors.FencedLeaderEpochError.code))
            elif p.leader_epoch < LEADER_EPOCH:
                # Epochs before ours never held data here.
                parts.append(_part(p.partition, 0, -1, -1))
            else:
                plog = topic.partitions[p.partition].log
                parts.append(_part(p.partition, 0, LEADER_EPOCH, plog.log_end_offset))
        topics.append(_R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return _R(throttle_time_ms=0, topics=topics)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, topics=[
        _R.OffsetForLeaderTopicResult(topic=t.topic, partitions=[_part(p.partition, code) for p in t.partitions])
        for t in request.topics
    ])
