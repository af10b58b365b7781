"""Kafka's ClientQuotaManager arithmetic (pylog.broker.quotas.manager): the precedence of
quota entities, the windowed rate, the throttle time, and what a client flooding the broker
gets over time with Kafka's default windows."""

from __future__ import annotations

import math

import pytest

from pylog.broker.quotas.manager import (
    DEFAULT,
    INACTIVE_SENSOR_EXPIRATION_MS,
    ClientQuotaManager,
    QuotaEntity,
    SampledStat,
    throttle_time_ms,
)

MB = 1048576


def manager(num: int = 11, window_s: int = 1, **kw: int) -> ClientQuotaManager:
    return ClientQuotaManager("Produce", num, window_s, **kw)


# -- precedence (DefaultQuotaCallback.quotaLimit and quotaMetricTags) -------------------------

# Kafka's order, most specific first; each level given its own value.
LEVELS = [
    (QuotaEntity("alice", "app"), 1.0),  # /config/users/alice/clients/app
    (QuotaEntity("alice", DEFAULT), 2.0),  # /config/users/alice/clients/<default>
    (QuotaEntity("alice", None), 3.0),  # /config/users/alice
    (QuotaEntity(DEFAULT, "app"), 4.0),  # /config/users/<default>/clients/app
    (QuotaEntity(DEFAULT, DEFAULT), 5.0),  # /config/users/<default>/clients/<default>
    (QuotaEntity(DEFAULT, None), 6.0),  # /config/users/<default>
    (QuotaEntity(None, "app"), 7.0),  # /config/clients/app
    (QuotaEntity(None, DEFAULT), 8.0),  # /config/clients/<default>
]


@pytest.mark.parametrize("first", range(len(LEVELS)))
def test_the_most_specific_configured_level_wins(first: int) -> None:
    """With every level from ``first`` down configured, ``first`` applies to alice's app."""
    m = manager()
    for entity, value in LEVELS[first:]:
        m.update_quota(entity, value)
    assert m.quota("alice", "app") == LEVELS[first][1]


def test_removing_a_level_falls_back_to_the_next() -> None:
    m = manager()
    for entity, value in LEVELS:
        m.update_quota(entity, value)
    for i, (entity, _) in enumerate(LEVELS[:-1]):
        m.update_quota(entity, None)
        assert m.quota("alice", "app") == LEVELS[i + 1][1]
    m.update_quota(LEVELS[-1][0], None)
    assert m.quota("alice", "app") is None


def test_other_clients_and_users_get_their_own_levels() -> None:
    m = manager()
    m.update_quota(QuotaEntity(None, "app"), 10.0)
    m.update_quota(QuotaEntity(None, DEFAULT), 20.0)
    assert m.quota("ANONYMOUS", "app") == 10.0
    assert m.quota("ANONYMOUS", "other") == 20.0
    m.update_quota(QuotaEntity(DEFAULT, None), 30.0)  # any user: wins over client-id levels
    assert m.quota("ANONYMOUS", "app") == 30.0
    m.update_quota(QuotaEntity("bob", None), 40.0)
    assert m.quota("bob", "app") == 40.0 and m.quota("carol", "app") == 30.0


def test_metric_tags_follow_the_kinds_of_quota_configured() -> None:
    m = manager()
    assert m.metric_tags("alice", "app") == ("", "app")  # nothing yet: per client id
    m.update_quota(QuotaEntity(DEFAULT, None), 1.0)
    assert m.metric_tags("alice", "app") == ("alice", "")  # user quotas only: per user
    m2 = manager()
    m2.update_quota(QuotaEntity("alice", DEFAULT), 1.0)
    assert m2.metric_tags("alice", "app") == ("alice", "app")
    # Both kinds: the tags of the level that applies.
    m2.update_quota(QuotaEntity(None, "app"), 1.0)
    assert m2.metric_tags("alice", "app") == ("alice", "app")
    assert m2.metric_tags("bob", "app") == ("", "app")


def test_clients_of_one_user_quota_share_its_sensor() -> None:
    m = manager()
    m.update_quota(QuotaEntity(DEFAULT, None), MB)
    m.record_and_get_throttle_ms("ANONYMOUS", "a", 6 * MB, 0)
    # Another client id of the same user is measured with the first one's bytes.
    assert m.record_and_get_throttle_ms("ANONYMOUS", "b", 6 * MB, 0) > 0
    assert list(m.sensors) == [("ANONYMOUS", "")]


# -- the rate and the throttle time (Rate, SampledStat, QuotaUtils) ----------------------------


def test_nothing_is_recorded_until_a_quota_is_configured() -> None:
    m = manager()
    assert not m.enabled
    assert m.record_and_get_throttle_ms("u", "c", 10**12, 0) == 0
    assert m.sensors == {}
    assert m.max_value_in_window("u", "c", 0) == math.inf


def test_a_new_client_is_measured_over_num_minus_one_windows() -> None:
    stat = SampledStat(11, 1000)
    stat.record(5 * MB, 0)
    assert stat.window_size_ms(0) == 10_000
    assert stat.rate(0) == pytest.approx(0.5 * MB)
    stat.record(0, 15_500)  # 15.5 s on, the first sample is gone: back to the floor
    assert stat.window_size_ms(15_500) == 10_000


def test_the_window_grows_to_the_oldest_sample() -> None:
    stat = SampledStat(11, 1000)
    for t in range(0, 10_500, 500):
        stat.record(1000, t)
    assert stat.window_size_ms(10_500) == 10_500
    assert stat.total(10_500) == 21 * 1000


