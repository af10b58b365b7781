"""Transactional offset commits in the group coordinator (TxnOffsetCommit, the COMMIT/ABORT
markers that end them, and their replay), against Kafka's OffsetMetadataManager rules."""

from __future__ import annotations

import struct

from _harness.groups import GroupHarness

import logcore
from pylog.coordinator import LoadedMarker, LoadedRecord, read_all
from pylog.errors import (
    CoordinatorLoadInProgressError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InvalidGroupIdError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
)
from pylog.group.classic import GroupState
from pylog.group.offsets import OffsetCommitPartition as P
from pylog.group.records import OffsetCommitRecord, decode_record

S = GroupState
PID, EPOCH = 4000, 3
UNSTABLE = UnstableOffsetCommitError.code


def txn_commit(h: GroupHarness, group: str | None, parts: list[P], pid: int = PID, epoch: int = EPOCH,
               **kwargs) -> list[tuple[str, int, int]]:
    p = h.call("txn_offset_commit", group, pid, epoch, parts, **kwargs)
    assert p.done
    return [(r.topic, r.partition, r.error_code) for r in p.result]


def commit(h: GroupHarness, group: str, parts: list[P]) -> None:
    p = h.call("offset_commit", group, -1, "", parts)
    assert p.done and all(r.error_code == 0 for r in p.result)


def fetch(h: GroupHarness, group: str, topics=None, stable: bool = False, coord=None) -> dict:
    r = (coord or h.coord).offset_fetch(group, topics, stable)
    assert r.error_code == 0
    return {(p.topic, p.partition): (p.committed_offset, p.error_code) for p in r.partitions}


def pending(h: GroupHarness, group: str, coord=None) -> dict:
    return {pid: {tp: c.offset for tp, c in offsets.items()}
            for pid, offsets in (coord or h.coord).pending_transactional_offsets(group).items()}


# --------------------------------------------------------------------------- write and visibility


def test_txn_commit_is_one_transactional_write_pending_until_the_marker() -> None:
    h = GroupHarness()
    p = h.coord.txn_offset_commit("g", PID, EPOCH, [P("t", 0, 10), P("t", 1, 20, 2, "m")])
    (w,) = h.coord.take_writes()
    assert (w.producer_id, w.producer_epoch, w.transactional) == (PID, EPOCH, True)
    recs = [decode_record(k, v) for k, v in w.records]
    assert all(isinstance(r, OffsetCommitRecord) for r in recs)
    assert [(r.topic, r.partition, r.value.offset) for r in recs] == [("t", 0, 10), ("t", 1, 20)]
    assert h.coord.has_open_transaction(PID)  # in flight already
    w.complete(0)
    h.entries.extend(("record", k, v, PID) for k, v in w.records)
    assert [(r.topic, r.partition, r.error_code) for r in p.result] == [("t", 0, 0), ("t", 1, 0)]
    # Invisible to OffsetFetch; RequireStable names the partitions with pending offsets only.
    assert fetch(h, "g", [("t", [0, 1, 2])]) == {("t", 0): (-1, 0), ("t", 1): (-1, 0), ("t", 2): (-1, 0)}
    assert fetch(h, "g", [("t", [0, 1, 2])], stable=True) == {
        ("t", 0): (-1, UNSTABLE), ("t", 1): (-1, UNSTABLE), ("t", 2): (-1, 0)}
    assert pending(h, "g") == {PID: {("t", 0): 10, ("t", 1): 20}}
    g = h.coord.group("g")
    assert g is not None and g.state == S.EMPTY and g.protocol_type is None  # a simple group
    h.marker(PID, commit=True)
    assert fetch(h, "g", stable=True) == {("t", 0): (10, 0), ("t", 1): (20, 0)}
    assert h.coord.offset_fetch("g", [("t", [1])]).partitions[0].metadata == "m"
    assert pending(h, "g") == {} and not h.coord.has_open_transaction(PID)


def test_abort_marker_drops_the_pending_offsets() -> None:
    h = GroupHarness()
    commit(h, "g", [P("t", 0, 5)])
    txn_commit(h, "g", [P("t", 0, 9), P("t", 1, 9)])
    h.marker(PID, commit=False)
    assert fetch(h, "g", stable=True) == {("t", 0): (5, 0)}
    assert pending(h, "g") == {}


