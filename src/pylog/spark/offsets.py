"""Offset planning for the ``pylog`` Spark source: what each Spark task reads.

Pure functions over ``{(topic, partition): offset}`` maps, after Spark's Kafka source
(``KafkaOffsetReaderAdmin``, ``KafkaOffsetRangeCalculator``, ``KafkaMicroBatchStream``):

- ``resolve``: a starting or ending ``OffsetSpec`` (earliest, latest, JSON offsets with -2/-1,
  per-partition or global timestamps) to concrete offsets, given a ``Lookup`` that answers
  earliest, latest and by-timestamp questions (the broker's ListOffsets in network mode,
  the segment files in direct mode);
- ``plan_ranges``: offset ranges to Spark partitions, one per topic-partition, more with
  ``minPartitions`` (large ranges split in proportion to their size) or
  ``maxRecordsPerPartition``;
- ``rate_limit``: ``maxOffsetsPerTrigger`` spread over partitions in proportion to their
  backlog, small ones never starved;
- ``check_transition``: the data-loss checks of one micro-batch (partitions that went away,
  offsets that went backwards, new partitions that do not start at 0).

Nothing here does I/O or imports Spark: it is unit-tested on its own.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable, Mapping
from typing import Protocol

from pylog.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptions, SparkOptionError

log = logging.getLogger("pylog.spark")

__all__ = [
    "TP", "OffsetRange", "Lookup", "resolve", "plan_ranges", "rate_limit", "check_transition",
    "DataLoss", "data_loss_message", "lost", "select_partitions", "UnknownTopicError",
]

TP = tuple[str, int]
_LONG_MAX = 2**63 - 1

#: Spark's advice appended to a data-loss error (failOnDataLoss=true).
INSTRUCTION_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data in "
    "the topic was processed. If you don't want your streaming query to fail on such cases, "
    'set the source option "failOnDataLoss" to "false".')
#: ... and to the warning logged instead (failOnDataLoss=false).
INSTRUCTION_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data in "
    "the topic was processed. If you want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "true".')


def tp_str(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


class DataLoss(RuntimeError):
    """Records the query should have read are gone (retention, deletion, truncation);
    raised with ``failOnDataLoss=true``."""


def data_loss_message(detail: str, fail: bool) -> str:
    return f"{detail}. " + (INSTRUCTION_FAIL_ON_DATA_LOSS_TRUE if fail
                            else INSTRUCTION_FAIL_ON_DATA_LOSS_FALSE)


def lost(options: SourceOptions, detail: str) -> None:
    """Records planned for reading are gone: raise ``DataLoss`` (``failOnDataLoss=true``)
    or log a warning (the caller then reads what is left)."""
    if options.fail_on_data_loss:
        raise DataLoss(data_loss_message(detail, True))
    log.warning(data_loss_message(detail, False))


@dataclasses.dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one topic-partition: one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


class Lookup(Protocol):
    """What offset resolution asks the log (network or direct mode)."""

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]: ...
    def latest(self, tps: Iterable[TP]) -> dict[TP, int]: ...
    def for_times(self, wanted: Mapping[TP, int]) -> dict[TP, int | None]: ...


def resolve(spec: OffsetSpec, tps: Iterable[TP], lookup: Lookup, *, starting: bool,
            strategy_on_no_match: str = "error") -> dict[TP, int]:
    """Concrete offsets of ``tps`` for ``spec``.

    Per-partition JSON must name exactly the partitions the subscription has (Spark's
    rule); -2 and -1 in it mean earliest and latest. A timestamp with no record at or
    after it is an error for a start (``startingOffsetsByTimestampStrategy`` ``error``) or
    resolves to latest (strategy ``latest``, and always for an end).

    Raises:
        SparkOptionError: partitions that do not match, or no offset for a timestamp.
    """
    parts = sorted(set(tps))
    if spec.kind == "earliest":
        return lookup.earliest(parts)
    if spec.kind == "latest":
        return lookup.latest(parts)
    if spec.kind in ("offsets", "timestamps"):
        given = dict(spec.per_partition or {})
        if set(given) != set(parts):
            raise SparkOptionError(
                f"If {'startingOffsets' if starting else 'endingOffsets'} contains specific "
                f"{'offsets' if spec.kind == 'offsets' else 'timestamps'}, you must specify all "
                "TopicPartitions.\nUse -1 for latest, -2 for earliest.\n"
                f"Specified: {sorted(map(tp_str, given))} Assigned: {list(map(tp_str, parts))}")
    if spec.kind == "offsets":
        given = dict(spec.per_partition or {})
        out = {tp: off for tp, off in given.items() if off >= 0}
        early = [tp for tp, off in given.items() if off == EARLIEST]
        late = [tp for tp, off in given.items() if off == LATEST]
        if early:
            out.update(lookup.earliest(early))
        if late:
            out.update(lookup.latest(late))
        return out
    if spec.kind == "timestamps":
        wanted = dict(spec.per_partition or {})
    else:
        assert spec.timestamp is not None
        wanted = {tp: spec.timestamp for tp in parts}
    found = lookup.for_times(wanted)
    missing = [tp for tp in wanted if found.get(tp) is None]
    out = {tp: off for tp, off in found.items() if off is not None}
    if missing:
        if starting and strategy_on_no_match == "error":
            tp = missing[0]
            raise SparkOptionError(
                f"No offset matched from request of topic-partition {tp_str(tp)} and timestamp "
                f"{wanted[tp]}: no record is that recent. Set startingOffsetsByTimestampStrategy"
                " to 'latest' to start such partitions at their end")
        out.update(lookup.latest(missing))
    return out


def plan_ranges(start: Mapping[TP, int], end: Mapping[TP, int], *,
                min_partitions: int | None = None,
                max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Spark tasks for the ranges ``[start[tp], end[tp])`` (Spark's
    KafkaOffsetRangeCalculator). Empty ranges are dropped.

    Without ``min_partitions`` (or with at least that many non-empty ranges) each range is
    one task. Otherwise ranges are split in proportion to their size so that there are
    about ``min_partitions`` tasks; a range whose share rounds to one task is left whole.
    ``max_records_per_partition`` then splits any range still larger than it.
    """
    ranges = [OffsetRange(tp[0], tp[1], start[tp], end[tp]) for tp in sorted(end)
              if tp in start and end[tp] > start[tp]]
    if min_partitions is not None and len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)

        def part_count(size: int, of: int, parts: int) -> int:
            # Scala's math.round: half up.
            return max(int(math.floor(size / of * parts + 0.5)), 1) if of else 1

        unsplit = {r.tp for r in ranges if part_count(r.size, total, min_partitions) == 1}
        unsplit_total = sum(r.size for r in ranges if r.tp in unsplit)
        split_total = total - unsplit_total
        split_min = max(min_partitions - len(unsplit), 1)
        out: list[OffsetRange] = []
        for r in ranges:
            parts = 1 if r.tp in unsplit else part_count(r.size, split_total, split_min)
            out.extend(_split(r, parts))
        ranges = out
    if max_records_per_partition is not None:
        ranges = [piece for r in ranges
                  for piece in _split(r, -(-r.size // max_records_per_partition))]
    return [r for r in ranges if r.size > 0]


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` consecutive pieces of ``r``; the last takes the rounding remainder."""
    out = []
    remaining, begin = r.size, r.from_offset
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        stop = min(begin + this, r.until_offset)
        out.append(OffsetRange(r.topic, r.partition, begin, stop))
        begin = stop
    return out


def rate_limit(limit: int, start: Mapping[TP, int], latest: Mapping[TP, int]) -> dict[TP, int]:
    """End offsets of a micro-batch reading at most about ``limit`` records in all
    (``maxOffsetsPerTrigger``): each partition gets a share in proportion to its backlog
    (rounded down, but at least one record for a partition that has any). ``start`` holds
    new partitions at their earliest offsets; a partition missing from it is not limited.
    """
    sizes = {tp: end - start[tp] for tp, end in latest.items()
             if tp in start and end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: dict[TP, int] = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        begin = start[tp]
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        off = _LONG_MAX if share > _LONG_MAX - begin else begin + share
        out[tp] = min(end, off)
    return out


@dataclasses.dataclass
class Transition:
    """A micro-batch's plan: its ranges, and the data-loss findings on the way."""

    ranges: list[OffsetRange]
    losses: list[str]
    start: dict[TP, int]


def check_transition(start: Mapping[TP, int], end: Mapping[TP, int],
                     new_partition_start: Mapping[TP, int]) -> Transition:
    """Plan the micro-batch ``start -> end`` as Spark's KafkaMicroBatchStream does.

    Partitions in ``end`` but not ``start`` are new: they are read from
    ``new_partition_start`` (their earliest offsets), and one that does not start at 0 has
    lost records. Partitions in ``start`` but not ``end`` were deleted. A partition whose end
    is below its start went backwards (the topic was recreated, or the log truncated).

    Returns:
        The ranges to read (the backwards ones left out) and one message per finding.
    """
    losses: list[str] = []
    begin = dict(start)
    for tp in sorted(set(end) - set(start)):
        if tp not in new_partition_start:
            losses.append(f"Cannot find earliest offsets of {tp_str(tp)}")
            continue
        first = new_partition_start[tp]
        if first != 0:
            losses.append(f"Added partition {tp_str(tp)} starts from {first} instead of 0, "
                          f"offsets [0, {first}) of it are gone")
        begin[tp] = first
    for tp in sorted(set(start) - set(end)):
        losses.append(f"{tp_str(tp)} is gone (deleted) with offsets from {start[tp]} unread")
    ranges = []
    for tp in sorted(end):
        if tp not in begin:
            continue
        if end[tp] < begin[tp]:
            losses.append(f"Partition {tp_str(tp)}'s offset was changed from {begin[tp]} to "
                          f"{end[tp]}, some data may have been missed")
            continue
        if end[tp] > begin[tp]:
            ranges.append(OffsetRange(tp[0], tp[1], begin[tp], end[tp]))
    return Transition(ranges, losses, begin)


class UnknownTopicError(SparkOptionError):
    """A topic or partition the options name does not exist."""


def select_partitions(strategy: str, topics: Mapping[str, Iterable[int]], *,
                      subscribe: Iterable[str] = (), pattern: str | None = None,
                      assign: Mapping[str, Iterable[int]] | None = None, streaming: bool,
                      where: str) -> list[TP]:
    """The topic-partitions a subscription covers, given the topics that exist.

    ``subscribe`` names topics; a missing one is an error for a batch query and is waited
    for by a streaming one (its partitions are picked up once it exists, as Spark does).
    ``subscribePattern`` matches whole topic names (Java's ``Pattern.matches``), internal
    topics (``__consumer_offsets`` ...) left out as Kafka's consumer does. ``assign`` names
    partitions, each of which must exist.

    Raises:
        UnknownTopicError: naming the topic or partition and ``where`` it was looked for.
    """
    import re

    out: list[TP] = []
    if strategy == "subscribe":
        for name in subscribe:
            if name in topics:
                out.extend((name, p) for p in topics[name])
            elif not streaming:
                raise UnknownTopicError(
                    f"topic {name!r} (option 'subscribe') does not exist {where}: create it or "
                    "correct the name")
    elif strategy == "subscribePattern":
        assert pattern is not None
        rx = re.compile(pattern)
        for name, parts in topics.items():
            if not name.startswith("__") and rx.fullmatch(name):
                out.extend((name, p) for p in parts)
    else:
        for name, wanted in (assign or {}).items():
            have = set(topics.get(name, ()))
            if name not in topics:
                raise UnknownTopicError(f"topic {name!r} (option 'assign') does not exist "
                                        f"{where}: create it or correct the name")
            for p in wanted:
                if p not in have:
                    raise UnknownTopicError(
                        f"partition {p} of topic {name!r} (option 'assign') does not exist "
                        f"{where}: the topic has partitions {sorted(have)}")
                out.append((name, p))
    return sorted(set(out))
