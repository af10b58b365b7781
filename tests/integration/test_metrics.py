"""The metrics endpoint, the health checks and the request log of a real broker process.

A broker started with ``metrics.listener=http://127.0.0.1:0`` (the port it got is read from
its log) and ``--logger kafka.request.logger=DEBUG``; confluent-kafka produces, kafka-python
consumes and commits, raw wire requests are counted; every scrape is fetched with urllib and
parsed with prometheus_client's parser, so a malformed exposition fails the test. The
numbers checked are exact where the test knows them: records produced, requests sent,
records left unconsumed.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import uuid

import pytest
from _harness.scrape import get, metrics_port, scrape, value
from _harness.waiting import wait_until
from _harness.wire import BrokerConnection
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from pylog.protocol.messages import FetchRequest, MetadataRequest
from tests.integration.conftest import BrokerProcess, cluster_size

pytestmark = pytest.mark.integration

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


@pytest.fixture(scope="module")
def mbroker(tmp_path_factory):
    if cluster_size():
        pytest.skip("starts its own single broker (the cluster test is below)")
    data = tmp_path_factory.mktemp("metrics") / "data"
    data.mkdir()
    b = BrokerProcess(data, {"metrics.listener": "http://127.0.0.1:0",
                             "auto.create.topics.enable": "true",
                             "group.initial.rebalance.delay.ms": "0"})
    b.extra_args = ["--logger", "kafka.request.logger=DEBUG"]
    b.start()
    b.metrics_port = metrics_port(b)
    yield b
    assert b.stop() == 0, b.read_log()


def produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> int:
    """``n`` records with confluent-kafka (every delivery checked); returns value bytes."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failed = []
    for i in range(n):
        p.produce(topic, b"v%05d" % i, partition=i % partitions,
                  on_delivery=lambda err, _m: failed.append(err) if err else None)
    assert p.flush(30) == 0 and not failed, failed
    return n * 6


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def test_produce_counters_move_by_exactly_what_was_sent(mbroker):
    topic = f"m-{uuid.uuid4().hex[:8]}"
    create_topic(mbroker.bootstrap, topic, 2)
    before = scrape(mbroker.metrics_port)
    sent_bytes = produce(mbroker.bootstrap, topic, 500, partitions=2)
    after = scrape(mbroker.metrics_port)
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 500
    all_in = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(after, all_in) - value(before, all_in) == 500
    bytes_in = value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in > sent_bytes  # the batches' bytes: values plus headers
    assert value(after, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) == 0
    produces = value(after, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic)
    assert produces >= 2  # at least one request per partition
    # The logs hold what was counted in.
    size = sum(value(after, "kafka_log_log_size", topic=topic, partition=str(p)) for p in (0, 1))
    assert size == bytes_in
    ends = [value(after, "kafka_log_log_logendoffset", topic=topic, partition=str(p)) for p in (0, 1)]
    assert ends == [250, 250]
    assert value(after, "kafka_log_log_logstartoffset", topic=topic, partition="0") == 0
    # Every Produce request is counted once per API version, and its line is in the request log.
    produce_requests = sum(v for (name, labels), v in after.items()
                           if name == "kafka_network_requestmetrics_requests_total"
                           and dict(labels)["request"] == "Produce")
    logged = len(re.findall(r"kafka\.request\.logger: Completed request: Produce v\d+ ",
                            mbroker.read_log()))
    assert produce_requests == logged > 0
    hist = sum(v for (name, labels), v in after.items()
               if name == "kafka_network_requestmetrics_totaltimems_count"
               and dict(labels) == {"request": "Produce"})
    assert hist == produce_requests
    assert value(after, "kafka_server_replicamanager_partitioncount") >= 2
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    for ratio in ("kafka_network_socketserver_networkprocessoravgidlepercent",
                  "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"):
        assert 0.0 <= value(after, ratio) <= 1.0
    used = value(after, "kafka_network_socketserver_memorypoolused")
    available = value(after, "kafka_network_socketserver_memorypoolavailable")
    assert used >= 0 and used + available == 134217728  # queued.max.request.bytes


def test_requests_total_counts_each_request_by_api_and_version(mbroker):
    name = "kafka_network_requestmetrics_requests_total"
    before = scrape(mbroker.metrics_port)
    with BrokerConnection(mbroker.host, mbroker.port, timeout=10, client_id="metrics-test") as conn:
        for _ in range(3):
            conn.request(MetadataRequest(topics=None), version=9)
    after = scrape(mbroker.metrics_port)
    key = (name, (("request", "Metadata"), ("version", "9")))
    assert after[key] - before.get(key, 0) == 3
    api_versions = [k for k in after if k[0] == name and dict(k[1])["request"] == "ApiVersions"]
    assert sum(after[k] - before.get(k, 0) for k in api_versions) >= 1  # the negotiation
    # The request log line of one of them, with every field.
    line = wait_until(lambda: re.search(
        r"Completed request: Metadata v9 correlation id \d+ client id 'metrics-test' from "
        r"127\.0\.0\.1:\d+ \(PLAINTEXT\): request \d+ bytes, response \d+ bytes; totalTime "
        r"[\d.]+ ms, requestQueueTime [\d.]+, localTime [\d.]+, remoteTime [\d.]+, "
        r"throttleTime 0\.000, sendTime [\d.]+", mbroker.read_log()), 5, "the request log line")
    assert line


