"""The command line's parser, the consume formatters and the perf tools' statistics."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pylog.cli import _format
from pylog.cli._common import CliError, parse_properties
from pylog.cli._stats import Window, latency_summary, percentiles
from pylog.cli.main import build_parser
from pylog.client import ConsumerRecord


def test_broker_command_line() -> None:
    args = build_parser().parse_args(["broker", "--config", "s.properties", "--override", "a=b",
                                      "-o", "c=d", "--log-level", "debug", "--allow-pure-python"])
    assert (args.config, args.override, args.log_level, args.allow_pure_python) == (
        "s.properties", ["a=b", "c=d"], "debug", True)


def test_consume_command_line() -> None:
    args = build_parser().parse_args(["consume", "t", "--from-timestamp", "5", "-p", "1", "-p", "2", "-n", "3"])
    assert (args.from_timestamp, args.partition, args.max_messages) == (5, [1, 2], 3)
    args = build_parser().parse_args(["consume", "t", "-g", "G", "--isolation-level", "read_committed",
                                      "-f", "%s\\n", "-X", "check.crcs=false"])
    assert (args.group, args.isolation_level, args.format, args.consumer_property) == (
        "G", "read_committed", "%s\\n", ["check.crcs=false"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["consume", "t", "--from-beginning", "-o", "3"])


def test_perf_command_lines() -> None:
    args = build_parser().parse_args(["perf", "produce", "--topic", "t", "--num-records", "10",
                                      "--record-size", "100", "--throughput", "50",
                                      "--producer-props", "linger.ms=5", "batch.size=1000",
                                      "--acks", "1", "--json", "-b", "h:1"])
    assert (args.num_records, args.record_size, args.throughput, args.producer_props,
            args.acks, args.json, args.bootstrap_server) == (
        10, 100, 50.0, ["linger.ms=5", "batch.size=1000"], "1", True, "h:1")
    with pytest.raises(SystemExit):  # --record-size or --payload-file is required
        build_parser().parse_args(["perf", "produce", "--topic", "t", "--num-records", "10"])
    args = build_parser().parse_args(["perf", "consume", "--topic", "t", "--num-records", "7",
                                      "--poll-columns", "--timeout", "500"])
    assert (args.messages, args.poll_columns, args.timeout) == (7, True, 500)


def test_parse_properties() -> None:
    assert parse_properties(["a=1", "b.c=x=y"], "-X") == {"a": "1", "b.c": "x=y"}
    with pytest.raises(CliError, match="-X 'nothing': expected KEY=VALUE"):
        parse_properties(["nothing"], "-X")


def _rec(**kw) -> ConsumerRecord:
    base = dict(topic="t", partition=2, offset=41, timestamp=1700000000123, timestamp_type=0,
                key=b"k1", value=b"hello", headers=[("a", b"1"), ("b", None)])
    base.update(kw)
    return ConsumerRecord(**base)


def test_template_tokens_as_kcat() -> None:
    fmt = _format.template_formatter(r"%t [%p] @%o %k=%s (%K/%S) %T %h 100%%\t|\x41\n")
    assert fmt(_rec()) == b"t [2] @41 k1=hello (2/5) 1700000000123 a=1,b= 100%\t|A\n"
    assert fmt(_rec(key=None, value=None)) == b"t [2] @41 = (-1/-1) 1700000000123 a=1,b= 100%\t|A\n"
    assert _format.template_formatter("%R")(_rec()) == b"\x00\x00\x00\x05"
    assert _format.template_formatter("%R")(_rec(value=None)) == b"\xff\xff\xff\xff"
    assert _format.template_formatter("fixed")(_rec()) == b"fixed"
    for bad, says in (("%x", "unknown token %x"), ("%", "at the end"), (r"\q", r"unknown escape \q"),
                      (r"\xZZ", "two hex digits")):
        with pytest.raises(CliError, match=says.replace("\\", "\\\\")):
            _format.template_formatter(bad)


def test_classic_format_keeps_the_old_columns() -> None:
    fmt = _format.classic_formatter(offsets=True, timestamp=True, headers=True, key=True, separator="\t")
    assert fmt(_rec(value=None, timestamp_type=1)) == b"2:41\tLogAppendTime:1700000000123\ta=1,b=\tk1\tnull\n"
    plain = _format.classic_formatter(offsets=False, timestamp=False, headers=False, key=False, separator="\t")
    assert plain(_rec()) == b"hello\n"


def test_json_envelope() -> None:
    fmt = _format.json_formatter()
    obj = json.loads(fmt(_rec()))
    assert obj == {"topic": "t", "partition": 2, "offset": 41, "tstype": "create", "ts": 1700000000123,
                   "headers": [["a", "1"], ["b", None]], "key": "k1", "payload": "hello"}
    obj = json.loads(fmt(_rec(key=None, value=b"\xff\x00", headers=[("h", b"\xfe")])))
    assert obj["key"] is None and obj["payload_b64"] == "/wA=" and "payload" not in obj
    assert obj["headers"] == [["h", {"b64": "/g=="}]]
    assert "headers" not in json.loads(fmt(_rec(headers=[])))


def test_percentiles_are_kafkas_nearest_rank() -> None:
    values = np.arange(1, 1001, dtype=np.float64)[::-1].copy()  # 1000..1
    # ProducerPerformance: sorted[int(p * n)]
    assert percentiles(values, (0.5, 0.95, 0.99, 0.999)) == [501.0, 951.0, 991.0, 1000.0]
    s = latency_summary(values)
    assert (s["avg"], s["max"], s["p50"]) == (500.5, 1000.0, 501.0)
    assert latency_summary(np.zeros(0))["p99"] == 0.0


def test_window_line_is_kafkas() -> None:
    w = Window(start=10.0)
    w.add(2, 3 * 1024 * 1024, np.array([1.0, 3.0]))
    assert w.line("sent", 12.0) == ("2 records sent, 1.0 records/sec (1.50 MB/sec), "
                                    "2.0 ms avg latency, 3.0 ms max latency.")


def _command_paths(parser, prefix=()):
    """Every command and subcommand path of the parser (``("topics", "create")`` ...)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from _command_paths(sub, (*prefix, name))


