# Type stubs of logcore._segment (the compiled twin of logcore/_ref/segment.py).

from collections.abc import Callable
from typing import Any

from ._index import OffsetIndex, TimeIndex

def search_for_offset(fd: int, start: int, end: int, target: int) -> tuple[int, int, int, int] | None: ...
def txn_batches(fd: int, start: int, end: int) -> list[tuple[int, int, int, bool]]: ...
def batch_bounds(fd: int, start: int, end: int) -> list[tuple[int, int]]: ...
def scan_region(
    fd: int, start: int, end: int, max_bytes: int, max_offset: int, min_one_batch: bool,
    walk_from: int = -1,
) -> tuple[int, int]: ...
def locate(
    fd: int, end: int, index: OffsetIndex, target: int, max_bytes: int, max_offset: int,
    min_one_batch: bool, use_index: bool = True,
) -> tuple[int, int, int, int] | None: ...
def recover_scan(
    buf: Any, end: int, base_offset: int, index_interval_bytes: int,
    offset_index: OffsetIndex, time_index: TimeIndex, crc32c: Callable[..., int] | None = None,
) -> tuple[int, int, int, int, int, str | None]: ...
