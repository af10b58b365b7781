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

import asyncio
import logging
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

log = logging.getLogger("pylog.controller.admin")


PROPAGATION_WAIT_S = 5.0  # the most an admin answer waits for the other brokers' metadata


async def wait_propagated(broker: Any, name: str, partitions: int, timeout_s: float) -> None:
    """After this broker's metadata shows a topic change, wait (bounded) until every other
    live broker's Metadata shows it too: ``partitions`` led partitions, or the topic gone
    when 0. The controller sends UpdateMetadata to all brokers at once, so this is short;
    it lets a client that created a topic on one broker find it on any other (Kafka's
    integration tests wait for that themselves: ``waitUntilMetadataIsPropagated``). Past
    the bound the answer goes out anyway: the change is made, the others are catching up."""
    from pylog.net.connection import BrokerConnection
    from pylog.protocol.messages import MetadataRequest

    cache = broker.cluster.metadata
    others = [b for b in cache.brokers.values() if b.broker_id != broker.node_id]
    if not others:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(max(timeout_s, 0.0), PROPAGATION_WAIT_S)

    def shows(resp: Any) -> bool:
        for t in resp.topics:
            if t.name == name:
                if partitions == 0:
                    return bool(t.error_code == errors.UnknownTopicOrPartitionError.code)
                return (t.error_code == 0 and len(t.partitions) == partitions
                        and all(p.leader_id >= 0 for p in t.partitions))
        return partitions == 0

    async def one(b: Any) -> None:
        conn = BrokerConnection(b.host, b.port, node_id=b.broker_id,
                                client_id=f"broker-{broker.node_id}-admin", request_timeout=5.0,
                                ssl_context=broker.inter_broker_tls(),
                                sasl=broker.inter_broker_sasl())
        try:
            await conn.connect(5.0)
            while loop.time() < deadline:
                resp = await conn.send(MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                    allow_auto_topic_creation=False))
                if shows(resp):
                    return
                await asyncio.sleep(0.05)
        except Exception as exc:  # noqa: BLE001 - a broker going away: do not wait for it
            log.debug("metadata propagation check on broker %d: %s", b.broker_id, exc)
        finally:
            await conn.close()
    remaining = deadline - loop.time()
    if remaining > 0:
        await asyncio.wait([asyncio.ensure_future(one(b)) for b in others], timeout=remaining + 1)


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
    await wait_propagated(broker, name, n, timeout_s)
    return topic_id_from_str(topic_id), n, rf, overrides


async def create_partitions(broker: Any, name: str, count: int,
                            assignments: list[list[int]] | None, validate_only: bool,
                            timeout_s: float) -> None:
    """Grow a topic to ``count`` partitions (Kafka's ``AdminZkClient.addPartitions``): new
    replicas assigned over the live brokers (or ``assignments`` checked), the assignment
    znode rewritten conditionally; the controller starts the new partitions. Raises ApiError."""
    from pylog.cluster.zk_store import BadVersion

    cluster = broker.cluster
    store = cluster.store
    found = await cluster.zk(store.get_topic_assignment, name)
    if found is None:
        raise errors.UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
    current, version = found
    n = len(current.partitions)
    if count < n:
        raise errors.InvalidPartitionsError(
            f"Topic currently has {n} partitions, which is higher than the requested {count}.")
    if count == n:
        raise errors.InvalidPartitionsError(f"Topic already has {n} partitions.")
    rf = len(current.partitions[0].replicas)
    live = await cluster.zk(store.get_all_brokers)
    if assignments is not None:
        if len(assignments) != count - n:
            raise errors.InvalidReplicaAssignmentError(
                f"Increasing the number of partitions by {count - n} but {len(assignments)} "
                "assignments provided.")
        plan = {n + i: list(r) for i, r in enumerate(assignments)}
        whole = {p: list(a.replicas) for p, a in current.partitions.items()} | plan
        try:
            validate_assignment(whole, list(live))
        except ValueError as exc:
            raise errors.InvalidReplicaAssignmentError(str(exc)) from None
    else:
        try:
            plan = assign_replicas_to_brokers(
                [BrokerMetadata(b, reg.rack) for b, (reg, _) in live.items()], count - n, rf,
                start_partition_id=n)
        except AdminOperationError as exc:
            raise errors.InvalidReplicaAssignmentError(str(exc)) from None
    if validate_only:
        return
    parts = dict(current.partitions)
    parts.update({p: z.ReplicaAssignment(tuple(r)) for p, r in plan.items()})
    result = await cluster.zk(store.add_partitions, name,
                              z.TopicAssignment(parts, current.topic_id), version)
    if isinstance(result, BadVersion):
        raise errors.InvalidRequestError(f"topic '{name}' changed while adding partitions; "
                                         "retry")

    def ready(cache: Any) -> bool:
        ps = cache.partitions.get(name)
        return ps is not None and len(ps) == count and all(m.leader >= 0 for m in ps.values())
    if not await cluster.metadata.wait_until(ready, timeout_s):
        raise errors.RequestTimedOutError(
            f"partitions of '{name}' were written to ZooKeeper but not all led within "
            f"{timeout_s:.1f} s; they will start when their brokers are alive")
    await wait_propagated(broker, name, count, timeout_s)


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
    await wait_propagated(broker, name, 0, timeout_s)
    return topic_id


