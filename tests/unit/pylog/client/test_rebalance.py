"""What subscribe() and commit() accept, and the group member's state machine (no network)."""

from __future__ import annotations

import asyncio
import re
from collections import namedtuple
from typing import Any

import pytest

from pylog.client.aio._cluster import Cluster
from pylog.client.aio._coordinator import ConsumerCoordinator
from pylog.client.aio._group_base import NO_GENERATION, Generation, MemberState, SubscriptionState
from pylog.client.aio._rebalance import RebalanceListener, as_offsets, as_pattern
from pylog.client.config import CONSUMER, resolve
from pylog.client.errors import IllegalStateError
from pylog.client.records import OffsetAndMetadata, TopicPartition


def test_subscribe_takes_names_or_a_pattern() -> None:
    assert as_pattern(["a", "b"], None) == (["a", "b"], None)
    assert as_pattern("a", None) == (["a"], None)
    names, pat = as_pattern("^a.*", None)  # confluent-kafka's form
    assert names is None and pat is not None and pat.pattern == "^a.*"
    names, pat = as_pattern(None, "x-\\d+")  # kafka-python's pattern=
    assert pat is not None and pat.fullmatch("x-12") and not pat.fullmatch("x-12y")
    compiled = re.compile("z")
    assert as_pattern(compiled, None) == (None, compiled)
    with pytest.raises(TypeError, match="not both"):
        as_pattern(["a"], "b")
    with pytest.raises(TypeError, match="needs topics"):
        as_pattern(None, None)
    with pytest.raises(ValueError, match="bad subscription pattern"):
        as_pattern(None, "(")
    with pytest.raises(ValueError, match="looks like a pattern"):
        as_pattern(["a", "^b"], None)
    with pytest.raises(ValueError, match="non-empty"):
        as_pattern(["a", ""], None)


def test_commit_offsets_in_every_accepted_form() -> None:
    tp = TopicPartition("t", 0)
    KpOffsetAndMetadata = namedtuple("KpOffsetAndMetadata", "offset metadata leader_epoch")
    CkTopicPartition = namedtuple("CkTopicPartition", "topic partition offset metadata")
    assert as_offsets({tp: 5}) == {tp: OffsetAndMetadata(5)}
    assert as_offsets({("t", 0): (5, "m")}) == {tp: OffsetAndMetadata(5, "m")}
    assert as_offsets({tp: OffsetAndMetadata(5, "m", 3)}) == {tp: OffsetAndMetadata(5, "m", 3)}
    assert as_offsets({tp: KpOffsetAndMetadata(5, "m", 0)}) == {tp: OffsetAndMetadata(5, "m", 0)}
    assert as_offsets({tp: KpOffsetAndMetadata(5, None, None)}) == {tp: OffsetAndMetadata(5, "", -1)}
    assert as_offsets([CkTopicPartition("t", 0, 5, "m")]) == {tp: OffsetAndMetadata(5, "m")}
    with pytest.raises(ValueError, match="ints >= 0"):
        as_offsets({tp: -1})
    with pytest.raises(TypeError, match="metadata is a str"):
        as_offsets({tp: (5, 7)})
    with pytest.raises(TypeError, match="expected an offset"):
        as_offsets({tp: "5"})
    with pytest.raises(TypeError, match="topic, partition and offset"):
        as_offsets([("t", 0)])


def test_listener_styles() -> None:
    calls: list[tuple[Any, ...]] = []

    class KpListener:
        def on_partitions_revoked(self, parts: list[TopicPartition]) -> None:
            calls.append(("revoked", parts))

        def on_partitions_assigned(self, parts: list[TopicPartition]) -> None:
            calls.append(("assigned", parts))

    parts = [TopicPartition("t", 0)]
    listener = RebalanceListener("consumer", KpListener())
    listener.get("lost")(parts)  # type: ignore[misc]  # no on_partitions_lost: revoked, as Kafka's default
    listener.get("assigned")(parts)  # type: ignore[misc]
    assert calls == [("revoked", parts), ("assigned", parts)]
    calls.clear()
    ck = RebalanceListener("consumer", on_assign=lambda c, p: calls.append(("on_assign", c, p)),
                           on_revoke=lambda c, p: calls.append(("on_revoke", c, p)))
    ck.get("lost")(parts)  # type: ignore[misc]  # no on_lost: on_revoke, as confluent-kafka does
    ck.get("assigned")(parts)  # type: ignore[misc]
    assert calls == [("on_revoke", "consumer", parts), ("on_assign", "consumer", parts)]
    assert RebalanceListener("consumer").get("assigned") is None
    with pytest.raises(TypeError, match="not both"):
        RebalanceListener("c", KpListener(), on_assign=print)
    with pytest.raises(TypeError, match="no on_partitions_revoked"):
        RebalanceListener("c", object())
    with pytest.raises(TypeError, match="on_revoke must be callable"):
        RebalanceListener("c", on_revoke=3)


class _Owner:
    def owned_partitions(self) -> list[TopicPartition]:
        return []

    def wake(self) -> None:
        pass

    def refresh_wanted_topics(self) -> None:
        pass


def _coordinator(**settings: Any) -> ConsumerCoordinator:
    s = resolve(CONSUMER, {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", **settings}, {})
    cluster = Cluster([("127.0.0.1", 1)], client_id="c", request_timeout=1, connect_timeout=1,
                      metadata_max_age=300)
    return ConsumerCoordinator(cluster, s, "c", SubscriptionState(), _Owner())  # type: ignore[arg-type]


def test_member_state_machine_refuses_illegal_transitions() -> None:
    async def go() -> None:
        c = _coordinator()
        assert c.state is MemberState.UNJOINED and c.generation == NO_GENERATION
        with pytest.raises(IllegalStateError, match="unjoined -> stable"):
            c._set_state(MemberState.STABLE)
        c._set_state(MemberState.PREPARING_REBALANCE)
        c._set_state(MemberState.COMPLETING_REBALANCE)
        c._set_state(MemberState.STABLE)
        c.generation = Generation(4, "member-1", "range")
        c.rejoin_needed = False
        assert c.generation_if_stable() == c.generation
        # ILLEGAL_GENERATION keeps the member id, UNKNOWN_MEMBER_ID does not (Kafka's rule).
        c.reset_state_and_rejoin("ILLEGAL_GENERATION", reset_member_id=False)
        assert (c.state, c.generation, c.rejoin_needed) == (
            MemberState.UNJOINED, Generation(-1, "member-1", None), True)
        assert c.generation_if_stable() is None and not c.rebalance_in_progress()
        c.reset_state_and_rejoin("UNKNOWN_MEMBER_ID", reset_member_id=True)
        assert c.generation == NO_GENERATION

    asyncio.run(go())


def test_protocols_and_backoff_follow_the_settings() -> None:
    async def go() -> None:
        c = _coordinator(**{"partition.assignment.strategy": "cooperative-sticky",
                            "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000})
        assert c.protocol == "cooperative"
        assert 0.08 <= c.backoff(0) <= 0.12 and 0.8 <= c.backoff(10) <= 1.2
        assert _coordinator().protocol == "eager"  # range + cooperative-sticky

    asyncio.run(go())
