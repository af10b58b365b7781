"""The controller's requests at every version a broker may serve, and the metadata cache
that UpdateMetadata feeds: built by ``channels``, encoded, decoded as the broker decodes
them, and applied."""

from __future__ import annotations

import asyncio

import pytest

from pylog.cluster import election as el
from pylog.cluster import zk_data as z
from pylog.controller.channels import (
    build_leader_and_isr,
    build_stop_replica,
    build_update_metadata,
)
from pylog.controller.core import LEADER_DURING_DELETE, PartitionInfo
from pylog.controller.metadata_cache import STALE_CONTROLLER_EPOCH, MetadataCache
from pylog.log.topics import topic_id_from_str

TOPIC_ID = "UYIqz_Y9SLutzBwx_HmF7g"
BROKERS = {b: (z.BrokerRegistration(b, (z.EndPoint("PLAINTEXT", f"h{b}", 9000 + b),),
                                    rack=f"r{b}"), 100 + b) for b in (1, 2, 3)}


def parts(leader: int = 1, epoch: int = 4) -> list[PartitionInfo]:
    return [PartitionInfo(("t", 0), el.LeaderAndIsr(leader, epoch, (1, 2), partition_epoch=7),
                          (1, 2, 3), (3,), is_new=True),
            PartitionInfo(("u", 1), el.LeaderAndIsr(2, 0, (2,)), (2,), ())]


def roundtrip(msg, version):
    return type(msg).decode(msg.encode(version), version)


@pytest.mark.parametrize("version", range(0, 9))
def test_update_metadata_every_version_feeds_the_cache(version: int) -> None:
    req = roundtrip(build_update_metadata(version, 1, 9, 101, parts(), {"t": TOPIC_ID}, BROKERS),
                    version)
    cache = MetadataCache()
    assert asyncio.run(_apply(cache, req, version)) == 0
    assert cache.controller_id == 1 and cache.controller_epoch == 9
    assert sorted(cache.brokers) == [1, 2, 3]
    assert (cache.brokers[2].host, cache.brokers[2].port) == ("h2", 9002)
    if version >= 2:
        assert cache.brokers[2].rack == "r2"
    m = cache.partitions["t"][0]
    assert (m.leader, m.leader_epoch, m.isr, m.zk_version) == (1, 4, (1, 2), 7)
    assert m.replicas == (1, 2, 3)
    if version >= 4:
        assert m.offline == (3,)
    if version >= 7:
        assert cache.topic_ids["t"] == topic_id_from_str(TOPIC_ID)


async def _apply(cache: MetadataCache, req, version: int) -> int:
    return cache.apply(req, version)


def test_cache_refuses_an_older_controller_and_forgets_deleted_partitions() -> None:
    cache = MetadataCache()
    new = roundtrip(build_update_metadata(8, 1, 9, 101, parts(), {"t": TOPIC_ID}, BROKERS), 8)
    assert asyncio.run(_apply(cache, new, 8)) == 0
    old = roundtrip(build_update_metadata(8, 2, 8, 102, parts(leader=2), {}, BROKERS), 8)
    assert asyncio.run(_apply(cache, old, 8)) == STALE_CONTROLLER_EPOCH
    assert cache.partitions["t"][0].leader == 1 and cache.controller_id == 1
    gone = [PartitionInfo(("t", 0), el.LeaderAndIsr(LEADER_DURING_DELETE, 4, (1, 2)), (1, 2, 3), ())]
    req = roundtrip(build_update_metadata(8, 1, 9, 101, gone, {"t": TOPIC_ID}, BROKERS), 8)
    assert asyncio.run(_apply(cache, req, 8)) == 0
    assert "t" not in cache.partitions and "t" not in cache.topic_ids
    assert "u" in cache.partitions


def test_wait_until_wakes_on_update() -> None:
    async def run() -> bool:
        cache = MetadataCache()
        req = build_update_metadata(8, 1, 9, 101, parts(), {}, BROKERS)
        asyncio.get_running_loop().call_later(0.05, cache.apply, req, 8)
        return await cache.wait_until(lambda c: "t" in c.partitions, 10.0)
    assert asyncio.run(run())


