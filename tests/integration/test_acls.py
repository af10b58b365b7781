"""ACLs with real clients: one broker with an mTLS listener (principals from client
certificates: ``User:CN=alice``, ``User:CN=bob``, super user ``User:CN=admin``) and
``authorizer.class.name`` set.

The admin creates, lists and deletes ACLs through confluent-kafka, kafka-python and
pylog.client; alice and bob produce, consume, join groups and read metadata with
confluent-kafka, kafka-python, aiokafka and kcat and get Kafka's errors where the ACLs say
no: TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Deny wins over allow, prefixed patterns and the
``*`` wildcard apply, host matching uses the client's address.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid

import pytest
from _harness.tls import make_pki
from _harness.waiting import wait_until

from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

ADMIN, ALICE, BOB = "User:CN=admin", "User:CN=alice", "User:CN=bob"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("acl")
    pki = make_pki(base / "pki", extra_clients=("admin", "alice", "bob"))
    data = base / "data"
    data.mkdir()
    b = BrokerProcess(
        data,
        {
            "listeners": "MTLS://127.0.0.1:0",
            "listener.security.protocol.map": "MTLS:SSL",
            "inter.broker.listener.name": "MTLS",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["broker"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki["ca"],
            "ssl.client.auth": "required",
            # CN=alice,O=pylog,C=US -> User:CN=alice
            "ssl.principal.mapping.rules": "RULE:^(CN=[^,]+),.*$/$1/,DEFAULT",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": ADMIN,
            "auto.create.topics.enable": "true",
        },
    )
    b.start()
    yield b, pki
    b.stop()


def _conf(b: BrokerProcess, pki: dict[str, str], who: str) -> dict[str, str]:
    return {
        "bootstrap.servers": b.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": pki["ca"],
        "ssl.certificate.location": pki[who + "_cert"],
        "ssl.key.location": pki[who + "_key"],
    }


def _name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _admin(b: BrokerProcess, pki: dict[str, str], who: str = "admin"):
    from confluent_kafka.admin import AdminClient

    return AdminClient(_conf(b, pki, who))


def _binding(rtype: str, name: str, principal: str, op: str, perm: str = "ALLOW",
             pattern: str = "LITERAL", host: str = "*"):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(ResourceType[rtype], name, ResourcePatternType[pattern], principal, host,
                      AclOperation[op], AclPermissionType[perm])


def _create(admin, *bindings) -> None:
    for f in admin.create_acls(list(bindings), request_timeout=30).values():
        f.result(timeout=30)


def _produce(b, pki, who: str, topic: str, n: int = 3, **extra):
    """(delivered count, first error code name or None)."""
    import confluent_kafka

    p = confluent_kafka.Producer({**_conf(b, pki, who), "acks": "all", "message.timeout.ms": 10000,
                                  **extra})
    errs: list[str] = []
    ok = [0]

    def cb(err, _msg):
        if err is not None:
            errs.append(err.name())
        else:
            ok[0] += 1
    for i in range(n):
        try:  # librdkafka raises at once when its metadata already has the topic's error
            p.produce(topic, b"v%d" % i, on_delivery=cb)
        except confluent_kafka.KafkaException as exc:
            errs.append(exc.args[0].name())
    p.flush(20)
    return ok[0], (errs[0] if errs else None)


def _consume(b, pki, who: str, topic: str, group: str, n: int, timeout: float = 20.0):
    """(values, first error name or None), subscribing with ``group``."""
    import confluent_kafka

    c = confluent_kafka.Consumer({**_conf(b, pki, who), "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    err = None
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            err = m.error().name()
            break
        got.append(m.value())
    c.close()
    return got, err


# --- the admin APIs ----------------------------------------------------------------------


def test_admin_creates_describes_and_deletes_acls(acl_broker):
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    b, pki = acl_broker
    admin = _admin(b, pki)
    topic = _name("adm")
    _create(admin, _binding("TOPIC", topic, ALICE, "READ"),
            _binding("TOPIC", topic[:5], BOB, "WRITE", pattern="PREFIXED"))
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    got = admin.describe_acls(flt, request_timeout=30).result(timeout=30)
    assert {(a.name, a.principal, a.operation.name, a.resource_pattern_type.name) for a in got} == {
        (topic, ALICE, "READ", "LITERAL"), (topic[:5], BOB, "WRITE", "PREFIXED")}
    # LITERAL filter: the literal pattern only.
    lit = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    assert len(admin.describe_acls(lit, request_timeout=30).result(timeout=30)) == 1
    deleted = admin.delete_acls([flt], request_timeout=30)[flt].result(timeout=30)
    assert len(deleted) == 2
    assert admin.describe_acls(flt, request_timeout=30).result(timeout=30) == []


def test_non_admin_may_not_manage_acls(acl_broker):
    import confluent_kafka
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    b, pki = acl_broker
    alice = _admin(b, pki, "alice")
    with pytest.raises(confluent_kafka.KafkaException) as info:
        for f in alice.create_acls([_binding("TOPIC", "x", ALICE, "ALL")], request_timeout=30).values():
            f.result(timeout=30)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    with pytest.raises(confluent_kafka.KafkaException) as info:
        alice.delete_acls([flt], request_timeout=30)[flt].result(timeout=30)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_invalid_binding_is_refused(acl_broker):
    import confluent_kafka

    b, pki = acl_broker
    admin = _admin(b, pki)
    # READ is not an operation of the cluster resource.
    with pytest.raises(confluent_kafka.KafkaException) as info:
        _create(admin, _binding("BROKER" if False else "TOPIC", "*", ALICE, "READ", pattern="PREFIXED"))
    assert info.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REQUEST


# --- produce and consume -----------------------------------------------------------------


def test_produce_needs_write_and_consume_needs_read(acl_broker):
    b, pki = acl_broker
    admin = _admin(b, pki)
    topic = _name("pc")
    admin.create_topics([__import__("confluent_kafka.admin", fromlist=["NewTopic"]).NewTopic(topic, 1, 1)])
    wait_until(lambda: _produce(b, pki, "admin", topic, 1)[0] == 1, 20, "the admin's produce")
    ok, err = _produce(b, pki, "alice", topic)
    assert (ok, err) == (0, "TOPIC_AUTHORIZATION_FAILED")
    _create(admin, _binding("TOPIC", topic, ALICE, "WRITE"))
    assert _produce(b, pki, "alice", topic) == (3, None)
    # bob: no READ on the topic, no READ on the group.
    got, err = _consume(b, pki, "bob", topic, _name("g"), 4)
    assert err in ("GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED")
    group = _name("g")
    _create(admin, _binding("TOPIC", topic, BOB, "READ"), _binding("GROUP", group, BOB, "READ"))
    got, err = _consume(b, pki, "bob", topic, group, 4)
    assert err is None and len(got) == 4


def test_deny_wins_over_allow_and_prefixed_and_wildcard(acl_broker):
    b, pki = acl_broker
    admin = _admin(b, pki)
    prefix = _name("pre")
    topic = prefix + "-orders"
    _create(admin, _binding("TOPIC", prefix, ALICE, "WRITE", pattern="PREFIXED"))
    _create(admin, _binding("TOPIC", prefix, ALICE, "CREATE", pattern="PREFIXED"))
    assert _produce(b, pki, "alice", topic) == (3, None)  # prefixed allows
    _create(admin, _binding("TOPIC", "*", ALICE, "WRITE", perm="DENY"))
    try:
        assert _produce(b, pki, "alice", topic) == (0, "TOPIC_AUTHORIZATION_FAILED")
    finally:
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )
        flt = AclBindingFilter(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, ALICE, None,
                               AclOperation.WRITE, AclPermissionType.DENY)
        admin.delete_acls([flt], request_timeout=30)[flt].result(timeout=30)
    assert _produce(b, pki, "alice", topic)[0] == 3


def test_host_must_match(acl_broker):
    b, pki = acl_broker
    admin = _admin(b, pki)
    topic = _name("host")
    _create(admin, _binding("TOPIC", topic, BOB, "WRITE", host="10.9.9.9"),
            _binding("TOPIC", topic, BOB, "CREATE"))
    assert _produce(b, pki, "bob", topic)[1] == "TOPIC_AUTHORIZATION_FAILED"
    _create(admin, _binding("TOPIC", topic, BOB, "WRITE", host="127.0.0.1"))
    assert _produce(b, pki, "bob", topic) == (3, None)


def test_metadata_lists_only_described_topics(acl_broker):
    import confluent_kafka

    b, pki = acl_broker
    admin = _admin(b, pki)
    seen, hidden = _name("seen"), _name("hidden")
    from confluent_kafka.admin import NewTopic
    for f in admin.create_topics([NewTopic(seen, 1, 1), NewTopic(hidden, 1, 1)]).values():
        f.result(timeout=30)
    _create(admin, _binding("TOPIC", seen, ALICE, "DESCRIBE"))
    alice = _admin(b, pki, "alice")
    names = set(alice.list_topics(timeout=20).topics)
    assert seen in names and hidden not in names
    md = alice.list_topics(topic=hidden, timeout=20)
    assert md.topics[hidden].error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert hidden in _admin(b, pki).list_topics(timeout=20).topics  # the super user sees all


def test_kcat_gets_topic_authorization_failed(acl_broker):
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed")
    b, pki = acl_broker
    topic = _name("kcat")
    args = ["kcat", "-b", b.bootstrap, "-X", "security.protocol=SSL", "-X",
            f"ssl.ca.location={pki['ca']}", "-X", f"ssl.certificate.location={pki['bob_cert']}",
            "-X", f"ssl.key.location={pki['bob_key']}", "-P", "-t", topic]
    out = subprocess.run(args, input=b"x\n", capture_output=True, timeout=60)
    assert b"authoriz" in (out.stderr + out.stdout).lower(), out


def test_kafka_python_admin_acls(acl_broker):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    b, pki = acl_broker
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, security_protocol="SSL",
                             ssl_cafile=pki["ca"], ssl_certfile=pki["admin_cert"],
                             ssl_keyfile=pki["admin_key"])
    try:
        topic = _name("kp")
        acl = ACL(principal=BOB, host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(ResourceType.TOPIC, topic))
        result = admin.create_acls([acl])
        assert not result["failed"], result
        flt = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                        permission_type=ACLPermissionType.ANY,
                        resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, topic,
                                                               ACLResourcePatternType.LITERAL))
        acls, error = admin.describe_acls(flt)
        assert error.errno == 0 and [a.principal for a in acls] == [BOB]
    finally:
        admin.close()


def test_aiokafka_producer_gets_topic_authorization_failed(acl_broker):
    import asyncio
    import ssl

    import aiokafka
    import aiokafka.errors

    b, pki = acl_broker
    topic = _name("aio")

    async def run():
        ctx = ssl.create_default_context(cafile=pki["ca"])
        ctx.load_cert_chain(pki["bob_cert"], pki["bob_key"])
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=b.bootstrap, security_protocol="SSL",
                                      ssl_context=ctx, request_timeout_ms=10000)
        await p.start()
        try:
            with pytest.raises(aiokafka.errors.TopicAuthorizationFailedError):
                await asyncio.wait_for(p.send_and_wait(topic, b"x"), 30)
        finally:
            await p.stop()
    asyncio.run(run())


def test_transactional_id_needs_write(acl_broker):
    import confluent_kafka

    b, pki = acl_broker
    p = confluent_kafka.Producer({**_conf(b, pki, "bob"), "transactional.id": _name("tx")})
    with pytest.raises(confluent_kafka.KafkaException) as info:
        p.init_transactions(20)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_acls_survive_a_restart(acl_broker):
    b, pki = acl_broker
    admin = _admin(b, pki)
    topic = _name("keep")
    _create(admin, _binding("TOPIC", topic, ALICE, "WRITE"), _binding("TOPIC", topic, ALICE, "CREATE"))
    b.stop()
    b.overrides["listeners"] = f"MTLS://127.0.0.1:{b.port}"  # the same port again
    b.start()
    assert _produce(b, pki, "alice", topic) == (3, None)
    assert re.search(r"authorizer on: \d+ ACLs", b.read_log())


# --- the pylog acls command and pylog.client -----------------------------------------------


def _pylog(b: BrokerProcess, pki: dict[str, str], who: str, *args: str,
           stdin: str = "") -> subprocess.CompletedProcess[str]:
    import sys

    cmd = [sys.executable, "-m", "pylog", *args, "-b", b.bootstrap,
           "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki['ca']}",
           "-X", f"ssl.certificate.location={pki[who + '_cert']}",
           "-X", f"ssl.key.location={pki[who + '_key']}"]
    return subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=120)


def test_pylog_acls_add_list_remove(acl_broker):
    b, pki = acl_broker
    topic, group = _name("cli"), _name("cg")
    out = _pylog(b, pki, "admin", "acls", "add", "--allow-principal", BOB, "--consumer",
                 "--topic", topic, "--group", group)
    assert out.returncode == 0, out.stderr
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`: \n \t(principal={BOB}, host=*, operation=READ, " \
           "permissionType=ALLOW)" in out.stdout
    assert f"Current ACLs for resource `{pattern}`:" in out.stdout
    listed = _pylog(b, pki, "admin", "acls", "list", "--topic", topic)
    assert listed.returncode == 0, listed.stderr
    assert "operation=DESCRIBE" in listed.stdout and "operation=READ" in listed.stdout
    # bob consumes now; then the ACLs go and he cannot.
    assert _produce(b, pki, "admin", topic, 2) == (2, None)
    assert _consume(b, pki, "bob", topic, group, 2) == ([b"v0", b"v1"], None)
    gone = _pylog(b, pki, "admin", "acls", "remove", "--topic", topic, "--force")
    assert gone.returncode == 0, gone.stderr
    assert _pylog(b, pki, "admin", "acls", "list", "--topic", topic).stdout.strip() == ""
    # Without --force the command asks; "n" keeps the ACLs.
    _pylog(b, pki, "admin", "acls", "add", "--allow-principal", BOB, "--operation", "Read",
           "--group", group)
    kept = _pylog(b, pki, "admin", "acls", "remove", "--group", group, stdin="n\n")
    assert "Are you sure you want to delete all ACLs" in kept.stdout
    assert "operation=READ" in _pylog(b, pki, "admin", "acls", "list", "--group", group).stdout
    # A principal without ALTER on the cluster is refused.
    denied = _pylog(b, pki, "alice", "acls", "add", "--allow-principal", ALICE, "--cluster")
    assert denied.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in denied.stderr


def test_pylog_acls_help_names_kafka_acls_flags():
    import sys

    out = subprocess.run([sys.executable, "-m", "pylog", "acls", "add", "--help"],
                         capture_output=True, text=True, timeout=60)
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host",
                 "--operation", "--topic", "--group", "--transactional-id", "--cluster",
                 "--resource-pattern-type", "--producer", "--consumer", "--command-config"):
        assert flag in out.stdout


def test_pylog_client_admin_acls(acl_broker):
    from pylog.client import (
        AccessControlEntry,
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        Admin,
        PatternType,
        ResourcePattern,
        ResourceType,
    )
    from pylog.errors import ClusterAuthorizationFailedError, InvalidRequestError

    b, pki = acl_broker
    conf = {"bootstrap.servers": b.bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": pki["ca"]}
    tid = _name("tx")
    binding = AclBinding(ResourcePattern(ResourceType.TRANSACTIONAL_ID, tid, PatternType.PREFIXED),
                         AccessControlEntry(ALICE, "*", AclOperation.WRITE, AclPermissionType.ALLOW))
    with Admin({**conf, "ssl.certificate.location": pki["admin_cert"],
                "ssl.key.location": pki["admin_key"]}) as admin:
        admin.create_acls([binding])
        flt = AclBindingFilter(ResourceType.TRANSACTIONAL_ID, tid + "-x", PatternType.MATCH)
        assert admin.describe_acls(flt) == [binding]
        with pytest.raises(InvalidRequestError):
            admin.create_acls([AclBinding(ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL),
                                          AccessControlEntry(ALICE, "*", AclOperation.WRITE,
                                                             AclPermissionType.ALLOW))])
        assert admin.delete_acls([flt]) == [binding]
        assert admin.describe_acls(flt) == []
    with Admin({**conf, "ssl.certificate.location": pki["alice_cert"],
                "ssl.key.location": pki["alice_key"]}) as alice:
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_acls()


# --- configurations ------------------------------------------------------------------------


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(new_broker):
    import confluent_kafka

    b = new_broker({"auto.create.topics.enable": "true"}).start()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    with pytest.raises(confluent_kafka.KafkaException) as info:
        for f in admin.create_acls([_binding("TOPIC", "t", ALICE, "READ")],
                                   request_timeout=30).values():
            f.result(timeout=30)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.SECURITY_DISABLED


def test_an_unknown_authorizer_class_is_refused_at_start(new_broker):
    b = new_broker({"authorizer.class.name": "com.example.MyAuthorizer"})
    with pytest.raises(RuntimeError, match="authorizer.class.name"):
        b.start(timeout=30)
    assert "is not an authorizer pylog has" in b.read_log()


def test_allow_everyone_if_no_acl_found(new_broker):
    import confluent_kafka

    b = new_broker({"authorizer.class.name": "pylog.security.AclAuthorizer",
                    "allow.everyone.if.no.acl.found": "true",
                    "auto.create.topics.enable": "true"}).start()
    conf = {"bootstrap.servers": b.bootstrap}
    p = confluent_kafka.Producer({**conf, "message.timeout.ms": 10000})
    errs: list[str | None] = []
    p.produce("free", b"x", on_delivery=lambda e, m: errs.append(e and e.name()))
    p.flush(20)
    assert errs == [None]  # no ACL on topic free, the cluster or the group: allowed
    # CreateAcls too (no ACL on the cluster); then an ACL for someone else guards a topic.
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(conf)
    for f in admin.create_acls([_binding("TOPIC", "guarded", "User:CN=carol", "WRITE")],
                               request_timeout=30).values():
        f.result(timeout=30)
    errs.clear()
    try:  # librdkafka raises at once when its metadata already has the topic's error
        p.produce("guarded", b"x", on_delivery=lambda e, m: errs.append(e and e.name()))
    except confluent_kafka.KafkaException as exc:
        errs.append(exc.args[0].name())
    p.flush(20)
    assert errs == ["TOPIC_AUTHORIZATION_FAILED"]


def test_kafka_python_consumer_gets_group_authorization_failed(acl_broker):
    import kafka
    import kafka.errors

    b, pki = acl_broker
    admin = _admin(b, pki)
    topic = _name("kpc")
    _create(admin, _binding("TOPIC", topic, BOB, "READ"), _binding("TOPIC", topic, ADMIN, "ALL"))
    assert _produce(b, pki, "admin", topic, 1)[0] == 1
    c = kafka.KafkaConsumer(topic, group_id=_name("nogroup"), bootstrap_servers=b.bootstrap,
                            security_protocol="SSL", ssl_cafile=pki["ca"],
                            ssl_certfile=pki["bob_cert"], ssl_keyfile=pki["bob_key"],
                            consumer_timeout_ms=15000, auto_offset_reset="earliest")
    try:
        with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
            for _ in c:
                break
    finally:
        c.close()


def test_authorized_operations_follow_the_acls(acl_broker):
    b, pki = acl_broker
    admin = _admin(b, pki)
    topic = _name("ops")
    from confluent_kafka.admin import NewTopic
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _create(admin, _binding("TOPIC", topic, ALICE, "READ"))
    from confluent_kafka import TopicCollection
    alice = _admin(b, pki, "alice")
    desc = alice.describe_topics(TopicCollection([topic]), include_authorized_operations=True,
                                 request_timeout=30)[topic].result(30)
    assert {op.name for op in desc.authorized_operations} == {"READ", "DESCRIBE"}
    cluster = alice.describe_cluster(include_authorized_operations=True,
                                     request_timeout=30).result(30)
    assert not cluster.authorized_operations  # no DESCRIBE on the cluster: not told


def test_create_topics_needs_create_and_hides_configs_without_describe_configs(acl_broker):
    from _harness.wire import tls_connection

    from pylog.errors import TopicAuthorizationFailedError
    from pylog.protocol.messages import CreateTopicsRequest as R

    b, pki = acl_broker
    allowed_topic, other = _name("ct"), _name("ct")
    _create(_admin(b, pki), _binding("TOPIC", allowed_topic, ALICE, "CREATE"))
    with tls_connection(b.port, pki["ca"], pki["alice_cert"], pki["alice_key"]) as conn:
        resp = conn.request(R(topics=[
            R.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[],
                             configs=[]) for n in (allowed_topic, other)], timeout_ms=30000))
    by_name = {t.name: t for t in resp.topics}
    denied_code = TopicAuthorizationFailedError.code
    assert by_name[allowed_topic].error_code == 0
    assert by_name[allowed_topic].topic_config_error_code == denied_code
    assert by_name[allowed_topic].configs == []
    assert by_name[other].error_code == denied_code
