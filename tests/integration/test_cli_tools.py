"""`pylog topics|produce|consume` against a running broker (they speak the Kafka protocol)."""

from __future__ import annotations

import subprocess
import sys
import time


def pylog(broker, *args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pylog", *args, "-b", broker.bootstrap], input=stdin,
                          capture_output=True, timeout=60, check=check)


def test_topics_lifecycle(broker, topic_name) -> None:
    assert pylog(broker, "topics", "create", topic_name, "-p", "3", "--config", "retention.ms=3600000").returncode == 0
    again = pylog(broker, "topics", "create", topic_name, check=False)
    assert again.returncode == 1 and b"TOPIC_ALREADY_EXISTS" in again.stderr
    assert pylog(broker, "topics", "create", topic_name, "--if-not-exists").returncode == 0
    assert topic_name in pylog(broker, "topics", "list").stdout.decode().split()
    out = pylog(broker, "topics", "describe", topic_name, "--configs").stdout.decode()
    assert "PartitionCount: 3" in out and "retention.ms=3600000\t(override)" in out
    pylog(broker, "topics", "alter-config", topic_name, "--set", "retention.ms=1000", "--delete", "nothing.here",
          check=False)
    assert pylog(broker, "topics", "alter-config", topic_name, "--set", "retention.ms=1000").returncode == 0
    out = pylog(broker, "topics", "describe", topic_name, "--configs").stdout.decode()
    assert "retention.ms=1000\t(override)" in out
    bad = pylog(broker, "topics", "alter-config", topic_name, "--set", "retention.ms=soon", check=False)
    assert bad.returncode == 1 and b"INVALID_CONFIG" in bad.stderr
    assert pylog(broker, "topics", "delete", topic_name).returncode == 0
    assert topic_name not in pylog(broker, "topics", "list").stdout.decode().split()


def test_consume_options(broker, topic_name) -> None:
    pylog(broker, "topics", "create", topic_name, "-p", "1")
    lines = b"".join(b"k%d=v%d\n" % (i, i) for i in range(10))
    t0 = int(time.time() * 1000)
    pylog(broker, "produce", topic_name, "-K", "=", "-H", "a=1", "-H", "b=2", "--null-value", "v3", stdin=lines)
    out = pylog(broker, "consume", topic_name, "--from-beginning", "-n", "4", "--key", "--headers",
                "--timestamp", "--offsets").stdout.decode().splitlines()
    assert len(out) == 4
    where, ts, headers, key, value = out[3].split("\t")
    assert where == "0:3" and key == "k3" and value == "null" and headers == "a=1,b=2"
    kind, stamp = ts.split(":")
    assert kind == "CreateTime" and abs(int(stamp) - t0) < 60_000
    assert pylog(broker, "consume", topic_name, "-o", "-2", "-e").stdout.decode().splitlines() == ["v8", "v9"]
    assert pylog(broker, "consume", topic_name, "-o", "7", "-e").stdout.decode().splitlines() == ["v7", "v8", "v9"]
    later = pylog(broker, "consume", topic_name, "--from-timestamp", str(t0 + 3_600_000), "-e").stdout
    assert later == b""
    earlier = pylog(broker, "consume", topic_name, "--from-timestamp", str(t0 - 60_000), "-e", "-p", "0").stdout
    assert len(earlier.splitlines()) == 10
    missing = pylog(broker, "consume", "no-such-" + topic_name, "-e", check=False)
    assert missing.returncode == 1 and b"UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_produce_from_file_acks_zero(broker, topic_name, tmp_path) -> None:
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(2500)))
    pylog(broker, "produce", topic_name, "-f", str(path), "--acks", "0", "-z", "gzip", "--batch-size", "700")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out = pylog(broker, "consume", topic_name, "--from-beginning", "-e").stdout.splitlines()
        if len(out) == 2500:
            break
        time.sleep(0.2)
    assert out == [b"line %d" % i for i in range(2500)]


def test_compaction_configs_set_and_bad_ones_refused(broker, topic_name) -> None:
    bad = pylog(broker, "topics", "create", topic_name, "--config", "cleanup.policy=compacted", check=False)
    err = bad.stderr.decode()
    assert bad.returncode == 1 and "INVALID_CONFIG" in err and "cleanup.policy" in err and "compacted" in err
    assert topic_name not in pylog(broker, "topics", "list").stdout.decode().split()
    pylog(broker, "topics", "create", topic_name)
    out = pylog(broker, "topics", "describe", topic_name, "--configs").stdout.decode()
    assert "\tcleanup.policy=delete\n" in out  # the default, no override
    pylog(broker, "topics", "alter-config", topic_name, "--set", "cleanup.policy=delete,compact")
    out = pylog(broker, "topics", "describe", topic_name, "--configs").stdout.decode()
    assert "\tcleanup.policy=delete,compact\t(override)\n" in out


def test_a_clients_double_underscore_topic_is_listed(broker) -> None:
    name = f"__cli_{time.monotonic_ns()}"
    pylog(broker, "topics", "create", name)
    assert name in pylog(broker, "topics", "list").stdout.decode().split()  # not internal