@pytest.mark.parametrize("version", range(0, 8))
def test_leader_and_isr_every_version(version: int) -> None:
    req = roundtrip(build_leader_and_isr(version, 1, 9, 103, parts(), {"t": TOPIC_ID}, BROKERS),
                    version)
    assert req.controller_id == 1 and req.controller_epoch == 9
    if version < 2:
        states = req.ungrouped_partition_states
    else:
        states = [s for t in req.topic_states for s in t.partition_states]
        if version >= 5:
            ids = {t.topic_name: t.topic_id for t in req.topic_states}
            assert ids["t"] == topic_id_from_str(TOPIC_ID)
    s = states[0]
    assert (s.leader, s.leader_epoch, list(s.isr)) == (1, 4, [1, 2])
    if version >= 1:
        assert list(s.replicas) == [1, 2, 3]
        assert s.is_new
    assert sorted((leader.broker_id, leader.port) for leader in req.live_leaders) == [(1, 9001), (2, 9002)]


@pytest.mark.parametrize("version", range(0, 5))
def test_stop_replica_every_version(version: int) -> None:
    req = roundtrip(build_stop_replica(version, 1, 9, 103, [(("t", 0), True), (("t", 1), True)]),
                    version)
    if version == 0:
        got = [(p.topic_name, p.partition_index) for p in req.ungrouped_partitions]
        assert req.delete_partitions
    elif version < 3:
        got = [(t.name, p) for t in req.topics for p in t.partition_indexes]
        assert req.delete_partitions
    else:
        got = [(t.topic_name, s.partition_index) for t in req.topic_states for s in t.partition_states]
        assert all(s.delete_partition for t in req.topic_states for s in t.partition_states)
    assert got == [("t", 0), ("t", 1)]



def test_cluster_metadata_never_names_a_leader_missing_from_the_brokers() -> None:
    from types import SimpleNamespace

    from pylog.broker.handlers.metadata import _cluster_metadata
    from pylog.protocol.messages import MetadataRequest

    cache = MetadataCache()
    # broker 1 leads t-0 in the partition state, but its registration is gone (only 2, 3 live)
    live = {b: v for b, v in BROKERS.items() if b != 1}
    req = roundtrip(build_update_metadata(8, 2, 9, 102, parts(), {"t": TOPIC_ID}, live), 8)
    assert asyncio.run(_apply(cache, req, 8)) == 0
    broker = SimpleNamespace(cluster=SimpleNamespace(metadata=cache), cluster_id="c", authorizer=None,
                             config={"auto.create.topics.enable": False})
    ctx = SimpleNamespace(broker=broker, api_version=12, listener="PLAINTEXT")
    resp = asyncio.run(_cluster_metadata(ctx, MetadataRequest(topics=None)))
    assert sorted(b.node_id for b in resp.brokers) == [2, 3]
    by_topic = {t.name: t.partitions[0] for t in resp.topics}
    assert (by_topic["t"].leader_id, by_topic["t"].error_code) == (-1, 5)  # LEADER_NOT_AVAILABLE
    assert by_topic["t"].replica_nodes == [1, 2, 3]  # replicas and ISR as the state has them
    assert (by_topic["u"].leader_id, by_topic["u"].error_code) == (2, 0)


def test_metadata_and_describe_cluster_wait_for_the_first_update() -> None:
    """A client asking a freshly registered broker before the controller's first
    UpdateMetadata reached it gets the cluster once it arrives, not an empty one (with no
    broker and no controller, librdkafka would wait minutes before it asked again)."""
    from types import SimpleNamespace

    from pylog.broker import handlers
    from pylog.broker.handlers.describe_cluster import handle_describe_cluster
    from pylog.broker.handlers.metadata import handle_metadata
    from pylog.protocol._schema.describe_cluster_request import DescribeClusterRequest
    from pylog.protocol._schema.metadata_request import MetadataRequest

    async def run() -> tuple[float, object, object]:
        cache = MetadataCache()
        broker = SimpleNamespace(cluster=SimpleNamespace(metadata=cache), cluster_id="c", authorizer=None,
                                 config={"auto.create.topics.enable": False})
        req = build_update_metadata(8, 1, 9, 101, parts(), {}, BROKERS)
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, cache.apply, req, 8)
        t0 = loop.time()
        md = await handle_metadata(handlers.RequestContext(broker, 3, 12, 1, "t", "p"),
                                   MetadataRequest(topics=None))
        took = loop.time() - t0
        dc = await handle_describe_cluster(handlers.RequestContext(broker, 60, 0, 2, "t", "p"),
                                           DescribeClusterRequest())
        return took, md, dc

    took, md, dc = asyncio.run(run())
    assert took >= 0.15
    assert [b.node_id for b in md.brokers] == [1, 2, 3] and md.controller_id == 1
    assert sorted(t.name for t in md.topics) == ["t", "u"]
    assert [b.broker_id for b in dc.brokers] == [1, 2, 3] and dc.controller_id == 1


