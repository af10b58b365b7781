"""Planning a consumer group's offset reset with ``kafka-consumer-groups.sh``'s options.

``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--to-datetime YYYY-MM-DDTHH:mm:SS[.sss]``
(UTC unless an offset such as ``+02:00`` is given), ``--shift-by N`` and ``--by-duration
PnDTnHnMnS``, for every partition of a topic the group has offsets for (or one topic).
Offsets are clamped into each partition's [log start, log end], as Kafka's command does.
The plan is shown first; it is committed only on ``execute`` and only while the group has
no members (Kafka's rule: a running member would overwrite the reset with its next commit).
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from pylog.client import TopicPartition
from pylog.console.data import ClusterData

__all__ = ["MODES", "ResetError", "plan_reset", "parse_datetime", "parse_duration"]

#: mode -> (label, whether it takes a value)
MODES = {"to-earliest": ("to earliest", False), "to-latest": ("to latest", False),
         "to-offset": ("to offset", True), "to-datetime": ("to datetime", True),
         "shift-by": ("shift by", True), "by-duration": ("by duration", True)}

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


class ResetError(ValueError):
    """A reset that cannot be planned or done; the message says what to change."""


def parse_datetime(text: str) -> int:
    """``2024-05-01T12:00:00`` (UTC), with optional ``.sss`` and ``Z``/``+hh:mm`` -> epoch ms.

    Raises:
        ResetError: not such a date-time.
    """
    value = text.strip().replace("Z", "+00:00")
    try:
        dt = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ResetError(f"{text!r}: expected a date-time such as 2024-05-01T12:00:00 "
                         "(UTC, or with +hh:mm)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp() * 1000)


def parse_duration(text: str) -> int:
    """An ISO-8601 duration ``PnDTnHnMnS`` (Kafka's ``--by-duration``) -> ms.

    Raises:
        ResetError: not such a duration.
    """
    m = _DURATION.match(text.strip())
    if m is None or text.strip() in ("P", "PT"):
        raise ResetError(f"{text!r}: expected an ISO-8601 duration such as PT1H or P1DT30M")
    d, h, mi, s = m.groups()
    seconds = int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)
    return int(seconds * 1000)


def _int(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ResetError(f"{what}: expected an integer, got {text!r}") from None


async def plan_reset(data: ClusterData, group_id: str, mode: str, value: str, topic: str | None,
                     now_ms: int) -> list[dict[str, Any]]:
    """The new offset of each partition: ``[{topic, partition, current, new, start, end}]``
    (``now_ms``: the console clock's time, which ``--by-duration`` counts back from).

    Raises:
        ResetError: an unknown mode, a bad value, or nothing to reset.
    """
    if mode not in MODES:
        raise ResetError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    admin = data.admin
    committed = await data.committed(group_id)
    tps = sorted(tp for tp in committed if topic in (None, "", tp.topic))
    if topic and not tps:  # a topic the group never committed for: all its partitions
        desc = (await admin.describe_topics([topic]))[topic]
        tps = [TopicPartition(topic, p.partition) for p in desc.partitions]
    if not tps:
        raise ResetError(f"group {group_id!r} has no committed offsets: choose a topic to "
                         "reset")
    first = await admin.list_offsets(dict.fromkeys(tps, "earliest"))
    last = await admin.list_offsets(dict.fromkeys(tps, "latest"))
    starts = {tp: o for tp, (o, _) in first.items()}
    ends = {tp: o for tp, (o, _) in last.items()}
    current: dict[TopicPartition, int | None] = {
        tp: (c.offset if c is not None else None) for tp, c in committed.items()}
    wanted: dict[TopicPartition, int] = {}
    if mode == "to-earliest":
        wanted = {tp: starts[tp] for tp in tps}
    elif mode == "to-latest":
        wanted = {tp: ends[tp] for tp in tps}
    elif mode == "to-offset":
        n = _int(value, "offset")
        wanted = dict.fromkeys(tps, n)
    elif mode == "shift-by":
        n = _int(value, "shift")
        for tp in tps:  # from the committed offset, which Kafka's command requires too
            now = current.get(tp)
            if now is None:
                raise ResetError(f"cannot shift {tp.topic}-{tp.partition}: the group has no "
                                 "committed offset there; reset it to an offset, the "
                                 "earliest or the latest first")
            wanted[tp] = now + n
    else:
        ts = parse_datetime(value) if mode == "to-datetime" else now_ms - parse_duration(value)
        found = await admin.list_offsets(dict.fromkeys(tps, max(ts, 0)))
        wanted = {tp: (o if o >= 0 else ends[tp]) for tp, (o, _) in found.items()}
    return [{"topic": tp.topic, "partition": tp.partition, "current": current.get(tp),
             "new": min(max(wanted[tp], starts[tp]), ends[tp]), "start": starts[tp],
             "end": ends[tp]} for tp in tps]
