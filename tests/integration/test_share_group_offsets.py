"""Share-group offset admin APIs (DescribeShareGroupOffsets 90, AlterShareGroupOffsets 91,
DeleteShareGroupOffsets 92) against a pylog broker, with confluent-kafka 2.16
``ShareConsumer``s making the state, and pylog's admin client and ``pylog groups`` reading
and changing it (confluent-kafka 2.16's AdminClient has no share-group offset calls).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
import warnings
from typing import Any

import pytest

from pylog import errors
from pylog.client import Admin, TopicPartition
from tests.integration.conftest import BrokerProcess, cluster_size
from tests.integration.test_share_groups import (
    DEADLINE,
    OVERRIDES,
    _consumer,
    _group_configs,
    _produce,
    _records,
    _topic,
    _wait_members,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka  # noqa: F401  (the ShareConsumers of the helpers)

pytestmark = pytest.mark.skipif(bool(cluster_size()), reason="share groups: single node only")


@pytest.fixture(scope="module")
def obroker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("share-offsets") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    yield b
    b.stop()


def _consume_all(c: Any, n: int) -> list[tuple[int, int]]:
    """Poll until ``n`` records came; (partition, offset) of each. Implicit mode: the next
    poll (and close) accepts them."""
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + DEADLINE
    while len(got) < n and time.monotonic() < deadline:
        got += [(m.partition(), m.offset()) for m in _records(c.poll(0.5))]
    # One more poll sends the acceptance of the last records (close would release them).
    got += [(m.partition(), m.offset()) for m in _records(c.poll(0.5))]
    return got


def _wait_empty(bs: str, group: str) -> None:
    deadline = time.monotonic() + DEADLINE
    with Admin(bootstrap_servers=bs) as admin:
        while time.monotonic() < deadline:
            if admin.describe_groups([group])[group].state == "Empty":
                return
            time.sleep(0.1)
    raise AssertionError(f"share group {group} did not become empty")


def _wait_offsets(admin: Admin, group: str, want: dict[TopicPartition, int]) -> dict[Any, Any]:
    """Until the share group's start offsets are ``want`` (the last acknowledgements of a
    closing consumer are written after its leave)."""
    deadline = time.monotonic() + DEADLINE
    found: dict[Any, Any] = {}
    while time.monotonic() < deadline:
        found = admin.list_share_group_offsets(group)
        if {tp: i.start_offset for tp, i in found.items()} == want:
            return found
        time.sleep(0.1)
    raise AssertionError(f"start offsets {found} never became {want}")


def _pylog(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pylog", *args, "-b", broker.bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_describe_alter_and_delete_share_group_offsets(obroker: BrokerProcess) -> None:
    bs = obroker.bootstrap
    topic = _topic(bs, partitions=2)
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest")
    _produce(bs, topic, 10, partitions=2)  # offsets 0-4 in each partition
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = _consumer(bs, group, topic)
    with Admin(bootstrap_servers=bs) as admin:
        try:
            assert sorted(_consume_all(c, 10)) == [(p, o) for p in (0, 1) for o in range(5)]
            # A group with members: its offsets cannot be altered or deleted.
            with pytest.raises(errors.NonEmptyGroupError):
                admin.alter_share_group_offsets(group, {tp0: 0})
            with pytest.raises(errors.NonEmptyGroupError):
                admin.delete_share_group_offsets(group, [topic])
        finally:
            c.close()
        _wait_empty(bs, group)
        found = _wait_offsets(admin, group, {tp0: 5, tp1: 5})
        assert found[tp0].lag == 0 and found[tp1].lag == 0
        assert found[tp0].leader_epoch == 0
        # Named partitions: one without state answers None.
        other = _topic(bs)
        assert admin.list_share_group_offsets(group, [tp0, TopicPartition(other, 0)]) == {
            tp0: found[tp0], TopicPartition(other, 0): None}

        # Back to offset 2 on partition 0: lag 3, and a new member gets exactly those.
        admin.alter_share_group_offsets(group, {tp0: 2})
        now = admin.list_share_group_offsets(group)
        assert (now[tp0].start_offset, now[tp0].lag) == (2, 3)
        assert (now[tp1].start_offset, now[tp1].lag) == (5, 0)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.alter_share_group_offsets(group, {TopicPartition(topic, 7): 0})
        with pytest.raises(ValueError):
            admin.alter_share_group_offsets(group, {tp0: -1})
        c2 = _consumer(bs, group, topic)
        try:
            assert sorted(_consume_all(c2, 3)) == [(0, 2), (0, 3), (0, 4)]
            end = time.monotonic() + 2
            extra: list[Any] = []
            while time.monotonic() < end:  # nothing else comes
                extra += _records(c2.poll(0.3))
            assert extra == []
        finally:
            c2.close()
        _wait_empty(bs, group)
        _wait_offsets(admin, group, {tp0: 5, tp1: 5})

        # Delete the topic's state: gone from the list; the next member starts from
        # share.auto.offset.reset (earliest: everything again).
        assert admin.delete_share_group_offsets(group, [topic]) == {topic: None}
        assert admin.list_share_group_offsets(group) == {}
        again = admin.delete_share_group_offsets(group, [topic, "no-such-topic"])
        assert isinstance(again[topic], errors.UnknownTopicOrPartitionError)
        assert isinstance(again["no-such-topic"], errors.UnknownTopicOrPartitionError)
        c3 = _consumer(bs, group, topic)
        try:
            assert len(set(_consume_all(c3, 10))) == 10
        finally:
            c3.close()

        # Not a share group: GROUP_ID_NOT_FOUND for all three.
        for call in (lambda: admin.list_share_group_offsets("no-such-group"),
                     lambda: admin.alter_share_group_offsets("no-such-group", {tp0: 0}),
                     lambda: admin.delete_share_group_offsets("no-such-group", [topic])):
            with pytest.raises(errors.GroupIdNotFoundError):
                call()


def test_altered_start_offsets_survive_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("share-offsets-restart") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    try:
        bs = b.bootstrap
        topic = _topic(bs)
        group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest")
        _produce(bs, topic, 20)
        c = _consumer(bs, group, topic)
        try:
            _wait_members(bs, group, 1, lambda: c.poll(0.05))
        finally:
            c.close()
        _wait_empty(bs, group)
        tp = TopicPartition(topic, 0)
        with Admin(bootstrap_servers=bs) as admin:
            admin.alter_share_group_offsets(group, {tp: 12})
        assert b.stop() == 0
        b.start()
        with Admin(bootstrap_servers=bs) as admin:
            found = admin.list_share_group_offsets(group)
            assert (found[tp].start_offset, found[tp].lag) == (12, 8)
        c2 = _consumer(bs, group, topic)
        try:
            assert sorted(o for _p, o in _consume_all(c2, 8)) == list(range(12, 20))
        finally:
            c2.close()
    finally:
        b.stop()


def test_pylog_groups_share_offsets_commands(obroker: BrokerProcess) -> None:
    bs = obroker.bootstrap
    topic = _topic(bs, partitions=2)
    group = _group_configs(bs, f"g-{uuid.uuid4().hex[:6]}", share_auto_offset_reset="earliest")
    _produce(bs, topic, 10, partitions=2)
    c = _consumer(bs, group, topic)
    try:
        _consume_all(c, 10)
        busy = _pylog(obroker, "groups", "reset-offsets", group, "--topic", topic,
                      "--to-earliest", "--execute")
        assert busy.returncode == 1 and "not empty" in busy.stderr, busy.stderr
    finally:
        c.close()
    _wait_empty(bs, group)
    with Admin(bootstrap_servers=bs) as admin:
        _wait_offsets(admin, group, {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 5})

    desc = _pylog(obroker, "groups", "describe", group, "--offsets")
    assert desc.returncode == 0, desc.stderr
    rows = [ln.split() for ln in desc.stdout.splitlines() if ln.startswith(group)]
    assert rows == [[group, topic, "0", "0", "5", "0"], [group, topic, "1", "0", "5", "0"]], desc.stdout
    assert desc.stdout.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH",
                                                   "START-OFFSET", "LAG"]

    # Dry run by default: the plan is printed, nothing changes.
    dry = _pylog(obroker, "groups", "reset-offsets", group, "--topic", f"{topic}:1", "--to-offset", "1")
    assert dry.returncode == 0, dry.stderr
    assert [group, topic, "1", "1"] in [ln.split() for ln in dry.stdout.splitlines()]
    with Admin(bootstrap_servers=bs) as admin:
        assert admin.list_share_group_offsets(group)[TopicPartition(topic, 1)].start_offset == 5
    done = _pylog(obroker, "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr
    js = json.loads(_pylog(obroker, "groups", "describe", group, "--json").stdout)
    assert [(r["partition"], r["start_offset"], r["lag"]) for r in js[0]["offsets"]] == [(0, 0, 5), (1, 0, 5)]
    shift = _pylog(obroker, "groups", "reset-offsets", group, "--all-topics", "--shift-by", "1")
    assert shift.returncode == 2 and "--shift-by" in shift.stderr

    part = _pylog(obroker, "groups", "delete-offsets", group, "--topic", f"{topic}:0")
    assert part.returncode == 2, part.stderr
    deleted = _pylog(obroker, "groups", "delete-offsets", group, "--topic", topic)
    assert deleted.returncode == 0, deleted.stderr
    assert [topic, "Successful"] in [ln.split() for ln in deleted.stdout.splitlines()]
    empty = _pylog(obroker, "groups", "describe", group)
    assert empty.returncode == 0 and "no share-partition state" in empty.stderr
