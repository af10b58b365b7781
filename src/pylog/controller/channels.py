"""The controller's channels to brokers (Kafka's ``ControllerChannelManager``): one queue and
one sender task per live broker, speaking the Kafka protocol over
``pylog.client.aio``'s ``BrokerConnection``, in order. A request that fails (connection
refused, broken, timed out) is retried on a new connection after a backoff (100 ms doubling to 1 s) until it is sent
or the broker is removed (it died: the controller drops its queue). The transaction
coordinator reuses ``BrokerChannel`` with ``retry=False`` for its WriteTxnMarkers and
verification requests (``pylog.txn.markers``): a failure is handed back, not retried.

``build_*`` turn the core's ``PartitionInfo`` lists into LeaderAndIsr (v0-7),
UpdateMetadata (v0-8) and StopReplica (v0-4) requests at the version the broker serves.
Event-loop affinity: the controller's (the broker's) loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from pylog import errors
from pylog.client.aio._connection import BrokerConnection
from pylog.cluster import zk_data as z
from pylog.controller.core import TP, PartitionInfo
from pylog.log.topics import topic_id_from_str
from pylog.protocol.codec import ZERO_UUID
from pylog.protocol.messages import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

log = logging.getLogger("pylog.controller.channels")

RETRY_BACKOFF_S = 0.1  # Kafka retries at once on a new connection; a short pause spares the loop
REQUEST_TIMEOUT_S = 30.0


def _uuid(topic_ids: Mapping[str, str | None], topic: str) -> Any:
    text = topic_ids.get(topic)
    return topic_id_from_str(text) if text else ZERO_UUID


def build_leader_and_isr(version: int, controller_id: int, controller_epoch: int,
                         broker_epoch: int, parts: list[PartitionInfo],
                         topic_ids: Mapping[str, str | None],
                         brokers: Mapping[int, tuple[z.BrokerRegistration, int]]) -> Any:
    R = LeaderAndIsrRequest
    states = []
    for info in parts:
        s = info.state
        states.append(R.LeaderAndIsrPartitionState(
            topic_name=info.tp[0], partition_index=info.tp[1], controller_epoch=controller_epoch,
            leader=s.leader, leader_epoch=s.leader_epoch, isr=list(s.isr),
            partition_epoch=s.partition_epoch, replicas=list(info.replicas),
            adding_replicas=list(info.adding), removing_replicas=list(info.removing),
            is_new=info.is_new,
            leader_recovery_state=s.leader_recovery_state))
    leaders = sorted({i.state.leader for i in parts if i.state.leader in brokers})
    live_leaders = []
    for b in leaders:
        ep = brokers[b][0].endpoints[0]
        live_leaders.append(R.LeaderAndIsrLiveLeader(broker_id=b, host_name=ep.host, port=ep.port))
    req = R(controller_id=controller_id, controller_epoch=controller_epoch,
            broker_epoch=broker_epoch, live_leaders=live_leaders)
    if version < 2:
        req.ungrouped_partition_states = states
    else:
        by_topic: dict[str, list[Any]] = {}
        for st in states:
            by_topic.setdefault(st.topic_name, []).append(st)
        req.topic_states = [R.LeaderAndIsrTopicState(topic_name=t, topic_id=_uuid(topic_ids, t),
                                                     partition_states=ps)
                            for t, ps in by_topic.items()]
    return req


def build_update_metadata(version: int, controller_id: int, controller_epoch: int,
                          broker_epoch: int, parts: list[PartitionInfo],
                          topic_ids: Mapping[str, str | None],
                          brokers: Mapping[int, tuple[z.BrokerRegistration, int]]) -> Any:
    R = UpdateMetadataRequest
    states = [R.UpdateMetadataPartitionState(
        topic_name=i.tp[0], partition_index=i.tp[1], controller_epoch=controller_epoch,
        leader=i.state.leader, leader_epoch=i.state.leader_epoch, isr=list(i.state.isr),
        zk_version=i.state.partition_epoch, replicas=list(i.replicas),
        offline_replicas=list(i.offline)) for i in parts]
    live = []
    for b, (reg, _) in sorted(brokers.items()):
        first = reg.endpoints[0]
        live.append(R.UpdateMetadataBroker(
            id=b, v0_host=first.host, v0_port=first.port, rack=reg.rack,
            endpoints=[R.UpdateMetadataEndpoint(port=e.port, host=e.host, listener=e.listener,
                                                security_protocol=0) for e in reg.endpoints]))
    req = R(controller_id=controller_id, controller_epoch=controller_epoch,
            broker_epoch=broker_epoch, live_brokers=live)
    if version < 5:
        req.ungrouped_partition_states = states
    else:
        by_topic: dict[str, list[Any]] = {}
        for st in states:
            by_topic.setdefault(st.topic_name, []).append(st)
        req.topic_states = [R.UpdateMetadataTopicState(topic_name=t, topic_id=_uuid(topic_ids, t),
                                                       partition_states=ps)
                            for t, ps in by_topic.items()]
    return req


def build_stop_replica(version: int, controller_id: int, controller_epoch: int,
                       broker_epoch: int, parts: list[tuple[TP, bool]]) -> Any:
    R = StopReplicaRequest
    req = R(controller_id=controller_id, controller_epoch=controller_epoch,
            broker_epoch=broker_epoch)
    if version < 3:
        req.delete_partitions = any(d for _, d in parts)
        if version == 0:
            req.ungrouped_partitions = [R.StopReplicaPartitionV0(topic_name=t, partition_index=p)
                                        for (t, p), _ in parts]
        else:
            names: dict[str, list[int]] = {}
            for (t, p), _ in parts:
                names.setdefault(t, []).append(p)
            req.topics = [R.StopReplicaTopicV1(name=t, partition_indexes=ps)
                          for t, ps in names.items()]
    else:
        by_topic: dict[str, list[Any]] = {}
        for (t, p), delete in parts:
            by_topic.setdefault(t, []).append(R.StopReplicaPartitionState(
                partition_index=p, leader_epoch=-2 if delete else -1, delete_partition=delete))
        req.topic_states = [R.StopReplicaTopicState(topic_name=t, partition_states=ps)
                            for t, ps in by_topic.items()]
    return req


class BrokerChannel:
    """Ordered delivery of controller requests to one broker.

    ``retry=False`` (the transaction coordinator's marker channels): a request that fails is
    not retried here; ``on_response`` gets the exception instead of a response, so that the
    caller can send it elsewhere (the partition's leader may have moved)."""

    def __init__(self, broker_id: int, host: str, port: int, client_id: str, *,
                 retry: bool = True) -> None:
        self.broker_id = broker_id
        self.host, self.port = host, port
        self.client_id = client_id
        self.retry = retry
        self.queue: asyncio.Queue[tuple[Any, Any, Any]] = asyncio.Queue()
        self._conn: BrokerConnection | None = None
        self._closing = False
        self._task = asyncio.ensure_future(self._run())

    def enqueue(self, builder: Any, on_response: Any = None, version: Any = None) -> None:
        """``builder(conn)`` makes the request once a connection knows the versions;
        ``version(conn)``, when given, picks the version to send (else the highest both sides
        serve within the client's caps)."""
        self.queue.put_nowait((builder, on_response, version))

    async def _connection(self) -> BrokerConnection:
        if self._conn is None or self._conn.closed:
            conn = BrokerConnection(self.host, self.port, node_id=self.broker_id,
                                    client_id=self.client_id, request_timeout=REQUEST_TIMEOUT_S)
            await conn.connect(REQUEST_TIMEOUT_S)
            self._conn = conn
        return self._conn

    async def _run(self) -> None:
        # ``_closing`` and not only the cancellation ends the loop: Python 3.11's
        # ``asyncio.wait_for`` (under ``conn.send``) returns the answer and drops a cancel that
        # arrives as the answer does, and the loop would then wait in ``queue.get()`` forever
        # (a controller stopping at shutdown hung there, and the broker never exited).
        while not self._closing:
            builder, on_response, version = await self.queue.get()
            failures = 0
            while True:
                try:
                    conn = await self._connection()
                    body = builder(conn)
                    resp = await conn.send(body, None if version is None else version(conn))
                    if on_response is not None:
                        on_response(resp)
                    break
                except asyncio.CancelledError:
                    raise
                except errors.UnsupportedVersionError as exc:
                    # Retrying cannot help (an older broker): drop this request, keep order.
                    log.warning("broker %d cannot take a controller request: %s",
                                self.broker_id, exc)
                    if not self.retry and on_response is not None:
                        on_response(exc)
                    break
                except Exception as exc:  # noqa: BLE001 - retried while the broker lives
                    if not self.retry:
                        log.info("request to broker %d failed: %s", self.broker_id, exc)
                        if self._conn is not None:
                            await self._conn.close()
                        self._conn = None
                        if on_response is not None:
                            on_response(exc)
                        break
                    failures += 1
                    (log.info if failures == 1 else log.debug)(
                        "controller request to broker %d failed (%s); retrying",
                        self.broker_id, exc)
                    if self._conn is not None:
                        await self._conn.close()
                    self._conn = None
                    # 100 ms, doubling up to 1 s: a dead broker is dropped when its session ends.
                    await asyncio.sleep(min(RETRY_BACKOFF_S * 2 ** (failures - 1), 1.0))

    async def close(self) -> None:
        # Cancelled again until it ends: on Python 3.11 an asyncio.wait_for whose inner
        # future completes as it is cancelled swallows the cancellation (bpo-42130), and the
        # task would go back to waiting on its queue forever (seen on the channel to itself).
        self._closing = True
        while not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task], timeout=0.1)
        if self._conn is not None:
            await self._conn.close()
