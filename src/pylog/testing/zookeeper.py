"""A real ZooKeeper server for ``KafkaCluster`` and tests: Debian's ``zookeeper`` package run
in the foreground.

``zkServer.sh`` (through ``zkEnv.sh``) runs ``java -cp /etc/zookeeper/conf:
/usr/share/java/zookeeper.jar <main> <zoo.cfg>``; the jar's manifest ``Class-Path`` names the
other jars it needs (netty, jute, slf4j-api, ...). We run the standalone main class
``org.apache.zookeeper.server.ZooKeeperServerMain`` the same way, with our own ``zoo.cfg``:
client port chosen by binding ``127.0.0.1:0``, its own ``dataDir``, the AdminServer (an
HTTP server on 8080 by default) disabled, and slf4j-simple so the server's log lands in
``zookeeper.log`` next to the data.

``ZooKeeperServer.stop()`` then ``start()`` restarts on the same port with the same data
directory (persistent znodes survive, sessions are re-established by clients). ``kill()``
is SIGKILL (no clean shutdown). ``missing_reason()`` says why a server cannot run here.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

ZOOKEEPER_JAR = pathlib.Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = pathlib.Path("/usr/share/java/slf4j-simple.jar")
ZK_SERVER_SH = pathlib.Path("/usr/share/zookeeper/bin/zkServer.sh")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

# tickTime 500 ms lets tests use short sessions (min session timeout = 2 ticks); the max is
# raised so Kafka's default zookeeper.session.timeout.ms (18,000) is accepted unchanged.
TICK_TIME_MS = 500
MIN_SESSION_TIMEOUT_MS = 1_000
MAX_SESSION_TIMEOUT_MS = 60_000


def missing_reason() -> str | None:
    """Why a ZooKeeper server cannot be started here, or None when it can."""
    if not ZOOKEEPER_JAR.exists() or not ZK_SERVER_SH.exists():
        return ("Debian's zookeeper package is not installed (no /usr/share/java/zookeeper.jar): "
                "`make sysdeps` (apt-get install zookeeper) installs it")
    if shutil.which("java") is None:
        return "no java runtime on PATH: `make sysdeps` installs openjdk-17-jre-headless"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter_word(port: int, word: bytes, timeout: float = 1.0) -> bytes:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``) and return the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word)
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


class ZooKeeperServer:
    """One standalone ZooKeeper server process on 127.0.0.1.

    Not thread-safe: drive it from the test's thread.
    """

    def __init__(self, base_dir: pathlib.Path, port: int | None = None) -> None:
        reason = missing_reason()
        if reason is not None:
            raise RuntimeError(reason)
        self.base_dir = base_dir
        self.data_dir = base_dir / "data"
        self.config_path = base_dir / "zoo.cfg"
        self.log_path = base_dir / "zookeeper.log"
        self.port = port if port is not None else free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def connect_string(self) -> str:
        """The ``zookeeper.connect`` value for this server."""
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f"tickTime={TICK_TIME_MS}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            f"minSessionTimeout={MIN_SESSION_TIMEOUT_MS}\n"
            f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n"
            "autopurge.purgeInterval=0\n")

    def start(self, timeout: float = 60.0) -> None:
        """Start the server (again, on the same port and data) and wait until it serves."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("the ZooKeeper server is already running")
        self._write_config()
        classpath = f"{ZOOKEEPER_JAR}"
        if SLF4J_SIMPLE_JAR.exists():
            classpath += f":{SLF4J_SIMPLE_JAR}"
        cmd = [
            "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp", classpath, MAIN_CLASS, str(self.config_path),
        ]
        log = open(self.log_path, "ab")
        try:
            log.write(f"--- start {self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.proc.returncode} while starting; its log:\n"
                    + self.log_tail())
            try:
                if four_letter_word(self.port, b"ruok") == b"imok":
                    # ruok answers before the server takes sessions; srvr answers only then.
                    if b"Mode:" in four_letter_word(self.port, b"srvr"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"ZooKeeper did not serve within {timeout:.0f} s; its log:\n"
                                   + self.log_tail())
            time.sleep(0.1)

    def _signal(self, sig: int, timeout: float) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.proc = None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (the JVM shuts the server down cleanly) and wait; SIGKILL past ``timeout``."""
        self._signal(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL: no clean shutdown."""
        self._signal(signal.SIGKILL, 10.0)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
