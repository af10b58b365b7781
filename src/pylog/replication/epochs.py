"""Leader-epoch reconciliation between a leader and a follower (KIP-101, KIP-595's
diverging epoch in Fetch v12+). Pure functions over a leader-epoch cache's entries.

- ``epoch_end_offset``: Kafka's ``LeaderEpochFileCache.endOffsetFor``: for a requested epoch,
  the largest epoch <= it that this log knows and the offset where that epoch ended (the
  next epoch's start offset, or the log end offset for the latest epoch). An epoch newer
  than every entry is unknown: (-1, -1). An epoch older than every entry ends where the
  first known epoch starts: (requested, first start offset).
- ``diverging_epoch``: the leader's check of a follower's fetch
  (``Partition.fetchRecords``): the follower's last fetched epoch ends, on the leader,
  before the fetch offset, or the leader knows only an older epoch: the fetch returns
  no records but ``diverging_epoch`` = the leader's (epoch, end offset).
- ``truncation_offset``: the follower's answer to that (``AbstractFetcherThread.
  getOffsetTruncationState``): where to cut its log, and whether that settles the
  divergence (else the next fetch, with the new last epoch, asks again).
"""

from __future__ import annotations

from collections.abc import Sequence

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def epoch_end_offset(entries: Sequence[tuple[int, int]], requested: int,
                     log_end_offset: int) -> tuple[int, int]:
    """(epoch, end offset) for ``requested`` over (epoch, start offset) ``entries``."""
    if requested == UNDEFINED_EPOCH or not entries:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if entries[-1][0] == requested:
        return requested, log_end_offset
    higher = next((i for i, (e, _s) in enumerate(entries) if e > requested), None)
    if higher is None:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if higher == 0:
        return requested, entries[0][1]
    return entries[higher - 1][0], entries[higher][1]


def diverging_epoch(entries: Sequence[tuple[int, int]], last_fetched_epoch: int,
                    fetch_offset: int, log_end_offset: int) -> tuple[int, int] | None:
    """The leader's (epoch, end offset) to return as ``diverging_epoch``, or None when the
    follower's log agrees up to ``fetch_offset`` (or it sent no last fetched epoch)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = epoch_end_offset(entries, last_fetched_epoch, log_end_offset)
    if end < fetch_offset or epoch < last_fetched_epoch:
        return epoch, end
    return None


def truncation_offset(leader_epoch: int, leader_end_offset: int,
                      entries: Sequence[tuple[int, int]], log_end_offset: int,
                      high_watermark: int) -> tuple[int, bool]:
    """Where a follower truncates given the leader's (epoch, end offset) for its last
    epoch; returns (offset, settled). Not settled: the follower's own epoch at that point
    is older than the leader's answer, so the next fetch asks about that older epoch."""
    if leader_end_offset == UNDEFINED_OFFSET:
        # The leader knows no epoch at or before ours: keep only what is committed.
        return min(high_watermark, log_end_offset), True
    if leader_epoch == UNDEFINED_EPOCH:
        return min(leader_end_offset, log_end_offset), True
    epoch, end = epoch_end_offset(entries, leader_epoch, log_end_offset)
    if epoch == UNDEFINED_EPOCH:
        return min(leader_end_offset, log_end_offset), True
    if epoch == leader_epoch:
        return min(leader_end_offset, end), True
    return min(end, log_end_offset), False


def epoch_for_offset(entries: Sequence[tuple[int, int]], offset: int) -> int:
    """The leader epoch in which ``offset`` was written (-1 when before every entry)."""
    epoch = UNDEFINED_EPOCH
    for e, start in entries:
        if start > offset:
            break
        epoch = e
    return epoch
