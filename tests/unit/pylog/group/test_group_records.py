"""``__consumer_offsets`` record framing (pylog.group.records).

Known answers are built by hand from the schema layouts (int16 key version = record type, then
the key fields; int16 value version, then the value fields), independently of the generated
codec; records that Kafka brokers wrote (tests/vectors/consumer_offsets.json) decode to what
they hold and re-encode to the same bytes; then round trips and hostile input.
"""

from __future__ import annotations

import json
import pathlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pylog.group.records import (
    ConsumerGroupRecord,
    CoordinatorRecordError,
    GroupMetadataRecord,
    OffsetCommitRecord,
    UnknownRecord,
    decode_record,
    encode_group_metadata,
    encode_offset_commit,
)
from pylog.protocol._records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    GroupMetadataValue,
)

TS = 1_700_000_000_000


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


# --------------------------------------------------------------------------- offset commits

OFFSET_KEY = i16(1) + s16("grp") + s16("topic") + i32(3)
OFFSET_VALUE_V3 = i16(3) + i64(42) + i32(7) + s16("meta") + i64(TS)
OFFSET_VALUE_V1 = i16(1) + i64(42) + s16("meta") + i64(TS) + i64(TS + 60_000)


def test_offset_commit_known_answer_v3() -> None:
    key, value = encode_offset_commit("grp", "topic", 3, offset=42, leader_epoch=7, metadata="meta", commit_timestamp=TS)
    assert key == OFFSET_KEY == bytes.fromhex("0001" "0003677270" "0005746f706963" "00000003")
    assert value == OFFSET_VALUE_V3
    assert value.hex() == "0003" "000000000000002a" "00000007" "00046d657461" "0000018bcfe56800"
    rec = decode_record(key, value)
    assert isinstance(rec, OffsetCommitRecord)
    assert (rec.group, rec.topic, rec.partition) == ("grp", "topic", 3)
    assert rec.value is not None
    assert (rec.value.offset, rec.value.leader_epoch, rec.value.metadata, rec.value.commit_timestamp) == (42, 7, "meta", TS)


def test_offset_commit_with_retention_is_written_at_v1_without_leader_epoch() -> None:
    _, value = encode_offset_commit(
        "grp", "topic", 3, offset=42, leader_epoch=7, metadata="meta", commit_timestamp=TS, expire_timestamp=TS + 60_000
    )
    assert value == OFFSET_VALUE_V1
    rec = decode_record(OFFSET_KEY, value)
    assert isinstance(rec, OffsetCommitRecord) and rec.value is not None
    assert rec.value.expire_timestamp == TS + 60_000
    assert rec.value.leader_epoch == -1  # not in v1


def test_offset_commit_key_version_0_and_old_values_are_read() -> None:
    key0 = i16(0) + s16("grp") + s16("topic") + i32(3)
    v0 = i16(0) + i64(5) + s16("") + i64(TS)
    rec = decode_record(key0, v0)
    assert isinstance(rec, OffsetCommitRecord) and rec.value is not None
    assert (rec.partition, rec.value.offset, rec.value.commit_timestamp) == (3, 5, TS)
    # v4 is flexible: compact string (length + 1 as uvarint) and an empty tagged-field section.
    v4 = i16(4) + i64(9) + i32(2) + bytes([5]) + b"meta" + i64(TS) + b"\x00"
    rec = decode_record(key0, v4)
    assert isinstance(rec, OffsetCommitRecord) and rec.value is not None
    assert (rec.value.offset, rec.value.leader_epoch, rec.value.metadata) == (9, 2, "meta")


def test_offset_tombstone() -> None:
    key, value = encode_offset_commit("grp", "topic", 3, offset=None)
    assert key == OFFSET_KEY and value is None
    assert decode_record(key, None) == OffsetCommitRecord("grp", "topic", 3, None)


# --------------------------------------------------------------------------- group metadata

def _member_v3(member_id: str, instance: str | None, sub: bytes, asg: bytes) -> bytes:
    inst = i16(-1) if instance is None else s16(instance)
    return (s16(member_id) + inst + s16("client") + s16("/127.0.0.1") + i32(300_000) + i32(45_000)
            + i32(len(sub)) + sub + i32(len(asg)) + asg)


GROUP_KEY = i16(2) + s16("grp")
GROUP_VALUE_V3 = (
    i16(3) + s16("consumer") + i32(4) + s16("range") + s16("m-1") + i64(TS) + i32(2)
    + _member_v3("m-1", None, b"\x00\x00sub1", b"\x00\x00asg1")
    + _member_v3("m-2", "static-2", b"\x00\x00sub2", b"")
)


def _group_value() -> GroupMetadataValue:
    m = GroupMetadataValue.MemberMetadata
    return GroupMetadataValue(
        protocol_type="consumer", generation=4, protocol="range", leader="m-1", current_state_timestamp=TS,
        members=[
            m(member_id="m-1", group_instance_id=None, client_id="client", client_host="/127.0.0.1",
              rebalance_timeout=300_000, session_timeout=45_000, subscription=b"\x00\x00sub1", assignment=b"\x00\x00asg1"),
            m(member_id="m-2", group_instance_id="static-2", client_id="client", client_host="/127.0.0.1",
              rebalance_timeout=300_000, session_timeout=45_000, subscription=b"\x00\x00sub2", assignment=b""),
        ],
    )


