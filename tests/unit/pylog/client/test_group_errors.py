"""How the group member handles each error code of the group APIs (Kafka's
``AbstractCoordinator``/``ConsumerCoordinator`` rules), with a stub coordinator connection
that answers canned responses (no network)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from pylog import errors
from pylog.client.aio._cluster import Cluster
from pylog.client.aio._coordinator import ConsumerCoordinator, _Retry
from pylog.client.aio._group_base import NO_GENERATION, Generation, MemberState, SubscriptionState
from pylog.client.aio._group_offsets import commit_offsets, fetch_committed
from pylog.client.config import CONSUMER, resolve
from pylog.client.errors import ClientClosedError, CommitFailedError, KafkaTimeoutError
from pylog.client.records import OffsetAndMetadata, TopicPartition
from pylog.protocol.messages import HeartbeatResponse, JoinGroupResponse, OffsetCommitResponse

TP = TopicPartition("t", 0)


class StubConnection:
    """Answers each request with the next canned response (or what a callable returns)."""

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.sent: list[Any] = []
        self.closed = False

    def version_for(self, cls: Any, max_version: int | None = None) -> int:
        return int(cls.VALID_VERSIONS[1])

    async def send(self, body: Any, version: int | None = None, *, timeout: float | None = None) -> Any:
        self.sent.append(body)
        r = self.responses.pop(0)
        return r(body) if callable(r) else r

    def send_nowait(self, body: Any, version: int | None = None) -> asyncio.Future[Any]:
        self.sent.append(body)
        r = self.responses.pop(0)
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(r(body) if callable(r) else r)
        return fut

    async def wait(self, fut: asyncio.Future[Any], timeout: float | None = None,
                   what: str = "request") -> Any:
        return await fut

    async def close(self) -> None:
        self.closed = True


class Owner:
    def owned_partitions(self) -> list[TopicPartition]:
        return []

    def wake(self) -> None:
        pass

    def refresh_wanted_topics(self) -> None:
        pass


def stable_member(conn: StubConnection, **settings: Any) -> ConsumerCoordinator:
    s = resolve(CONSUMER, {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", **settings}, {})
    cluster = Cluster([("127.0.0.1", 1)], client_id="c", request_timeout=1, connect_timeout=1,
                      metadata_max_age=300)
    sub = SubscriptionState()
    sub.topics = frozenset({"t"})
    c = ConsumerCoordinator(cluster, s, "c", sub, Owner())  # type: ignore[arg-type]
    c.coordinator, c.coordinator_conn = (0, "127.0.0.1", 1), conn  # type: ignore[assignment]
    for state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE, MemberState.STABLE):
        c._set_state(state)
    c.generation = Generation(3, "member-1", "range")
    c.rejoin_needed = False
    return c


def run(fn: Callable[[], Any]) -> Any:
    return asyncio.run(fn())


def heartbeat(code: int, **settings: Any) -> ConsumerCoordinator:
    async def go() -> ConsumerCoordinator:
        c = stable_member(StubConnection(HeartbeatResponse(error_code=code)), **settings)
        await c._heartbeat()
        return c

    return run(go)  # type: ignore[no-any-return]


def test_heartbeat_rebalance_in_progress_asks_the_next_poll_to_rejoin() -> None:
    c = heartbeat(errors.RebalanceInProgressError.code)
    assert c.rejoin_needed and c.state is MemberState.STABLE and c.heartbeat_failures == 0


def test_heartbeat_illegal_generation_keeps_the_member_id_unknown_member_does_not() -> None:
    c = heartbeat(errors.IllegalGenerationError.code)
    assert (c.state, c.generation, c.rejoin_needed) == (MemberState.UNJOINED, Generation(-1, "member-1", None), True)
    c = heartbeat(errors.UnknownMemberIdError.code)
    assert (c.state, c.generation) == (MemberState.UNJOINED, NO_GENERATION)


def test_heartbeat_fenced_instance_fails_the_next_poll() -> None:
    c = heartbeat(errors.FencedInstanceIdError.code, **{"group.instance.id": "i-1"})
    assert isinstance(c.fatal, errors.FencedInstanceIdError) and "i-1" in str(c.fatal)
    with pytest.raises(errors.FencedInstanceIdError, match="another consumer uses group.instance.id"):
        c._check_fatal()


def test_heartbeat_not_coordinator_looks_the_coordinator_up_again() -> None:
    async def go() -> None:
        conn = StubConnection(HeartbeatResponse(error_code=errors.NotCoordinatorError.code))
        c = stable_member(conn)
        await c._heartbeat()
        assert c.coordinator is None and c.coordinator_conn is None and c.heartbeat_failures == 1
        await asyncio.sleep(0)  # the old connection is closed in the background
        assert conn.closed

    run(go)


def test_heartbeat_error_for_an_older_generation_is_ignored() -> None:
    async def go() -> None:
        c = stable_member(StubConnection())

        def answer(req: Any) -> Any:
            c.generation = Generation(4, "member-1", "range")  # rejoined meanwhile
            return HeartbeatResponse(error_code=errors.IllegalGenerationError.code)

        c.coordinator_conn.responses.append(answer)  # type: ignore[union-attr]
        await c._heartbeat()
        assert c.state is MemberState.STABLE and c.generation.generation_id == 4

    run(go)


def test_join_member_id_required_rejoins_at_once_with_the_given_id() -> None:
    async def go() -> None:
        conn = StubConnection(JoinGroupResponse(error_code=errors.MemberIdRequiredError.code, member_id="c-42"))
        c = stable_member(conn)
        c.reset_state_and_rejoin("new", True)
        with pytest.raises(_Retry) as info:
            await c._join_and_sync(conn)  # type: ignore[arg-type]
        assert info.value.at_once and c.generation == Generation(-1, "c-42", None)
        assert conn.sent[0].member_id == "" and conn.sent[0].protocol_type == "consumer"
        assert [p.name for p in conn.sent[0].protocols] == ["range", "cooperative-sticky"]

    run(go)


def test_join_inconsistent_protocol_is_fatal_with_a_hint() -> None:
    async def go() -> None:
        conn = StubConnection(JoinGroupResponse(error_code=errors.InconsistentGroupProtocolError.code))
        c = stable_member(conn)
        with pytest.raises(errors.InconsistentGroupProtocolError, match="partition.assignment.strategy"):
            await c._join_and_sync(conn)  # type: ignore[arg-type]
        assert c.state is MemberState.UNJOINED

    run(go)


def commit_response(code: int) -> OffsetCommitResponse:
    R = OffsetCommitResponse
    return R(topics=[R.OffsetCommitResponseTopic(
        name="t", partitions=[R.OffsetCommitResponsePartition(partition_index=0, error_code=code)])])


def commit(c: ConsumerCoordinator, group_managed: bool = True, retry: bool = False) -> None:
    async def go() -> None:
        await commit_offsets(c, {TP: OffsetAndMetadata(5, "m")}, group_managed=group_managed,
                             deadline=None, retry=retry)

    asyncio.run(go())


def test_commit_rules() -> None:
    async def member(code: int) -> ConsumerCoordinator:
        return stable_member(StubConnection(commit_response(code)))

    # A commit carries the generation and member id of the stable membership.
    c = run(lambda: member(0))
    commit(c)
    sent = c.coordinator_conn.sent[0]  # type: ignore[union-attr]
    assert (sent.generation_id_or_member_epoch, sent.member_id) == (3, "member-1")
    assert sent.topics[0].partitions[0].committed_metadata == "m"
    # assign() members commit as a simple member: generation -1, no member id.
    c = run(lambda: member(0))
    commit(c, group_managed=False)
    sent = c.coordinator_conn.sent[0]  # type: ignore[union-attr]
    assert (sent.generation_id_or_member_epoch, sent.member_id) == (-1, "")
    # ILLEGAL_GENERATION: the group moved on; the member keeps its id and rejoins.
    c = run(lambda: member(errors.IllegalGenerationError.code))
    with pytest.raises(CommitFailedError, match="max.poll.interval.ms"):
        commit(c)
    assert c.generation == Generation(-1, "member-1", None) and c.rejoin_needed
    # REBALANCE_IN_PROGRESS: poll (to rejoin), then commit again.
    c = run(lambda: member(errors.RebalanceInProgressError.code))
    with pytest.raises(errors.RebalanceInProgressError, match="poll"):
        commit(c)
    assert c.rejoin_needed and c.generation.generation_id == 3
    # NOT_COORDINATOR: retriable, and the coordinator is looked up again.
    c = run(lambda: member(errors.NotCoordinatorError.code))
    with pytest.raises(errors.NotCoordinatorError):
        commit(c)
    assert c.coordinator is None
    # OFFSET_METADATA_TOO_LARGE is the caller's to fix.
    c = run(lambda: member(errors.OffsetMetadataTooLargeError.code))
    with pytest.raises(errors.OffsetMetadataTooLargeError, match="offset.metadata.max.bytes"):
        commit(c)


def test_commit_outside_a_stable_generation_is_refused_locally() -> None:
    c = run(lambda: _unjoined())
    with pytest.raises(CommitFailedError, match="not part of an active group"):
        commit(c)
    c._set_state(MemberState.PREPARING_REBALANCE)
    with pytest.raises(errors.RebalanceInProgressError, match="rebalancing"):
        commit(c)
    assert c.coordinator_conn.sent == []  # type: ignore[union-attr]


async def _unjoined() -> ConsumerCoordinator:
    c = stable_member(StubConnection())
    c.reset_state_and_rejoin("left", True)
    return c


def _commit_two(*responses: Any, topics_after_refresh: dict[str, int], skip_deleted: bool,
                deadline_in: float = 30.0) -> tuple[ConsumerCoordinator, float]:
    """Commit t-0 and gone-0 against canned OffsetCommit answers, the metadata refresh
    showing ``topics_after_refresh`` (name -> partitions); (member, seconds it took)."""
    from pylog.client.aio._cluster import PartitionInfo, TopicInfo

    async def go() -> tuple[ConsumerCoordinator, float]:
        c = stable_member(StubConnection(*responses), **{"retry.backoff.ms": 10})
        refreshed: list[set[str] | None] = []

        async def update(topics: set[str] | None = None) -> None:
            refreshed.append(topics)
            c.cluster.topics = {
                name: TopicInfo(name, 0, {p: PartitionInfo(p, 0, 0, [0], [0], 0) for p in range(n)},
                                None, False) for name, n in topics_after_refresh.items()}

        c.cluster.update = update  # type: ignore[method-assign]
        loop = asyncio.get_running_loop()
        start = loop.time()
        await commit_offsets(c, {TP: OffsetAndMetadata(5), TopicPartition("gone", 0): OffsetAndMetadata(7)},
                             group_managed=True, deadline=start + deadline_in, retry=True,
                             skip_deleted=skip_deleted)
        assert refreshed and refreshed[0] is not None and "gone" in refreshed[0]
        return c, loop.time() - start

    return asyncio.run(go())  # type: ignore[no-any-return]


def _answer(codes: dict[tuple[str, int], int]) -> OffsetCommitResponse:
    R = OffsetCommitResponse
    by_topic: dict[str, list[Any]] = {}
    for (t, p), code in codes.items():
        by_topic.setdefault(t, []).append(R.OffsetCommitResponsePartition(partition_index=p, error_code=code))
    return R(topics=[R.OffsetCommitResponseTopic(name=t, partitions=ps) for t, ps in by_topic.items()])


UNKNOWN = errors.UnknownTopicOrPartitionError.code


def test_commit_of_a_deleted_topics_partition() -> None:
    # The consumed positions: the deleted topic's partition is left out at once (the other
    # was committed by the same request), not retried until the deadline.
    c, took = _commit_two(_answer({("t", 0): 0, ("gone", 0): UNKNOWN}),
                          topics_after_refresh={"t": 1}, skip_deleted=True)
    assert took < 5 and len(c.coordinator_conn.sent) == 1  # type: ignore[union-attr]
    # Offsets the caller named: a clear error at once, not retried.
    with pytest.raises(errors.UnknownTopicOrPartitionError, match=r"gone-0 do not exist .*other partitions were"):
        _commit_two(_answer({("t", 0): 0, ("gone", 0): UNKNOWN}),
                    topics_after_refresh={"t": 1}, skip_deleted=False)
    # A partition beyond the topic's count is gone too.
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="gone-0"):
        _commit_two(_answer({("t", 0): 0, ("gone", 0): UNKNOWN}),
                    topics_after_refresh={"t": 1, "gone": 0}, skip_deleted=False)


def test_commit_retries_a_partition_the_coordinator_does_not_know_yet() -> None:
    # The topic exists (just created; KAFKA-6829): only the unknown partition is sent again.
    c, _ = _commit_two(_answer({("t", 0): 0, ("gone", 0): UNKNOWN}), _answer({("gone", 0): 0}),
                       topics_after_refresh={"t": 1, "gone": 1}, skip_deleted=False)
    sent = c.coordinator_conn.sent  # type: ignore[union-attr]
    assert len(sent) == 2
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in sent[1].topics] == [("gone", [0])]
    # Still unknown at the deadline: a timeout naming the error.
    answers = [_answer({("t", 0): 0, ("gone", 0): UNKNOWN})] + [_answer({("gone", 0): UNKNOWN})] * 200
    with pytest.raises(KafkaTimeoutError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        _commit_two(*answers, topics_after_refresh={"t": 1, "gone": 1}, skip_deleted=True,
                    deadline_in=0.5)


def test_commit_and_committed_on_a_closed_member_fail_at_once() -> None:
    async def go() -> None:
        c = stable_member(StubConnection())
        await c.close_link()
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(ClientClosedError, match="closed"):
            await commit_offsets(c, {TP: OffsetAndMetadata(5)}, group_managed=True,
                                 deadline=start + 30, retry=True)
        with pytest.raises(ClientClosedError):
            await fetch_committed(c, [TP], start + 30)
        assert loop.time() - start < 5

    asyncio.run(go())
