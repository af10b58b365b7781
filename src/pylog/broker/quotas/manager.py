"""Kafka's ``ClientQuotaManager``, sans-IO: the precedence of quota entities, the windowed
rate a client is measured by and the throttle time of a violation (KIP-13, KIP-124, KIP-219).

**Measuring.** Each (user, client-id) pair the quotas apply to has a sensor: a sampled sum
over ``quota.window.num`` windows of ``quota.window.size.seconds`` (11 x 1 s by default,
Kafka's ``SampledStat`` + ``WindowedSum`` + ``Rate``). A sample is a [start, last event,
sum, count] list; a record goes to the current sample, or starts the next one (reusing the
oldest slot; ``num + 1`` slots, one of them the sample overlapping the window's start) once
the current one is a window old. Samples with no event for ``num`` windows are reset. The
rate is the sum of the samples over the elapsed time since the oldest sample started, but
never less than ``num - 1`` whole windows (``Rate.windowSize``): a client that has just
started is not measured over a few milliseconds.

**Throttling.** After a value is recorded, a rate ``O`` above the bound ``T`` is a
violation; the throttle time is what brings the rate back to the bound if nothing more is
recorded, ``X = (O - T) / T * W`` for the window ``W`` the rate was computed over
(``QuotaUtils.throttleTime``), rounded half up. The request quota caps it at one window
(``ClientRequestQuotaManager``).

**Precedence** (``DefaultQuotaCallback``): the first entity with a quota of this type wins:

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>

The sensor a request is counted in is named by the level that applies (its metric tags):
with client-id quotas only, one sensor per client id (``user=""``); with user quotas only,
one per user (``client-id=""``); with both kinds, the tags of the first level in the order
above that has any quota. Clients that share a quota entity (every client of a user, under
a user quota) share its sensor, and so its limit. As in Kafka, once a kind of quota has
been configured, the tags keep that shape until the broker restarts.

Times are milliseconds of the caller's clock, passed in (``now_ms``): nothing here reads a
clock, sleeps or does I/O. Not thread-safe: the broker calls it on its event loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, NamedTuple

# Kafka's QuotaTypes bits: which kinds of quota entities have been configured.
_CLIENT_ID_QUOTAS: Final = 1
_USER_QUOTAS: Final = 2
_USER_CLIENT_ID_QUOTAS: Final = 4

#: Sensors idle this long are dropped (Kafka's InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_EXPIRATION_MS: Final = 3600 * 1000
#: The throttle-time average's windows (Kafka's default MetricConfig: 2 samples of 30 s).
_AVG_SAMPLES, _AVG_WINDOW_MS = 2, 30_000


class _Default:
    """The default entity (``<default>`` in ZooKeeper, a null name in the protocol)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


#: The name of a default entity: ``QuotaEntity(user=DEFAULT)`` is ``/config/users/<default>``.
DEFAULT: Final = _Default()
Name = str | _Default


class QuotaEntity(NamedTuple):
    """A quota entity: a user (principal name), a client id, or both; each a name or
    ``DEFAULT``, None when the entity has no such part."""

    user: Name | None = None
    client_id: Name | None = None

    def __str__(self) -> str:
        parts = []
        if self.user is not None:
            parts.append(f"user {self.user!r}" if isinstance(self.user, str) else "default user")
        if self.client_id is not None:
            parts.append(
                f"client-id {self.client_id!r}"
                if isinstance(self.client_id, str)
                else "default client-id"
            )
        return " ".join(parts) or "empty entity"