def test_all_partitions_fetch_with_require_stable_flags_committed_partitions_with_pending() -> None:
    h = GroupHarness()
    commit(h, "g", [P("t", 0, 1), P("t", 1, 1)])
    txn_commit(h, "g", [P("t", 1, 7), P("u", 0, 7)])
    # Kafka lists committed partitions only; a pending-only partition is not listed.
    assert fetch(h, "g", stable=True) == {("t", 0): (1, 0), ("t", 1): (-1, UNSTABLE)}
    assert fetch(h, "g") == {("t", 0): (1, 0), ("t", 1): (1, 0)}


def test_a_marker_for_a_producer_without_pending_offsets_changes_nothing() -> None:
    h = GroupHarness()
    commit(h, "g", [P("t", 0, 1)])
    txn_commit(h, "g", [P("t", 0, 2)], pid=7)
    h.marker(8, commit=True)
    assert fetch(h, "g") == {("t", 0): (1, 0)} and list(pending(h, "g")) == [7]


def test_the_later_record_wins_when_a_commit_is_materialized() -> None:
    h = GroupHarness()
    # A plain commit written after the transactional one (before the marker) is kept.
    txn_commit(h, "g", [P("t", 0, 100), P("t", 1, 100)])
    commit(h, "g", [P("t", 0, 50)])
    h.marker(PID, commit=True)
    assert fetch(h, "g") == {("t", 0): (50, 0), ("t", 1): (100, 0)}
    # A plain commit written before the transactional one is replaced.
    commit(h, "g", [P("t", 2, 1)])
    txn_commit(h, "g", [P("t", 2, 2)], pid=9)
    h.marker(9, commit=True)
    assert fetch(h, "g")[("t", 2)] == (2, 0)
    loaded = h.replayed()
    assert fetch(h, "g", coord=loaded) == fetch(h, "g")


def test_one_marker_ends_the_producers_offsets_of_every_group_of_the_partition() -> None:
    h = GroupHarness()
    txn_commit(h, "a", [P("t", 0, 1)])
    txn_commit(h, "b", [P("t", 0, 2)])
    txn_commit(h, "a", [P("t", 0, 3)], pid=5)  # another producer, still open
    h.marker(PID, commit=True)
    assert fetch(h, "a") == {("t", 0): (1, 0)} and fetch(h, "b") == {("t", 0): (2, 0)}
    assert fetch(h, "a", stable=True) == {("t", 0): (-1, UNSTABLE)} and fetch(h, "b", stable=True) == {("t", 0): (2, 0)}
    h.marker(5, commit=True)
    assert fetch(h, "a", stable=True) == {("t", 0): (3, 0)}


# --------------------------------------------------------------------------- validation


def test_group_checks_follow_kafkas_rules_for_transactional_commits() -> None:
    h = GroupHarness()
    parts = [P("t", 0, 1)]
    assert txn_commit(h, "", parts) == [("t", 0, InvalidGroupIdError.code)]
    assert txn_commit(h, None, parts) == [("t", 0, InvalidGroupIdError.code)]
    # An unknown group with a generation: ILLEGAL_GENERATION in every version.
    assert txn_commit(h, "gone", parts, generation_id=2, member_id="m") == [("t", 0, IllegalGenerationError.code)]
    assert h.coord.group("gone") is None
    leader, follower = h.stable_group("g", 2, instance=None)
    assert txn_commit(h, "g", parts, generation_id=1, member_id="ghost") == [("t", 0, UnknownMemberIdError.code)]
    assert txn_commit(h, "g", parts, generation_id=5, member_id=leader) == [("t", 0, IllegalGenerationError.code)]
    # v0-2 carry no member and no generation: accepted on a group with members (an
    # OffsetCommit without them gets UNKNOWN_MEMBER_ID).
    assert txn_commit(h, "g", parts) == [("t", 0, 0)]
    assert txn_commit(h, "g", parts, generation_id=1, member_id=follower) == [("t", 0, 0)]
    # CompletingRebalance does not refuse transactional commits.
    h.join("g", leader, client_id="c0")
    h.join("g", follower, client_id="c1")
    assert h.coord.group("g").state == S.COMPLETING_REBALANCE
    assert txn_commit(h, "g", parts, generation_id=2, member_id=follower) == [("t", 0, 0)]


