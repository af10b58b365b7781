"""The requesting side of the Kafka protocol over TCP, for brokers and clients alike:
``connection.BrokerConnection`` (one connection, version negotiation, pipelined requests),
``channel.BrokerChannel`` (ordered, retried requests to one broker) and their errors. Below
``pylog.replication``, ``pylog.controller``, ``pylog.broker`` and ``pylog.client``; above
``pylog.protocol`` (the sans-IO codec it drives). The broker's listening side is
``pylog.broker.net``."""