class SampledStat:
    """Kafka's ``SampledStat``: values in ``num + 1`` samples of ``window_ms`` each; the
    sum (``total``) and the event count of the samples still in the window."""

    __slots__ = ("samples", "current", "num", "window_ms")

    def __init__(self, num: int, window_ms: int) -> None:
        self.samples: list[list[float]] = []  # [start_ms, last_event_ms, value, count]
        self.current = 0
        self.num = num
        self.window_ms = window_ms

    def _sample(self, now_ms: float) -> list[float]:
        if not self.samples:
            self.samples.append([now_ms, now_ms, 0.0, 0])
        return self.samples[self.current]

    def record(self, value: float, now_ms: float) -> None:
        sample = self._sample(now_ms)
        if now_ms - sample[0] >= self.window_ms:  # complete: advance to the next slot
            self.current = (self.current + 1) % (self.num + 1)
            if self.current >= len(self.samples):
                sample = [now_ms, now_ms, 0.0, 0]
                self.samples.append(sample)
            else:
                sample = self.samples[self.current]
                sample[:] = (now_ms, now_ms, 0.0, 0)
        sample[2] += value
        sample[3] += 1
        sample[1] = now_ms

    def purge(self, now_ms: float) -> None:
        """Reset the samples with no event in the last ``num`` windows."""
        expire = self.num * self.window_ms
        for sample in self.samples:
            if now_ms - sample[1] >= expire:
                sample[:] = (now_ms, now_ms, 0.0, 0)

    def total(self, now_ms: float) -> float:
        self.purge(now_ms)
        return sum(s[2] for s in self.samples)

    def average(self, now_ms: float) -> float:
        """Kafka's ``Avg``: the mean of the recorded values, NaN when there are none."""
        self.purge(now_ms)
        count = sum(s[3] for s in self.samples)
        return sum(s[2] for s in self.samples) / count if count else float("nan")

    def window_size_ms(self, now_ms: float) -> float:
        """Kafka's ``Rate.windowSize``: the time since the oldest sample started, at least
        ``num - 1`` whole windows, at least 1 ms."""
        self.purge(now_ms)
        oldest = min(s[0] for s in self.samples) if self.samples else now_ms
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def rate(self, now_ms: float) -> float:
        """Kafka's ``Rate`` in units per second."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def throttle_time_ms(observed: float, bound: float, window_ms: float) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: ``(O - T) / T * W``, rounded half up."""
    return int((observed - bound) / bound * window_ms + 0.5)


class ClientSensor:
    """The sensors of one (user, client-id) tag pair: the quota's rate and the average
    throttle time (Kafka's ``ClientSensors``)."""

    __slots__ = ("user", "client_id", "rate", "bound", "throttle", "last_record_ms")

    def __init__(
        self,
        user: str,
        client_id: str,
        num: int,
        window_ms: int,
        bound: float | None,
        now_ms: float,
    ) -> None:
        self.user = user
        self.client_id = client_id
        self.rate = SampledStat(num, window_ms)
        self.bound = bound
        self.throttle = SampledStat(_AVG_SAMPLES, _AVG_WINDOW_MS)
        self.last_record_ms = now_ms


