"""A real ZooKeeper server for tests: Debian's ``zookeeper`` package run in the foreground.

``zkServer.sh`` (through ``zkEnv.sh``) runs ``java -cp /etc/zookeeper/conf:
/usr/share/java/zookeeper.jar <main> <zoo.cfg>``; the jar's manifest ``Class-Path`` names the
other jars it needs (netty, jute, slf4j-api, ...). We run the standalone main class
``org.apache.zookeeper.server.ZooKeeperServerMain`` the same way, with our own ``zoo.cfg``:
client port chosen by binding ``127.0.0.1:0``, its own ``dataDir`` under the test's tmp
directory, the AdminServer (an HTTP server on 8080 by default) disabled, and slf4j-simple so
the server's log lands in ``zookeeper.log`` next to the data.

``ZooKeeperServer.stop()`` then ``start()`` restarts on the same port with the same data
directory (persistent znodes survive, sessions are re-established by clients), which the
cluster fault tests use for "ZooKeeper restart". ``kill()`` is SIGKILL (no clean shutdown).

The server itself is ``pylog.testing.zookeeper`` (``KafkaCluster`` and the pytest plugin's
``kafka_cluster`` use it too); this module adds the fixtures.

Usage: ``from _harness.zookeeper import zookeeper  # noqa: F401`` imports the
module-scoped ``zookeeper`` fixture (``zookeeper_factory`` starts private servers for tests
that restart or kill them); or build a ``ZooKeeperServer`` directly. When the package
is absent the fixture skips, saying that ``make sysdeps`` installs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pylog.testing.zookeeper import (  # noqa: F401 - re-exported to the cluster tests
    MAIN_CLASS,
    MAX_SESSION_TIMEOUT_MS,
    MIN_SESSION_TIMEOUT_MS,
    SLF4J_SIMPLE_JAR,
    TICK_TIME_MS,
    ZK_SERVER_SH,
    ZOOKEEPER_JAR,
    ZooKeeperServer,
    four_letter_word,
    free_port,
    missing_reason,
)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper server for the module (skips when the package is not installed)."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zookeeper_factory(
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], ZooKeeperServer]]:
    """Start private servers for one test (restart and kill tests); all stopped at teardown."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    servers: list[ZooKeeperServer] = []

    def start() -> ZooKeeperServer:
        server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
        servers.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()
