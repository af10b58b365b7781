"""Producer ids in cluster mode (Kafka's ``ZkProducerIdManager``): every broker hands out ids
from blocks of 1000 it claims in ZooKeeper's ``/latest_producer_id_block``
(``ZkStore.claim_producer_id_block``: a conditional write, so blocks never overlap across
brokers). A block is claimed when the current one is used up; a broker that restarts claims a
new block (the rest of its previous one is never used), so an id is never handed out twice.

Event-loop affinity: the broker's loop; the ZooKeeper write goes through ``cluster.zk``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pylog import errors

log = logging.getLogger("pylog.controller.producer_ids")


class ClusterProducerIds:
    """Producer ids from ZooKeeper blocks, for one broker."""

    def __init__(self, cluster: Any, broker_id: int) -> None:
        self._cluster = cluster
        self._broker_id = broker_id
        self._next = 0
        self._end = -1  # the current block's last id (inclusive); none yet
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        """A producer id no broker of the cluster handed out before.

        Raises:
            pylog.errors.CoordinatorNotAvailableError: ZooKeeper could not be written (the
                client retries InitProducerId).
        """
        async with self._lock:
            if self._next > self._end:
                try:
                    block = await self._cluster.zk(self._cluster.store.claim_producer_id_block,
                                                   self._broker_id)
                except Exception as exc:  # noqa: BLE001 - ZooKeeper down or contended: retriable
                    log.warning("cannot claim a producer id block in ZooKeeper: %s", exc)
                    raise errors.CoordinatorNotAvailableError(
                        f"cannot claim producer ids in ZooKeeper ({exc}); retry") from None
                log.info("claimed producer ids %d..%d", block.block_start, block.block_end)
                self._next, self._end = block.block_start, block.block_end
            pid = self._next
            self._next += 1
            return pid
