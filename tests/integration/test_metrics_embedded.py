"""Metrics in embedded mode: ``pylog.client.embedded_metrics(log_dir)`` returns the
in-process broker's Prometheus text, with the counters of what its clients did."""

from __future__ import annotations

import pathlib
import time

import pytest
from _harness.scrape import parse, value

from pylog.client import ConfigError, Consumer, Producer, embedded_metrics

pytestmark = pytest.mark.integration


def test_embedded_metrics_count_what_the_clients_did(tmp_path: pathlib.Path) -> None:
    data = str(tmp_path / "data")
    cfg = {"log.dir": data}
    with Producer(cfg) as p:
        for i in range(25):
            p.send("emb", b"event %d" % i)
        p.flush(30)
        group = {**cfg, "group.id": "emb-g", "auto.offset.reset": "earliest",
                 "enable.auto.commit": False}
        with Consumer(group) as c:
            c.subscribe(["emb"])
            got: list[object] = []
            deadline = time.monotonic() + 20
            while len(got) < 25 and time.monotonic() < deadline:
                got.extend(c.poll(0.5))
            assert len(got) == 25
            c.commit({("emb", 0): 20})
        samples = parse(embedded_metrics(data))
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic="emb") == 25
    assert value(samples, "kafka_log_log_logendoffset", topic="emb", partition="0") == 25
    assert value(samples, "kafka_consumergroup_lag", consumergroup="emb-g", topic="emb",
                 partition="0") == 5
    produces = sum(v for (name, labels), v in samples.items()
                   if name == "kafka_network_requestmetrics_requests_total"
                   and dict(labels)["request"] == "Produce")
    assert produces >= 1
    assert value(samples, "kafka_network_requestmetrics_responsesendtimems_sum",
                 request="Produce") == 0  # no socket: nothing to send
    # Closed with its last client: nothing to report on any more.
    with pytest.raises(ConfigError, match="no embedded broker is open"):
        embedded_metrics(data)


def test_metrics_listener_is_refused_in_embedded_mode(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match="metrics.listener does not apply in embedded mode"):
        Producer({"log.dir": str(tmp_path / "data"),
                  "broker.config": {"metrics.listener": "http://127.0.0.1:0"}})
