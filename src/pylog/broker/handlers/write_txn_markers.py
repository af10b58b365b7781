"""WriteTxnMarkers (key 27), versions 0-1: the transaction coordinator's markers.

The request's side only: each marker is handed to the partition side,
``pylog.replication.markers.write_markers`` (one control batch per partition through the
ordered append path; its docstring lists the answers), and the results are put back into
the response's shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers._authz import AclOperation, cluster_allowed, require_cluster
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import WriteTxnMarkersResponse
from pylog.replication.markers import TxnMarker, write_markers

if TYPE_CHECKING:
    from pylog.broker.handlers import RequestContext

API_KEY = ApiKey.WRITE_TXN_MARKERS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = WriteTxnMarkersResponse


async def handle_write_txn_markers(ctx: RequestContext, request: Any) -> Any:
    if not cluster_allowed(ctx, AclOperation.ALTER, log_denied=False):  # Kafka: ALTER, else
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)  # CLUSTER_ACTION on the cluster
    markers = [
        TxnMarker(m.producer_id, m.producer_epoch, bool(m.transaction_result),
                  m.coordinator_epoch,
                  [(t.name, p) for t in m.topics for p in t.partition_indexes])
        for m in request.markers
    ]
    results = await write_markers(ctx.broker, markers)
    out = []
    i = 0
    for m in request.markers:
        topics = []
        for t in m.topics:
            parts = []
            for p in t.partition_indexes:
                parts.append(_R.WritableTxnMarkerPartitionResult(partition_index=p,
                                                                  error_code=results[i].error_code))
                i += 1
            topics.append(_R.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        out.append(_R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return _R(markers=out)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(markers=[
        _R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            _R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                _R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=code)
                for p in t.partition_indexes])
            for t in m.topics])
        for m in request.markers
    ])