class ClientQuotaManager:
    """One quota type's manager (Kafka has three: Produce and Fetch in bytes, Request in
    percent of a thread's time). See the module docstring.

    Args:
        quota_type: Kafka's ``QuotaType`` name (``Produce``, ``Fetch``, ``Request``).
        num_samples, window_s: ``quota.window.num``, ``quota.window.size.seconds``.
        max_throttle_ms: a cap on the throttle time (the request quota's one window).
    """

    def __init__(
        self, quota_type: str, num_samples: int, window_s: int, max_throttle_ms: int | None = None
    ) -> None:
        self.quota_type = quota_type
        self.num_samples = num_samples
        self.window_ms = window_s * 1000
        self.max_throttle_ms = max_throttle_ms
        self.overrides: dict[QuotaEntity, float] = {}
        self.sensors: dict[tuple[str, str], ClientSensor] = {}
        self._enabled = 0

    @property
    def enabled(self) -> bool:
        """Whether a quota of this type was ever configured (Kafka's ``quotasEnabled``):
        until then nothing is recorded and requests pay one attribute read."""
        return self._enabled != 0

    # -- configuration ---------------------------------------------------------------------

    def update_quota(self, entity: QuotaEntity, value: float | None) -> None:
        """Set (``value``) or remove (None) the quota of ``entity``; sensors already
        created take their new bound at once."""
        if entity.user is not None:
            self._enabled |= (
                _USER_CLIENT_ID_QUOTAS if entity.client_id is not None else _USER_QUOTAS
            )
        elif entity.client_id is not None:
            self._enabled |= _CLIENT_ID_QUOTAS
        if value is None:
            self.overrides.pop(entity, None)
        else:
            self.overrides[entity] = float(value)
        for sensor in self.sensors.values():
            sensor.bound = self.quota_limit(sensor.user, sensor.client_id)

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """The (user, client-id) tags of the sensor a request of ``user`` / ``client_id``
        is counted in (``DefaultQuotaCallback.quotaMetricTags``)."""
        kinds = self._enabled
        if kinds in (0, _CLIENT_ID_QUOTAS):
            return "", client_id
        if kinds == _USER_QUOTAS:
            return user, ""
        if kinds == _USER_CLIENT_ID_QUOTAS:
            return user, client_id
        has = self.overrides.__contains__
        if has(QuotaEntity(user, client_id)) or has(QuotaEntity(user, DEFAULT)):
            return user, client_id
        if has(QuotaEntity(user, None)):
            return user, ""
        if has(QuotaEntity(DEFAULT, client_id)) or has(QuotaEntity(DEFAULT, DEFAULT)):
            return user, client_id
        if has(QuotaEntity(DEFAULT, None)):
            return user, ""
        return "", client_id

    def quota_limit(self, user: str, client_id: str) -> float | None:
        """The bound of the sensor with tags (``user``, ``client_id``) (empty: not part of
        the tags), by the precedence in the module docstring; None: unlimited."""
        E = QuotaEntity
        order: list[QuotaEntity]
        if user and client_id:
            order = [
                E(user, client_id),
                E(user, DEFAULT),
                E(DEFAULT, client_id),
                E(DEFAULT, DEFAULT),
            ]
        elif user:
            order = [E(user, None), E(DEFAULT, None)]
        elif client_id:
            order = [E(None, client_id), E(None, DEFAULT)]
        else:
            return None
        for entity in order:
            value = self.overrides.get(entity)
            if value is not None:
                return value
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        """The limit that applies to a client (tests and logs)."""
        return self.quota_limit(*self.metric_tags(user, client_id))

    # -- recording -------------------------------------------------------------------------

    def sensor(self, user: str, client_id: str, now_ms: float) -> ClientSensor:
        tags = self.metric_tags(user, client_id)
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = ClientSensor(
                tags[0], tags[1], self.num_samples, self.window_ms, self.quota_limit(*tags), now_ms
            )
        return sensor

    def record_and_get_throttle_ms(
        self, user: str, client_id: str, value: float, now_ms: float
    ) -> int:
        """Record ``value`` for the client, then return the throttle time in ms when the
        rate is over its quota (0 otherwise, and always 0 when no quota of this type was
        ever configured)."""
        if not self._enabled:
            return 0
        sensor = self.sensor(user, client_id, now_ms)
        sensor.rate.record(value, now_ms)
        sensor.last_record_ms = now_ms
        bound = sensor.bound
        if bound is None:
            return 0
        observed = sensor.rate.rate(now_ms)
        if observed <= bound:
            return 0
        ms = throttle_time_ms(observed, bound, sensor.rate.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            ms = min(ms, self.max_throttle_ms)
        return ms

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: float) -> None:
        """Record without checking the quota (it counts against the next request)."""
        if self._enabled:
            sensor = self.sensor(user, client_id, now_ms)
            sensor.rate.record(value, now_ms)
            sensor.last_record_ms = now_ms

    def unrecord(self, user: str, client_id: str, value: float, now_ms: float) -> None:
        """Take back a recorded value (a throttled fetch answers empty: its bytes were never
        sent), by recording its negative (Kafka's ``unrecordQuotaSensor``)."""
        self.record_no_throttle(user, client_id, -value, now_ms)

    def max_value_in_window(self, user: str, client_id: str, now_ms: float) -> float:
        """The most that can be recorded at once without being throttled for sure: the
        quota times ``num - 1`` windows (a fetch's ``max_bytes`` is capped to it)."""
        if not self._enabled:
            return float("inf")
        bound = self.sensor(user, client_id, now_ms).bound
        if bound is None:
            return float("inf")
        return bound * (self.num_samples - 1) * self.window_ms / 1000.0

    def record_throttle(self, user: str, client_id: str, throttle_ms: int, now_ms: float) -> None:
        """A response was throttled for ``throttle_ms``: count it in the throttle-time
        average of the client's sensor (Kafka records only throttled responses)."""
        if throttle_ms > 0 and self._enabled:
            self.sensor(user, client_id, now_ms).throttle.record(throttle_ms, now_ms)

    def expire(self, now_ms: float) -> int:
        """Drop sensors with no record for an hour; returns how many."""
        idle = [
            tags
            for tags, s in self.sensors.items()
            if now_ms - s.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS
        ]
        for tags in idle:
            del self.sensors[tags]
        return len(idle)

    def measurements(self, now_ms: float) -> Iterator[tuple[str, str, float, float]]:
        """(user tag, client-id tag, rate per second, average throttle ms) per sensor, for
        the metrics (Kafka's ``byte-rate`` / ``request-time`` and ``throttle-time``)."""
        for (user, client_id), sensor in sorted(self.sensors.items()):
            yield user, client_id, sensor.rate.rate(now_ms), sensor.throttle.average(now_ms)
