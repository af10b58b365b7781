"""The group coordinator's ShareGroupStatePartitionMetadata (record 15, KIP-932 as Kafka 4.1
keeps it): which share partitions are initializing, initialized and deleting; only
initialized partitions are assigned; a failed or lost InitializeShareGroupState is tried
again; the record survives a reload; deletes and deleted topics. Driven through
``GroupCoordinator`` with a manual clock (the persister calls are the handler's: here the
test reports their outcome with ``initialized`` / ``uninitialized``)."""

from __future__ import annotations

import uuid
from typing import Any

from _harness.groups import GroupHarness

from pylog.group.records import decode_record
from pylog.group.share import state_metadata as sm
from pylog.group.share.records import (
    decode_share_group_state_metadata,
    encode_share_group_state_metadata,
)

T = uuid.UUID(int=7)
U = uuid.UUID(int=8)
TOPICS = {"t": (T, 3), "u": (U, 2)}
NAMES = {T: "t", U: "u"}


def hb(h: GroupHarness, member: str, epoch: int, *, names: list[str] | None = None,
       topics: Any = None, group: str = "sg") -> Any:
    if epoch == 0 and names is None:
        names = ["t"]
    pending = h.call("share_group_heartbeat", group, member, epoch, TOPICS if topics is None else topics,
                     rack_id=None, subscribed_topic_names=names, client_id="c", client_host="/127.0.0.1")
    assert pending.done
    return pending.result


def settle(h: GroupHarness, pending: Any) -> int:
    h.flush()
    assert pending.done
    return int(pending.result)


def state_records(h: GroupHarness) -> list[Any]:
    """The record-15 values written so far (None for a tombstone), in order."""
    out = []
    for key, value in h.log:
        rec = decode_record(key, value)
        if getattr(rec, "record_type", None) == 15:
            out.append(None if rec.value is None else decode_share_group_state_metadata(rec.value))
    return out


def test_partitions_are_assigned_once_initialized() -> None:
    h = GroupHarness()
    a = hb(h, "a", 0)
    # Nothing initialized yet: no partition assigned; the heartbeat asks for all of t's,
    # at the group epoch, and records them as initializing with its records.
    assert a.error_code == 0 and a.member_epoch == 1 and a.assignment == {}
    assert a.initialize == {T: {0, 1, 2}} and a.state_epoch == 1
    meta = h.coord.share.meta("sg")
    assert set(meta.initializing) == {T} and meta.initializing[T].partitions == {0, 1, 2}
    assert not meta.initialized
    assert state_records(h)[-1] == meta
    # While initializing, a heartbeat asks for nothing more.
    again = hb(h, "a", 1)
    assert again.initialize is None and again.assignment is None
    # The share coordinators answered: initialized. The next heartbeat bumps the group epoch
    # (Kafka's initializedAssignmentPending) and hands the partitions out.
    assert settle(h, h.coord.share.initialized("sg", {T: {0, 1, 2}}, NAMES)) == 0
    meta = h.coord.share.meta("sg")
    assert not meta.initializing and meta.initialized[T] == sm.InitEntry("t", frozenset({0, 1, 2}),
                                                                          meta.initialized[T].timestamp_ms)
    a2 = hb(h, "a", 1)
    assert a2.member_epoch == 2 and a2.assignment == {T: {0, 1, 2}} and a2.initialize is None
    # A second member gets them at once (initialized); the next heartbeat asks for nothing.
    b = hb(h, "b", 0)
    assert b.assignment == {T: {0, 1, 2}} and b.initialize is None


def test_a_failed_initialize_is_tried_again_at_the_next_heartbeat() -> None:
    h = GroupHarness()
    a = hb(h, "a", 0, names=["t", "u"])
    assert a.initialize == {T: {0, 1, 2}, U: {0, 1}}
    # InitializeShareGroupState failed (the handler answers the heartbeat with the error):
    # the partitions leave the initializing set, so the next heartbeat asks again.
    assert settle(h, h.coord.share.uninitialized("sg", a.initialize)) == 0
    assert h.coord.share.meta("sg").is_empty()
    retry = hb(h, "a", a.member_epoch)
    assert retry.initialize == {T: {0, 1, 2}, U: {0, 1}} and retry.assignment is None
    settle(h, h.coord.share.initialized("sg", retry.initialize, NAMES))
    assert hb(h, "a", retry.member_epoch).assignment == {T: {0, 1, 2}, U: {0, 1}}


