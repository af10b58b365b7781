"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` does it, sans-IO.

Message: ``[authzid] NUL authcid NUL passwd`` (UTF-8), one step, empty answer. Users and
passwords come from the listener's JAAS options ``user_<name>="<password>"``
(``jaas.plain_users``). Passwords are compared with ``hmac.compare_digest``; an unknown
user is compared against a dummy so that both failures take the same time, and both get
Kafka's one sentence, "Authentication failed: Invalid username or password".

Objects are per connection and not thread-safe.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from pylog.security.sasl import SaslAuthenticationError, SaslProtocolError

INVALID = "Authentication failed: Invalid username or password"
MAX_MESSAGE = 8 * 1024


class PlainServer:
    """The server side of one PLAIN exchange.

    Args:
        users: {user name: password} (shared, never modified).
    """

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, response: bytes) -> bytes:
        """Check the one PLAIN message; returns the (empty) final challenge.

        Raises:
            SaslAuthenticationError: wrong or missing credentials.
            SaslProtocolError: not three NUL-separated tokens, or a second message.
        """
        if self.complete:
            raise SaslProtocolError("PLAIN exchange already complete")
        if len(response) > MAX_MESSAGE:
            raise SaslProtocolError("SASL/PLAIN message too long")
        parts = bytes(response).split(b"\x00")
        if len(parts) != 3:
            raise SaslProtocolError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslProtocolError("SASL/PLAIN message is not UTF-8") from None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        ok = hmac.compare_digest((expected if expected is not None else "\x00" * len(password))
                                 .encode("utf-8"), password.encode("utf-8"))
        if expected is None:
            raise SaslAuthenticationError(INVALID, f"unknown user {username!r}")
        if not ok:
            raise SaslAuthenticationError(INVALID, f"user {username!r}: invalid password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username", f"user {username!r} asked for authorization id {authzid!r}")
        self.complete = True
        self.authorization_id = username
        return b""


class PlainClient:
    """The client side: one message."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\x00" + username.encode("utf-8") + b"\x00" + password.encode("utf-8")
        self.complete = False

    def initial(self) -> bytes:
        return self._message

    def evaluate(self, challenge: bytes) -> bytes | None:
        self.complete = True
        return None
