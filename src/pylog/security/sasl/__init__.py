"""SASL (RFC 4422) for Kafka listeners and clients, sans-IO.

Kafka's mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677)
and OAUTHBEARER (RFC 7628). GSSAPI (Kerberos) is not offered.

- ``jaas``: Kafka's ``sasl.jaas.config`` syntax, parsed.
- ``plain``, ``scram``, ``oauthbearer``: one server and one client per mechanism. A server is
  ``evaluate(bytes) -> bytes`` until ``complete``; it raises ``SaslAuthenticationError`` with
  the one sentence the client is told (never whether the user exists).
- ``credentials``: SCRAM credentials (salt, stored key, server key, iterations; never a
  password) in the data directory or in ZooKeeper (``/config/users/<user>``).
- ``authenticator``: the broker's per-connection state machine (Kafka's
  ``SaslServerAuthenticator``): which requests a connection may send before it is
  authenticated, handshake, exchange, re-authentication (KIP-368).
- ``listener``: what a listener's configuration makes of all that.
- ``client``: the requesting side's settings (``sasl.mechanism``, ``sasl.username``, ...).
"""

from __future__ import annotations

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
GSSAPI = "GSSAPI"
#: The mechanisms pylog serves, in Kafka's spelling.
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)
#: The SASL security protocols of listeners.
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class SaslAuthenticationError(Exception):
    """The client failed to authenticate. ``str(exc)`` is what the client is told (one fixed
    sentence per kind of failure); ``reason`` is what the broker logs (may name the user)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


class SaslProtocolError(Exception):
    """The client broke the SASL exchange (a malformed message, a step out of order)."""
