"""Share-group offsets for the admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets; KIP-932's "Admin API"): reading, resetting and deleting the
share-partition start offset (SPSO) of a group's share partitions.

This is the one seam between those handlers and where share-partition state lives: the share
coordinator (``ShareStateStore``, the leader of the share partition's ``__share_group_state``
partition), reached through the broker's ``SharePersister`` (a direct call when this broker
is that coordinator, the inter-broker RPC otherwise), as Kafka's group coordinator does:

- ``describe``: ReadShareGroupStateSummary. (SPSO, leader epoch, lag) of a share partition,
  or None when the group has no state for it (never fetched from, or deleted). Lag as
  KIP-1226 defines it for DescribeShareGroupOffsets v1: the high watermark minus the SPSO
  minus the records above the SPSO already in a terminal state (acknowledged or archived).
  The terminal records come from the share partition when this broker leads it and has it
  loaded, else from the coordinator's state when this broker is the coordinator; the
  summary RPC's version 0 carries no batches (Kafka 4.2's v1 adds a delivered count), so
  when neither is here the lag is -1 (unknown), as it is when this broker holds no replica
  of the partition (no high watermark). The leader epoch is the coordinator's when it is
  local, else this broker's replica's, else -1.
- ``reset``: InitializeShareGroupState with the state epoch one above the coordinator's: a
  new start offset and no in-flight records (every record from there on is delivered as
  new). A share partition this broker holds is dropped at once (it loads the new state on
  its next use); one held by another leader is fenced by its next write
  (FENCED_STATE_EPOCH) and dropped and loaded again there (``ShareService``). The caller
  checks that the group is empty.
- ``delete_topic``: DeleteShareGroupState of each partition of a topic the group has state
  for; the next fetch starts the share partition again from ``share.auto.offset.reset``.

Nothing is changed in memory before the coordinator answered, so a failed call leaves
nothing to undo; its error is raised (``StateError``).

Event-loop affinity: the broker's loop, like ``ShareService``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, NamedTuple

from pylog import errors

from .persister import RETRIABLE
from .share_partition import RecordState, StateBatch
from .state_store import UNINITIALIZED_START_OFFSET, ShareState

if TYPE_CHECKING:
    from .service import ShareService

__all__ = ["ShareOffset", "describe", "reset", "delete_topic", "initialized_partitions", "client_error"]

_DONE = (int(RecordState.ACKNOWLEDGED), int(RecordState.ARCHIVED))

ShareKey = tuple[str, uuid.UUID, int]


class ShareOffset(NamedTuple):
    start_offset: int
    leader_epoch: int
    lag: int


def client_error(code: int, message: str | None) -> errors.ApiError:
    """The admin client's error for a failed state RPC: a coordinator that could not be
    reached before the deadline (or whose write did not reach the ISR) is
    COORDINATOR_NOT_AVAILABLE, as Kafka's group coordinator maps persister errors; other
    codes are passed on."""
    if code in RETRIABLE or code == errors.UnknownTopicOrPartitionError.code:
        code = errors.CoordinatorNotAvailableError.code
    cls = errors.error_for_code(code) or errors.UnknownServerError
    return cls(message or "the share coordinator refused the request")


def _persister(share: ShareService) -> Any:
    if share.persister is None:
        raise errors.GroupIdNotFoundError("share groups are disabled on this broker (group.share.enable)")
    return share.persister


async def _summary(share: ShareService, key: ShareKey) -> ShareState | None:
    r = await _persister(share).read_summary(key)
    if r.error_code:
        raise client_error(r.error_code, r.error_message)
    st = r.state
    if st is None or st.start_offset == UNINITIALIZED_START_OFFSET:
        return None
    return st


def _replica(share: ShareService, topic_id: uuid.UUID, partition: int) -> tuple[Any, Any]:
    """(local Topic, replica state) of the partition; either may be None."""
    topic = share.topic_of(topic_id)
    if topic is None or not 0 <= partition < len(topic.partitions):
        return None, None
    return topic, share.broker.replicas.partitions.get((topic.name, partition))


def _high_watermark(share: ShareService, topic: Any, state: Any, partition: int) -> int | None:
    if topic is None:
        return None
    if state is not None and getattr(state, "high_watermark", None) is not None:
        return int(state.high_watermark)
    bounds = share.leader_bounds(topic, partition)  # single node: the log end offset
    return None if bounds is None else int(bounds[1])


async def describe(share: ShareService, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareOffset | None:
    """The group's SPSO of the partition with leader epoch and lag; None when it has no
    state there.

    Raises:
        ApiError: the share coordinator could not answer (``client_error``).
    """
    key = (group_id, topic_id, partition)
    st = await _summary(share, key)
    if st is None:
        return None
    topic, state = _replica(share, topic_id, partition)
    leader_epoch = st.leader_epoch
    if leader_epoch < 0 and state is not None:
        leader_epoch = int(getattr(state, "leader_epoch", -1))
    start, batches = st.start_offset, st.batches
    sp = share.partitions.get(key)
    known = sp is not None or share.state is not None and share.state.saved(key) is not None
    if sp is not None and sp.state_epoch == st.state_epoch:
        start, batches = sp.start_offset, sp.state_batches()
    hw = _high_watermark(share, topic, state, partition)
    if hw is None or not known:
        return ShareOffset(start, leader_epoch, -1)
    return ShareOffset(start, leader_epoch, _lag(start, batches, hw))


def _lag(start: int, batches: list[StateBatch], hw: int) -> int:
    done = sum(min(b.last_offset, hw - 1) - max(b.first_offset, start) + 1
               for b in batches if b.delivery_state in _DONE and b.last_offset >= start
               and b.first_offset < hw)
    return max(0, hw - start - done)


async def reset(share: ShareService, group_id: str, topic_id: uuid.UUID, partition: int,
                start_offset: int) -> None:
    """Make ``start_offset`` the share partition's SPSO with no in-flight records, under a
    new state epoch (InitializeShareGroupState); answered once the coordinator wrote it.

    Raises:
        ApiError: the coordinator's error (``client_error``); nothing changed.
    """
    key = (group_id, topic_id, partition)
    r = await _persister(share).read_summary(key)
    if r.error_code:
        raise client_error(r.error_code, r.error_message)
    epoch = 0 if r.state is None else r.state.state_epoch
    r = await _persister(share).initialize(key, epoch + 1, start_offset)
    if r.error_code:
        raise client_error(r.error_code, r.error_message)
    share.forget(key)


async def delete_topic(share: ShareService, group_id: str, topic_id: uuid.UUID, partitions: int) -> bool:
    """Delete the group's state of every partition of the topic (``partitions`` of them).

    Returns:
        False when the group had no state for the topic (nothing deleted).

    Raises:
        ApiError: a coordinator's error (``client_error``); the partitions before it in
            order were deleted, as Kafka's per-partition DeleteShareGroupState calls leave them.
    """
    keys = [(group_id, topic_id, p) for p in range(partitions)]
    held = [k for k in keys if await _summary(share, k) is not None or k in share.partitions]
    if not held:
        return False
    for key in held:
        r = await _persister(share).delete_now(key)
        if r.error_code:
            raise client_error(r.error_code, r.error_message)
        share.forget(key)
    return True


async def initialized_partitions(share: ShareService, group_id: str,
                                 topics: dict[uuid.UUID, int]) -> dict[uuid.UUID, set[int]]:
    """Topic id -> partitions the group has share-partition state for, among ``topics``
    (topic id -> partition count: the topics the group subscribes to) and the share
    partitions this broker holds or coordinates."""
    out: dict[uuid.UUID, set[int]] = {}
    local = set(share.partitions) | (set(share.state.keys()) if share.state is not None else set())
    candidates = {k for k in local if k[0] == group_id}
    candidates |= {(group_id, tid, p) for tid, n in topics.items() for p in range(n)}
    for key in sorted(candidates, key=lambda k: (str(k[1]), k[2])):
        if key in share.partitions or await _summary(share, key) is not None:
            out.setdefault(key[1], set()).add(key[2])
    return out
