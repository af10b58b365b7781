"""Group configs (pylog.group.group_configs): Kafka's GroupConfig names, types and bounds,
the session-above-heartbeat check, the local store across a restart, what ZooKeeper's
strings become, and KIP-848 groups using their own consumer.* values."""

from __future__ import annotations

import pytest

from pylog.broker.group_config_file import open_group_configs
from pylog.config import BrokerConfig
from pylog.errors import InvalidConfigError, InvalidRequestError
from pylog.group.group_configs import GROUP_CONFIG_DEFS, GroupConfigs, reset_duration_ms, to_strings


def configs(tmp_path, **overrides: str) -> GroupConfigs:
    props = {"log.dirs": str(tmp_path)}
    props.update(overrides)
    return open_group_configs(BrokerConfig(props))  # single node: group-configs.json


def test_the_names_are_kafkas_group_configs() -> None:
    assert set(GROUP_CONFIG_DEFS) == {
        "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms", "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms", "share.delivery.count.limit", "share.auto.offset.reset",
        "share.partition.max.record.locks", "share.isolation.level", "share.renew.acknowledge.enable"}


@pytest.mark.parametrize(("name", "value", "bound"), [
    ("consumer.session.timeout.ms", "44999", "greater than or equal to group.consumer.min.session.timeout.ms"),
    ("consumer.session.timeout.ms", "60001", "less than or equal to group.consumer.max.session.timeout.ms"),
    ("consumer.heartbeat.interval.ms", "4999", "greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ("consumer.heartbeat.interval.ms", "15001", "less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "44999", "greater than or equal to group.share.min.session.timeout.ms"),
    ("share.session.timeout.ms", "60001", "less than or equal to group.share.max.session.timeout.ms"),
    ("share.heartbeat.interval.ms", "4999", "greater than or equal to group.share.min.heartbeat.interval.ms"),
    ("share.heartbeat.interval.ms", "15001", "less than or equal to group.share.max.heartbeat.interval.ms"),
    ("share.record.lock.duration.ms", "14999", "greater than or equal to group.share.min.record.lock.duration.ms"),
    ("share.record.lock.duration.ms", "60001", "less than or equal to group.share.max.record.lock.duration.ms"),
    ("share.record.lock.duration.ms", "999", "between 1000 and"),
    ("share.delivery.count.limit", "11", "less than or equal to group.share.max.delivery.count.limit"),
    ("share.delivery.count.limit", "1", "between 2 and"),
    ("share.partition.max.record.locks", "99", "between 100 and 10000"),
    ("share.partition.max.record.locks", "10001", "between 100 and 10000"),
    ("share.auto.offset.reset", "none", "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'"),
    ("share.auto.offset.reset", "by_duration", "by_duration:<PnDTnHnMn.nS>"),
    ("share.auto.offset.reset", "by_duration:", "by_duration:<PnDTnHnMn.nS>"),
    ("share.auto.offset.reset", "by_duration:1h", "by_duration:<PnDTnHnMn.nS>"),
    ("share.auto.offset.reset", "by_duration:P1Y", "by_duration:<PnDTnHnMn.nS>"),
    ("share.auto.offset.reset", "by_duration:PT", "by_duration:<PnDTnHnMn.nS>"),
    ("share.auto.offset.reset", "by_duration:-PT1H", "by_duration:<PnDTnHnMn.nS>"),
    ("share.auto.offset.reset", "by_duration:PT-5M", "by_duration:<PnDTnHnMn.nS>"),
    ("share.isolation.level", "committed", "one of: read_uncommitted, read_committed"),
    ("share.renew.acknowledge.enable", "1", "Expected value to be either true or false"),
    ("share.session.timeout.ms", "4.5e4", "Not a number of type INT"),
])
def test_a_value_out_of_bounds_is_invalid_config_naming_the_key(tmp_path, name, value, bound) -> None:
    gc = configs(tmp_path)
    with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")) as exc:
        gc.parse(name, value)
    assert bound in str(exc.value)


def test_bounds_follow_the_broker_settings(tmp_path) -> None:
    gc = configs(tmp_path, **{"group.share.min.session.timeout.ms": "1000",
                              "group.share.min.heartbeat.interval.ms": "100"})
    assert gc.parse("share.session.timeout.ms", "1000") == 1000
    assert gc.parse("share.heartbeat.interval.ms", " 100 ") == 100
    assert gc.parse("share.auto.offset.reset", "EARLIEST") == "earliest"


