"""The wire fuzzer's driver: mutants of real request frames against a real broker.

Each mutant goes on its own TCP connection, after a valid frame (ApiVersions v0 or
Metadata v1, alternately) whose response must arrive: so the mutant meets a connection
that has already served a request. Then the mutant is sent and the driver reads what comes
back. Outcomes (``Outcome.status``):

- ``answered``: a response frame arrived (an error code, usually); its correlation id
  must be the mutant's, else ``bad-answer`` (a failure);
- ``closed``: the broker closed the connection (broken framing, an unknown API key, a
  version outside the schema, as Kafka does);
- ``incomplete``: the mutant is not a complete frame (its size prefix announces more bytes
  than were sent) and the broker waited for the rest, as it must. A negative size or one
  over 100 MiB must be closed instead: silence there is ``hang``;
- ``waiting``: a complete frame the broker may rightly hold without answering: a Produce
  with acks=0 (never answered), a Fetch that long-polls longer than the hang bound, a
  JoinGroup or SyncGroup waiting for the group's other members, an admin request with a
  timeout_ms over the hang bound (creating thousands of partitions takes seconds);
- ``hang`` (a failure): a complete frame that is none of the above, and the broker
  neither answered nor closed within ``HANG_SECONDS``;
- ``prefix`` (a failure): the valid frame before the mutant got no answer: the broker
  is wedged or gone.

Around the mutants (``Broker health``): the broker process must stay alive, its peak RSS
(``VmHWM``) under ``RSS_BOUND``, its log free of Python tracebacks (``LOG_PATTERNS``), and
after the run a normal client (confluent-kafka) must still produce and consume.

Every failing mutant is saved (``<out>/<seed>-<n>-<kind>-api<key>.bin``, the exact bytes
sent after the valid frame) for ``--replay``. ``python -m fuzz --help`` (``make fuzz``)
runs it standalone; ``tests/fuzz/test_wire_fuzz.py`` runs a short fixed-seed run in CI.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import pathlib
import random
import socket
import struct
import time
from typing import Any

from pylog.protocol.apis import api_name

from . import mutators

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
HANG_SECONDS = 5.0  # a complete frame must be answered or closed within this
INCOMPLETE_SECONDS = 0.3  # how long an incomplete frame is watched for a close
# Peak RSS bound of the broker process. One produce request may decompress one batch to
# logcore's 256 MiB bound before it is refused, and a few run at once (io threads).
RSS_BOUND = 1536 * 1024 * 1024
LOG_PATTERNS = (
    "Traceback",
    "Unhandled",
    "exception in callback",
    "Task exception was never retrieved",
)
MAX_FRAME = mutators.MAX_FRAME

_i32 = struct.Struct(">i")
PREFIX_FRAMES = (
    # ApiVersions v0 (empty body), Metadata v1 with an empty topic list.
    mutators.with_size(struct.pack(">hhih", 18, 0, 1, 4) + b"fuzz"),
    mutators.with_size(struct.pack(">hhih", 3, 1, 1, 4) + b"fuzz" + _i32.pack(0)),
)
FAILURES = ("hang", "prefix", "bad-answer", "connect")


def load_corpus() -> list[tuple[str, bytes]]:
    """Every recorded frame: (client, frame with its size prefix)."""
    out = []
    for path in sorted(CORPUS.glob("*.frames")):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            n = 4 + _i32.unpack_from(data, pos)[0]
            out.append((path.stem, data[pos : pos + n]))
            pos += n
    return out


@dataclasses.dataclass
class Outcome:
    status: str
    detail: str = ""
    seconds: float = 0.0


def may_wait(data: bytes) -> str | None:
    """Why the broker may rightly hold this complete frame without answering, or None."""
    from pylog.protocol.connection import Request, ServerConnection

    key = mutators.api_key(data)
    if key in (11, 14):
        return "a group join/sync waits for the other members"
    if key not in (0, 1) and key not in TIMED_ADMIN_APIS:
        return None
    conn = ServerConnection(serve_all=True)
    conn.receive_data(data)
    try:
        event = conn.next_event()
    except Exception:
        return None
    if type(event) is not Request:
        return None
    if key == 0 and getattr(event.body, "acks", 1) == 0:
        return "Produce with acks=0 is never answered"
    if key == 1 and getattr(event.body, "max_wait_ms", 0) > (HANG_SECONDS - 1) * 1000:
        return "a Fetch long poll"
    if key in TIMED_ADMIN_APIS and getattr(event.body, "timeout_ms", 0) > (HANG_SECONDS - 1) * 1000:
        # Creating a few thousand partitions (a flipped count) takes seconds of file work
        # on an I/O thread; the request may take up to its own timeout_ms, as in Kafka.
        return "an admin request may take up to its timeout_ms"
    return None


#: Admin requests that carry a timeout_ms the broker may use up: CreateTopics, DeleteTopics,
#: DeleteRecords, CreatePartitions, ElectLeaders, AlterPartitionReassignments.
TIMED_ADMIN_APIS = (19, 20, 21, 37, 43, 45)


def _read_frame(sock: socket.socket, deadline: float) -> bytes | None:
    """One response frame; None when the peer closed first. TimeoutError past deadline."""
    buf = b""
    need = 4
    while len(buf) < need:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        try:
            chunk = sock.recv(1 << 16)
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not chunk:
            return None
        buf += chunk
        if need == 4 and len(buf) >= 4:
            size = _i32.unpack_from(buf)[0]
            if not 4 <= size <= MAX_FRAME:
                raise ValueError(f"response size prefix {size}")
            need = 4 + size
    return buf


def send_one(address: tuple[str, int], data: bytes, prefix: bytes) -> Outcome:
    """Valid frame, its answer, then ``data``; classify what comes back."""
    t0 = time.monotonic()
    try:
        sock = socket.create_connection(address, timeout=HANG_SECONDS)
    except OSError as exc:
        return Outcome("connect", f"cannot connect: {exc}")
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.sendall(prefix)
            if _read_frame(sock, time.monotonic() + HANG_SECONDS) is None:
                return Outcome("prefix", "closed before answering the valid frame")
        except (TimeoutError, OSError, ValueError) as exc:
            return Outcome("prefix", f"valid frame not answered: {exc!r}")
        size = _i32.unpack_from(data)[0] if len(data) >= 4 else 0
        complete = len(data) >= 4 and 0 <= size <= MAX_FRAME and 4 + size <= len(data)
        bad_size = len(data) >= 4 and not 0 <= size <= MAX_FRAME
        try:
            sock.sendall(data)
        except OSError:
            return Outcome("closed", "closed while sending", time.monotonic() - t0)
        wait = HANG_SECONDS if complete or bad_size else INCOMPLETE_SECONDS
        try:
            answer = _read_frame(sock, time.monotonic() + wait)
        except TimeoutError:
            if not complete and not bad_size:
                return Outcome("incomplete", "", time.monotonic() - t0)
            why = may_wait(data) if complete else None
            if why:
                return Outcome("waiting", why, time.monotonic() - t0)
            what = f"size prefix {size}" if bad_size else "a complete frame"
            return Outcome(
                "hang",
                f"no answer and no close within {wait:g} s after {what}",
                time.monotonic() - t0,
            )
        except ValueError as exc:
            return Outcome("bad-answer", str(exc), time.monotonic() - t0)
        except OSError as exc:
            return Outcome("closed", repr(exc), time.monotonic() - t0)
        if answer is None:
            return Outcome("closed", "", time.monotonic() - t0)
        if len(data) >= 12 and size >= 8 and answer[4:8] != data[8:12]:
            return Outcome(
                "bad-answer",
                f"correlation id {answer[4:8].hex()} answers {data[8:12].hex()}",
                time.monotonic() - t0,
            )
        return Outcome("answered", "", time.monotonic() - t0)
    finally:
        sock.close()


class Health:
    """The broker process's health: alive, peak RSS, new traceback lines in its log."""

    def __init__(self, pid: int, log_path: pathlib.Path) -> None:
        self.pid = pid
        self.log_path = log_path
        self._log_pos = log_path.stat().st_size if log_path.exists() else 0

    def alive(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().split()[2] != "Z"
        except OSError:
            return False

    def rss(self) -> tuple[int, int]:
        """(current RSS, peak RSS) in bytes."""
        fields = {}
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    fields[name] = int(value.split()[0]) * 1024
        return fields["VmRSS"], fields["VmHWM"]

    def new_log_problems(self) -> list[str]:
        """Log lines written since the last call that match LOG_PATTERNS (with context)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_pos)
                text = f.read().decode(errors="replace")
        except OSError:
            return []
        cut = text.rfind("\n") + 1  # a half-written last line is read next time
        text = text[:cut]
        self._log_pos += len(text.encode(errors="replace"))
        lines = text.splitlines()
        return [
            "\n".join(lines[max(0, i - 2) : i + 12])
            for i, line in enumerate(lines)
            if any(p in line for p in LOG_PATTERNS)
        ]

    def problems(self) -> list[str]:
        if not self.alive():
            return ["broker process died"]
        out = [f"broker log: {p}" for p in self.new_log_problems()]
        rss, peak = self.rss()
        if peak > RSS_BOUND:
            out.append(f"broker peak RSS {peak >> 20} MiB over the bound of {RSS_BOUND >> 20} MiB")
        return out


@dataclasses.dataclass
class Report:
    seed: int
    total: int = 0
    by_kind: collections.Counter[tuple[str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )
    by_api: collections.Counter[tuple[str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )
    failures: list[tuple[int, str, int, Outcome, str]] = dataclasses.field(default_factory=list)
    broker_problems: list[str] = dataclasses.field(default_factory=list)
    saved: list[pathlib.Path] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    peak_rss: int = 0

    def add(self, index: int, kind: str, data: bytes, outcome: Outcome) -> None:
        self.total += 1
        self.by_kind[kind, outcome.status] += 1
        key = mutators.api_key(data)
        name = f"{key:>5} {api_name(key)}" if key in mutators.API_KEYS else "other"
        self.by_api[name, outcome.status] += 1
        if outcome.status in FAILURES:
            self.failures.append((index, kind, mutators.api_key(data), outcome, ""))

    @property
    def ok(self) -> bool:
        return not self.failures and not self.broker_problems

    def summary(self) -> str:
        statuses = sorted({s for _, s in self.by_kind})
        lines = [
            f"seed {self.seed}: {self.total} mutants in {self.seconds:.1f} s, "
            f"broker peak RSS {self.peak_rss >> 20} MiB, {len(self.failures)} failing mutants, "
            f"{len(self.broker_problems)} broker problems",
            f"{'by kind:':<30}" + "  ".join(f"{s:>10}" for s in statuses),
        ]
        for kind in sorted({k for k, _ in self.by_kind}):
            lines.append(
                f"  {kind:<28}" + "  ".join(f"{self.by_kind[kind, s]:>10}" for s in statuses)
            )
        lines.append(f"{'by API key:':<30}" + "  ".join(f"{s:>10}" for s in statuses))
        for key in sorted({k for k, _ in self.by_api}):
            lines.append(f"  {key:<28}" + "  ".join(f"{self.by_api[key, s]:>10}" for s in statuses))
        for index, kind, key, outcome, _ in self.failures[:50]:
            lines.append(f"FAIL #{index} {kind} api {key}: {outcome.status}: {outcome.detail}")
        for problem in self.broker_problems[:20]:
            lines.append(f"BROKER: {problem}")
        for path in self.saved[:50]:
            lines.append(f"saved {path}")
        return "\n".join(lines)


def mutants(seed: int, count: int, kinds: list[str] | None = None) -> Any:
    """(index, kind, bytes) for ``count`` mutants of the corpus, from ``seed``."""
    corpus = [frame for _, frame in load_corpus()]
    rng = random.Random(seed)
    for index in range(count):
        kind, data = mutators.mutate(rng, corpus, kinds)
        yield index, kind, data


def run(
    address: tuple[str, int],
    health: Health,
    seed: int,
    count: int,
    *,
    parallel: int = 1,
    kinds: list[str] | None = None,
    out_dir: pathlib.Path | None = None,
    progress: float = 0.0,
    report: Report | None = None,
) -> Report:
    """Send ``count`` mutants (``parallel`` connections at once); check health as it goes."""
    report = report or Report(seed)
    t0 = last = time.monotonic()
    recent: collections.deque[tuple[int, str, bytes]] = collections.deque(maxlen=parallel * 2)

    def record(index: int, kind: str, data: bytes, outcome: Outcome) -> None:
        report.add(index, kind, data, outcome)
        if outcome.status in FAILURES and out_dir is not None:
            report.saved.append(save(out_dir, seed, index, kind, data))

    def check(upto: int) -> bool:
        problems = health.problems()
        if problems and out_dir is not None:  # the last mutants sent are the suspects
            report.saved += [save(out_dir, seed, i, k, d, "suspect") for i, k, d in recent]
        report.broker_problems += [f"after mutant #{upto}: {p}" for p in problems]
        return health.alive()

    gen = mutants(seed, count, kinds)
    with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
        while True:
            batch = [m for _, m in zip(range(parallel), gen, strict=False)]
            if not batch:
                break
            prefix = PREFIX_FRAMES
            futures = [
                pool.submit(send_one, address, data, prefix[index % 2]) for index, _, data in batch
            ]
            for (index, kind, data), fut in zip(batch, futures, strict=True):
                record(index, kind, data, fut.result())
                recent.append((index, kind, data))
            if not check(batch[-1][0]):
                break
            now = time.monotonic()
            if progress and now - last >= progress:
                last = now
                print(
                    f"  {report.total} mutants, {len(report.failures)} failing, "
                    f"{report.total / (now - t0):.0f}/s",
                    flush=True,
                )
    report.seconds += time.monotonic() - t0
    report.peak_rss = health.rss()[1] if health.alive() else report.peak_rss
    return report


def save(
    out_dir: pathlib.Path, seed: int, index: int, kind: str, data: bytes, tag: str = ""
) -> pathlib.Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = (
        out_dir / f"{seed}-{index}-{kind}-api{mutators.api_key(data)}{'-' + tag if tag else ''}.bin"
    )
    path.write_bytes(data)
    return path


def corpus_topics() -> list[str]:
    """The topics the corpus's Produce requests write to."""
    names = set()
    for _, frame in load_corpus():
        parts = mutators._produce_parts(frame)
        if parts is not None:
            names.update(t.name for t in parts[0].topic_data)
    return sorted(names)


def prepare(bootstrap: str) -> None:
    """Create the corpus's topics (2 partitions, as recorded) so that mutated Produce
    requests reach the batch validation and the decompressors, not UNKNOWN_TOPIC."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    for fut in admin.create_topics([NewTopic(t, 2, 1) for t in corpus_topics()]).values():
        fut.result(30)


def client_check(bootstrap: str, topic: str) -> None:
    """A normal client still produces and consumes (confluent-kafka)."""
    from confluent_kafka import Consumer, Producer

    conf = {"bootstrap.servers": bootstrap, "broker.address.family": "v4"}
    p = Producer(conf)
    for i in range(10):
        p.produce(topic, b"after the fuzz %d" % i)
    if p.flush(20) != 0:
        raise AssertionError("produce after the fuzz did not complete")
    c = Consumer({**conf, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    if sorted(got) != sorted(b"after the fuzz %d" % i for i in range(10)):
        raise AssertionError(f"consumed {len(got)} of 10 records after the fuzz")