def test_group_metadata_known_answer_v3() -> None:
    key, value = encode_group_metadata("grp", _group_value())
    assert key == GROUP_KEY == bytes.fromhex("0002" "0003677270")
    assert value == GROUP_VALUE_V3
    rec = decode_record(key, value)
    assert isinstance(rec, GroupMetadataRecord)
    assert rec.group == "grp" and rec.value == _group_value()


def test_empty_group_record_as_written_on_creation() -> None:
    # JoinGroup creating a group writes protocolType "", generation 0, null protocol and leader.
    value = GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None, current_state_timestamp=TS)
    _, data = encode_group_metadata("grp", value)
    assert data == i16(3) + s16("") + i32(0) + i16(-1) + i16(-1) + i64(TS) + i32(0)
    assert decode_record(GROUP_KEY, data) == GroupMetadataRecord("grp", value)


def test_group_metadata_v0_is_read() -> None:
    member = s16("m") + s16("c") + s16("/h") + i32(10_000) + i32(0) + i32(0)
    v0 = i16(0) + s16("consumer") + i32(1) + s16("range") + s16("m") + i32(1) + member
    rec = decode_record(GROUP_KEY, v0)
    assert isinstance(rec, GroupMetadataRecord) and rec.value is not None
    assert rec.value.current_state_timestamp == -1
    assert rec.value.members[0].session_timeout == 10_000
    assert rec.value.members[0].rebalance_timeout == -1


def test_group_tombstone() -> None:
    key, value = encode_group_metadata("grp", None)
    assert value is None
    assert decode_record(key, None) == GroupMetadataRecord("grp", None)


def test_consumer_group_and_unknown_record_types() -> None:
    key = i16(3) + ConsumerGroupMetadataKey(group_id="g").encode(3)
    value = i16(0) + ConsumerGroupMetadataValue(epoch=5).encode(0)
    rec = decode_record(key, value)
    assert isinstance(rec, ConsumerGroupRecord) and rec.record_type == 3
    assert rec.key.group_id == "g" and rec.value.epoch == 5
    # Future types are skipped by the loader, not refused.
    assert decode_record(i16(16) + b"whatever", b"x") == UnknownRecord(16)


def test_share_group_records_round_trip() -> None:
    import uuid

    from pylog.group.records import ShareGroupRecord
    from pylog.group.share.records import (
        encode_share_group_current_assignment,
        encode_share_group_epoch,
        encode_share_group_target_member,
    )
    from pylog.group.share.share_group import ShareGroupMember

    tid = uuid.uuid4()
    rec = decode_record(*encode_share_group_epoch("g", 7))
    assert isinstance(rec, ShareGroupRecord) and rec.record_type == 11 and rec.value.epoch == 7
    assert decode_record(*encode_share_group_epoch("g", None)).value is None
    rec = decode_record(*encode_share_group_target_member("g", "m", {tid: {2, 0}}))
    assert rec.record_type == 13 and rec.key.member_id == "m"
    assert [(tp.topic_id, tp.partitions) for tp in rec.value.topic_partitions] == [(tid, [0, 2])]
    member = ShareGroupMember("m", member_epoch=3, previous_member_epoch=2, assigned={tid: {1}})
    rec = decode_record(*encode_share_group_current_assignment("g", "m", member))
    assert rec.record_type == 14 and rec.value.member_epoch == 3
    assert rec.value.previous_member_epoch == 2


# --------------------------------------------------------------------------- hostile input

@pytest.mark.parametrize(
    "key, value, needle",
    [
        (b"", None, "no int16 version"),
        (b"\x00", None, "no int16 version"),
        (i16(-1), None, "negative type"),
        (OFFSET_KEY[:-1], None, "truncated"),
        (OFFSET_KEY + b"x", None, "trailing"),
        (OFFSET_KEY, b"\x00", "no int16 version"),
        (OFFSET_KEY, OFFSET_VALUE_V3[:-3], "truncated"),
        (OFFSET_KEY, i16(5) + OFFSET_VALUE_V3[2:], "value version 5"),
        (OFFSET_KEY, i16(-2) + OFFSET_VALUE_V3[2:], "value version -2"),
        (GROUP_KEY, GROUP_VALUE_V3[:40], "bad value"),
        (GROUP_KEY, GROUP_VALUE_V3 + b"\x00", "trailing"),
        (GROUP_KEY, i16(3) + s16("consumer") + i32(4) + i16(-1) + i16(-1) + i64(0) + i32(0x7FFFFFFF), "bad value"),
        (i16(2) + i16(-1), None, "bad key"),
    ],
)
def test_hostile_records_raise_a_clear_error(key: bytes, value: bytes | None, needle: str) -> None:
    with pytest.raises(CoordinatorRecordError, match=needle) as info:
        decode_record(key, value)
    assert isinstance(info.value, ValueError)


