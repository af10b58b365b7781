"""Client quotas (KIP-13, KIP-124, KIP-219; docs/quotas.md): ``producer_byte_rate``,
``consumer_byte_rate`` and ``request_percentage`` for user and client-id entities.

- ``manager.py``: Kafka's ``ClientQuotaManager``, sans-IO (precedence, windowed rate,
  throttle time);
- ``entities.py``: entity names on the wire, in ZooKeeper and on disk; validation;
- ``store.py``: ``ClientQuotas`` (``broker.quotas``): the entities, their storage, the
  three managers;
- this module: what the request path calls.

**Throttling as Kafka does it since KIP-219**: the broker answers at once with
``throttle_time_ms`` set, then stops reading from the connection for that long (``net.py``
mutes it); the client is expected to hold back too. Produce records the request's size after
the append; Fetch caps ``max_bytes`` to what the quota allows in a window, records the
response's size and, when throttled, answers empty (nothing read is sent, the bytes are
taken back); every other request of a client counts its handler time against
``request_percentage`` (``record_request_time``, called by the dispatcher). Requests between
brokers (replica fetches, the controller's) are exempt.

Cost with no quota configured: two or three attribute reads (``enabled``) per Produce, Fetch
and dispatched request; nothing is measured or recorded.
Event-loop affinity: the broker's loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.quotas.store import ClientQuotas

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

__all__ = [
    "ClientQuotas",
    "throttle",
    "record_request_time",
    "produce_throttle",
    "fetch_max_bytes",
    "fetch_throttle",
]


def throttle(ctx: RequestContext, manager: Any, ms: int) -> None:
    """Throttle the connection of ``ctx`` for ``ms`` (the longest of its quotas' times wins)
    and count it in the client's throttle-time average."""
    if ms <= 0:
        return
    if ms > ctx.throttle_ms:
        ctx.throttle_ms = ms
    manager.record_throttle(ctx.user, ctx.client_id or "", ms, ctx.broker.quotas.now_ms())


def record_request_time(ctx: RequestContext) -> int:
    """Count the request's handler time so far (minus its remote waits) in the request
    quota, once per request; returns the throttle time (0: within quota). Kafka counts a
    request-handler thread's time in percent: 1 s of it is 100."""
    quotas = ctx.broker.quotas
    if ctx.request_time_recorded or not quotas.request.enabled:
        return 0
    ctx.request_time_recorded = True
    now = quotas.now_ms()
    local_ms = max(now - ctx.started_ms - ctx.remote_s * 1000.0, 0.0)
    return quotas.request.record_and_get_throttle_ms(
        ctx.user, ctx.client_id or "", local_ms / 10.0, now
    )


def produce_throttle(ctx: RequestContext, size: int, acks: int) -> None:
    """After a Produce's appends: its bytes against ``producer_byte_rate`` and its time
    against ``request_percentage`` (not for acks=0, as Kafka), the longer throttle wins."""
    quotas = ctx.broker.quotas
    if not (quotas.produce.enabled or quotas.request.enabled):
        return
    if acks == 0:
        ctx.request_time_recorded = True  # exempt from the request quota
    now = quotas.now_ms()
    bandwidth = quotas.produce.record_and_get_throttle_ms(ctx.user, ctx.client_id or "", size, now)
    request = record_request_time(ctx)
    if bandwidth > request:
        throttle(ctx, quotas.produce, bandwidth)
    else:
        throttle(ctx, quotas.request, request)


def fetch_max_bytes(ctx: RequestContext, max_bytes: int) -> int:
    """A consumer's fetch reads at most what its quota allows in ``num - 1`` windows: more
    would be throttled for sure (Kafka's ``getMaxValueInQuotaWindow``)."""
    quotas = ctx.broker.quotas
    if not quotas.fetch.enabled:
        return max_bytes
    cap = quotas.fetch.max_value_in_window(ctx.user, ctx.client_id or "", quotas.now_ms())
    return max_bytes if cap >= max_bytes else max(int(cap), 1)


def fetch_throttle(ctx: RequestContext, size: int) -> int:
    """A consumer's fetch answer of ``size`` bytes: its bytes against ``consumer_byte_rate``
    and its time against ``request_percentage``; when either throttles, the bytes are taken
    back (the answer goes out empty). Returns the throttle time."""
    quotas = ctx.broker.quotas
    if not (quotas.fetch.enabled or quotas.request.enabled):
        return 0
    now = quotas.now_ms()
    user, client_id = ctx.user, ctx.client_id or ""
    request = record_request_time(ctx)
    bandwidth = quotas.fetch.record_and_get_throttle_ms(user, client_id, size, now)
    if bandwidth == 0 and request == 0:
        return 0
    quotas.fetch.unrecord(user, client_id, size, now)
    if bandwidth > request:
        throttle(ctx, quotas.fetch, bandwidth)
    else:
        throttle(ctx, quotas.request, request)
    return max(bandwidth, request)
