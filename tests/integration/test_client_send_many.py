"""pylog.client's ``Producer.send_many``: columns of records in, whole batches out.

Read back from the broker: every record once, keyed records in the partition ``send()``
(murmur2) would pick and in the order given within it, keyless ones spread batch by batch,
None values and keys kept, numpy and pyarrow columns, one timestamp for all, transactions,
and the errors that queue nothing. Both implementations of the keys' partitions (C and
Python) give the same answer.
"""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest

from pylog.client import (
    Admin,
    BatchDelivery,
    Consumer,
    KafkaTimeoutError,
    NewTopic,
    Producer,
    RecordTooLargeError,
    TopicPartition,
    partition_for_key,
)
from pylog.client import partitioner as py_partitioner
from pylog.client._native import partitions_for_keys

pytestmark = pytest.mark.integration

PARTITIONS = 4


def _create(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def _read_all(bootstrap: str, topic: str, expected: int, partitions: int = PARTITIONS,
              **conf) -> list:
    out: list = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   **conf}) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        while len(out) < expected:
            batch = c.poll(5.0)
            assert batch, f"read {len(out)} of {expected} records"
            out.extend(batch)
    return out


def test_keys_partition_as_send_does_in_both_implementations() -> None:
    keys = [os.urandom(i % 37) for i in range(3000)] + [None, b""]
    expected = [-1 if k is None else partition_for_key(k, 7) for k in keys]
    assert partitions_for_keys(keys, 7) == expected
    assert py_partitioner.partitions_for_keys(keys, 7) == expected
    with pytest.raises(TypeError, match=r"key 1 must be bytes or None, got str"):
        partitions_for_keys([b"a", "b"], 3)


def test_keyed_records_land_where_send_puts_them_in_order(broker, topic_name) -> None:
    _create(broker.bootstrap, topic_name)
    n = 20_000
    keys = [b"user-%d" % (i % 101) for i in range(n)]
    values = [b"v%06d" % i for i in range(n)]
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5}) as p:
        fut = p.send_many(topic_name, values, keys)
        assert fut.record_count == n
        deliveries = fut.result(60)
        single = p.send(topic_name, b"after", key=b"user-7").result(30)
    assert all(isinstance(d, BatchDelivery) and d.base_offset >= 0 for d in deliveries)
    assert sum(d.record_count for d in deliveries) == n
    records = _read_all(broker.bootstrap, topic_name, n + 1)
    by_partition = collections.defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        by_partition[r.partition].append(r)
        if r.key is not None and r.value != b"after":
            assert r.partition == partition_for_key(r.key, PARTITIONS)
    for part, recs in by_partition.items():
        mine = [r.value for r in recs if r.value != b"after"]
        assert mine == sorted(mine), f"partition {part} out of order"
    last = by_partition[single.partition][-1]
    assert (last.value, last.offset) == (b"after", single.offset)
    assert sorted(r.value for r in records if r.value != b"after") == values


def test_keyless_records_spread_by_batch_with_nulls_and_one_timestamp(broker,
                                                                      topic_name) -> None:
    _create(broker.bootstrap, topic_name)
    n = 5_000
    values = [None if i % 10 == 0 else b"x" * (i % 200) for i in range(n)]
    with Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 8192}) as p:
        deliveries = p.send_many(topic_name, values, timestamp_ms=1_700_000_000_000).result(60)
    assert len(deliveries) > PARTITIONS  # ~60 KB of records in batches of <= 8 KiB
    assert len({d.partition for d in deliveries}) > 1
    records = _read_all(broker.bootstrap, topic_name, n)
    assert sorted((r.value or b"-") for r in records) == sorted((v or b"-") for v in values)
    assert sum(r.value is None for r in records) == n // 10
    assert {r.timestamp for r in records} == {1_700_000_000_000}
    assert all(r.key is None for r in records)
    for d in deliveries:  # each batch is a contiguous run of the input, in order
        got = [r.value for r in records if r.partition == d.partition
               and d.base_offset <= r.offset < d.base_offset + d.record_count]
        assert len(got) == d.record_count


def test_numpy_and_pyarrow_columns_and_an_explicit_partition(broker, topic_name) -> None:
    pa = pytest.importorskip("pyarrow")
    _create(broker.bootstrap, topic_name)
    np_values = np.array([b"np-%d" % i for i in range(100)], dtype=object)
    pa_values = pa.array([f"arrow-{i}" for i in range(100)])
    pa_keys = pa.array([b"k%d" % i for i in range(100)], type=pa.binary())
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        a = p.send_many(topic_name, np_values, partition=2)
        b = p.send_many(topic_name, pa_values, pa_keys, partition=2)
        assert {d.partition for d in a.result(30) + b.result(30)} == {2}
    records = sorted(_read_all(broker.bootstrap, topic_name, 200), key=lambda r: r.offset)
    assert [r.value for r in records] == [b"np-%d" % i for i in range(100)] + [
        b"arrow-%d" % i for i in range(100)]
    assert [r.key for r in records[100:]] == [b"k%d" % i for i in range(100)]


