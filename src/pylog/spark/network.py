"""Network mode: the source reads through a broker with ``pylog.client``.

Planning (Spark's driver) asks an ``Admin`` for topics (Metadata) and offsets
(ListOffsets: earliest, latest — the last stable offset with
``kafka.isolation.level=read_committed`` — and by timestamp). Each Spark task reads one
offset range with its own ``Consumer``: ``assign`` + ``seek``, then ``poll_columns`` until
the range's end, each fetch decoded by ``logcore.decode_columns`` into columns that become
Arrow record batches without a Python object per record (with ``includeHeaders=true`` the
records are polled as objects, since ``poll_columns`` does not decode headers).

The executors' consumers never reset a position on their own (``auto.offset.reset`` none):
when the planned offsets are gone (retention, deletion) the task asks for the log start
and fails or skips per ``failOnDataLoss``, as Spark's ``KafkaDataConsumer`` does.

Thread-safety: a ``NetworkLookup`` is used by one thread at a time (Spark's planner, or a
streaming source's runner); ``read_range`` owns its consumer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from pylog import errors as kafka_errors
from pylog.client import (
    Admin,
    Consumer,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    TopicPartition,
)
from pylog.spark.offsets import TP, OffsetRange, lost, tp_str
from pylog.spark.options import SourceOptions

log = logging.getLogger("pylog.spark")

__all__ = ["NetworkLookup", "read_range", "BrokerUnreachableError"]

T = TypeVar("T")
#: Bytes one fetch asks for per partition, unless kafka.max.partition.fetch.bytes is set
#: (Kafka's default is 1 MiB; a task reads one partition, so larger fetches pay).
DEFAULT_PARTITION_FETCH_BYTES = 8 << 20
_POLL_STEP_S = 1.0


class BrokerUnreachableError(ConnectionError):
    """No broker of ``kafka.bootstrap.servers`` answered in time."""


def _retrying(what: str, servers: str, timeout_ms: int, fn: Callable[[], T]) -> T:
    """``fn()`` retried while no broker answers (a broker restarting), up to ``timeout_ms``."""
    deadline = time.monotonic() + timeout_ms / 1000
    delay = 0.1
    while True:
        try:
            return fn()
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            if time.monotonic() + delay >= deadline:
                raise BrokerUnreachableError(
                    f"{what}: no broker of kafka.bootstrap.servers={servers} answered within "
                    f"{timeout_ms} ms ({exc}); check that a broker runs there and is reachable "
                    "from the Spark driver and executors") from None
            log.info("%s: %s; retrying in %.1f s", what, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


class NetworkLookup:
    """Topics and offsets from a broker, for planning (a ``Lookup``)."""

    def __init__(self, options: SourceOptions) -> None:
        assert options.bootstrap_servers is not None
        self.options = options
        self.servers = options.bootstrap_servers
        self.where = f"at {self.servers}"
        self.timeout_ms = int(options.kafka.get("default.api.timeout.ms", 60_000))
        self._admin: Admin | None = None

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(self.options.admin_config())
        return self._admin

    def topics(self) -> dict[str, list[int]]:
        described = _retrying("listing topics", self.servers, self.timeout_ms,
                              lambda: self.admin.describe_topics(None))
        return {name: [p.partition for p in d.partitions] for name, d in described.items()
                if not d.is_internal}

    def _list(self, specs: Mapping[TP, Any]) -> dict[TP, tuple[int, int]]:
        if not specs:
            return {}
        found = _retrying("looking up offsets", self.servers, self.timeout_ms,
                          lambda: self.admin.list_offsets(dict(specs),
                                                          self.options.isolation_level))
        return {(tp.topic, tp.partition): v for tp, v in found.items()}

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return {tp: off for tp, (off, _) in self._list({tp: "earliest" for tp in tps}).items()}

    def latest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return {tp: off for tp, (off, _) in self._list({tp: "latest" for tp in tps}).items()}

    def for_times(self, wanted: Mapping[TP, int]) -> dict[TP, int | None]:
        return {tp: (off if off >= 0 else None)
                for tp, (off, _) in self._list(dict(wanted)).items()}

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _consumer_config(options: SourceOptions) -> dict[str, Any]:
    conf = options.consumer_config()
    conf.setdefault("max.partition.fetch.bytes", DEFAULT_PARTITION_FETCH_BYTES)
    conf.setdefault("client.id", "pylog-spark-source")
    return conf


def read_range(options: SourceOptions, rng: OffsetRange) -> Iterator[Any]:
    """The records of ``rng`` as ``pyarrow.RecordBatch``es, fetched from the broker.

    Raises:
        DataLoss: records of the range are gone and ``failOnDataLoss`` is true.
        BrokerUnreachableError: no broker answered.
        TimeoutError: no record came for ``kafkaConsumer.pollTimeoutMs`` while some were due.
    """
    from pylog.spark import arrow

    tp = TopicPartition(rng.topic, rng.partition)
    servers = options.bootstrap_servers or ""
    timeout_ms = int(options.kafka.get("default.api.timeout.ms", 60_000))
    consumer = _retrying(f"connecting to read {tp_str(rng.tp)}", servers, timeout_ms,
                         lambda: Consumer(_consumer_config(options)))
    try:
        consumer.assign([tp])
        consumer.seek(tp, rng.from_offset)
        pos, until = rng.from_offset, rng.until_offset
        last_progress = time.monotonic()
        while pos < until:
            try:
                if options.include_headers:
                    records = consumer.poll(timeout=_POLL_STEP_S, max_records=50_000)
                    got = [r for r in records if pos <= r.offset < until]
                    batch = arrow.records_to_batch(got, tp.topic, tp.partition, True) \
                        if got else None
                else:
                    cols = consumer.poll_columns(timeout=_POLL_STEP_S).get(tp)
                    batch = None
                    if cols is not None and cols.num_records:
                        hi = int(np.searchsorted(cols.offsets, until))
                        if hi > 0:
                            batch = arrow.columns_to_batch(cols, tp.topic, tp.partition, 0, hi)
                new_pos = consumer.position(tp)
            except NoOffsetForPartitionError:
                # The position fell out of the log (retention or deletion under the query).
                pos = _skip_lost(options, consumer, tp, pos, until, servers, timeout_ms)
                last_progress = time.monotonic()
                continue
            if batch is not None:
                yield batch
            if new_pos > pos:
                pos, last_progress = new_pos, time.monotonic()
                continue
            if time.monotonic() - last_progress > options.poll_timeout_ms / 1000:
                pos = _check_stalled(options, consumer, tp, pos, until, servers, timeout_ms)
                last_progress = time.monotonic()
    finally:
        consumer.close()


def _skip_lost(options: SourceOptions, consumer: Consumer, tp: TopicPartition, pos: int,
               until: int, servers: str, timeout_ms: int) -> int:
    start = _retrying(f"looking up the start of {tp.topic}-{tp.partition}", servers,
                      timeout_ms, lambda: consumer.beginning_offsets([tp])[tp])
    if start <= pos:
        end = consumer.end_offsets([tp])[tp]
        lost(options, f"Cannot fetch offset {pos} of {tp.topic}-{tp.partition} from {servers}: "
                      f"the log holds [{start}, {end})")
        return until
    lost(options, f"Cannot fetch offsets [{pos}, {min(start, until)}) of "
                  f"{tp.topic}-{tp.partition} from {servers}: the log now starts at {start}")
    if start < until:
        consumer.seek(tp, start)
    return min(start, until)


def _check_stalled(options: SourceOptions, consumer: Consumer, tp: TopicPartition, pos: int,
                   until: int, servers: str, timeout_ms: int) -> int:
    """No record for pollTimeoutMs: the planned records are gone (the log was truncated or
    the topic recreated) or the broker does not serve them."""
    try:
        end = _retrying(f"looking up the end of {tp.topic}-{tp.partition}", servers,
                        timeout_ms, lambda: consumer.end_offsets([tp])[tp])
    except kafka_errors.UnknownTopicOrPartitionError:
        end = -1
    if end <= pos:
        lost(options, f"Cannot fetch offsets [{pos}, {until}) of {tp.topic}-{tp.partition} "
                      f"from {servers}: the log now ends at {end}")
        return until
    raise TimeoutError(
        f"Failed to get records for {tp.topic}-{tp.partition} offsets [{pos}, {until}) after "
        f"polling for {options.poll_timeout_ms} ms (the broker reports offsets up to {end}); "
        "raise kafkaConsumer.pollTimeoutMs if the broker is slow")
