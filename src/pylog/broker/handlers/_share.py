"""What ShareFetch and ShareAcknowledge share: the share session step and applying
acknowledgement batches to share partitions (``pylog.group.share``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied, require_group
from pylog.group.share.persister import RETRIABLE
from pylog.group.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from pylog.group.share.share_partition import AcknowledgeType

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

# (topic id, partition) -> the request's acknowledgement batches for it, in request order
# (librdkafka may name a topic twice in one request: merged here).
Acks = dict[tuple[Any, int], list[Any]]


def require_access(ctx: RequestContext, group_id: str | None, topics: list[Any]) -> None:
    """READ on the group (GROUP_AUTHORIZATION_FAILED), then READ on every topic the request
    names (TOPIC_AUTHORIZATION_FAILED), both answered for the whole request by its
    ``error_response``; nothing is acknowledged, acquired or opened when denied. Kafka
    answers a denied topic per partition; the request here is refused whole."""
    require_group(ctx, AclOperation.READ, group_id)
    if ctx.broker.authorizer is None or not topics:
        return
    share = ctx.broker.share
    names = [t.name for t in (share.topic_of(tp.topic_id) for tp in topics) if t is not None]
    refused = denied(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    if refused:
        raise errors.TopicAuthorizationFailedError(
            f"Not authorized to read topics: {sorted(refused)}")


def collect(topics: list[Any]) -> Acks:
    out: Acks = {}
    for t in topics:
        for p in t.partitions:
            out.setdefault((t.topic_id, p.partition_index), []).extend(p.acknowledgement_batches)
    return out


def session_step(ctx: RequestContext, group_id: str, member_id: str, epoch: int,
                 parts: Acks, forgotten: list[tuple[Any, int]], fetch: bool) -> ShareSession:
    """Open, continue or check the closing of the member's share session.

    Raises:
        InvalidRequestError: no group or member id; acknowledgements with epoch 0.
        InvalidShareSessionEpochError: ShareAcknowledge with epoch 0, or a wrong epoch.
        ShareSessionNotFoundError: no session to continue or close.
    """
    share = ctx.broker.share
    if not group_id:
        raise errors.InvalidRequestError("Group id must be provided.")
    if not member_id:
        raise errors.InvalidRequestError("Member id must be provided.")
    if epoch == INITIAL_EPOCH:
        if not fetch:
            raise errors.InvalidShareSessionEpochError(
                "ShareAcknowledge cannot open a share session (epoch 0).")
        if any(parts.values()):
            raise errors.InvalidRequestError("Acknowledge data present on initial fetch request.")
        session, old = share.sessions.open(group_id, member_id)
        if old is not None and (old.group_id, old.member_id) != (group_id, member_id):
            share.release_member(old.group_id, old.member_id)  # evicted from a full cache
        session.add(parts)
        return session
    if epoch == FINAL_EPOCH:
        return share.sessions.check_final(group_id, member_id)
    session = share.sessions.use(group_id, member_id, epoch)
    session.add(parts)
    session.forget(forgotten)
    return session


async def acknowledge(ctx: RequestContext, group_id: str, member_id: str, topic_id: Any,
                      partition: int, batches: list[Any]) -> tuple[int, str | None]:
    """Apply one partition's acknowledgement batches; (error code, message). A share
    partition that is loading (a new leader) is waited for."""
    share = ctx.broker.share
    topic = share.topic_of(topic_id)
    if topic is None:
        return errors.UnknownTopicIdError.code, None
    if not 0 <= partition < len(topic.partitions):
        return errors.UnknownTopicOrPartitionError.code, None
    if not share.leads(topic, partition):
        return errors.NotLeaderOrFollowerError.code, None
    sp = await share.share_partition(group_id, topic, partition)
    if sp is None:
        if not share.leads(topic, partition):
            return errors.NotLeaderOrFollowerError.code, None
        failure = share.take_load_failure((group_id, topic_id, partition))
        if failure is not None:
            return persister_error(failure[0]), failure[1]
        return (errors.CoordinatorNotAvailableError.code,
                "The share partition's state could not be read from its share coordinator.")
    if not share.renew_enabled(group_id) and any(
            AcknowledgeType.RENEW in b.acknowledge_types for b in batches):
        # Kafka refuses the partition's acknowledgement with INVALID_RECORD_STATE; pylog
        # applies none of its batches (acknowledgements of a partition are all or nothing).
        return (errors.InvalidRecordStateError.code,
                f"Renew acknowledgements are disabled for share group {group_id} "
                "(share.renew.acknowledge.enable=false).")
    now = round(ctx.broker.clock.monotonic() * 1000)
    try:
        durable = sp.acknowledge(member_id, [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                                             for b in batches], now, share.lock_duration_ms(group_id))
    except errors.ApiError as exc:
        return exc.code, str(exc)
    if durable:
        share.changed((group_id, topic_id, partition), sp, woke=True)
    else:
        share.arm()  # only renewed: nothing to write, nothing released; the timer moves
    return 0, None


def renew_in_v1(ctx: RequestContext, acks: Acks) -> dict[tuple[Any, int], tuple[int, str | None]]:
    """Partitions of a version 1 request that acknowledge with RENEW (4), which only
    version 2 has (KIP-1222): INVALID_REQUEST for each, as Kafka's ``KafkaApis`` checks
    the types against the request version; their batches are not applied."""
    if ctx.api_version >= 2:
        return {}
    return {key: (errors.InvalidRequestError.code,
                  "Acknowledge type RENEW (4) needs version 2 of the request.")
            for key, batches in acks.items()
            if any(AcknowledgeType.RENEW in b.acknowledge_types for b in batches)}


def write_failure(failed: dict[Any, int], group_id: str, topic_id: Any, partition: int,
                  result: tuple[int, str | None]) -> tuple[int, str | None]:
    """An acknowledgement's result once the state was written: when the share partition's
    state could not be written, the client's error for it as Kafka's ``SharePartition`` maps
    persister errors (a coordinator that moved or is unreachable: COORDINATOR_NOT_AVAILABLE;
    a fenced leader epoch: NOT_LEADER_OR_FOLLOWER; a fenced state epoch: FENCED_STATE_EPOCH;
    else UNKNOWN_SERVER_ERROR), else ``result``."""
    code = failed.get((group_id, topic_id, partition))
    if result[0] or not code:
        return result
    return persister_error(code), f"The share partition's state could not be written to its share coordinator (error {code})."


def persister_error(code: int) -> int:
    """The client's error for a state RPC's error, as Kafka's ``SharePartition`` maps them."""
    if code == errors.FencedLeaderEpochError.code:
        mapped = errors.NotLeaderOrFollowerError.code
    elif code == errors.FencedStateEpochError.code:
        mapped = code
    elif code in RETRIABLE or code == errors.UnknownTopicOrPartitionError.code:
        mapped = errors.CoordinatorNotAvailableError.code
    else:
        mapped = errors.UnknownServerError.code
    return mapped


def close_session(ctx: RequestContext, group_id: str, member_id: str) -> None:
    """After a request with epoch -1: the session goes and the member's records with it."""
    share = ctx.broker.share
    share.sessions.remove(group_id, member_id)
    share.release_member(group_id, member_id)
