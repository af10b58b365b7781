"""The group coordinator (Kafka's classic consumer-group protocol).

- ``records``: key/value framing of ``__consumer_offsets`` records in Kafka's format.
- ``classic``: one classic group's members and states (the state table).
- ``coordinator``: ``GroupCoordinator``, the sans-IO state machine every group API calls;
  it takes an injected clock, returns results or pending handles, and emits records for the
  caller to append. No sockets, no asyncio, no files here.
"""
