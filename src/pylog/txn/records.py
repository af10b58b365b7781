"""``__transaction_state`` records: Kafka's ``TransactionLog`` key and value formats.

Each record is keyed by the transactional id; the latest value wins and compaction keeps only
it. Both key and value start with an int16 version, then the fields at that version:

    key    v0  TransactionalId string
    value  v0  ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
               TransactionStatus int8 (the state id), TransactionPartitions nullable
               [Topic string, PartitionIds [int32]] (null in Empty),
               TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64
           v1  the same, flexible, with tagged PreviousProducerId (0), NextProducerId (1),
               ClientTransactionVersion (2): written by Kafka when transaction.version >= 1

pylog writes value v0 (as Kafka does at transaction.version 0) and reads both. An expired
transactional id is a tombstone (the key with a null value). Keys of an unknown version are
reported as ``UnknownKey`` (the loader skips them, as Kafka's does); anything malformed raises
``TxnRecordError`` (a ``ValueError``) naming what was wrong. Stateless and thread-safe.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from pylog.errors import KafkaError, RemoteProtocolError
from pylog.protocol._records import TransactionLogKey, TransactionLogValue

from .metadata import TransactionMetadata, TxnState, TxnTransit

__all__ = ["TxnRecordError", "TxnKey", "UnknownKey", "encode_key", "encode_value", "decode_key",
           "decode_value", "metadata_from_value", "KEY_VERSION", "VALUE_VERSION"]

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")


class TxnRecordError(KafkaError, ValueError):
    """A ``__transaction_state`` record that cannot be decoded."""


@dataclass(frozen=True)
class TxnKey:
    transactional_id: str


@dataclass(frozen=True)
class UnknownKey:
    version: int


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + TransactionLogKey(transactional_id).encode(KEY_VERSION)


def encode_value(t: TxnTransit) -> bytes:
    """The value Kafka writes for a transition (``TransactionLog.valueToBytes``): the
    partitions grouped by topic (sorted, for stable bytes), null in Empty."""
    if t.state == TxnState.EMPTY:
        if t.partitions:
            raise ValueError("an Empty transaction has no partitions")
        partitions = None
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(p)
        partitions = [TransactionLogValue.PartitionsSchema(topic, ps) for topic, ps in by_topic.items()]
    value = TransactionLogValue(
        producer_id=t.producer_id,
        producer_epoch=t.producer_epoch,
        transaction_timeout_ms=t.txn_timeout_ms,
        transaction_status=int(t.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=t.txn_last_update_ms,
        transaction_start_timestamp_ms=t.txn_start_ms,
    )
    return _I16.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def _version(data: Any, part: str) -> int:
    if data is None or len(data) < 2:
        n = 0 if data is None else len(data)
        raise TxnRecordError(f"__transaction_state record {part} of {n} bytes has no int16 version")
    return int(_I16.unpack_from(data, 0)[0])


def decode_key(key: Any) -> TxnKey | UnknownKey:
    version = _version(key, "key")
    lo, hi = TransactionLogKey.VALID_VERSIONS
    if not lo <= version <= hi:
        return UnknownKey(version)
    try:
        k = TransactionLogKey.decode(memoryview(key)[2:], version)
    except RemoteProtocolError as exc:
        raise TxnRecordError(f"bad __transaction_state key: {exc}") from None
    return TxnKey(k.transactional_id)


def decode_value(value: Any) -> TransactionLogValue | None:
    """The value, or None for a tombstone."""
    if value is None:
        return None
    version = _version(value, "value")
    lo, hi = TransactionLogValue.VALID_VERSIONS
    if not lo <= version <= hi:
        raise TxnRecordError(f"__transaction_state value version {version} is not a known version ({lo}-{hi})")
    try:
        return TransactionLogValue.decode(memoryview(value)[2:], version)
    except RemoteProtocolError as exc:
        raise TxnRecordError(f"bad __transaction_state value: {exc}") from None


def metadata_from_value(transactional_id: str, v: TransactionLogValue) -> TransactionMetadata:
    """The metadata a loaded value stands for (``TransactionLog.readTxnRecordValue``)."""
    try:
        state = TxnState(v.transaction_status)
    except ValueError:
        raise TxnRecordError(f"transactional id {transactional_id!r}: unknown transaction status "
                             f"{v.transaction_status}") from None
    partitions = {(p.topic, i) for p in (v.transaction_partitions or []) for i in p.partition_ids}
    return TransactionMetadata(
        transactional_id, v.producer_id, previous_producer_id=v.previous_producer_id,
        producer_epoch=v.producer_epoch, txn_timeout_ms=v.transaction_timeout_ms, state=state,
        partitions=partitions, txn_start_ms=v.transaction_start_timestamp_ms,
        txn_last_update_ms=v.transaction_last_update_timestamp_ms)