@pytest.mark.parametrize(("value", "kept", "ms"), [
    ("by_duration:PT1H", "by_duration:PT1H", 3_600_000),
    ("by_duration:P1DT2H30M", "by_duration:P1DT2H30M", 95_400_000),
    ("BY_DURATION:pt0.5s", "by_duration:pt0.5s", 500),
    ("by_duration:PT0S", "by_duration:PT0S", 0),
    (" latest ", "latest", None),
])
def test_share_auto_offset_reset_by_duration(tmp_path, value, kept, ms) -> None:
    """KIP-1106's ``by_duration:<ISO-8601 duration>``, as Kafka's ShareGroupAutoOffsetResetStrategy
    reads it (Java's Duration.parse; not negative)."""
    gc = configs(tmp_path)
    assert gc.parse("share.auto.offset.reset", value) == kept
    assert reset_duration_ms(kept) == ms


def test_share_isolation_level_and_record_locks(tmp_path) -> None:
    gc = configs(tmp_path, **{"group.share.partition.max.record.locks": "500"})
    assert gc.get("g", "share.isolation.level") == "read_uncommitted"
    assert gc.parse("share.isolation.level", "read_committed") == "read_committed"
    assert gc.get("g", "share.partition.max.record.locks") == 500  # the broker setting
    gc.alter("g", gc.parse_all({"share.partition.max.record.locks": "100",
                                "share.isolation.level": "read_committed"}), False)
    assert gc.get("g", "share.partition.max.record.locks") == 100
    assert gc.get("g", "share.isolation.level") == "read_committed"
    assert gc.get("g", "share.renew.acknowledge.enable") is True
    assert gc.parse("share.renew.acknowledge.enable", " FALSE ") is False
    gc.alter("g", {"share.renew.acknowledge.enable": False}, False)
    got = {n: (v, src) for n, v, src, _b in gc.describe("g")}
    assert got["share.renew.acknowledge.enable"] == ("false", 8)  # Java's spelling
    assert to_strings(gc.overrides("g")) == {"share.renew.acknowledge.enable": "false"}
    # the delivery-count bounds are broker settings (Kafka 4.2's group.share.min/max.*)
    wide = configs(tmp_path / "w", **{"group.share.max.delivery.count.limit": "20"})
    assert wide.parse("share.delivery.count.limit", "20") == 20


def test_unknown_and_null(tmp_path) -> None:
    gc = configs(tmp_path)
    with pytest.raises(InvalidConfigError, match="Unknown group config name: share.isolation"):
        gc.parse("share.isolation", "x")
    with pytest.raises(InvalidRequestError, match="Null value"):
        gc.parse("share.session.timeout.ms", None)


def test_session_timeout_must_stay_above_the_heartbeat_interval(tmp_path) -> None:
    gc = configs(tmp_path, **{"group.consumer.min.session.timeout.ms": "1000",
                              "group.consumer.min.heartbeat.interval.ms": "1000",
                              "group.consumer.max.heartbeat.interval.ms": "50000"})
    with pytest.raises(InvalidConfigError, match="consumer.session.timeout.ms must be greater than "
                                                 "consumer.heartbeat.interval.ms"):
        gc.parse_all({"consumer.session.timeout.ms": "5000"})  # the broker's interval is 5000
    with pytest.raises(InvalidConfigError, match="consumer.session.timeout.ms must be greater"):
        gc.parse_all({"consumer.heartbeat.interval.ms": "45000"})  # the broker's timeout is 45000
    assert gc.parse_all({"consumer.session.timeout.ms": "5000", "consumer.heartbeat.interval.ms": "4999"}) \
        == {"consumer.session.timeout.ms": 5000, "consumer.heartbeat.interval.ms": 4999}
    wide = configs(tmp_path, **{"group.share.max.heartbeat.interval.ms": "50000"})
    with pytest.raises(InvalidConfigError, match="share.session.timeout.ms must be greater than "
                                                 "share.heartbeat.interval.ms"):
        wide.parse_all({"share.heartbeat.interval.ms": "45000"})  # the broker's timeout is 45000


