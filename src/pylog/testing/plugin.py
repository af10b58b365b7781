"""The pytest plugin: Kafka fixtures backed by pylog's real broker (docs/testing.md).

Registered through the ``pytest11`` entry point, so it is active wherever pylog is
installed (``-p no:pylog`` turns it off). This module holds hooks and fixtures only; the
brokers live in ``pylog.testing.broker`` and ``pylog.testing.cluster``, imported when a
fixture is first used, so a test session that uses none pays nothing.

Fixtures:
    kafka_broker: a fresh ``KafkaBroker`` per test; ``@pytest.mark.kafka_broker(config=
        {...}, clock="virtual", **settings)`` configures it.
    kafka_broker_session: one ``KafkaBroker`` for the session (per xdist worker).
    kafka_topic: a factory ``kafka_topic(partitions=1, config=None, broker=None) -> name``
        that creates a topic with a name unique to the test, on ``broker`` (default: the
        session broker), and deletes it after the test.
    kafka_cluster: a ``KafkaCluster`` of three brokers on a ZooKeeper server, for the
        session; skipped, saying why, without ZooKeeper (Debian's package and a Java
        runtime) or kazoo.

Options (with ini twins): ``--kafka-keep-data`` keeps the data directories of the
``kafka_broker`` brokers of failed tests (the report says where); ``--kafka-show-log``
adds the broker's log to a failed test's report. A ``kafka_broker`` that logged a bug (an
exception escaping a request handler, an error in one of its tasks) fails its test.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
_BROKERS = pytest.StashKey[list[Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pylog", "Kafka brokers for tests (pylog.testing)")
    group.addoption("--kafka-keep-data", action="store_true", default=None,
                    help="keep the data directories of the kafka_broker brokers of failed tests")
    group.addoption("--kafka-show-log", action="store_true", default=None,
                    help="add the broker's log to the report of a failed test")
    parser.addini("kafka_keep_data", "as --kafka-keep-data", type="bool", default=False)
    parser.addini("kafka_show_log", "as --kafka-show-log", type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafka_broker(config=None, clock='system', **settings): settings of the "
        "kafka_broker fixture's broker (Kafka's names; clock='virtual' for advance())")


def _option(config: pytest.Config, name: str) -> bool:
    value = config.getoption(f"--{name.replace('_', '-')}")
    return bool(config.getini(name) if value is None else value)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    if report.failed and _option(item.config, "kafka_show_log"):
        for broker in item.stash.get(_BROKERS, []):
            report.sections.append((f"pylog {broker.name} log", broker.log_text() or "(empty)"))
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    reports = request.node.stash.get(_REPORTS, {})
    return any(r.failed for r in reports.values())


def _check_bugs(broker: Any) -> None:
    bugs = broker.logged_bugs()
    if bugs:
        pytest.fail(f"pylog {broker.name} logged errors during the test:\n" + "\n".join(bugs),
                    pytrace=False)


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh broker for this test (``@pytest.mark.kafka_broker(...)`` configures it)."""
    from pylog.testing.broker import KafkaBroker

    kwargs: dict[str, Any] = {}
    for mark in reversed(list(request.node.iter_markers("kafka_broker"))):
        if mark.args:
            raise pytest.UsageError("@pytest.mark.kafka_broker takes keyword arguments only: "
                                    "config={...}, clock=..., or settings as name=value")
        kwargs.update(mark.kwargs)
    broker = KafkaBroker(**kwargs).start()
    request.node.stash.setdefault(_BROKERS, []).append(broker)
    try:
        yield broker
    finally:
        keep = _failed(request) and _option(request.config, "kafka_keep_data")
        broker.stop(keep_data=keep)
        if keep:
            request.node.add_report_section("teardown", "pylog data",
                                            f"{broker.name} data kept in {broker.data_dir}")
    _check_bugs(broker)


@pytest.fixture(scope="session")
def kafka_broker_session() -> Iterator[Any]:
    """One broker for the whole session (each xdist worker has its own)."""
    from pylog.testing.broker import KafkaBroker

    broker = KafkaBroker().start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_topic(request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    """``kafka_topic(partitions=1, config=None, broker=None) -> name``: a topic unique to
    this test on ``broker`` (default: ``kafka_broker_session``), deleted afterwards."""
    made: list[tuple[Any, str]] = []
    base = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:80]

    def make(partitions: int = 1, config: dict[str, Any] | None = None,
             broker: Any = None) -> str:
        target = broker if broker is not None else request.getfixturevalue("kafka_broker_session")
        name = f"{base}-{uuid.uuid4().hex[:8]}"
        target.create_topic(name, partitions, config)
        made.append((target, name))
        return name

    yield make
    for target, name in made:
        if target.running:
            target.delete_topic(name)


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Three brokers on a ZooKeeper server, for the session (skipped, with the reason,
    when ZooKeeper or kazoo is missing)."""
    from pylog.testing.cluster import KafkaCluster, missing_reason

    reason = missing_reason()
    if reason is not None:
        pytest.skip(f"kafka_cluster needs ZooKeeper: {reason}")
    cluster = KafkaCluster(3, base_dir=tmp_path_factory.mktemp("kafka-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()