def test_static_member_fencing_and_metadata_size() -> None:
    h = GroupHarness(offset_metadata_max_bytes=4)
    (leader,) = h.stable_group("g", 1, instance="i1")
    parts = [P("t", 0, 1, -1, "12345"), P("t", 1, 1, -1, "1234")]
    assert txn_commit(h, "g", parts, generation_id=1, member_id="other", group_instance_id="i1") == [
        ("t", 0, FencedInstanceIdError.code), ("t", 1, FencedInstanceIdError.code)]
    assert txn_commit(h, "g", parts, generation_id=1, member_id=leader, group_instance_id="i1") == [
        ("t", 0, OffsetMetadataTooLargeError.code), ("t", 1, 0)]
    assert pending(h, "g") == {PID: {("t", 1): 1}}


def test_loading_and_failed_writes() -> None:
    h = GroupHarness()
    h.coord.begin_load()
    assert txn_commit(h, "g", [P("t", 0, 1)]) == [("t", 0, CoordinatorLoadInProgressError.code)]
    h.coord.complete_load()
    h.fail_code = 6  # NOT_LEADER_OR_FOLLOWER
    assert txn_commit(h, "g", [P("t", 0, 1)]) == [("t", 0, NotCoordinatorError.code)]
    h.fail_code = 47  # INVALID_PRODUCER_EPOCH from the partition's producer state: passed on
    assert txn_commit(h, "g", [P("t", 0, 1)]) == [("t", 0, 47)]
    h.fail_code = None
    assert pending(h, "g") == {} and not h.coord.has_open_transaction(PID)


# --------------------------------------------------------------------------- replay


def test_reload_keeps_an_open_transaction_pending_and_its_marker_still_applies() -> None:
    h = GroupHarness()
    commit(h, "g", [P("t", 0, 1)])
    txn_commit(h, "g", [P("t", 0, 2)], pid=1)
    txn_commit(h, "g", [P("t", 1, 3)], pid=2)
    h.marker(1, commit=True)
    txn_commit(h, "g", [P("t", 1, 4)], pid=3)
    h.marker(3, commit=False)
    h.coord.unload()
    h.coord = h.replayed()
    assert fetch(h, "g", [("t", [0, 1])], stable=True) == {("t", 0): (2, 0), ("t", 1): (-1, UNSTABLE)}
    assert pending(h, "g") == {2: {("t", 1): 3}} and h.coord.has_open_transaction(2)
    h.marker(2, commit=True)
    assert fetch(h, "g", stable=True) == {("t", 0): (2, 0), ("t", 1): (3, 0)}


def test_a_group_known_only_by_pending_offsets_is_loaded_as_a_simple_group() -> None:
    h = GroupHarness()
    txn_commit(h, "only-txn", [P("t", 0, 2)])
    loaded = h.replayed()
    g = loaded.group("only-txn")
    assert g is not None and g.protocol_type is None and pending(h, "only-txn", loaded) == {PID: {("t", 0): 2}}


def test_a_marker_landing_while_the_commit_is_being_written_applies_to_it() -> None:
    # The transaction coordinator aborts (timeout) while the TxnOffsetCommit batch is on its
    # way: the batch is in the log before the marker, but its write settles after it.
    for commit_it in (True, False):
        h = GroupHarness()
        commit(h, "g", [P("t", 0, 1)])
        p = h.coord.txn_offset_commit("g", PID, EPOCH, [P("t", 0, 9)])
        (w,) = h.coord.take_writes()
        base = len(h.entries)
        h.entries.extend(("record", k, v, PID) for k, v in w.records)
        h.log.extend(w.records)
        h.marker(PID, commit=commit_it)
        w.complete(base)
        assert p.result[0].error_code == 0
        assert not h.coord.has_open_transaction(PID) and pending(h, "g") == {}
        assert fetch(h, "g", stable=True) == {("t", 0): (9 if commit_it else 1, 0)}
        assert fetch(h, "g", stable=True, coord=h.replayed()) == fetch(h, "g", stable=True)
        # A later transaction of the same producer is pending again, as usual.
        txn_commit(h, "g", [P("t", 0, 20)])
        assert pending(h, "g") == {PID: {("t", 0): 20}}


# --------------------------------------------------------------------------- deletion and expiry


