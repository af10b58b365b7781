"""The blocking facade's background event loop: one daemon thread per client.

The blocking ``Producer``, ``Consumer`` and ``Admin`` own the same asyncio core as
``pylog.client.aio`` and run it on a private event loop in a thread of their own (as the
Java producer runs its ``Sender`` on an I/O thread). Calls from the user's thread go
through ``run()`` (``asyncio.run_coroutine_threadsafe``); the producer's ``send()`` only
touches the thread-safe accumulator and wakes the loop when a batch becomes ready.

``close(timeout)`` is bounded as Kafka's ``close(Duration)`` is: the client's close
coroutine bounds its waits by ``timeout`` itself, and ``finish_close`` waits for it at most
``timeout + CLOSE_GRACE`` seconds (the grace is for what a close does once its time is
up: the LeaveGroup it sends without waiting, the error it raises, its sockets closed);
past that the remaining steps are abandoned, the client's connections aborted
(``Cluster.abort``), the coroutine cancelled and the loop stopped, its leftover tasks
given ``ABORT_GRACE`` seconds to end.

Calling a blocking method from the loop thread itself (e.g. ``flush()`` inside a delivery
callback) would wait for itself: ``run()`` refuses it with ``IllegalStateError``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pylog.client.aio._tasks import STOP_TIMEOUT, cancel_all
from pylog.client.errors import IllegalStateError, KafkaTimeoutError

T = TypeVar("T")

__all__ = ["ABORT_GRACE", "CLOSE_GRACE", "LoopThread"]

log = logging.getLogger("pylog.client")

#: After a ``close(timeout)`` ran out of time: how long the tasks left on the loop, cancelled
#: and with their sockets aborted, get to end before the loop is closed (seconds).
ABORT_GRACE = 0.5
#: How long past its ``timeout`` a client's close may run before it is abandoned (seconds).
CLOSE_GRACE = 2.0


class LoopThread:
    """An event loop running in a daemon thread until ``stop()``."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        # How long the loop's leftover tasks get once it stops (``stop(grace)``).
        self._cleanup_timeout = STOP_TIMEOUT
        self._started = threading.Event()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()
        self._started.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                # Tasks a close left behind: cancelled until they end, within a bound (a
                # bare gather would wait for ever on a task whose cancel Python 3.11's
                # wait_for swallowed: pylog.client.aio._tasks), so stop() always returns.
                bound = self._cleanup_timeout
                pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                if pending:
                    self.loop.run_until_complete(cancel_all(pending, bound))
                try:
                    self.loop.run_until_complete(
                        asyncio.wait_for(self.loop.shutdown_asyncgens(), bound))
                except asyncio.TimeoutError:
                    log.warning("%s: async generators still open after %.1f s; loop closed",
                                self.thread.name, bound)
            finally:
                self.loop.close()

    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self.thread.ident

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result.

        Raises:
            KafkaTimeoutError: not done within ``timeout`` seconds (the coroutine is
                cancelled).
            IllegalStateError: called from the loop thread (it would wait for itself).
        """
        if self.in_loop_thread():
            coro.close()
            raise IllegalStateError("a blocking client call from the client's own I/O thread "
                                    "(e.g. inside a delivery callback) would deadlock")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            if fut.done():  # the coroutine's own timeout error (TimeoutError subclasses)
                raise
            fut.cancel()
            raise KafkaTimeoutError(f"not done within {timeout:g} s") from None

    def call_soon(self, fn: Any, *args: Any) -> None:
        """Schedule ``fn(*args)`` on the loop from any thread."""
        if self.in_loop_thread():
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def finish_close(self, fut: concurrent.futures.Future[Any], timeout: float | None,
                     abort: Any) -> None:
        """Wait for a client's close running on the loop (``fut``, from
        ``run_coroutine_threadsafe``), at most ``timeout + CLOSE_GRACE`` seconds (None:
        until it ends; its steps bound themselves), and raise what it raised. Past that the
        close is abandoned (``abandon``) and this returns: the caller stops the thread as
        usual."""
        try:
            fut.result(None if timeout is None else max(timeout, 0.0) + CLOSE_GRACE)
        except concurrent.futures.TimeoutError:
            if fut.done():  # the close's own timeout error
                raise
            self.abandon(fut, abort, timeout)

    def abandon(self, fut: concurrent.futures.Future[Any], abort: Any, timeout: float | None) -> None:
        """Give up on a close still running past its ``timeout``: ``abort()`` runs on
        the loop (it aborts the client's connections, so that whatever the close waits on
        fails at once), the close is cancelled, and the loop is stopped with
        ``ABORT_GRACE`` seconds for what is left."""
        log.warning("%s: close not done within its timeout (%g s) and %g s more; abandoned "
                    "(connections aborted)", self.thread.name,
                    timeout if timeout is not None else 0.0, CLOSE_GRACE)
        if self.thread.is_alive():
            self.call_soon(abort)
        fut.cancel()
        self.stop(ABORT_GRACE)

    def stop(self, grace: float | None = None) -> None:
        """Stop the loop and join the thread; tasks still running are cancelled until they
        end, for at most ``grace`` seconds (default ``STOP_TIMEOUT``). Idempotent."""
        if grace is not None:
            self._cleanup_timeout = grace
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if not self.in_loop_thread():
                self.thread.join()
