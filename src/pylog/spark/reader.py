"""The ``pylog`` source's readers: batch (``spark.read``) and micro-batch streaming
(``spark.readStream``), over network or direct mode.

Where things run:

- ``partitions()`` (batch) and the stream reader's ``initialOffset``, ``latestOffset``,
  ``partitions`` run on Spark's driver, in a Python process Spark keeps for the query; they
  plan offset ranges with a *lookup* (``NetworkLookup``: an Admin client; ``DirectLookup``:
  the data directory) kept by the stream reader between calls and never pickled.
- ``read(partition)`` runs in an executor's Python worker, on a pickled copy of the reader:
  it reads one ``OffsetRange`` (``network.read_range`` or ``direct.read_range``) and yields
  Arrow record batches.

Streaming offsets are Spark's Kafka offsets, ``{"topic": {"partition": offset}}``: the
next offset to read per partition, written by Spark to the query's checkpoint before a
micro-batch runs, so a restarted query resumes where the last committed batch ended, with
no duplicates and no gaps. Partitions that appear later (new topics matching the
subscription, ``create_partitions``) are read from their earliest offset; partitions that
disappear, offsets that go backwards and offsets that retention removed before they were
read are data loss, failing the query or logged per ``failOnDataLoss``.

Admission control (``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` with
``maxTriggerDelay``) and ``Trigger.AvailableNow`` use the ``latestOffset(start, limit)`` API
of pyspark 4.2 and later; with pyspark 4.0 and 4.1 (``latestOffset()`` without arguments)
they are refused with a message, and every micro-batch reads all available data.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from pylog.spark import direct, network
from pylog.spark.offsets import (
    TP,
    OffsetRange,
    check_transition,
    lost,
    plan_ranges,
    rate_limit,
    resolve,
    select_partitions,
)
from pylog.spark.options import SourceOptions, SparkOptionError, offsets_from_json, offsets_to_json

try:  # pyspark >= 4.2: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming import datasource as _streaming
except ImportError:  # pragma: no cover - depends on the installed pyspark
    _streaming = None  # type: ignore[assignment]
ReadAllAvailable: Any = getattr(_streaming, "ReadAllAvailable", None)
ReadMaxRows: Any = getattr(_streaming, "ReadMaxRows", None)
_AvailableNow: Any = getattr(_streaming, "SupportsTriggerAvailableNow", object)

log = logging.getLogger("pylog.spark")

__all__ = ["RangePartition", "BatchReader", "StreamReader", "open_lookup", "read_range"]

ADMISSION_CONTROL = ReadMaxRows is not None and len(
    inspect.signature(DataSourceStreamReader.latestOffset).parameters) > 1


class RangePartition(InputPartition):
    """One Spark task: an ``OffsetRange`` (its ``value``)."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)

    def __repr__(self) -> str:
        r = self.value
        return f"RangePartition({r.topic}-{r.partition} [{r.from_offset}, {r.until_offset}))"


def open_lookup(options: SourceOptions) -> Any:
    """The planner's view of the log: a broker (network mode) or a data directory."""
    return direct.DirectLookup(options) if options.direct else network.NetworkLookup(options)


def read_range(options: SourceOptions, partition: InputPartition) -> Iterator[Any]:
    rng = partition.value if partition is not None else None
    if rng is None:  # Spark's placeholder partition when there is nothing to read
        return iter(())
    if options.direct:
        return direct.read_range(options, rng)
    return network.read_range(options, rng)


def _partitions(lookup: Any, options: SourceOptions, streaming: bool) -> list[TP]:
    return select_partitions(options.strategy, lookup.topics(), subscribe=options.topics,
                             pattern=options.pattern, assign=options.assign,
                             streaming=streaming, where=lookup.where)