async def find_coordinator(broker: Any, key: str, key_type: int) -> tuple[int, str | None, Any]:
    """Cluster-mode FindCoordinator for one key: (error code, message, broker info or None).

    The coordinator is the leader of the key's partition of ``__consumer_offsets`` (groups,
    key type 0), ``__transaction_state`` (transactional ids, 1) or ``__share_group_state``
    (share partitions ``group:topicId:partition``, 2), from the metadata cache. When the topic
    does not exist yet it is created through ZooKeeper (``offsets.topic.replication.factor``
    / ``transaction.state.log.replication.factor`` /
    ``share.coordinator.state.topic.replication.factor`` replicas, refused while fewer brokers are
    alive) and the answer is COORDINATOR_NOT_AVAILABLE: the client retries, as with Kafka.
    """
    from pylog.group.config import partition_for as group_partition
    from pylog.group.service import offsets_topic_configs
    from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
    from pylog.txn.config import partition_for as txn_partition
    from pylog.txn.service import transaction_topic_configs

    config = broker.config
    if key_type == 0:
        topic, n = GROUP_METADATA_TOPIC_NAME, config["offsets.topic.num.partitions"]
        rf, configs = config["offsets.topic.replication.factor"], offsets_topic_configs(config)
        partition = group_partition(key, n)
    elif key_type == 2:
        from pylog.group.share.state_store import state_topic_configs
        from pylog.log.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME

        topic, n = SHARE_GROUP_STATE_TOPIC_NAME, config["share.coordinator.state.topic.num.partitions"]
        rf, configs = config["share.coordinator.state.topic.replication.factor"], state_topic_configs(config)
        partition = group_partition(key, n)
    else:
        topic, n = TRANSACTION_STATE_TOPIC_NAME, config["transaction.state.log.num.partitions"]
        rf = config["transaction.state.log.replication.factor"]
        configs, partition = transaction_topic_configs(config), txn_partition(key, n)
    cache = broker.cluster.metadata
    parts = cache.partitions.get(topic)
    if parts is None:
        try:
            await create_topic(broker, topic, n, rf, None,
                               {k: str(v) for k, v in configs.items()}, False, 0.0)
        except errors.RequestTimedOutError:
            pass  # written; the controller is starting its partitions
        except errors.TopicAlreadyExistsError:
            pass
        except errors.ApiError as exc:
            return errors.CoordinatorNotAvailableError.code, f"cannot create {topic}: {exc}", None
        return errors.CoordinatorNotAvailableError.code, f"{topic} is being created", None
    meta = parts.get(partition)
    leader = cache.brokers.get(meta.leader) if meta is not None else None
    if leader is None:
        return (errors.CoordinatorNotAvailableError.code,
                f"{topic}-{partition} has no live leader", None)
    return 0, None, leader
