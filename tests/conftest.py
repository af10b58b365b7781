"""Session-wide checks shared by every suite."""

from __future__ import annotations

import os

import pytest

# Kafka client threads (kafka-python, librdkafka, pylog.client) left running by a test fail
# its teardown: tests/_harness/thread_leaks.py.
pytest_plugins = ["_harness.thread_leaks"]


def pytest_sessionstart(session: pytest.Session) -> None:
    # The logcore suites run twice, compiled and pure: make sure the
    # implementation loaded is the one asked for, or the second run proves nothing.
    import logcore

    wanted = "python" if os.environ.get("LOGCORE_PUREPYTHON", "") not in ("", "0") else "c"
    if logcore.IMPLEMENTATION != wanted:
        raise pytest.UsageError(
            f"logcore implementation is {logcore.IMPLEMENTATION!r}, expected {wanted!r}"
        )


def pytest_report_header(config: pytest.Config) -> str:
    import logcore

    return f"logcore implementation: {logcore.IMPLEMENTATION}"
