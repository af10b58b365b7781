"""The controller's requests to brokers (Kafka's ``ControllerChannelManager``): one
``pylog.net.channel.BrokerChannel`` per live broker (one queue and one sender task, in
order; a failed request is retried on a new connection after a backoff until it is sent or
the broker is removed), and the builders of what goes on them.

``build_*`` turn the core's ``PartitionInfo`` lists into LeaderAndIsr (v0-7),
UpdateMetadata (v0-8) and StopReplica (v0-4) requests at the version the broker serves.
Event-loop affinity: the controller's (the broker's) loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pylog.cluster import zk_data as z
from pylog.config.security_defs import SECURITY_PROTOCOLS
from pylog.controller.core import TP, PartitionInfo
from pylog.log.topics import topic_id_from_str
from pylog.protocol.codec import ZERO_UUID
from pylog.protocol.messages import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

log = logging.getLogger("pylog.controller.channels")



def _uuid(topic_ids: Mapping[str, str | None], topic: str) -> Any:
    text = topic_ids.get(topic)
    return topic_id_from_str(text) if text else ZERO_UUID


def inter_broker_endpoint(reg: z.BrokerRegistration, listener: str) -> z.EndPoint:
    """The broker's endpoint on the inter-broker ``listener`` (its first one when it has
    none by that name: a broker configured differently still gets an address to try)."""
    return next((e for e in reg.endpoints if e.listener == listener), reg.endpoints[0])


def build_leader_and_isr(version: int, controller_id: int, controller_epoch: int,
                         broker_epoch: int, parts: list[PartitionInfo],
                         topic_ids: Mapping[str, str | None],
                         brokers: Mapping[int, tuple[z.BrokerRegistration, int]],
                         listener: str = "PLAINTEXT") -> Any:
    """LeaderAndIsr; ``live_leaders`` carry the leaders' inter-broker ``listener`` endpoints
    (followers fetch there)."""
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
        ep = inter_broker_endpoint(brokers[b][0], listener)
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
            endpoints=[R.UpdateMetadataEndpoint(
                port=e.port, host=e.host, listener=e.listener,
                security_protocol=SECURITY_PROTOCOLS.get(e.security_protocol, 0))
                for e in reg.endpoints]))
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
