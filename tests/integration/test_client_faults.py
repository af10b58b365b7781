"""pylog.client across broker failures: idempotent retries over a restart (no duplicate,
no loss, order kept), back-pressure at buffer.memory while the broker is down, metadata
refresh when a topic grows."""

from __future__ import annotations

import collections
import logging
import signal
import socket
import threading
import time

import pytest

from pylog.client import Admin, Consumer, KafkaTimeoutError, NewTopic, Producer, TopicPartition


def _read_all(bootstrap: str, topic: str, partitions: int, n: int, timeout: float = 60):
    got: dict[int, list] = collections.defaultdict(list)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        count = 0
        while count < n and time.monotonic() < deadline:
            for r in c.poll(0.5):
                got[r.partition].append(r)
                count += 1
        # Nothing more than n arrives (no duplicates hiding behind the count).
        for r in c.poll(1.0):
            got[r.partition].append(r)
    return got


class SwallowingProxy:
    """A TCP proxy to the broker that can swallow the broker's answers on the connections
    open when ``swallow()`` is called (the requests still reach the broker) and cut them:
    the "written but never acknowledged" case that idempotence exists for."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.conns: list[tuple[socket.socket, socket.socket, list[bool]]] = []
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self._closed = False
        self._spawn(self._accept)

    def _spawn(self, fn, *args) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            assert self.target is not None
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            flag = [False]
            with self.lock:
                self.conns.append((client, upstream, flag))
            self._spawn(self._pump, client, upstream, None)
            self._spawn(self._pump, upstream, client, flag)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, swallow: list[bool] | None) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if swallow is None or not swallow[0]:
                    dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def swallow(self) -> None:
        with self.lock:
            for _, _, flag in self.conns:
                flag[0] = True

    def cut(self) -> None:
        with self.lock:
            conns, self.conns = self.conns, []
        for a, b, _ in conns:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.cut()
        for t in self.threads:
            t.join(5)
        for a, b, _ in self.conns:
            a.close()
            b.close()


@pytest.fixture
def proxy():
    p = SwallowingProxy()
    closed: list[socket.socket] = []
    orig_cut = p.cut

    def cut_and_keep() -> None:
        with p.lock:
            closed.extend(s for a, b, _ in p.conns for s in (a, b))
        orig_cut()

    p.cut = cut_and_keep  # type: ignore[method-assign]
    yield p
    p.close()
    for s in closed:
        s.close()


def test_lost_answers_and_a_broker_kill_do_not_duplicate(new_broker, proxy, topic_name,
                                                         caplog) -> None:
    """Batches the broker wrote but whose answers never arrived are resent after the broker
    was killed and restarted: the broker recognises them (producer state recovered from the
    log) and nothing is written twice."""
    caplog.set_level(logging.DEBUG, logger="pylog.client.producer")
    b = new_broker({"num.partitions": "2", "auto.create.topics.enable": "true",
                    "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    b.start()
    proxy.target = ("127.0.0.1", b.port)
    via_proxy = f"127.0.0.1:{proxy.port}"
    n1, n2 = 500, 300
    # request.timeout.ms long enough that only the cut ends the swallowed requests; the
    # swallowed records fit in a few requests (linger.ms, batch.size), all sent at once
    # within max.in.flight.requests.per.connection.
    with Producer(bootstrap_servers=via_proxy, linger_ms=50, batch_size=65536,
                  retry_backoff_ms=50, request_timeout_ms=30000,
                  delivery_timeout_ms=90000) as p:
        first = [p.send(topic_name, b"a%05d" % i, key=b"k%d" % (i % 5)) for i in range(n1)]
        p.flush(30)
        assert all(f.result().offset >= 0 for f in first)
        proxy.swallow()  # from now on the producer's connections hear nothing back
        lost = [p.send(topic_name, b"b%05d" % i, key=b"k%d" % (i % 5)) for i in range(n2)]
        with Admin(bootstrap_servers=via_proxy) as admin:  # a new connection: not swallowed
            deadline = time.monotonic() + 30
            while True:
                ends = admin.list_offsets({(topic_name, 0): "latest", (topic_name, 1): "latest"})
                if sum(o for o, _ in ends.values()) == n1 + n2:
                    break  # every swallowed batch is in the log
                assert time.monotonic() < deadline, ends
                time.sleep(0.1)
        done = [(i, f.exception() or f.result()) for i, f in enumerate(lost) if f.done()]
        assert not done, done[:3]
        b.stop(sig=signal.SIGKILL)
        proxy.cut()
        b.start()
        proxy.target = ("127.0.0.1", b.port)
        p.flush(60)
        metas = [f.result(1) for f in first + lost]
    retried = [r for r in caplog.records if r.getMessage().startswith("retrying")]
    assert retried, "no batch was resent: the test proved nothing"
    got = _read_all(b.bootstrap, topic_name, 2, n1 + n2)
    values = [r.value for recs in got.values() for r in recs]
    assert len(values) == n1 + n2 == len(set(values)), "duplicates or losses"
    for recs in got.values():
        by_key = collections.defaultdict(list)
        for r in recs:
            by_key[r.key].append(r.value)
        for seq in by_key.values():
            assert seq == sorted(seq)
    where = {(r.partition, r.offset): r.value for recs in got.values() for r in recs}
    for m, want in zip(metas, [b"a%05d" % i for i in range(n1)] + [b"b%05d" % i for i in range(n2)],
                       strict=True):
        if m.offset >= 0:
            assert where[(m.partition, m.offset)] == want


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_sending_through_a_broker_restart_loses_and_duplicates_nothing(new_broker, topic_name,
                                                                      sig) -> None:
    b = new_broker({"num.partitions": "3", "auto.create.topics.enable": "true"}).start()
    n = 4000
    futs = []
    with Producer(bootstrap_servers=b.bootstrap, linger_ms=1, batch_size=4096,
                  retry_backoff_ms=50, retry_backoff_max_ms=200, request_timeout_ms=5000,
                  delivery_timeout_ms=90000) as p:
        assert p.settings["enable.idempotence"] is True
        for i in range(n):
            futs.append(p.send(topic_name, b"%06d" % i, key=b"k%d" % (i % 6)))
            if i == 1500:
                b.stop(sig=sig)
            elif i == 2500:
                b.start()
            if i % 200 == 0:
                time.sleep(0.01)  # let batches go out while sending
        p.flush(90)
        metas = [f.result(1) for f in futs]
    got = _read_all(b.bootstrap, topic_name, 3, n)
    values = [r.value for recs in got.values() for r in recs]
    counts = collections.Counter(values)
    assert len(values) == n, f"{len(values) - len(counts)} duplicate(s), {n - len(counts)} lost"
    assert set(counts) == {b"%06d" % i for i in range(n)}
    for recs in got.values():
        by_key = collections.defaultdict(list)
        for r in recs:
            by_key[r.key].append(int(r.value))
        for seq in by_key.values():
            assert seq == sorted(seq)
    where = {(r.partition, r.offset): r.value for recs in got.values() for r in recs}
    for i, m in enumerate(metas):
        if m.offset >= 0:
            assert where[(m.partition, m.offset)] == b"%06d" % i


def test_back_pressure_at_buffer_memory_while_the_broker_is_down(new_broker, topic_name) -> None:
    b = new_broker({"num.partitions": "1", "auto.create.topics.enable": "true"}).start()
    memory = 256 * 1024
    value = b"v" * 1000
    p = Producer(bootstrap_servers=b.bootstrap, buffer_memory=memory, max_block_ms=1500,
                 linger_ms=5, request_timeout_ms=3000, delivery_timeout_ms=60000)
    try:
        p.send(topic_name, b"first").result(30)  # metadata known, connection up
        b.stop()
        accepted = 0
        started = time.monotonic()
        blocked_for = None
        with pytest.raises(KafkaTimeoutError, match="buffer.memory"):
            while time.monotonic() - started < 60:
                t0 = time.monotonic()
                try:
                    p.send(topic_name, value)
                finally:
                    blocked_for = time.monotonic() - t0
                accepted += 1
                assert p._core.acc.used <= memory
        # send blocked for max.block.ms before raising, and memory stayed bounded.
        assert blocked_for is not None and blocked_for >= 1.4
        assert p._core.acc.used <= memory
        assert memory // 1100 <= accepted <= memory // 1000
        # The bound holds on every later try, and nothing was lost: after a restart all
        # accepted records are delivered.
        with pytest.raises(KafkaTimeoutError):
            p.send(topic_name, value)
        b.start()
        p.flush(60)
        assert p._core.acc.used == 0
        p.send(topic_name, b"after").result(30)
    finally:
        p.close()
    got = _read_all(b.bootstrap, topic_name, 1, accepted + 2)
    assert len(got[0]) == accepted + 2
    assert got[0][0].value == b"first" and got[0][-1].value == b"after"


def test_records_fail_at_delivery_timeout_while_the_broker_is_down(new_broker, topic_name) -> None:
    b = new_broker({"num.partitions": "1", "auto.create.topics.enable": "true"}).start()
    with Producer(bootstrap_servers=b.bootstrap, linger_ms=5, request_timeout_ms=1000,
                  delivery_timeout_ms=2500, retry_backoff_ms=50) as p:
        p.send(topic_name, b"first").result(30)  # metadata known, connection up
        b.stop()
        started = time.monotonic()
        later = [p.send(topic_name, b"late %d" % i) for i in range(3)]
        for fut in later:
            with pytest.raises(KafkaTimeoutError, match="delivery.timeout.ms"):
                fut.result(30)
        took = time.monotonic() - started
        # Not before delivery.timeout.ms; not long after it either (the sender looks at
        # least every retry backoff, a loaded machine adds seconds).
        assert 2.4 <= took < 20


def test_producer_and_consumer_see_new_partitions(broker, topic_name) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, num_partitions=1)])
        with Producer(bootstrap_servers=broker.bootstrap, metadata_max_age_ms=300,
                      batch_size=200) as p:
            assert p.partitions_for(topic_name) == [0]
            with pytest.raises(ValueError, match="partition 2 is not in topic"):
                p.send(topic_name, b"x", partition=2)
            admin.create_partitions({topic_name: 3})
            deadline = time.monotonic() + 20
            while p.partitions_for(topic_name) != [0, 1, 2]:
                assert time.monotonic() < deadline, "the producer never saw the new partitions"
                p.send(topic_name, b"tick").result(10)
                time.sleep(0.1)
            assert p.send(topic_name, b"on-2", partition=2).result(10).partition == 2
            # Keyless records now spread over all three (sticky, batch.size=200 bytes).
            placed = {p.send(topic_name, b"z" * 50).result(10).partition for _ in range(200)}
            assert placed == {0, 1, 2}
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic_name, 2)])
        first = c.poll(5.0, max_records=1)
        assert first and first[0].value == b"on-2" and first[0].partition == 2
