"""Quota entities (pylog.broker.quotas.entities): Kafka's znode names, the wire's entities,
the AlterClientQuotas validation and the DescribeClientQuotas filters."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from pylog import errors
from pylog.broker.quotas.entities import (
    DescribeFilter,
    apply_ops,
    desanitize,
    entity_from_wire,
    entity_path,
    entity_to_wire,
    format_quota_value,
    parse_entity_path,
    parse_quota_values,
    sanitize,
)
from pylog.broker.quotas.manager import DEFAULT, QuotaEntity


@pytest.mark.parametrize(
    "name, znode",
    [
        ("app-1.x_y", "app-1.x_y"),
        ("a b", "a%20b"),  # space: %20, not +
        ("a*b", "a%2Ab"),  # * is a JMX pattern character
        ("CN=a,O=b", "CN%3Da%2CO%3Db"),
        ("a/b", "a%2Fb"),
        ("a~b", "a%7Eb"),  # Java's URLEncoder encodes ~
        ("é", "%C3%A9"),
    ],
)
def test_sanitize_as_kafkas_sanitizer(name: str, znode: str) -> None:
    assert sanitize(name) == znode
    assert desanitize(znode) == name


@pytest.mark.parametrize(
    "entity, path",
    [
        (QuotaEntity(None, "app"), "clients/app"),
        (QuotaEntity(None, DEFAULT), "clients/<default>"),
        (QuotaEntity("alice", None), "users/alice"),
        (QuotaEntity(DEFAULT, None), "users/<default>"),
        (QuotaEntity("User:a b", "c/d"), "users/User%3Aa%20b/clients/c%2Fd"),
        (QuotaEntity(DEFAULT, DEFAULT), "users/<default>/clients/<default>"),
    ],
)
def test_entity_paths_round_trip(entity: QuotaEntity, path: str) -> None:
    assert entity_path(entity) == path
    assert parse_entity_path(path) == entity


@pytest.mark.parametrize(
    "path", ["topics/t", "clients", "users/a/clients", "users/a/x/b", "clients/"]
)
def test_other_paths_are_not_quota_entities(path: str) -> None:
    assert parse_entity_path(path) is None


def test_stored_values_keep_quotas_only() -> None:
    raw = {
        "producer_byte_rate": "1048576",
        "request_percentage": "12.5",
        "SCRAM-SHA-256": "salt=...",
        "consumer_byte_rate": "-1",
    }
    assert parse_quota_values("users/a", raw) == {
        "producer_byte_rate": 1048576.0,
        "request_percentage": 12.5,
    }
    assert format_quota_value("producer_byte_rate", 1048576.0) == "1048576"
    assert format_quota_value("request_percentage", 12.5) == "12.5"


def ent(*pairs: tuple[str, str | None]) -> list[NS]:
    return [NS(entity_type=t, entity_name=n) for t, n in pairs]


def test_wire_entities() -> None:
    assert entity_from_wire(ent(("client-id", "c"))) == QuotaEntity(None, "c")
    assert entity_from_wire(ent(("client-id", "c"), ("user", None))) == QuotaEntity(DEFAULT, "c")
    assert entity_to_wire(QuotaEntity(DEFAULT, "c")) == [("user", None), ("client-id", "c")]


@pytest.mark.parametrize(
    "pairs, says",
    [
        ((), "Invalid empty client quota entity"),
        ((("client-id", "a"), ("client-id", "b")), "duplicate entity entry client-id"),
        ((("group", "g"),), "Unhandled client quota entity type: group"),
        ((("user", ""),), "Empty user not supported"),
        ((("ip", "1.2.3.4"), ("user", "u")), "IP entity should not be combined"),
        ((("ip", "1.2.3.4"),), "not supported by pylog"),
    ],
)
def test_invalid_entities_are_invalid_requests(pairs, says) -> None:
    with pytest.raises(errors.InvalidRequestError, match=says):
        entity_from_wire(ent(*pairs))


def op(key: str, value: float = 0.0, remove: bool = False) -> NS:
    return NS(key=key, value=value, remove=remove)


def test_apply_ops_sets_and_removes() -> None:
    cur = {"producer_byte_rate": 100.0, "consumer_byte_rate": 200.0}
    out = apply_ops(
        cur,
        [
            op("producer_byte_rate", 5.0),
            op("consumer_byte_rate", remove=True),
            op("request_percentage", 0.5),
        ],
    )
    assert out == {"producer_byte_rate": 5.0, "request_percentage": 0.5}
    assert cur == {"producer_byte_rate": 100.0, "consumer_byte_rate": 200.0}  # not changed
    assert apply_ops({}, [op("bogus", remove=True)]) == {}  # removing anything is fine


@pytest.mark.parametrize(
    "ops, says",
    [
        ([op("bogus", 1.0)], "Invalid configuration key bogus"),
        ([op("producer_byte_rate", 0.0)], "must be greater than 0"),
        ([op("request_percentage", -1.0)], "must be greater than 0"),
        ([op("producer_byte_rate", 1.5)], "cannot be a fractional value"),
        ([op("producer_byte_rate", 1.0), op("producer_byte_rate", 2.0)], "Duplicate quota key"),
        ([op("controller_mutation_rate", 1.0)], "not implemented by pylog"),
        ([op("producer_byte_rate", 2.0**64)], "too large for a LONG"),
    ],
)
def test_invalid_alterations_are_invalid_requests(ops, says) -> None:
    with pytest.raises(errors.InvalidRequestError, match=says):
        apply_ops({}, ops)


def comp(etype: str, match_type: int, match: str | None = None) -> NS:
    return NS(entity_type=etype, match_type=match_type, match=match)


ALL = [
    QuotaEntity(None, "c"),
    QuotaEntity(None, DEFAULT),
    QuotaEntity("u", None),
    QuotaEntity(DEFAULT, None),
    QuotaEntity("u", "c"),
    QuotaEntity("u", DEFAULT),
]


@pytest.mark.parametrize(
    "components, strict, expected",
    [
        ([], False, ALL),
        ([], True, []),
        ([comp("client-id", 0, "c")], False, [QuotaEntity(None, "c"), QuotaEntity("u", "c")]),
        ([comp("client-id", 0, "c")], True, [QuotaEntity(None, "c")]),
        ([comp("client-id", 1)], True, [QuotaEntity(None, DEFAULT)]),
        ([comp("client-id", 2)], True, [QuotaEntity(None, "c"), QuotaEntity(None, DEFAULT)]),
        (
            [comp("user", 0, "u"), comp("client-id", 2)],
            True,
            [QuotaEntity("u", "c"), QuotaEntity("u", DEFAULT)],
        ),
        ([comp("user", 1)], False, [QuotaEntity(DEFAULT, None)]),
        ([comp("ip", 2)], False, []),
    ],
)
def test_describe_filters_match_as_kafkas(components, strict, expected) -> None:
    f = DescribeFilter(components, strict)
    assert [e for e in ALL if f.matches(e)] == expected


@pytest.mark.parametrize(
    "components, error, says",
    [
        ([comp("", 2)], errors.InvalidRequestError, "empty entity type"),
        ([comp("user", 2), comp("user", 1)], errors.InvalidRequestError, "more than once"),
        ([comp("topic", 2)], errors.UnsupportedVersionError, "Unsupported entity type topic"),
        ([comp("user", 0)], errors.InvalidRequestError, "MATCH_TYPE_EXACT"),
        ([comp("user", 1, "x")], errors.InvalidRequestError, "MATCH_TYPE_DEFAULT"),
        ([comp("user", 2, "x")], errors.InvalidRequestError, "MATCH_TYPE_SPECIFIED"),
        ([comp("user", 7)], errors.InvalidRequestError, "Unknown match type 7"),
        ([comp("ip", 2), comp("user", 2)], errors.InvalidRequestError, "IP filter component"),
    ],
)
def test_invalid_filters(components, error, says) -> None:
    with pytest.raises(error, match=says):
        DescribeFilter(components, False)
