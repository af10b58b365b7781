"""Stopping a client's background task for sure: cancel it until it ends, within a bound.

``task.cancel()`` followed by ``await task`` is not enough on Python 3.11. Its
``asyncio.wait_for`` swallows a cancellation that arrives after the awaited future
completed but before the waiting task resumed (CPython gh-86296, fixed by the rewrite of
``wait_for`` on ``asyncio.timeout`` in 3.12): ``wait_for`` then returns the result as if
nothing happened, and a task running a loop (a consumer's heartbeat loop, whose
``wait_for(wakeup.wait(), ...)`` or request ``wait_for(shield(answer), ...)`` completes in
the same loop turn as the cancel) goes round again. ``await task`` then waits for a loop
that never ends: a ``Consumer.close()`` that hangs with its event loop idle. The producer's
sender met the same race (``_sender.Sender.stop``).

``cancel_and_wait`` cancels again every ``RECANCEL_INTERVAL`` seconds until the task is
done (the next cancel lands at the task's next await), and gives up after ``timeout``
seconds, logging the task, so that a close never waits without bound (what is left is
cancelled again when the client's loop stops, ``pylog.client._loop``).

A cancel of the caller itself while it waits does not cut the wait short: these waits run
in ``close``, whose later steps (closing the coordinator link, the connections) must run
too, or sockets would be left open. The caller's cancel is absorbed, as the ``except
CancelledError: pass`` around ``await task`` these helpers replace absorbed it; the wait
stays bounded.

Event-loop affinity: the task's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["RECANCEL_INTERVAL", "STOP_TIMEOUT", "cancel_and_wait", "cancel_all", "run_within"]

log = logging.getLogger("pylog.client")

#: How often a task that is still running is cancelled again (seconds).
RECANCEL_INTERVAL = 0.1
#: How long a cancelled task may take to end before it is abandoned (seconds): a task
#: that does not end within this after being cancelled is a bug, not a slow peer.
STOP_TIMEOUT = 5.0


async def cancel_and_wait(task: asyncio.Future[Any] | None, timeout: float = STOP_TIMEOUT) -> bool:
    """Cancel ``task`` and wait until it is done, cancelling it again while it runs on;
    its result or exception is dropped (retrieved). No-op for None or a finished task.

    Returns:
        True once the task is done; False if it still ran after ``timeout`` seconds (it is
        logged as a warning and left running).

    A cancel of the caller while it waits is absorbed (see the module's docstring).
    """
    if task is None:
        return True
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    cancels = 0
    while not task.done():
        left = end - loop.time()
        if left <= 0:
            log.warning("task %r did not end within %.1f s of being cancelled %d times; left "
                        "running", task, timeout, cancels)
            return False
        task.cancel()
        cancels += 1
        try:
            await asyncio.wait({task}, timeout=min(RECANCEL_INTERVAL, left))
        except asyncio.CancelledError:
            _uncancel()  # the caller's own cancel: the close goes on
    if cancels > 1:
        log.debug("task %r ended after %d cancels", task, cancels)
    if not task.cancelled():
        task.exception()  # retrieved: a stopping task's failure is not reported
    return True


async def cancel_all(tasks: Iterable[asyncio.Future[Any] | None],
                     timeout: float = STOP_TIMEOUT) -> bool:
    """Cancel every task of ``tasks`` at once, then wait for each as ``cancel_and_wait``
    does, all within ``timeout`` seconds. True if they all ended."""
    todo = [t for t in tasks if t is not None]
    for t in todo:
        t.cancel()  # no-op for a finished task (its failure is still retrieved below)
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    ok = True
    for t in todo:
        ok = await cancel_and_wait(t, max(0.0, end - loop.time())) and ok
    return ok


async def run_within(aw: Awaitable[T], timeout: float) -> T:
    """``asyncio.wait_for(aw, timeout)`` whose every wait is bounded: on timeout the task is
    stopped with ``cancel_and_wait`` (3.11's ``wait_for`` waits without bound for the task
    it cancels, and returns its result as if in time when it ends on its own) and
    ``asyncio.TimeoutError`` is raised. A cancel of the caller stops the task the same way
    and is raised.

    Raises:
        asyncio.TimeoutError: not done within ``timeout`` seconds.
    """
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=max(timeout, 0.0))
    except asyncio.CancelledError:
        await cancel_and_wait(task)
        raise
    if not done:
        await cancel_and_wait(task)
        # (A cancelled gather ends with CancelledError as its exception, not cancelled.)
        if (not task.done() or task.cancelled()
                or isinstance(task.exception(), asyncio.CancelledError)):
            raise asyncio.TimeoutError
    return task.result()


def _uncancel() -> None:
    """Undo the current task's pending-cancel count after absorbing its cancel (3.11+), so
    that an ``asyncio.timeout`` around the caller still works."""
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        uncancel()
