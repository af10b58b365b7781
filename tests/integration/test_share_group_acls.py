"""Share groups under the ACL authorizer: a ``pylog.testing.KafkaBroker`` with an SSL
listener that requires client certificates, ``User:CN=admin,O=pylog-test`` a super user.
alice's share consumer is refused (GROUP_AUTHORIZATION_FAILED, raised by ``poll``) until she
may READ the group, and reads nothing until she may READ the topic; then every record
reaches her. ShareGroupDescribe needs DESCRIBE on the group."""

from __future__ import annotations

import time
import uuid

import pytest

from pylog import errors
from pylog.client import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Admin,
    ConfigResource,
    PatternType,
    Producer,
    ResourcePattern,
    ResourceType,
    ShareConsumer,
)
from pylog.testing import KafkaBroker

pytestmark = pytest.mark.integration

ADMIN = "User:CN=admin,O=pylog-test"


def _grant(admin: Admin, rtype: ResourceType, name: str, principal: str) -> None:
    admin.create_acls([AclBinding(ResourcePattern(rtype, name, PatternType.LITERAL),
                                  AccessControlEntry(principal, "*", AclOperation.READ,
                                                     AclPermissionType.ALLOW))])


def test_a_share_consumer_needs_read_on_the_group_and_the_topic() -> None:
    with KafkaBroker(security_protocol="SSL", ssl_client_auth="required",
                     authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                     super_users=ADMIN) as kb:
        topic, group = f"jobs-{uuid.uuid4().hex[:6]}", f"workers-{uuid.uuid4().hex[:6]}"
        kb.create_topic(topic, 1)
        admin_conf = kb.client_config(certificate=kb.client_certificate("admin"))
        with Admin(admin_conf) as admin:  # the records written before alice joins count
            admin.alter_configs(ConfigResource("group", group),
                                {"share.auto.offset.reset": "earliest"})
        with Producer(admin_conf) as p:
            for i in range(20):
                p.send(topic, b"job-%d" % i)
            p.flush(30)
        alice = kb.client_certificate("alice")
        with ShareConsumer({**kb.client_config(certificate=alice), "group.id": group}) as c:
            c.subscribe([topic])
            with pytest.raises(errors.GroupAuthorizationFailedError):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    c.poll(0.5)
            with Admin(admin_conf) as admin:
                _grant(admin, ResourceType.GROUP, group, alice.principal)
                _grant(admin, ResourceType.TOPIC, topic, alice.principal)
            got: set[bytes] = set()
            deadline = time.monotonic() + 60
            while len(got) < 20 and time.monotonic() < deadline:
                try:
                    got.update(r.value for r in c.poll(0.5))
                except errors.GroupAuthorizationFailedError:
                    continue  # raised once more for a failure before the grant
        assert got == {b"job-%d" % i for i in range(20)}


def test_a_share_fetch_without_read_on_the_topic_is_refused() -> None:
    with KafkaBroker(security_protocol="SSL", ssl_client_auth="required",
                     authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                     super_users=ADMIN) as kb:
        topic, group = f"jobs-{uuid.uuid4().hex[:6]}", f"workers-{uuid.uuid4().hex[:6]}"
        kb.create_topic(topic, 1)
        admin_conf = kb.client_config(certificate=kb.client_certificate("admin"))
        bob = kb.client_certificate("bob")
        with Admin(admin_conf) as admin:
            _grant(admin, ResourceType.GROUP, group, bob.principal)
            # DESCRIBE on the topic lets bob join (the heartbeat's check), not read.
            admin.create_acls([AclBinding(
                ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                AccessControlEntry(bob.principal, "*", AclOperation.DESCRIBE,
                                   AclPermissionType.ALLOW))])
        with ShareConsumer({**kb.client_config(certificate=bob), "group.id": group}) as c:
            c.subscribe([topic])
            with pytest.raises(errors.TopicAuthorizationFailedError):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    c.poll(0.5)


def _allow(admin: Admin, rtype: ResourceType, name: str, principal: str, op: AclOperation) -> None:
    admin.create_acls([AclBinding(ResourcePattern(rtype, name, PatternType.LITERAL),
                                  AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW))])


def test_share_group_offset_apis_need_kafkas_acls() -> None:
    """DescribeShareGroupOffsets: DESCRIBE on the group and the topics; AlterShareGroupOffsets:
    READ on both; DeleteShareGroupOffsets: DELETE on the group, READ on the topics."""
    with KafkaBroker(security_protocol="SSL", ssl_client_auth="required",
                     authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                     super_users=ADMIN) as kb:
        topic, group = f"jobs-{uuid.uuid4().hex[:6]}", f"workers-{uuid.uuid4().hex[:6]}"
        kb.create_topic(topic, 1)
        admin_conf = kb.client_config(certificate=kb.client_certificate("admin"))
        with Admin(admin_conf) as admin:
            admin.alter_configs(ConfigResource("group", group), {"share.auto.offset.reset": "earliest"})
        with Producer(admin_conf) as p:
            for i in range(5):
                p.send(topic, b"job-%d" % i)
            p.flush(30)
        with ShareConsumer({**admin_conf, "group.id": group}) as c:  # makes the group's state
            c.subscribe([topic])
            got = 0
            deadline = time.monotonic() + 60
            while got < 5 and time.monotonic() < deadline:
                got += len(c.poll(0.5))
            c.poll(0.5)  # accepts the last ones
        from pylog.client import TopicPartition

        tp = TopicPartition(topic, 0)
        with Admin(admin_conf) as admin:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and admin.list_share_group_offsets(group) == {}:
                time.sleep(0.1)
            assert admin.list_share_group_offsets(group)[tp].start_offset == 5
        bob = kb.client_certificate("bob")
        with Admin(kb.client_config(certificate=bob)) as b, Admin(admin_conf) as admin:
            with pytest.raises(errors.GroupAuthorizationFailedError):
                b.list_share_group_offsets(group)
            _allow(admin, ResourceType.GROUP, group, bob.principal, AclOperation.DESCRIBE)
            assert b.list_share_group_offsets(group) == {}  # the topic is not his to see
            with pytest.raises(errors.TopicAuthorizationFailedError):
                b.list_share_group_offsets(group, [tp])
            _allow(admin, ResourceType.TOPIC, topic, bob.principal, AclOperation.DESCRIBE)
            assert b.list_share_group_offsets(group)[tp].start_offset == 5

            with pytest.raises(errors.GroupAuthorizationFailedError):
                b.alter_share_group_offsets(group, {tp: 0})
            _allow(admin, ResourceType.GROUP, group, bob.principal, AclOperation.READ)
            with pytest.raises(errors.TopicAuthorizationFailedError):
                b.alter_share_group_offsets(group, {tp: 0})
            _allow(admin, ResourceType.TOPIC, topic, bob.principal, AclOperation.READ)
            b.alter_share_group_offsets(group, {tp: 0})
            assert b.list_share_group_offsets(group)[tp].start_offset == 0

            with pytest.raises(errors.GroupAuthorizationFailedError):
                b.delete_share_group_offsets(group, [topic])
            _allow(admin, ResourceType.GROUP, group, bob.principal, AclOperation.DELETE)
            assert b.delete_share_group_offsets(group, [topic]) == {topic: None}