def test_fetch_counters_and_consumer_lag_of_a_committed_group(mbroker):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic = f"lag-{uuid.uuid4().hex[:8]}"
    create_topic(mbroker.bootstrap, topic, 1)
    produce(mbroker.bootstrap, topic, 100)
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(bootstrap_servers=mbroker.bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    got = []
    for msg in consumer:
        got.append(msg)
        if len(got) == 100:
            break
    assert len(got) == 100
    consumer.commit({tp: OffsetAndMetadata(60, "", -1)})  # 40 records left unconsumed
    consumer.close()
    samples = scrape(mbroker.metrics_port)
    labels = {"consumergroup": group, "topic": topic, "partition": "0"}
    assert value(samples, "kafka_consumergroup_current_offset", **labels) == 60
    assert value(samples, "kafka_consumergroup_lag", **labels) == 40
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == 40
    assert value(samples, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=topic) >= 1
    bytes_out = value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
    assert bytes_out >= value(samples, "kafka_log_log_size", topic=topic, partition="0")
    # Another produce moves the lag by exactly its records.
    produce(mbroker.bootstrap, topic, 7)
    samples = scrape(mbroker.metrics_port)
    assert value(samples, "kafka_consumergroup_lag", **labels) == 47


def test_failed_fetch_is_counted(mbroker):
    topic = f"oor-{uuid.uuid4().hex[:8]}"
    create_topic(mbroker.bootstrap, topic, 1)
    produce(mbroker.bootstrap, topic, 3)
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[
                           FetchRequest.FetchTopic(topic=topic, partitions=[
                               FetchRequest.FetchPartition(partition=0, fetch_offset=999,
                                                           partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[])
    with BrokerConnection(mbroker.host, mbroker.port, timeout=10) as conn:
        resp = conn.request(req)
    assert resp.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
    samples = scrape(mbroker.metrics_port)
    assert value(samples, "kafka_server_brokertopicmetrics_failedfetchrequests_total", topic=topic) == 1
    assert value(samples, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=topic) == 1


def test_an_incremental_fetch_counts_every_partition_of_its_session(mbroker):
    """Kafka counts a fetch request per partition read; an incremental fetch session reads
    its idle partitions too though its answer leaves them out, so they count as well."""
    topic = f"sess-{uuid.uuid4().hex[:8]}"
    create_topic(mbroker.bootstrap, topic, 2)  # empty: both partitions stay idle
    name = "kafka_server_brokertopicmetrics_totalfetchrequests_total"

    def fetch(conn, session_id, epoch):
        req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, session_id=session_id, session_epoch=epoch,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                               FetchRequest.FetchPartition(partition=p, fetch_offset=0,
                                                           partition_max_bytes=1 << 20)
                               for p in (0, 1)])] if epoch == 0 else [],
                           forgotten_topics_data=[])
        return conn.request(req)

    with BrokerConnection(mbroker.host, mbroker.port, timeout=10) as conn:
        full = fetch(conn, 0, 0)
        assert full.error_code == 0 and full.session_id != 0
        assert value(scrape(mbroker.metrics_port), name, topic=topic) == 2
        incremental = fetch(conn, full.session_id, 1)
        # Nothing changed: the answer names no partition, yet both were read.
        assert incremental.error_code == 0 and incremental.responses == []
        assert value(scrape(mbroker.metrics_port), name, topic=topic) == 4


