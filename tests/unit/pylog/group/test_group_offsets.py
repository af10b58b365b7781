"""Offsets and admin APIs of the group coordinator: OffsetCommit/OffsetFetch, expiry,
DeleteGroups, OffsetDelete, ListGroups, DescribeGroups, and replay of what was written."""

from __future__ import annotations

from _harness.groups import GroupHarness, subscription

from pylog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InvalidGroupIdError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from pylog.group.classic import GroupState
from pylog.group.offsets import OffsetCommitPartition as P
from pylog.group.records import GroupMetadataRecord, OffsetCommitRecord, decode_record

S = GroupState
DAY_MS = 24 * 3600 * 1000


def commit(h: GroupHarness, group: str | None, parts: list[P], generation: int = -1, member: str = "",
           **kwargs) -> list[tuple[str, int, int]]:
    p = h.call("offset_commit", group, generation, member, parts, **kwargs)
    assert p.done
    return [(r.topic, r.partition, r.error_code) for r in p.result]


def fetch(h: GroupHarness, group: str, topics=None) -> dict[tuple[str, int], tuple[int, int, str | None]]:
    r = h.coord.offset_fetch(group, topics)
    assert r.error_code == 0
    return {(p.topic, p.partition): (p.committed_offset, p.committed_leader_epoch, p.metadata) for p in r.partitions}


# --------------------------------------------------------------------------- OffsetCommit / OffsetFetch


def test_simple_consumer_commit_and_fetch_round_trip_metadata() -> None:
    h = GroupHarness()
    assert commit(h, "simple", [P("t", 0, 42, 3, "hello"), P("t", 1, 7, -1, None)]) == [("t", 0, 0), ("t", 1, 0)]
    assert fetch(h, "simple") == {("t", 0): (42, 3, "hello"), ("t", 1): (7, -1, "")}
    assert fetch(h, "simple", [("t", [0, 5]), ("u", [0])]) == {
        ("t", 0): (42, 3, "hello"), ("t", 5): (-1, -1, ""), ("u", 0): (-1, -1, "")}
    g = h.coord.group("simple")
    assert g.state == S.EMPTY and g.protocol_type is None
    assert h.coord.list_groups()[0].protocol_type == ""


def test_fetch_of_an_unknown_group_is_not_an_error() -> None:
    h = GroupHarness()
    assert fetch(h, "nope", [("t", [0])]) == {("t", 0): (-1, -1, "")}
    assert fetch(h, "nope") == {}


def test_commit_errors_follow_kafkas_validation_order() -> None:
    h = GroupHarness()
    parts = [P("t", 0, 1)]
    assert commit(h, None, parts) == [("t", 0, InvalidGroupIdError.code)]
    # A generation for a group this coordinator does not know.
    assert commit(h, "gone", parts, generation=3, member="m", api_version=8) == [("t", 0, IllegalGenerationError.code)]
    assert commit(h, "gone", parts, generation=3, member="m", api_version=9) == [("t", 0, GroupIdNotFoundError.code)]
    leader, follower = h.stable_group("g", 2)
    assert commit(h, "g", parts, generation=1, member="ghost") == [("t", 0, UnknownMemberIdError.code)]
    assert commit(h, "g", parts, generation=2, member=leader) == [("t", 0, IllegalGenerationError.code)]
    # A simple-consumer commit into a group that has members.
    assert commit(h, "g", parts) == [("t", 0, UnknownMemberIdError.code)]
    assert commit(h, "g", parts, generation=1, member=follower) == [("t", 0, 0)]
    # During PreparingRebalance the current generation may still commit ...
    h.join("g", leader, client_id="c0")
    assert commit(h, "g", [P("t", 0, 2)], generation=1, member=follower) == [("t", 0, 0)]
    h.join("g", follower, client_id="c1")
    # ... but not during CompletingRebalance (the new generation is not synced yet).
    assert h.coord.group("g").state == S.COMPLETING_REBALANCE
    assert commit(h, "g", parts, generation=2, member=follower) == [("t", 0, RebalanceInProgressError.code)]
    assert fetch(h, "g") == {("t", 0): (2, -1, "")}


def test_metadata_too_large_fails_only_that_partition() -> None:
    h = GroupHarness(offset_metadata_max_bytes=10)
    out = commit(h, "g", [P("t", 0, 1, -1, "x" * 11), P("t", 1, 2, -1, "x" * 10)])
    assert out == [("t", 0, OffsetMetadataTooLargeError.code), ("t", 1, 0)]
    assert fetch(h, "g") == {("t", 1): (2, -1, "x" * 10)}