def test_bad_columns_queue_nothing(broker, topic_name) -> None:
    _create(broker.bootstrap, topic_name)
    with Producer({"bootstrap.servers": broker.bootstrap, "max.request.size": 10_000}) as p:
        with pytest.raises(TypeError, match=r"values\[1\] must be bytes or None, got int"):
            p.send_many(topic_name, [b"a", 1])
        with pytest.raises(TypeError, match="not one bytes"):
            p.send_many(topic_name, b"abc")
        with pytest.raises(TypeError, match="dtype=object"):
            p.send_many(topic_name, np.array([b"a", b"b"]))
        with pytest.raises(ValueError, match="2 keys for 3 values"):
            p.send_many(topic_name, [b"a", b"b", b"c"], [b"k", b"k"])
        with pytest.raises(RecordTooLargeError, match="record 1 of about"):
            p.send_many(topic_name, [b"a", b"x" * 20_000])
        with pytest.raises(ValueError, match="partition 9"):
            p.send_many(topic_name, [b"a"], partition=9)
        p.send_many(topic_name, [bytearray(b"ok"), memoryview(b"mv")], partition=0).result(30)
    values = sorted(r.value for r in _read_all(broker.bootstrap, topic_name, 2))
    assert values == [b"mv", b"ok"]


def test_buffer_memory_bounds_the_call(broker, topic_name) -> None:
    _create(broker.bootstrap, topic_name)
    # A pool of 64 KiB for 400 KB of records: the call waits for batches to complete and
    # queues the rest as room comes back.
    with Producer({"bootstrap.servers": broker.bootstrap, "buffer.memory": 65_536,
                   "batch.size": 16_384}) as p:
        values = [b"y" * 1000] * 400
        assert sum(d.record_count for d in p.send_many(topic_name, values).result(60)) == 400
    assert len(_read_all(broker.bootstrap, topic_name, 400)) == 400


def test_a_full_pool_times_out_naming_what_was_queued() -> None:
    from pylog.testing import KafkaBroker

    with KafkaBroker() as kb:
        kb.create_topic("pool", 2)
        with Producer({"bootstrap.servers": kb.bootstrap_servers, "buffer.memory": 40_000,
                       "batch.size": 16_384, "max.block.ms": 500}) as p:
            p.send_many("pool", [b"z"], partition=0).result(30)  # metadata known
            kb.pause()  # no answers: nothing queued completes, no memory comes back
            try:
                with pytest.raises(KafkaTimeoutError, match=r"; 34 of 60 records were queued"):
                    p.send_many("pool", [b"w" * 900] * 60, partition=1)
            finally:
                kb.resume()
            p.flush(30)
        assert len(kb.records("pool", 1)) == 34


def test_in_a_transaction(broker, topic_name) -> None:
    _create(broker.bootstrap, topic_name)
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic_name}"}
    with Producer(conf) as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send_many(topic_name, [b"aborted-%d" % i for i in range(50)])
        p.abort_transaction(30)
        p.begin_transaction()
        fut = p.send_many(topic_name, [b"c-%d" % i for i in range(50)], [b"k%d" % i for i in
                                                                         range(50)])
        p.commit_transaction(30)
        assert fut.done() and fut.exception(0) is None
    got = _read_all(broker.bootstrap, topic_name, 50, **{"isolation.level": "read_committed"})
    assert sorted(r.value for r in got) == sorted(b"c-%d" % i for i in range(50))


def test_the_asyncio_producer(broker, topic_name) -> None:
    import asyncio

    from pylog.client.aio import Producer as AioProducer

    _create(broker.bootstrap, topic_name)

    async def main() -> list[BatchDelivery]:
        async with AioProducer({"bootstrap.servers": broker.bootstrap,
                                "batch.size": 4096}) as p:
            fut = await p.send_many(topic_name, [b"a%04d" % i for i in range(2000)],
                                    [b"k%d" % (i % 9) for i in range(2000)])
            return await asyncio.wait_for(fut, 60)

    deliveries = asyncio.run(main())
    assert sum(d.record_count for d in deliveries) == 2000
    records = _read_all(broker.bootstrap, topic_name, 2000)
    assert all(r.partition == partition_for_key(r.key, PARTITIONS) for r in records)
    assert sorted(r.value for r in records) == [b"a%04d" % i for i in range(2000)]
