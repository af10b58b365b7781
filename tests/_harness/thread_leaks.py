"""A pytest plugin: Kafka client threads a test leaves running after its teardown.

A client that a test does not close keeps its I/O thread alive for the rest of the xdist
worker: kafka-python 3's ``kafka-io-<client_id>`` thread goes on reconnecting to brokers
that are gone (and draws ``random`` jitter while a later Hypothesis test runs in the
same process), librdkafka's native ``rdk:*`` threads poll, pylog.client's loop thread
waits. Which threads count as a client's:

- Python threads whose name starts with one of ``CLIENT_THREAD_PREFIXES`` (kafka-python's
  consumer and admin client, pylog.client's blocking Producer, Consumer, Admin,
  ShareConsumer and embedded client) or ends with one of ``CLIENT_THREAD_SUFFIXES``
  (kafka-python's producer: its sender thread is ``<client_id>-network-thread``);
- native threads named ``rdk:*`` (librdkafka names its threads with
  ``pthread_setname_np``; the plugin reads ``/proc/self/task/*/comm``, Linux only).

Who owns a thread: a thread started while a fixture of module, class, package or session
scope was being set up belongs to that fixture and must be gone once the fixture is
finalised; every other thread started during a test (its body and its function-scoped
fixtures) must be gone once the test's teardown is over. Each check first gives lingering
threads ``GRACE_SECONDS`` (ini ``client_thread_leaks_grace``) to end (a client's
``close()`` may hand its shutdown to the thread itself), then runs the garbage collector
once (a confluent-kafka client in a reference cycle is only destroyed, and its threads
joined, when the cycle is collected) and waits again. What is still alive is a leak, attributed to the test (or fixture) that
started it.

A leaked Python client thread is then stopped, so that it cannot trouble the tests that
follow in the same process (kafka-python's selector or sender, pylog.client's loop, through
their own stop calls: ``reap``); librdkafka's native threads cannot be reached.

``--client-thread-leaks=fail`` (the default) turns a leak into an error in the teardown
of the test that leaked; a test whose own call already failed only gets it in the
summary (the traceback pytest keeps holds the test's frame, hence its clients).
``report`` lists leaks in the terminal summary only (with xdist too: the leaks travel
with the teardown reports), ``off`` disables the plugin.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

CLIENT_THREAD_PREFIXES = (
    "kafka-io-",              # kafka-python 3 (kafka/net/selector.py)
    "pylog-producer-io",      # pylog.client.Producer
    "pylog-consumer-io",      # pylog.client.Consumer
    "pylog-admin-io",         # pylog.client.Admin
    "pylog-share-consumer",   # pylog.client.ShareConsumer
    "pylog-embedded-",        # pylog.client's embedded (in-process) broker client
)
CLIENT_THREAD_SUFFIXES = (
    "-network-thread",        # kafka-python 3 KafkaProducer (kafka/producer/sender.py)
)
NATIVE_PREFIX = "rdk:"        # librdkafka (confluent-kafka)
GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.01
_PROPERTY = "client_thread_leaks"

# A thread's key: the Thread object for Python threads, ("native", tid, name) for the
# native ones (only those not known to the threading module: librdkafka's).
ThreadKey = Any


def _native_threads() -> dict[ThreadKey, str]:
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:  # not Linux: native threads are not checked
        return {}
    found = {}
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:  # the thread ended while we looked
            continue
        if name.startswith(NATIVE_PREFIX):
            found[("native", int(tid), name)] = name
    return found


def client_threads() -> dict[ThreadKey, str]:
    """Every live client thread: key to name."""
    found: dict[ThreadKey, str] = {
        t: t.name for t in threading.enumerate()
        if t.name.startswith(CLIENT_THREAD_PREFIXES) or t.name.endswith(CLIENT_THREAD_SUFFIXES)
    }
    found.update(_native_threads())
    return found


def _alive(keys: dict[ThreadKey, str]) -> dict[ThreadKey, str]:
    if not keys:
        return {}
    native = _native_threads() if any(isinstance(k, tuple) for k in keys) else {}
    return {k: n for k, n in keys.items()
            if (k in native if isinstance(k, tuple) else k.is_alive())}


def _wait_gone(keys: dict[ThreadKey, str], grace: float) -> dict[ThreadKey, str]:
    deadline = time.monotonic() + grace
    keys = _alive(keys)
    while keys and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
        keys = _alive(keys)
    return keys


def survivors(keys: dict[ThreadKey, str], grace: float = GRACE_SECONDS) -> dict[ThreadKey, str]:
    """The threads of ``keys`` still alive after ``grace`` seconds, a garbage collection
    and up to ``grace`` seconds more."""
    keys = _wait_gone(keys, grace)
    if keys:
        gc.collect()
        keys = _wait_gone(keys, grace)
    return keys


def describe(keys: dict[ThreadKey, str]) -> str:
    python = sorted(n for k, n in keys.items() if not isinstance(k, tuple))
    native = sorted(n for k, n in keys.items() if isinstance(k, tuple))
    parts = list(python)
    if native:
        parts.append(f"{len(native)} librdkafka thread(s) ({', '.join(sorted(set(native)))})")
    return ", ".join(parts)


def reap(keys: dict[ThreadKey, str]) -> None:
    """Stop the leaked Python client threads of ``keys`` (best effort, each bounded)."""
    for key in keys:
        if isinstance(key, tuple):
            continue  # native: no handle on a librdkafka client from its threads
        owner = getattr(getattr(key, "_target", None), "__self__", None)
        try:
            if hasattr(key, "force_close"):  # kafka-python's producer Sender (a Thread)
                key.force_close()
                key.join(GRACE_SECONDS)
            elif owner is not None and hasattr(owner, "call_soon_threadsafe"):
                owner.stop(timeout_ms=GRACE_SECONDS * 1000)  # kafka-python's NetworkSelector
            elif owner is not None and hasattr(owner, "in_loop_thread"):
                owner.stop()  # pylog.client's LoopThread: cancels what is left, bounded
        except Exception:  # noqa: BLE001 - containment only; the leak is reported anyway
            pass


class ClientThreadLeak(AssertionError):
    """A test left client threads running after its teardown."""


@dataclass
class _State:
    mode: str
    grace: float
    before: dict[ThreadKey, str] = field(default_factory=dict)
    current: str = ""  # the test being run
    # Threads started while a fixture broader than a function was set up: key to
    # (its FixtureDef, the fixture's name, the test that set it up, thread name).
    owned: dict[ThreadKey, tuple[Any, str, str, str]] = field(default_factory=dict)
    # Owned threads whose fixture was finalised since the last check.
    released: dict[ThreadKey, tuple[Any, str, str, str]] = field(default_factory=dict)


_STATE = pytest.StashKey[_State]()
_CALL_FAILED = pytest.StashKey[bool]()
_FOUND = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("client-thread-leaks")
    group.addoption(
        "--client-thread-leaks", choices=("fail", "report", "off"), default=None,
        help="Kafka client threads (kafka-python, librdkafka, pylog.client) left alive by a "
             "test: fail its teardown (default), only list them in the summary, or off")
    parser.addini("client_thread_leaks", "default of --client-thread-leaks", default="fail")
    parser.addini("client_thread_leaks_grace", "seconds a client thread may take to end after "
                  "its test (twice: before and after a garbage collection)",
                  default=str(GRACE_SECONDS))


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("--client-thread-leaks") or config.getini("client_thread_leaks")
    if mode not in ("fail", "report", "off"):
        raise pytest.UsageError(f"client_thread_leaks = {mode!r}: fail, report or off")
    grace = config.getini("client_thread_leaks_grace")
    try:
        config.stash[_STATE] = _State(mode=mode, grace=float(grace))
    except ValueError:
        raise pytest.UsageError(f"client_thread_leaks_grace = {grace!r}: a number of seconds") from None


def _state(config: pytest.Config) -> _State | None:
    state = config.stash.get(_STATE, None)
    return None if state is None or state.mode == "off" else state


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest):
    state = _state(request.config)
    if state is None or fixturedef.scope == "function":
        return (yield)
    before = client_threads()
    try:
        return (yield)
    finally:
        for key, name in client_threads().items():
            if key not in before and key not in state.owned:
                state.owned[key] = (fixturedef, fixturedef.argname, state.current, name)


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[Any],
                                  request: pytest.FixtureRequest) -> None:
    state = _state(request.config)
    if state is None or fixturedef.scope == "function":
        return
    for key, owner in list(state.owned.items()):
        if owner[0] is fixturedef:
            state.released[key] = state.owned.pop(key)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    state = _state(item.config)
    if state is not None:
        state.before = client_threads()
        state.current = item.nodeid


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_CALL_FAILED] = True
    if report.when == "teardown":
        found = item.stash.get(_FOUND, [])
        if found:
            report.user_properties.append((_PROPERTY, list(found)))
    return report


# tryfirst: the outermost wrapper, so the check runs after the logging plugin dropped the
# test's captured log records (a record whose arguments hold an exception keeps, through
# its traceback, the test's frame and every client in it alive).
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    result = yield
    state = _state(item.config)
    if state is None:
        return result
    now = client_threads()
    released, state.released = state.released, {}
    started = {k: n for k, n in now.items()
               if k not in state.before and k not in state.owned and k not in released}
    found = []
    left = survivors(started, state.grace)
    if left:
        found.append(f"{item.nodeid} left {describe(left)} running")
        reap(left)
    by_fixture: dict[tuple[str, str], dict[ThreadKey, str]] = {}
    for key, (_fixturedef, fixture, nodeid, name) in released.items():
        by_fixture.setdefault((fixture, nodeid), {})[key] = name
    for (fixture, nodeid), keys in by_fixture.items():
        left = survivors(keys, state.grace)
        if left:
            found.append(f"fixture {fixture!r} (set up by {nodeid}) left {describe(left)} "
                         "running after its teardown")
            reap(left)
    if not found:
        return result
    item.stash[_FOUND] = found
    if state.mode == "fail" and not item.stash.get(_CALL_FAILED, False):
        raise ClientThreadLeak("; ".join(found) + " (close every client in a finally block "
                               "or a fixture; tests/_harness/thread_leaks.py)")
    return result


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "teardown":
        return
    for name, value in report.user_properties:
        if name == _PROPERTY:
            _LEAKS.extend(value)


# Filled on the controller (xdist) or the only process from the teardown reports.
_LEAKS: list[str] = []


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _LEAKS:
        return
    terminalreporter.section("client threads left running")
    for line in _LEAKS:
        terminalreporter.write_line(line)
