"""Admin calls about replicas, answered by the controller of a ZooKeeper-mode cluster:
ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

Each request goes to the controller named in Metadata; NOT_CONTROLLER (the controller moved)
refreshes the metadata and asks again, up to the admin's ``default.api.timeout.ms``. A
single-node broker does not serve these APIs (UnsupportedVersionError).
Event-loop affinity: the admin's loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from pylog import errors
from pylog.client.records import TopicPartition
from pylog.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)

ELECTION_TYPES = {"preferred": 0, "unclean": 1}


class PartitionReassignment(NamedTuple):
    """An ongoing reassignment: every replica during the move (targets first), the ones
    being added and the ones being removed."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


def _error(code: int, what: str, message: str | None) -> errors.ApiError:
    cls = errors.error_for_code(code) or errors.UnknownServerError
    return cls(f"{what}: {cls.name}" + (f": {message}" if message else ""))


def _tps(partitions: Iterable[Any]) -> list[TopicPartition]:
    out = []
    for tp in partitions:
        if not (isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str)
                and isinstance(tp[1], int)):
            raise TypeError(f"a partition is (topic, partition), got {tp!r}")
        out.append(TopicPartition(tp[0], tp[1]))
    return out


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in tps:
        out.setdefault(t, []).append(p)
    return out


async def _at_controller(core: Any, what: str, ask: Callable[[Any], Awaitable[Any]]) -> Any:
    """``ask(conn)`` at the controller; NOT_CONTROLLER (raised by ``ask``) retries."""
    deadline = time.monotonic() + core.timeout
    while True:
        try:
            return await ask(await core._controller())
        except errors.NotControllerError:
            if time.monotonic() > deadline:
                raise
            core.cluster.request_update()
            await asyncio.sleep(0.1)


async def elect_leaders(core: Any, election_type: str, partitions: Iterable[Any] | None
                        ) -> dict[TopicPartition, errors.ApiError | None]:
    kind = ELECTION_TYPES.get(str(election_type).lower())
    if kind is None:
        raise ValueError(f"election_type is 'preferred' or 'unclean', not {election_type!r}")
    tps = None if partitions is None else _tps(partitions)
    R = ElectLeadersRequest
    req = R(election_type=kind, timeout_ms=core.timeout_ms, topic_partitions=None if tps is None
            else [R.TopicPartitions(topic=t, partitions=ps) for t, ps in _by_topic(tps).items()])

    async def ask(conn: Any) -> dict[TopicPartition, errors.ApiError | None]:
        if kind and conn.version_for(R) < 1:
            raise errors.UnsupportedVersionError("the broker knows only preferred elections")
        resp = await conn.send(req)
        if resp.error_code == errors.NotControllerError.code:
            raise errors.NotControllerError("the controller moved")
        if resp.error_code:
            raise _error(resp.error_code, "elect leaders", None)
        out: dict[TopicPartition, errors.ApiError | None] = {}
        for r in resp.replica_election_results:
            for p in r.partition_result:
                tp = TopicPartition(r.topic, p.partition_id)
                out[tp] = None if not p.error_code else _error(
                    p.error_code, f"elect a leader for {r.topic}-{p.partition_id}", p.error_message)
        return out
    result = await _at_controller(core, "elect leaders", ask)
    core.cluster.request_update()
    return result  # type: ignore[no-any-return]


async def alter_partition_reassignments(core: Any, targets: Mapping[Any, Sequence[int] | None]
                                        ) -> dict[TopicPartition, errors.ApiError | None]:
    R = AlterPartitionReassignmentsRequest
    by_topic: dict[str, list[Any]] = {}
    for tp, replicas in targets.items():
        (t, p), = _tps([tp])
        if replicas is not None and not all(isinstance(r, int) for r in replicas):
            raise TypeError(f"replicas of {t}-{p} are broker ids, got {replicas!r}")
        by_topic.setdefault(t, []).append(R.ReassignablePartition(
            partition_index=p, replicas=None if replicas is None else list(replicas)))
    req = R(timeout_ms=core.timeout_ms, topics=[R.ReassignableTopic(name=t, partitions=ps)
                                                for t, ps in by_topic.items()])

    async def ask(conn: Any) -> dict[TopicPartition, errors.ApiError | None]:
        resp = await conn.send(req)
        if resp.error_code == errors.NotControllerError.code:
            raise errors.NotControllerError("the controller moved")
        if resp.error_code:
            raise _error(resp.error_code, "alter partition reassignments", resp.error_message)
        out: dict[TopicPartition, errors.ApiError | None] = {}
        for r in resp.responses:
            for p in r.partitions:
                out[TopicPartition(r.name, p.partition_index)] = None if not p.error_code else \
                    _error(p.error_code, f"reassign {r.name}-{p.partition_index}", p.error_message)
        return out
    return await _at_controller(core, "alter partition reassignments", ask)  # type: ignore[no-any-return]


async def list_partition_reassignments(core: Any, partitions: Iterable[Any] | None
                                       ) -> dict[TopicPartition, PartitionReassignment]:
    R = ListPartitionReassignmentsRequest
    tps = None if partitions is None else _tps(partitions)
    req = R(timeout_ms=core.timeout_ms, topics=None if tps is None else [
        R.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
        for t, ps in _by_topic(tps).items()])

    async def ask(conn: Any) -> dict[TopicPartition, PartitionReassignment]:
        resp = await conn.send(req)
        if resp.error_code == errors.NotControllerError.code:
            raise errors.NotControllerError("the controller moved")
        if resp.error_code:
            raise _error(resp.error_code, "list partition reassignments", resp.error_message)
        return {TopicPartition(t.name, p.partition_index): PartitionReassignment(
            list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics for p in t.partitions}
    return await _at_controller(core, "list partition reassignments", ask)  # type: ignore[no-any-return]