class BatchReader(DataSourceReader):
    """``spark.read.format("pylog")``: ranges from the starting to the ending offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        opts = self.options
        lookup = open_lookup(opts)
        try:
            tps = _partitions(lookup, opts, streaming=False)
            start = resolve(opts.starting, tps, lookup, starting=True,
                            strategy_on_no_match=opts.starting_by_timestamp_strategy)
            end = resolve(opts.ending, tps, lookup, starting=False)
            for tp in tps:
                if start[tp] > end[tp]:
                    first = lookup.earliest([tp])[tp]
                    raise SparkOptionError(
                        f"The resolved starting offset {start[tp]} of {tp[0]}-{tp[1]} is past "
                        f"the resolved ending offset {end[tp]} (the partition holds offsets "
                        f"from {first}): check startingOffsets and endingOffsets")
        finally:
            lookup.close()
        ranges = plan_ranges(start, end, min_partitions=opts.min_partitions,
                             max_records_per_partition=opts.max_records_per_partition)
        log.info("pylog source: %d ranges, %d records planned (%s)", len(ranges),
                 sum(r.size for r in ranges), opts.subscription())
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_range(self.options, partition)


class StreamReader(DataSourceStreamReader, _AvailableNow):
    """``spark.readStream.format("pylog")``: micro-batches of Kafka offsets.

    The lookup lives as long as the query (Spark keeps this object in one Python process
    on the driver) and is dropped when the reader is pickled for the executors.
    """

    def __init__(self, options: SourceOptions) -> None:
        if not ADMISSION_CONTROL and (options.max_offsets_per_trigger is not None
                                      or options.min_offsets_per_trigger is not None):
            raise SparkOptionError(
                "maxOffsetsPerTrigger and minOffsetsPerTrigger need pyspark 4.2 or later (its "
                "Python data sources get the start offset and read limit in latestOffset); "
                "upgrade pyspark or drop the option")
        self.options = options
        self._lookup: Any = None
        self._target: dict[TP, int] | None = None  # Trigger.AvailableNow's end
        self._last_trigger = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lookup"] = None
        return state

    @property
    def lookup(self) -> Any:
        if self._lookup is None:
            self._lookup = open_lookup(self.options)
        return self._lookup

    def _latest(self) -> dict[TP, int]:
        tps = _partitions(self.lookup, self.options, streaming=True)
        return self.lookup.latest(tps)

    def initialOffset(self) -> dict:
        opts = self.options
        tps = _partitions(self.lookup, opts, streaming=True)
        start = resolve(opts.starting, tps, self.lookup, starting=True,
                        strategy_on_no_match=opts.starting_by_timestamp_strategy)
        log.info("pylog source: new query starts at %s (%s)", start, opts.starting.describe())
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> Any:
        if ReadMaxRows is not None and self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()
        log.info("pylog source: Trigger.AvailableNow reads up to %s", self._target)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        latest = dict(self._target) if self._target is not None else self._latest()
        if start is None:  # pyspark < 4.2: no admission control
            return offsets_to_json(latest)
        begin = offsets_from_json(start)
        unlimited = limit is None or (ReadAllAvailable is not None
                                      and isinstance(limit, ReadAllAvailable))
        if unlimited:
            return offsets_to_json(latest)
        new = [tp for tp in latest if tp not in begin]
        full_start = {**begin, **(self.lookup.earliest(new) if new else {})}
        backlog = sum(max(end - full_start.get(tp, end), 0) for tp, end in latest.items())
        min_rows = self.options.min_offsets_per_trigger
        if min_rows is not None and backlog < min_rows and self._target is None:
            waited_ms = (time.monotonic() - self._last_trigger) * 1000
            if waited_ms < self.options.max_trigger_delay_ms:
                return start  # not enough yet: skip this trigger (Spark's minOffsetsPerTrigger)
        self._last_trigger = time.monotonic()
        max_rows = getattr(limit, "max_rows", None)
        end = rate_limit(max_rows, full_start, latest) if max_rows is not None else latest
        # A partition that went away is not in ``end``: partitions() reports it.
        return offsets_to_json(end)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in e if tp not in s]
        new_start = self.lookup.earliest(new) if new else {}
        t = check_transition(s, e, new_start)
        for detail in t.losses:
            lost(self.options, detail)
        begin = {r.tp: r.from_offset for r in t.ranges}
        until = {r.tp: r.until_offset for r in t.ranges}
        ranges = plan_ranges(begin, until, min_partitions=self.options.min_partitions,
                             max_records_per_partition=self.options.max_records_per_partition)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_range(self.options, partition)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: offsets live in Spark's checkpoint, not in a group

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None
