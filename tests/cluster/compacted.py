"""The checks of a compacted topic written by keyed idempotent producers while the cleaner runs.

What compaction may do: drop a record whose key has a later record (and, past
``delete.retention.ms``, a tombstone that is its key's last record). What it may not: lose
or change a key's latest record, move a record to another offset, keep two copies of one.
So, for each partition, from the final read (leader, offset 0 up to the high watermark):

- offsets increase; no value appears twice;
- every acknowledged record that is still there is at the offset its delivery report gave,
  with its key and value (a record read at an acknowledged offset that differs is lost);
- each key's last record read is its latest acknowledged one (same offset and value); if
  that is a tombstone, the key may also be absent. A later record than the latest
  acknowledged one is accepted only if it is one whose delivery failed (it may have been
  written);
- every key read was written.

The replicas are then compared from their files (brokers stopped), below the high
watermark. Each replica's cleaner runs on its own schedule, so which segments are cleaned,
which superseded records are gone and which tombstones are removed differ between
replicas, and their bytes may differ. Bytes identical pass at once; otherwise the records
are compared: at every offset both replicas hold, the same key and value; each key's
latest value (tombstones left out, as one replica may have removed one the other keeps) the
same on every replica; and every replica ends at the same last offset.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from .workload import Acks, Record, Seen

if TYPE_CHECKING:
    from .faults import Figures


def latest(records: list[Record]) -> dict[bytes | None, tuple[int, bytes | None]]:
    """Each key's last (offset, value) in ``records`` (in offset order)."""
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for o, k, v in records:
        out[k] = (o, v)
    return out


def check_compacted(figures: Figures, acks: Acks, final: dict[int, list[Record]],
                    high_watermarks: dict[int, int]) -> None:
    for p, recs in final.items():
        offsets = [o for o, _k, _v in recs]
        if any(b <= a for a, b in zip(offsets, offsets[1:], strict=False)):
            figures.gaps += 1
            figures.problems.append(f"partition {p}: offsets do not increase")
        counts = collections.Counter(v for _o, _k, v in recs if v is not None)
        dups = [v for v, n in counts.items() if n > 1]
        figures.duplicates += sum(counts[v] - 1 for v in dups)
        for v in dups[:3]:
            figures.problems.append(f"partition {p}: {v[:24]!r} appears {counts[v]} times")
        by_offset = {o: (k, v) for o, k, v in recs}
        acked = sorted(acks.acked.get(p, []))
        for o, k, v in acked:
            got = by_offset.get(o)
            if o < high_watermarks[p] and got is None:
                figures.cleaned += 1  # superseded, cleaned away (checked below per key)
            elif got != (k, v):
                figures.lost += 1
                if figures.lost <= 5:
                    figures.problems.append(
                        f"partition {p}: acknowledged {k!r}={(v or b'(tombstone)')[:24]!r} at "
                        f"offset {o}, the log has {got!r:.60}")
        figures.tombstones += sum(1 for _o, _k, v in acked if v is None)
        unacked = {(k, v) for q, k, v in acks.unacked if q == p}
        want = latest(acked)
        have = latest(recs)
        figures.keys += len(want)
        for k, (o, v) in want.items():
            got = have.get(k)
            if got == (o, v) or (v is None and got is None):
                continue
            if got is not None and got[0] > o and (k, got[1]) in unacked:
                continue  # a later record whose delivery failed: written after all
            figures.lost += 1
            if figures.lost <= 5:
                read = "nothing" if got is None else \
                    f"{(got[1] or b'(tombstone)')[:24]!r} at offset {got[0]}"
                figures.problems.append(
                    f"partition {p} key {k!r}: latest acknowledged "
                    f"{(v or b'(tombstone)')[:24]!r} at offset {o}, last read {read}")
        for k in have.keys() - want.keys():
            if not any(uk == k for uk, _v in unacked):
                figures.problems.append(f"partition {p}: key {k!r} read, never acknowledged")


def check_compacted_consumers(figures: Figures, seen: dict[str, Seen],
                              final: dict[int, list[Record]]) -> None:
    """What a live consumer read before the cleaner ran is in the final read at the same
    offset, or was superseded there (a later record of its key), or its key's last record
    was a tombstone since removed; and each consumer reached the last record."""
    for name, s in seen.items():
        total = 0
        for p, recs in s.records.items():
            by_offset = {o: (k, v) for o, k, v in final[p]}
            have = latest(final[p])
            for o, k, v in recs:
                got = by_offset.get(o)
                if got == (k, v):
                    continue
                if got is None and (k not in have or have[k][0] > o):
                    continue  # cleaned away since
                figures.consumer_mismatches += 1
                if figures.consumer_mismatches <= 5:
                    figures.problems.append(f"{name} read {k!r}={(v or b'')[:24]!r} at "
                                            f"partition {p} offset {o}; the final log has "
                                            f"{got!r:.60} there")
            total += len(recs)
        for p, recs in final.items():
            end = recs[-1][0] + 1 if recs else 0
            if s.position(p) < end:
                figures.problems.append(f"{name} stopped at offset {s.position(p)} of "
                                        f"partition {p}, the last record is at {end - 1}")
        figures.consumed[name] = total
        figures.problems += [f"{name}: {e}" for e in s.errors]
        figures.client_errors += [f"{name}: {e}" for e in s.client_errors]


def compare_compacted_replicas(figures: Figures, p: int, copies: dict[int, list[Record]],
                               byte_identical: bool) -> None:
    """The records of one partition's replicas (see the module docstring)."""
    if byte_identical:
        figures.replicas_identical += 1
        return
    figures.replicas_by_records += 1
    ref_id = min(copies)
    ref = copies[ref_id]
    ref_by_offset = {o: (k, v) for o, k, v in ref}
    ref_latest = {k: ov for k, ov in latest(ref).items() if ov[1] is not None}
    for bid, recs in copies.items():
        if bid == ref_id:
            continue
        why = []
        differ = [o for o, k, v in recs if o in ref_by_offset and ref_by_offset[o] != (k, v)]
        if differ:
            why.append(f"{len(differ)} offsets both hold differ (first {differ[0]})")
        mine = {k: ov for k, ov in latest(recs).items() if ov[1] is not None}
        if mine != ref_latest:
            keys = sorted(k for k in mine.keys() | ref_latest.keys()
                          if mine.get(k) != ref_latest.get(k))
            why.append(f"the latest value of {len(keys)} keys differs (first {keys[0]!r}: "
                       f"{mine.get(keys[0])!r:.50} vs {ref_latest.get(keys[0])!r:.50})")
        if (recs[-1][0] if recs else -1) != (ref[-1][0] if ref else -1):
            why.append(f"last offsets {recs[-1][0] if recs else None} vs "
                       f"{ref[-1][0] if ref else None}")
        if why:
            figures.diverged_replicas += 1
            figures.problems.append(f"partition {p}: broker {bid}'s replica differs from broker "
                                    f"{ref_id}'s: {'; '.join(why)}")
