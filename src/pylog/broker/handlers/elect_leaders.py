"""ElectLeaders (key 43), versions 0-2, cluster mode only (KIP-183, KIP-460).

As Kafka's ZooKeeper mode (``KafkaApis.handleElectLeaders``): answered by the controller;
any other broker answers NOT_CONTROLLER (top level, v1+, and for every partition) and the
admin clients send it to the controller named in Metadata. ``election_type`` (v1+; v0 is
PREFERRED): 0 moves leadership to each partition's preferred replica when it is live and
in the ISR, 1 (UNCLEAN) elects a leader for partitions that have none, outside the ISR if
no ISR member is live. ``topic_partitions`` null = every partition, and then the partitions
that needed no election are left out of the answer. The answer waits (up to
``timeout_ms``) until this broker's metadata shows the new leaders, as Kafka's
DelayedElectLeader does; REQUEST_TIMED_OUT for those that did not appear in time.
"""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.broker.handlers._controller import NOT_CONTROLLER, controller, not_controller_message
from pylog.protocol.apis import CLUSTER_ADVERTISED, ApiKey
from pylog.protocol.messages import ElectLeadersResponse

API_KEY = ApiKey.ELECT_LEADERS
VERSIONS = CLUSTER_ADVERTISED[API_KEY]  # served in cluster mode only (pylog.protocol.apis)

INVALID_REQUEST = 42
REQUEST_TIMED_OUT = 7
ELECTION_NOT_NEEDED = 84

_R = ElectLeadersResponse


def _requested(request: Any) -> list[tuple[str, int]] | None:
    if request.topic_partitions is None:
        return None
    return [(t.topic, p) for t in request.topic_partitions for p in t.partitions]


def _response(code: int, results: dict[tuple[str, int], tuple[int, str | None]]) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (t, p), (c, msg) in sorted(results.items()):
        by_topic.setdefault(t, []).append(
            _R.PartitionResult(partition_id=p, error_code=c, error_message=msg))
    return _R(error_code=code, replica_election_results=[
        _R.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])


async def handle_elect_leaders(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.ALTER)  # Kafka: ALTER on the cluster
    service = controller(ctx)
    wanted = _requested(request)
    if service is None:
        msg = not_controller_message("ElectLeaders")
        return _response(NOT_CONTROLLER, {tp: (NOT_CONTROLLER, msg) for tp in wanted or ()})
    election_type = request.election_type if ctx.api_version >= 1 else 0
    if election_type not in (0, 1):
        msg = f"unknown election type {election_type}: 0 is PREFERRED, 1 is UNCLEAN"
        return _response(INVALID_REQUEST, {tp: (INVALID_REQUEST, msg) for tp in wanted or ()})
    outcomes, expected = await service.elect_leaders(wanted, election_type)
    results: dict[tuple[str, int], tuple[int, str | None]] = dict(outcomes)
    if expected:
        cluster = ctx.broker.cluster

        def shown(cache: Any) -> bool:
            return all((m := cache.partitions.get(t, {}).get(p)) is not None and m.leader == leader
                       for (t, p), leader in expected.items())
        await cluster.metadata.wait_until(shown, max(request.timeout_ms, 0) / 1000.0)
        for (t, p), leader in expected.items():
            m = cluster.metadata.partitions.get(t, {}).get(p)
            results[(t, p)] = (0, None) if m is not None and m.leader == leader else (
                REQUEST_TIMED_OUT, f"the new leader {leader} was elected but not yet seen by "
                "this broker's metadata within the request's timeout_ms")
    if wanted is None:
        results = {tp: r for tp, r in results.items() if r[0] != ELECTION_NOT_NEEDED}
    return _response(0, results)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _response(code, {tp: (code, message) for tp in _requested(request) or ()})
