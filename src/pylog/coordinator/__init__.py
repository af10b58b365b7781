"""The runtime shared by the coordinators that keep their state in an internal topic
(``__consumer_offsets``, ``__transaction_state``): hosting, chunked loads with retries,
ordered appends, resignation. See ``runtime.py``."""

from pylog.coordinator.loader import Chunk, LoadedMarker, LoadedRecord, read_all, read_chunk
from pylog.coordinator.runtime import (
    LOAD_RETRY_BACKOFF_MAX_MS,
    LOAD_RETRY_BACKOFF_MS,
    CoordinatorRuntime,
    DeadlineTimer,
    PartitionState,
    ShardHandler,
    TopicSpec,
)

__all__ = ["LOAD_RETRY_BACKOFF_MAX_MS", "LOAD_RETRY_BACKOFF_MS", "Chunk", "CoordinatorRuntime",
           "DeadlineTimer", "LoadedMarker", "LoadedRecord", "PartitionState", "ShardHandler", "TopicSpec",
           "read_all", "read_chunk"]