def test_delete_group_tombstones_pending_offsets_and_the_commit_marker_brings_nothing_back() -> None:
    h = GroupHarness()
    commit(h, "g", [P("t", 0, 1)])
    txn_commit(h, "g", [P("t", 0, 5), P("t", 1, 5)])
    assert h.call("delete_groups", ["g"]).result == [("g", 0)]
    tombstoned = {(r.topic, r.partition) for r in (decode_record(k, v) for k, v in h.log[-3:])
                  if isinstance(r, OffsetCommitRecord) and r.value is None}
    assert tombstoned == {("t", 0), ("t", 1)}  # one per partition, pending ones included
    h.marker(PID, commit=True)
    assert fetch(h, "g") == {} and h.coord.group("g") is None
    loaded = h.replayed()
    assert loaded.group_ids() == [] and fetch(h, "g", coord=loaded) == {}


def test_offset_delete_tombstones_a_partition_with_only_pending_offsets() -> None:
    h = GroupHarness()
    commit(h, "g", [P("t", 0, 1)])
    txn_commit(h, "g", [P("u", 0, 5)])
    r = h.call("offset_delete", "g", [("u", 0)]).result
    assert r.error_code == 0 and [p.error_code for p in r.partitions] == [0]
    rec = decode_record(*h.log[-1])
    assert isinstance(rec, OffsetCommitRecord) and (rec.topic, rec.value) == ("u", None)
    assert pending(h, "g") == {PID: {}}
    h.marker(PID, commit=True)
    assert fetch(h, "g") == {("t", 0): (1, 0)}


def test_expiry_keeps_partitions_and_groups_with_open_transactions() -> None:
    h = GroupHarness(offsets_retention_ms=10_000, offsets_retention_check_interval_ms=1_000)
    commit(h, "g", [P("t", 0, 1), P("t", 1, 1)])
    txn_commit(h, "g", [P("t", 1, 2)])
    txn_commit(h, "only", [P("t", 0, 2)])
    h.advance(20_000)
    assert fetch(h, "g") == {("t", 1): (1, 0)}  # t-0 expired, t-1 waits for the transaction
    assert h.coord.group("g") is not None and h.coord.group("only") is not None
    h.marker(PID, commit=True)
    assert fetch(h, "g") == {("t", 1): (2, 0)}
    h.advance(20_000)
    assert h.coord.group("g") is None and h.coord.group("only") is None


# --------------------------------------------------------------------------- loader


class _Region:
    def __init__(self, data: bytes) -> None:
        self.size = len(data)
        self._data = data

    def read(self) -> bytes:
        return self._data


class _FakeLog:
    """The reading side of a partition log over a list of batches (no storage)."""

    def __init__(self, batches: list[bytes]) -> None:
        self.batches = batches
        self.log_start_offset = 0
        self.log_end_offset = logcore.RecordBatch(batches[-1]).last_offset + 1

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True) -> _Region:
        out = b""
        for b in self.batches:
            if logcore.RecordBatch(b).last_offset >= offset and (not out or len(out) + len(b) <= max_bytes):
                out += b
        return _Region(out)


def _batch(base: int, records: list[tuple[bytes, bytes | None]], pid: int = -1, control: bool = False) -> bytes:
    builder = logcore.BatchBuilder(base_offset=base, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                   transactional=pid >= 0, is_control=control)
    for k, v in records:
        builder.append(v, key=k, timestamp_ms=1)
    return bytes(builder.build())


def test_the_loader_reads_transactional_batches_and_markers_in_log_order() -> None:
    def marker(kind: int) -> tuple[bytes, bytes]:
        return struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 7)

    plog = _FakeLog([
        _batch(0, [(b"k0", b"v0")]),
        _batch(1, [(b"k1", b"v1"), (b"k2", None)], pid=11),
        _batch(3, [marker(1)], pid=11, control=True),
        _batch(4, [(b"k3", b"v3")], pid=12),
        _batch(5, [marker(0)], pid=12, control=True),
        _batch(6, [(struct.pack(">hh", 0, 5), b"")], pid=13, control=True),  # a KRaft control type: skipped
    ])
    entries, end = read_all(plog)
    assert end == 7
    assert entries == [
        LoadedRecord(0, b"k0", b"v0", -1), LoadedRecord(1, b"k1", b"v1", 11), LoadedRecord(2, b"k2", None, 11),
        LoadedMarker(3, 11, True), LoadedRecord(4, b"k3", b"v3", 12), LoadedMarker(5, 12, False)]
