"""pylog.client's transactional producer against pylog's broker, over the network and
embedded (the same scenarios in both modes, as ``test_client_parity.py``): a commit is
visible to read_committed consumers (ours and confluent-kafka's), an abort never is, offsets
sent with ``send_offsets_to_transaction`` reach the group only when the transaction
commits, and a second producer with the same ``transactional.id`` fences the first.

The scenario functions take client settings, so ``test_client_transactions_tansu.py`` runs
the commit paths against Tansu too.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from pylog import errors
from pylog.client import (
    AbortableTransactionError,
    Admin,
    CommitFailedError,
    Consumer,
    FatalTransactionError,
    IllegalStateError,
    KafkaTimeoutError,
    NewTopic,
    Producer,
    TopicPartition,
    TransactionAbortedError,
    aio,
)
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

BROKER = {
    "num.partitions": "2",
    "auto.create.topics.enable": "true",
}


class Target:
    def __init__(self, mode: str, settings: dict[str, Any]) -> None:
        self.mode = mode
        self.settings = settings

    def cfg(self, **extra: Any) -> dict[str, Any]:
        return {**self.settings, **extra}


@pytest.fixture(scope="module", params=["network", "embedded"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if request.param == "network":
        data = tmp_path_factory.mktemp("txn-network") / "data"
        data.mkdir()
        b = BrokerProcess(data, BROKER).start()
        yield Target("network", {"bootstrap.servers": b.bootstrap})
        rc = b.stop()
        assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"
        return
    data = tmp_path_factory.mktemp("txn-embedded") / "data"
    with Admin({"log.dir": str(data), "broker.config": BROKER}) as keep_open:
        yield Target("embedded", {"log.dir": str(data), "broker.config": BROKER})
        assert keep_open.list_topics() is not None


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(settings: dict[str, Any], topic: str, partitions: int = 2) -> None:
    with Admin(settings) as a:
        a.create_topics([NewTopic(topic, partitions, 1)])


def read(settings: dict[str, Any], topic: str, partitions: int, want: int,
         isolation: str = "read_committed", timeout: float = 20.0,
         settle: float = 0.0) -> list[bytes | None]:
    """Values read from the start of every partition: until ``want`` arrived (then
    ``settle`` seconds more, to catch extras) or ``timeout``."""
    out: list[Any] = []
    with Consumer({**settings, "isolation.level": isolation,
                   "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < want and time.monotonic() < deadline:
            out.extend(c.poll(0.5))
        end = time.monotonic() + settle
        while time.monotonic() < end:
            out.extend(c.poll(0.2))
    return sorted(r.value for r in out)


def read_confluent(bootstrap: str, topic: str, partitions: int, want: int,
                   timeout: float = 20.0, settle: float = 0.0) -> list[bytes]:
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("ck"),
                                  "isolation.level": "read_committed",
                                  "enable.auto.commit": False})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in range(partitions)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(out) < want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
        end = time.monotonic() + settle
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m.value())
        return sorted(out)
    finally:
        c.close()


def values(prefix: str, n: int) -> list[bytes]:
    return sorted(f"{prefix}-{i}".encode() for i in range(n))


# ---------------------------------------------------------------------- scenarios

def commit_is_visible(settings: dict[str, Any], bootstrap: str | None) -> None:
    topic = unique("txn-commit")
    create(settings, topic)
    with Producer({**settings, "transactional.id": unique("tx")}) as p:
        p.init_transactions(30)
        p.begin_transaction()
        futs = [p.send(topic, f"c-{i}".encode(), partition=i % 2) for i in range(20)]
        p.flush(30)
        assert all(f.result(1).offset >= 0 for f in futs)
        p.commit_transaction(30)
    assert read(settings, topic, 2, 20, settle=0.5) == values("c", 20)
    if bootstrap is not None:
        assert read_confluent(bootstrap, topic, 2, 20, settle=0.5) == values("c", 20)


def offsets_after_commit(settings: dict[str, Any], *, check_pending: bool = True) -> None:
    """Consume-transform-produce: the input offsets reach the group with the commit."""
    src, dst = unique("txn-in"), unique("txn-out")
    create(settings, src, 1)
    create(settings, dst, 1)
    with Producer(settings) as plain:
        for i in range(10):
            plain.send(src, f"in-{i}".encode())
    group = unique("txn-group")
    tp = TopicPartition(src, 0)
    with Consumer({**settings, "group.id": group, "enable.auto.commit": False,
                   "auto.offset.reset": "earliest",
                   "isolation.level": "read_committed"}) as c, \
            Producer({**settings, "transactional.id": unique("tx")}) as p:
        p.init_transactions(30)
        c.subscribe([src])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            got.extend(c.poll(0.5))
        assert len(got) == 10
        meta = c.consumer_group_metadata()
        assert meta.group_id == group and meta.generation_id >= 0 and meta.member_id
        p.begin_transaction()
        for r in got:
            p.send(dst, (r.value or b"").upper())
        p.send_offsets_to_transaction({tp: got[-1].offset + 1}, meta, 30)
        if check_pending:
            # Pending transactional offsets are not shown (OffsetFetch RequireStable).
            with pytest.raises(KafkaTimeoutError):
                c.committed([tp], timeout=2)
        p.commit_transaction(30)
        deadline = time.monotonic() + 20
        while True:
            try:
                committed = c.committed([tp], timeout=5)[tp]
                break
            except KafkaTimeoutError:
                assert time.monotonic() < deadline, "committed() still pending after commit"
        assert committed is not None and committed.offset == 10
    assert read(settings, dst, 1, 10) == sorted(f"IN-{i}".encode() for i in range(10))


async def asyncio_commit(settings: dict[str, Any]) -> None:
    topic = unique("txn-aio")
    create(settings, topic, 1)
    async with aio.Producer({**settings, "transactional.id": unique("tx")}) as p:
        await p.init_transactions(30)
        for round_ in range(3):
            p.begin_transaction()
            futs = [await p.send(topic, f"r{round_}-{i}".encode()) for i in range(5)]
            await p.commit_transaction(30)
            assert [f.result().offset >= 0 for f in futs] == [True] * 5
    want = sorted(f"r{r}-{i}".encode() for r in range(3) for i in range(5))
    assert read(settings, topic, 1, 15) == want


# ---------------------------------------------------------------------- pylog's broker

def test_commit_is_visible_to_read_committed_consumers(target: Target) -> None:
    commit_is_visible(target.settings, target.settings.get("bootstrap.servers"))


def test_open_transaction_is_hidden_until_commit(target: Target) -> None:
    topic = unique("txn-open")
    create(target.settings, topic, 1)
    tp = TopicPartition(topic, 0)
    with Producer(target.cfg(**{"transactional.id": unique("tx")})) as p:
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(5):
            p.send(topic, f"o-{i}".encode())
        p.flush(30)
        with Consumer(target.cfg(**{"isolation.level": "read_committed"})) as c:
            assert c.end_offsets([tp])[tp] == 0  # the last stable offset
        with Consumer(target.cfg(**{"isolation.level": "read_uncommitted"})) as c:
            assert c.end_offsets([tp])[tp] == 5  # the high watermark
        assert read(target.settings, topic, 1, 1, timeout=2) == []
        p.commit_transaction(30)
    assert read(target.settings, topic, 1, 5) == values("o", 5)


def test_abort_is_invisible_to_read_committed_consumers(target: Target) -> None:
    topic = unique("txn-abort")
    create(target.settings, topic)
    with Producer(target.cfg(**{"transactional.id": unique("tx")})) as p:
        p.init_transactions(30)
        p.begin_transaction()
        sent = [p.send(topic, f"a-{i}".encode(), partition=i % 2) for i in range(10)]
        p.flush(30)
        assert all(f.result(1).offset >= 0 for f in sent)
        p.abort_transaction(30)
        p.begin_transaction()
        for i in range(10):
            p.send(topic, f"c-{i}".encode(), partition=i % 2)
        p.commit_transaction(30)
        # Records still queued when the transaction is aborted are never sent.
        p.begin_transaction()
        queued = p.send(topic, b"never", partition=0)
        p.abort_transaction(30)
        with pytest.raises(TransactionAbortedError):
            queued.result(5)
    assert read(target.settings, topic, 2, 10, settle=1.0) == values("c", 10)
    uncommitted = read(target.settings, topic, 2, 20, isolation="read_uncommitted", settle=0.5)
    assert [v for v in uncommitted if v != b"never"] == sorted(values("a", 10) + values("c", 10))
    bootstrap = target.settings.get("bootstrap.servers")
    if bootstrap is not None:
        assert read_confluent(bootstrap, topic, 2, 10, settle=1.0) == values("c", 10)


def test_offsets_reach_the_group_only_with_the_commit(target: Target) -> None:
    offsets_after_commit(target.settings)


def test_aborted_offsets_never_reach_the_group(target: Target) -> None:
    src = unique("txn-in")
    create(target.settings, src, 1)
    group = unique("txn-group")
    tp = TopicPartition(src, 0)
    with Producer(target.cfg(**{"transactional.id": unique("tx")})) as p, \
            Consumer(target.cfg(**{"group.id": group})) as c:
        p.init_transactions(30)
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: 3}, c.consumer_group_metadata(), 30)
        p.abort_transaction(30)
        assert c.committed([tp], timeout=10)[tp] is None


def test_second_producer_with_the_same_id_fences_the_first(target: Target) -> None:
    topic = unique("txn-fence")
    create(target.settings, topic, 1)
    txn_id = unique("tx")
    with Producer(target.cfg(**{"transactional.id": txn_id})) as old:
        old.init_transactions(30)
        old.begin_transaction()
        old.send(topic, b"zombie")
        old.flush(30)
        with Producer(target.cfg(**{"transactional.id": txn_id})) as new:
            new.init_transactions(30)  # aborts the old producer's open transaction
            with pytest.raises(FatalTransactionError) as info:
                old.send(topic, b"zombie-2")
                old.commit_transaction(30)
            assert isinstance(info.value.error, (errors.ProducerFencedError,
                                                 errors.InvalidProducerEpochError))
            assert info.value.fatal and not info.value.txn_requires_abort()
            with pytest.raises(FatalTransactionError):
                old.begin_transaction()
            new.begin_transaction()
            new.send(topic, b"new")
            new.commit_transaction(30)
    assert read(target.settings, topic, 1, 1, settle=1.0) == [b"new"]


def test_calls_out_of_order_are_refused(target: Target) -> None:
    with Producer(target.cfg(**{"transactional.id": unique("tx")})) as p:
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.begin_transaction()
        p.init_transactions(30)
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send("anything", b"x", partition=0)
        with pytest.raises(IllegalStateError):
            p.commit_transaction(5)
    with Producer(target.cfg()) as plain, pytest.raises(IllegalStateError, match="transactional.id"):
        plain.init_transactions(5)


def test_offsets_of_a_member_not_in_the_group_make_the_transaction_abortable(
        target: Target) -> None:
    src = unique("txn-in")
    create(target.settings, src, 1)
    group = unique("txn-group")
    tp = TopicPartition(src, 0)
    with Consumer(target.cfg(**{"group.id": group})) as c, \
            Producer(target.cfg(**{"transactional.id": unique("tx")})) as p:
        c.subscribe([src])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        real = c.consumer_group_metadata()
        assert real.generation_id >= 0
        p.init_transactions(30)
        p.begin_transaction()
        p.send(src, b"x")
        zombie = real._replace(member_id="zombie-member")
        with pytest.raises(AbortableTransactionError) as info:
            p.send_offsets_to_transaction({tp: 1}, zombie, 30)
        assert isinstance(info.value.error, CommitFailedError) and info.value.txn_requires_abort()
        with pytest.raises(AbortableTransactionError):
            p.commit_transaction(30)
        p.abort_transaction(30)
        # The producer goes on: the next transaction commits, with the real member.
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: 1}, real, 30)
        p.commit_transaction(30)
        deadline = time.monotonic() + 20
        while True:
            try:
                committed = c.committed([tp], timeout=5)[tp]
                break
            except KafkaTimeoutError:
                assert time.monotonic() < deadline
        assert committed is not None and committed.offset == 1
    assert read(target.settings, src, 1, 1, settle=0.5) == []


def test_asyncio_transactions(target: Target) -> None:
    asyncio.run(asyncio_commit(target.settings))


# ---------------------------------------------------------------------- exactly once

PROCESSOR = """
import sys, time
from pylog.client import Consumer, Producer, TopicPartition
bootstrap, src, dst, group, txn_id = sys.argv[1:6]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
p.init_transactions(60)   # fences the killed predecessor and aborts what it left open
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
c.assign([TopicPartition(src, 0)])   # starts at the group's committed offset
idle = time.monotonic()
processed = 0
while time.monotonic() - idle < 3:
    records = c.poll(0.5, max_records=5)
    if not records:
        continue
    idle = time.monotonic()
    p.begin_transaction()
    for r in records:
        p.send(dst, r.value.upper(), partition=r.offset % 2)
    time.sleep(0.25)   # about 20 records a second: the kills land inside transactions
    p.send_offsets_to_transaction({TopicPartition(src, 0): records[-1].offset + 1},
                                  c.consumer_group_metadata(), 60)
    p.commit_transaction(60)
    processed += len(records)
    print("committed", processed, flush=True)
