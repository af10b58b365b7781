"""ListPartitionReassignments (key 46), version 0, cluster mode only (KIP-455).

Answered by the controller (another broker answers NOT_CONTROLLER): the ongoing
reassignments, of the partitions named or (``topics`` null) all of them, each with its
full replica set during the move (target + original), the replicas being added and those
being removed. Partitions named that are not being reassigned (or do not exist) are left
out, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.broker.handlers._controller import NOT_CONTROLLER, controller, not_controller_message
from pylog.protocol.apis import CLUSTER_ADVERTISED, ApiKey
from pylog.protocol.messages import ListPartitionReassignmentsResponse

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
VERSIONS = CLUSTER_ADVERTISED[API_KEY]  # served in cluster mode only (pylog.protocol.apis)


_R = ListPartitionReassignmentsResponse


async def handle_list_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.DESCRIBE)  # Kafka: DESCRIBE on the cluster
    service = controller(ctx)
    if service is None:
        return _R(error_code=NOT_CONTROLLER, error_message=not_controller_message("ListPartitionReassignments"), topics=[])
    wanted = None if request.topics is None else [
        (t.name, p) for t in request.topics for p in t.partition_indexes]
    ongoing = await service.list_reassignments(wanted)
    by_topic: dict[str, list[Any]] = {}
    for (t, p), ra in sorted(ongoing.items()):
        by_topic.setdefault(t, []).append(_R.OngoingPartitionReassignment(
            partition_index=p, replicas=list(ra.replicas), adding_replicas=list(ra.adding_replicas),
            removing_replicas=list(ra.removing_replicas)))
    return _R(error_code=0, topics=[_R.OngoingTopicReassignment(name=t, partitions=ps)
                                    for t, ps in by_topic.items()])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(error_code=code, error_message=message, topics=[])
