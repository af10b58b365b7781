"""The failures of a connection to a broker: it could not be reached, broke, or did not
answer in time (Kafka's ``NetworkException`` / ``TimeoutException``). Defined here, below
both the broker and the client, because both open such connections; ``pylog.client.errors``
re-exports them as part of the client's public errors."""

from __future__ import annotations

from pylog.errors import KafkaError

__all__ = ["KafkaAuthenticationError", "KafkaConnectionError", "KafkaTimeoutError"]


class KafkaTimeoutError(KafkaError, TimeoutError):
    """Something did not finish within its bound (``max.block.ms``, ``delivery.timeout.ms``,
    ``request.timeout.ms`` or a call's timeout): Kafka's ``TimeoutException``."""


class KafkaConnectionError(KafkaError, ConnectionError):
    """A broker could not be reached or dropped the connection (retriable)."""

    retriable = True
    invalid_metadata = True


class KafkaAuthenticationError(KafkaConnectionError):
    """SASL authentication with a broker failed (Kafka's ``SaslAuthenticationException``):
    the connection is closed; the message is the broker's. Not retriable: the same
    credentials will fail again."""

    retriable = False