def test_the_local_store_survives_a_restart_and_a_deleted_group_loses_its_configs(tmp_path) -> None:
    gc = configs(tmp_path)
    gc.alter("g", gc.parse_all({"share.auto.offset.reset": "earliest",
                                "consumer.session.timeout.ms": "50000"}), validate_only=False)
    gc.alter("h", gc.parse_all({"share.delivery.count.limit": "3"}), validate_only=True)
    again = configs(tmp_path)
    assert again.overrides("g") == {"share.auto.offset.reset": "earliest", "consumer.session.timeout.ms": 50000}
    assert again.overrides("h") == {}
    assert again.get("g", "consumer.heartbeat.interval.ms") == 5000  # the broker's
    assert again.delete("g") and not again.delete("g")
    assert configs(tmp_path).overrides("g") == {}


def test_stored_strings_apply_and_a_refused_one_is_left_out(tmp_path) -> None:
    gc = GroupConfigs(BrokerConfig({"log.dirs": str(tmp_path)}))  # cluster mode: no local store
    gc.apply_stored("g", {"share.record.lock.duration.ms": "20000", "share.delivery.count.limit": "99"})
    assert gc.overrides("g") == {"share.record.lock.duration.ms": 20000}
    gc.apply_stored("h", {"share.auto.offset.reset": "by_duration:PT1H",
                          "share.isolation.level": "read_committed",
                          "share.partition.max.record.locks": "50"})
    assert gc.overrides("h") == {"share.auto.offset.reset": "by_duration:PT1H",
                                 "share.isolation.level": "read_committed"}
    assert to_strings(gc.overrides("h")) == {"share.auto.offset.reset": "by_duration:PT1H",
                                             "share.isolation.level": "read_committed"}
    gc.apply_stored("g", {})
    gc.apply_stored("h", {})
    assert gc.overrides("g") == {} and gc.groups() == []
    assert not (tmp_path / "group-configs.json").exists()  # cluster mode: ZooKeeper is the store


def test_describe_sources(tmp_path) -> None:
    gc = configs(tmp_path, **{"group.share.heartbeat.interval.ms": "1000"})
    gc.alter("g", {"consumer.session.timeout.ms": 50000}, validate_only=False)
    got = {n: (v, s, b) for n, v, s, b in gc.describe("g")}
    assert got["consumer.session.timeout.ms"] == ("50000", 8, "group.consumer.session.timeout.ms")
    assert got["share.heartbeat.interval.ms"] == ("1000", 4, "group.share.heartbeat.interval.ms")
    assert got["share.session.timeout.ms"] == ("45000", 5, "group.share.session.timeout.ms")
    assert got["share.auto.offset.reset"] == ("latest", 5, None)
    # overrides read elsewhere (ZooKeeper's strings) take the place of this copy's
    got = {n: (v, s) for n, v, s, _b in gc.describe("g", {"share.auto.offset.reset": "earliest"})}
    assert got["share.auto.offset.reset"] == ("earliest", 8) and got["consumer.session.timeout.ms"][1] == 5


def test_a_consumer_group_uses_its_own_session_timeout_and_heartbeat_interval() -> None:
    from _harness.groups import GroupHarness
    from test_group_consumer import hb  # the KIP-848 heartbeat helper

    h = GroupHarness()
    own = {"g": {"consumer.session.timeout.ms": 50_000, "consumer.heartbeat.interval.ms": 7_000}}
    h.coord.consumer.group_setting = lambda gid, name, default: own.get(gid, {}).get(name, default)
    r = hb(h, "m1", 0)
    assert r.heartbeat_interval_ms == 7_000
    assert hb(h, "o1", 0, group="other").heartbeat_interval_ms == 5_000  # the broker's
    hb(h, "m2", 0)
    h.advance(46_000)  # beyond the broker's 45 s, within the group's 50 s
    assert set(h.coord.consumer.groups["g"].members) == {"m1", "m2"}
    other = h.coord.consumer.groups.get("other")
    assert other is None or "o1" not in other.members  # 45 s for the other group
    h.advance(4_001)
    assert set(h.coord.consumer.groups["g"].members) == set()


def test_an_unreadable_file_starts_from_the_defaults(tmp_path) -> None:
    (tmp_path / "group-configs.json").write_text("[1, 2]")
    assert configs(tmp_path).groups() == []
    (tmp_path / "group-configs.json").write_text("{not json")
    gc = configs(tmp_path)
    assert gc.groups() == []
    gc.alter("g", {"share.delivery.count.limit": 3}, validate_only=False)  # and is rewritten
    assert configs(tmp_path).overrides("g") == {"share.delivery.count.limit": 3}
