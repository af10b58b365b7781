"""Producer ids in cluster mode: blocks claimed from ZooKeeper (Kafka's ZK-mode
``ZkProducerIdManager``).

Every broker hands out idempotent and transactional producer ids, so ids must be unique
across the cluster, not only across one broker's restarts (the single-node broker's
``producer-id-block`` file). A broker claims the next block of 1000 ids with a conditional
write of ``/latest_producer_id_block`` (``ZkStore.claim_producer_id_block``) and hands them
out in order; when the block is used up it claims the next. A broker that restarts claims a
new block (the rest of the old one is wasted, never reused).

Event-loop affinity: the broker's loop; the claim runs on the ZooKeeper thread, one at a time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("pylog.controller.producer_ids")


class ZkProducerIdAllocator:
    """``next_id()``: a producer id no broker of the cluster handed out before."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self._next = 0
        self._end = -1  # last id of the current block (none yet)
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._end:
                store = self.cluster.store
                block = await self.cluster.zk(store.claim_producer_id_block,
                                              self.cluster.broker_id)
                log.info("claimed producer ids %d-%d", block.block_start, block.block_end)
                self._next, self._end = block.block_start, block.block_end
            pid = self._next
            self._next += 1
            return pid
