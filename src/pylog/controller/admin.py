"""Topic administration in cluster mode (CreateTopics / DeleteTopics on any broker).

As Kafka's ZooKeeper mode (``AdminZkClient``, ``ZkAdminManager``): the broker that receives
the request validates it, writes ZooKeeper (``/config/topics/<t>`` then
``/brokers/topics/<t>`` with the replica assignment; or ``/admin/delete_topics/<t>``), and
the controller acts on the change. The request then waits, bounded by its ``timeout_ms``,
until this broker's metadata cache shows the result (every partition led, or the topic
gone); past it the answer is REQUEST_TIMED_OUT (the change still completes).

Event-loop affinity: the broker's loop; ZooKeeper calls go through ``cluster.zk``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pylog import errors
from pylog.cluster import zk_data as z
from pylog.cluster.assignment import (
    AdminOperationError,
    BrokerMetadata,
    assign_replicas_to_brokers,
    validate_assignment,
)
from pylog.log import topics as _topics
from pylog.log.topics import topic_id_from_str


def _check_collision(name: str, existing: Sequence[str]) -> None:
    if name in existing:
        raise errors.TopicAlreadyExistsError(f"Topic '{name}' already exists.")
    key = _topics.collision_key(name)
    for other in existing:
        if _topics.collision_key(other) == key:
            raise errors.InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")


async def create_topic(broker: Any, name: str, num_partitions: int, replication_factor: int,
                       assignment: Mapping[int, Sequence[int]] | None,
                       configs: Mapping[str, str], validate_only: bool,
                       timeout_s: float) -> tuple[Any, int, int, dict[str, Any]]:
    """Validate and write a new topic; returns (topic id, partitions, replication factor,
    parsed config overrides). Raises ApiError."""
    cluster = broker.cluster
    store = cluster.store
    # Name legality and the topic configs, as on a single node (replication factor aside).
    overrides: dict[str, Any] = broker.log_manager.check_new_topic(
        name, num_partitions if assignment is None else len(assignment), 1, configs)
    _check_collision(name, await cluster.zk(store.get_topics))
    live = await cluster.zk(store.get_all_brokers)
    if assignment is not None:
        try:
            validate_assignment(assignment, list(live))
        except ValueError as exc:
            raise errors.InvalidReplicaAssignmentError(str(exc)) from None
        plan = {p: list(r) for p, r in assignment.items()}
    else:
        try:
            plan = assign_replicas_to_brokers(
                [BrokerMetadata(b, reg.rack) for b, (reg, _) in live.items()],
                num_partitions, replication_factor)
        except AdminOperationError as exc:
            raise errors.InvalidReplicaAssignmentError(str(exc)) from None
    rf = len(next(iter(plan.values())))
    n = len(plan)
    if validate_only:
        return None, n, rf, overrides
    from pylog.cluster.zk_store import TopicExistsError  # kazoo: cluster mode only

    topic_id = z.new_uuid_text()
    data = z.TopicAssignment({p: z.ReplicaAssignment(tuple(r)) for p, r in plan.items()}, topic_id)
    try:
        await cluster.zk(store.create_topic, name, data, dict(configs))
    except TopicExistsError:
        raise errors.TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None

    def ready(cache: Any) -> bool:
        parts = cache.partitions.get(name)
        return parts is not None and len(parts) == n and all(m.leader >= 0 for m in parts.values())
    if not await cluster.metadata.wait_until(ready, timeout_s):
        raise errors.RequestTimedOutError(
            f"Topic '{name}' was written to ZooKeeper but its partitions were not all led within "
            f"{timeout_s:.1f} s (are enough brokers alive?); it will be created when they are")
    return topic_id_from_str(topic_id), n, rf, overrides


async def delete_topic(broker: Any, name: str, timeout_s: float) -> Any:
    """Request the deletion and wait until this broker's metadata no longer has the topic;
    returns the topic id."""
    cluster = broker.cluster
    if not broker.config["delete.topic.enable"]:
        raise errors.TopicDeletionDisabledError("Topic deletion is disabled.")
    from pylog.cluster.zk_store import ZkStoreError  # kazoo: cluster mode only

    topic_id = cluster.metadata.topic_ids.get(name)
    try:
        await cluster.zk(cluster.store.request_topic_deletion, name)
    except ZkStoreError:
        raise errors.UnknownTopicOrPartitionError(
            "This server does not host this topic-partition.") from None
    if not await cluster.metadata.wait_until(lambda c: name not in c.partitions, timeout_s):
        raise errors.RequestTimedOutError(
            f"Deletion of topic '{name}' was requested but not completed within {timeout_s:.1f} s")
    return topic_id
