"""Transactional producers for the fault harness, and the check of what a read_committed
reader sees.

Each producer has its own ``transactional.id`` and runs transactions one after another:
begin, 2-6 records to partitions drawn by a generator seeded with (seed, name), then commit
or (one time in five, drawn too) abort. A record's value is
``<producer>:<txn>:<index>:<payload>``, so the verifier knows each record's transaction.
The ledger records each transaction's outcome as the client reported it:

- ``committed``: ``commit_transaction`` returned; every record must be visible exactly once;
- ``aborted``: ``abort_transaction`` returned (asked for, or after a failed commit); no record
  may be visible;
- ``in-doubt``: neither call could finish (the client failed fatally, or the abort after a
  failed commit was refused because the commit was already under way); the producer is made
  again, whose ``init_transactions`` completes or aborts it at the coordinator. Either all of
  its records are visible or none. Also in doubt: a kafka-python ``commit_transaction`` that
  returned although a send of the transaction failed (kafka-python 3.0 does that when its
  sends fail before the partitions were added: it then commits an empty transaction
  without asking the coordinator); the producer is made again and the count printed.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

import confluent_kafka
from _harness.kafka_python import close_producer

from .workload import Record, Seen, _Worker

if TYPE_CHECKING:
    from .faults import Figures

with warnings.catch_warnings():  # kafka-python warns at import time; warnings are errors
    warnings.simplefilter("ignore")
    import kafka
    import kafka.errors

ABORT_RATIO = 0.2
TXN_TIMEOUT_MS = 60_000


def txn_value(producer: str, txn: int, index: int, rng: random.Random) -> bytes:
    return f"{producer}:{txn:07d}:{index}:".encode() + rng.randbytes(rng.randrange(8, 120))


def parse_txn_value(value: bytes) -> tuple[str, int, int]:
    producer, txn, index, _ = value.split(b":", 3)
    return producer.decode(), int(txn), int(index)


@dataclasses.dataclass
class Txn:
    producer: str
    txn: int
    records: list[tuple[int, bytes]]          # (partition, value)
    outcome: str = "open"                     # committed, aborted, in-doubt, open
    offsets: dict[bytes, int] = dataclasses.field(default_factory=dict)  # from delivery
    futures: list[Any] = dataclasses.field(default_factory=list)  # kafka-python's sends


class Ledger:
    """Every transaction the producers began, by (producer, txn)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.txns: dict[tuple[str, int], Txn] = {}
        self.errors: list[str] = []       # client errors met (worked through, reported)
        self.restarts = 0                 # producers made again after a fatal error
        self.init_failures = 0            # init_transactions calls that failed
        self.committed_with_failed_sends = 0  # kafka-python commits that were not

    def begin(self, txn: Txn) -> None:
        with self.lock:
            self.txns[(txn.producer, txn.txn)] = txn

    def count(self, outcome: str) -> int:
        with self.lock:
            return sum(1 for t in self.txns.values() if t.outcome == outcome)

    def note(self, error: str) -> None:
        with self.lock:
            self.errors.append(error)


