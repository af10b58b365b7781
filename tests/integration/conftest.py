"""Integration fixtures: a real broker subprocess on 127.0.0.1 with an OS-chosen port.

Every broker gets a fresh data directory under ``tmp_path_factory`` and
``listeners=PLAINTEXT://127.0.0.1:0``; it writes ``HOST:PORT`` to a ready file once it
serves (``--ready-file``), which is how the fixture learns the port. The broker's log goes to
``broker.log`` next to its data, printed when a test fails to start it.

Module-scoped ``broker`` fixture: tests that do not interfere share one broker per module
(each test uses its own topic names). Tests that restart or kill the broker build their own
``BrokerProcess``.
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


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


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("broker") / "data"
    data.mkdir()
    b = BrokerProcess(data, {"auto.create.topics.enable": "true"}).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


@pytest.fixture(scope="session")
def tansu_broker(tmp_path_factory: pytest.TempPathFactory):
    """One Tansu broker (tests/_harness/tansu.py) shared by every module that tests pylog's
    client against it; skips those tests, saying how to install it, when it is missing."""
    from _harness.tansu import TansuProcess

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