def test_failed_commit_write_is_reported_and_not_visible() -> None:
    h = GroupHarness()
    commit(h, "g", [P("t", 0, 1)])
    h.fail_code = 6  # NOT_LEADER_OR_FOLLOWER
    assert commit(h, "g", [P("t", 0, 2)]) == [("t", 0, NotCoordinatorError.code)]
    h.fail_code = 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert commit(h, "g", [P("t", 0, 3)]) == [("t", 0, CoordinatorNotAvailableError.code)]
    assert fetch(h, "g") == {("t", 0): (1, -1, "")}


def test_commit_is_answered_only_once_durable() -> None:
    h = GroupHarness()
    p = h.coord.offset_commit("g", -1, "", [P("t", 0, 5)])
    assert not p.done and fetch(h, "g") == {}
    (w,) = h.coord.take_writes()
    rec = decode_record(*w.records[0])
    assert isinstance(rec, OffsetCommitRecord) and rec.value is not None and rec.value.offset == 5
    w.complete()
    assert p.result[0].error_code == 0 and fetch(h, "g") == {("t", 0): (5, -1, "")}


def test_retention_time_writes_a_v1_value_that_expires_at_its_own_time() -> None:
    h = GroupHarness(offsets_retention_check_interval_ms=1_000)
    commit(h, "g", [P("t", 0, 5)], retention_time_ms=5_000)
    assert h.log[-1][1][:2] == b"\x00\x01"  # value version 1 carries expireTimestamp
    h.advance(4_000)
    assert fetch(h, "g") != {}
    h.advance(2_000)
    assert fetch(h, "g") == {}


def test_loading_answers_commits_and_fetches_with_load_in_progress() -> None:
    h = GroupHarness()
    h.coord.begin_load()
    assert commit(h, "g", [P("t", 0, 1)]) == [("t", 0, CoordinatorLoadInProgressError.code)]
    assert h.coord.offset_fetch("g", None).error_code == CoordinatorLoadInProgressError.code
    assert h.coord.describe_groups(["g"])[0].error_code == CoordinatorLoadInProgressError.code


# --------------------------------------------------------------------------- expiry


def test_offsets_of_an_empty_group_expire_after_retention_since_it_emptied() -> None:
    h = GroupHarness(offsets_retention_ms=DAY_MS, offsets_retention_check_interval_ms=60_000)
    leader, = h.stable_group("g", 1)
    commit(h, "g", [P("t", 0, 9)], generation=1, member=leader)
    h.call("leave_group", "g", [(leader, None)])
    assert h.coord.group("g").state == S.EMPTY
    h.advance(DAY_MS - 60_000)
    assert fetch(h, "g") == {("t", 0): (9, -1, "")}
    h.advance(120_000)  # the first check after a day since the group emptied
    assert fetch(h, "g") == {}
    assert h.coord.group("g") is None  # no offsets left and empty: the group goes too
    assert isinstance(decode_record(*h.log[-1]), GroupMetadataRecord) and h.log[-1][1] is None


def test_simple_group_offsets_expire_from_their_commit_time() -> None:
    h = GroupHarness(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=10_000)
    commit(h, "s", [P("t", 0, 1)])
    h.advance(50_000)
    commit(h, "s", [P("t", 1, 1)])
    h.advance(50_000)
    assert set(fetch(h, "s")) == {("t", 1)}


def test_stable_consumer_group_keeps_subscribed_topics_only() -> None:
    h = GroupHarness(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=10_000)
    (leader,) = h.stable_group("g", 1, session=1_000_000, protocols=[("range", subscription("t"))])
    commit(h, "g", [P("t", 0, 1), P("old", 0, 1)], generation=1, member=leader)
    h.advance(90_000)
    assert set(fetch(h, "g")) == {("t", 0), ("old", 0)}
    h.advance(20_000)
    assert h.coord.group("g").state == S.STABLE
    assert set(fetch(h, "g")) == {("t", 0)}


# --------------------------------------------------------------------------- DeleteGroups / OffsetDelete


def test_delete_groups() -> None:
    h = GroupHarness()
    commit(h, "empty", [P("t", 0, 1), P("t", 1, 2)])
    h.stable_group("busy", 1)
    p = h.call("delete_groups", ["empty", "busy", "nope", None])
    assert p.result == [("empty", 0), ("busy", NonEmptyGroupError.code), ("nope", GroupIdNotFoundError.code),
                        ("", InvalidGroupIdError.code)]
    assert h.coord.group("empty") is None and fetch(h, "empty") == {}
    kinds = [decode_record(k, v) for k, v in h.log[-3:]]
    assert [type(r).__name__ for r in kinds] == ["OffsetCommitRecord", "OffsetCommitRecord", "GroupMetadataRecord"]
    assert all(r.value is None for r in kinds)
    assert "empty" not in h.replayed().group_ids()


