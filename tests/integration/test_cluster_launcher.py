"""``pylog cluster start`` / ``stop``: ZooKeeper and brokers as background processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from _harness.zookeeper import missing_reason

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pylog(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pylog", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


def test_start_info_stop(tmp_path) -> None:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    data = tmp_path / "cl"
    base, zk = _free_port(), _free_port()
    while base + 1 == zk or not _port_ok(base + 1):
        base = _free_port()
    out = _pylog("cluster", "start", "--brokers", "2", "--data-dir", str(data), "--base-port",
                 str(base), "--zookeeper-port", str(zk), "--override",
                 "controlled.shutdown.retry.backoff.ms=200")
    try:
        assert out.returncode == 0, out.stderr + (data / "broker-0.log").read_text(errors="replace")
        assert f"bootstrap.servers=127.0.0.1:{base},127.0.0.1:{base + 1}" in out.stdout
        state = json.loads((data / "cluster.json").read_text())
        assert [b["port"] for b in state["brokers"]] == [base, base + 1]
        again = _pylog("cluster", "start", "--data-dir", str(data))
        assert again.returncode == 1 and "is running" in again.stderr
        info = _pylog("cluster", "info", "--json", "--bootstrap-server", f"127.0.0.1:{base + 1}")
        assert info.returncode == 0, info.stderr
        described = json.loads(info.stdout)
        assert sorted(b["node_id"] for b in described["brokers"]) == [0, 1]
        assert described["controller_id"] in (0, 1)
    finally:
        began = time.monotonic()
        stop = _pylog("cluster", "stop", "--data-dir", str(data))
        took = time.monotonic() - began
    assert stop.returncode == 0, stop.stderr
    # One at a time, the controller last: every controlled shutdown succeeds at once (the
    # last broker has nobody to hand its leaderships to, and does not retry for that).
    assert sorted(stop.stdout.split("\n")[:2]) == ["stopped broker 0", "stopped broker 1"]
    assert "stopped zookeeper" in stop.stdout
    print(f"cluster stop took {took:.1f} s")
    assert took < 15, f"cluster stop took {took:.1f} s"
    assert not (data / "cluster.json").exists()
    for i in (0, 1):
        log = (data / f"broker-{i}.log").read_text()
        assert "shut down cleanly" in log
        assert "controlled shutdown failed" not in log
    missing = _pylog("cluster", "stop", "--data-dir", str(data))
    assert missing.returncode == 1 and "nothing started there" in missing.stderr

    # Started again at once on the same ports (the stopped cluster's connections sit in
    # TIME_WAIT), with a broker killed behind the launcher's back: stop says so.
    again = _pylog("cluster", "start", "--brokers", "2", "--data-dir", str(data), "--base-port",
                   str(base), "--zookeeper-port", str(zk))
    try:
        assert again.returncode == 0, again.stderr
        state = json.loads((data / "cluster.json").read_text())
        os.kill(state["brokers"][1]["pid"], signal.SIGKILL)
    finally:
        stop = _pylog("cluster", "stop", "--data-dir", str(data))
    assert stop.returncode == 0, stop.stderr
    assert "broker 1 was not running" in stop.stdout
    assert "stopped broker 0" in stop.stdout


def _port_ok(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_start_a_sasl_cluster(tmp_path) -> None:
    """``--sasl``: SCRAM on SASL_PLAINTEXT listeners, brokers authenticating to each other;
    the admin's settings file works with --command-config; without them a client fails."""
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    data = tmp_path / "cl"
    base, zk = _free_port(), _free_port()
    while base + 1 == zk or not _port_ok(base + 1):
        base = _free_port()
    out = _pylog("cluster", "start", "--brokers", "2", "--sasl", "--data-dir", str(data),
                 "--base-port", str(base), "--zookeeper-port", str(zk))
    try:
        assert out.returncode == 0, out.stderr + (data / "broker-0.log").read_text(errors="replace")
        props = data / "client.properties"
        assert str(props) in out.stdout
        assert oct(props.stat().st_mode & 0o777) == "0o600"
        boot = f"127.0.0.1:{base}"
        created = _pylog("topics", "create", "secured", "--partitions", "2",
                         "--replication-factor", "2", "--bootstrap-server", boot,
                         "--command-config", str(props))
        assert created.returncode == 0, created.stderr
        info = _pylog("cluster", "info", "--json", "--bootstrap-server", boot,
                      "--command-config", str(props))
        assert info.returncode == 0, info.stderr
        assert sorted(b["node_id"] for b in json.loads(info.stdout)["brokers"]) == [0, 1]
        refused = _pylog("cluster", "info", "--bootstrap-server", boot, "--timeout", "3")
        assert refused.returncode != 0
        import re

        secret = re.search(r'password="([^"]+)"', (data / "sasl-broker.properties").read_text())
        assert secret is not None
        for i in (0, 1):
            log = (data / f"broker-{i}.log").read_text()
            assert "authenticated as User:broker (SCRAM-SHA-512)" in log, log[-2000:]
            assert secret.group(1) not in log
    finally:
        stop = _pylog("cluster", "stop", "--data-dir", str(data))
    assert stop.returncode == 0, stop.stderr
