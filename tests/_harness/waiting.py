"""Polling for a condition in multi-process tests (clusters, ZooKeeper, broker restarts)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Call ``pred`` every ``interval`` seconds until it returns something true, and return
    that; after ``timeout`` seconds fail with ``what`` and the last value seen."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
