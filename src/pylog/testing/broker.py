"""``KafkaBroker``: pylog's real broker inside the test process.

The broker is ``pylog.broker.server.Broker``, the code ``pylog broker`` runs, listening on
127.0.0.1 with a port the OS picks and a data directory of its own (a temporary one unless
``data_dir`` is given). It runs on a daemon thread with its own event loop (uvloop when
installed, as ``pylog broker``), so that blocking and asyncio test code can both talk to it
over TCP with any Kafka client while the test's thread or loop stays free.

On top of the broker: topics created directly in the log manager (``create_topic``), the
log read back without a consumer (``records``, ``wait_for``), fault injection at the
request dispatcher (``fail_next``, ``delay``, ``pause``; ``pylog.testing.faults``) and at
the sockets (``drop_connections``, ``refuse_connections``), and the virtual clock
(``clock="virtual"``, ``advance``; ``pylog.testing.clock``).

Thread-safety: every public method may be called from any thread except the broker's own
(a call from inside the broker's loop would wait for itself and is refused). Calls from an
asyncio test block its loop for their duration (milliseconds for all but ``wait_for``,
``stop`` and ``restart``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Coroutine, Mapping
from typing import Any, NamedTuple, TypeVar

from pylog._clock import SYSTEM_CLOCK, Clock
from pylog.broker.server import Broker, event_loop_factory
from pylog.config import BROKER_CONFIG_DEFS, BrokerConfig, ConfigError
from pylog.testing.clock import VirtualClock, settle_loop
from pylog.testing.faults import Faults, resolve_api, resolve_error
from pylog.testing.tls import CertificateAuthority, ClientCertificate

__all__ = ["KafkaBroker", "Record", "BrokerNotRunningError"]

T = TypeVar("T")

log = logging.getLogger("pylog.testing")

#: Settings a test broker starts with unless given (Kafka's own config/server.properties
#: sets group.initial.rebalance.delay.ms=0 "for development and testing"): one partition
#: for the internal topics (their 50 directories would dominate the start-up time), few
#: threads, and a 4 MiB cleaner offset map instead of 128 MiB (allocating it took 15 to
#: 180 ms of each start; 4 MiB still dedupes about 150,000 keys per cleaning pass).
#: ``listeners`` and ``log.dirs`` are the broker's own and cannot be given.
TEST_DEFAULTS: dict[str, Any] = {
    "log.cleaner.dedupe.buffer.size": 4 * 1024 * 1024,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "num.io.threads": 2,
    "background.threads": 2,
}
_OWN_SETTINGS = ("listeners", "advertised.listeners", "log.dirs", "log.dir",
                 "listener.security.protocol.map")
#: ``security_protocol`` values a test broker serves.
_TEST_PROTOCOLS = ("PLAINTEXT", "SSL")
_CLIENT_AUTH = ("none", "requested", "required")

_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class BrokerNotRunningError(RuntimeError):
    """A ``KafkaBroker`` used while it is not running (never started, or stopped)."""


class Record(NamedTuple):
    """A record as stored in the log (``KafkaBroker.records``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    #: Written by a transactional producer (its transaction may have been aborted).
    transactional: bool


def broker_settings(config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka's names from a mapping (``"auto.create.topics.enable"``) and keyword arguments
    (``auto_create_topics_enable``: underscores stand for dots), checked against the broker's
    table so that a typo fails here, naming the setting."""
    out: dict[str, Any] = {}
    for key, value in [*(config or {}).items(), *kwargs.items()]:
        name = key if key in BROKER_CONFIG_DEFS else key.replace("_", ".")
        if name in _OWN_SETTINGS:
            raise ConfigError(name, "is chosen by KafkaBroker (127.0.0.1, an OS-picked port, "
                              "its own data directory); give port= or data_dir= instead")
        if name in out and out[name] != value:
            raise ConfigError(name, f"given twice, as {out[name]!r} and {value!r}")
        out[name] = value
    return out


# pylog's logger level while test brokers run: set (when the application left it unset)
# by the first broker to start, restored by the last to stop. Guarded by _LEVEL_LOCK.
_LEVEL_LOCK = threading.Lock()
_LEVEL_USERS = 0
_LEVEL_SAVED: int | None = None


def _raise_log_level(level: str | int) -> None:
    global _LEVEL_USERS, _LEVEL_SAVED
    with _LEVEL_LOCK:
        logger = logging.getLogger("pylog")
        if _LEVEL_USERS == 0:
            _LEVEL_SAVED = logger.level
            if logger.level == logging.NOTSET:
                logger.setLevel(level)
        _LEVEL_USERS += 1


def _restore_log_level() -> None:
    global _LEVEL_USERS
    with _LEVEL_LOCK:
        _LEVEL_USERS -= 1
        if _LEVEL_USERS == 0 and _LEVEL_SAVED is not None:
            logging.getLogger("pylog").setLevel(_LEVEL_SAVED)


class _LogCapture(logging.Handler):
    """The broker's log lines: records of pylog's loggers emitted on the broker's threads."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter(_LOG_FORMAT))
        self.lines: list[str] = []
        #: Lines that report a bug: an exception escaping a request handler (the
        #: dispatcher's "bug:" line) or an error asyncio logged for the broker's loop.
        self.bugs: list[str] = []
        self.thread_ids: set[int] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread in self.thread_ids or (record.threadName or "").startswith(
                ("pylog-io", "pylog-background", "kafka-log-cleaner")):
            line = self.format(record)
            self.lines.append(line)
            if record.levelno >= logging.ERROR and (
                    record.name == "asyncio" or str(record.msg).startswith("bug:")):
                self.bugs.append(line)


class KafkaBroker:
    """A real pylog broker in this process (see the module docstring).

    Args:
        config: broker settings with Kafka's dotted names (``server.properties``).
        clock: ``"system"`` (real time), ``"virtual"`` (moves on ``advance``) or a
            ``pylog._clock.Clock``.
        data_dir: the log directory to use (kept by ``stop``); default: a new temporary
            directory that ``stop`` removes unless ``keep_data``.
        keep_data: keep the temporary directory after ``stop`` (its path is ``data_dir``).
        port: the port to listen on; 0 (default) lets the OS pick one.
        security_protocol: the listener's protocol: ``"PLAINTEXT"`` (default) or ``"SSL"``.
            With SSL the broker makes a throwaway CA (``ca``) and a certificate for
            127.0.0.1 and localhost signed by it; ``client_config()`` gives clients what
            they need to trust it, ``client_certificate(name)`` a certificate for mTLS.
        ssl_client_auth: Kafka's ``ssl.client.auth`` for the SSL listener: ``"none"``
            (default), ``"requested"`` or ``"required"`` (clients must present a
            certificate signed by ``ca``; their principal is ``User:CN=<name>,O=pylog-test``).
        log_level: the level of pylog's loggers while test brokers run, when the
            application has not set one (its log is kept in ``log_text()``; the level is
            restored when the last broker stops).
        **settings: more broker settings, as keyword arguments with underscores for dots
            (``num_partitions=3``). Both spellings may be mixed; an unknown name raises
            ``pylog.config.ConfigError`` with the closest valid one.

    Raises:
        pylog.config.ConfigError: an unknown setting or a bad value.
        ValueError: an unknown clock.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *, clock: str | Clock = "system",
                 data_dir: str | os.PathLike[str] | None = None, keep_data: bool = False,
                 port: int = 0, log_level: str | int = "INFO",
                 security_protocol: str = "PLAINTEXT", ssl_client_auth: str = "none",
                 **settings: Any) -> None:
        self.security_protocol = security_protocol.upper()
        if self.security_protocol not in _TEST_PROTOCOLS:
            raise ValueError(f"security_protocol={security_protocol!r}: a KafkaBroker serves "
                             f"{' or '.join(_TEST_PROTOCOLS)}")
        if ssl_client_auth not in _CLIENT_AUTH:
            raise ValueError(f"ssl_client_auth={ssl_client_auth!r}: give one of "
                             f"{', '.join(_CLIENT_AUTH)}")
        self.settings = {**TEST_DEFAULTS, **broker_settings(config, settings)}
        #: The throwaway certificate authority of an SSL broker (None for PLAINTEXT).
        self.ca: CertificateAuthority | None = None
        if self.security_protocol == "SSL":
            self.ca = self._make_ca()
            self.settings = {"ssl.keystore.type": "PEM",
                             "ssl.keystore.location": self.ca.server_certificate(),
                             "ssl.truststore.type": "PEM",
                             "ssl.truststore.location": self.ca.ca_location,
                             "ssl.client.auth": ssl_client_auth, **self.settings}
        BrokerConfig({**self.settings, "log.dirs": "/nonexistent"})  # fail here on a bad value
        if clock == "system":
            self.clock: Clock = SYSTEM_CLOCK
        elif clock == "virtual":
            self.clock = VirtualClock()
        elif isinstance(clock, Clock):
            self.clock = clock
        else:
            raise ValueError(f"clock={clock!r}: give 'system', 'virtual' or a pylog._clock.Clock")
        self._given_dir = os.fspath(data_dir) if data_dir is not None else None
        self.keep_data = keep_data
        self.data_dir: str | None = self._given_dir
        self.port = port
        self.log_level = log_level
        self.broker: Broker | None = None
        self.faults: Faults | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._capture = _LogCapture()
        self._refused: list[tuple[str, int]] = []

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.broker is not None

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"``, for the clients' ``bootstrap.servers``."""
        self._require()
        return f"127.0.0.1:{self.port}"

    def client_config(self, certificate: ClientCertificate | None = None,
                      **extra: Any) -> dict[str, Any]:
        """Settings for a librdkafka client (confluent-kafka, kcat's ``-X``) or pylog.client
        to reach this broker: ``bootstrap.servers``, and for SSL ``security.protocol`` and
        ``ssl.ca.location`` (plus ``certificate``'s files for mTLS). ``extra`` settings are
        added with underscores for dots (``group_id="g"``)."""
        out: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.security_protocol != "PLAINTEXT":
            out["security.protocol"] = self.security_protocol
        if self.ca is not None:
            out["ssl.ca.location"] = self.ca.ca_location
        if certificate is not None:
            out["ssl.certificate.location"] = certificate.cert_location
            out["ssl.key.location"] = certificate.key_location
        out.update((k.replace("_", "."), v) for k, v in extra.items())
        return out

    def client_certificate(self, common_name: str) -> ClientCertificate:
        """A client certificate for ``common_name`` signed by this broker's CA (SSL only);
        the broker's principal for it is ``ClientCertificate.principal``."""
        if self.ca is None:
            raise RuntimeError("client certificates need KafkaBroker(security_protocol='SSL')")
        return self.ca.client_certificate(common_name)

    def _make_ca(self) -> CertificateAuthority:
        directory = tempfile.mkdtemp(prefix="pylog-test-tls-")
        # The certificates outlive restarts (clients keep trusting the broker) and go with
        # this object.
        weakref.finalize(self, shutil.rmtree, directory, True)
        return CertificateAuthority(directory)

    @property
    def name(self) -> str:
        return f"broker {self.port}" if self.port else "broker"

    def start(self) -> KafkaBroker:
        """Start the broker and return once it serves. Starting a running broker is an error."""
        if self.broker is not None:
            raise RuntimeError(f"{self.name} is already running at {self.bootstrap_servers}")
        if self.data_dir is None:
            self.data_dir = tempfile.mkdtemp(prefix="pylog-test-")
        inter = {} if "inter.broker.listener.name" in self.settings else \
            {"security.inter.broker.protocol": self.security_protocol}
        config = BrokerConfig({**inter, **self.settings, "log.dirs": self.data_dir,
                               "listeners": f"{self.security_protocol}://127.0.0.1:{self.port}"})
        self._start_loop()
        _raise_log_level(self.log_level)
        logging.getLogger("pylog").addHandler(self._capture)
        logging.getLogger("asyncio").addHandler(self._capture)
        faults = Faults("pylog.testing")
        try:
            self.broker = self._call(self._start_broker(config, faults), timeout=60)
        except BaseException:
            self._stop_loop()
            self._remove_capture()
            raise
        self.faults = faults
        self.port = self.broker.bound[0][1]
        faults.broker_name = self.name
        return self

    async def _start_broker(self, config: BrokerConfig, faults: Faults) -> Broker:
        broker = Broker(config, clock=self.clock, allow_pure_python=True)
        broker.interceptor = faults
        return await broker.start_or_shut_down()

    def stop(self, keep_data: bool | None = None) -> None:
        """Shut the broker down cleanly and remove its temporary data directory (unless
        ``keep_data``, given here or to the constructor, or a ``data_dir`` was given).
        Stopping a stopped broker does nothing."""
        self._shutdown()
        keep = self.keep_data if keep_data is None else keep_data
        if self.data_dir is not None and self._given_dir is None and not keep:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def restart(self) -> KafkaBroker:
        """Stop cleanly and start again on the same port with the same data."""
        self._require()
        self._shutdown()
        return self.start()

    def _shutdown(self) -> None:
        broker = self.broker
        if broker is None:
            return
        if self.faults is not None:
            self._loop_call(self.faults.clear)
        self.broker = None
        self.faults = None
        try:
            self._call(broker.shutdown(), timeout=60)
        finally:
            self._stop_loop()
            self._remove_capture()
            if isinstance(self.clock, VirtualClock):
                # Timers of the stopped broker's loop; after a restart, virtual time goes
                # on from where it was.
                self.clock.drop_timers()

    def _remove_capture(self) -> None:
        logging.getLogger("pylog").removeHandler(self._capture)
        logging.getLogger("asyncio").removeHandler(self._capture)
        self._refused.clear()  # a restart listens afresh
        _restore_log_level()

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"at {self.bootstrap_servers}" if self.broker is not None else "stopped"
        return f"<KafkaBroker {state}, data {self.data_dir}>"

    # --- the loop thread ------------------------------------------------------------------

    def _start_loop(self) -> None:
        factory = event_loop_factory()
        loop = factory() if factory is not None else asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        thread = threading.Thread(target=main, name="pylog-testing-broker", daemon=True)
        thread.start()
        ready.wait()
        assert thread.ident is not None
        self._capture.thread_ids.add(thread.ident)
        self._loop, self._thread = loop, thread

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None

        async def cancel_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_rest(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if thread.ident is not None:
            self._capture.thread_ids.discard(thread.ident)

    def _require(self) -> Broker:
        if self.broker is None:
            raise BrokerNotRunningError(
                "this KafkaBroker is not running (never started, or stopped): call start() "
                "or use it as a context manager (`with KafkaBroker() as broker:`)")
        return self.broker

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = 30) -> T:
        """Run ``coro`` on the broker's loop and wait for its result."""
        loop = self._loop
        if loop is None:
            coro.close()
            self._require()
            raise BrokerNotRunningError("the broker's event loop is not running")
        if self._thread is threading.current_thread():
            coro.close()
            raise RuntimeError("a KafkaBroker method was called on the broker's own thread "
                               "(it would wait for itself): call it from the test")
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"{self.name}: not done within {timeout} s") from None

    def _loop_call(self, fn: Any, *args: Any) -> Any:
        async def run() -> Any:
            return fn(*args)
        return self._call(run())

    # --- topics and records ---------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, Any] | None = None) -> None:
        """Create a topic with ``partitions`` partitions and topic ``config`` overrides
        (Kafka's names: ``{"cleanup.policy": "compact"}``).

        Raises:
            pylog.errors.TopicAlreadyExistsError, pylog.errors.InvalidConfigurationError, ...:
                what CreateTopics would answer.
        """
        broker = self._require()
        if broker.cluster is not None:
            raise RuntimeError("this broker is one of a cluster: create topics with "
                               "KafkaCluster.create_topic (through the controller)")
        configs = {k: str(v).lower() if isinstance(v, bool) else str(v)
                   for k, v in (config or {}).items()}
        self._call(broker.log_manager.create_topic_async(broker.executor, name, partitions,
                                                         1, configs))

    def delete_topic(self, name: str) -> None:
        """Delete a topic (its directories are removed in the background, as Kafka does).

        Raises:
            pylog.errors.UnknownTopicOrPartitionError: no such topic.
        """
        broker = self._require()
        self._call(broker.log_manager.delete_topic_async(broker.executor, name))

    def topics(self) -> list[str]:
        """The names of the topics, internal ones included, sorted."""
        broker = self._require()
        return sorted(self._loop_call(lambda: list(broker.log_manager.topics)))

    def records(self, topic: str, partition: int | None = None) -> list[Record]:
        """Every data record in the log of ``topic`` (one partition, or all of them in
        partition then offset order), from the log start offset to the log end offset.
        Control records (transaction markers) are left out; records of aborted
        transactions are not (``Record.transactional`` tells them apart from others).

        Raises:
            KeyError: no such topic (the message lists the topics there are).
        """
        broker = self._require()
        return self._loop_call(self._read, broker, topic, partition)

    def _read(self, broker: Broker, topic: str, partition: int | None) -> list[Record]:
        from logcore import iter_batches

        t = broker.log_manager.topics.get(topic)
        if t is None:
            raise KeyError(f"no topic {topic!r} in {self.name}; topics: "
                           f"{sorted(broker.log_manager.topics)}")
        out = []
        for p in t.partitions:
            if partition is not None and p.index != partition:
                continue
            plog = p.log
            off = plog.log_start_offset
            while off < plog.log_end_offset:
                region = plog.read(off, 1 << 30)
                if not region:
                    break
                for b in iter_batches(region.read()):
                    if b.is_control:
                        continue
                    for r in b:
                        if r.offset >= off:
                            out.append(Record(topic, p.index, r.offset, r.timestamp, r.key,
                                              r.value, [(h[0], h[1]) for h in r.headers],
                                              b.is_transactional))
                off = region.last_offset + 1
        return out

    def wait_for(self, topic: str, count: int, timeout: float = 10.0) -> list[Record]:
        """Wait until ``topic`` holds at least ``count`` data records; return them.

        Raises:
            TimeoutError: fewer after ``timeout`` seconds (the message says how many).
        """
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                found = self.records(topic)
            except KeyError:
                found = []
            if len(found) >= count:
                return found
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{topic!r} holds {len(found)} records after {timeout} s, "
                                   f"waited for {count}")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    # --- faults ---------------------------------------------------------------------------

    def fail_next(self, api: str | int, error: str | int | type, count: int = 1) -> None:
        """Answer the next ``count`` requests of ``api`` with ``error`` (Kafka's names:
        ``fail_next("Produce", "NOT_LEADER_OR_FOLLOWER")``), in every error field of the
        response. Calls add up: errors are used in the order given.

        Raises:
            ValueError: an unknown API or error name (the message lists the valid ones).
        """
        key, cls = resolve_api(api), resolve_error(error)
        if count < 1:
            raise ValueError(f"count={count}: give 1 or more")
        faults = self._faults()
        self._loop_call(faults.push_errors, key, cls, count)

    def delay(self, api: str | int, ms: float) -> None:
        """Hold every ``api`` request ``ms`` milliseconds (real time) before handling it;
        ``ms=0`` removes the delay."""
        key = resolve_api(api)
        if ms < 0:
            raise ValueError(f"ms={ms}: give a delay >= 0 (0 removes it)")
        self._loop_call(self._faults().set_delay, key, ms)

    def pause(self) -> None:
        """Stop answering: requests are read but held (the sockets stay open) until ``resume``."""
        self._loop_call(self._faults().pause)

    def resume(self) -> None:
        """Answer again; held requests are handled now."""
        self._loop_call(self._faults().resume)

    def clear_faults(self) -> None:
        """Remove every injected error, delay and pause, and accept connections again."""
        self._loop_call(self._faults().clear)
        self.accept_connections()

    def drop_connections(self) -> int:
        """Close every client connection now (clients see a reset and reconnect); returns
        how many were closed."""
        broker = self._require()

        def drop() -> int:
            conns = list(broker.connections)
            log.warning("%s: fault: dropping %d connection(s)", self.name, len(conns))
            for conn in conns:
                conn.abort()
            return len(conns)

        return int(self._loop_call(drop))

    def refuse_connections(self) -> None:
        """Close the listening socket: new connections are refused (ECONNREFUSED) until
        ``accept_connections``. Open connections stay; ``drop_connections`` closes them."""
        broker = self._require()

        async def refuse() -> None:
            for lst in list(broker.servers):
                self._refused.append(lst.address)
                await lst.close()
            broker.servers.clear()
            log.warning("%s: fault set: refusing connections", self.name)

        if not self._refused:
            self._call(refuse())

    def accept_connections(self) -> None:
        """Listen again on the same port after ``refuse_connections``."""
        broker = self._require()
        if not self._refused:
            return

        async def accept() -> None:
            from pylog.broker.net import Listener

            while self._refused:
                host, port = self._refused.pop()
                lst = Listener(broker, host, port)
                lst.start()
                broker.servers.append(lst)
            log.warning("%s: fault cleared: accepting connections", self.name)

        self._call(accept())

    def _faults(self) -> Faults:
        self._require()
        assert self.faults is not None
        return self.faults

    # --- the clock ------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the virtual clock ``seconds`` forward and run what became due (group and
        transaction timeouts, retention, offsets expiry, ...; see ``pylog.testing.clock``)
        before returning, including the disk work it started.

        Raises:
            RuntimeError: the broker does not run on the virtual clock.
        """
        clock = self.clock
        if not isinstance(clock, VirtualClock):
            raise RuntimeError("advance() needs the virtual clock: create the broker with "
                               "KafkaBroker(clock='virtual') (this one runs on real time)")
        broker = self._require()
        self._call(clock.run_due(seconds, lambda: self._settle(broker)), timeout=120)
        broker.log_manager.scheduler.wake()

    async def _settle(self, broker: Broker) -> None:
        """Let the loop run what a fired timer started, and the I/O threads finish the disk
        work queued so far (a barrier task on each thread returns once every earlier task
        is done: the pool takes tasks in order)."""
        await settle_loop()
        n = broker.config["num.io.threads"]
        barrier = threading.Barrier(n)
        futures = [broker.io.executor.submit(barrier.wait, 10) for _ in range(n)]
        await asyncio.gather(*(asyncio.wrap_future(f) for f in futures), return_exceptions=True)
        await settle_loop()

    # --- the log --------------------------------------------------------------------------

    def log_text(self) -> str:
        """What the broker logged since it was created (pylog's loggers, on its threads)."""
        return "\n".join(self._capture.lines)

    def logged_bugs(self) -> list[str]:
        """The log lines that report a bug in the broker (an exception that escaped a
        request handler, an error asyncio logged on the broker's loop)."""
        return list(self._capture.bugs)
