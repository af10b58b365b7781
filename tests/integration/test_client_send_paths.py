"""pylog.client's ``Producer.send``: the compiled path (``pylog.client._csend.FastSend``) and
the Python path give the same records, metadata and errors; eight threads sending through
one producer lose, duplicate and reorder nothing.

The compiled path takes the common record (bytes or None key and value, no headers, no
callback, no explicit timestamp); every other record, and every error, goes to the Python
path. Both run here in one producer, interleaved, and the log is read back byte for byte.
"""

from __future__ import annotations

import threading

import pytest

from pylog.client import Admin, Consumer, NewTopic, Producer, TopicPartition, _native

pytestmark = pytest.mark.integration

PARTITIONS = 4


def _create(bootstrap: str, topic: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])


def _read_all(bootstrap: str, topic: str, expected: int) -> list:
    out: list = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        while len(out) < expected:
            batch = c.poll(5.0)
            assert batch, f"read {len(out)} of {expected} records"
            out.extend(batch)
    return out


def test_the_compiled_path_is_in_use() -> None:
    import logcore

    if logcore.IMPLEMENTATION == "c":
        assert _native.IMPLEMENTATION == "c" and _native.FastSend is not None


def test_both_paths_write_the_same_records_and_metadata(broker, topic_name) -> None:
    _create(broker.bootstrap, topic_name)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5}) as p:
        slow = Producer.send.__get__(p)  # the Python path, bound to the same producer
        cases = [
            dict(value=b"plain"),
            dict(value=None, key=b"k-null-value"),
            dict(value=b"keyed", key=b"user-1"),
            dict(value=b"", key=b""),
            dict(value=b"explicit", partition=3),
            dict(value=b"keyless"),
        ]
        fast_futs = [p.send(topic_name, **c) for c in cases]
        slow_futs = [slow(topic_name, **c) for c in cases]
        p.flush(30)
        fast = [f.result(10) for f in fast_futs]
        slow_meta = [f.result(10) for f in slow_futs]
    for a, b, c in zip(fast, slow_meta, cases, strict=True):
        assert (a.topic, a.serialized_key_size, a.serialized_value_size) == (
            b.topic, b.serialized_key_size, b.serialized_value_size), c
        if "key" in c or "partition" in c:
            assert a.partition == b.partition, c  # murmur2 and explicit: the same partition
        assert a.offset >= 0 and a.timestamp > 0
    records = _read_all(broker.bootstrap, topic_name, 2 * len(cases))
    by_pos = {(r.partition, r.offset): r for r in records}
    for meta, c in [*zip(fast, cases, strict=True), *zip(slow_meta, cases, strict=True)]:
        r = by_pos[(meta.partition, meta.offset)]
        assert (r.key, r.value) == (c.get("key"), c.get("value")), c
        assert r.timestamp == meta.timestamp


def test_errors_are_the_python_paths(broker, topic_name) -> None:
    _create(broker.bootstrap, topic_name)
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        p.send(topic_name, b"warm-up").result(30)
        with pytest.raises(ValueError, match="partition 9 is not in topic"):
            p.send(topic_name, b"x", partition=9)
        with pytest.raises(ValueError, match="topic must be a non-empty string"):
            p.send("", b"x")
        with pytest.raises(TypeError, match="value must be bytes or None"):
            p.send(topic_name, "text")
        with pytest.raises(TypeError, match="key must be bytes or None"):
            p.send(topic_name, b"x", key=7)
        # a bytes-like value is taken (copied) by the Python path
        assert p.send(topic_name, bytearray(b"ab")).result(30).serialized_value_size == 2
    with pytest.raises(Exception, match="closed"):
        p.send(topic_name, b"after close")


def test_eight_threads_lose_duplicate_and_reorder_nothing(broker, topic_name) -> None:
    """One producer shared by eight threads, each sending keyless, keyed, explicit-partition
    and header-carrying records (both paths at once): every record lands once, and each
    thread's records keep their order within a partition."""
    _create(broker.bootstrap, topic_name)
    threads, per_thread = 8, 2500
    errors: list[BaseException] = []
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2,
                   "batch.size": 16384, "buffer.memory": 1 << 20}) as p:

        def run(t: int) -> None:
            try:
                for i in range(per_thread):
                    v = b"%d:%d" % (t, i)
                    kind = i % 4
                    if kind == 0:
                        p.send(topic_name, v)
                    elif kind == 1:
                        p.send(topic_name, v, key=b"t%d" % t)
                    elif kind == 2:
                        p.send(topic_name, v, partition=t % PARTITIONS)
                    else:
                        p.send(topic_name, v, headers=[("thread", b"%d" % t)])
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        p.flush(60)
    assert not errors, errors
    records = _read_all(broker.bootstrap, topic_name, threads * per_thread)
    values = [r.value for r in records]
    assert len(values) == len(set(values)) == threads * per_thread
    last: dict[tuple[int, int], int] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        t, i = map(int, r.value.split(b":"))
        assert last.get((r.partition, t), -1) < i, "a thread's records reordered in a partition"
        last[(r.partition, t)] = i
        if i % 4 == 3:
            assert list(r.headers) == [("thread", b"%d" % t)]
