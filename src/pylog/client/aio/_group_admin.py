"""Group administration for the admin client: list, describe, offsets, deletion.

Each group has one coordinator (the leader of its ``__consumer_offsets`` partition), found
with FindCoordinator and cached; every group request goes there. As Kafka's admin client
does, a call is retried until ``default.api.timeout.ms`` when the coordinator is loading
(COORDINATOR_LOAD_IN_PROGRESS), has moved (NOT_COORDINATOR: the cache entry is dropped and
the coordinator looked up again), is not there yet (COORDINATOR_NOT_AVAILABLE) or the
connection to it broke. ListGroups goes to every broker, each answering for the groups it
coordinates.

Offsets are altered as Kafka's ``Admin.alterConsumerGroupOffsets`` does: an OffsetCommit
with generation -1 and an empty member id, which a coordinator accepts only for a group
with no members (Empty, or unknown: then the commit creates it). A group with members
answers UNKNOWN_MEMBER_ID; that is raised as ``NonEmptyGroupError`` saying so.

Member assignments of consumer groups (protocol type ``consumer``) are decoded from
Kafka's ConsumerProtocol bytes: an int16 version, then ``ConsumerProtocolAssignment`` at
that version; versions newer than the schema only append fields, so they are read at the
newest version known, as Kafka's ``ConsumerProtocol.deserializeAssignment`` does.

Event-loop affinity: owned by the admin's loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

from pylog import errors
from pylog.client.aio._cluster import Cluster
from pylog.client.aio.consumer import as_partitions
from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError
from pylog.client.records import OffsetAndMetadata, TopicPartition
from pylog.net.connection import Connection
from pylog.protocol._schema import ConsumerProtocolAssignment
from pylog.protocol.messages import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ShareGroupDescribeRequest,
)

__all__ = ["GroupListing", "MemberDescription", "GroupDescription", "OffsetAndMetadata",
           "GroupAdmin", "decode_assignment", "GROUP_STATES"]

T = TypeVar("T")

CONSUMER_PROTOCOL_TYPE = "consumer"
# Kafka's group states (classic protocol, then KIP-848's), as ListGroups and DescribeGroups
# spell them; ListGroups' state filter matches them case-insensitively.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty",
                "Assigning", "Reconciling")
_GROUP_KEY = 0  # FindCoordinator key type of a group
# Coordinator errors a call retries, dropping the cached coordinator for the second set.
_RETRY = (errors.CoordinatorLoadInProgressError, errors.RebalanceInProgressError)
_CONSUMER_GROUP_DESCRIBE = 69  # ApiKey.CONSUMER_GROUP_DESCRIBE (KIP-848)
# ConsumerGroupDescribe v1's MemberType (KIP-1099); -1 (unknown) and v0 give None.
_MEMBER_TYPES = {0: "classic", 1: "consumer"}
_SHARE_GROUP_DESCRIBE = 77  # ApiKey.SHARE_GROUP_DESCRIBE (KIP-932)
_COORDINATOR_MOVED = (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError)
_REDISCOVER = (*_COORDINATOR_MOVED, KafkaConnectionError, KafkaTimeoutError)


class GroupListing(NamedTuple):
    """A group as ListGroups names it. ``state`` is None from brokers older than
    ListGroups v4; ``protocol_type`` is "" for a group only offsets were committed for;
    ``group_type`` (``"classic"``, ``"consumer"`` for KIP-848 groups) is None before v5."""

    group_id: str
    protocol_type: str
    state: str | None
    group_type: str | None = None


class MemberDescription(NamedTuple):
    """A member of a group: ``assignment`` is decoded for consumer groups (empty while a
    rebalance is running, and for other protocol types)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]
    # KIP-848 consumer groups only (None for classic groups): the member's epoch, the
    # partitions it is moving to, its subscribed topics.
    member_epoch: int | None = None
    target_assignment: list[TopicPartition] | None = None
    subscribed_topics: list[str] | None = None
    # KIP-848 consumer groups (ConsumerGroupDescribe v1, KIP-1099): "classic" for a member
    # that joined with the classic protocol (JoinGroup), "consumer" for a consumer-protocol
    # member; None when the coordinator does not say (v0, or -1).
    member_type: str | None = None


