"""The advertised endpoints Metadata, FindCoordinator and DescribeCluster answer with:
computed once and reused while the config and the bound listeners are the same."""

from __future__ import annotations

from pylog._clock import ManualClock
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.config.broker import parse_listeners


def _broker(tmp_path, **extra: str) -> Broker:
    props = {"log.dirs": str(tmp_path / "data"),
             "listeners": "PLAINTEXT://0.0.0.0:0,EXTERNAL://127.0.0.1:0",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"}
    props.update(extra)
    return Broker(BrokerConfig(props), clock=ManualClock(time_ms=0), allow_pure_python=True)


def test_bound_ports_replace_port_zero_as_listeners_are_bound(tmp_path) -> None:
    b = _broker(tmp_path)
    assert b.advertised_endpoints() == [("PLAINTEXT", "127.0.0.1", 0), ("EXTERNAL", "127.0.0.1", 0)]
    b.bound.append(("0.0.0.0", 41001))
    # a wildcard host is advertised as the loopback name
    assert b.advertised_endpoints() == [("PLAINTEXT", "127.0.0.1", 41001), ("EXTERNAL", "127.0.0.1", 0)]
    b.bound.append(("127.0.0.1", 41002))
    assert b.advertised("EXTERNAL") == ("127.0.0.1", 41002)
    assert b.advertised("PLAINTEXT") == ("127.0.0.1", 41001)
    assert b.advertised("NOPE") == ("", -1)


def test_the_answer_cannot_be_changed_through_a_returned_list(tmp_path) -> None:
    b = _broker(tmp_path)
    b.bound.extend([("127.0.0.1", 41001), ("127.0.0.1", 41002)])
    first = b.advertised_endpoints()
    first.clear()
    assert b.advertised_endpoints() == [("PLAINTEXT", "127.0.0.1", 41001), ("EXTERNAL", "127.0.0.1", 41002)]


def test_new_advertised_listeners_or_a_new_config_are_seen(tmp_path) -> None:
    b = _broker(tmp_path, **{"advertised.listeners": "PLAINTEXT://a.example:9092,EXTERNAL://b.example:0"})
    b.bound.extend([("127.0.0.1", 41001), ("127.0.0.1", 41002)])
    assert b.advertised_endpoints() == [("PLAINTEXT", "a.example", 9092), ("EXTERNAL", "b.example", 41002)]
    b.config.advertised_listeners = parse_listeners(
        "advertised.listeners", ["PLAINTEXT://c.example:9093", "EXTERNAL://d.example:9094"],
        {"PLAINTEXT": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"})
    assert b.advertised_endpoints() == [("PLAINTEXT", "c.example", 9093), ("EXTERNAL", "d.example", 9094)]
    b.config = BrokerConfig({"log.dirs": str(tmp_path / "data"),
                             "listeners": "PLAINTEXT://0.0.0.0:0,EXTERNAL://127.0.0.1:0",
                             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"})
    assert b.advertised_endpoints() == [("PLAINTEXT", "127.0.0.1", 41001), ("EXTERNAL", "127.0.0.1", 41002)]
