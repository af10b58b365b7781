"""What a share group must never deliver (``pylog.group.share.transactions``): markers in
both isolation levels, aborted transactions' data under read_committed."""

from __future__ import annotations

from logcore import AbortedTxn
from pylog.group.share.transactions import unreadable_ranges

# (base, last, producer id, is_control) as Log.txn_batches gives them:
# 0-2 pid 7 (aborted by the marker at 3), 4-5 pid 8 (committed at 6), 7-8 pid 7 again
# (a later transaction of 7, committed at 10), 9 pid 9 (aborted by the marker at 11).
BATCHES = [(0, 2, 7, False), (3, 3, 7, True), (4, 5, 8, False), (6, 6, 8, True),
           (7, 8, 7, False), (9, 9, 9, False), (10, 10, 7, True), (11, 11, 9, True)]
ABORTED = [AbortedTxn(7, 0, 3, 4), AbortedTxn(9, 9, 11, 12)]


def test_read_uncommitted_leaves_out_only_the_markers() -> None:
    assert unreadable_ranges(BATCHES, ABORTED, False) == [(3, 3), (6, 6), (10, 11)]


def test_read_committed_leaves_out_markers_and_aborted_data() -> None:
    # 0-2 aborted (with its marker 3); 7-8 is pid 7's next transaction, committed: kept
    assert unreadable_ranges(BATCHES, ABORTED, True) == [(0, 3), (6, 6), (9, 11)]


def test_plain_reads_and_unrelated_aborts() -> None:
    assert unreadable_ranges([], ABORTED, True) == []
    # an aborted transaction of another producer does not touch pid 8's data
    assert unreadable_ranges([(4, 5, 8, False)], [AbortedTxn(7, 0, 30, 31)], True) == []
    # a batch after its producer's abort marker is not aborted by it
    assert unreadable_ranges([(40, 41, 7, False)], [AbortedTxn(7, 0, 30, 31)], True) == []
