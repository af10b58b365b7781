#!/usr/bin/env python3
"""Generate ``docs/configuration.md`` from the config table in ``src/pylog/config/definitions.py``.

Usage::

    python tools/generate_config_docs.py            # rewrite docs/configuration.md
    python tools/generate_config_docs.py --check    # exit 1 if the committed file is stale

Names, types, defaults, broker synonyms and the one-line meanings come from
``BROKER_CONFIG_DEFS`` and ``TOPIC_CONFIG_DEFS``; the topic defaults are those a broker
started with no settings computes (``BrokerConfig().topic_default``). What pylog does with
each key is not in the table, so it lives here in ``PYLOG_NOTES``: a key in the table
without a note makes the generator fail naming it, and ``tests/unit/test_docs.py``
regenerates the file and diffs it, so CI catches a new key and a stale file. A note for a
key the table does not have is not rendered (keys come and go on parallel branches). When
a key changes what pylog does with it, change its note here and rerun the script.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "configuration.md"
GENERATOR = "tools/generate_config_docs.py"

if importlib.util.find_spec("pylog") is None:  # run from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))

from pylog import config as _config  # noqa: E402

LONG_MAX = 2**63 - 1

# What pylog does with each key. "Honoured" means it works as in Kafka; anything else says
# how it differs. Keep each to one sentence or two: the table is read on a screen.
_CLEANER = ("Honoured by the log cleaner on compacted topics (no effect on delete-policy topics, "
            "as in Kafka); see [compaction.md](compaction.md).")
_CLEANER_THREADS = "Honoured by the log cleaner threads; see [compaction.md](compaction.md)."
_DEPRECATED = "Deprecated in Kafka 3.x, removed in 4.0: accepted with a logged warning and ignored"
_TXN = "Single node: accepted and validated, has no effect (one replica)."
_SSL = "Honoured, also per listener as `listener.name.<listener>.<key>`."
PYLOG_NOTES: dict[str, str] = {
    # broker
    "node.id": "Honoured: the broker's id in Metadata and in `meta.properties`.",
    "broker.id": "Honoured as the legacy name of `node.id` (used when `node.id` is not set).",
    "listeners": "Honoured: named listeners (`PLAINTEXT://:9092,SSL://:9093,INTERNAL://...`), "
                 "PLAINTEXT and SSL; SASL_PLAINTEXT and SASL_SSL are refused (SASL is not built "
                 "yet). Port 0 picks a free port. See [security.md](security.md).",
    "advertised.listeners": "Honoured per listener name (a subset of `listeners`); defaults to "
                            "the bound listeners. Clients are given the addresses of the "
                            "listener they connected to.",
    "listener.security.protocol.map": "Honoured: every listener name must map to a protocol.",
    "inter.broker.listener.name": "Honoured in cluster mode: follower fetches, the "
                                  "controller's requests and transaction markers use it (with "
                                  "its `ssl.*` settings for TLS); see [security.md](security.md).",
    "security.inter.broker.protocol": "Honoured as Kafka: the listener named like the "
                                      "protocol; exclusive with `inter.broker.listener.name`.",
    "ssl.protocol": _SSL + " TLSv1.2 caps the version at 1.2; TLSv1.3 and TLS do not cap.",
    "ssl.enabled.protocols": _SSL + " Sets the minimum and maximum TLS version.",
    "ssl.cipher.suites": _SSL + " Narrows TLS 1.2 suites (IANA or OpenSSL names); TLS 1.3 "
                         "suites stay OpenSSL's (Python's `ssl` cannot narrow them).",
    "ssl.keystore.type": _SSL + " PEM and PKCS12 (PKCS12 needs `cryptography`); JKS is "
                         "refused with the `keytool` command that converts it.",
    "ssl.keystore.location": _SSL + " PEM: key and certificate chain in one file.",
    "ssl.keystore.password": _SSL + " PKCS12 only (refused with PEM, as Kafka).",
    "ssl.key.password": _SSL + " Decrypts an encrypted PEM key.",
    "ssl.keystore.certificate.chain": _SSL + " KIP-651 PEM text.",
    "ssl.keystore.key": _SSL + " KIP-651 PEM text.",
    "ssl.truststore.type": _SSL + " PEM and PKCS12.",
    "ssl.truststore.location": _SSL + " Unset: the system's CAs.",
    "ssl.truststore.password": _SSL + " PKCS12 only.",
    "ssl.truststore.certificates": _SSL + " KIP-651 PEM text.",
    "ssl.client.auth": _SSL + " none, requested, required; the principal is `User:` + the "
                       "mapped certificate subject, else `User:ANONYMOUS`.",
    "ssl.endpoint.identification.algorithm": _SSL + " Applies to the broker's inter-broker "
                                             "connections (https: host name checked).",
    "sasl.enabled.mechanisms": "Honoured per SASL listener: PLAIN, SCRAM-SHA-256, "
                               "SCRAM-SHA-512, OAUTHBEARER; GSSAPI (the default) is refused at "
                               "start. See [security.md](security.md).",
    "sasl.mechanism.inter.broker.protocol": "Honoured: brokers authenticate to each other with "
                                            "it, using the inter-broker listener's JAAS "
                                            "username and password.",
    "sasl.jaas.config": "Honoured, usually as `listener.name.<l>.<mechanism>.sasl.jaas.config`: "
                        "PlainLoginModule users, the broker's own credentials, OAUTHBEARER's "
                        "unsecured validator options.",
    "sasl.server.callback.handler.class": "Only Kafka's OAuthBearerValidatorCallbackHandler "
                                          "(JWKS validation) is accepted.",
    "connections.max.reauth.ms": "Honoured (KIP-368): expired sessions must re-authenticate.",
    "connection.failed.authentication.delay.ms": "Honoured: a failed login is answered this "
                                                 "late, then the connection is closed.",
    "sasl.server.max.receive.size": "Honoured: larger frames before authentication close the "
                                    "connection.",
    "sasl.oauthbearer.jwks.endpoint.url": "Honoured: `file:` or http(s) URL of the JWKS.",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "Honoured.",
    "sasl.oauthbearer.expected.issuer": "Honoured (JWKS validation).",
    "sasl.oauthbearer.expected.audience": "Honoured (JWKS validation).",
    "sasl.oauthbearer.sub.claim.name": "Honoured (JWKS validation).",
    "sasl.oauthbearer.scope.claim.name": "Honoured (JWKS validation).",
    "sasl.oauthbearer.clock.skew.seconds": "Honoured (JWKS validation).",
    "ssl.principal.mapping.rules": _SSL + " Kafka's `RULE:pattern/replacement/[LU]` and "
                                   "`DEFAULT` syntax, first match wins.",
    "authorizer.class.name": "Honoured: Kafka's `kafka.security.authorizer.AclAuthorizer` and "
                             "`org.apache.kafka.metadata.authorizer.StandardAuthorizer` (and "
                             "`pylog.security.AclAuthorizer`) switch on pylog's ACL authorizer; "
                             "any other class is refused at start. See "
                             "[security.md](security.md#authorization).",
    "super.users": "Honoured (semicolon-separated principals).",
    "allow.everyone.if.no.acl.found": "Honoured.",
    "metrics.listener": "pylog's own (Kafka exposes JMX; this serves what Prometheus's JMX "
                        "exporter makes of it): `/metrics`, `/healthz`, `/readyz` over HTTP on "
                        "the broker's event loop; see [metrics.md](metrics.md).",
    "log.dirs": "Honoured; exactly one directory (JBOD is not supported).",
    "log.dir": "Honoured when `log.dirs` is not set.",
    "num.partitions": "Honoured (CreateTopics with -1 partitions and auto-created topics).",
    "default.replication.factor": "Single node: must be 1 (refused otherwise); cluster mode (zookeeper.connect): the replication factor of topics created without one.",
    "zookeeper.connect": "Unset: a single-node broker. Set: cluster mode (ZooKeeper registration, controller election; docs/replication.md).",
    "zookeeper.session.timeout.ms": "As Kafka: a broker whose session expires is declared dead and its leaderships move.",
    "zookeeper.connection.timeout.ms": "As Kafka: how long start waits for ZooKeeper (unset: the session timeout).",
    "broker.rack": "As Kafka: rack-aware replica assignment when every broker sets it.",
    "auto.leader.rebalance.enable": "Cluster mode: as Kafka (the controller's automatic preferred leader elections).",
    "leader.imbalance.check.interval.seconds": "Cluster mode: as Kafka (the controller's automatic preferred leader elections).",
    "leader.imbalance.per.broker.percentage": "Cluster mode: as Kafka (the controller's automatic preferred leader elections).",
    "controlled.shutdown.enable": "Cluster mode: SIGTERM asks the controller to move this broker's leaderships first.",
    "controlled.shutdown.max.retries": "Cluster mode: as Kafka.",
    "controlled.shutdown.retry.backoff.ms": "Cluster mode: as Kafka.",
    "auto.create.topics.enable": "Honoured (Metadata and Produce of an unknown topic create it).",
    "delete.topic.enable": "Honoured: DeleteTopics is refused when false.",
    "message.max.bytes": "Honoured through the topic config `max.message.bytes`.",
    "log.segment.bytes": "Honoured through `segment.bytes`.",
    "log.roll.ms": "Honoured through `segment.ms` (wins over `log.roll.hours`).",
    "log.roll.hours": "Honoured through `segment.ms`.",
    "log.roll.jitter.ms": "Honoured through `segment.jitter.ms`.",
    "log.roll.jitter.hours": "Honoured through `segment.jitter.ms`.",
    "log.index.size.max.bytes": "Honoured through `segment.index.bytes`.",
    "log.index.interval.bytes": "Honoured through `index.interval.bytes`.",
    "log.retention.ms": "Honoured through `retention.ms` (wins over minutes and hours).",
    "log.retention.minutes": "Honoured through `retention.ms`.",
    "log.retention.hours": "Honoured through `retention.ms`.",
    "log.retention.bytes": "Honoured through `retention.bytes`.",
    "log.retention.check.interval.ms": "Honoured: how often the retention task runs.",
    "log.segment.delete.delay.ms": "Honoured through `file.delete.delay.ms`.",
    "log.flush.interval.messages": "Honoured through `flush.messages`.",
    "log.flush.interval.ms": "Honoured through `flush.ms`.",
    "log.flush.scheduler.interval.ms": "Honoured: how often the flush scheduler checks "
    "`flush.ms` (idle partitions too), and the fallback of `flush.ms` when "
    "`log.flush.interval.ms` is not set.",
    "log.flush.offset.checkpoint.interval.ms": "Honoured: recovery points are checkpointed this "
    "often, which bounds what recovery rescans after a crash.",
    "log.flush.start.offset.checkpoint.interval.ms": "Honoured: log start offsets are "
    "checkpointed this often.",
    "background.threads": "Honoured: threads for background segment flushes and checkpoints.",
    "log.cleanup.policy": "Honoured through `cleanup.policy`.",
    "log.message.format.version": _DEPRECATED + " (records are always written in format v2).",
    "log.message.downconversion.enable": _DEPRECATED + ".",
    "log.message.timestamp.type": "Honoured through `message.timestamp.type`.",
    "log.message.timestamp.before.max.ms": "Honoured through `message.timestamp.before.max.ms`.",
    "log.message.timestamp.after.max.ms": "Honoured through `message.timestamp.after.max.ms`.",
    "log.preallocate": "Through `preallocate` (not honoured yet: see there).",
    "log.cleaner.enable": "Honoured: the LogManager starts the cleaner threads at start and "
    "stops them at shutdown; with false, compacted topics (`__consumer_offsets` too) grow "
    "without bound, as in Kafka.",
    "log.cleaner.threads": _CLEANER_THREADS + " 0 is refused unless `log.cleaner.enable=false` "
    "(Kafka fails its start dividing by it).",
    "log.cleaner.dedupe.buffer.size": _CLEANER_THREADS + " Split evenly between the threads; "
    "Kafka's 1 MiB-per-thread minimum is enforced at start.",
    "log.cleaner.io.buffer.size": _CLEANER_THREADS + " Per thread: the chunk read from a "
    "segment and written to a cleaned one (at least 4 KiB; a larger batch is read whole).",
    "log.cleaner.io.buffer.load.factor": _CLEANER_THREADS + " Validated to (0, 1] (Kafka does "
    "not validate it).",
    "log.cleaner.io.max.bytes.per.second": _CLEANER_THREADS + " Shared evenly between the "
    "threads; the default (Double.MAX_VALUE) means no limit.",
    "log.cleaner.backoff.ms": _CLEANER_THREADS,
    "log.cleaner.delete.retention.ms": _CLEANER,
    "log.cleaner.min.compaction.lag.ms": _CLEANER,
    "log.cleaner.max.compaction.lag.ms": _CLEANER,
    "log.cleaner.min.cleanable.ratio": _CLEANER,
    "min.insync.replicas": "Honoured through the topic config `min.insync.replicas`.",
    "replica.lag.time.max.ms": "Honoured by the replica manager (cluster mode): a follower not caught up for this long leaves the ISR; checked every half of it.",
    "replica.fetch.max.bytes": "Honoured by the follower fetchers (cluster mode): bytes per partition per fetch.",
    "replica.fetch.wait.max.ms": "Honoured by the follower fetchers (cluster mode): the fetch's `max_wait_ms`.",
    "replica.fetch.min.bytes": "Honoured by the follower fetchers (cluster mode): the fetch's `min_bytes`.",
    "replica.fetch.response.max.bytes": "Honoured by the follower fetchers (cluster mode): the fetch's `max_bytes`.",
    "replica.fetch.backoff.ms": "Honoured by the follower fetchers (cluster mode): the pause after a failed fetch.",
    "replica.high.watermark.checkpoint.interval.ms": "Honoured (cluster mode): high watermarks of replicated partitions go to `replication-offset-checkpoint` this often and at shutdown; a restarted replica starts from them.",
    "num.replica.fetchers": "Honoured (cluster mode): fetcher tasks per leader broker, partitions spread over them by hash.",
    "compression.type": "Honoured through the topic config `compression.type`.",
    "unclean.leader.election.enable": "Single node: no effect. Cluster mode: the controller may elect a live replica outside the ISR when no ISR member is alive.",
    "socket.request.max.bytes": "Honoured: a larger request frame closes the connection.",
    "socket.send.buffer.bytes": "Honoured (SO_SNDBUF, at least 1 MiB when set).",
    "socket.receive.buffer.bytes": "Honoured (SO_RCVBUF, at least 1 MiB when set).",
    "num.network.threads": "One asyncio event loop serves every connection: Kafka's default 3 "
    "is accepted with a warning (it is in every shipped server.properties), anything else "
    "refused.",
    "num.io.threads": "Honoured: size of the worker-thread pool that runs disk work.",
    "num.recovery.threads.per.data.dir": "Honoured: partitions are opened (and recovered) in "
    "parallel by this many threads at start.",
    "queued.max.request.bytes": "Honoured: bytes of requests being read or queued, broker-wide; "
    "a connection over its share is not read until its responses drain.",
    "connections.max.idle.ms": "Honoured: idle connections are closed after this long.",
    "quota.window.num": "Honoured: client quotas measure each client's rate over this many "
    "windows ([quotas.md](quotas.md)).",
    "quota.window.size.seconds": "Honoured: the span of each client quota window "
    "([quotas.md](quotas.md)).",
    "offsets.topic.replication.factor": ("Single node: must be 1 (refused otherwise when the topic is created). "
                                         "Cluster mode: the replicas of `__consumer_offsets`, created through "
                                         "ZooKeeper on the first FindCoordinator (refused while fewer brokers "
                                         "are alive)."),
    "offsets.commit.timeout.ms": ("Cluster mode: how long a group coordinator's write waits for the ISR of "
                                  "its `__consumer_offsets` partition (acks=all); past it the request gets "
                                  "COORDINATOR_NOT_AVAILABLE and the client retries. A single node's "
                                  "writes are local and do not wait."),
    "offsets.topic.num.partitions": ("Honoured: `__consumer_offsets` is created with this many partitions on "
                                     "the first FindCoordinator; a group's partition is Kafka's "
                                     "`abs(hashCode(group.id)) % n`. Changing it later strands existing groups."),
    "offsets.topic.segment.bytes": ("Honoured: `segment.bytes` of `__consumer_offsets` at its creation. The "
                                    "topic is `cleanup.policy=compact`: the log cleaner keeps the latest "
                                    "commit of each group, topic and partition."),
    "transaction.state.log.replication.factor": "Single node: must be 1 (refused otherwise when the "
                                                "topic is created).",
    "transaction.state.log.min.isr": _TXN,
    "transaction.state.log.num.partitions": ("Honoured: `__transaction_state` is created with this many "
                                             "partitions on the first FindCoordinator for a transactional "
                                             "id; an id's partition is Kafka's `abs(hashCode(id)) % n`."),
    "transaction.state.log.segment.bytes": ("Honoured: `segment.bytes` of `__transaction_state` at its "
                                            "creation (the topic is `cleanup.policy=compact`)."),
    "transaction.state.log.load.buffer.size": "Honoured: bytes read per step when a partition is loaded.",
    "offsets.load.buffer.size": "Honoured: bytes read per step when a `__consumer_offsets` partition is loaded (the coordinator runtime replays each step on the event loop, yielding between steps).",
    "max.incremental.fetch.session.cache.slots": "Honoured: incremental fetch sessions (KIP-227, Fetch v7+) for consumers and followers; when full, a session unused for 120 s, else a smaller client session, makes room (a follower may evict any client session); 0 answers every fetch without a session.",
    "transaction.max.timeout.ms": "Honoured: InitProducerId with a larger timeout gets INVALID_TRANSACTION_TIMEOUT.",
    "transactional.id.expiration.ms": ("Honoured: an id idle this long (no transaction open) gets a "
                                       "tombstone and is forgotten."),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("Honoured: how often transactions open "
                                                                    "longer than their timeout are aborted."),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("Honoured: how often expired "
                                                                   "transactional ids are looked for."),
    "transaction.partition.verification.enable": ("Honoured: partition leaders ask the coordinator whether "
                                                  "a producer added the partition before its first "
                                                  "transactional batch there (KIP-890)."),
    "group.initial.rebalance.delay.ms": "Honoured by the group coordinator.",
    "group.min.session.timeout.ms": "Honoured: JoinGroup below it gets INVALID_SESSION_TIMEOUT.",
    "group.max.session.timeout.ms": "Honoured: JoinGroup above it gets INVALID_SESSION_TIMEOUT.",
    "group.max.size": "Honoured: members beyond it get GROUP_MAX_SIZE_REACHED.",
    "group.coordinator.rebalance.protocols": "Honoured: without `consumer`, ConsumerGroupHeartbeat and "
                                             "ConsumerGroupDescribe are neither advertised nor served.",
    "group.consumer.assignors": "Honoured: `uniform` and `range` (names or Kafka's class names); "
                                "the first is the default, a member may ask for another.",
    "group.consumer.heartbeat.interval.ms": "Honoured: the interval given to consumer-group members (group "
                                            "config `consumer.heartbeat.interval.ms` overrides it).",
    "group.consumer.min.heartbeat.interval.ms": "Honoured: a `group.consumer.heartbeat.interval.ms` below it is refused at start, "
                                                "a group config `consumer.heartbeat.interval.ms` below it with INVALID_CONFIG.",
    "group.consumer.max.heartbeat.interval.ms": "Honoured: a `group.consumer.heartbeat.interval.ms` above it is refused at start, "
                                                "a group config `consumer.heartbeat.interval.ms` above it with INVALID_CONFIG.",
    "group.consumer.session.timeout.ms": "Honoured: a consumer-group member is fenced this long after "
                                         "its last heartbeat (group config `consumer.session.timeout.ms` "
                                         "overrides it).",
    "group.consumer.min.session.timeout.ms": "Honoured: a `group.consumer.session.timeout.ms` below it is refused at start, "
                                             "a group config `consumer.session.timeout.ms` below it with INVALID_CONFIG.",
    "group.consumer.max.session.timeout.ms": "Honoured: a `group.consumer.session.timeout.ms` above it is refused at start, "
                                             "a group config `consumer.session.timeout.ms` above it with INVALID_CONFIG.",
    "group.consumer.max.size": "Honoured: consumer-group members beyond it get GROUP_MAX_SIZE_REACHED.",
    "group.consumer.migration.policy": "Honoured (Kafka's default bidirectional): a ConsumerGroupHeartbeat upgrades a "
                                       "classic group with members, the last consumer-protocol member leaving downgrades "
                                       "a consumer group (docs/groups.md).",
    "group.share.enable": "pylog's switch (Kafka 4.2 enables share groups with the `share.version` "
                          "feature): false drops the share-group APIs from ApiVersions.",
    "group.share.heartbeat.interval.ms": "Honoured: the heartbeat interval given to share-group members "
                                         "(group config `share.heartbeat.interval.ms` overrides it).",
    "group.share.session.timeout.ms": "Honoured: a share-group member is removed this long after its last "
                                      "heartbeat and its records are released (group config "
                                      "`share.session.timeout.ms` overrides it).",
    "group.share.min.heartbeat.interval.ms": "Honoured: the lowest `share.heartbeat.interval.ms` a group config "
                                             "may set (the broker's own setting is not checked against it).",
    "group.share.max.heartbeat.interval.ms": "Honoured: the highest `share.heartbeat.interval.ms` a group config "
                                             "may set (the broker's own setting is not checked against it).",
    "group.share.min.session.timeout.ms": "Honoured: the lowest `share.session.timeout.ms` a group config may set "
                                          "(the broker's own setting is not checked against it).",
    "group.share.max.session.timeout.ms": "Honoured: the highest `share.session.timeout.ms` a group config may set "
                                          "(the broker's own setting is not checked against it).",
    "group.share.max.size": "Honoured: share-group members beyond it get GROUP_MAX_SIZE_REACHED.",
    "group.share.initialize.retry.interval.ms": "Honoured: a share partition initializing for longer (at least "
                                                "offsets.commit.timeout.ms) is initialized again at its "
                                                "group's next heartbeat.",
    "group.share.record.lock.duration.ms": "Honoured: how long an acquired record stays locked to its "
                                           "share consumer (group config `share.record.lock.duration.ms`).",
    "group.share.min.record.lock.duration.ms": "Honoured: the lowest `share.record.lock.duration.ms` a group "
                                               "config may set.",
    "group.share.max.record.lock.duration.ms": "Honoured: the highest `share.record.lock.duration.ms` a group "
                                               "config may set.",
    "group.share.delivery.count.limit": "Honoured: a record delivered this many times is archived instead "
                                        "of being made available again (group config "
                                        "`share.delivery.count.limit`).",
    "group.share.min.delivery.count.limit": "Honoured: the lowest `share.delivery.count.limit` a group "
                                            "config may set.",
    "group.share.max.delivery.count.limit": "Honoured: the highest `share.delivery.count.limit` a group "
                                            "config may set.",
    "group.share.partition.max.record.locks": "Honoured: the in-flight window of a share partition (offsets "
                                              "between its start and end offsets); a group may set its "
                                              "own (`share.partition.max.record.locks`, 100-10000).",
    "share.coordinator.state.topic.num.partitions": "Honoured: partitions of `__share_group_state` when it is "
                                                    "created.",
    "share.coordinator.state.topic.replication.factor": "Honoured in cluster mode: the replicas of "
                                                        "`__share_group_state`, created through ZooKeeper "
                                                        "on first use (refused while fewer brokers are "
                                                        "alive). Single node: 1.",
    "share.coordinator.state.topic.min.isr": "Honoured in cluster mode: `min.insync.replicas` of "
                                             "`__share_group_state`.",
    "share.coordinator.state.topic.segment.bytes": "Honoured: `segment.bytes` of `__share_group_state`.",
    "share.coordinator.load.buffer.size": "Honoured: bytes read at a time when `__share_group_state` loads.",
    "share.coordinator.write.timeout.ms": "Honoured: how long a state write waits for its append, and how "
                                          "long a share-partition leader retries a state read or write "
                                          "while its share coordinator moves.",
    "offsets.retention.minutes": "Honoured: offsets of an empty group expire this long after it emptied "
                                 "(or after the commit, for groups without members).",
    "offsets.retention.check.interval.ms": "Honoured: how often the coordinator looks for expired offsets.",
    "offset.metadata.max.bytes": "Honoured: larger commit metadata gets OFFSET_METADATA_TOO_LARGE.",
    # topic
    "cleanup.policy": "Honoured: `delete` (time and size retention), `compact` (the log "
    "cleaner; records without a key are refused with INVALID_RECORD) or both; a change "
    "applies to the running logs.",
    "message.format.version": _DEPRECATED + " (records are always written in format v2).",
    "message.downconversion.enable": _DEPRECATED + " (pylog serves Fetch v4 and later, which "
    "never down-converts).",
    "topic:compression.type": "Honoured: a batch in another codec is recompressed on append "
    "(`producer` keeps the producer's).",
    "delete.retention.ms": _CLEANER,
    "file.delete.delay.ms": "Honoured: a deleted segment is renamed `.deleted` and removed "
    "after this delay.",
    "flush.messages": "Honoured: fsync after this many appended records.",
    "flush.ms": "Honoured: fsync when this long has passed since the last flush.",
    "index.interval.bytes": "Honoured.",
    "max.compaction.lag.ms": _CLEANER,
    "max.message.bytes": "Honoured: a larger batch gets MESSAGE_TOO_LARGE.",
    "message.timestamp.after.max.ms": "Honoured (CreateTime topics; INVALID_TIMESTAMP).",
    "message.timestamp.before.max.ms": "Honoured (CreateTime topics; INVALID_TIMESTAMP).",
    "message.timestamp.type": "Honoured (LogAppendTime stamps each batch with the broker's clock).",
    "min.cleanable.dirty.ratio": _CLEANER,
    "min.compaction.lag.ms": _CLEANER,
    "topic:min.insync.replicas": "Single node: acks=all with a value above 1 gets "
    "NOT_ENOUGH_REPLICAS.",
    "preallocate": "Accepted; not passed to the log yet, so segments are not preallocated.",
    "retention.bytes": "Honoured: oldest segments deleted while the partition is larger.",
    "retention.ms": "Honoured: segments whose newest record is older are deleted.",
    "segment.bytes": "Honoured: the active segment rolls before it would exceed this.",
    "segment.index.bytes": "Honoured: index files are preallocated to this size.",
    "segment.jitter.ms": "Honoured.",
    "segment.ms": "Honoured: the active segment rolls when its first record is this old.",
    "topic:unclean.leader.election.enable": "Single node: no effect.",
}

# Keys that are both a broker and a topic config carry a "topic:" prefix for the topic note.
_BOTH = set(_config.BROKER_CONFIG_DEFS) & set(_config.TOPIC_CONFIG_DEFS)


def _note_key(name: str, topic: bool) -> str:
    return f"topic:{name}" if topic and name in _BOTH else name


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _default(type_: str, value: Any) -> str:
    if value is None:
        return "(none)"
    text = _config.format_value(type_, value)
    if value == LONG_MAX and type_ == "long":
        return "`9223372036854775807` (Long.MAX_VALUE)"
    if value == _config.DOUBLE_MAX and type_ == "double":
        return f"`{text}` (Double.MAX_VALUE)"
    if text == "":
        return '`""`'
    return f"`{text}`"


def _check_notes() -> None:
    wanted = {_note_key(n, False) for n in _config.BROKER_CONFIG_DEFS}
    wanted |= {_note_key(n, True) for n in _config.TOPIC_CONFIG_DEFS}
    missing = sorted(wanted - set(PYLOG_NOTES))
    if missing:
        raise SystemExit(
            f"{GENERATOR}: add a note to PYLOG_NOTES for each of {missing} "
            "(what pylog does with the key)"
        )


def _group_section() -> list[str]:
    """Group configs (resource type GROUP), from pylog.group.group_configs."""
    from pylog.group.group_configs import GROUP_CONFIG_DEFS

    out = [
        "",
        "## Group configs",
        "",
        "Set per group with IncrementalAlterConfigs (SET, DELETE) or AlterConfigs (the whole",
        "set) on resource type GROUP (32), e.g. `pylog configs alter --entity-type groups",
        "--entity-name G --add-config share.auto.offset.reset=earliest` or kafka-configs.sh;",
        "DescribeConfigs reports the group's value (source 8, GROUP_CONFIG) or the broker setting",
        "(4 when set explicitly, else 5). A value outside its bounds is INVALID_CONFIG naming the",
        "key and the bound; a session timeout must stay above its heartbeat interval. Single",
        "node: stored in `group-configs.json` in the log directory; cluster mode: ZooKeeper's",
        "`/config/groups/<group>` with a `/config/changes` notice that every broker applies",
        "(read at start). Deleting the group (DeleteGroups) deletes its configs.",
        "",
        "| key | type | broker setting (default) | bounds | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, d in GROUP_CONFIG_DEFS.items():
        if d.type == "string":
            setting, bounds = f"(none: `{d.fixed}`)", ", ".join(f"`{c}`" for c in d.choices)
        elif d.type == "boolean":
            setting, bounds = f"(none: `{d.fixed}`)", "`true`, `false`"
        else:
            setting = f"`{d.broker_name}`"
            parts = []
            if d.fixed_min > 1 or d.fixed_max < 2**31 - 1:
                parts.append(f"{d.fixed_min}-{d.fixed_max}")
            if d.min_name is not None:
                parts.append(f"`{d.min_name}` to `{d.max_name}`")
            bounds = "; ".join(parts)
        out.append(f"| `{name}` | {d.type} | {setting} | {_cell(bounds)} | {_cell(d.doc)} |")
    return out


def render() -> str:
    """The whole of docs/configuration.md, deterministic."""
    _check_notes()
    defaults = _config.BrokerConfig()
    out = [
        f"<!-- Generated by {GENERATOR} from src/pylog/config/definitions.py. DO NOT EDIT: "
        "change the table or the script and rerun it. -->",
        "",
        "# Configuration reference",
        "",
        "Every key pylog accepts, with Kafka's name, type and default. A broker reads them from a",
        "`server.properties` file (`pylog broker --config FILE`) and `--override key=value` flags",
        "(later wins); they are static (read once at start). An unknown key or a bad value stops",
        "the broker before it touches the data directory, naming the key.",
        "",
        "Topic configs are set per topic with CreateTopics, AlterConfigs or",
        "IncrementalAlterConfigs (`pylog topics create --config k=v`,",
        "`pylog topics alter-config TOPIC --set k=v`, `kafka-configs.sh`) and stored in",
        "`pylog-topics.json` (see [formats.md](formats.md)). A topic without its own value takes",
        "the first of its broker synonyms that is set explicitly, else the first synonym's default;",
        "DescribeConfigs reports that chain with Kafka's source codes. How acks and flushes decide",
        "what survives a crash is in [durability.md](durability.md); the operational side in",
        "[operations.md](operations.md).",
        "",
        "*Meaning* is Kafka's meaning of the key, as the table describes it in one line; *pylog*",
        "says whether pylog honours it, and how it differs when it does not.",
        "",
        "## Broker configs",
        "",
        "| key | type | default | meaning | pylog |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, d in sorted(_config.BROKER_CONFIG_DEFS.items()):
        out.append(
            f"| `{name}` | {d.type} | {_cell(_default(d.type, d.default))} | {_cell(d.doc)} "
            f"| {_cell(PYLOG_NOTES[_note_key(name, False)])} |"
        )
    out += [
        "",
        "## Topic configs",
        "",
        "*Broker synonyms* are listed in priority order; *default* is the value a topic gets",
        "from a broker started with no settings.",
        "",
        "| key | type | broker synonyms | default | meaning | pylog |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, t in sorted(_config.TOPIC_CONFIG_DEFS.items()):
        # The first synonym is the one in the topic's unit (log.roll.ms, not log.roll.hours).
        doc = t.doc or _config.BROKER_CONFIG_DEFS[t.synonyms[0]].doc
        synonyms = ", ".join(f"`{s}`" for s in t.synonyms)
        out.append(
            f"| `{name}` | {t.type} | {synonyms} | {_cell(_default(t.type, defaults.topic_default(name)))} "
            f"| {_cell(doc)} | {_cell(PYLOG_NOTES[_note_key(name, True)])} |"
        )
    out += _group_section()
    out += [
        "",
        "## Keys not listed",
        "",
        "A key that is not in these tables is refused at start (or with INVALID_CONFIG for a",
        "topic or a group) as an unknown configuration, naming it.",
    ]
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed file is stale")
    parser.add_argument("--out", type=pathlib.Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python {GENERATOR}", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
