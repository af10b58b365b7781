"""Fault injection at the broker's request dispatcher (``pylog.broker.intercept``).

``Faults`` is the ``RequestInterceptor`` a ``KafkaBroker`` installs on its broker: per API
an error stack (librdkafka's ``rd_kafka_mock_push_request_errors``: the next ``count``
requests of that API are answered with the error), a latency added before the handler, and
a pause that holds every request until resumed (the sockets stay open; nothing is
answered). Errors are answered with the API's own ``error_response`` (Kafka's
``AbstractRequest.getErrorResponse``): a correctly encoded response of that API and version
with the code in every topic and partition error field. Each injected fault is logged by
the ``pylog.testing.faults`` logger at WARNING, so the broker's log shows it.

Names are Kafka's: APIs as in the protocol specs (``"Produce"``, ``"JoinGroup"``; case and
underscores are ignored, so ``"JOIN_GROUP"`` works) or their key; errors as in Kafka's
``Errors`` enum (``"NOT_LEADER_OR_FOLLOWER"``), their ``pylog.errors`` class name, or
their code. An unknown name raises ``ValueError`` listing the valid names, with the
closest one.

Thread-safety: ``resolve_api`` and ``resolve_error`` from any thread; the rest on the
broker's loop (``KafkaBroker`` calls them there).
"""

from __future__ import annotations

import asyncio
import collections
import difflib
import logging
from typing import Any

from pylog import errors
from pylog.broker.handlers import HANDLERS
from pylog.broker.intercept import PASS, ErrorResponse
from pylog.protocol.apis import api_name

log = logging.getLogger("pylog.testing.faults")


def _squash(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def api_names() -> dict[str, int]:
    """``{"Produce": 0, ...}``: every API the broker serves, by its spec name."""
    return {api_name(key): key for key in sorted(HANDLERS)}


def error_names() -> dict[str, type[errors.ApiError]]:
    """``{"NOT_LEADER_OR_FOLLOWER": NotLeaderOrFollowerError, ...}`` (codes other than 0)."""
    return {cls.name: cls for code, cls in sorted(errors.ERRORS_BY_CODE.items()) if code != 0}


def _unknown(kind: str, given: object, valid: list[str]) -> ValueError:
    close = difflib.get_close_matches(str(given), valid, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(f"unknown {kind} {given!r}{hint} Valid {kind}s: {', '.join(valid)}")


def resolve_api(api: str | int) -> int:
    """The API key of ``api`` (a spec name in any case, with or without underscores, or a key)."""
    names = api_names()
    if isinstance(api, int) and not isinstance(api, bool):
        if api in names.values():
            return api
        raise _unknown("API", api, list(names))
    if isinstance(api, str):
        wanted = _squash(api)
        for name, key in names.items():
            if _squash(name) == wanted:
                return key
    raise _unknown("API", api, list(names))


def resolve_error(error: str | int | type[errors.ApiError]) -> type[errors.ApiError]:
    """The ``pylog.errors`` class of ``error`` (Kafka's name, the class or its name, a code)."""
    names = error_names()
    if isinstance(error, type) and issubclass(error, errors.ApiError) and error.code != 0:
        return error
    if isinstance(error, int) and not isinstance(error, bool):
        cls = errors.ERRORS_BY_CODE.get(error)
        if cls is not None and error != 0:
            return cls
        raise ValueError(f"unknown error code {error}: give a Kafka error name such as "
                         "'NOT_LEADER_OR_FOLLOWER' or a code pylog.errors knows")
    if isinstance(error, str):
        if error.upper() in names:
            return names[error.upper()]
        for cls in names.values():
            if cls.__name__ == error:
                return cls
    raise _unknown("error", error, list(names))


class Faults:
    """The injected faults of one broker (see the module docstring). Event-loop affinity:
    the broker's loop."""

    def __init__(self, broker_name: str) -> None:
        self.broker_name = broker_name
        self._errors: dict[int, collections.deque[type[errors.ApiError]]] = {}
        self._delays: dict[int, float] = {}
        self._resumed: asyncio.Event | None = None
        #: How many requests were answered with an injected error (for tests and logs).
        self.injected = 0

    # --- control (on the loop) ------------------------------------------------------------

    def push_errors(self, api_key: int, error: type[errors.ApiError], count: int) -> None:
        self._errors.setdefault(api_key, collections.deque()).extend([error] * count)
        log.warning("%s: fault set: the next %d %s request(s) get %s (%d)", self.broker_name,
                    count, api_name(api_key), error.name, error.code)

    def set_delay(self, api_key: int, ms: float) -> None:
        if ms > 0:
            self._delays[api_key] = ms / 1000.0
            log.warning("%s: fault set: %s requests delayed by %g ms", self.broker_name,
                        api_name(api_key), ms)
        elif self._delays.pop(api_key, None) is not None:
            log.warning("%s: fault cleared: %s requests no longer delayed", self.broker_name,
                        api_name(api_key))

    def pause(self) -> None:
        if self._resumed is None:
            self._resumed = asyncio.Event()
            log.warning("%s: fault set: paused (requests are read but not answered until "
                        "resume())", self.broker_name)

    def resume(self) -> None:
        if self._resumed is not None:
            self._resumed.set()
            self._resumed = None
            log.warning("%s: fault cleared: resumed", self.broker_name)

    def clear(self) -> None:
        self._errors.clear()
        self._delays.clear()
        self.resume()

    def pending_errors(self, api_key: int) -> int:
        return len(self._errors.get(api_key, ()))

    @property
    def active(self) -> bool:
        return bool(self._resumed is not None or self._delays or any(self._errors.values()))

    # --- the interceptor ------------------------------------------------------------------

    async def intercept(self, ctx: Any, request: Any, error_response: ErrorResponse) -> Any:
        key = ctx.api_key
        resumed = self._resumed
        if resumed is not None:
            log.warning("%s: fault: holding %s v%d (correlation id %d) from %s while paused",
                        self.broker_name, api_name(key), ctx.api_version, ctx.correlation_id,
                        ctx.peer)
            await resumed.wait()
        delay = self._delays.get(key)
        if delay is not None:
            log.warning("%s: fault: delaying %s v%d (correlation id %d) from %s by %g ms",
                        self.broker_name, api_name(key), ctx.api_version, ctx.correlation_id,
                        ctx.peer, delay * 1000)
            await asyncio.sleep(delay)  # real time: a client's request timeout is real too
        queue = self._errors.get(key)
        if not queue:
            return PASS
        error = queue.popleft()
        self.injected += 1
        log.warning("%s: fault: answering %s v%d (correlation id %d) from %s with %s (%d)",
                    self.broker_name, api_name(key), ctx.api_version, ctx.correlation_id,
                    ctx.peer, error.name, error.code)
        return error_response(ctx, request, error.code, f"{error.name} injected by pylog.testing")
