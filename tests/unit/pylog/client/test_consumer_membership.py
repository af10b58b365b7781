"""The consumer group protocol member (``_consumer_membership``): its state machine, what
each heartbeat carries, reconciliation (revoke first, then assign, then acknowledge),
fencing and the offsets' member epoch. A stub coordinator connection answers canned
responses (no network); the core is a recording stub."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from pylog import errors
from pylog.client.aio._cluster import Cluster, PartitionInfo, TopicInfo
from pylog.client.aio._consumer_membership import (
    TRANSITIONS,
    ConsumerMembership,
    MemberState,
    new_member_id,
)
from pylog.client.aio._group_base import Generation, SubscriptionState
from pylog.client.errors import CommitFailedError, IllegalStateError
from pylog.client.records import TopicPartition
from pylog.protocol.messages import ConsumerGroupHeartbeatResponse as Resp

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
S = MemberState


class StubConnection:
    def __init__(self, *responses: Any, version: int = 1) -> None:
        self.responses = list(responses)
        self.sent: list[Any] = []
        self.closed = False
        self.version = version

    def version_for(self, cls: Any, max_version: int | None = None) -> int:
        return self.version

    async def send(self, body: Any, version: int | None = None, *, timeout: float | None = None) -> Any:
        self.sent.append(body)
        r = self.responses.pop(0)
        return r(body) if callable(r) else r

    async def close(self) -> None:
        self.closed = True


class Owner:
    """The consumer core as the membership sees it: the assignment and the callbacks."""

    def __init__(self) -> None:
        self.assignment: list[TopicPartition] = []
        self.pending: set[TopicPartition] = set()
        self.events: list[tuple[str, list[TopicPartition]]] = []
        self.commits: list[list[TopicPartition] | None] = []

    def owned_partitions(self) -> list[TopicPartition]:
        return list(self.assignment)

    def set_assignment(self, partitions: list[TopicPartition]) -> None:
        self.assignment = list(partitions)
        self.pending -= set(partitions)

    def mark_pending_revocation(self, partitions: list[TopicPartition]) -> None:
        self.pending |= set(partitions)

    def refresh_wanted_topics(self) -> None:
        pass

    def wake(self) -> None:
        pass

    async def commit_before_revocation(self, partitions: list[TopicPartition] | None,
                                       timeout: float) -> None:
        self.commits.append(partitions)

    async def invoke_listener(self, kind: str, partitions: list[TopicPartition]) -> BaseException | None:
        self.events.append((kind, list(partitions)))
        return None


def tps(*pairs: tuple[str, int]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, p in pairs]


def assignment(*topics: tuple[uuid.UUID, list[int]]) -> Any:
    return Resp.Assignment(topic_partitions=[Resp.TopicPartitions(topic_id=t, partitions=ps)
                                             for t, ps in topics])


def member(conn: StubConnection, **settings: Any) -> tuple[ConsumerMembership, Owner]:
    from pylog.client.config import CONSUMER, resolve

    s = resolve(CONSUMER, {"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                           "group.protocol": "consumer", **settings}, {})
    cluster = Cluster([("127.0.0.1", 1)], client_id="c", request_timeout=1, connect_timeout=1,
                      metadata_max_age=1e12)
    cluster._need_update = False
    for name, tid in (("a", T1), ("b", T2)):
        cluster.topics[name] = TopicInfo(
            name, 0, {p: PartitionInfo(p, 0, 0, [0], [0], 0) for p in range(3)}, tid, False)
    sub = SubscriptionState()
    sub.topics = frozenset({"a", "b"})
    owner = Owner()
    m = ConsumerMembership(cluster, s, "c", sub, owner)  # type: ignore[arg-type]
    m.coordinator, m.coordinator_conn = (0, "127.0.0.1", 1), conn  # type: ignore[assignment]
    return m, owner


def run(fn: Callable[[], Any]) -> Any:
    return asyncio.run(fn())


def test_member_ids_are_kafka_uuids() -> None:
    ids = {new_member_id() for _ in range(100)}
    assert len(ids) == 100 and all(len(i) == 22 and "=" not in i for i in ids)


def test_every_state_has_transitions_and_illegal_ones_are_refused() -> None:
    assert set(TRANSITIONS) == set(MemberState)

    async def go() -> None:
        m, _ = member(StubConnection())
        with pytest.raises(IllegalStateError, match="unsubscribed -> stable"):
            m._set_state(S.STABLE)

    run(go)


def test_join_sends_everything_then_only_what_changed() -> None:
    async def go() -> None:
        conn = StubConnection(
            Resp(member_id=None, member_epoch=5, heartbeat_interval_ms=700,
                 assignment=assignment((T1, [0, 1]))),
            Resp(member_epoch=5, heartbeat_interval_ms=700),
            Resp(member_epoch=5, heartbeat_interval_ms=700),
        )
        m, owner = member(conn, **{"group.instance.id": "i1", "group.remote.assignor": "range",
                                   "client.rack": "r1", "max.poll.interval.ms": 9000})
        m._join()
        await m._heartbeat()
        join = conn.sent[0]
        assert (join.member_id, join.member_epoch, join.instance_id) == (m.member_id, 0, "i1")
        assert (join.rebalance_timeout_ms, join.server_assignor, join.rack_id) == (9000, "range", "r1")
        assert join.subscribed_topic_names == ["a", "b"] and join.topic_partitions == []
        assert m.state is S.RECONCILING and m.member_epoch == 5 and m.heartbeat_interval == 0.7
        await m._reconcile()
        assert owner.assignment == tps(("a", 0), ("a", 1))
        assert owner.events == [("assigned", tps(("a", 0), ("a", 1)))]
        assert m.state is S.ACKNOWLEDGING
        await m._heartbeat()  # the acknowledgement: the owned partitions, nothing else
        ack = conn.sent[1]
        assert ack.member_epoch == 5 and ack.instance_id == "i1"
        assert [(t.topic_id, t.partitions) for t in ack.topic_partitions] == [(T1, [0, 1])]
        assert (ack.rebalance_timeout_ms, ack.subscribed_topic_names, ack.server_assignor,
                ack.rack_id) == (-1, None, None, None)
        assert m.state is S.STABLE
        m.subscription.topics = frozenset({"a"})
        await m._heartbeat()  # a changed subscription goes alone
        changed = conn.sent[2]
        assert changed.subscribed_topic_names == ["a"] and changed.topic_partitions is None

    run(go)


def test_a_regex_subscription_is_sent_as_the_regex() -> None:
    import re

    async def go() -> None:
        conn = StubConnection(Resp(member_epoch=1, heartbeat_interval_ms=500, assignment=assignment()))
        m, _ = member(conn)
        m.subscription.pattern = re.compile("^a.*")
        m._join()
        await m._heartbeat()
        assert conn.sent[0].subscribed_topic_regex == "^a.*"
        assert conn.sent[0].subscribed_topic_names is None

    run(go)


def test_reconciliation_revokes_first_then_assigns() -> None:
    async def go() -> None:
        conn = StubConnection(
            Resp(member_epoch=1, heartbeat_interval_ms=500, assignment=assignment((T1, [0, 1, 2]))),
            Resp(member_epoch=1, heartbeat_interval_ms=500, assignment=assignment((T1, [0]))),
            Resp(member_epoch=2, heartbeat_interval_ms=500, assignment=assignment((T1, [0]), (T2, [2]))),
        )
        m, owner = member(conn, **{"enable.auto.commit": True})
        m._join()
        await m._heartbeat()
        await m._reconcile()
        await m._heartbeat()  # acknowledges a-0..2; the answer revokes a-1, a-2
        assert m.state is S.RECONCILING
        await m._reconcile()
        # Kafka's order: commit what was consumed, on_revoke, then on_assign (even empty).
        assert owner.events[-2:] == [("revoked", tps(("a", 1), ("a", 2))), ("assigned", [])]
        assert owner.commits == [None, None]  # all consumed, before each change
        assert owner.assignment == tps(("a", 0)) and m.current_epoch == 1
        await m._heartbeat()  # acknowledges a-0 alone; then epoch 2 adds b-2
        assert [(t.topic_id, t.partitions) for t in conn.sent[2].topic_partitions] == [(T1, [0])]
        await m._reconcile()
        assert owner.events[-1] == ("assigned", tps(("b", 2)))
        assert owner.assignment == tps(("a", 0), ("b", 2)) and m.member_epoch == 2

    run(go)


def test_an_unknown_topic_id_waits_for_the_metadata() -> None:
    async def go() -> None:
        T3 = uuid.UUID(int=3)
        conn = StubConnection(Resp(member_epoch=1, heartbeat_interval_ms=500,
                                   assignment=assignment((T1, [0]), (T3, [0]))))
        m, owner = member(conn)

        async def no_update(topics: Any = None) -> None:
            return None

        m.cluster.update = no_update  # type: ignore[method-assign]
        m._join()
        await m._heartbeat()
        await m._reconcile()
        assert owner.assignment == tps(("a", 0)) and m.unresolved_at >= 0
        assert m.current == frozenset({(T1, 0)})

    run(go)


@pytest.mark.parametrize("code", [errors.FencedMemberEpochError.code, errors.UnknownMemberIdError.code])
def test_a_fenced_member_loses_its_partitions_and_joins_again_with_its_id(code: int) -> None:
    async def go() -> None:
        conn = StubConnection(
            Resp(member_epoch=3, heartbeat_interval_ms=500, assignment=assignment((T1, [0]))),
            Resp(error_code=code),
        )
        m, owner = member(conn)
        member_id = m.member_id
        m._join()
        await m._heartbeat()
        await m._reconcile()
        await m._heartbeat()
        assert m.state is S.FENCED and owner.pending == set(tps(("a", 0)))
        with pytest.raises(CommitFailedError):
            m.commit_generation()
        await m._reconcile()
        assert owner.events[-1] == ("lost", tps(("a", 0))) and owner.assignment == []
        assert m.state is S.JOINING and m.member_epoch == 0 and m.member_id == member_id
        assert m._request().topic_partitions == [] and m._request().member_epoch == 0

    run(go)


@pytest.mark.parametrize("error", [errors.UnreleasedInstanceIdError, errors.GroupMaxSizeReachedError,
                                   errors.UnsupportedAssignorError, errors.InvalidRegularExpressionError,
                                   errors.GroupAuthorizationFailedError, errors.InvalidRequestError])
def test_fatal_heartbeat_errors_are_raised_by_poll(error: type[errors.ApiError]) -> None:
    async def go() -> None:
        m, _ = member(StubConnection(Resp(error_code=error.code, error_message="why")))
        m._join()
        await m._heartbeat()
        assert m.state is S.FATAL and m.needs_poll()
        loop = asyncio.get_running_loop()
        for _ in range(2):
            with pytest.raises(error, match="why"):
                await m.poll(loop.time() + 1)

    run(go)


def test_coordinator_errors_rediscover_and_send_everything_again() -> None:
    async def go() -> None:
        conn = StubConnection(
            Resp(member_epoch=1, heartbeat_interval_ms=500, assignment=assignment()),
            Resp(error_code=errors.NotCoordinatorError.code),
        )
        m, _ = member(conn)
        m._join()
        await m._heartbeat()
        await m._reconcile()
        await m._heartbeat()
        assert m.coordinator is None and m.state is S.STABLE
        full = m._request()
        assert full.subscribed_topic_names == ["a", "b"] and full.rebalance_timeout_ms == 300000
        assert full.topic_partitions == []

    run(go)


def test_commits_carry_the_member_epoch_and_stale_epochs_fail() -> None:
    async def go() -> None:
        conn = StubConnection(Resp(member_epoch=4, heartbeat_interval_ms=500, assignment=assignment()))
        m, _ = member(conn)
        m._join()
        with pytest.raises(errors.RebalanceInProgressError):
            m.commit_generation()  # joining: no epoch yet
        await m._heartbeat()
        gen = m.commit_generation()
        assert gen == Generation(4, m.member_id, None) and m.fetch_member() == (m.member_id, 4)
        stale = m.commit_error(errors.StaleMemberEpochError.code, gen)
        assert isinstance(stale, CommitFailedError)
        m.member_epoch = 5  # a newer epoch came meanwhile: retried with it
        retry = m.commit_error(errors.StaleMemberEpochError.code, gen)
        assert isinstance(retry, errors.StaleMemberEpochError) and retry.retriable
        assert isinstance(m.commit_error(errors.UnknownMemberIdError.code, gen), CommitFailedError)

    run(go)


def test_leaving_revokes_then_sends_epoch_minus_one_or_minus_two_for_static_members() -> None:
    for instance, epoch in ((None, -1), ("i1", -2)):
        async def go(instance: str | None = instance, epoch: int = epoch) -> None:
            conn = StubConnection(
                Resp(member_epoch=2, heartbeat_interval_ms=500, assignment=assignment((T2, [1]))),
                Resp(member_epoch=epoch),
            )
            settings = {"group.instance.id": instance} if instance else {}
            m, owner = member(conn, **settings)
            m._join()
            await m._heartbeat()
            await m._reconcile()
            await m.close()
            leave = conn.sent[-1]
            assert (leave.member_epoch, leave.member_id, leave.instance_id) == (epoch, m.member_id, instance)
            assert owner.events[-1] == ("revoked", tps(("b", 1))) and owner.assignment == []
            assert m.state is S.UNSUBSCRIBED

        run(go)
