"""pylog.metrics.http: what /healthz and /readyz answer in each state of a broker, and the
request log's helpers (no network: the states are set on a stand-in broker)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from pylog.config import BrokerConfig, ConfigError, parse_metrics_listener
from pylog.metrics import request_log
from pylog.metrics.http import health, readiness


def _broker(started: bool = True, stopping: bool = False, cluster: object = None) -> object:
    return SimpleNamespace(started=started, stopping=stopping, cluster=cluster, node_id=3)


def _cluster(epoch: int, connected: bool) -> object:
    return SimpleNamespace(broker_epoch=epoch, store=SimpleNamespace(connected=connected))


@pytest.mark.parametrize("broker, code, says", [
    (_broker(started=False), 503, "starting"),
    (_broker(stopping=True), 503, "stopping"),
    (_broker(), 200, "ok: serving"),
])
def test_healthz(broker: object, code: int, says: str) -> None:
    got_code, text = health(broker)
    assert got_code == code and says in text


@pytest.mark.parametrize("broker, code, says", [
    (_broker(started=False), 503, "starting"),
    (_broker(stopping=True), 503, "stopping"),
    (_broker(), 200, "ready: logs loaded"),
    (_broker(cluster=_cluster(-1, True)), 503, "not registered in ZooKeeper"),
    (_broker(cluster=_cluster(7, False)), 503, "ZooKeeper session is disconnected"),
    (_broker(cluster=_cluster(7, True)), 200, "registered as broker 3"),
])
def test_readyz(broker: object, code: int, says: str) -> None:
    got_code, text = readiness(broker)
    assert got_code == code and says in text


@pytest.mark.parametrize("value, expected", [
    ("http://127.0.0.1:9404", ("127.0.0.1", 9404)),
    ("http://0.0.0.0:0", ("0.0.0.0", 0)),
    ("http://[::1]:9404/", ("::1", 9404)),
    ("http://metrics.example:80", ("metrics.example", 80)),
])
def test_metrics_listener_values(value: str, expected: tuple[str, int]) -> None:
    assert parse_metrics_listener("metrics.listener", value) == expected
    assert BrokerConfig({"metrics.listener": value})["metrics.listener"] == value


@pytest.mark.parametrize("value, says", [
    ("127.0.0.1:9404", "expected http://host:port"),
    ("https://127.0.0.1:9404", "expected http://host:port"),
    ("http://127.0.0.1", "expected http://host:port"),
    ("http://127.0.0.1:9404/metrics", "expected http://host:port"),
    ("http://:9404", "expected http://host:port"),
    ("http://127.0.0.1:65536", "out of range"),
])
def test_bad_metrics_listener_values(value: str, says: str) -> None:
    with pytest.raises(ConfigError, match="metrics.listener") as info:
        BrokerConfig({"metrics.listener": value})
    assert says in str(info.value)


def test_metrics_listener_is_off_by_default() -> None:
    assert BrokerConfig()["metrics.listener"] is None


def test_response_size_counts_bytes_and_regions() -> None:
    region = SimpleNamespace(size=1000)
    assert request_log.response_size([b"abcd", memoryview(b"xy"), region]) == 1006
    assert request_log.response_size(None) == 0


def test_request_log_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="kafka.request.logger"):
        request_log.log_request("Fetch", 12, 5, "c1", "127.0.0.1:5000", "PLAINTEXT", 90, 1090,
                                0.001, 0.5, 0.45, 0.002)
    (rec,) = caplog.records
    assert rec.name == "kafka.request.logger" and rec.levelno == logging.DEBUG
    assert rec.getMessage() == (
        "Completed request: Fetch v12 correlation id 5 client id 'c1' from 127.0.0.1:5000 "
        "(PLAINTEXT): request 90 bytes, response 1090 bytes; totalTime 503.000 ms, "
        "requestQueueTime 1.000, localTime 50.000, remoteTime 450.000, throttleTime 0.000, "
        "sendTime 2.000")
