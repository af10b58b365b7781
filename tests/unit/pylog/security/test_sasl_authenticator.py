"""The broker's SASL state machine with PLAIN and OAUTHBEARER servers, sans-IO: which
requests are admitted when, v0 and v1 handshakes, failures, KIP-368 session expiry and
re-authentication (same mechanism and principal only); and the OAUTHBEARER validators."""

from __future__ import annotations

import json

import pytest

from pylog import errors
from pylog.security.sasl.authenticator import SaslServerAuthenticator, State
from pylog.security.sasl.oauthbearer import (
    OAuthBearerClient,
    OAuthBearerServer,
    TokenError,
    UnsecuredValidator,
    parse_client_message,
    unsecured_token,
)
from pylog.security.sasl.plain import INVALID, PlainServer

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
NOW = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.ms = NOW

    def __call__(self) -> int:
        return self.ms


def _auth(max_reauth_ms: int = 0, clock: Clock | None = None) -> SaslServerAuthenticator:
    clock = clock or Clock()
    validator = UnsecuredValidator({})
    return SaslServerAuthenticator({"PLAIN": lambda: PlainServer(USERS),
                                    "OAUTHBEARER": lambda: OAuthBearerServer(validator, clock)},
                                   max_reauth_ms, clock)


def test_only_versions_and_sasl_before_authentication() -> None:
    a = _auth()
    assert a.admits(18) is None and a.admits(17) is None and a.admits(36) is None
    assert "before SASL authentication" in (a.admits(0) or "")
    assert a.on_handshake(1, "PLAIN") == (0, ["PLAIN", "OAUTHBEARER"])
    assert a.admits(3) is not None
    out = a.on_token(b"\x00alice\x00alice-secret")
    assert out.error_code == 0 and a.authenticated and a.principal == "User:alice"
    assert a.admits(0) is None and out.session_lifetime_ms == 0


@pytest.mark.parametrize("token", [b"\x00alice\x00wrong", b"\x00mallory\x00alice-secret"])
def test_wrong_password_and_unknown_user_look_the_same(token: bytes) -> None:
    a = _auth()
    a.on_handshake(1, "PLAIN")
    out = a.on_token(token)
    assert out.error_code == errors.SaslAuthenticationFailedError.code
    assert out.error_message == INVALID == "Authentication failed: Invalid username or password"
    assert a.failed and a.admits(18) is not None and "PLAIN" in (a.failure or "")


def test_unsupported_mechanism_and_bad_order() -> None:
    a = _auth()
    assert a.on_handshake(1, "GSSAPI")[0] == errors.UnsupportedSaslMechanismError.code
    assert a.failed
    b = _auth()
    out = b.on_token(b"\x00alice\x00alice-secret")  # no handshake first
    assert out.error_code == errors.IllegalSaslStateError.code and b.failed
    c = _auth()
    c.on_handshake(1, "PLAIN")
    assert c.on_token(b"garbage").error_code == errors.SaslAuthenticationFailedError.code


def test_v0_handshake_switches_to_raw_tokens() -> None:
    a = _auth()
    assert a.on_handshake(0, "PLAIN")[0] == 0 and a.raw
    assert a.admits(36) is not None  # Kafka requests are not expected now
    assert a.on_token(b"\x00bob\x00bob-secret", raw=True).error_code == 0
    assert a.state is State.COMPLETE and not a.raw


def test_session_expiry_and_reauthentication() -> None:
    clock = Clock()
    a = _auth(max_reauth_ms=10_000, clock=clock)
    a.on_handshake(1, "PLAIN")
    assert a.on_token(b"\x00alice\x00alice-secret").session_lifetime_ms == 10_000
    clock.ms += 10_000
    assert "expired" in (a.admits(0) or "")
    assert a.admits(17) is None  # a re-authentication may start
    assert a.on_handshake(1, "PLAIN")[0] == 0 and a.admits(0) is None
    assert a.on_token(b"\x00alice\x00alice-secret").session_lifetime_ms == 10_000
    assert a.reauthentications == 1 and a.admits(0) is None
    # Another principal, or another mechanism, fails the connection.
    a.on_handshake(1, "PLAIN")
    out = a.on_token(b"\x00bob\x00bob-secret")
    assert out.error_code == errors.SaslAuthenticationFailedError.code and "principals" in (out.error_message or "")
    b = _auth(max_reauth_ms=10_000)
    b.on_handshake(1, "PLAIN")
    b.on_token(b"\x00alice\x00alice-secret")
    assert b.on_handshake(1, "OAUTHBEARER")[0] == errors.UnsupportedSaslMechanismError.code


def test_oauthbearer_token_bounds_the_session() -> None:
    clock = Clock()
    a = _auth(max_reauth_ms=3_600_000, clock=clock)
    a.on_handshake(1, "OAUTHBEARER")
    token = unsecured_token("carol", 60, now_s=NOW / 1000)
    out = a.on_token(OAuthBearerClient(token).initial())
    assert out.error_code == 0 and a.principal == "User:carol"
    assert out.session_lifetime_ms == 60_000


def test_oauthbearer_invalid_token_json_then_failure() -> None:
    clock = Clock()
    a = _auth(clock=clock)
    a.on_handshake(1, "OAUTHBEARER")
    expired = unsecured_token("carol", 60, now_s=NOW / 1000 - 120)
    out = a.on_token(OAuthBearerClient(expired).initial())
    assert out.error_code == 0 and json.loads(out.token) == {"status": "invalid_token"}
    out = a.on_token(b"\x01")
    assert out.error_code == errors.SaslAuthenticationFailedError.code and a.failed


def test_unsecured_validator_options() -> None:
    v = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "user",
                            "unsecuredValidatorRequiredScope": "read write",
                            "unsecuredValidatorAllowableClockSkewMs": "5000"})
    ok = unsecured_token("dave", 60, principal_claim="user", scope=["read", "write"], now_s=NOW / 1000)
    assert v.validate(ok, NOW).principal == "dave"
    few = unsecured_token("dave", 60, principal_claim="user", scope=["read"], now_s=NOW / 1000)
    with pytest.raises(TokenError) as info:
        v.validate(few, NOW)
    assert info.value.status == "insufficient_scope" and info.value.scope == "read write"
    # Within the allowed skew an expired token is still fine.
    late = unsecured_token("dave", 1, principal_claim="user", scope=["read", "write"], now_s=NOW / 1000 - 3)
    assert v.validate(late, NOW).principal == "dave"
    for bad in ("a.b", "e30.e30.sig", unsecured_token("x", 60, now_s=NOW / 1000) + "sig"):
        with pytest.raises(TokenError):
            UnsecuredValidator({}).validate(bad, NOW)
    with pytest.raises(ValueError):
        UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "soon"})


def test_oauthbearer_client_message_parsing() -> None:
    msg = b"n,a=carol,\x01auth=Bearer abc.def.\x01ext=v\x01\x01"
    assert parse_client_message(msg) == ("carol", "abc.def.", {"ext": "v"})
    from pylog.security.sasl import SaslProtocolError
    for bad in (b"", b"n,,auth=Bearer x\x01\x01", b"n,,\x01auth=Basic x\x01\x01", b"x,,\x01\x01"):
        with pytest.raises(SaslProtocolError):
            parse_client_message(bad)
