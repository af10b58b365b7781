"""The CLI's key partitioner matches Kafka's (murmur2 as kafka-python implements it)."""

from __future__ import annotations

import os
import warnings

import pytest

from pylog.cli._kafka import ClientError, murmur2, parse_hostport, partition_for_key
from pylog.cli.main import build_parser


def test_murmur2_matches_kafka_python() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from kafka.partitioner.default import murmur2 as reference
    rng = __import__("random").Random(7)
    for n in range(300):
        data = bytes(rng.getrandbits(8) for _ in range(n % 40))
        assert murmur2(data) & 0xFFFFFFFF == reference(bytearray(data))
    assert partition_for_key(b"alice", 3) == partition_for_key(b"alice", 3)
    assert {partition_for_key(os.urandom(8), 5) for _ in range(200)} == set(range(5))


def test_parse_hostport() -> None:
    assert parse_hostport("localhost:9092") == ("localhost", 9092)
    assert parse_hostport("[::1]:9093") == ("::1", 9093)
    with pytest.raises(ClientError):
        parse_hostport("nohost")


def test_broker_command_line() -> None:
    args = build_parser().parse_args(["broker", "--config", "s.properties", "--override", "a=b",
                                      "-o", "c=d", "--log-level", "debug", "--allow-pure-python"])
    assert (args.config, args.override, args.log_level, args.allow_pure_python) == (
        "s.properties", ["a=b", "c=d"], "debug", True)
    args = build_parser().parse_args(["consume", "t", "--from-timestamp", "5", "-p", "1", "-p", "2", "-n", "3"])
    assert (args.from_timestamp, args.partition, args.max_messages) == (5, [1, 2], 3)
