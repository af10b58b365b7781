"""DescribeLogDirs (key 35), versions 0-4: the log directory this broker keeps its
partitions in, with each hosted partition's size on disk.

As Kafka's ``ReplicaManager.describeLogDirs``: topics null = every partition hosted here;
otherwise the named partitions that are hosted here (others are left out, not errors).
``offset_lag`` is 0 and ``is_future_key`` false (no replica moves between directories);
v4 adds the directory's file system total and usable bytes (``os.statvfs``); v3+ carry a
top-level error code. The walk over the partitions and the ``statvfs`` run on an I/O
thread (a directory on a slow disk must not hold the event loop).
"""

from __future__ import annotations

import os
from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeLogDirsResponse

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeLogDirsResponse


def _describe(manager: Any, wanted: dict[str, set[int]] | None) -> Any:
    """Blocking (an I/O thread): the one log directory's result."""
    topics = []
    for name, topic in sorted(list(manager.topics.items())):
        if wanted is not None and name not in wanted:
            continue
        parts = [
            _R.DescribeLogDirsPartition(partition_index=p.index,
                                        partition_size=p.log.size_in_bytes,
                                        offset_lag=0, is_future_key=False)
            for p in list(topic.partitions)
            if (wanted is None or p.index in wanted[name]) and not p.log.closed
        ]
        if parts:
            topics.append(_R.DescribeLogDirsTopic(name=name, partitions=parts))
    try:
        st = os.statvfs(manager.log_dir)
        total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError:
        total = usable = -1
    return _R.DescribeLogDirsResult(error_code=0, log_dir=manager.log_dir, topics=topics,
                                    total_bytes=total, usable_bytes=usable)


async def handle_describe_log_dirs(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.DESCRIBE)  # Kafka: DESCRIBE on the cluster
    wanted = None if request.topics is None else {
        t.topic: set(t.partitions) for t in request.topics}
    result = await ctx.broker.io.run(_describe, ctx.broker.log_manager, wanted)
    return _R(throttle_time_ms=0, error_code=0, results=[result])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    # The top-level code exists from v3; the directory's carries it in every version.
    return _R(throttle_time_ms=0, error_code=code, results=[_R.DescribeLogDirsResult(
        error_code=code, log_dir=ctx.broker.log_manager.log_dir, topics=[])])
