"""The typed surface of the codec, satisfied by both implementations.

The compiled codec units (logcore._record, ._reader, ._columns, ._append, ._builder,
._crc32c, ._varint) and their pure-Python twins of the same names in logcore._ref
implement the same contract: for the same input, the same values or the same error
class. These Protocols state it for type checkers and for the differential tests, which
assert that both sides satisfy them (runtime_checkable checks names only, not
signatures). The shape follows aiokafka's record/_protocols.py.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, cast, runtime_checkable

Header = tuple[str, "bytes | None"]


@runtime_checkable
class RecordProtocol(Protocol):
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def timestamp_type(self) -> str: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> list[Header]: ...


@runtime_checkable
class RecordBatchProtocol(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def batch_length(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def crc(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def compression(self) -> str: ...
    @property
    def timestamp_type(self) -> str: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def records_count(self) -> int: ...
    @property
    def size_in_bytes(self) -> int: ...
    def __iter__(self) -> Iterator[RecordProtocol]: ...
    def is_valid(self) -> bool: ...
    def validate(self) -> None: ...


@runtime_checkable
class ColumnsProtocol(Protocol):
    offsets: Any
    timestamps: Any
    timestamp_types: Any
    key_offsets: Any
    value_offsets: Any
    key_data: Any
    value_data: Any
    key_valid: Any
    value_valid: Any
    header_counts: Any
    value_starts: Any
    value_lengths: Any
    num_records: int

    def __len__(self) -> int: ...


@runtime_checkable
class AppendInfoProtocol(Protocol):
    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def offset_of_max_timestamp(self) -> int: ...
    @property
    def shallow_offset_of_max_timestamp(self) -> int: ...
    @property
    def min_timestamp(self) -> int: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def batch_count(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def first_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def timestamp_type(self) -> str: ...


@runtime_checkable
class BatchBuilderProtocol(Protocol):
    def append(
        self,
        value: Any,
        key: Any = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, Any]] | None = None,
    ) -> int: ...
    def append_many(
        self,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        timestamps_ms: Sequence[int] | None = None,
    ) -> None: ...
    def estimated_size(self) -> int: ...
    def __len__(self) -> int: ...
    def build(self) -> bytes: ...


class CodecModuleProtocol(Protocol):
    """The codec's public names, as codec_module() gathers them from one implementation."""

    BatchBuilder: type[BatchBuilderProtocol]
    RecordBatch: type[RecordBatchProtocol]
    Record: type[RecordProtocol]
    Columns: type[ColumnsProtocol]
    AppendInfo: type[AppendInfoProtocol]

    def iter_batches(self, buffer: Any) -> Iterator[RecordBatchProtocol]: ...
    def decode_columns(self, buffer: Any, *, copy_values: bool = True) -> ColumnsProtocol: ...
    def validate_for_append(
        self,
        buffer: Any,
        *,
        next_offset: int,
        max_message_bytes: int,
        log_append_time_ms: int | None = None,
        partition_leader_epoch: int | None = None,
    ) -> AppendInfoProtocol: ...


# Which unit of the codec defines each public name (the same for both implementations).
CODEC_UNITS = {
    "record": ("Record",),
    "reader": ("RecordBatch", "iter_batches"),
    "columns": ("Columns", "decode_columns"),
    "append": ("AppendInfo", "validate_for_append"),
    "builder": ("BatchBuilder",),
}


def codec_module(implementation: str) -> CodecModuleProtocol:
    """The codec of one implementation as one namespace, whatever LOGCORE_PUREPYTHON says.

    For code that compares the two side by side (the differential tests, the codec
    benchmark); everything else uses the names ``logcore`` exports.

    Args:
        implementation: "c" (the compiled units logcore._record, ...) or "python" (their
            twins logcore._ref.record, ...).

    Raises:
        ImportError: "c" when the extensions are not built.
        ValueError: another implementation name.
    """
    if implementation == "c":
        prefix = "logcore._"
    elif implementation == "python":
        prefix = "logcore._ref."
    else:
        raise ValueError(f"unknown implementation {implementation!r}; expected 'c' or 'python'")
    ns = types.SimpleNamespace()
    for unit, names in CODEC_UNITS.items():
        module = importlib.import_module(prefix + unit)
        for name in names:
            setattr(ns, name, getattr(module, name))
    return cast(CodecModuleProtocol, ns)
