"""Integration fixtures: a real broker subprocess on 127.0.0.1 with an OS-chosen port.

Every broker gets a fresh data directory under ``tmp_path_factory`` and
``listeners=PLAINTEXT://127.0.0.1:0``; it writes ``HOST:PORT`` to a ready file once it
serves (``--ready-file``), which is how the fixture learns the port. The broker's log goes to
``broker.log`` next to its data, printed when a test fails to start it.

Module-scoped ``broker`` fixture: tests that do not interfere share one broker per module
(each test uses its own topic names). Tests that restart or kill the broker build their own
``BrokerProcess``.

Cluster mode (``PYLOG_TEST_CLUSTER=3``, ``make test-cluster``): ``broker`` (and the other
fixtures built with ``start_target``) is a ``ClusterProcess`` instead: a real ZooKeeper and
N brokers with ``default.replication.factor``, ``offsets.topic.replication.factor`` and
``transaction.state.log.replication.factor`` N and ``min.insync.replicas`` 2, with the same
interface (``bootstrap`` lists every broker). Tests that need the single broker process
(restart or kill it, read its log or data directory) carry
``@pytest.mark.single_broker(reason)`` or use ``new_broker`` without ``zookeeper.connect``,
and are skipped in that mode, saying why.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import warnings

import pytest

import logcore

# The clients are imported once here, outside any test: kafka-python's import-time use of
# importlib.resources.read_text warns (DeprecationWarning), and warnings are errors.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import aiokafka  # noqa: F401
    import confluent_kafka  # noqa: F401
    import kafka  # noqa: F401

REPO = pathlib.Path(__file__).resolve().parents[2]


def cluster_size() -> int:
    """``PYLOG_TEST_CLUSTER``: run the client suites against a cluster of this many brokers
    (0: the single-node broker). A value that is not a number of at least 2 is refused."""
    raw = os.environ.get("PYLOG_TEST_CLUSTER", "").strip()
    if not raw or raw == "0":
        return 0
    if not raw.isdigit() or int(raw) < 2:
        raise pytest.UsageError(f"PYLOG_TEST_CLUSTER={raw!r}: give a number of brokers, at "
                                "least 2 (e.g. PYLOG_TEST_CLUSTER=3), or unset it")
    return int(raw)


CLUSTER_SKIP = "single-node only: not run against the cluster of PYLOG_TEST_CLUSTER"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = pathlib.Path(__file__).parent
    clustered = cluster_size() > 0
    for item in items:
        if here in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
        mark = item.get_closest_marker("single_broker")
        if clustered and mark is not None:
            why = mark.args[0] if mark.args else mark.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason=f"{CLUSTER_SKIP} ({why})"))


class BrokerProcess:
    """A ``pylog broker`` subprocess. ``start()`` waits until it serves."""

    def __init__(self, data_dir: pathlib.Path, overrides: dict[str, str] | None = None,
                 port: int = 0) -> None:
        self.data_dir = data_dir
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self.ready_path = data_dir.parent / f"{data_dir.name}-ready"
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(data_dir),
            "num.partitions": "1",
        }
        self.overrides.update(overrides or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.n = 1  # brokers behind ``bootstrap`` (ClusterProcess: the cluster's size)
        self.host = "127.0.0.1"
        self.port = port
        self._log_file = None
        self.extra_args: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        if self.ready_path.exists():
            self.ready_path.unlink()
        cmd = [sys.executable, "-m", "pylog", "broker", "--ready-file", str(self.ready_path),
               "--log-level", "INFO"]
        if logcore.IMPLEMENTATION != "c":
            cmd.append("--allow-pure-python")
        cmd += self.extra_args
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._log_file, stderr=subprocess.STDOUT,
                                     cwd=str(self.data_dir.parent), env=dict(os.environ))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_path.exists():
                text = self.ready_path.read_text().strip()
                if text:
                    host, port = text.rsplit(":", 1)
                    self.host, self.port = host, int(port)
                    # Keep the port on restarts: clients reconnect to the same address.
                    self.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
                    return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop(sig=signal.SIGKILL)
        raise RuntimeError(f"broker did not start; log:\n{self.read_log()}")

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int | None:
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait(5)
            self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return rc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class ClusterProcess:
    """A real ZooKeeper and ``n`` ``pylog broker`` processes in cluster mode, with the
    interface the client suites use of ``BrokerProcess`` (``bootstrap`` lists them all;
    ``host``/``port`` are the first broker's). ``start()`` waits until every broker serves
    and sees the others in its Metadata."""

    def __init__(self, base: pathlib.Path, n: int, overrides: dict[str, str] | None = None) -> None:
        from _harness.zookeeper import ZooKeeperServer, missing_reason

        reason = missing_reason()
        if reason is not None:
            pytest.skip(f"PYLOG_TEST_CLUSTER needs ZooKeeper: {reason}")
        self.zookeeper = ZooKeeperServer(base / "zookeeper")
        self.brokers: list[BrokerProcess] = []
        self.n = n
        self.overrides = {
            "default.replication.factor": str(n),
            "offsets.topic.replication.factor": str(n),
            "transaction.state.log.replication.factor": str(n),
            "share.coordinator.state.topic.replication.factor": str(n),
            "min.insync.replicas": "2",
            # The last broker to stop has nobody to hand its leaderships to: one retry, not
            # Kafka's 3 x 5 s, keeps the teardown short.
            "controlled.shutdown.max.retries": "1",
            "controlled.shutdown.retry.backoff.ms": "1000",
            **(overrides or {}),
        }
        self.base = base

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def host(self) -> str:
        return self.brokers[0].host

    @property
    def port(self) -> int:
        return self.brokers[0].port

    def start(self, timeout: float = 60.0) -> ClusterProcess:
        self.zookeeper.start()
        try:
            for i in range(self.n):
                data = self.base / f"broker{i}"
                data.mkdir()
                b = BrokerProcess(data, {"zookeeper.connect": self.zookeeper.connect_string,
                                         "broker.id": str(i), **self.overrides})
                self.brokers.append(b)
                b.start(timeout)
            self._wait_for_metadata(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_metadata(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        for b in self.brokers:
            admin = AdminClient({"bootstrap.servers": b.bootstrap, "broker.address.family": "v4"})
            while True:
                md = admin.list_topics(timeout=10)
                if len(md.brokers) == self.n and md.controller_id >= 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker {b.bootstrap} did not see {self.n} brokers and "
                                       f"a controller; log:\n{self.read_log()}")
                time.sleep(0.2)

    def read_log(self) -> str:
        return "\n".join(f"--- broker {i} ---\n{b.read_log()}" for i, b in enumerate(self.brokers))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Stop every broker (``sig``), then ZooKeeper; the first non-zero exit status."""
        rcs = [b.stop(sig=sig, timeout=timeout) for b in self.brokers]
        self.zookeeper.stop()
        return next((rc for rc in rcs if rc), 0)

    def alive(self) -> bool:
        return bool(self.brokers) and all(b.alive() for b in self.brokers)


def start_target(tmp_path_factory: pytest.TempPathFactory, name: str,
                 overrides: dict[str, str] | None = None) -> BrokerProcess | ClusterProcess:
    """The module's broker: one ``BrokerProcess``, or a ``ClusterProcess`` of
    ``PYLOG_TEST_CLUSTER`` brokers (same overrides on each)."""
    n = cluster_size()
    if n:
        return ClusterProcess(tmp_path_factory.mktemp(f"{name}-cluster"), n, overrides).start()
    data = tmp_path_factory.mktemp(name) / "data"
    data.mkdir()
    return BrokerProcess(data, overrides).start()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = start_target(tmp_path_factory, "broker", {"auto.create.topics.enable": "true"})
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


@pytest.fixture(scope="session")
def tansu_broker(tmp_path_factory: pytest.TempPathFactory):
    """One Tansu broker (tests/_harness/tansu.py) shared by every module that tests pylog's
    client against it; skips those tests, saying how to install it, when it is missing."""
    from _harness.tansu import TansuProcess

    if cluster_size():
        pytest.skip(f"{CLUSTER_SKIP} (Tansu is another broker, not pylog's cluster)")

    t = TansuProcess(tmp_path_factory.mktemp("tansu")).start()
    yield t
    alive = t.alive()
    t.stop()
    assert alive, f"Tansu exited during the tests; log:\n{t.read_log()}"


@pytest.fixture(scope="module", params=["pylog", "tansu"])
def any_broker(request: pytest.FixtureRequest):
    """pylog's broker (the module's ``broker``), then Tansu (``tansu_broker``): for client
    tests that must hold against any Kafka-compatible broker. Both have ``bootstrap``."""
    return request.getfixturevalue("broker" if request.param == "pylog" else "tansu_broker")


@pytest.fixture
def new_broker(tmp_path: pathlib.Path):
    """A factory for brokers owned by one test (restart, kill -9, special configs)."""
    made: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None) -> BrokerProcess:
        if cluster_size() and "zookeeper.connect" not in (overrides or {}):
            pytest.skip(f"{CLUSTER_SKIP} (the test starts, restarts or kills its own broker)")
        data = tmp_path / f"data{len(made)}"
        data.mkdir()
        b = BrokerProcess(data, overrides)
        made.append(b)
        return b

    yield make
    for b in made:
        b.stop(sig=signal.SIGKILL)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    base = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
    return f"t-{base[:60]}-{uuid.uuid4().hex[:6]}"


def wait_port_closed(host: str, port: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                pass
        except OSError:
            return
        time.sleep(0.05)


KCAT = shutil.which("kcat") or shutil.which("kafkacat")