def test_an_initialize_never_answered_is_done_again_after_the_retry_interval() -> None:
    h = GroupHarness(share_initialize_retry_interval_ms=10_000)
    a = hb(h, "a", 0)
    assert a.initialize == {T: {0, 1, 2}}
    h.advance(9_999)
    assert hb(h, "a", 1).initialize is None
    h.advance(1)
    late = hb(h, "a", 1)
    assert late.initialize == {T: {0, 1, 2}}  # taken as lost (a crash between the two records)
    assert h.coord.share.meta("sg").initializing[T].timestamp_ms == h.clock.time_ms()


def test_only_new_partitions_of_a_grown_topic_are_initialized() -> None:
    h = GroupHarness()
    a = hb(h, "a", 0)
    settle(h, h.coord.share.initialized("sg", a.initialize, NAMES))
    a = hb(h, "a", 1)
    assert a.assignment == {T: {0, 1, 2}}
    grown = {"t": (T, 5), "u": (U, 2)}
    g = hb(h, "a", a.member_epoch, topics=grown)
    assert g.initialize == {T: {3, 4}}
    # Until they are initialized, the member keeps the three it has.
    assert h.coord.share.groups["sg"].members["a"].assigned == {T: {0, 1, 2}}
    settle(h, h.coord.share.initialized("sg", g.initialize, NAMES))
    assert hb(h, "a", g.member_epoch, topics=grown).assignment == {T: {0, 1, 2, 3, 4}}


def test_the_record_survives_a_reload_between_initialize_and_assignment() -> None:
    """A coordinator that restarts (or fails over) after InitializeShareGroupState was
    answered and recorded, but before the member's next heartbeat: the reloaded coordinator
    assigns the partitions; one that restarts while they were initializing waits for the
    retry interval, then initializes them again."""
    h = GroupHarness(share_initialize_retry_interval_ms=10_000)
    a = hb(h, "a", 0, names=["t", "u"])
    settle(h, h.coord.share.initialized("sg", {T: {0, 1, 2}}, NAMES))  # u's still initializing
    h.coord = h.replayed()
    meta = h.coord.share.meta("sg")
    assert meta.initialized[T].partitions == {0, 1, 2} and meta.initializing[U].partitions == {0, 1}
    r = hb(h, "a", a.member_epoch)
    assert r.assignment == {T: {0, 1, 2}} and r.initialize is None
    h.advance(10_000)
    r = hb(h, "a", r.member_epoch)
    assert r.initialize == {U: {0, 1}}


def test_deletes_move_topics_through_deleting_and_the_group_tombstone_ends_the_record() -> None:
    h = GroupHarness()
    a = hb(h, "a", 0, names=["t", "u"])
    settle(h, h.coord.share.initialized("sg", a.initialize, NAMES))
    hb(h, "a", -1)
    # DeleteShareGroupOffsets of u: deleting until its state is deleted.
    pending, parts = h.coord.share.begin_delete("sg", TOPICS, {U: "u"})
    assert settle(h, pending) == 0 and parts == {U: {0, 1}}
    meta = h.coord.share.meta("sg")
    assert dict(meta.deleting) == {U: "u"} and set(meta.initialized) == {T}
    # Interrupted (a crash): a reload keeps u deleting, and the next delete does it again,
    # every partition of the topic.
    h.coord = h.replayed()
    pending, parts = h.coord.share.begin_delete("sg", TOPICS, {U: "u"})
    assert settle(h, pending) == 0 and parts == {U: {0, 1}}
    assert settle(h, h.coord.share.end_delete("sg", [U])) == 0
    assert not h.coord.share.meta("sg").deleting
    # DeleteGroups: every topic deleting first, then the group's tombstones, record 15's too.
    pending, parts = h.coord.share.begin_delete("sg", TOPICS)
    assert settle(h, pending) == 0 and parts == {T: {0, 1, 2}}
    assert dict(h.coord.share.meta("sg").deleting) == {T: "t"}
    (res,) = h.call("delete_groups", ["sg"]).result
    assert res == ("sg", 0)
    assert state_records(h)[-1] is None and "sg" not in h.coord.share.state_metadata
    assert "sg" not in h.replayed().share.state_metadata


def test_a_member_initializing_a_deleting_topic_takes_it_out_of_deleting() -> None:
    h = GroupHarness()
    a = hb(h, "a", 0)
    settle(h, h.coord.share.initialized("sg", a.initialize, NAMES))
    hb(h, "a", -1)
    settle(h, h.coord.share.begin_delete("sg", TOPICS)[0])
    b = hb(h, "b", 0)  # a DeleteShareGroupOffsets that failed half way, then a new member
    assert b.initialize == {T: {0, 1, 2}} and b.assignment == {}
    meta = h.coord.share.meta("sg")
    assert not meta.deleting and set(meta.initializing) == {T}


