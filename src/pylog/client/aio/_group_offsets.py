"""Committed offsets: OffsetCommit and OffsetFetch to the group coordinator.

Rules of the Java client's ``ConsumerCoordinator`` (``sendOffsetCommitRequest``,
``OffsetCommitResponseHandler``, ``OffsetFetchResponseHandler``):

- A subscribed consumer commits with its generation and member id, and only while its
  membership is stable: during a rebalance a commit fails with ``RebalanceInProgressError``
  (poll to finish the rebalance, then commit again); out of the group with
  ``CommitFailedError``. A consumer using ``assign()`` commits as a simple group member:
  generation -1, no member id.
- Per-partition errors: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and REQUEST_TIMED_OUT
  mark the coordinator unknown and are retried, as are COORDINATOR_LOAD_IN_PROGRESS and
  UNKNOWN_TOPIC_OR_PARTITION; REBALANCE_IN_PROGRESS asks for a rejoin and raises
  ``RebalanceInProgressError``; UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION reset the
  generation and raise ``CommitFailedError`` (``RebalanceInProgressError`` when the member
  already joined a newer generation); OFFSET_METADATA_TOO_LARGE and the authorization errors
  are raised as they are.
- Synchronous commits retry retriable errors with exponential backoff until their timeout;
  asynchronous ones are sent once. Kafka retries UNKNOWN_TOPIC_OR_PARTITION (KAFKA-6829: the
  coordinator may not know a topic just created); here it is retried only while fresh
  metadata still shows the topic: a deleted topic's partitions are left out of a commit of
  the consumed positions (``skip_deleted``: their offsets are meaningless, the broker deletes
  them with the topic; the other partitions were committed by the same request), and fail a
  commit of offsets the caller named at once (not retriable). Without this, the common
  ``commit()`` in a revoke callback would block for ``default.api.timeout.ms`` after a
  pattern-subscribed topic was deleted.
- A consumer being closed (its coordinator link closed) fails a commit at once with
  ``ClientClosedError``. A request's answer is awaited no longer than the call's deadline
  (a commit in a revoke callback during ``close`` ends with close's timeout).
- OffsetFetch asks with ``require_stable`` (v7+): a partition with a pending transactional
  commit answers UNSTABLE_OFFSET_COMMIT and is asked again. Offset -1 means none committed.
- The membership decides the member's part, for either group protocol: which generation a
  commit names (``commit_generation``: the classic generation, or the member epoch of the
  consumer protocol, OffsetCommit v9), what UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
  FENCED_INSTANCE_ID and STALE_MEMBER_EPOCH mean (``commit_error``; the consumer protocol
  retries STALE_MEMBER_EPOCH when a newer epoch arrived meanwhile, as Kafka's
  ``CommitRequestManager`` does for the commit before a revocation), and the member id and
  epoch an OffsetFetch v9 names (``fetch_member``; the consumer protocol's coordinator
  checks them, and answers STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID while a heartbeat brings
  the new epoch: asked again).

Event-loop affinity: the consumer's loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.client.aio._group_base import NO_GENERATION, rebalancing
from pylog.client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from pylog.client.records import OffsetAndMetadata, TopicPartition
from pylog.protocol.messages import OffsetCommitRequest, OffsetFetchRequest

if TYPE_CHECKING:
    from pylog.client.aio._consumer_membership import ConsumerMembership
    from pylog.client.aio._coordinator import ConsumerCoordinator

    # Either protocol's membership: both answer commit_generation, commit_error and
    # fetch_member, and find the coordinator the same way (CoordinatorLink).
    GroupMember = ConsumerCoordinator | ConsumerMembership

__all__ = ["MEMBERSHIP_ERRORS", "commit_offsets", "fetch_committed", "is_retriable"]

log = logging.getLogger("pylog.client.consumer")

# OffsetCommit codes about the member rather than the offsets: the membership (classic or
# consumer protocol) decides what they mean (``commit_error``).
MEMBERSHIP_ERRORS = frozenset({
    errors.UnknownMemberIdError.code, errors.IllegalGenerationError.code,
    errors.FencedInstanceIdError.code, errors.StaleMemberEpochError.code,
})


def is_retriable(exc: BaseException) -> bool:
    return isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)) or bool(
        getattr(exc, "retriable", False))


def _check_open(coord: GroupMember) -> None:
    if coord.closed:
        raise ClientClosedError("the consumer is closed: nothing more can be committed or "
                                "fetched (a rebalance callback that commits during close() must "
                                "finish within close's timeout)")


async def commit_offsets(coord: GroupMember, offsets: dict[TopicPartition, OffsetAndMetadata],
                         *, group_managed: bool, deadline: float | None, retry: bool,
                         skip_deleted: bool = False) -> None:
    """Commit ``offsets``; with ``retry``, retriable failures are retried until ``deadline``
    (loop time; None: no bound). ``skip_deleted``: the offsets are the consumed positions,
    and partitions of topics deleted meanwhile are left out (logged) instead of failing.

    Raises:
        CommitFailedError, RebalanceInProgressError, KafkaTimeoutError, ClientClosedError,
        UnknownTopicOrPartitionError (a named partition's topic was deleted), or the
        ApiError of a non-retriable per-partition code (e.g. OffsetMetadataTooLargeError).
    """
    if not offsets:
        return
    for tp, om in offsets.items():
        if om.offset < 0:
            raise ValueError(f"cannot commit offset {om.offset} for {tp.topic}-{tp.partition}")
    attempts = 0
    while True:
        try:
            _check_open(coord)
            conn = await coord.ensure_coordinator(deadline)
            unknown = await _send_commit(coord, conn, offsets, group_managed, deadline)
            if not unknown:
                return
            # The rest were committed by that request: only these are left.
            offsets = {tp: offsets[tp] for tp in unknown}
            gone = await _deleted(coord, unknown, deadline)
            if gone:
                offsets = _without_deleted(coord, offsets, gone, skip_deleted)
                if not offsets:
                    return
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in offsets)
            raise errors.UnknownTopicOrPartitionError(
                f"OffsetCommit {names}: UNKNOWN_TOPIC_OR_PARTITION (the coordinator does not "
                "know the partition yet)")
        except BaseException as exc:
            if not retry or not is_retriable(exc):
                raise
            await _backoff_or_give_up(coord, attempts, deadline, exc,
                                      f"offset commit for group {coord.group_id!r} did not "
                                      "complete in time")
            attempts += 1


async def _backoff_or_give_up(coord: GroupMember, attempts: int, deadline: float | None,
                              exc: BaseException, what: str) -> None:
    """Sleep the retry backoff before attempt ``attempts + 1``, or raise when that would pass
    ``deadline``: ``exc`` itself if it is a timeout, else a KafkaTimeoutError saying ``what``."""
    pause = coord.backoff(attempts)
    if deadline is not None and asyncio.get_running_loop().time() + pause >= deadline:
        if isinstance(exc, KafkaTimeoutError):
            raise exc
        raise KafkaTimeoutError(f"{what} (last error: {exc})") from exc
    await asyncio.sleep(pause)


async def _deleted(coord: GroupMember, tps: list[TopicPartition],
                   deadline: float | None) -> set[TopicPartition]:
    """Of ``tps`` (answered UNKNOWN_TOPIC_OR_PARTITION), those whose topic (or partition)
    fresh metadata says does not exist; none if the metadata could not be had in time."""
    cluster = coord.cluster
    loop = asyncio.get_running_loop()
    left = coord.request_timeout if deadline is None else max(0.01, deadline - loop.time())
    try:
        await asyncio.wait_for(cluster.update({tp.topic for tp in tps}), left)
    except (asyncio.TimeoutError, KafkaConnectionError, KafkaTimeoutError):
        return set()
    finally:
        coord.owner.refresh_wanted_topics()  # not kept asking for topics only a commit named
    gone = set()
    for tp in tps:
        info = cluster.topics.get(tp.topic)
        if info is None or info.error_code == errors.UnknownTopicOrPartitionError.code or (
                not info.error_code and tp.partition not in info.partitions):
            gone.add(tp)
    return gone


def _without_deleted(coord: GroupMember, offsets: dict[TopicPartition, OffsetAndMetadata],
                     gone: set[TopicPartition], skip_deleted: bool
                     ) -> dict[TopicPartition, OffsetAndMetadata]:
    names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(gone))
    if not skip_deleted:
        err = errors.UnknownTopicOrPartitionError(
            f"OffsetCommit: {names} do not exist (topic deleted?): their offsets were not "
            "committed (those of the other partitions were)")
        err.retriable = False  # fresh metadata confirms it: retrying cannot help
        raise err
    log.warning("group %s: not committing the positions of %s: the partitions no longer exist "
                "(topic deleted)", coord.group_id, names)
    return {tp: om for tp, om in offsets.items() if tp not in gone}


class _PastDeadline(Exception):
    pass


async def _request(conn: Any, req: Any, deadline: float | None, version: int | None = None) -> Any:
    """Send ``req`` and wait for its answer at most ``request.timeout.ms`` (then the
    connection is closed, as for any request) and until ``deadline`` (loop time; then
    ``_PastDeadline``: the connection stays, the late answer is dropped)."""
    fut = conn.send_nowait(req, version)
    answer = conn.wait(fut, None, type(req).NAME)
    if deadline is None:
        return await answer
    try:
        return await asyncio.wait_for(answer, max(0.0, deadline - asyncio.get_running_loop().time()))
    except asyncio.TimeoutError:
        raise _PastDeadline from None


async def _send_commit(coord: GroupMember, conn: Any,
                       offsets: dict[TopicPartition, OffsetAndMetadata], group_managed: bool,
                       deadline: float | None = None) -> list[TopicPartition]:
    """One OffsetCommit; the partitions answered UNKNOWN_TOPIC_OR_PARTITION (the others
    were committed). Other errors are raised."""
    if group_managed:
        gen = coord.commit_generation()
        instance = coord.group_instance_id
    else:
        gen, instance = NO_GENERATION, None
    R = OffsetCommitRequest
    by_topic: dict[str, list[Any]] = {}
    for tp, om in offsets.items():
        by_topic.setdefault(tp.topic, []).append(R.OffsetCommitRequestPartition(
            partition_index=tp.partition, committed_offset=om.offset,
            committed_leader_epoch=om.leader_epoch, commit_timestamp=-1,
            committed_metadata=om.metadata))
    req = R(group_id=coord.group_id, generation_id_or_member_epoch=gen.generation_id,
            member_id=gen.member_id, group_instance_id=instance, retention_time_ms=-1,
            topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
    try:
        resp = await _request(conn, req, deadline)
    except _PastDeadline:
        raise KafkaTimeoutError(f"offset commit for group {coord.group_id!r}: no answer in "
                                "time") from None
    except (KafkaConnectionError, KafkaTimeoutError) as exc:
        coord.mark_coordinator_unknown(f"OffsetCommit failed: {exc}")
        raise
    unauthorized: list[str] = []
    unknown: list[TopicPartition] = []
    for t in resp.topics:
        for p in t.partitions:
            code = p.error_code
            if not code:
                continue
            where = f"{t.name}-{p.partition_index}"
            cls = errors.error_for_code(code) or errors.UnknownServerError
            if code == errors.TopicAuthorizationFailedError.code:
                unauthorized.append(t.name)
                continue
            if code == errors.UnknownTopicOrPartitionError.code:
                unknown.append(TopicPartition(t.name, p.partition_index))
                continue
            if code in (errors.CoordinatorNotAvailableError.code, errors.NotCoordinatorError.code,
                        errors.RequestTimedOutError.code):
                coord.mark_coordinator_unknown(cls.name)
                raise cls(f"OffsetCommit {where}: {cls.name}")
            if code == errors.RebalanceInProgressError.code:
                coord.request_rejoin("offset commit failed since group is already rebalancing")
                raise rebalancing("the group is rebalancing")
            if code in MEMBERSHIP_ERRORS:
                raise coord.commit_error(code, gen)
            if code == errors.OffsetMetadataTooLargeError.code:
                raise cls(f"OffsetCommit {where}: the metadata string is longer than the "
                          "broker's offset.metadata.max.bytes")
            raise cls(f"OffsetCommit {where}: {cls.name}")
    if unauthorized:
        raise errors.TopicAuthorizationFailedError(
            f"not authorized to commit offsets of {sorted(set(unauthorized))}")
    return unknown


async def fetch_committed(coord: GroupMember, partitions: list[TopicPartition],
                          deadline: float | None, *, bound_answer: bool = True
                          ) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The committed offset of each partition (None where none is). ``bound_answer``
    False: an OffsetFetch sent is waited for past ``deadline`` (up to
    ``request.timeout.ms``): ``poll`` looks positions up within its own short timeout, and
    abandoning every answer that comes later than that would never get them.

    Raises:
        KafkaTimeoutError: no answer by ``deadline``. ApiError: a non-retriable error.
    """
    if not partitions:
        return {}
    attempts = 0
    while True:
        try:
            _check_open(coord)
            conn = await coord.ensure_coordinator(deadline)
            return await _send_fetch(coord, conn, partitions, deadline if bound_answer else None)
        except BaseException as exc:
            if not is_retriable(exc):
                raise
            await _backoff_or_give_up(coord, attempts, deadline, exc,
                                      f"committed offsets of group {coord.group_id!r} not "
                                      "fetched in time")
            attempts += 1


async def _send_fetch(coord: GroupMember, conn: Any, partitions: list[TopicPartition],
                      deadline: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
    R = OffsetFetchRequest
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    version = conn.version_for(R)
    if version >= 8:
        member_id, member_epoch = coord.fetch_member()
        req = R(groups=[R.OffsetFetchRequestGroup(
            group_id=coord.group_id, member_id=member_id, member_epoch=member_epoch,
            topics=[R.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()])],
            require_stable=True)
    else:
        req = R(group_id=coord.group_id, require_stable=True,
                topics=[R.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])
    try:
        resp = await _request(conn, req, deadline, version)
    except _PastDeadline:
        raise KafkaTimeoutError(f"committed offsets of group {coord.group_id!r}: no answer in "
                                "time") from None
    except (KafkaConnectionError, KafkaTimeoutError) as exc:
        coord.mark_coordinator_unknown(f"OffsetFetch failed: {exc}")
        raise
    if version >= 8:
        group = next((g for g in resp.groups if g.group_id == coord.group_id), None)
        if group is None:
            raise errors.UnknownServerError(f"OffsetFetch answered no group {coord.group_id!r}")
        code, topics = group.error_code, group.topics
    else:
        code, topics = resp.error_code, resp.topics
    if code:
        cls = errors.error_for_code(code) or errors.UnknownServerError
        if code in (errors.CoordinatorNotAvailableError.code, errors.NotCoordinatorError.code):
            coord.mark_coordinator_unknown(cls.name)
        failure = cls(f"OffsetFetch for group {coord.group_id!r}: {cls.name}")
        if code in (errors.StaleMemberEpochError.code, errors.UnknownMemberIdError.code):
            # Consumer protocol: the member's epoch moved on (or it was fenced) between
            # the request and its answer; the heartbeat brings the new one, so ask again.
            failure.retriable = True
        raise failure
    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
    unstable = []
    for t in topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                cls = errors.error_for_code(p.error_code) or errors.UnknownServerError
                if p.error_code == errors.UnstableOffsetCommitError.code:
                    unstable.append(tp)
                    continue
                if p.error_code == errors.UnknownTopicOrPartitionError.code:
                    # Not retried (Kafka's client does not either).
                    raise errors.KafkaError(f"OffsetFetch: {tp.topic}-{tp.partition} does not exist")
                raise cls(f"OffsetFetch {tp.topic}-{tp.partition}: {cls.name}")
            if p.committed_offset >= 0:
                epoch = p.committed_leader_epoch if p.committed_leader_epoch is not None else -1
                out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "", epoch)
            else:
                out[tp] = None
    if unstable:
        raise errors.UnstableOffsetCommitError(
            f"OffsetFetch: pending transactional offsets for {sorted(unstable)}")
    for tp in partitions:
        out.setdefault(tp, None)
    return out
