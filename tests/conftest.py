"""Session-wide checks shared by every suite."""

from __future__ import annotations

import gc
import os
import warnings

import pytest


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


@pytest.fixture(autouse=True, scope="module")
def _collect_dropped_client_sockets():
    """kafka-python (3.0.12) drops the sockets of closed clients without closing them; the
    garbage collector then warns (ResourceWarning) in whichever later test it happens to
    run, often in another file on the same worker. Collect each module's garbage when the
    module ends, where those sockets are expected and ignored."""
    yield
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ResourceWarning, message="unclosed <socket")
        gc.collect()
