"""Share-group offsets for the admin client (KIP-932's Admin API: Kafka's
``Admin.listShareGroupOffsets``, ``alterShareGroupOffsets``, ``deleteShareGroupOffsets``),
over DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92) at the group's coordinator, retried as every group call is
(``GroupAdmin._at_coordinator``).

A share group has no committed offsets; what it has per partition is the share-partition
start offset (SPSO): every record below it is done with. Altering it (only while the group
has no members) makes the group deliver from the new offset on; deleting a topic's state
makes the group start that topic again from ``share.auto.offset.reset``.

Event-loop affinity: the admin's loop, like ``GroupAdmin``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from pylog import errors
from pylog.client.aio._group_admin import _check, _error, _group_id
from pylog.client.aio.consumer import as_partitions
from pylog.client.records import TopicPartition
from pylog.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
)

if TYPE_CHECKING:
    from pylog.client.aio._group_admin import GroupAdmin
    from pylog.net.connection import Connection

__all__ = ["SharePartitionOffsetInfo", "list_share_group_offsets", "alter_share_group_offsets",
           "delete_share_group_offsets"]


class SharePartitionOffsetInfo(NamedTuple):
    """A share partition's start offset (Kafka's ``SharePartitionOffsetInfo``); ``lag`` is
    None from a broker without DescribeShareGroupOffsets v1 (Kafka 4.1)."""

    start_offset: int
    leader_epoch: int | None
    lag: int | None


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


async def list_share_group_offsets(groups: GroupAdmin, group_id: str,
                                   partitions: Iterable[Any] | None = None
                                   ) -> dict[TopicPartition, SharePartitionOffsetInfo | None]:
    """Start offsets of a share group: every partition it has state for (``partitions``
    None), or the given ones (None for a partition without state).

    Raises:
        GroupIdNotFoundError: not a share group.
        UnknownTopicOrPartitionError, TopicAuthorizationFailedError ...: the first partition
            refused.
    """
    _group_id(group_id)
    asked = None if partitions is None else list(dict.fromkeys(as_partitions(partitions)))
    what = f"list offsets of share group {group_id!r}"
    R = DescribeShareGroupOffsetsRequest

    async def ask(conn: Connection) -> dict[TopicPartition, SharePartitionOffsetInfo | None]:
        topics = None if asked is None else [
            R.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in _by_topic(asked).items()]
        version = conn.version_for(R)
        resp = await conn.send(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(
            group_id=group_id, topics=topics)]), version)
        (g,) = resp.groups
        _check(g.error_code, what, g.error_message)
        out: dict[TopicPartition, SharePartitionOffsetInfo | None] = {}
        for t in g.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic_name, p.partition_index)
                _check(p.error_code, f"{what} for {tp.topic}-{tp.partition}", p.error_message)
                out[tp] = None if p.start_offset < 0 else SharePartitionOffsetInfo(
                    p.start_offset, p.leader_epoch if p.leader_epoch >= 0 else None,
                    p.lag if version >= 1 and p.lag >= 0 else None)
        if asked is None:
            return {tp: o for tp, o in sorted(out.items()) if o is not None}
        return {tp: out.get(tp) for tp in asked}
    return await groups._at_coordinator(group_id, what, ask)


async def alter_share_group_offsets(groups: GroupAdmin, group_id: str,
                                    offsets: Mapping[Any, int]) -> None:
    """Set the start offsets ``{tp: offset}`` of a share group without members.

    Raises:
        GroupIdNotFoundError: not a share group.
        NonEmptyGroupError: the group has members (stop its consumers first).
        UnknownTopicOrPartitionError, InvalidRequestError ...: the first partition refused.
    """
    _group_id(group_id)
    wanted = dict(zip(as_partitions(offsets), offsets.values(), strict=True))
    for tp, offset in wanted.items():
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"{tp}: expected a start offset >= 0, got {offset!r}")
    if not wanted:
        return
    what = f"alter offsets of share group {group_id!r}"
    R = AlterShareGroupOffsetsRequest
    topics: dict[str, list[Any]] = {}
    for tp, offset in wanted.items():
        topics.setdefault(tp.topic, []).append(R.AlterShareGroupOffsetsRequestPartition(
            partition_index=tp.partition, start_offset=offset))

    async def ask(conn: Connection) -> None:
        resp = await conn.send(R(group_id=group_id, topics=[
            R.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in topics.items()]))
        _check(resp.error_code, what, resp.error_message)
        for t in resp.responses:
            for p in t.partitions:
                _check(p.error_code, f"{what} for {t.topic_name}-{p.partition_index}",
                       p.error_message)
    await groups._at_coordinator(group_id, what, ask)


async def delete_share_group_offsets(groups: GroupAdmin, group_id: str, topics: Iterable[str]
                                     ) -> dict[str, errors.ApiError | None]:
    """Delete a share group's state of whole topics: ``{topic: None}`` where deleted, the
    error where not (UnknownTopicOrPartitionError: no such topic, or no state for it).

    Raises:
        GroupIdNotFoundError: not a share group.
        NonEmptyGroupError: the group has members.
    """
    _group_id(group_id)
    if isinstance(topics, str):
        raise TypeError(f"expected a list of topic names, got the string {topics!r}")
    names = list(dict.fromkeys(topics))
    what = f"delete offsets of share group {group_id!r}"
    R = DeleteShareGroupOffsetsRequest

    async def ask(conn: Connection) -> dict[str, errors.ApiError | None]:
        resp = await conn.send(R(group_id=group_id, topics=[
            R.DeleteShareGroupOffsetsRequestTopic(topic_name=n) for n in names]))
        _check(resp.error_code, what, resp.error_message)
        out: dict[str, errors.ApiError | None] = {
            t.topic_name: (_error(t.error_code, f"{what} for {t.topic_name}", t.error_message)
                           if t.error_code else None)
            for t in resp.responses}
        return {n: out.get(n) for n in names}
    return await groups._at_coordinator(group_id, what, ask)