def test_delete_also_tombstones_commits_still_in_flight() -> None:
    h = GroupHarness()
    p = h.coord.offset_commit("g", -1, "", [P("t", 0, 5)])  # written, not yet durable
    d = h.coord.delete_groups(["g"])
    h.flush()
    assert p.result[0].error_code == 0 and d.result == [("g", 0)]
    assert fetch(h, "g") == {} and h.coord.group("g") is None
    replayed = h.replayed()
    assert replayed.committed_offsets("g") == {} and replayed.group_ids() == []


def test_empty_group_is_not_expired_while_a_commit_is_in_flight() -> None:
    h = GroupHarness(offsets_retention_ms=1_000, offsets_retention_check_interval_ms=1_000)
    h.coord.join_group("g", "", "consumer", [("range", b"")], 10_000)  # MEMBER_ID_REQUIRED
    h.flush()
    h.coord.offset_commit("g", -1, "", [P("t", 0, 5)])
    h.clock.advance(1_000)
    h.coord.tick()  # expiry runs while the commit's write is still outstanding
    assert h.coord.group("g") is not None
    h.flush()
    assert fetch(h, "g") == {("t", 0): (5, -1, "")}


def test_failed_delete_keeps_the_group() -> None:
    h = GroupHarness()
    commit(h, "g", [P("t", 0, 1)])
    h.fail_code = 56  # KAFKA_STORAGE_ERROR
    assert h.call("delete_groups", ["g"]).result == [("g", NotCoordinatorError.code)]
    assert h.coord.group("g") is not None and fetch(h, "g") == {("t", 0): (1, -1, "")}


def test_offset_delete() -> None:
    h = GroupHarness()
    assert h.call("offset_delete", "nope", [("t", 0)]).result.error_code == GroupIdNotFoundError.code
    (leader,) = h.stable_group("g", 1, session=1_000_000, protocols=[("range", subscription("t"))])
    commit(h, "g", [P("t", 0, 1), P("old", 0, 1)], generation=1, member=leader)
    r = h.call("offset_delete", "g", [("t", 0), ("old", 0), ("never", 3)]).result
    assert r.error_code == 0
    assert [(p.topic, p.error_code) for p in r.partitions] == [
        ("t", GroupSubscribedToTopicError.code), ("old", 0), ("never", 0)]
    assert set(fetch(h, "g")) == {("t", 0)}


def test_offset_delete_on_an_active_non_consumer_group() -> None:
    h = GroupHarness()
    h.stable_group("c", 1, protocol_type="connect")
    assert h.call("offset_delete", "c", [("t", 0)]).result.error_code == NonEmptyGroupError.code


# --------------------------------------------------------------------------- ListGroups / DescribeGroups


def test_list_groups_with_state_filter() -> None:
    h = GroupHarness()
    commit(h, "s", [P("t", 0, 1)])
    h.stable_group("g", 1)
    assert {(g.group_id, g.group_state) for g in h.coord.list_groups()} == {("s", "Empty"), ("g", "Stable")}
    assert [g.group_id for g in h.coord.list_groups(["stable"])] == ["g"]
    assert [g.group_id for g in h.coord.list_groups(types_filter=["consumer"])] == []


def test_describe_groups() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2)
    (d, missing) = h.coord.describe_groups(["g", "nope"])
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (0, "Stable", "consumer", "range")
    assert {m.member_id: m.member_assignment for m in d.members} == {
        leader: f"A-{leader}".encode(), follower: f"A-{follower}".encode()}
    assert all(m.member_metadata == subscription("t") and m.client_host == "/127.0.0.1" for m in d.members)
    assert (missing.error_code, missing.group_state) == (0, "Dead")
    h.join("g", leader, client_id="c0")
    (d,) = h.coord.describe_groups(["g"])
    assert d.group_state == "PreparingRebalance" and d.protocol_data == ""
    assert all(m.member_metadata == b"" for m in d.members)


# --------------------------------------------------------------------------- replay


