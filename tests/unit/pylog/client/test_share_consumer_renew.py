"""``pylog.client.aio.ShareConsumer``'s KIP-1206 and KIP-1222 bookkeeping, without a
broker: ``share.acquire.mode`` and what happens to a record acknowledged with RENEW when
the broker answers (handed out again) or refuses (dropped, the error raised by a poll)."""

from __future__ import annotations

import pytest

from pylog import errors
from pylog.client.aio.share_consumer import AcknowledgeType as A
from pylog.client.aio.share_consumer import ShareConsumer
from pylog.client.config import ConfigError
from pylog.client.records import ConsumerRecord, TopicPartition

TP = TopicPartition("t", 0)


def _consumer(**extra: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                          "share.acknowledgement.mode": "explicit", **extra})


def _handed_out(c: ShareConsumer, offset: int) -> ConsumerRecord:
    r = ConsumerRecord("t", 0, offset, 0, 0, None, b"v", None, 0)
    c._delivered.setdefault(TP, set()).add(offset)
    c.delivery_counts[(TP, offset)] = 1
    return r


def test_share_acquire_mode_setting() -> None:
    assert _consumer().record_limit is False
    assert _consumer(**{"share.acquire.mode": "RECORD_LIMIT"}).record_limit is True
    with pytest.raises(ConfigError):
        _consumer(**{"share.acquire.mode": "strict"})


def test_a_renewed_record_is_handed_out_again_once_the_broker_renewed_it() -> None:
    c = _consumer()
    r = _handed_out(c, 5)
    c.acknowledge(r, A.RENEW)
    assert c._acks[TP] == {5: A.RENEW} and not c._delivered[TP]
    assert c.delivery_counts[(TP, 5)] == 1      # still this member's, count unchanged
    c._renewed({TP: [(5, 5, A.RENEW)]}, None)
    assert c._buffer == [r] and not c._renewing and not c.errors


def test_a_refused_renewal_drops_the_record_and_reports_the_error() -> None:
    c = _consumer()
    r5, r6 = _handed_out(c, 5), _handed_out(c, 6)
    c.acknowledge(r5, A.RENEW)
    c.acknowledge(r6, A.ACCEPT)
    refused = errors.InvalidRecordStateError("lock lost")
    c._renewed({TP: [(5, 5, A.RENEW), (6, 6, A.ACCEPT)]}, refused)
    assert c._buffer == [] and (TP, 5) not in c.delivery_counts
    assert c.errors == [refused]


def test_renewals_are_taken_out_for_a_broker_without_version_2() -> None:
    c = _consumer()
    r5, r6 = _handed_out(c, 5), _handed_out(c, 6)
    c.acknowledge(r5, A.RENEW)
    c.acknowledge(r6, A.REJECT)
    acks = {TP: [(5, 5, A.RENEW), (6, 6, A.REJECT)]}
    left = c._drop_renewals(acks, errors.UnsupportedVersionError("no v2"))
    assert left == {TP: [(6, 6, A.REJECT)]}
    assert isinstance(c.errors[0], errors.UnsupportedVersionError)
