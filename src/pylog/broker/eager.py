"""Run a coroutine's first step now, and hand the rest to the current task only if it waits.

Most requests a connection's worker handles never wait: an inline append, a metadata
lookup, an in-memory commit. ``net.Connection`` starts each handler with ``coroutine.send``
so that it knows, before anything else runs on the loop, whether the handler finished
(then its response may be held and written together with the next ones) or is waiting
(then what is held goes out first, and the handler is finished with :func:`finish`).

``finish`` is what ``asyncio.Task`` itself does with a coroutine (its ``__step``): the
future the coroutine yielded is passed up to the task running ``finish``, which wakes when
it is done and sends the coroutine ``None`` (the coroutine's own ``await`` then takes the
future's result or exception); a bare ``yield`` (``asyncio.sleep(0)``) is passed up as
``None``, which the task reschedules. Cancelling the task cancels the future the coroutine
waits on, as it would if the coroutine were the task's own; if that future is already
done, the cancellation is thrown into the coroutine.

Event-loop affinity: call from a task on the loop the coroutine's futures belong to.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["finish"]


class _PassUp:
    """An awaitable that yields one value to the running task: the future (or ``None``) a
    driven coroutine yielded, exactly as that coroutine yielded it."""

    __slots__ = ("yielded",)

    def __init__(self, yielded: Any) -> None:
        self.yielded = yielded

    def __await__(self) -> Generator[Any, None, None]:
        yield self.yielded


async def finish(coro: Coroutine[Any, Any, T], yielded: Any) -> T:
    """Drive ``coro`` to its end from the current task, ``yielded`` being what its last
    ``send`` returned. Returns its result or raises its exception (a cancellation of this
    task included, once the coroutine has let it through)."""
    while True:
        thrown: BaseException | None = None
        try:
            await _PassUp(yielded)
        except BaseException as exc:  # this task was cancelled while the future was done
            thrown = exc
        try:
            yielded = coro.send(None) if thrown is None else coro.throw(thrown)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