class _TxnProducer(_Worker):
    """``rate`` transactions/s at most, one at a time, by ``transactional_id``."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, seed: int,
                 rate: float, ledger: Ledger) -> None:
        super().__init__(name)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.rng = random.Random(f"{seed}/{name}")
        self.rate, self.ledger = rate, ledger
        self.transactional_id = f"harness-{name}"

    def next_txn(self, n: int) -> tuple[Txn, bool]:
        count = self.rng.randrange(2, 7)
        records = [(self.rng.randrange(self.partitions), txn_value(self.name, n, i, self.rng))
                   for i in range(count)]
        return Txn(self.name, n, records), self.rng.random() < ABORT_RATIO

    def work(self) -> None:
        client = self.make()
        n = 0
        start = time.monotonic()
        try:
            while client is not None and not self.stopping.is_set():
                if n >= (time.monotonic() - start) * self.rate:
                    time.sleep(0.02)
                    continue
                txn, abort = self.next_txn(n)
                n += 1
                self.ledger.begin(txn)
                try:
                    txn.outcome = self.run_txn(client, txn, abort)
                except Exception as e:  # the client cannot go on: in doubt, a new client
                    self.ledger.note(f"{self.name}: {e!r}")
                    txn.outcome = "in-doubt"
                    self.close_quietly(client)
                    self.ledger.restarts += 1
                    client = self.make()
        finally:
            if client is not None:
                self.close_quietly(client)

    def close_quietly(self, client: Any) -> None:
        """Close a client that failed (its close may fail too: noted)."""
        try:
            self.close(client)
        except Exception as e:
            self.ledger.note(f"{self.name} close: {e!r}")

    def run_txn(self, client: Any, txn: Txn, abort: bool) -> str:
        """Runs one transaction; returns its outcome, or raises when the client must be made
        again (the outcome is then in doubt)."""
        self.begin(client)
        try:
            for partition, value in txn.records:
                self.send(client, txn, partition, value)
            if abort:
                self.retrying(lambda: self.abort(client))
                return "aborted"
            self.retrying(lambda: self.commit(client))
            return "committed"
        except _MustAbort as e:
            self.ledger.note(f"{self.name}: {e.args[0]}")
            self.retrying(lambda: self.abort(client))
            return "aborted"

    def retrying(self, call: Any) -> None:
        """A commit or abort: retriable errors are retried (a minute at most)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                call()
                return
            except _Retriable as e:
                self.ledger.note(f"{self.name}: {e.args[0]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"still retriable after a minute: {e.args[0]}") from None
                time.sleep(0.2)

    def make(self) -> Any:
        """A producer whose ``init_transactions`` returned, tried until the worker stops
        (then None).
        kafka-python 3.0's sometimes hangs when its coordinator is killed during the call
        (the broker answered FindCoordinator; the client sends nothing more until its
        ``max_block_ms``): the failure is noted (printed as a client error) and a new
        producer tried."""
        while True:
            try:
                return self._make()
            except Exception as e:
                self.ledger.note(f"{self.name} init: {e!r}")
                self.ledger.init_failures += 1
                if self.stopping.is_set():
                    return None
                time.sleep(0.5)

    def _make(self) -> Any:
        raise NotImplementedError

    def begin(self, client: Any) -> None:
        raise NotImplementedError

    def send(self, client: Any, txn: Txn, partition: int, value: bytes) -> None:
        raise NotImplementedError

    def commit(self, client: Any) -> None:
        raise NotImplementedError

    def abort(self, client: Any) -> None:
        raise NotImplementedError

    def close(self, client: Any) -> None:
        raise NotImplementedError


class _Retriable(Exception):
    """The same call may be made again."""


class _MustAbort(Exception):
    """The transaction cannot commit; an abort may still end it."""


class ConfluentTxnProducer(_TxnProducer):
    """confluent-kafka (librdkafka): its errors say retriable / txn_requires_abort / fatal."""

    def _make(self) -> Any:
        p = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
            "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 5,
            "message.timeout.ms": TXN_TIMEOUT_MS - 5000, "request.timeout.ms": 20_000,
            "log_level": 0})
        p.init_transactions(60)
        return p

    def _call(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except confluent_kafka.KafkaException as e:
            err = e.args[0]
            if err.fatal():
                raise
            if err.txn_requires_abort():
                raise _MustAbort(str(err)) from None
            if err.retriable():
                raise _Retriable(str(err)) from None
            raise

    def begin(self, client: Any) -> None:
        client.begin_transaction()

    def send(self, client: Any, txn: Txn, partition: int, value: bytes) -> None:
        def report(err: Any, msg: Any) -> None:
            if err is None:
                txn.offsets[msg.value()] = msg.offset()

        while True:
            try:
                client.produce(self.topic, value, partition=partition, on_delivery=report)
                break
            except BufferError:
                client.poll(0.1)
        client.poll(0)

    def commit(self, client: Any) -> None:
        self._call(client.commit_transaction, 60)

    def abort(self, client: Any) -> None:
        self._call(client.abort_transaction, 60)

    def close(self, client: Any) -> None:
        client.flush(5)


def _bounded(call: Any, what: str, seconds: float = 90.0) -> None:
    """kafka-python 3.0's ``commit_transaction`` / ``abort_transaction`` wait without a
    timeout, and one waited for ever once its coordinator had aborted the transaction
    (``transaction.timeout.ms``): the call runs on a thread and, past ``seconds``, the
    transaction is in doubt (a ``RuntimeError``; the producer is made again, fencing this
    one, whose thread is left blocked)."""
    outcome: list[BaseException | None] = []
    t = threading.Thread(target=lambda: outcome.append(_catch(call)), daemon=True,
                         name=f"kafka-python {what}")
    t.start()
    t.join(seconds)
    if not outcome:
        raise RuntimeError(f"kafka-python {what} still blocked after {seconds:.0f} s")
    if outcome[0] is not None:
        raise outcome[0]


def _catch(call: Any) -> BaseException | None:
    try:
        call()
    except BaseException as e:  # re-raised on the caller's thread
        return e
    return None


class KafkaPythonTxnProducer(_TxnProducer):
    """kafka-python's transactional producer: a failed commit is followed by an abort; an
    abort that fails too leaves the transaction in doubt (a new producer)."""

    def _make(self) -> Any:
        p = kafka.KafkaProducer(bootstrap_servers=self.bootstrap.split(","),
                                transactional_id=self.transactional_id,
                                transaction_timeout_ms=TXN_TIMEOUT_MS, linger_ms=5,
                                request_timeout_ms=20_000, max_block_ms=30_000)
        try:
            p.init_transactions()
        except BaseException:
            close_producer(p, 5)
            raise
        return p

    def begin(self, client: Any) -> None:
        client.begin_transaction()

    def send(self, client: Any, txn: Txn, partition: int, value: bytes) -> None:
        fut = client.send(self.topic, value, partition=partition)
        fut.add_callback(lambda md, v=value: txn.offsets.__setitem__(v, md.offset))
        txn.futures.append(fut)

    def run_txn(self, client: Any, txn: Txn, abort: bool) -> str:
        outcome = super().run_txn(client, txn, abort)
        failed = [f for f in txn.futures if not f.is_done or f.failed()]
        if outcome == "committed" and failed:
            self.ledger.committed_with_failed_sends += 1
            raise RuntimeError(
                f"commit_transaction returned, but {len(failed)} of the {len(txn.futures)} "
                f"sends of transaction {txn.txn} did not succeed "
                f"({failed[0].exception if failed[0].is_done else 'not done'!r})")
        return outcome

    def commit(self, client: Any) -> None:
        try:
            _bounded(client.commit_transaction, "commit_transaction")
        except kafka.errors.KafkaError as e:
            if getattr(e, "retriable", False):
                raise _Retriable(repr(e)) from None
            raise _MustAbort(repr(e)) from None

    def abort(self, client: Any) -> None:
        try:
            _bounded(client.abort_transaction, "abort_transaction")
        except kafka.errors.KafkaError as e:
            if getattr(e, "retriable", False):
                raise _Retriable(repr(e)) from None
            raise

    def close(self, client: Any) -> None:
        close_producer(client, 10)


# -- verification ---------------------------------------------------------------------------

def check_transactions(figures: Figures, ledger: Ledger,
                       final: dict[int, list[Record]]) -> None:
    """What a read_committed reader of the whole topic (``final``) must see: every committed
    transaction's records once each, at the offsets their delivery reports gave; no record
    of an aborted transaction; all or none of an in-doubt one; nothing else."""
    where: dict[bytes, list[tuple[int, int]]] = collections.defaultdict(list)
    for p, recs in final.items():
        for o, _k, v in recs:
            where[v or b""].append((p, o))
    figures.duplicates += sum(len(at) - 1 for at in where.values() if len(at) > 1)
    for v, at in [(v, at) for v, at in where.items() if len(at) > 1][:3]:
        figures.problems.append(f"{v[:28]!r} visible {len(at)} times, at {at}")
    known: set[bytes] = set()
    for txn in ledger.txns.values():
        values = [v for _p, v in txn.records]
        known.update(values)
        visible = [v for v in values if v in where]
        if txn.outcome == "committed":
            missing = len(values) - len(visible)
            figures.lost += missing
            if missing and figures.lost <= 5 * len(values):
                figures.problems.append(
                    f"committed transaction {txn.producer}:{txn.txn}: {missing} of its "
                    f"{len(values)} records not visible to read_committed")
            for (p, v) in txn.records:
                o = txn.offsets.get(v)
                if v in where and o is not None and where[v][0] != (p, o):
                    figures.lost += 1
                    figures.problems.append(f"{v[:28]!r} acknowledged at partition {p} offset "
                                            f"{o}, visible at {where[v]}")
        elif txn.outcome in ("aborted", "open"):
            figures.aborted_visible += len(visible)
            if visible:
                figures.problems.append(
                    f"{txn.outcome} transaction {txn.producer}:{txn.txn}: {len(visible)} of "
                    f"its {len(values)} records visible to read_committed")
        elif visible and len(visible) != len(values):
            figures.partial_transactions += 1
            figures.problems.append(
                f"in-doubt transaction {txn.producer}:{txn.txn}: {len(visible)} of its "
                f"{len(values)} records visible (all or none)")
    unknown = [v for v in where if v not in known]
    if unknown:
        figures.problems.append(f"{len(unknown)} visible records of no transaction begun, e.g. "
                                f"{unknown[0][:28]!r}")


def check_txn_consumers(figures: Figures, ledger: Ledger, seen: dict[str, Seen],
                        final: dict[int, list[Record]]) -> None:
    """A live read_committed consumer saw nothing that is not in the final read (at the same
    offset), in particular no aborted record, and it reached the end."""
    outcome = {v: t.outcome for t in ledger.txns.values() for _p, v in t.records}
    for name, s in seen.items():
        total = 0
        for p, recs in s.records.items():
            by_offset = {o: v for o, _k, v in final[p]}
            for o, _k, v in recs:
                if by_offset.get(o) != v:
                    figures.consumer_mismatches += 1
                    if figures.consumer_mismatches <= 5:
                        figures.problems.append(
                            f"{name} read {(v or b'')[:28]!r} ({outcome.get(v or b'', 'unknown')} "
                            f"transaction) at partition {p} offset {o}; the final read differs")
            total += len(recs)
        for p, recs in final.items():
            end = recs[-1][0] + 1 if recs else 0
            if s.position(p) < end:
                figures.problems.append(f"{name} stopped at offset {s.position(p)} of partition "
                                        f"{p}, the last committed record is at {end - 1}")
        figures.consumed[name] = total
        figures.problems += [f"{name}: {e}" for e in s.errors]
        figures.client_errors += [f"{name}: {e}" for e in s.client_errors]