def test_throttle_time_is_kafkas_formula() -> None:
    # X = (O - T) / T * W, rounded half up (Math.round).
    assert throttle_time_ms(2.0, 1.0, 10_000) == 10_000
    assert throttle_time_ms(1.25, 1.0, 10_000) == 2500
    assert throttle_time_ms(1.00005, 1.0, 10_000) == 1  # 0.5 rounds up


def test_a_violation_throttles_until_the_rate_is_back_at_the_quota() -> None:
    m = manager()
    m.update_quota(QuotaEntity(None, "c"), MB)
    assert m.record_and_get_throttle_ms("u", "c", 10 * MB, 0) == 0  # exactly the quota
    # 15 MB over the 10 s floor is 1.5 MB/s: (1.5 - 1) / 1 * 10 s. The floor holds until
    # 10 s have really passed, so the rate is still over at 5 s (Kafka's Rate does so too).
    assert m.record_and_get_throttle_ms("u", "c", 5 * MB, 0) == 5000
    assert m.record_and_get_throttle_ms("u", "c", 0, 5000) == 5000


def test_a_steady_client_is_throttled_for_its_excess_only() -> None:
    m = manager()
    m.update_quota(QuotaEntity(None, "c"), MB)
    throttles = [m.record_and_get_throttle_ms("u", "c", MB, k * 1000) for k in range(11)]
    # 11 MB over the first 10 s: 10% over, one window's tenth times ten windows.
    assert throttles == [0] * 10 + [1000]
    # A second on, the first sample has aged out: 10 MB over 10 s, within the quota.
    assert m.record_and_get_throttle_ms("u", "c", 0, 11_000) == 0
    assert m.sensors[("", "c")].rate.rate(11_000) == pytest.approx(MB)


def test_the_request_quota_caps_the_throttle_at_one_window() -> None:
    m = ClientQuotaManager("Request", 11, 1, max_throttle_ms=1000)
    m.update_quota(QuotaEntity(None, "c"), 10.0)  # 10 % of a thread
    assert m.record_and_get_throttle_ms("u", "c", 5000.0, 0) == 1000


def test_unrecord_takes_a_throttled_fetch_back() -> None:
    m = ClientQuotaManager("Fetch", 11, 1)
    m.update_quota(QuotaEntity(None, "c"), MB)
    m.record_and_get_throttle_ms("u", "c", 9 * MB, 0)
    assert m.record_and_get_throttle_ms("u", "c", 2 * MB, 1) > 0
    m.unrecord("u", "c", 2 * MB, 1)
    assert m.sensors[("", "c")].rate.total(1) == 9 * MB
    assert m.max_value_in_window("u", "c", 1) == 10 * MB


def test_a_changed_quota_applies_to_existing_sensors() -> None:
    m = manager()
    m.update_quota(QuotaEntity(None, DEFAULT), MB)
    assert m.record_and_get_throttle_ms("u", "c", 10 * MB, 0) == 0
    m.update_quota(QuotaEntity(None, DEFAULT), MB / 2)
    assert m.record_and_get_throttle_ms("u", "c", 0, 0) == 10_000
    m.update_quota(QuotaEntity(None, DEFAULT), None)
    assert m.record_and_get_throttle_ms("u", "c", 10 * MB, 0) == 0


def test_throttle_time_average_and_sensor_expiry() -> None:
    m = manager()
    m.update_quota(QuotaEntity(None, "c"), MB)
    m.record_and_get_throttle_ms("u", "c", 1, 0)
    [(user, client, rate, throttle)] = list(m.measurements(0))
    assert (user, client) == ("", "c") and math.isnan(throttle)
    m.record_throttle("u", "c", 100, 0)
    m.record_throttle("u", "c", 300, 10)
    assert list(m.measurements(10))[0][3] == 200.0
    assert m.expire(INACTIVE_SENSOR_EXPIRATION_MS - 1) == 0
    assert m.expire(INACTIVE_SENSOR_EXPIRATION_MS) == 1 and m.sensors == {}


def simulate(
    num: int, seconds: float, request: int = 512 * 1024, link_bytes_s: float = 50e6
) -> list[tuple[float, int]]:
    """A producer with an endless backlog on a 50 MB/s link, limited to 1 MiB/s, honouring
    every throttle (the broker mutes it): (time s, bytes) of each request accepted."""
    m = manager(num)
    m.update_quota(QuotaEntity(None, "c"), MB)
    t, sent = 0.0, []
    while t < seconds:
        t += request / link_bytes_s
        ms = m.record_and_get_throttle_ms("u", "c", request, t * 1000)
        sent.append((t, request))
        t += ms / 1000
    return sent


def rate(sent: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(n for t, n in sent if start <= t < end) / (end - start) / MB


def test_a_flooding_client_averages_its_quota_over_kafkas_windows() -> None:
    """With Kafka's 11 x 1 s windows a client may use 10 windows' worth at once when it
    starts and whenever a full sample expires, so its rate over 20 s swings between about
    0.7 and 1.35 of its quota; over two minutes it is the quota. With 3 windows (the
    integration test's broker) 20 s already average to within about 10%."""
    sent = simulate(11, 130)
    assert 0.95 <= rate(sent, 0, 120) <= 1.1
    windows = [rate(sent, s, s + 20) for s in range(0, 100, 2)]
    assert 0.7 <= min(windows) and max(windows) <= 1.35
    sent3 = simulate(3, 70)
    windows3 = [rate(sent3, s, s + 20) for s in range(0, 50, 2)]
    assert 0.9 <= min(windows3) and max(windows3) <= 1.12
