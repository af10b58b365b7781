"""Type stub of the compiled ``pylog.client._crecords`` (twins: ``records.PyConsumerRecord``
and ``aio/_fetcher.py``'s decoding loop)."""

from typing import Any

from pylog.client.records import PyConsumerRecord as ConsumerRecord

__all__ = ["ConsumerRecord", "decode_records"]

def decode_records(batches: list[Any], topic: str, partition: int, position: int,
                   out: list[ConsumerRecord]) -> None: ...
