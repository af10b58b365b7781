"""Cluster mode foundations: the rules and the ZooKeeper store of replication.

What is here, and what each module decides (docs/replication.md has the design):

- ``zk_data``: Kafka's ZooKeeper-mode znode paths and their JSON payloads, encoded as Kafka
  writes them and decoded strictly (a malformed payload raises ``ZkDataError`` naming the path).
- ``zk_store``: a thin, blocking ``kazoo``-backed store with the operations the controller and
  the brokers use (broker registration, topic assignment, conditional partition-state
  updates, controller election with epoch fencing, producer-id blocks, cluster id).
- ``election``: the controller's leader election algorithms and leader/ISR transitions
  (sans-IO, pure functions).
- ``assignment``: replica assignment on topic creation (rack-unaware and rack-aware).
- ``isr``: the leader-side high watermark, ISR shrink/expand and acks=all rules (sans-IO,
  injected time).

Cluster mode is built on these pieces: the controller (``pylog.controller``) elects,
assigns and persists through them, the replica manager (``pylog.replication``) runs
``isr.PartitionLeader`` for every partition this broker leads. A broker without
``zookeeper.connect`` is a single node and never touches them. Importing ``pylog.cluster``
does not import ``kazoo``; only ``pylog.cluster.zk_store`` does (``pip install
pylog-kafka[cluster]``).
"""


class MissingKazooError(ImportError):
    """Cluster mode (``zookeeper.connect``) was asked for, but ``kazoo`` cannot be imported.

    The message is one line naming the install command; ``pylog broker`` prints it and exits 1.
    """
