"""What of a log read a share group must never deliver: transaction markers, and under
``share.isolation.level=read_committed`` the data of aborted transactions (KIP-932; Kafka's
``SharePartition.filterAbortedTransactionalAcquiredRecords``).

A ShareFetch response has no ``AbortedTransactions`` field (a Fetch response has), so a
share consumer cannot drop aborted batches itself: the share-partition leader does, by
archiving their offsets instead of acquiring them. Control batches (COMMIT/ABORT markers)
hold no record for the application; Kafka acquires their offsets and lets the client
acknowledge them as gaps, pylog archives them at once in both isolation levels, so that a
client that does not send those gaps (or a marker at the tail of the log) never holds the
share-partition start offset back. Under read_committed the read also stops at the last
stable offset, so an open transaction holds everything after its first offset back until
it ends.

A data batch is aborted when it is transactional and its producer has an aborted
transaction (a ``.txnindex`` entry: producer id, first offset, ABORT marker offset) whose
range holds it: a producer has at most one transaction open at a time, so its batches
between the transaction's first offset and its marker all belong to it.

Sans-IO: the caller reads the batches (``logcore.Log.txn_batches``) and the aborted
transactions (``Log.aborted_transactions``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["READ_COMMITTED", "READ_UNCOMMITTED", "unreadable_ranges"]

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"


def unreadable_ranges(batches: Iterable[tuple[int, int, int, bool]], aborted: Sequence[Any],
                      read_committed: bool) -> list[tuple[int, int]]:
    """The offset ranges ``[(first, last)]`` (inclusive, ascending, merged when adjacent) a
    share group must archive instead of delivering.

    Args:
        batches: ``(base_offset, last_offset, producer_id, is_control)`` of the read's
            transactional and control batches, in offset order.
        aborted: the aborted transactions overlapping the read (``producer_id``,
            ``first_offset`` and ``last_offset``, the ABORT marker's offset); only used with
            ``read_committed``.
        read_committed: the group's ``share.isolation.level`` is read_committed.
    """
    spans: dict[int, list[tuple[int, int]]] = {}
    if read_committed:
        for t in aborted:
            spans.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
    out: list[tuple[int, int]] = []
    for base, last, pid, is_control in batches:
        if not is_control:
            if not any(first <= base and last < marker for first, marker in spans.get(pid, ())):
                continue
        if out and out[-1][1] + 1 >= base:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((base, last))
    return out
