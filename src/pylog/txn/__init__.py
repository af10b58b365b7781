"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction``).

``coordinator`` is the sans-IO state machine (``TransactionCoordinator``), ``metadata`` one
transactional id's states and transitions, ``records`` the ``__transaction_state`` formats,
``service`` the asyncio glue the broker runs (``broker.txns``). See docs/transactions.md.
"""
