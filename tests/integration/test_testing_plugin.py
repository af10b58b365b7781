"""pylog.testing's pytest plugin, run in a pytester session: the fixtures, the marker, the
options for failed tests, a broker bug failing its test, and the entry point that
registers the plugin."""

from __future__ import annotations

import pathlib
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytest_plugins = ("pytester",)
pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Block the entry point's registration (name "pylog") in case pylog is installed with it,
# then load this tree's plugin module: the same plugin must not be registered twice.
PLUGIN = ("-p", "no:pylog", "-p", "pylog.testing.plugin", "-p", "no:cacheprovider")


def test_the_entry_point_registers_the_plugin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {"pylog": "pylog.testing.plugin"}


def test_an_installed_entry_point_activates_the_plugin(pytester: pytest.Pytester,
                                                      tmp_path: pathlib.Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``pip install`` writes for the declared entry point (a dist-info directory
    with entry_points.txt) makes the fixtures available without ``-p``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    entries = project["project"]["entry-points"]["pytest11"]
    site = tmp_path / "site"
    dist = site / "pylog_kafka_entry_point_check-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pylog-kafka-entry-point-check\n"
                                   "Version: 0.0\n")
    (dist / "entry_points.txt").write_text(
        "[pytest11]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    pytester.makepyfile(test_app="def test_it(kafka_broker):\n    assert kafka_broker.running\n")
    import os

    paths = [str(site), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    # And the way this suite loads it (PLUGIN) stays valid once the entry point exists.
    pytester.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=1)


def _run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_app=source)
    return pytester.runpytest_subprocess(*PLUGIN, *args)


def test_fixtures_marker_and_topic_factory(pytester: pytest.Pytester) -> None:
    result = _run(pytester, '''
import pytest
from confluent_kafka import Producer

def produce(bootstrap, topic, value):
    p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    p.produce(topic, value=value)
    assert p.flush(20) == 0

def test_fresh_broker(kafka_broker):
    kafka_broker.create_topic("a")
    produce(kafka_broker.bootstrap_servers, "a", b"1")
    assert [r.value for r in kafka_broker.wait_for("a", 1)] == [b"1"]

def test_fresh_broker_again(kafka_broker):
    assert "a" not in kafka_broker.topics()

@pytest.mark.kafka_broker(config={"num.partitions": 3}, clock="virtual")
def test_marker(kafka_broker):
    assert kafka_broker.broker.config["num.partitions"] == 3
    kafka_broker.advance(1)

def test_topics_are_unique(kafka_topic, kafka_broker_session):
    first, second = kafka_topic(), kafka_topic(partitions=2)
    assert first != second and first.startswith("test_topics_are_unique-")
    produce(kafka_broker_session.bootstrap_servers, second, b"x")
    assert len(kafka_broker_session.wait_for(second, 1)) == 1

def test_topic_on_a_given_broker(kafka_topic, kafka_broker):
    name = kafka_topic(broker=kafka_broker, config={"cleanup.policy": "compact"})
    assert name in kafka_broker.topics()
''')
    result.assert_outcomes(passed=5)


def test_failed_test_keeps_data_and_shows_the_log(pytester: pytest.Pytester) -> None:
    result = _run(pytester, '''
def test_fails(kafka_broker):
    kafka_broker.create_topic("kept-topic")
    kafka_broker.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER")
    assert False, "deliberately"

def test_passes(kafka_broker):
    kafka_broker.create_topic("gone-topic")
''', "--kafka-keep-data", "--kafka-show-log")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "pylog broker" in out and "log" in out
    assert "fault set: the next 1 Produce request(s) get NOT_LEADER_OR_FOLLOWER" in out
    kept = [line.split(" data kept in ", 1)[1].strip() for line in out.splitlines()
            if " data kept in " in line]
    assert len(kept) == 1 and (pathlib.Path(kept[0]) / "kept-topic-0").is_dir()
    assert "gone-topic" not in out


def test_without_the_options_nothing_is_kept_or_shown(pytester: pytest.Pytester) -> None:
    result = _run(pytester, '''
def test_fails(kafka_broker):
    kafka_broker.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER")
    assert False
''')
    result.assert_outcomes(failed=1)
    assert " data kept in " not in result.stdout.str()
    assert "pylog broker" not in result.stdout.str().replace("pylog broker 0 started", "")


def test_a_broker_bug_fails_the_test(pytester: pytest.Pytester) -> None:
    result = _run(pytester, '''
import logging

def test_bug(kafka_broker):
    async def bug():
        logging.getLogger("pylog.broker.handlers").error("bug: a handler raised")
    kafka_broker._call(bug())
''')
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*logged errors during the test*", "*bug: a handler raised*"])


def test_bad_marker_use_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _run(pytester, '''
import pytest

@pytest.mark.kafka_broker({"num.partitions": 3})
def test_positional(kafka_broker):
    pass
''')
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*takes keyword arguments only*"])


def test_kafka_cluster(pytester: pytest.Pytester) -> None:
    from pylog.testing.cluster import missing_reason

    result = _run(pytester, '''
from confluent_kafka import Producer

def test_three_brokers(kafka_cluster):
    assert len(kafka_cluster.bootstrap_servers.split(",")) == 3
    kafka_cluster.create_topic("replicated", partitions=2)
    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all",
                  "broker.address.family": "v4"})
    for i in range(10):
        p.produce("replicated", value=b"%d" % i)
    assert p.flush(30) == 0
    for b in kafka_cluster.brokers:
        assert len(b.wait_for("replicated", 10, timeout=20)) == 10
''', "-rs")
    if missing_reason() is None:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(["*kafka_cluster needs ZooKeeper*"])


def test_the_examples_of_docs_testing_md_pass(pytester: pytest.Pytester) -> None:
    """Every test example in docs/testing.md runs as written, with the plugin's fixtures."""
    import re

    text = (ROOT / "docs" / "testing.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "def test_" in b]
    assert len(blocks) >= 7
    pytester.makepyfile(**{f"test_doc_{i}": block for i, block in enumerate(blocks)})
    result = pytester.runpytest_subprocess(*PLUGIN, "-q")
    tests = sum(block.count("\ndef test_") + block.startswith("def test_") for block in blocks)
    result.assert_outcomes(passed=tests)