def test_replay_rebuilds_offsets_and_stable_groups() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2)
    commit(h, "g", [P("t", 0, 10, 4, "m")], generation=1, member=leader)
    commit(h, "g", [P("t", 0, 11, 4, "n")], generation=1, member=follower)
    commit(h, "simple", [P("u", 2, 3)])
    h.call("offset_delete", "simple", [("u", 2)])
    commit(h, "simple", [P("u", 3, 4)])
    loaded = h.replayed()
    for gid in ("g", "simple"):
        assert loaded.committed_offsets(gid) == h.coord.committed_offsets(gid)
    g, lg = h.coord.group("g"), loaded.group("g")
    assert lg.state == S.STABLE
    assert (lg.generation_id, lg.protocol_type, lg.protocol_name, lg.leader_id) == (
        g.generation_id, g.protocol_type, g.protocol_name, g.leader_id)
    assert {m: x.assignment for m, x in lg.members.items()} == {m: x.assignment for m, x in g.members.items()}
    assert loaded.group("simple").protocol_type is None
    # The loaded coordinator serves the members as they were.
    assert loaded.heartbeat("g", 1, follower) == 0


def test_replay_skips_foreign_record_types_and_refuses_garbage() -> None:
    import pytest

    from pylog.group.records import CoordinatorRecordError

    h = GroupHarness()
    h.coord.begin_load()
    h.coord.replay(b"\x00\x10" + b"future-record-stuff", b"x")  # type 16: skipped
    with pytest.raises(CoordinatorRecordError):
        h.coord.replay(b"\x00\x01\x00", None)
    h.coord.complete_load()
    assert h.coord.group_ids() == []


# -- settling a commit from the records it built (no decode of its own bytes) -------------

def test_stored_offset_commit_is_what_decoding_the_encoded_record_gives() -> None:
    from pylog.group.records import encode_offset_commit, stored_offset_commit

    cases = [
        dict(offset=0),
        dict(offset=42, leader_epoch=7, metadata="m\u00e9ta", commit_timestamp=1_700_000_000_000),
        # v1 value (a retention time): no leader epoch in the bytes, -1 read back
        dict(offset=9, leader_epoch=5, metadata="", commit_timestamp=10, expire_timestamp=99),
        dict(offset=(1 << 63) - 1, leader_epoch=(1 << 31) - 1, metadata="x" * 300, commit_timestamp=-1),
    ]
    for kw in cases:
        key, value = encode_offset_commit("g", "t\u00fc", 3, **kw)
        assert stored_offset_commit("g", "t\u00fc", 3, **kw) == decode_record(key, value), kw


def test_settle_with_built_records_matches_settle_by_decoding() -> None:
    from pylog.group.offsets import CommitRecords, OffsetMetadataManager

    parts = [P("t", 0, 5, 2, "a"), P("t", 1, 6, -1, None), P("u", 0, 7, 3, "b" * 10)]
    states = []
    for built in (True, False):
        m = OffsetMetadataManager(offset_metadata_max_bytes=4096)
        results, records = m.commit_records("g", parts, now_ms=1000, retention_time_ms=50)
        assert type(records) is CommitRecords and len(records.decoded) == len(records) == 3
        assert m.has_pending("g")
        m.settle("g", records if built else list(records), True, base_offset=10)
        assert not m.has_pending("g")
        states.append(m.committed("g"))
    assert states[0] == states[1]
    assert {tp: (c.offset, c.leader_epoch, c.expire_timestamp_ms, c.record_offset)
            for tp, c in states[0].items()} == {
        ("t", 0): (5, -1, 1050, 10), ("t", 1): (6, -1, 1050, 11), ("u", 0): (7, -1, 1050, 12)}


def test_a_failed_write_settled_from_built_records_changes_nothing() -> None:
    from pylog.group.offsets import OffsetMetadataManager

    m = OffsetMetadataManager(offset_metadata_max_bytes=4096)
    _, records = m.commit_records("g", [P("t", 0, 5, 2, "a")], now_ms=1000)
    m.settle("g", records, False, base_offset=-1)
    assert m.committed("g") == {} and not m.has_pending("g")


def test_records_changed_after_they_were_built_are_settled_from_their_bytes() -> None:
    from pylog.group.offsets import OffsetMetadataManager
    from pylog.group.records import encode_offset_commit

    m = OffsetMetadataManager(offset_metadata_max_bytes=4096)
    _, records = m.commit_records("g", [P("t", 0, 5, 2, "a")], now_ms=1000)
    records.append(encode_offset_commit("g", "t", 1, offset=8, commit_timestamp=1000))
    m.settle("g", records, True, base_offset=3)
    assert {tp: (c.offset, c.record_offset) for tp, c in m.committed("g").items()} == {
        ("t", 0): (5, 3), ("t", 1): (8, 4)}
