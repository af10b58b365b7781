"""logcore: Kafka's log storage engine (RecordBatch v2 codec, segments, indexes).

logcore knows bytes and files, nothing of networks or brokers. Every public name has a
compiled (Cython) implementation and a pure-Python twin in ``logcore._ref`` with the same
behaviour; the twin is the test oracle and a debugging mode. Set ``LOGCORE_PUREPYTHON=1``
to load the twin. ``IMPLEMENTATION`` says which one is loaded: ``"c"`` or ``"python"``.
"""

from __future__ import annotations

import os as _os

from .errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    LogcoreError,
    LogDirError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    TransactionCoordinatorFencedError,
    UnexpectedAppendOffsetError,
)

__version__ = "0.1.0"

_PURE = _os.environ.get("LOGCORE_PUREPYTHON", "") not in ("", "0")

if _PURE:
    IMPLEMENTATION = "python"
    # --- codec (pure-Python twins) ---
    from ._ref.append import AppendInfo, validate_for_append
    from ._ref.builder import BatchBuilder
    from ._ref.columns import Columns, decode_columns
    from ._ref.crc32c import crc32c
    from ._ref.reader import RecordBatch, iter_batches
    from ._ref.record import Record
    from ._ref.varint import (
        decode_unsigned_varint,
        decode_varint,
        encode_unsigned_varint,
        encode_varint,
        zigzag_decode,
        zigzag_encode,
    )
else:
    IMPLEMENTATION = "c"
    try:
        # --- codec (compiled) ---
        # Both sides satisfy the Protocols in _protocols.py; mypy sees two classes.
        from ._append import AppendInfo, validate_for_append  # type: ignore[assignment]
        from ._builder import BatchBuilder  # type: ignore[assignment]
        from ._columns import Columns, decode_columns  # type: ignore[assignment]
        from ._crc32c import crc32c
        from ._reader import RecordBatch, iter_batches  # type: ignore[assignment]
        from ._record import Record  # type: ignore[assignment]
        from ._varint import (
            decode_unsigned_varint,
            decode_varint,
            encode_unsigned_varint,
            encode_varint,
            zigzag_decode,
            zigzag_encode,
        )
    except ImportError as exc:  # pragma: no cover - depends on the build
        raise ImportError(
            "logcore's compiled extensions are not built "
            f"({exc}); build them (`make compile` or `pip install .`) "
            "or set LOGCORE_PUREPYTHON=1 to use the slow pure-Python twin"
        ) from exc

# --- storage (Log, LogConfig, FileRegion, indexes): added by the storage layer ---
if _PURE:
    from ._ref.index import OffsetIndex, TimeIndex
else:
    from ._index import OffsetIndex, TimeIndex  # type: ignore[assignment]
# After the codec on purpose: the storage modules use the names chosen above.
from .clock import Clock, ManualClock, SystemClock  # noqa: E402
from .config import LogConfig  # noqa: E402
from .log import Log, LogAppendInfo, TimestampOffset  # noqa: E402
from .producer_state import ProducerInfo  # noqa: E402
from .readonly import ReadOnlyLog  # noqa: E402
from .region import FileRegion  # noqa: E402
from .txn_index import AbortedTxn  # noqa: E402

__all__ = [
    "IMPLEMENTATION",
    "AbortedTxn",
    "AppendInfo",
    "BatchBuilder",
    "Clock",
    "Columns",
    "CorruptRecordError",
    "FileRegion",
    "InvalidConfigError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogDirError",
    "LogcoreError",
    "ManualClock",
    "OffsetIndex",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerInfo",
    "Record",
    "RecordBatch",
    "ReadOnlyLog",
    "RecordTooLargeError",
    "SystemClock",
    "TimeIndex",
    "TimestampOffset",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
    "crc32c",
    "decode_columns",
    "decode_unsigned_varint",
    "decode_varint",
    "encode_unsigned_varint",
    "encode_varint",
    "iter_batches",
    "validate_for_append",
    "zigzag_decode",
    "zigzag_encode",
]
