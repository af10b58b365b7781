"""What ``subscribe`` and ``commit`` accept: rebalance listeners, patterns, offsets.

Rebalance callbacks come in the two Python styles:

- kafka-python's: a listener object with ``on_partitions_revoked(revoked)`` and
  ``on_partitions_assigned(assigned)``, optionally ``on_partitions_lost(lost)`` (Kafka's
  ``ConsumerRebalanceListener``; without it lost partitions go to
  ``on_partitions_revoked``, as Kafka's default method does);
- confluent-kafka's: ``on_assign(consumer, partitions)``, ``on_revoke(consumer,
  partitions)``, ``on_lost(consumer, partitions)`` callables (``on_lost`` missing: lost
  partitions go to ``on_revoke``).

Partitions are handed over as a sorted list of ``TopicPartition``. In the asyncio consumer a
callback may be a coroutine function.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pylog.client.records import OffsetAndMetadata, TopicPartition

__all__ = ["RebalanceListener", "as_pattern", "as_offsets", "as_partitions"]

Callback = Callable[[list[TopicPartition]], Any]


def as_partitions(partitions: Iterable[Any]) -> list[TopicPartition]:
    """``TopicPartition``s from TopicPartitions or (topic, partition) pairs.

    Raises:
        TypeError: anything else.
    """
    out = []
    for p in partitions:
        topic, partition = getattr(p, "topic", None), getattr(p, "partition", None)
        if topic is None and isinstance(p, tuple) and len(p) == 2:
            topic, partition = p
        if not isinstance(topic, str) or not isinstance(partition, int) or partition < 0:
            raise TypeError(f"expected TopicPartition or (topic, partition), got {p!r}")
        out.append(TopicPartition(topic, partition))
    return out


class RebalanceListener:
    """One subscription's callbacks, in either style, as ``get(kind)`` -> callable(partitions).

    Raises:
        TypeError: a listener without the two required methods, a callback that is not
            callable, or both styles at once.
    """

    def __init__(self, consumer: Any, listener: Any = None, on_assign: Any = None,
                 on_revoke: Any = None, on_lost: Any = None) -> None:
        self._fns: dict[str, Callback] = {}
        confluent = {"assigned": on_assign, "revoked": on_revoke, "lost": on_lost}
        names = {"assigned": "on_assign", "revoked": "on_revoke", "lost": "on_lost"}
        if listener is not None:
            if any(v is not None for v in confluent.values()):
                raise TypeError("give either listener= or on_assign/on_revoke/on_lost, not both")
            for name in ("on_partitions_revoked", "on_partitions_assigned"):
                if not callable(getattr(listener, name, None)):
                    raise TypeError(f"listener {listener!r} has no {name}(partitions) method "
                                    "(a kafka-python ConsumerRebalanceListener has both)")
            self._fns["assigned"] = listener.on_partitions_assigned
            self._fns["revoked"] = listener.on_partitions_revoked
            lost = getattr(listener, "on_partitions_lost", None)
            self._fns["lost"] = lost if callable(lost) else listener.on_partitions_revoked
            return
        for kind, fn in confluent.items():
            if fn is None:
                continue
            if not callable(fn):
                raise TypeError(f"{names[kind]} must be callable, got {fn!r}")
            self._fns[kind] = _bind(fn, consumer)
        if "lost" not in self._fns and "revoked" in self._fns:
            self._fns["lost"] = self._fns["revoked"]

    def get(self, kind: str) -> Callback | None:
        return self._fns.get(kind)


def _bind(fn: Callable[..., Any], consumer: Any) -> Callback:
    def call(partitions: list[TopicPartition]) -> Any:
        return fn(consumer, partitions)

    return call


def as_pattern(topics: Any, pattern: Any) -> tuple[list[str] | None, re.Pattern[str] | None]:
    """``subscribe``'s arguments: a list of names, or a regex (``pattern=``, a compiled
    pattern, or a string starting with ``^`` as confluent-kafka takes it).

    Raises:
        TypeError / ValueError: neither or both given, or names that are not strings.
    """
    if pattern is not None and topics is not None:
        raise TypeError("give topics or pattern=, not both")
    if topics is not None and isinstance(topics, re.Pattern):
        topics, pattern = None, topics
    if isinstance(topics, str):
        if topics.startswith("^"):
            topics, pattern = None, topics
        else:
            topics = [topics]
    if pattern is not None:
        try:
            return None, pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"bad subscription pattern {pattern!r}: {exc}") from None
    if topics is None:
        raise TypeError("subscribe() needs topics (a list of names) or pattern=")
    names = list(topics)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"topic names are non-empty strings, got {name!r}")
        if name.startswith("^"):
            raise ValueError(f"{name!r} looks like a pattern: subscribe to it alone, or "
                             "pass pattern=")
    return names, None


def as_offsets(offsets: Any) -> dict[TopicPartition, OffsetAndMetadata]:
    """``commit``'s offsets: a mapping of TopicPartition (or (topic, partition)) to an offset,
    an ``OffsetAndMetadata`` or an (offset, metadata) pair; or a list of objects with
    ``topic``, ``partition`` and ``offset`` (confluent-kafka's TopicPartition, and its
    ``metadata`` if set). The offset is the next record to read.

    Raises:
        TypeError / ValueError: anything else, or a negative offset.
    """
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    if isinstance(offsets, Mapping):
        items = list(offsets.items())
    else:
        items = []
        for o in offsets:
            if not all(hasattr(o, a) for a in ("topic", "partition", "offset")):
                raise TypeError(f"expected a mapping of partition to offset, or objects with "
                                f"topic, partition and offset; got {o!r}")
            items.append(((o.topic, o.partition),
                          OffsetAndMetadata(o.offset, getattr(o, "metadata", None) or "")))
    for key, value in items:
        (tp,) = as_partitions([key])
        if isinstance(value, OffsetAndMetadata):
            om = value
        elif isinstance(value, int) and not isinstance(value, bool):
            om = OffsetAndMetadata(value)
        elif hasattr(value, "offset"):  # kafka-python's OffsetAndMetadata
            epoch = getattr(value, "leader_epoch", None)
            om = OffsetAndMetadata(value.offset, getattr(value, "metadata", None) or "",
                                   -1 if epoch is None else epoch)
        elif isinstance(value, tuple) and 1 <= len(value) <= 3:
            om = OffsetAndMetadata(*value)
        else:
            raise TypeError(f"{tp}: expected an offset, got {value!r}")
        if not isinstance(om.offset, int) or om.offset < 0:
            raise ValueError(f"{tp.topic}-{tp.partition}: offsets to commit are ints >= 0, "
                             f"got {om.offset!r}")
        if not isinstance(om.metadata, str):
            raise TypeError(f"{tp.topic}-{tp.partition}: commit metadata is a str, got "
                            f"{om.metadata!r}")
        out[tp] = om
    return out
