"""The dispatcher's interception point: a small generic interface that a layer above the
broker (``pylog.testing``'s fault injection) fills; the broker never imports who fills it.

``Broker.interceptor`` is None unless something sets it; then ``handlers.dispatch`` awaits
``interceptor.intercept(ctx, request, error_response)`` for every decoded request, after
decoding and before the handler (librdkafka's mock cluster and franz-go's kfake put their
faults at the same place). The interceptor returns ``PASS`` to let the handler run, or the
response to send instead (None: no response, as a Produce with acks=0). It may await first
(latency, a paused broker). ``error_response(ctx, request, code, message)`` is the API's own
builder of a response carrying ``code`` in every error field, so an injected error is
encoded exactly as a real one.

Event-loop affinity: ``intercept`` runs on the broker's loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

#: "Run the handler": what ``intercept`` returns for a request it leaves alone.
PASS: Any = object()

ErrorResponse = Callable[["RequestContext", Any, int, str], Any]


class RequestInterceptor(Protocol):
    async def intercept(self, ctx: RequestContext, request: Any,
                        error_response: ErrorResponse) -> Any:
        """``PASS``, or the response to send instead of running the handler."""
        ...
