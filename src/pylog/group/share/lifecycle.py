"""The group coordinator's calls to the share coordinators (KIP-932, Kafka 4.1's
``GroupCoordinatorService.persisterInitialize`` and the share-group delete paths): the
asyncio glue between a share group's ``ShareGroupStatePartitionMetadata``
(``ShareGroups``, sans-IO) and the share-partition state (``SharePersister``).

- ``initialize``: after a heartbeat's records (with its partitions as initializing) are in
  the log, InitializeShareGroupState of each partition at the group epoch with start offset
  -1 (the share-partition leader resolves ``share.auto.offset.reset`` when it loads the share
  partition, as Kafka's ``SharePartition`` does). All answered: the partitions become
  initialized (and are assigned from the next heartbeat on); any failure: the request's
  partitions leave the initializing set and the heartbeat is answered with the error
  (COORDINATOR_NOT_AVAILABLE for a coordinator that could not be reached), as Kafka's
  ``uninitializeShareGroupState`` does; the next heartbeat tries again. A group with no
  record yet (its records written by a pylog that did not keep it, up to 2207a69) first
  asks each share coordinator for the partition's summary (ReadShareGroupStateSummary): a
  share partition that already has a start offset keeps its state and is recorded as
  initialized, instead of being reset (pylog's, for upgrades; Kafka has no such groups).
- ``delete_state``: DeleteShareGroupState of share partitions, answered (DeleteGroups,
  DeleteShareGroupOffsets); their topics are in the deleting set meanwhile (``begin_delete``),
  so an interrupted delete is done again by the next one.
- ``delete_state_later``: the same in the background; ``forget_topics``: deleted topics
  leave the records of the groups this broker coordinates, and their share partitions'
  state is deleted (Kafka deletes the state of a deleted topic's share partitions). A
  coordinator that did not see the deletion drops such a topic at the group's next
  heartbeat once the topic's name belongs to a new topic id.

A share partition whose state was deleted cannot be written back by a leader that still
holds it in memory: the share coordinator refuses a write of a share partition it has no
state for (INVALID_REQUEST, as Kafka 4.1), and the leader drops its share partition
(``ShareService``).

Event-loop affinity: the broker's loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pylog import errors

from .offsets import client_error
from .state_store import UNINITIALIZED_START_OFFSET

if TYPE_CHECKING:
    from pylog.group.coordinator import GroupCoordinator

__all__ = ["initialize", "delete_state", "delete_state_later", "forget_topics", "mark_initialized"]

log = logging.getLogger("pylog.share")

TopicPartitions = dict[uuid.UUID, set[int]]


def _keys(group_id: str, parts: Mapping[uuid.UUID, set[int]]) -> list[tuple[str, uuid.UUID, int]]:
    return [(group_id, t, p) for t, ps in sorted(parts.items(), key=lambda x: str(x[0])) for p in sorted(ps)]


def _client_code(code: int, message: str | None) -> int:
    return client_error(code, message).code


async def initialize(broker: Any, coord: GroupCoordinator, group_id: str, state_epoch: int,
                     parts: TopicPartitions, names: Mapping[uuid.UUID, str],
                     adopt: bool = False) -> tuple[int, str | None]:
    """InitializeShareGroupState of ``parts`` at ``state_epoch``, then their record moves
    (initialized, or out of initializing on a failure). Returns (error code, message) for
    the heartbeat: 0 when every partition was initialized and recorded. With ``adopt``,
    partitions whose state already has a start offset keep it (see the module docstring)."""
    persister = broker.share.persister
    if persister is None:
        return errors.GroupIdNotFoundError.code, "share groups are disabled on this broker"
    keys = _keys(group_id, parts)
    if adopt:
        summaries = await asyncio.gather(*(persister.read_summary(k) for k in keys))
        kept = [k for k, r in zip(keys, summaries, strict=True)
                if not r.error_code and r.state is not None and r.state.start_offset != UNINITIALIZED_START_OFFSET]
        if kept:
            log.info("share group %s: %d share partitions already had state (written before the group "
                     "coordinator kept ShareGroupStatePartitionMetadata): kept", group_id, len(kept))
        keys = [k for k in keys if k not in kept]
    results = await asyncio.gather(*(persister.initialize(k, state_epoch, UNINITIALIZED_START_OFFSET)
                                     for k in keys))
    failed = [(k, r) for k, r in zip(keys, results, strict=True) if r.error_code]
    if failed:
        (key, r) = failed[0]
        log.warning("share group %s: initializing the state of %d share partitions failed (first: %s, "
                    "error %d: %s); the next heartbeat tries again", group_id, len(failed), key,
                    r.error_code, r.error_message)
        await broker.groups.wait(coord, coord.share.uninitialized(group_id, parts))
        return _client_code(r.error_code, r.error_message), r.error_message
    code = await broker.groups.wait(coord, coord.share.initialized(group_id, parts, names))
    if code:
        from pylog.group.admin import map_append_error

        log.warning("share group %s: the initialized share partitions could not be recorded (error %d)",
                    group_id, code)
        await broker.groups.wait(coord, coord.share.uninitialized(group_id, parts))
        return map_append_error(code), "the group's records were not written"
    return 0, None


async def mark_initialized(broker: Any, coord: GroupCoordinator, group_id: str, parts: TopicPartitions,
                           names: Mapping[uuid.UUID, str]) -> int:
    """Record ``parts`` as initialized (their state was set by AlterShareGroupOffsets, which
    initializes it, as Kafka's ``alterShareGroupOffsets`` records it); the write's code."""
    return int(await broker.groups.wait(coord, coord.share.initialized(group_id, parts, names)))


async def delete_state(broker: Any, group_id: str, parts: TopicPartitions) -> int:
    """DeleteShareGroupState of ``parts``, answered; 0, or the first failure's client code
    (the others are deleted all the same)."""
    persister = broker.share.persister
    if persister is None:
        return 0
    keys = _keys(group_id, parts)
    results = await asyncio.gather(*(persister.delete_now(k) for k in keys))
    code = 0
    for key, r in zip(keys, results, strict=True):
        broker.share.forget(key)
        if r.error_code and not code:
            log.warning("share group %s: deleting the state of %s failed with error %d (%s)", group_id, key,
                        r.error_code, r.error_message)
            code = _client_code(r.error_code, r.error_message)
    return code


def delete_state_later(broker: Any, by_group: Mapping[str, TopicPartitions]) -> None:
    """DeleteShareGroupState of each group's ``parts``, in the background (retried)."""
    persister = broker.share.persister
    if persister is None:
        return
    for gid, parts in by_group.items():
        for key in _keys(gid, parts):
            broker.share.forget(key)
            persister.delete(key)


def forget_topics(broker: Any, topic_ids: set[uuid.UUID]) -> None:
    """Deleted topics leave the ShareGroupStatePartitionMetadata of every share group this
    broker coordinates, and the state of their share partitions is deleted."""
    for coord in broker.groups.coordinators():
        by_group = coord.share.forget_topics(topic_ids)
        broker.groups.after_call(coord)
        delete_state_later(broker, by_group)
