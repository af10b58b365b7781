"""Share-group offsets for the admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets; KIP-932's "Admin API"): reading, resetting and deleting the
share-partition start offset (SPSO) of a group's share partitions.

This is the one seam between those handlers and where share-partition state lives. On a
single node it is the broker's ``ShareService``: the share partitions in memory and, below
them, ``__share_group_state`` (``ShareStateStore``), so an altered or deleted start offset
survives a restart (the handlers answer after ``ShareService.flushed()``). Kafka's group
coordinator asks the share coordinator instead (ReadShareGroupStateSummary,
InitializeShareGroupState, DeleteShareGroupState); when pylog serves those RPCs across
brokers, these three functions are what changes.

- ``describe``: (SPSO, leader epoch, lag) of a share partition, or None when the group has
  no state for it (never fetched from, or deleted). Lag as KIP-1226 defines it for
  DescribeShareGroupOffsets v1: the high watermark minus the SPSO minus the records above
  the SPSO already in a terminal state (acknowledged or archived).
- ``reset``: a new start offset; the in-flight window is dropped (every record from there
  on is delivered as new) and the state epoch bumped, as Kafka's InitializeShareGroupState
  does. The caller checks that the group is empty.
- ``delete_topic``: the group's state for every partition of a topic goes; the next fetch
  starts the share partition again from ``share.auto.offset.reset``.

A partition this broker does not lead (cluster mode) raises ``NotLeaderOrFollowerError``:
its share-partition state is on its leader, and reaching it is the share-state RPCs' job.

Event-loop affinity: the broker's loop, like ``ShareService``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from pylog.errors import NotLeaderOrFollowerError

from .share_partition import RecordState, SharePartition, StateBatch

if TYPE_CHECKING:
    from .service import ShareService

__all__ = ["ShareOffset", "describe", "reset", "delete_topic", "initialized_partitions"]

_DONE = (int(RecordState.ACKNOWLEDGED), int(RecordState.ARCHIVED))


class ShareOffset(NamedTuple):
    start_offset: int
    leader_epoch: int
    lag: int


def _bounds(share: ShareService, topic: Any, partition: int) -> tuple[Any, int]:
    bounds = share.leader_bounds(topic, partition)
    if bounds is None:
        raise NotLeaderOrFollowerError(
            f"broker {share.broker.config['broker.id']} does not lead {topic.name}-{partition}; "
            f"its share-partition state is kept by its leader")
    return bounds


def _leader_epoch(share: ShareService, topic: Any, partition: int) -> int:
    state = share.broker.replicas.partitions.get((topic.name, partition))
    return 0 if state is None else int(getattr(state, "leader_epoch", 0))


def _saved(share: ShareService, key: tuple[str, uuid.UUID, int]) -> tuple[int, list[StateBatch]] | None:
    sp = share.partitions.get(key)
    if sp is not None:
        return sp.start_offset, sp.state_batches()
    return share.state.read(key) if share.state is not None else None


def describe(share: ShareService, group_id: str, topic: Any, partition: int) -> ShareOffset | None:
    """The group's SPSO of ``topic``-``partition`` with leader epoch and lag; None when it
    has no state there.

    Raises:
        NotLeaderOrFollowerError: this broker does not lead the partition.
    """
    _plog, hw = _bounds(share, topic, partition)
    saved = _saved(share, (group_id, topic.topic_id, partition))
    if saved is None:
        return None
    start, batches = saved
    done = sum(min(b.last_offset, hw - 1) - max(b.first_offset, start) + 1
               for b in batches if b.delivery_state in _DONE and b.last_offset >= start
               and b.first_offset < hw)
    return ShareOffset(start, _leader_epoch(share, topic, partition), max(0, hw - start - done))


def reset(share: ShareService, group_id: str, topic: Any, partition: int,
          start_offset: int) -> Callable[[], None]:
    """Make ``start_offset`` the share partition's SPSO with an empty in-flight window; the
    state is written to the state store (await ``share.flushed()`` for durability).

    Returns:
        The undo: called when that write failed, it puts memory back as it was (the log
        still has the old state).

    Raises:
        NotLeaderOrFollowerError: this broker does not lead the partition.
    """
    _bounds(share, topic, partition)
    key = (group_id, topic.topic_id, partition)
    undo = _undo(share, key)
    old = share.partitions.get(key)
    sp = SharePartition(start_offset, delivery_count_limit=share.delivery_count_limit(group_id),
                        max_in_flight=share.broker.config["group.share.partition.max.record.locks"])
    sp.state_epoch = (old.state_epoch if old is not None else _saved_epoch(share, key)) + 1
    share.partitions[key] = sp
    share.changed(key, sp, woke=True)
    return undo


def _undo(share: ShareService, key: tuple[str, uuid.UUID, int]) -> Callable[[], None]:
    old = share.partitions.get(key)
    saved = share.state.saved(key) if share.state is not None else None

    def undo() -> None:
        if old is None:
            share.partitions.pop(key, None)
        else:
            share.partitions[key] = old
        if share.state is not None:
            share.state.restore(key, saved)
        share.arm()
    return undo


def _saved_epoch(share: ShareService, key: tuple[str, uuid.UUID, int]) -> int:
    return share.state.state_epoch(key) if share.state is not None else 0


def delete_topic(share: ShareService, group_id: str, topic: Any) -> Callable[[], None] | None:
    """Forget the group's state of every partition of ``topic``.

    Returns:
        None when the group had no state for the topic; else the undo (see ``reset``).

    Raises:
        NotLeaderOrFollowerError: this broker does not lead a partition of the topic that
            the group has state for (cluster mode); nothing was deleted.
    """
    keys = [(group_id, topic.topic_id, p) for p in range(len(topic.partitions))]
    keys = [k for k in keys
            if k in share.partitions or (share.state is not None and share.state.read(k) is not None)]
    if not keys:
        return None
    for key in keys:
        _bounds(share, topic, key[2])
    undos = [_undo(share, key) for key in keys]
    for key in keys:
        share.partitions.pop(key, None)
        if share.state is not None:
            share.state.delete(key)
    share.arm()

    def undo() -> None:
        for u in undos:
            u()
    return undo


def initialized_partitions(share: ShareService, group_id: str) -> dict[uuid.UUID, set[int]]:
    """Topic id -> partitions the group has share-partition state for on this broker."""
    out: dict[uuid.UUID, set[int]] = {}
    keys = set(share.partitions) | (share.state.keys() if share.state is not None else set())
    for gid, tid, part in keys:
        if gid == group_id:
            out.setdefault(tid, set()).add(part)
    return out
