"""``dump-log --offsets-decoder``: ``__consumer_offsets`` records as Kafka's tool shows them.

Kafka's ``DumpLogSegments.OffsetsMessageParser`` prints each record's key and value as
JSON built by the generated ``*JsonConverter`` classes::

    key: {"type":"1","data":{"group":"g","topic":"t","partition":0}}
    payload: {"version":"3","data":{"offset":5,"leaderEpoch":0,"metadata":"","commitTimestamp":1700000000000}}

``type`` is the record type (the key's int16 version), ``version`` the value's int16
version; field names are the schema's, camelCased with a lower-case first letter; a field
appears only at the versions that have it; bytes are base64 (Jackson's binary form); a
tombstone's payload is ``<DELETE>``. For a classic group whose ``protocolType`` is
``consumer``, each member's ``subscription`` and ``assignment`` bytes are decoded as
``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment`` (each prefixed by its
int16 version) and left as base64 if they do not decode, as Kafka does.

Decoding uses the group coordinator's own reader (``pylog.group.records.decode_record``),
so this shows exactly what a broker loading the partition would make of the bytes.
Stateless.
"""

from __future__ import annotations

import base64
import struct
import uuid
from typing import Any

from pylog.errors import RemoteProtocolError
from pylog.group.records import (
    ConsumerGroupRecord,
    CoordinatorRecordError,
    GroupMetadataRecord,
    OffsetCommitRecord,
    ShareGroupRecord,
    UnknownRecord,
    decode_record,
)
from pylog.protocol._schema import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from pylog.protocol.codec import Message

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
DELETE = "<DELETE>"
CONSUMER_PROTOCOL_TYPE = "consumer"

_I16 = struct.Struct(">h")


def camel(name: str) -> str:
    """A generated field name back in Kafka's JSON form: ``leader_epoch`` -> ``leaderEpoch``."""
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _uuid_text(u: uuid.UUID) -> str:
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding.
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def message_json(msg: Message, version: int) -> dict[str, Any]:
    """A generated message as the dict Kafka's ``*JsonConverter.write(msg, version)`` builds."""
    out: dict[str, Any] = {}
    for name, _type, versions, _nullable, tagged, _tag in type(msg).FIELDS:
        if not versions[0] <= version <= versions[1]:
            continue
        value = getattr(msg, name)
        if tagged is not None and value is None:
            continue  # Kafka's converters leave out a tagged field at its default
        out[camel(name)] = _json_value(value, version)
    return out


def _json_value(value: Any, version: int) -> Any:
    if isinstance(value, Message):
        return message_json(value, version)
    if isinstance(value, list):
        return [_json_value(v, version) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return _uuid_text(value)
    return value


def _embedded(cls: Any, data: Any) -> dict[str, Any] | None:
    """An int16-versioned consumer-protocol blob as JSON, or None if it does not decode."""
    if data is None or len(data) < 2:
        return None
    (version,) = _I16.unpack_from(data, 0)
    lo, hi = cls.VALID_VERSIONS
    if not lo <= version <= hi:
        return None
    try:
        msg, _end = cls.decode_from(memoryview(data)[2:], 0, version)
    except RemoteProtocolError:
        return None
    return message_json(msg, version)


def _group_metadata_json(value: Any, version: int) -> dict[str, Any]:
    out = message_json(value, version)
    if out.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for member, obj in zip(value.members, out.get("members", []), strict=False):
            sub = _embedded(ConsumerProtocolSubscription, member.subscription)
            if sub is not None:
                obj["subscription"] = sub
            assignment = _embedded(ConsumerProtocolAssignment, member.assignment)
            if assignment is not None:
                obj["assignment"] = assignment
    return out


def decode_offsets_record(offset: int, key: bytes | None, value: bytes | None
                          ) -> tuple[Any, Any, str | None]:
    """Kafka's ``OffsetsMessageParser.parse`` for one record.

    Returns:
        ``(key, payload, error)``: ``key`` and ``payload`` are JSON-able objects (dicts
        shaped like Kafka's output, ``"<DELETE>"`` for a tombstone's payload), or for a
        record that does not decode ``key`` is Kafka's message ("Unknown record type ...",
        "Error at offset ..."), ``payload`` None and ``error`` says what was wrong (None
        for an unknown record type, which is not a fault: newer Kafka versions write those).
    """
    if key is None:
        msg = "record has no key (every __consumer_offsets record has one)"
        return f"Error at offset {offset}, skipping. {msg}", None, msg
    try:
        rec = decode_record(key, value)
    except CoordinatorRecordError as exc:
        return f"Error at offset {offset}, skipping. {exc}", None, str(exc)
    record_type = _I16.unpack_from(key, 0)[0]
    if isinstance(rec, UnknownRecord):
        return f"Unknown record type {rec.record_type} at offset {offset}, skipping.", None, None
    if isinstance(rec, OffsetCommitRecord):
        key_data: dict[str, Any] = {"group": rec.group, "topic": rec.topic, "partition": rec.partition}
    elif isinstance(rec, GroupMetadataRecord):
        key_data = {"group": rec.group}
    else:
        assert isinstance(rec, (ConsumerGroupRecord, ShareGroupRecord))
        # A key in Kafka's later dialect (record 15) has its fields at version 0.
        key_version = 0 if getattr(rec.key, "MESSAGE_TYPE", None) == "coordinator-key" else record_type
        key_data = message_json(rec.key, key_version)
    key_json = {"type": str(record_type), "data": key_data}
    if value is None or rec.value is None:
        return key_json, DELETE, None
    version = _I16.unpack_from(value, 0)[0]
    if isinstance(rec, GroupMetadataRecord):
        data = _group_metadata_json(rec.value, version)
    else:
        data = message_json(rec.value, version)
    return key_json, {"version": str(version), "data": data}, None


def is_offsets_partition(dirname: str) -> bool:
    """True for a ``__consumer_offsets-<n>`` partition directory name."""
    topic, sep, partition = dirname.rpartition("-")
    return sep == "-" and topic == CONSUMER_OFFSETS_TOPIC and partition.isdigit()
