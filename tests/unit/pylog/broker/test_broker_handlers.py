"""Request handlers through the dispatcher, in process (no sockets), with a manual clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers, io_threads
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.protocol import apis
from pylog.protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)

T0 = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "2"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.executor.shutdown()


def call(broker: Broker, api_key: int, version: int, body: Any, timeout: float = 10) -> Any:
    ctx = handlers.RequestContext(broker, api_key, version, 1, "test", "127.0.0.1:1")

    async def go() -> Any:
        return await asyncio.wait_for(handlers.dispatch(ctx, body), timeout)

    return asyncio.run(go())


def produce_body(topic: str, records: bytes, partition: int = 0, acks: int = 1) -> Any:
    R = ProduceRequest
    return R(transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=partition, records=records)])])


def batch(n: int = 2, ts: int = T0) -> bytes:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(b"v%d" % i, timestamp_ms=ts)
    return b.build()


def fetch_body(topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 1) -> Any:
    R = FetchRequest
    return R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
             isolation_level=0, session_id=0, session_epoch=-1,
             topics=[R.FetchTopic(topic=topic, partitions=[R.FetchPartition(
                 partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")


def test_handler_versions_match_what_the_protocol_layer_advertises() -> None:
    """One version table: every advertised API has a handler, every handler's VERSIONS is
    the advertised range (produce.py and fetch.py included, which keep literals)."""
    # Cluster mode adds the controller's APIs (CLUSTER_ADVERTISED; a single node refuses them).
    table = {int(k): v for k, v in {**apis.ADVERTISED, **apis.CLUSTER_ADVERTISED}.items()}
    assert set(handlers.HANDLERS) == set(table)
    assert handlers.SUPPORTED_VERSIONS == {int(k): v for k, v in apis.ADVERTISED.items()}
    for api_key, (_handler, module) in handlers.HANDLERS.items():
        assert module.VERSIONS == table[api_key], module.__name__
        name = module.__name__.rsplit(".", 1)[1]
        assert name == apis.ApiKey(api_key).name.lower()
    # Produce 0-2: advertised, refused on use (the connection layer's SUPPORTED table).
    assert {k: v for k, v in apis.SUPPORTED.items() if k != apis.ApiKey.PRODUCE} == {
        k: v for k, v in handlers.SUPPORTED_VERSIONS.items() if k != apis.ApiKey.PRODUCE}


def test_api_versions_lists_every_handler(broker) -> None:
    resp = call(broker, 18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == handlers.SUPPORTED_VERSIONS


def test_produce_auto_creates_and_fetch_returns_a_file_region(broker) -> None:
    resp = call(broker, 0, 9, produce_body("auto", batch(3)))
    p = resp.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset, p.log_start_offset, p.log_append_time_ms) == (0, 0, 0, -1)
    assert len(broker.log_manager.topics["auto"].partitions) == 2
    resp = call(broker, 1, 12, fetch_body("auto", 0))
    pd = resp.responses[0].partitions[0]
    assert pd.high_watermark == pd.last_stable_offset == 3
    # A small answer in the page cache is copied (io_threads.read_cached): one send.
    expected = [b"v0", b"v1", b"v2"]
    plog = broker.log_manager.topics["auto"].partitions[0].log
    if io_threads.read_cached(plog.read(0, 1 << 20)) is not None:
        assert type(pd.records) is bytearray
        assert [r.value for b in logcore.iter_batches(bytes(pd.records)) for r in b] == expected
    else:
        assert isinstance(pd.records, logcore.FileRegion)
    # Over io_threads.COPY_MAX the answer is a region, sent with sendfile.
    big = logcore.BatchBuilder()
    big.append(b"x" * io_threads.COPY_MAX, timestamp_ms=T0)
    resp = call(broker, 0, 9, produce_body("auto", big.build()))
    assert resp.responses[0].partition_responses[0].error_code == 0
    resp = call(broker, 1, 12, fetch_body("auto", 3))
    pd = resp.responses[0].partitions[0]
    assert isinstance(pd.records, logcore.FileRegion) and pd.records.size > io_threads.COPY_MAX
    values = [r.value for b in logcore.iter_batches(pd.records.read()) for r in b]
    assert values == [b"x" * io_threads.COPY_MAX]


def test_produce_v2_is_advertised_but_refused(broker) -> None:
    resp = call(broker, 0, 2, produce_body("old", batch()))
    assert resp.responses[0].partition_responses[0].error_code == errors.UnsupportedVersionError.code
    assert "old" not in broker.log_manager.topics


def test_acks_zero_gives_no_response(broker) -> None:
    assert call(broker, 0, 9, produce_body("quiet", batch(), acks=0)) is None
    assert broker.log_manager.topics["quiet"].partitions[0].log.log_end_offset == 2


def test_auto_creation_disabled(tmp_path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path / "d"), "auto.create.topics.enable": "false"})
    b = Broker(config, clock=ManualClock(), allow_pure_python=True)
    b.log_manager.startup()
    try:
        resp = call(b, 0, 9, produce_body("none", batch()))
        assert resp.responses[0].partition_responses[0].error_code == errors.UnknownTopicOrPartitionError.code
        M = MetadataRequest
        resp = call(b, 3, 12, M(topics=[M.MetadataRequestTopic(name="none")], allow_auto_topic_creation=True))
        assert resp.topics[0].error_code == errors.UnknownTopicOrPartitionError.code
    finally:
        b.log_manager.shutdown()
        b.executor.shutdown()


def test_invalid_timestamp_uses_the_injected_clock(broker) -> None:
    C = CreateTopicsRequest
    call(broker, 19, 7, C(topics=[C.CreatableTopic(name="ts", num_partitions=1, replication_factor=1,
                                                   configs=[C.CreatableTopicConfig(
                                                       name="message.timestamp.after.max.ms", value="1000")])]))
    ok = call(broker, 0, 9, produce_body("ts", batch(2, ts=T0 + 500)))
    assert ok.responses[0].partition_responses[0].error_code == 0
    bad = call(broker, 0, 9, produce_body("ts", batch(2, ts=T0 + 5000)))
    p = bad.responses[0].partition_responses[0]
    assert p.error_code == errors.InvalidTimestampError.code
    assert [e.batch_index for e in p.record_errors] == [0, 1]
    broker.clock.advance(10_000)
    ok = call(broker, 0, 9, produce_body("ts", batch(2, ts=T0 + 5000)))
    assert ok.responses[0].partition_responses[0].error_code == 0


def test_invalid_timestamp_of_a_record_behind_the_batch_base(broker) -> None:
    C = CreateTopicsRequest
    call(broker, 19, 7, C(topics=[C.CreatableTopic(name="neg", num_partitions=1, replication_factor=1,
                                                   configs=[C.CreatableTopicConfig(
                                                       name="message.timestamp.before.max.ms", value="1000")])]))
    b = logcore.BatchBuilder()
    for i, ts in enumerate([T0, T0 - 1000, T0 - 1001, T0]):
        b.append(b"v%d" % i, timestamp_ms=ts)
    bad = call(broker, 0, 9, produce_body("neg", b.build()))
    p = bad.responses[0].partition_responses[0]
    assert p.error_code == errors.InvalidTimestampError.code
    assert [e.batch_index for e in p.record_errors] == [2]
    assert f"[{T0 - 1000}, {T0 + 3_600_000}]" in p.record_errors[0].batch_index_error_message
    assert broker.log_manager.topics["neg"].partitions[0].log.log_end_offset == 0


def test_long_poll_woken_by_append(broker) -> None:
    call(broker, 0, 9, produce_body("lp", batch(1)))

    async def scenario() -> tuple[Any, bool]:
        ctx = handlers.RequestContext(broker, 1, 12, 1, "t", "peer")
        fetch = asyncio.ensure_future(handlers.dispatch(ctx, fetch_body("lp", 1, max_wait_ms=60_000)))
        await asyncio.sleep(0.05)
        waiting = not fetch.done() and len(broker.waiters) == 1
        pctx = handlers.RequestContext(broker, 0, 9, 2, "t", "peer")
        await handlers.dispatch(pctx, produce_body("lp", batch(2)))
        resp = await asyncio.wait_for(fetch, 5)
        return resp, waiting

    resp, waiting = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert waiting
    pd = resp.responses[0].partitions[0]
    assert pd.high_watermark == 3 and len(pd.records) > 0
    assert len(broker.waiters) == 0


def test_list_offsets_and_leader_epoch(broker) -> None:
    for ts in (T0 + 10, T0 + 30, T0 + 20):
        call(broker, 0, 9, produce_body("lo", batch(1, ts=ts)))
    L = ListOffsetsRequest

    def lookup(ts: int, version: int = 7) -> Any:
        resp = call(broker, 2, version, L(replica_id=-1, topics=[L.ListOffsetsTopic(
            name="lo", partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=ts)])]))
        return resp.topics[0].partitions[0]

    assert (lookup(-2).offset, lookup(-1).offset) == (0, 3)
    assert (lookup(-3).offset, lookup(-3).timestamp) == (1, T0 + 30)
    assert lookup(-3, version=6).error_code == errors.UnsupportedVersionError.code
    assert (lookup(T0 + 15).offset, lookup(T0 + 15).timestamp) == (1, T0 + 30)
    assert lookup(T0 + 99).offset == -1
    OE = OffsetForLeaderEpochRequest
    resp = call(broker, 23, 4, OE(topics=[OE.OffsetForLeaderTopic(topic="lo", partitions=[
        OE.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0),
        OE.OffsetForLeaderPartition(partition=1, current_leader_epoch=5, leader_epoch=0),
        OE.OffsetForLeaderPartition(partition=9, current_leader_epoch=-1, leader_epoch=0)])]))
    parts = resp.topics[0].partitions
    assert (parts[0].error_code, parts[0].leader_epoch, parts[0].end_offset) == (0, 0, 3)
    assert parts[1].error_code == errors.UnknownLeaderEpochError.code
    assert parts[2].error_code == errors.UnknownTopicOrPartitionError.code


def test_delete_topic_by_id_and_describe_cluster(broker) -> None:
    topic = broker.log_manager.create_topic("del", 1)
    D = DeleteTopicsRequest
    resp = call(broker, 20, 6, D(topics=[D.DeleteTopicState(name=None, topic_id=topic.topic_id)], timeout_ms=100))
    assert (resp.responses[0].error_code, resp.responses[0].name) == (0, "del")
    resp = call(broker, 20, 5, D(topic_names=["del"], timeout_ms=100))
    assert resp.responses[0].error_code == errors.UnknownTopicOrPartitionError.code
    resp = call(broker, 60, 1, DescribeClusterRequest(endpoint_type=2))
    assert resp.error_code == errors.UnsupportedEndpointTypeError.code
    resp = call(broker, 60, 1, DescribeClusterRequest())
    assert resp.cluster_id == broker.cluster_id and resp.brokers[0].broker_id == 0


def test_dispatcher_maps_unexpected_exceptions(broker, monkeypatch, caplog) -> None:
    from pylog.broker.handlers import metadata

    async def boom(ctx: Any, request: Any) -> Any:
        raise logcore.LogDirError(5, "disk on fire")

    monkeypatch.setitem(handlers.HANDLERS, 3, (boom, metadata))
    M = MetadataRequest
    resp = call(broker, 3, 12, M(topics=[M.MetadataRequestTopic(name="x")]))
    assert resp.topics[0].error_code == errors.KafkaStorageError.code

    async def bug(ctx: Any, request: Any) -> Any:
        raise KeyError("oops")

    monkeypatch.setitem(handlers.HANDLERS, 3, (bug, metadata))
    resp = call(broker, 3, 12, M(topics=[M.MetadataRequestTopic(name="x")]))
    assert resp.topics[0].error_code == errors.UnknownServerError.code
    assert any("bug:" in r.getMessage() for r in caplog.records)


def test_newer_leader_epoch_is_unknown(broker) -> None:
    call(broker, 0, 9, produce_body("ep", batch(1)))
    body = fetch_body("ep", 0)
    body.topics[0].partitions[0].current_leader_epoch = 3
    resp = call(broker, 1, 12, body)
    assert resp.responses[0].partitions[0].error_code == errors.UnknownLeaderEpochError.code
    body.topics[0].partitions[0].current_leader_epoch = 0
    assert call(broker, 1, 12, body).responses[0].partitions[0].error_code == 0
    L = ListOffsetsRequest
    resp = call(broker, 2, 7, L(replica_id=-1, topics=[L.ListOffsetsTopic(name="ep", partitions=[
        L.ListOffsetsPartition(partition_index=0, timestamp=-1, current_leader_epoch=1)])]))
    assert resp.topics[0].partitions[0].error_code == errors.UnknownLeaderEpochError.code


def test_metadata_flags_only_the_registered_internal_topics(broker) -> None:
    from pylog.log.internal_topics import INTERNAL_TOPICS, is_internal

    # Kafka's Topic.INTERNAL_TOPICS (4.x adds the share coordinator's state topic, KIP-932).
    assert set(INTERNAL_TOPICS) == {"__consumer_offsets", "__transaction_state", "__share_group_state"}
    assert not is_internal("__my_topic") and not is_internal("_consumer_offsets")
    for name in ("__consumer_offsets", "__my_topic", "plain"):
        broker.log_manager.create_topic(name, 1)
    resp = call(broker, 3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    assert {t.name: t.is_internal for t in resp.topics} == {
        "__consumer_offsets": True, "__my_topic": False, "plain": False}


def test_compaction_configs_applied_and_deprecated_ones_warned(broker, caplog) -> None:
    from pylog.protocol.messages import AlterConfigsRequest, IncrementalAlterConfigsRequest

    C = CreateTopicsRequest

    def create(name: str, configs: dict[str, str], validate_only: bool = False) -> Any:
        body = C(topics=[C.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[],
                                          configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
                 timeout_ms=1000, validate_only=validate_only)
        (res,) = call(broker, 19, 7, body).topics
        return res

    res = create("c", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"}, True)
    assert res.error_code == 0 and "c" not in broker.log_manager.topics
    assert create("c", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"}).error_code == 0
    cfg = broker.log_manager.topics["c"].partitions[0].log.config
    assert cfg.compact and cfg.min_cleanable_dirty_ratio == 0.1
    res = create("bad", {"cleanup.policy": "compact", "min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert res.error_code == errors.InvalidConfigError.code and "min_compaction_lag_ms" in res.error_message
    assert create("t", {"message.format.version": "0.10.0.0"}).error_code == 0
    assert "topic t (config from 127.0.0.1:1): message.format.version is deprecated and ignored" in caplog.text

    Inc = IncrementalAlterConfigsRequest
    plog = broker.log_manager.topics["t"].partitions[0].log
    (res,) = call(broker, 44, 1, Inc(resources=[Inc.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
        Inc.AlterableConfig(name="cleanup.policy", config_operation=2, value="compact")])], validate_only=False)).responses
    assert res.error_code == 0 and plog.config.cleanup_policy == "compact,delete"  # APPEND to delete
    A = AlterConfigsRequest
    (res,) = call(broker, 33, 2, A(resources=[A.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
        A.AlterableConfig(name="cleanup.policy", value="compact")])], validate_only=True)).responses
    assert res.error_code == 0 and plog.config.cleanup_policy == "compact,delete"
    (res,) = call(broker, 33, 2, A(resources=[A.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
        A.AlterableConfig(name="cleanup.policy", value="compact")])], validate_only=False)).responses
    assert res.error_code == 0 and plog.config.cleanup_policy == "compact"
    assert broker.log_manager.topics["t"].overrides == {"cleanup.policy": ["compact"]}


def test_create_topics_refuses_more_than_ten_thousand_partitions(broker) -> None:
    """Found by the wire fuzzer (tests/fuzz): a CreateTopics whose num_partitions became
    2**31-1 made the broker create partition directories until it ran out of files. Kafka's
    controller refuses a request of more than 10,000 partitions in all with
    POLICY_VIOLATION; so does pylog, before creating anything."""
    C = CreateTopicsRequest

    def create(*topics: tuple[str, int]) -> Any:
        return call(broker, 19, 7, C(topics=[C.CreatableTopic(name=n, num_partitions=p, replication_factor=1)
                                             for n, p in topics]))

    for topics in ([("huge", 2**31 - 1)], [("a", 5000), ("b", 5001)], [("c", 9999), ("d", -1)]):
        resp = create(*topics)
        assert [(t.name, t.error_code, t.error_message) for t in resp.topics] == [
            (n, errors.PolicyViolationError.code, "Excessively large number of partitions per request.")
            for n, _ in topics]
    assert not broker.log_manager.topics
    assert create(("ok", 3)).topics[0].error_code == 0


def test_create_partitions_refuses_more_than_ten_thousand_new_partitions(broker) -> None:
    from pylog.protocol.messages import CreatePartitionsRequest as P

    C = CreateTopicsRequest
    call(broker, 19, 7, C(topics=[C.CreatableTopic(name="grow", num_partitions=2, replication_factor=1)]))

    def grow(count: int) -> Any:
        return call(broker, 37, 3, P(topics=[P.CreatePartitionsTopic(name="grow", count=count, assignments=None)],
                                     timeout_ms=1000, validate_only=False)).results[0]

    res = grow(2**31 - 1)
    assert (res.error_code, res.error_message) == (errors.PolicyViolationError.code,
                                                   "Excessively large number of partitions per request.")
    assert len(broker.log_manager.topics["grow"].partitions) == 2
    assert grow(10_003).error_code == errors.PolicyViolationError.code  # 10,001 new
    assert grow(4).error_code == 0
    assert len(broker.log_manager.topics["grow"].partitions) == 4