class GroupDescription(NamedTuple):
    """State, protocol and members of a group. A group the coordinator does not know is
    described with state ``"Dead"`` and no members, as Kafka's DescribeGroups answers.

    Attributes:
        protocol: the chosen protocol (the partition assignor of a consumer group, e.g.
            ``"range"``); "" outside Stable.
        coordinator: node id of the group's coordinator.
    """

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: int
    # "consumer" for a KIP-848 group (described by ConsumerGroupDescribe; ``protocol`` is
    # then its server-side assignor), "share" for a KIP-932 share group (ShareGroupDescribe;
    # ``protocol`` "simple"), with its group and assignment epochs.
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None


def decode_assignment(data: bytes | None) -> list[TopicPartition]:
    """Partitions of a ConsumerProtocol assignment (``[]`` for empty bytes).

    Raises:
        RemoteProtocolError: the bytes are not a ConsumerProtocol assignment.
    """
    if not data:
        return []
    view = memoryview(bytes(data))
    if len(view) < 2:
        raise errors.RemoteProtocolError("consumer assignment shorter than its version")
    version = int.from_bytes(view[:2], "big", signed=True)
    if version < 0:
        raise errors.RemoteProtocolError(f"consumer assignment version {version}")
    version = min(version, ConsumerProtocolAssignment.VALID_VERSIONS[1])
    a, _ = ConsumerProtocolAssignment.decode_from(view[2:], 0, version)
    return sorted(TopicPartition(t.topic, p) for t in a.assigned_partitions for p in t.partitions)


def _error(code: int, what: str, message: str | None = None) -> errors.ApiError:
    cls = errors.error_for_code(code) or errors.UnknownServerError
    return cls(f"{what}: {cls.name}" + (f": {message}" if message else ""))


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        raise _error(code, what, message)


