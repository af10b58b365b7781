"""pylog.testing.faults: Kafka's API and error names, and what a wrong one says."""

from __future__ import annotations

import pytest

from pylog import errors
from pylog.testing.faults import api_names, error_names, resolve_api, resolve_error


@pytest.mark.parametrize("given", ["Produce", "PRODUCE", "produce", 0])
def test_api_names_in_any_spelling(given: object) -> None:
    assert resolve_api(given) == 0  # type: ignore[arg-type]


def test_api_names_with_underscores() -> None:
    assert resolve_api("JOIN_GROUP") == resolve_api("JoinGroup") == 11
    assert resolve_api("end_txn") == 26


def test_unknown_api_lists_the_valid_names_and_the_closest() -> None:
    with pytest.raises(ValueError) as info:
        resolve_api("Produse")
    message = str(info.value)
    assert "did you mean 'Produce'?" in message
    assert "Fetch" in message and "JoinGroup" in message
    with pytest.raises(ValueError, match="unknown API 999"):
        resolve_api(999)


def test_only_apis_the_broker_serves_are_named() -> None:
    names = api_names()
    assert names["Produce"] == 0 and names["InitProducerId"] == 22
    assert names["SaslHandshake"] == 17
    assert names["DescribeAcls"] == 29
    assert "DescribeDelegationToken" not in names  # not served: a fault on it would never fire


def test_error_names_classes_and_codes() -> None:
    assert resolve_error("NOT_LEADER_OR_FOLLOWER") is errors.NotLeaderOrFollowerError
    assert resolve_error("not_leader_or_follower") is errors.NotLeaderOrFollowerError
    assert resolve_error("NotLeaderOrFollowerError") is errors.NotLeaderOrFollowerError
    assert resolve_error(6) is errors.NotLeaderOrFollowerError
    assert resolve_error(errors.CoordinatorNotAvailableError) is errors.CoordinatorNotAvailableError
    assert "NONE" not in error_names()


def test_unknown_error_says_which_names_are_valid() -> None:
    with pytest.raises(ValueError) as info:
        resolve_error("NOT_LEADER_FOR_PARTITION")
    message = str(info.value)
    assert "did you mean 'NOT_LEADER_OR_FOLLOWER'?" in message
    assert "REQUEST_TIMED_OUT" in message
    with pytest.raises(ValueError, match="unknown error code 0"):
        resolve_error(0)