def test_help_on_every_command(capsys) -> None:
    from pylog.cli.main import main

    paths = list(_command_paths(build_parser()))
    for expected in [("produce",), ("consume",), ("cluster", "info"), ("perf", "produce"),
                     ("perf", "consume"), ("topics", "create"), ("broker",)]:
        assert expected in paths
    for path in paths:
        with pytest.raises(SystemExit) as exc:
            main([*path, "--help"])
        assert exc.value.code == 0, path
        out = capsys.readouterr().out
        assert out.startswith(f"usage: pylog {' '.join(path)}"), (path, out[:200])
        assert "-h, --help" in out


def test_connection_settings_from_x_and_command_config(tmp_path) -> None:
    from pylog.cli._common import base_settings

    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SSL\nssl.truststore.location=/etc/ca.pem\n")
    parser = build_parser()
    args = parser.parse_args(["topics", "list", "--command-config", str(props),
                              "-X", "ssl.truststore.location=/x/ca.pem"])
    settings = base_settings(args)
    assert settings["security.protocol"] == "SSL"
    assert settings["ssl.truststore.location"] == "/x/ca.pem"  # -X wins over the file
    # consume's own -X takes every consumer setting; its connection settings reach the admin.
    args = parser.parse_args(["consume", "t", "-X", "security.protocol=SSL",
                              "-X", "fetch.min.bytes=1"])
    assert base_settings(args)["security.protocol"] == "SSL"
    assert "fetch.min.bytes" not in base_settings(args)
    with pytest.raises(CliError, match="only connection settings"):
        base_settings(parser.parse_args(["topics", "list", "-X", "linger.ms=5"]))
