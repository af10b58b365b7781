"""The broker's SASL state machine for one connection (Kafka's ``SaslServerAuthenticator``).

Sans-IO: the connection (``pylog.broker.sasl_net``) asks it whether a request may be handled
(``admits``) and hands it the SASL requests' contents; it answers what to send and whether
to close. One table of transitions, one ``_set_state``::

    HANDSHAKE     --handshake v1 ok------> AUTHENTICATE  (SaslAuthenticate requests)
    HANDSHAKE     --handshake v0 ok------> RAW           (tokens framed without a header)
    AUTHENTICATE  --token, more to do----> AUTHENTICATE
    AUTHENTICATE  --token, done----------> COMPLETE
    RAW           --token, more to do----> RAW
    RAW           --token, done----------> COMPLETE
    COMPLETE      --handshake (v1)-------> REAUTH        (KIP-368: same mechanism only)
    REAUTH        --token, more to do----> REAUTH
    REAUTH        --token, done----------> COMPLETE      (same principal only)
    any           --fail-----------------> FAILED        (answer, then close)

Before COMPLETE a connection may send ApiVersions, SaslHandshake and SaslAuthenticate
only; anything else closes it. Once the session has expired (``connections.max.reauth.ms``,
or the OAUTHBEARER token's expiry when sooner), only a re-authentication (SaslHandshake) is
admitted; any other request closes the connection (Kafka's "expired session").

Messages the client sees are the mechanisms' fixed sentences; the reasons (naming the user)
go to the broker's log only. Not thread-safe: owned by one connection on the broker's loop.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

from pylog import errors
from pylog.security.sasl import SaslAuthenticationError, SaslProtocolError

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
#: The requests a connection may send before it is authenticated.
PRE_AUTH_APIS = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


class State(enum.Enum):
    HANDSHAKE = "HANDSHAKE"
    AUTHENTICATE = "AUTHENTICATE"
    RAW = "RAW"
    COMPLETE = "COMPLETE"
    REAUTH = "REAUTH"
    FAILED = "FAILED"


_T = State
_TRANSITIONS = {
    (_T.HANDSHAKE, "handshake"): _T.AUTHENTICATE,
    (_T.HANDSHAKE, "handshake_v0"): _T.RAW,
    (_T.AUTHENTICATE, "done"): _T.COMPLETE,
    (_T.RAW, "done"): _T.COMPLETE,
    (_T.COMPLETE, "handshake"): _T.REAUTH,
    (_T.REAUTH, "done"): _T.COMPLETE,
}


class Outcome:
    """What to answer a SASL token: ``token`` (the challenge), ``error_code`` and
    ``error_message`` (0 and None when all is well), ``session_lifetime_ms``."""

    __slots__ = ("token", "error_code", "error_message", "session_lifetime_ms")

    def __init__(self, token: bytes = b"", error_code: int = 0, error_message: str | None = None,
                 session_lifetime_ms: int = 0) -> None:
        self.token = token
        self.error_code = error_code
        self.error_message = error_message
        self.session_lifetime_ms = session_lifetime_ms


class SaslServerAuthenticator:
    """One connection's SASL state (see the module docstring).

    Args:
        mechanisms: {mechanism: factory of a server for one exchange}, the listener's
            ``sasl.enabled.mechanisms`` in order.
        max_reauth_ms: ``connections.max.reauth.ms`` (0: sessions do not expire).
        now_ms: the broker clock's wall time in ms.
        log: ``log(message)`` for failures (the connection adds the peer).

    Attributes:
        principal: ``User:<name>`` once authenticated, else None.
        mechanism: the mechanism of the current session or exchange.
        failure: the reason for the log once FAILED.
    """

    def __init__(self, mechanisms: Mapping[str, Callable[[], Any]], max_reauth_ms: int,
                 now_ms: Callable[[], int]) -> None:
        self._factories = mechanisms
        self._max_reauth_ms = max_reauth_ms
        self._now_ms = now_ms
        self.state = State.HANDSHAKE
        self.principal: str | None = None
        self.mechanism: str | None = None
        self._server: Any = None
        self._expires_ms = 0  # 0: never
        self.failure: str | None = None
        self.reauthentications = 0

    # --- queries ------------------------------------------------------------------------

    @property
    def authenticated(self) -> bool:
        return self.principal is not None and self.state is not State.FAILED

    @property
    def raw(self) -> bool:
        """Tokens arrive framed without a Kafka header (after a v0 handshake)."""
        return self.state is State.RAW

    @property
    def failed(self) -> bool:
        return self.state is State.FAILED

    def admits(self, api_key: int) -> str | None:
        """None when a request of ``api_key`` may be handled now, else why the connection
        must be closed instead."""
        state = self.state
        if state is State.COMPLETE or state is State.REAUTH:
            if self._expires_ms and api_key != SASL_HANDSHAKE and state is State.COMPLETE \
                    and self._now_ms() >= self._expires_ms:
                return (f"the session of {self.principal} expired (connections.max.reauth.ms) "
                        "and the client did not re-authenticate")
            return None
        if state is State.FAILED:
            return "authentication failed"
        if api_key not in PRE_AUTH_APIS:
            return (f"unexpected request (API key {api_key}) before SASL authentication "
                    f"completed (state {state.value})")
        if state is State.RAW:
            return "a Kafka request after a v0 SaslHandshake (tokens expected)"
        return None

    def _set_state(self, trigger: str) -> None:
        nxt = _TRANSITIONS.get((self.state, trigger))
        if nxt is None:
            raise errors.IllegalSaslStateError(
                f"unexpected SASL {trigger} in state {self.state.value}")
        self.state = nxt

    def _fail(self, reason: str) -> None:
        self.state = State.FAILED
        self.failure = reason
        self._server = None

    # --- SaslHandshake ------------------------------------------------------------------

    def on_handshake(self, version: int, mechanism: str) -> tuple[int, list[str]]:
        """(error code, enabled mechanisms) for a SaslHandshake request."""
        enabled = list(self._factories)
        if self.state is State.COMPLETE:
            if version < 1:
                self._fail("re-authentication needs SaslHandshake v1 or later")
                return errors.IllegalSaslStateError.code, enabled
            if mechanism != self.mechanism:
                self._fail(f"re-authentication with mechanism {mechanism!r} instead of "
                           f"{self.mechanism!r}")
                return errors.UnsupportedSaslMechanismError.code, enabled
            self._server = self._factories[mechanism]()
            self._set_state("handshake")
            return 0, enabled
        if self.state is not State.HANDSHAKE:
            self._fail(f"SaslHandshake in state {self.state.value}")
            return errors.IllegalSaslStateError.code, enabled
        factory = self._factories.get(mechanism)
        if factory is None:
            self._fail(f"unsupported SASL mechanism {mechanism!r} (enabled: {', '.join(enabled)})")
            return errors.UnsupportedSaslMechanismError.code, enabled
        self.mechanism = mechanism
        self._server = factory()
        self._set_state("handshake" if version >= 1 else "handshake_v0")
        return 0, enabled

    # --- SaslAuthenticate (or a raw token) --------------------------------------------------

    def on_token(self, token: bytes, *, raw: bool = False) -> Outcome:
        """Evaluate one client token (a SaslAuthenticate's ``auth_bytes`` or, after a v0
        handshake, a raw frame). On failure the state is FAILED: answer, then close."""
        expected = State.RAW if raw else None
        if (raw and self.state is not expected) or \
                (not raw and self.state not in (State.AUTHENTICATE, State.REAUTH)):
            self._fail(f"SaslAuthenticate in state {self.state.value}")
            return Outcome(error_code=errors.IllegalSaslStateError.code,
                           error_message=f"Unexpected SaslAuthenticate in state {self.state.value}")
        server = self._server
        try:
            challenge = server.evaluate(bytes(token))
        except SaslAuthenticationError as exc:
            self._fail(f"{self.mechanism}: {exc.reason}")
            return Outcome(error_code=errors.SaslAuthenticationFailedError.code,
                           error_message=str(exc))
        except SaslProtocolError as exc:
            self._fail(f"{self.mechanism}: malformed exchange: {exc}")
            return Outcome(error_code=errors.SaslAuthenticationFailedError.code,
                           error_message="Authentication failed during authentication due to "
                           f"invalid credentials with SASL mechanism {self.mechanism}")
        if not server.complete:
            return Outcome(challenge)
        principal = f"User:{server.authorization_id}"
        if self.state is State.REAUTH and principal != self.principal:
            self._fail(f"re-authentication as {principal} on a connection of {self.principal}")
            return Outcome(error_code=errors.SaslAuthenticationFailedError.code,
                           error_message=f"Cannot change principals during re-authentication "
                           f"from {self.principal}: {principal}")
        if self.state is State.REAUTH:
            self.reauthentications += 1
        self._set_state("done")
        self.principal = principal
        self._server = None
        lifetime = self._session_lifetime(getattr(server, "lifetime_ms", None))
        return Outcome(challenge, session_lifetime_ms=lifetime)

    def _session_lifetime(self, credential_expiry_ms: int | None) -> int:
        """KIP-368: with ``connections.max.reauth.ms`` > 0 the session lasts that long, or
        until the credential (an OAUTHBEARER token) expires when sooner; 0: no expiry."""
        if self._max_reauth_ms <= 0:
            self._expires_ms = 0
            return 0
        now = self._now_ms()
        lifetime = self._max_reauth_ms
        if credential_expiry_ms is not None:
            lifetime = max(0, min(lifetime, credential_expiry_ms - now))
        self._expires_ms = now + lifetime
        return lifetime