# Brokers 1 and 2 have a PLAINTEXT and an SSL listener, broker 3 only PLAINTEXT.
TWO_LISTENERS = {
    b: (z.BrokerRegistration(b, (z.EndPoint("PLAINTEXT", f"h{b}", 9000 + b),)
                             + ((z.EndPoint("SSL", f"s{b}", 9100 + b, "SSL"),) if b != 3 else ())),
        100 + b) for b in (1, 2, 3)}


def test_metadata_answers_with_the_listener_the_client_came_in_on() -> None:
    from types import SimpleNamespace

    from pylog.broker.handlers.metadata import _cluster_metadata
    from pylog.protocol.messages import MetadataRequest

    cache = MetadataCache("SSL")
    req = roundtrip(build_update_metadata(8, 1, 9, 101, parts(leader=1) + [PartitionInfo(
        ("v", 0), el.LeaderAndIsr(3, 1, (3,), partition_epoch=1), (3,), (), is_new=True)],
        {}, TWO_LISTENERS), 8)
    ssl_ep = req.live_brokers[0].endpoints[1]
    assert (ssl_ep.listener, ssl_ep.security_protocol) == ("SSL", 1)  # Kafka's protocol id
    assert asyncio.run(_apply(cache, req, 8)) == 0
    # The cache's own addresses are the inter-broker listener's (SSL here).
    assert (cache.brokers[1].host, cache.brokers[1].port) == ("s1", 9101)
    broker = SimpleNamespace(cluster=SimpleNamespace(metadata=cache), cluster_id="c", authorizer=None,
                             config={"auto.create.topics.enable": False})
    by_listener = {}
    for listener in ("PLAINTEXT", "SSL"):
        ctx = SimpleNamespace(broker=broker, api_version=12, listener=listener)
        by_listener[listener] = asyncio.run(_cluster_metadata(ctx, MetadataRequest(topics=None)))
    plain, tls = by_listener["PLAINTEXT"], by_listener["SSL"]
    assert [(b.node_id, b.host, b.port) for b in plain.brokers] == [
        (1, "h1", 9001), (2, "h2", 9002), (3, "h3", 9003)]
    # Broker 3 has no SSL listener: left out, and its partition has no reachable leader.
    assert [(b.node_id, b.host, b.port) for b in tls.brokers] == [(1, "s1", 9101), (2, "s2", 9102)]
    v = {t.name: t.partitions[0] for t in tls.topics}["v"]
    assert (v.leader_id, v.error_code) == (-1, 72)  # LISTENER_NOT_FOUND
    assert {t.name: t.partitions[0] for t in plain.topics}["v"].leader_id == 3


def test_leader_and_isr_gives_the_inter_broker_listener_of_leaders() -> None:
    req = build_leader_and_isr(6, 1, 9, 103, parts(), {}, TWO_LISTENERS, "SSL")
    assert {ll.broker_id: (ll.host_name, ll.port) for ll in req.live_leaders} == {
        1: ("s1", 9101), 2: ("s2", 9102)}
    req = build_leader_and_isr(6, 1, 9, 103, parts(), {}, TWO_LISTENERS)
    assert {ll.broker_id: (ll.host_name, ll.port) for ll in req.live_leaders} == {
        1: ("h1", 9001), 2: ("h2", 9002)}
