"""Test-only: slow file-system calls in a broker subprocess.

A test puts this directory first on the subprocess's PYTHONPATH and sets
``PYLOG_TEST_SLOW_FS_MS``: Python imports this module at start-up, before any of pylog,
and every ``os.fsync``, ``os.rename``, ``os.replace`` and ``os.unlink`` then sleeps that
many milliseconds first (a slow or busy disk). Without the variable it does nothing.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

_MS = os.environ.get("PYLOG_TEST_SLOW_FS_MS")


def _slowed(fn: Callable[..., Any], delay_s: float) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kw: Any) -> Any:
        time.sleep(delay_s)
        return fn(*args, **kw)

    return call


if _MS:
    for _name in ("fsync", "rename", "replace", "unlink"):
        setattr(os, _name, _slowed(getattr(os, _name), int(_MS) / 1000))