def test_rolled_segments_flushes_are_timed(mbroker):
    """A roll schedules a flush of the rolled segment (background thread): the flush-time
    histogram counts it, and the segment count of the log shows the rolls."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"roll-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": mbroker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})])[topic].result(30)
    name = "kafka_log_logflushstats_logflushrateandtimems_count"
    before = value(scrape(mbroker.metrics_port), name)
    p = Producer({"bootstrap.servers": mbroker.bootstrap, "linger.ms": 0, "batch.size": 400})
    for _ in range(40):
        p.produce(topic, b"x" * 300)
        p.flush(10)  # one batch per request: a roll every few
    samples = wait_until(lambda: (s := scrape(mbroker.metrics_port)) and s[(name, ())] > before and s,
                         10, "a timed flush")
    segments = value(samples, "kafka_log_log_numlogsegments", topic=topic, partition="0")
    assert segments >= 5
    assert value(samples, "kafka_log_logflushstats_logflushrateandtimems_sum") > 0


def test_cleaner_rounds_are_reported(mbroker):
    """A compacted topic whose segments roll: the cleaner (woken by the rolls) cleans, and
    the cleaner metrics show the round and what it kept."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"compact-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": mbroker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(30)
    rounds = "kafka_log_logcleaner_rounds_total"
    before = value(scrape(mbroker.metrics_port), rounds)
    p = Producer({"bootstrap.servers": mbroker.bootstrap, "linger.ms": 0})
    for i in range(300):
        p.produce(topic, b"v" * 100, key=b"k%d" % (i % 3))
        if i % 10 == 9:
            p.flush(10)
    p.flush(10)
    samples = wait_until(lambda: (s := scrape(mbroker.metrics_port)) and s[(rounds, ())] > before
                         and s, 60, "a cleaning round")
    assert 0 < value(samples, "kafka_log_logcleaner_cleaner_recopy_percent") < 100
    assert value(samples, "kafka_log_logcleaner_max_clean_time_secs") > 0
    assert value(samples, "kafka_log_logcleanermanager_time_since_last_run_ms") > 0
    assert value(samples, "kafka_log_logcleanermanager_uncleanable_partitions_count") == 0
    assert value(samples, "kafka_log_logcleaner_dead_thread_count") == 0


def test_every_metric_served_is_documented(mbroker):
    docs = DOCS.read_text()
    status, text, _ = get(mbroker.metrics_port, "/metrics")
    families = {f.name for f in text_string_to_metric_families(text)}
    # prometheus_client strips _total from counter families; the docs use the full name.
    missing = [f for f in families if f not in docs and f + "_total" not in docs]
    assert not missing, missing
    assert {"kafka_network_requestmetrics_requests", "kafka_consumergroup_lag",
            "kafka_server_socket_server_metrics_connection_count"} <= families


def test_health_ready_and_other_paths(mbroker):
    port = mbroker.metrics_port
    assert get(port, "/healthz")[:2] == (200, "ok: serving\n")
    assert get(port, "/readyz")[:2] == (200, "ready: logs loaded\n")
    status, body, _ = get(port, "/nothing")
    assert status == 404 and "/metrics" in body
    assert get(port, "/metrics", method="POST")[0] == 405
    status, body, headers = get(port, "/metrics", method="HEAD")
    assert status == 200 and body == "" and int(headers["Content-Length"]) > 1000


def test_connection_count_per_listener(mbroker):
    def count() -> float:
        return value(scrape(mbroker.metrics_port),
                     "kafka_server_socket_server_metrics_connection_count",
                     listener="PLAINTEXT", networkProcessor="0")

    base = count()
    with BrokerConnection(mbroker.host, mbroker.port, timeout=10), \
            BrokerConnection(mbroker.host, mbroker.port, timeout=10):
        assert count() == base + 2
    wait_until(lambda: count() == base, 5, "the connections closed")


def test_request_log_is_off_at_info_and_under_debug_root(new_broker):
    """Without --logger the request log writes nothing, even with --log-level DEBUG (Kafka's
    log4j keeps kafka.request.logger at WARN)."""
    for level in ("INFO", "DEBUG"):
        b = new_broker({"metrics.listener": "http://127.0.0.1:0"})
        b.extra_args = ["--log-level", level]
        b.start()
        port = metrics_port(b)
        with BrokerConnection(b.host, b.port, timeout=10) as conn:
            conn.request(MetadataRequest(topics=None), version=9)
        samples = scrape(port)
        assert value(samples, "kafka_network_requestmetrics_requests_total",
                     request="Metadata", version="9") == 1
        assert b.stop() == 0
        assert "kafka.request.logger" not in b.read_log(), level


@pytest.mark.parametrize("bad, says", [
    ("127.0.0.1:9404", "expected http://host:port"),
    ("https://127.0.0.1:9404", "expected http://host:port"),
    ("http://127.0.0.1:70000", "port 70000 out of range"),
    ("http://127.0.0.1", "expected http://host:port"),
])
def test_bad_metrics_listener_is_a_clear_config_error(tmp_path, bad, says):
    proc = subprocess.run([sys.executable, "-m", "pylog", "broker", "--override",
                           f"log.dirs={tmp_path}", "--override", f"metrics.listener={bad}"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "invalid configuration: metrics.listener:" in proc.stderr
    assert says in proc.stderr


def test_broker_help_mentions_the_endpoint():
    out = subprocess.run([sys.executable, "-m", "pylog", "broker", "--help"],
                         capture_output=True, text=True, timeout=60).stdout
    assert "metrics.listener" in out and "/healthz" in out and "kafka.request.logger" in out


def test_a_taken_metrics_port_fails_the_start_naming_the_key(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "pylog", "broker", "--override",
                               f"log.dirs={tmp_path}", "--override",
                               "listeners=PLAINTEXT://127.0.0.1:0", "--override",
                               f"metrics.listener=http://127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} (metrics.listener)" in proc.stderr