@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=64)))
def test_garbage_raises_only_coordinator_record_error(key: bytes, value: bytes | None) -> None:
    try:
        decode_record(key, value)
    except CoordinatorRecordError:
        pass


@given(
    st.text(max_size=20), st.text(max_size=20), st.integers(0, 2**31 - 1), st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**31 - 1), st.text(max_size=50), st.integers(0, 2**62),
    st.one_of(st.just(-1), st.integers(0, 2**62)),
)
def test_offset_commit_round_trip(group, topic, partition, offset, epoch, metadata, ts, expire) -> None:
    key, value = encode_offset_commit(group, topic, partition, offset=offset, leader_epoch=epoch,
                                      metadata=metadata, commit_timestamp=ts, expire_timestamp=expire)
    rec = decode_record(key, value)
    assert isinstance(rec, OffsetCommitRecord) and rec.value is not None
    assert (rec.group, rec.topic, rec.partition) == (group, topic, partition)
    assert (rec.value.offset, rec.value.metadata, rec.value.commit_timestamp, rec.value.expire_timestamp) == (
        offset, metadata, ts, expire)
    assert rec.value.leader_epoch == (epoch if expire == -1 else -1)


# --------------------------------------------------------------------------- records Kafka wrote

VECTORS = json.loads((pathlib.Path(__file__).resolve().parents[3] / "vectors" / "consumer_offsets.json").read_text())


def _vector(name: str) -> tuple[bytes, bytes]:
    (r,) = [r for r in VECTORS["records"] if r["name"] == name]
    return bytes.fromhex(r["key"]), bytes.fromhex(r["value"])


def test_offset_commits_written_by_kafka_decode_and_reencode_byte_for_byte() -> None:
    key, value = _vector("offset_commit/01")
    rec = decode_record(key, value)
    assert isinstance(rec, OffsetCommitRecord) and rec.value is not None
    assert (rec.group, rec.topic, rec.partition) == ("ivan-experimental-consumer", "__consumer_offsets", 46)
    assert (rec.value.offset, rec.value.leader_epoch, rec.value.metadata, rec.value.commit_timestamp) == (
        97507, -1, "", 1672871009232)
    for name in ("offset_commit/01", "offset_commit/03"):
        key, value = _vector(name)
        rec = decode_record(key, value)
        assert isinstance(rec, OffsetCommitRecord) and rec.value is not None
        again = encode_offset_commit(rec.group, rec.topic, rec.partition, offset=rec.value.offset,
                                     leader_epoch=rec.value.leader_epoch, metadata=rec.value.metadata,
                                     commit_timestamp=rec.value.commit_timestamp)
        assert again == (key, value), name


def test_group_metadata_written_by_kafka_decodes_and_reencodes_byte_for_byte() -> None:
    key, value = _vector("group_metadata/03")
    rec = decode_record(key, value)
    assert isinstance(rec, GroupMetadataRecord) and rec.value is not None
    v = rec.value
    leader = "rdkafka-57736292-f08d-4ab0-8a85-b9951edbb13e"
    assert (rec.group, v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp) == (
        "ivan-experimental-consumer", "consumer", 1, "range", leader, 1672870929040)
    (m,) = v.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout, m.session_timeout) == (
        leader, None, "rdkafka", "/172.18.0.1", 300000, 45000)
    # What Kafka writes when a rebalance ends with nobody: protocol and leader null, no members.
    key5, value5 = _vector("group_metadata/05")
    empty = decode_record(key5, value5)
    assert isinstance(empty, GroupMetadataRecord) and empty.value is not None
    assert (empty.value.generation, empty.value.protocol, empty.value.leader, empty.value.members) == (8, None, None, [])
    for name in ("group_metadata/01", "group_metadata/03", "group_metadata/05"):
        key, value = _vector(name)
        rec = decode_record(key, value)
        assert isinstance(rec, GroupMetadataRecord)
        assert encode_group_metadata(rec.group, rec.value) == (key, value), name


def test_a_coordinator_loads_what_kafka_wrote() -> None:
    from pylog._clock import ManualClock
    from pylog.group.classic import GroupState
    from pylog.group.coordinator import GroupCoordinator

    coord = GroupCoordinator(ManualClock())
    coord.begin_load()
    for name in ("group_metadata/01", "offset_commit/03", "group_metadata/03", "offset_commit/01",
                 "group_metadata/05"):
        coord.replay(*_vector(name))
    coord.complete_load()
    live = coord.group("ivan-experimental-consumer")
    assert live is not None and live.state == GroupState.STABLE and live.generation_id == 1
    assert live.subscribed_topics() == {"__consumer_offsets"}  # parsed from librdkafka's v1 subscription
    emptied = coord.group("kafkesc-devcluster-group-id")
    assert emptied is not None and emptied.state == GroupState.EMPTY and emptied.generation_id == 8
    fetched = coord.offset_fetch("kafkesc-devcluster-group-id", [("t01", [0])]).partitions[0]
    assert fetched.committed_offset == 106
