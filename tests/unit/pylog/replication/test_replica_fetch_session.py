"""The follower's fetch session state machine (``pylog.replication.fetch_session``), sans-IO:
what each request names, and how answers and failures move the session."""

from __future__ import annotations

from pylog import errors
from pylog.protocol.messages import FetchRequest
from pylog.replication.fetch_session import FollowerFetchSession

NOT_FOUND = errors.FetchSessionIdNotFoundError.code
BAD_EPOCH = errors.InvalidFetchSessionEpochError.code


def fp(partition: int, offset: int, epoch: int = 0) -> FetchRequest.FetchPartition:
    return FetchRequest.FetchPartition(partition=partition, current_leader_epoch=epoch, fetch_offset=offset,
                                       last_fetched_epoch=epoch, log_start_offset=0,
                                       partition_max_bytes=1 << 20)


def wanted(**offsets: int) -> dict[tuple[str, int], FetchRequest.FetchPartition]:
    return {("t", int(k[1:])): fp(int(k[1:]), v) for k, v in offsets.items()}


def named(req) -> list[tuple[str, int]]:
    return [key for key, _fp in req.send]


def test_full_then_incremental_names_only_what_changed_and_forgets_what_was_dropped() -> None:
    s = FollowerFetchSession()
    req = s.next_request(wanted(p0=0, p1=0, p2=0))
    assert (req.session_id, req.epoch, req.full) == (0, 0, True)
    assert named(req) == [("t", 0), ("t", 1), ("t", 2)]
    assert s.on_response(0, 77)
    req = s.next_request(wanted(p0=0, p1=0, p2=0))
    assert (req.session_id, req.epoch, req.full, named(req), req.forgotten) == (77, 1, False, [], {})
    assert s.on_response(0, 77)
    req = s.next_request(wanted(p0=5, p1=0))  # p0 moved, p2 no longer fetched
    assert (req.epoch, named(req), req.forgotten) == (2, [("t", 0)], {"t": [2]})
    assert s.on_response(0, 77)
    req = s.next_request(wanted(p0=5, p1=0, p2=3))  # p2 back
    assert (req.epoch, named(req), req.forgotten) == (3, [("t", 2)], {})
    changed = wanted(p0=5, p1=0, p2=3)
    changed[("t", 1)] = fp(1, 0, epoch=4)  # a new leader epoch is a change too
    assert s.on_response(0, 77)
    assert named(s.next_request(changed)) == [("t", 1)]


def test_an_evicted_session_starts_over_with_a_full_fetch_and_a_new_session() -> None:
    s = FollowerFetchSession()
    s.next_request(wanted(p0=0, p1=0))
    s.on_response(0, 77)
    s.next_request(wanted(p0=1, p1=0))
    assert not s.on_response(NOT_FOUND, 0)  # nothing to apply
    req = s.next_request(wanted(p0=1, p1=0))
    assert (req.session_id, req.epoch, req.full, len(req.send)) == (0, 0, True, 2)
    assert s.on_response(0, 91)
    assert (s.session_id, s.epoch) == (91, 1)


def test_a_wrong_epoch_or_a_lost_round_closes_the_session_in_the_next_full_fetch() -> None:
    s = FollowerFetchSession()
    s.next_request(wanted(p0=0))
    s.on_response(0, 77)
    s.next_request(wanted(p0=0))
    assert not s.on_response(BAD_EPOCH, 0)
    req = s.next_request(wanted(p0=0))
    assert (req.session_id, req.epoch, req.full) == (77, 0, True)  # close 77, open another
    assert s.on_response(0, 78)
    s.next_request(wanted(p0=0))
    s.on_failure()  # no answer: the leader may be at either epoch
    req = s.next_request(wanted(p0=0))
    assert (req.session_id, req.epoch, req.full) == (78, 0, True)


def test_a_leader_that_makes_no_session_gets_full_fetches_that_ask_again() -> None:
    s = FollowerFetchSession()
    for _ in range(3):
        req = s.next_request(wanted(p0=0, p1=0))
        assert (req.session_id, req.epoch, req.full, len(req.send)) == (0, 0, True, 2)
        assert s.on_response(0, 0)
    s.on_response(0, 5)
    req = s.next_request(wanted(p0=0, p1=0))
    assert not req.full
    assert s.on_response(0, 0)  # the leader closed it (an incremental answer with id 0)
    assert s.next_request(wanted(p0=0, p1=0)).full


def test_epochs_wrap_to_one() -> None:
    s = FollowerFetchSession()
    s.next_request(wanted(p0=0))
    s.on_response(0, 77)
    s.epoch = 2**31 - 1
    s.next_request(wanted(p0=0))
    s.on_response(0, 77)
    assert s.epoch == 1
