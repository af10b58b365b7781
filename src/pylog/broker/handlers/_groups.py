"""Helpers shared by the group handlers (FindCoordinator, JoinGroup, ... OffsetDelete).

The rules are in the coordinator (``pylog.group``); these handlers translate requests into
its calls and its results into responses, through ``broker.groups`` (``GroupService``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.group.results import Pending

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext
    from pylog.group.coordinator import GroupCoordinator

COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code


def coordinator(ctx: RequestContext, group_id: str | None) -> GroupCoordinator | None:
    """The coordinator of ``group_id``; None when this broker does not host its partition
    (answer ``not_hosted(ctx)``)."""
    return ctx.broker.groups.coordinator(group_id or "")


def not_hosted(ctx: RequestContext) -> int:
    """The error for a group this broker does not coordinate: COORDINATOR_NOT_AVAILABLE on
    a single node (``__consumer_offsets`` does not exist yet: the client then asks
    FindCoordinator, which creates it), NOT_COORDINATOR in cluster mode (another broker
    leads its partition: the client looks the coordinator up again)."""
    return ctx.broker.groups.not_hosted_error()


async def wait(ctx: RequestContext, coord: GroupCoordinator, pending: Pending[Any]) -> Any:
    """Drive the coordinator's writes and timer, then the result of ``pending``."""
    return await ctx.broker.groups.wait(coord, pending)


def driven(ctx: RequestContext, coord: GroupCoordinator, result: Any) -> Any:
    """For calls answered at once: drive the coordinator (they may have scheduled timers or
    writes), return ``result``."""
    ctx.broker.groups.after_call(coord)
    return result


def client_host(ctx: RequestContext) -> str:
    """The member's host as Kafka reports it (``/`` + address)."""
    host = ctx.peer.rsplit(":", 1)[0]
    return "/" + host.strip("[]")


def partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    """Whether the topic partition exists: in cluster mode in the metadata cache (the
    coordinator need not hold a replica of every topic), else in the local logs."""
    cluster = ctx.broker.cluster
    if cluster is not None:
        parts = cluster.metadata.partitions.get(topic)
        return parts is not None and partition in parts
    t = ctx.broker.log_manager.topics.get(topic)
    return t is not None and 0 <= partition < len(t.partitions)


def topics_view(ctx: RequestContext) -> dict[str, tuple[Any, int]]:
    """Every topic the broker knows: name -> (topic id, number of partitions), what the
    consumer-group assignors work from (the metadata cache in cluster mode, else the
    local logs)."""
    cluster = ctx.broker.cluster
    if cluster is not None:
        cache = cluster.metadata
        return {name: (cache.topic_ids[name], len(parts)) for name, parts in cache.partitions.items()
                if name in cache.topic_ids}
    return {name: (t.topic_id, len(t.partitions)) for name, t in ctx.broker.log_manager.topics.items()}


def topic_names(ctx: RequestContext) -> dict[Any, str]:
    """Topic id -> name, for the answers that name the topics of an assignment."""
    return {tid: name for name, (tid, _n) in topics_view(ctx).items()}