c.close()
p.close()
print("done", processed, flush=True)
"""


def test_consume_transform_produce_is_exactly_once_through_kill_9(
        broker: BrokerProcess, tmp_path: Any) -> None:
    """A processor killed with SIGKILL at random points and restarted: the output read
    with read_committed holds each input record exactly once."""
    import os
    import random
    import select
    import signal
    import subprocess
    import sys

    settings = {"bootstrap.servers": broker.bootstrap}
    src, dst, group, txn_id = unique("eos-in"), unique("eos-out"), unique("eos-g"), unique("eos")
    create(settings, src, 1)
    create(settings, dst, 2)
    n = 300
    with Producer(settings) as p:
        for i in range(n):
            p.send(src, b"rec-%04d" % i)
    script = tmp_path / "processor.py"
    script.write_text(PROCESSOR)
    cmd = [sys.executable, str(script), broker.bootstrap, src, dst, group, txn_id]
    env = dict(os.environ)
    rnd = random.Random(1234)
    for _ in range(8):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        # Kill it inside its work: after its first commit (however long the interpreter
        # start and init_transactions take on a loaded machine), at a random moment.
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 90)
        assert ready and proc.stdout.readline().startswith(b"committed"), \
            "the processor committed nothing in 90 s"
        time.sleep(rnd.uniform(0.0, 1.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
    final = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0 and "done" in final.stdout, final.stdout + final.stderr
    last = int(final.stdout.split()[-1])
    assert 0 < last < n, f"the kills should interrupt the work, the last run did {last}"
    got = read(settings, dst, 2, n, settle=1.0)
    assert got == sorted(b"REC-%04d" % i for i in range(n))  # none lost, none twice
    with Consumer({**settings, "group.id": group}) as c:
        assert c.committed([TopicPartition(src, 0)])[TopicPartition(src, 0)].offset == n
