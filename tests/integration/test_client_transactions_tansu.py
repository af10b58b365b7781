"""pylog.client's transactional producer against Tansu, an independent Kafka-compatible
broker with transactions (see ``test_client_groups_tansu.py`` for how it is started): the
wire side of FindCoordinator (key type 1), InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn and transactional Produce checked against a broker
we did not write.

Only the commit paths: the Tansu this was written against shows aborted records to
read_committed consumers, and answers an EndTxn of a fenced producer epoch by closing the
connection instead of with PRODUCER_FENCED, so abort invisibility and fencing are checked
on pylog's broker only (``test_client_transactions.py``).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.test_client_groups_tansu import tansu  # noqa: F401 - the fixture
from tests.integration.test_client_transactions import (
    asyncio_commit,
    commit_is_visible,
    offsets_after_commit,
)

pytestmark = pytest.mark.integration


def test_commit_is_visible_on_tansu(tansu: str) -> None:  # noqa: F811
    commit_is_visible({"bootstrap.servers": tansu}, tansu)


def test_offsets_reach_the_group_with_the_commit_on_tansu(tansu: str) -> None:  # noqa: F811
    offsets_after_commit({"bootstrap.servers": tansu}, check_pending=False)


def test_asyncio_transactions_on_tansu(tansu: str) -> None:  # noqa: F811
    asyncio.run(asyncio_commit({"bootstrap.servers": tansu}))
