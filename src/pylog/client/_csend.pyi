"""Type stub of the compiled ``pylog.client._csend`` (twins: ``aio/_accumulator.py``,
``_future.py``; see ``pylog.client._native``)."""

from collections.abc import Callable
from typing import Any

from pylog.client._future import RecordFuture as RecordFuture
from pylog.client.aio._accumulator import PendingBatch as PendingBatch
from pylog.client.aio._accumulator import RecordAccumulator as RecordAccumulator

class FastSend:
    def __init__(self, core: Any, slow: Callable[..., RecordFuture]) -> None: ...
    def __call__(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
                 partition: int | None = None, timestamp_ms: int | None = None, *,
                 on_delivery: Callable[..., Any] | None = None) -> RecordFuture: ...

def partition_for_key(key: bytes, num_partitions: int) -> int: ...
def partitions_for_keys(keys: list[bytes | None], num_partitions: int) -> list[int]: ...
