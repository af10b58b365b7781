"""Transactional producers and read_committed readers of the three real clients, one API.

Used by tests/integration/test_txn_clients.py. Each producer runs one transaction per
``transaction(records, commit)`` call; each reader reads one partition from the beginning
up to (and not including) a sentinel record and returns the values it saw, in order.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Iterable
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import aiokafka
    import confluent_kafka
    import kafka

CLIENTS = ("confluent", "kafka-python", "aiokafka")
SENTINEL = b"--sentinel--"


class TxnProducer:
    """A transactional producer of ``client`` (``init_transactions`` done in ``__init__``)."""

    def __init__(self, client: str, bootstrap: str, transactional_id: str,
                 timeout_ms: int = 60000) -> None:
        self.client = client
        if client == "confluent":
            self._p: Any = confluent_kafka.Producer({
                "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                "transaction.timeout.ms": timeout_ms, "linger.ms": 5,
            })
            self._p.init_transactions(30)
        elif client == "kafka-python":
            self._p = kafka.KafkaProducer(
                bootstrap_servers=bootstrap, transactional_id=transactional_id,
                transaction_timeout_ms=timeout_ms, linger_ms=5)
            self._p.init_transactions()
        elif client == "aiokafka":
            self._loop = asyncio.new_event_loop()

            async def make() -> Any:  # aiokafka objects are built inside their loop
                p = aiokafka.AIOKafkaProducer(
                    bootstrap_servers=bootstrap, transactional_id=transactional_id,
                    transaction_timeout_ms=timeout_ms, linger_ms=5)
                await p.start()  # InitProducerId happens here
                return p

            self._p = self._loop.run_until_complete(make())
        else:
            raise ValueError(client)

    def begin(self) -> None:
        if self.client == "aiokafka":
            self._loop.run_until_complete(self._p.begin_transaction())
        else:
            self._p.begin_transaction()

    def send(self, topic: str, values: Iterable[bytes], partition: int = 0) -> None:
        if self.client == "confluent":
            for v in values:
                self._p.produce(topic, v, partition=partition)
            self._p.flush(30)
        elif self.client == "kafka-python":
            futs = [self._p.send(topic, value=v, partition=partition) for v in values]
            self._p.flush(30)
            for f in futs:
                f.get(30)
        else:
            async def go() -> None:
                futs = [await self._p.send(topic, value=v, partition=partition) for v in values]
                await asyncio.gather(*futs)
            self._loop.run_until_complete(go())

    def end(self, commit: bool) -> None:
        if self.client == "confluent":
            (self._p.commit_transaction if commit else self._p.abort_transaction)(30)
        elif self.client == "kafka-python":
            (self._p.commit_transaction if commit else self._p.abort_transaction)()
        else:
            end = self._p.commit_transaction if commit else self._p.abort_transaction
            self._loop.run_until_complete(end())

    def transaction(self, topic: str, values: Iterable[bytes], commit: bool) -> None:
        self.begin()
        self.send(topic, values)
        self.end(commit)

    def close(self) -> None:
        if self.client == "confluent":
            self._p.flush(10)
        elif self.client == "kafka-python":
            self._p.close(timeout=10)
        else:
            self._loop.run_until_complete(self._p.stop())
            self._loop.close()


def send_plain(bootstrap: str, topic: str, values: Iterable[bytes], partition: int = 0) -> None:
    """Non-transactional (idempotent) records, e.g. the sentinel."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(30) == 0


def read_to_sentinel(client: str, bootstrap: str, topic: str, isolation: str,
                     partition: int = 0, timeout: float = 30.0) -> list[bytes]:
    """The values of ``topic``/``partition`` before the first sentinel, read from the
    beginning with ``isolation`` (``read_committed`` or ``read_uncommitted``)."""
    deadline = time.monotonic() + timeout
    out: list[bytes] = []
    if client == "confluent":
        c = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": "txn-reader", "enable.auto.commit": False,
            "isolation.level": isolation, "enable.partition.eof": False,
        })
        try:
            c.assign([confluent_kafka.TopicPartition(topic, partition,
                                                     confluent_kafka.OFFSET_BEGINNING)])
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                assert m.error() is None, m.error()
                if m.value() == SENTINEL:
                    return out
                out.append(m.value())
        finally:
            c.close()
    elif client == "kafka-python":
        c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                enable_auto_commit=False, auto_offset_reset="earliest")
        try:
            tp = kafka.TopicPartition(topic, partition)
            c.assign([tp])
            c.seek_to_beginning(tp)
            while time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=500).values():
                    for r in recs:
                        if r.value == SENTINEL:
                            return out
                        out.append(r.value)
        finally:
            c.close()
    else:
        async def go() -> list[bytes] | None:
            c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                          enable_auto_commit=False, auto_offset_reset="earliest")
            await c.start()
            try:
                tp = aiokafka.TopicPartition(topic, partition)
                c.assign([tp])
                await c.seek_to_beginning(tp)
                while time.monotonic() < deadline:
                    for recs in (await c.getmany(timeout_ms=500)).values():
                        for r in recs:
                            if r.value == SENTINEL:
                                return out
                            out.append(r.value)
            finally:
                await c.stop()
            return None
        loop = asyncio.new_event_loop()
        try:
            got = loop.run_until_complete(go())
        finally:
            loop.close()
        if got is not None:
            return got
    raise AssertionError(f"{client} ({isolation}) did not reach the sentinel of {topic} in "
                         f"{timeout} s; read {len(out)} records")
