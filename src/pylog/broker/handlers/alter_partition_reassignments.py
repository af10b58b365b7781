"""AlterPartitionReassignments (key 45), version 0, cluster mode only (KIP-455).

As Kafka's ZooKeeper mode: answered by the controller (another broker answers
NOT_CONTROLLER; admin clients send it to the controller). Per partition, ``replicas``
starts or replaces a reassignment to that list, null cancels the ongoing one (back to the
original replicas; NO_REASSIGNMENT_IN_PROGRESS when there is none). Refused per partition:
an empty list, a broker twice, a negative id or a new replica on a broker that is not alive
(INVALID_REPLICA_ASSIGNMENT), an unknown partition or one whose topic is being deleted
(UNKNOWN_TOPIC_OR_PARTITION). The answer comes once the reassignment has started (the
controller wrote the new replica set and told the replicas); it completes in the background
(``pylog.controller.core``, docs/replication.md).
"""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.broker.handlers._controller import NOT_CONTROLLER, controller, not_controller_message
from pylog.protocol.apis import CLUSTER_ADVERTISED, ApiKey
from pylog.protocol.messages import AlterPartitionReassignmentsResponse

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
VERSIONS = CLUSTER_ADVERTISED[API_KEY]  # served in cluster mode only (pylog.protocol.apis)


_R = AlterPartitionReassignmentsResponse


async def handle_alter_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.ALTER)  # Kafka: ALTER on the cluster
    service = controller(ctx)
    if service is None:
        return _R(error_code=NOT_CONTROLLER, error_message=not_controller_message("AlterPartitionReassignments"), responses=[])
    requested: dict[tuple[str, int], list[int] | None] = {}
    for t in request.topics:
        for p in t.partitions:
            requested[(t.name, p.partition_index)] = (
                None if p.replicas is None else list(p.replicas))
    outcomes = await service.alter_reassignments(requested)
    by_topic: dict[str, list[Any]] = {}
    for (t, p), (code, msg) in sorted(outcomes.items()):
        by_topic.setdefault(t, []).append(_R.ReassignablePartitionResponse(
            partition_index=p, error_code=code, error_message=msg))
    return _R(error_code=0, responses=[_R.ReassignableTopicResponse(name=t, partitions=ps)
                                       for t, ps in by_topic.items()])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(error_code=code, error_message=message, responses=[])
