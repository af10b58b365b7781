"""pylog's asyncio Kafka client: the core under the blocking ``pylog.client`` classes.

``Producer`` (``await send()`` returns a future of ``RecordMetadata``), ``Consumer``
(``await poll()``), ``Admin``. Each object belongs to the event loop it is used on.
"""

from pylog.client.aio.admin import Admin
from pylog.client.aio.consumer import Consumer
from pylog.client.aio.producer import Producer
from pylog.client.aio.share_consumer import ShareConsumer

__all__ = ["Admin", "Consumer", "Producer", "ShareConsumer"]
