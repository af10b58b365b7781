"""The admin's group calls without a broker: coordinator retries (scripted answers from a
stand-in connection), ConsumerProtocol assignment decoding, and the argument parsers of
`pylog groups reset-offsets`. The same calls against a real broker and real group
consumers are in tests/integration/test_groups_admin_cli.py."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from pylog import errors
from pylog.cli.groups import UsageError, parse_datetime, parse_duration
from pylog.client.aio._group_admin import GroupAdmin, OffsetAndMetadata, decode_assignment
from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError
from pylog.client.records import TopicPartition
from pylog.protocol._schema import ConsumerProtocolAssignment
from pylog.protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

LOAD, NOT_COORD = errors.CoordinatorLoadInProgressError.code, errors.NotCoordinatorError.code


class Conn:
    """Answers each request with the next scripted answer for its API (a response, or an
    exception to raise); records what was asked."""

    def __init__(self, node_id: int, script: dict[type, list[Any]]) -> None:
        self.node_id = node_id
        self.script = script
        self.sent: list[tuple[int, Any]] = []

    def version_for(self, cls: Any, max_version: int | None = None) -> int:
        return {FindCoordinatorRequest: 4, OffsetFetchRequest: 9}[cls]

    async def send(self, req: Any, version: int | None = None) -> Any:
        self.sent.append((self.node_id, req))
        answer = self.script[type(req)].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class Cluster:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.brokers = {0: ("h", 1), 1: ("h", 2)}
        self.retry_backoff = 0.001
        self.updates = 0

    async def any_connection(self) -> Conn:
        self.conn.node_id = -1  # a bootstrap connection
        return self.conn

    async def connection(self, node: int) -> Conn:
        self.conn.node_id = node
        return self.conn

    async def update(self) -> None:
        self.updates += 1

    def request_update(self) -> None:
        self.updates += 1


def _found(node: int, code: int = 0) -> Any:
    R = FindCoordinatorResponse
    return R(coordinators=[R.Coordinator(key="g", node_id=node, host="h", port=1 + node,
                                         error_code=code, error_message=None)])


def _offsets(code: int = 0, offset: int = 7) -> Any:
    R = OffsetFetchResponse
    return R(groups=[R.OffsetFetchResponseGroup(group_id="g", error_code=code, topics=[] if code else [
        R.OffsetFetchResponseTopics(name="t", partitions=[R.OffsetFetchResponsePartitions(
            partition_index=0, committed_offset=offset, committed_leader_epoch=3, metadata="m",
            error_code=0)])])])


def _run(script: dict[type, list[Any]], timeout: float = 5.0) -> tuple[Any, Conn, Cluster]:
    conn = Conn(-1, script)
    cluster = Cluster(conn)
    admin = GroupAdmin(cluster, timeout)  # type: ignore[arg-type]
    result = asyncio.run(admin.list_group_offsets("g"))
    return result, conn, cluster


def test_loading_coordinator_is_asked_again() -> None:
    result, conn, _ = _run({FindCoordinatorRequest: [_found(1)],
                            OffsetFetchRequest: [_offsets(LOAD), _offsets(LOAD), _offsets()]})
    assert result == {TopicPartition("t", 0): OffsetAndMetadata(7, "m", 3)}
    # One lookup: a loading coordinator is still the coordinator.
    assert [type(r).__name__ for _, r in conn.sent] == [
        "FindCoordinatorRequest"] + ["OffsetFetchRequest"] * 3


def test_moved_coordinator_and_broken_connection_are_looked_up_again() -> None:
    result, conn, cluster = _run({
        FindCoordinatorRequest: [_found(0), _found(1), _found(1)],
        OffsetFetchRequest: [_offsets(NOT_COORD), KafkaConnectionError("reset"), _offsets()]})
    assert result[TopicPartition("t", 0)].offset == 7
    asked = [(n, type(r).__name__[:-7]) for n, r in conn.sent]
    assert asked == [(-1, "FindCoordinator"), (0, "OffsetFetch"), (-1, "FindCoordinator"),
                     (1, "OffsetFetch"), (-1, "FindCoordinator"), (1, "OffsetFetch")]
    assert cluster.updates >= 1  # a lost connection refreshes metadata


def test_coordinator_not_available_at_lookup_is_retried() -> None:
    code = errors.CoordinatorNotAvailableError.code
    result, _, _ = _run({FindCoordinatorRequest: [_found(-1, code), _found(0)],
                         OffsetFetchRequest: [_offsets(offset=2)]})
    assert result[TopicPartition("t", 0)].offset == 2


def test_retries_stop_at_the_timeout_naming_the_last_error() -> None:
    with pytest.raises(KafkaTimeoutError, match="COORDINATOR_LOAD_IN_PROGRESS"):
        _run({FindCoordinatorRequest: [_found(0)],
              OffsetFetchRequest: [_offsets(LOAD)] * 10_000}, timeout=0.2)


def test_other_errors_are_raised_at_once() -> None:
    code = errors.GroupAuthorizationFailedError.code
    with pytest.raises(errors.GroupAuthorizationFailedError, match="group 'g'"):
        _run({FindCoordinatorRequest: [_found(0)], OffsetFetchRequest: [_offsets(code)]})


# --------------------------------------------------------------------------- assignments


def _assignment(version: int, **parts: list[int]) -> bytes:
    a = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=p) for t, p in parts.items()],
        user_data=b"u")
    return version.to_bytes(2, "big") + a.encode(min(version, 3))


def test_assignments_decode_at_every_version() -> None:
    for version in range(4):
        got = decode_assignment(_assignment(version, b=[1, 0], a=[2]))
        assert got == [TopicPartition("a", 2), TopicPartition("b", 0), TopicPartition("b", 1)]
    # A newer version only appends fields: read as the newest known.
    assert decode_assignment(_assignment(7, a=[0]) + b"\x00\x00\x00\x01") == [TopicPartition("a", 0)]
    assert decode_assignment(b"") == [] and decode_assignment(None) == []


def test_bad_assignment_bytes_are_refused() -> None:
    with pytest.raises(errors.RemoteProtocolError):
        decode_assignment(b"\x00")
    with pytest.raises(errors.RemoteProtocolError):
        decode_assignment(b"\xff\xff" + _assignment(0, a=[0])[2:])
    with pytest.raises(errors.RemoteProtocolError):
        decode_assignment(_assignment(0, a=[0])[:-3])


# --------------------------------------------------------------------------- CLI arguments


@pytest.mark.parametrize(("text", "ms"), [
    ("PT30M", 1_800_000), ("P1DT2H", 93_600_000), ("PT0.5S", 500), ("pt1h", 3_600_000),
    ("P2D", 172_800_000), ("PT1H-30M", 1_800_000), ("-PT1S", -1000), ("PT-1.5S", -1500),
])
def test_durations_read_as_java_reads_them(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "1H", "PT1X", "P1W", "5 minutes"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(UsageError, match="PnDTnHnMnS"):
        parse_duration(text)


def test_datetimes_are_utc_unless_zoned() -> None:
    utc = datetime.datetime(2024, 3, 1, 12, 30, 0, 250_000, tzinfo=datetime.timezone.utc)
    ms = int(utc.timestamp() * 1000)
    assert parse_datetime("2024-03-01T12:30:00.250") == ms
    assert parse_datetime("2024-03-01T12:30:00.250Z") == ms
    assert parse_datetime("2024-03-01T14:30:00.250+02:00") == ms
    assert parse_datetime("2024-03-01T12:30:00") == ms - 250
    for bad in ("2024-03-01", "2024-03-01 12:30:00", "yesterday", "2024-13-01T00:00:00"):
        with pytest.raises(UsageError, match="YYYY-MM-DDTHH:mm:SS.sss"):
            parse_datetime(bad)
