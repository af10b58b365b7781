"""pylog.errors: the Kafka error-code table, its registry, and the exception-to-code map."""

from __future__ import annotations

import pytest

from pylog import errors


def test_every_code_from_unknown_server_error_to_129_is_registered_once() -> None:
    codes = sorted(errors.ERRORS_BY_CODE)
    assert codes == [-1] + list(range(1, 130))
    classes = list(errors.ERRORS_BY_CODE.values())
    assert len(set(classes)) == len(classes)
    for code, cls in errors.ERRORS_BY_CODE.items():
        assert issubclass(cls, errors.ApiError)
        assert cls.code == code
        assert cls.__name__.endswith("Error")
        assert cls.name.isupper()


@pytest.mark.parametrize(
    ("code", "name", "retriable", "invalid_metadata"),
    [
        (-1, "UnknownServerError", False, False),
        (1, "OffsetOutOfRangeError", False, False),
        (2, "CorruptMessageError", True, False),
        (3, "UnknownTopicOrPartitionError", True, True),
        (6, "NotLeaderOrFollowerError", True, True),
        (7, "RequestTimedOutError", True, False),
        (10, "MessageTooLargeError", False, False),
        (17, "InvalidTopicError", False, False),
        (35, "UnsupportedVersionError", False, False),
        (42, "InvalidRequestError", False, False),
        (56, "KafkaStorageError", True, True),
        (74, "FencedLeaderEpochError", True, True),
        (100, "UnknownTopicIdError", True, True),
        (129, "RebootstrapRequiredError", False, False),
    ],
)
def test_known_codes_match_kafka(code: int, name: str, retriable: bool, invalid_metadata: bool) -> None:
    cls = errors.error_for_code(code)
    assert cls is getattr(errors, name)
    assert (cls.code, cls.retriable, cls.invalid_metadata) == (code, retriable, invalid_metadata)


def test_error_for_code_zero_is_none_and_unknown_falls_back() -> None:
    assert errors.error_for_code(0) is None
    assert errors.error_for_code(30000) is errors.UnknownServerError
    assert errors.error_for_code(-2) is errors.UnknownServerError


def test_registry_refuses_a_duplicate_code() -> None:
    with pytest.raises(TypeError, match="already registered"):

        class Duplicate(errors.ApiError):  # noqa: F841
            code = 6

    assert errors.error_for_code(6) is errors.NotLeaderOrFollowerError


def test_intermediate_classes_without_code_are_not_registered() -> None:
    before = dict(errors.ERRORS_BY_CODE)

    class Family(errors.ApiError):
        retriable = True

    assert errors.ERRORS_BY_CODE == before
    assert Family.code == -1


def test_api_error_message_defaults_to_kafka_description() -> None:
    exc = errors.NotLeaderOrFollowerError()
    assert "not the current leader" in str(exc)
    assert str(errors.InvalidRequestError("bad acks")) == "bad acks"
    assert "code=42" in repr(errors.InvalidRequestError("x"))
    assert isinstance(exc, errors.KafkaError)


def test_code_for_exception_api_errors_and_protocol_errors() -> None:
    assert errors.code_for_exception(errors.TopicAlreadyExistsError("t")) == 36
    assert errors.code_for_exception(errors.RemoteProtocolError("x")) == 42
    assert errors.code_for_exception(errors.UnsupportedVersionProtocolError("x")) == 35
    assert errors.code_for_exception(errors.RemoteProtocolError("x", error_code=35)) == 35
    assert errors.code_for_exception(RuntimeError("bug")) == -1
    assert errors.code_for_exception(KeyError("bug")) == -1


def test_code_for_exception_maps_logcore_errors_through_the_mro() -> None:
    from logcore import errors as le

    assert errors.code_for_exception(le.CorruptRecordError("crc", batch_index=0)) == 2
    assert errors.code_for_exception(le.RecordTooLargeError("big")) == 10
    assert errors.code_for_exception(le.OffsetOutOfRangeError("oor")) == 1
    assert errors.code_for_exception(le.InvalidTimestampError("ts")) == 32
    assert errors.code_for_exception(le.LogDirError("eio")) == 56
    assert errors.code_for_exception(le.InvalidConfigError("cfg")) == 40

    class SubCorrupt(le.CorruptRecordError):
        pass

    assert errors.code_for_exception(SubCorrupt("x")) == 2
    # A logcore root error without an entry is not silently mapped to a specific code.
    assert errors.code_for_exception(le.LogcoreError("other")) == -1


def test_protocol_error_family() -> None:
    assert issubclass(errors.FrameTooLargeError, errors.RemoteProtocolError)
    assert issubclass(errors.RemoteProtocolError, errors.ProtocolError)
    assert issubclass(errors.LocalProtocolError, errors.ProtocolError)
    assert not issubclass(errors.LocalProtocolError, errors.RemoteProtocolError)