class GroupAdmin:
    """Group requests over a ``Cluster``, at each group's coordinator.

    Args:
        cluster: the admin's cluster view.
        timeout: seconds a call may take, retries included (``default.api.timeout.ms``).
    """

    def __init__(self, cluster: Cluster, timeout: float) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self._coordinators: dict[str, int] = {}

    # ------------------------------------------------------------------ plumbing

    async def _find_coordinator(self, group_id: str) -> int:
        conn = await self.cluster.any_connection()
        R = FindCoordinatorRequest
        version = conn.version_for(R)
        if version >= 4:
            resp = await conn.send(R(key_type=_GROUP_KEY, coordinator_keys=[group_id]), version)
            (c,) = resp.coordinators
            code, message, node = c.error_code, c.error_message, c.node_id
        else:
            resp = await conn.send(R(key=group_id, key_type=_GROUP_KEY), version)
            code, node = resp.error_code, resp.node_id
            message = resp.error_message if version >= 1 else None
        _check(code, f"find the coordinator of group {group_id!r}", message)
        if node not in self.cluster.brokers:
            await self.cluster.update()
            if node not in self.cluster.brokers:
                raise errors.CoordinatorNotAvailableError(
                    f"coordinator {node} of group {group_id!r} is not in the metadata")
        return int(node)

    async def _at_coordinator(self, group_id: str, what: str,
                              call: Callable[[Connection], Awaitable[T]]) -> T:
        """``call(connection to the group's coordinator)``, retried on coordinator errors
        until the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            try:
                node = self._coordinators.get(group_id)
                if node is None:
                    node = self._coordinators[group_id] = await self._find_coordinator(group_id)
                return await call(await self.cluster.connection(node))
            except _RETRY + _REDISCOVER as exc:
                if isinstance(exc, _REDISCOVER):
                    self._coordinators.pop(group_id, None)
                    if isinstance(exc, KafkaConnectionError):
                        self.cluster.request_update()
                last: BaseException = exc
            left = deadline - loop.time()
            if left <= 0:
                raise KafkaTimeoutError(f"{what}: not done within {self.timeout:g} s "
                                        f"(last error: {last})") from last
            await asyncio.sleep(min(self.cluster.retry_backoff, left))

    async def coordinator(self, group_id: str) -> int:
        """Node id of the group's coordinator."""
        async def ask(conn: Connection) -> int:
            return conn.node_id
        return await self._at_coordinator(group_id, f"find the coordinator of {group_id!r}", ask)

    # ------------------------------------------------------------------ list / describe

    async def list_groups(self, states: Iterable[str] | None = None,
                          types: Iterable[str] | None = None) -> list[GroupListing]:
        """Groups of every broker, sorted by id; ``states`` keeps those in these states
        (case-insensitive; needs ListGroups v4, Kafka 2.6+), ``types`` those of these types
        (``classic``, ``consumer``...; needs ListGroups v5, Kafka 3.8+).

        Raises:
            ValueError: a state or type Kafka does not have.
            UnsupportedVersionError: a filter the broker's ListGroups version lacks.
        """
        wanted = _states(states)
        kinds = _types(types)
        await self.cluster.update()
        nodes = sorted(self.cluster.brokers)
        results = await asyncio.gather(*(self._list_at(n, wanted, kinds) for n in nodes))
        found = {g.group_id: g for listing in results for g in listing}
        return [found[g] for g in sorted(found)]

    async def _list_at(self, node: int, states: list[str], types: list[str]) -> list[GroupListing]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            try:
                conn = await self.cluster.connection(node)
                version = conn.version_for(ListGroupsRequest)
                if states and version < 4:
                    raise errors.UnsupportedVersionError(
                        f"broker {node} cannot filter groups by state (ListGroups v{version})")
                if types and version < 5:
                    raise errors.UnsupportedVersionError(
                        f"broker {node} cannot filter groups by type (ListGroups v{version})")
                resp = await conn.send(ListGroupsRequest(states_filter=states, types_filter=types),
                                       version)
                _check(resp.error_code, f"list groups of broker {node}")
                return [GroupListing(g.group_id, g.protocol_type,
                                     g.group_state if version >= 4 else None,
                                     g.group_type if version >= 5 else None)
                        for g in resp.groups]
            except (errors.CoordinatorLoadInProgressError, errors.CoordinatorNotAvailableError,
                    KafkaConnectionError, KafkaTimeoutError) as exc:
                last: BaseException = exc
            left = deadline - loop.time()
            if left <= 0:
                raise KafkaTimeoutError(f"list groups of broker {node}: not done within "
                                        f"{self.timeout:g} s (last error: {last})") from last
            await asyncio.sleep(min(self.cluster.retry_backoff, left))

    async def describe_group(self, group_id: str) -> GroupDescription:
        """State, protocol and members of one group (state "Dead" if unknown)."""
        _group_id(group_id)

        async def ask(conn: Connection) -> GroupDescription:
            R = DescribeGroupsRequest
            resp = await conn.send(R(groups=[group_id], include_authorized_operations=False))
            (g,) = resp.groups
            _check(g.error_code, f"describe group {group_id!r}")
            if g.group_state == "Dead" and _CONSUMER_GROUP_DESCRIBE in getattr(conn, "versions", {}):
                # Kafka's DescribeGroups answers Dead for a KIP-848 group: ask again.
                found = await self._describe_consumer_group(conn, group_id)
                if found is not None:
                    return found
            if g.group_state == "Dead" and _SHARE_GROUP_DESCRIBE in getattr(conn, "versions", {}):
                found = await self._describe_share_group(conn, group_id)
                if found is not None:
                    return found
            consumer = g.protocol_type == CONSUMER_PROTOCOL_TYPE
            members = [MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                decode_assignment(m.member_assignment) if consumer else [])
                for m in g.members]
            return GroupDescription(g.group_id, g.group_state, g.protocol_type,
                                    g.protocol_data, members, conn.node_id)
        return await self._at_coordinator(group_id, f"describe group {group_id!r}", ask)

    async def _describe_consumer_group(self, conn: Connection, group_id: str) -> GroupDescription | None:
        """A KIP-848 group by ConsumerGroupDescribe; None when it is not one."""
        resp = await conn.send(ConsumerGroupDescribeRequest(group_ids=[group_id],
                                                            include_authorized_operations=False))
        (g,) = resp.groups
        if g.error_code == errors.GroupIdNotFoundError.code:
            return None
        _check(g.error_code, f"describe consumer group {group_id!r}", g.error_message)

        def tps(a: Any) -> list[TopicPartition]:
            return sorted(TopicPartition(t.topic_name, p) for t in (a.topic_partitions if a else [])
                          for p in t.partitions)
        members = [MemberDescription(
            m.member_id, m.instance_id, m.client_id, m.client_host, tps(m.assignment),
            m.member_epoch, tps(m.target_assignment), list(m.subscribed_topic_names),
            _MEMBER_TYPES.get(m.member_type))
            for m in g.members]
        return GroupDescription(g.group_id, g.group_state, CONSUMER_PROTOCOL_TYPE, g.assignor_name,
                                members, conn.node_id, "consumer", g.group_epoch, g.assignment_epoch)

    async def _describe_share_group(self, conn: Connection, group_id: str) -> GroupDescription | None:
        """A KIP-932 share group by ShareGroupDescribe; None when it is not one."""
        resp = await conn.send(ShareGroupDescribeRequest(group_ids=[group_id],
                                                         include_authorized_operations=False))
        (g,) = resp.groups
        if g.error_code == errors.GroupIdNotFoundError.code:
            return None
        _check(g.error_code, f"describe share group {group_id!r}", g.error_message)

        def tps(a: Any) -> list[TopicPartition]:
            return sorted(TopicPartition(t.topic_name, p) for t in (a.topic_partitions if a else [])
                          for p in t.partitions)
        members = [MemberDescription(
            m.member_id, None, m.client_id, m.client_host, tps(m.assignment), m.member_epoch,
            None, list(m.subscribed_topic_names)) for m in g.members]
        return GroupDescription(g.group_id, g.group_state, "share", g.assignor_name, members,
                                conn.node_id, "share", g.group_epoch, g.assignment_epoch)

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        ids = _group_ids(group_ids)
        found = await asyncio.gather(*(self.describe_group(g) for g in ids))
        return dict(zip(ids, found, strict=True))

    # ------------------------------------------------------------------ offsets

    async def list_group_offsets(self, group_id: str,
                                 partitions: Iterable[Any] | None = None
                                 ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of a group: every committed partition (``partitions`` None),
        or the given ones, None for those without a commit. An unknown group has none."""
        _group_id(group_id)
        asked = None if partitions is None else list(dict.fromkeys(as_partitions(partitions)))
        by_topic: dict[str, list[int]] = {}
        for tp in asked or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        async def ask(conn: Connection) -> dict[TopicPartition, OffsetAndMetadata | None]:
            R = OffsetFetchRequest
            version = conn.version_for(R)
            if asked is None and version < 2:
                raise errors.UnsupportedVersionError(
                    f"broker {conn.node_id} cannot list every committed offset (OffsetFetch v1)")
            if version >= 8:
                topics = None if asked is None else [
                    R.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()]
                req = R(groups=[R.OffsetFetchRequestGroup(group_id=group_id, member_id=None,
                                                          member_epoch=-1, topics=topics)],
                        require_stable=False)
                resp = await conn.send(req, version)
                (g,) = resp.groups
                code, topics_out = g.error_code, g.topics
            else:
                topics = None if asked is None else [
                    R.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()]
                resp = await conn.send(R(group_id=group_id, topics=topics, require_stable=False),
                                       version)
                code, topics_out = (resp.error_code if version >= 2 else 0), resp.topics
            _check(code, f"list offsets of group {group_id!r}")
            out: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for t in topics_out:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    _check(p.error_code, f"list offsets of group {group_id!r} for {t.name}-"
                                         f"{p.partition_index}")
                    out[tp] = (OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                 p.committed_leader_epoch)
                               if p.committed_offset >= 0 else None)
            if asked is None:
                return {tp: o for tp, o in sorted(out.items()) if o is not None}
            return {tp: out.get(tp) for tp in asked}
        return await self._at_coordinator(group_id, f"list offsets of group {group_id!r}", ask)

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[Any, Any]
                                  ) -> None:
        """Commit ``{tp: offset | (offset, metadata) | OffsetAndMetadata}`` for a group
        with no members.

        Raises:
            NonEmptyGroupError: the group has members (stop its consumers first).
            UnknownTopicOrPartitionError, OffsetMetadataTooLargeError ...: the first
                partition refused.
        """
        _group_id(group_id)
        wanted = {tp: _offset_and_metadata(tp, v)
                  for tp, v in zip(as_partitions(offsets), offsets.values(), strict=True)}
        if not wanted:
            return
        by_topic: dict[str, list[Any]] = {}
        R = OffsetCommitRequest
        for tp, om in wanted.items():
            by_topic.setdefault(tp.topic, []).append(R.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
        what = f"alter offsets of group {group_id!r}"

        async def ask(conn: Connection) -> None:
            req = R(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                    group_instance_id=None, retention_time_ms=-1,
                    topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps)
                            for t, ps in by_topic.items()])
            resp = await conn.send(req)
            failed = [(f"{t.name}-{p.partition_index}", p.error_code)
                      for t in resp.topics for p in t.partitions if p.error_code]
            if not failed:
                return
            codes = {code for _, code in failed}
            for cls in _RETRY + _COORDINATOR_MOVED:
                if cls.code in codes:  # the whole group's answer: retried
                    raise cls(f"{what}: {cls.name}")
            if errors.UnknownMemberIdError.code in codes:
                raise errors.NonEmptyGroupError(
                    f"{what}: the group has active members (the coordinator answered "
                    f"UNKNOWN_MEMBER_ID to a commit from outside the group); stop its "
                    f"consumers first")
            where, code = failed[0]
            raise _error(code, f"{what} for {where}")
        await self._at_coordinator(group_id, what, ask)

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[Any]
                                   ) -> dict[TopicPartition, errors.ApiError | None]:
        """Delete a group's committed offsets of ``partitions``: ``{tp: None}`` where
        deleted, the error where not (GROUP_SUBSCRIBED_TO_TOPIC: a member consumes it).

        Raises:
            GroupIdNotFoundError: no such group.
            NonEmptyGroupError: the group has members and is not a consumer group.
        """
        _group_id(group_id)
        asked = list(dict.fromkeys(as_partitions(partitions)))
        by_topic: dict[str, list[int]] = {}
        for tp in asked:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        what = f"delete offsets of group {group_id!r}"

        async def ask(conn: Connection) -> dict[TopicPartition, errors.ApiError | None]:
            R = OffsetDeleteRequest
            resp = await conn.send(R(group_id=group_id, topics=[
                R.OffsetDeleteRequestTopic(name=t, partitions=[
                    R.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
                for t, ps in by_topic.items()]))
            _check(resp.error_code, what)
            out: dict[TopicPartition, errors.ApiError | None] = {}
            for t in resp.topics:
                for p in t.partitions:
                    out[TopicPartition(t.name, p.partition_index)] = (
                        _error(p.error_code, f"{what} for {t.name}-{p.partition_index}")
                        if p.error_code else None)
            return {tp: out.get(tp) for tp in asked}
        return await self._at_coordinator(group_id, what, ask)

    async def delete_groups(self, group_ids: Iterable[str]
                            ) -> dict[str, errors.ApiError | None]:
        """Delete groups with their offsets: ``{group: None}`` where deleted, the error
        where not (NON_EMPTY_GROUP: it has members; GROUP_ID_NOT_FOUND: no such group)."""
        ids = _group_ids(group_ids)
        found = await asyncio.gather(*(self._delete_group(g) for g in ids))
        return dict(zip(ids, found, strict=True))

    async def _delete_group(self, group_id: str) -> errors.ApiError | None:
        what = f"delete group {group_id!r}"

        async def ask(conn: Connection) -> errors.ApiError | None:
            resp = await conn.send(DeleteGroupsRequest(groups_names=[group_id]))
            (r,) = resp.results
            if not r.error_code:
                return None
            err = _error(r.error_code, what)
            if isinstance(err, _RETRY + _COORDINATOR_MOVED):
                raise err
            return err
        return await self._at_coordinator(group_id, what, ask)


def _group_id(group_id: Any) -> None:
    if not isinstance(group_id, str):
        raise TypeError(f"a group id is a str, got {group_id!r}")


def _group_ids(group_ids: Iterable[str]) -> list[str]:
    if isinstance(group_ids, str):
        raise TypeError(f"expected a list of group ids, got the string {group_ids!r}")
    ids = list(dict.fromkeys(group_ids))
    for g in ids:
        _group_id(g)
    return ids


def _states(states: Iterable[str] | None) -> list[str]:
    if states is None:
        return []
    if isinstance(states, str):
        states = [states]
    known = {s.lower(): s for s in GROUP_STATES}
    out = []
    for s in states:
        name = known.get(str(s).strip().lower())
        if name is None:
            raise ValueError(f"unknown group state {s!r}; Kafka's states are "
                             f"{', '.join(GROUP_STATES)}")
        out.append(name)
    return out


GROUP_TYPES = ("classic", "consumer", "share", "streams")  # Kafka's GroupType names


def _types(types: Iterable[str] | None) -> list[str]:
    if types is None:
        return []
    if isinstance(types, str):
        types = [types]
    out = []
    for t in types:
        name = str(t).strip().lower()
        if name not in GROUP_TYPES:
            raise ValueError(f"unknown group type {t!r}; Kafka's types are {', '.join(GROUP_TYPES)}")
        out.append(name)
    return out


def _offset_and_metadata(tp: TopicPartition, value: Any) -> OffsetAndMetadata:
    if isinstance(value, OffsetAndMetadata):
        om = value
    elif isinstance(value, tuple) and len(value) == 2:
        om = OffsetAndMetadata(value[0], value[1] if value[1] is not None else "")
    else:
        om = OffsetAndMetadata(value)
    if (not isinstance(om.offset, int) or isinstance(om.offset, bool) or om.offset < 0
            or not isinstance(om.metadata, str)):
        raise ValueError(f"{tp}: expected an offset >= 0 or (offset, metadata str), got {value!r}")
    return om
