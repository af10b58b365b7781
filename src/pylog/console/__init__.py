"""pylog console: a web console for any Kafka-compatible cluster (docs/console.md).

``pylog console -b HOST:PORT`` serves it; ``create_app(ConsoleConfig(...))`` is the ASGI
app. It sits on ``pylog.client`` (the admin client, a consumer and a producer) and speaks
only the Kafka protocol, plus a broker's ``/metrics`` when given.
"""

from pylog.console.app import ConsoleConfig, create_app

__all__ = ["ConsoleConfig", "create_app"]