def test_deleted_topics_leave_the_record() -> None:
    h = GroupHarness()
    a = hb(h, "a", 0, names=["t", "u"])
    settle(h, h.coord.share.initialized("sg", a.initialize, NAMES))
    a = hb(h, "a", 1)
    # DeleteTopics on this broker: every group's record drops the topic.
    assert h.coord.share.forget_topics({U}) == {"sg": {U: {0, 1}}}
    h.flush()
    assert set(h.coord.share.meta("sg").initialized) == {T}
    assert h.replayed().share.meta("sg").topic_names() == {T: "t"}
    # A coordinator that did not see the deletion drops the topic at the next heartbeat once
    # the metadata gives its name to a new topic id (deleted and re-created), with the
    # partitions whose state to delete; the new topic is initialized.
    t2 = uuid.UUID(int=70)
    r = hb(h, "a", a.member_epoch, topics={"t": (t2, 3), "u": (U, 2)})
    assert r.delete_state == {T: {0, 1, 2}} and T not in h.coord.share.meta("sg").topic_names()
    assert r.initialize == {t2: {0, 1, 2}, U: {0, 1}}  # u was forgotten above: initialized again
    # A topic merely missing from the metadata (a cache still filling) is kept, and its
    # stale entry does not make every heartbeat bump the epoch.
    h2 = GroupHarness()
    a = hb(h2, "a", 0)
    settle(h2, h2.coord.share.initialized("sg", a.initialize, NAMES))
    a = hb(h2, "a", 1)
    assert a.member_epoch == 2
    r = hb(h2, "a", 2, topics={"u": (U, 2)})
    assert r.delete_state is None and set(h2.coord.share.meta("sg").initialized) == {T}
    epoch = r.member_epoch
    assert hb(h2, "a", epoch, topics={"u": (U, 2)}).member_epoch == epoch


def test_record_15_round_trips_in_kafkas_format() -> None:
    meta = sm.StatePartitionMetadata(
        initializing={U: sm.InitEntry("u", frozenset({1}), 1_700_000_000_123)},
        initialized={T: sm.InitEntry("t", frozenset({0, 2}), 1_700_000_000_000)},
        deleting={uuid.UUID(int=9): "gone"})
    key, value = encode_share_group_state_metadata("sg", meta)
    # Key: int16 record type 15, then GroupId (a non-flexible string) at key version 0.
    assert key == b"\x00\x0f\x00\x02sg"
    assert value is not None and value[:2] == b"\x00\x00"
    rec = decode_record(key, value)
    assert rec.record_type == 15 and rec.key.group_id == "sg"
    assert decode_share_group_state_metadata(rec.value) == meta
    tomb_key, tomb = encode_share_group_state_metadata("sg", None)
    assert tomb_key == key and tomb is None


def test_pure_transitions() -> None:
    empty = sm.StatePartitionMetadata()
    sub = {"t": (T, 3)}
    change = sm.to_initialize(empty, sub, now_ms=100, retry_ms=50)
    assert change == {T: sm.InitEntry("t", frozenset({0, 1, 2}), 100)}
    m = sm.with_initializing(empty, change)
    assert sm.to_initialize(m, sub, now_ms=149, retry_ms=50) == {}
    assert sm.to_initialize(m, sub, now_ms=150, retry_ms=50) == {T: sm.InitEntry("t", frozenset({0, 1, 2}), 150)}
    m = sm.with_initialized(m, {T: {0, 1}}, NAMES, 200)
    assert m.initializing[T].partitions == {2} and m.initialized[T].partitions == {0, 1}
    assert m.initialized[T].timestamp_ms == 100  # the initializing entry's
    assert sm.to_initialize(m, sub, now_ms=151, retry_ms=50) == {T: sm.InitEntry("t", frozenset({2}), 151)}
    assert sm.assignment_pending(m, sub, {"a": {T: {0}}}, True)
    assert not sm.assignment_pending(m, sub, {"a": {T: {0}}, "b": {T: {1}}}, True)
    assert not sm.assignment_pending(m, sub, {}, False)
    assert not sm.assignment_pending(m, {"t": (U, 3)}, {}, True)  # t is another topic now
    d = sm.with_deleting(m, {T: "t"})
    assert d.deleting == {T: "t"} and not d.initialized and not d.initializing
    assert sm.without_deleting(d, [T]).is_empty()
    assert sm.without_topics(m, [T]).is_empty()
