"""The client-thread leak check of the test suites (``tests/_harness/thread_leaks.py``),
run with ``pytester`` in a subprocess of its own (a leak made on purpose here must not be
seen by this session's own check). Threads named as kafka-python's stand in for clients."""

from __future__ import annotations

import pathlib

import pytest

pytest_plugins = ("pytester",)

TESTS = pathlib.Path(__file__).resolve().parents[1]

HELPERS = '''
import threading
import pytest

STOP = threading.Event()

def client_thread(name="kafka-io-fake", until=STOP):
    t = threading.Thread(target=until.wait, name=name, daemon=True)
    t.start()
    return t
'''


def _run(pytester: pytest.Pytester, *args: str, **files: str) -> pytest.RunResult:
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
                          "pytest_plugins = ['_harness.thread_leaks']\n")
    pytester.makepyfile(helpers=HELPERS, **files)
    return pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider",
                                         "-o", "client_thread_leaks_grace=1", *args)


LEAKS = '''
from helpers import client_thread

def test_leaks():
    client_thread("kafka-io-leaky")

def test_after():
    pass

def test_leaks_a_producer():
    client_thread("kafka-python-producer-1-network-thread")

def test_fails():
    client_thread("kafka-io-held")
    assert False
'''

CLEAN = '''
import threading
from helpers import client_thread

def test_closed():
    done = threading.Event()
    t = client_thread(until=done)
    done.set()
    t.join()

def test_a_client_still_shutting_down_gets_its_grace():
    done = threading.Event()
    client_thread(until=done)
    threading.Timer(0.5, done.set).start()  # ends half a second after the test

def test_not_a_client_thread():
    threading.Thread(target=threading.Event().wait, name="worker", daemon=True).start()
'''

FIXTURES = '''
import threading
import pytest
from helpers import client_thread

@pytest.fixture(scope="module")
def shared_client():
    stop = threading.Event()
    t = client_thread("kafka-io-shared", stop)
    yield t
    stop.set()

@pytest.fixture(scope="module")
def forgotten_client():
    yield client_thread("kafka-io-forgotten")

def test_uses_it(shared_client, forgotten_client):
    assert shared_client.is_alive()

def test_uses_it_again(shared_client, forgotten_client):
    assert shared_client.is_alive()
'''

ONE_TEST_MODULE = '''
import pytest
from helpers import client_thread

@pytest.fixture(scope="module")
def forgotten_client():
    yield client_thread("kafka-io-forgotten-once")

def test_alone(forgotten_client):
    pass
'''


def test_leaks_fail_the_teardown_that_leaked_them_and_are_listed(pytester: pytest.Pytester) -> None:
    result = _run(pytester, test_leaks=LEAKS, test_clean=CLEAN, test_fixtures=FIXTURES,
                  test_one=ONE_TEST_MODULE)
    # test_leaks: its own teardown errors. test_fails: failed already, so only listed (the
    # traceback pytest keeps holds its frame and clients). test_clean: a closed client, one
    # still ending within the grace period, a thread that is no client's. test_fixtures:
    # neither test leaks; the module fixture that never stops its client does, reported at
    # the teardown in which it was finalised (the module's last test); test_one: the same
    # with one test, whose teardown reports the fixture, not the test.
    result.assert_outcomes(passed=9, failed=1, errors=4)
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_uses_it_again*",
        "*ClientThreadLeak: fixture 'forgotten_client' (set up by "
        "test_fixtures.py::test_uses_it) left kafka-io-forgotten running after its teardown*",
        "*ERROR at teardown of test_leaks*",
        "*ClientThreadLeak: test_leaks.py::test_leaks left kafka-io-leaky running*",
        "*ERROR at teardown of test_leaks_a_producer*",
        "*ClientThreadLeak: test_leaks.py::test_leaks_a_producer left "
        "kafka-python-producer-1-network-thread running*",
        "*client threads left running*",
    ])
    summary = result.stdout.str().split("client threads left running", 1)[1]
    assert "test_leaks.py::test_leaks left kafka-io-leaky running" in summary
    assert "test_leaks.py::test_fails left kafka-io-held running" in summary
    assert ("fixture 'forgotten_client' (set up by test_one.py::test_alone) left "
            "kafka-io-forgotten-once running after its teardown") in summary
    assert "test_one.py::test_alone left" not in summary
    for innocent in ("test_clean", "kafka-io-shared", "test_after"):
        assert innocent not in summary


REAPED = '''
import threading
import warnings

def test_leaks_a_kafka_python_consumer():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import kafka
    # No broker: api_version given, so nothing is asked at construction; its I/O thread runs.
    kafka.KafkaConsumer(bootstrap_servers="127.0.0.1:9", api_version=(2, 5), client_id="reaped")

def test_the_leaked_thread_was_stopped():
    assert [t.name for t in threading.enumerate() if t.name.startswith("kafka-io-")] == []
'''


def test_a_leaked_kafka_python_thread_is_stopped_after_it_is_reported(
        pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--client-thread-leaks=report", test_reaped=REAPED)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*client threads left running*",
        "test_reaped.py::test_leaks_a_kafka_python_consumer left kafka-io-reaped running"])


def test_report_mode_only_lists_the_leaks(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--client-thread-leaks=report", test_leaks=LEAKS)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*client threads left running*",
                                 "test_leaks.py::test_leaks left kafka-io-leaky running",
                                 "test_leaks.py::test_fails left kafka-io-held running"])
