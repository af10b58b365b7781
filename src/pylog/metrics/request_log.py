"""Kafka's request log: the logger ``kafka.request.logger``, one line per request at DEBUG.

Off by default (the logger inherits the root level) and free when off: the connection's
worker asks ``REQUEST_LOGGER.isEnabledFor(logging.DEBUG)`` once per request and builds
nothing else unless it is on. Turn it on with ``pylog broker --logger
kafka.request.logger=DEBUG`` or ``logging.getLogger("kafka.request.logger").setLevel(logging.DEBUG)``.

A line, after Kafka's ``RequestChannel`` "Completed request" line::

    Completed request: Produce v9 correlation id 7 client id 'rdkafka' from 127.0.0.1:50514
    (PLAINTEXT): request 1180 bytes, response 62 bytes; totalTime 1.204 ms,
    requestQueueTime 0.031, localTime 1.020, remoteTime 0.000, throttleTime 0.000,
    sendTime 0.153

(one line in the log; wrapped here). Times are milliseconds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

REQUEST_LOGGER = logging.getLogger("kafka.request.logger")


def response_size(chunks: Iterable[Any] | None) -> int:
    """Bytes of an encoded response: byte chunks and file regions (``size``)."""
    if not chunks:
        return 0
    return sum(c.size if hasattr(c, "size") and not isinstance(c, (bytes, bytearray, memoryview))
               else len(c) for c in chunks)


def log_request(api: str, version: int, correlation_id: int, client_id: str | None, peer: str,
                listener: str, request_bytes: int, response_bytes: int, queue_s: float,
                handler_s: float, remote_s: float, send_s: float, throttle_ms: float = 0.0) -> None:
    """Write one request's line (the caller checked that DEBUG is enabled)."""
    local_s = max(handler_s - remote_s, 0.0)
    REQUEST_LOGGER.debug(
        "Completed request: %s v%d correlation id %d client id %r from %s (%s): request %d "
        "bytes, response %d bytes; totalTime %.3f ms, requestQueueTime %.3f, localTime %.3f, "
        "remoteTime %.3f, throttleTime %.3f, sendTime %.3f", api, version, correlation_id,
        client_id, peer, listener, request_bytes, response_bytes,
        (queue_s + handler_s + send_s) * 1000, queue_s * 1000, local_s * 1000, remote_s * 1000,
        float(throttle_ms), send_s * 1000)
