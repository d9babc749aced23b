"""confluent-kafka's AdminClient ACL calls (CreateAcls, DescribeAcls,
DeleteAcls) against a kaas broker enforcing ACLs, with the
PLAINTEXT connections' principal User:ANONYMOUS a super user. The ACLs
survive a restart on the same data directory."""

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ResourcePatternType, ResourceType)

from common import OP_TIMEOUT
from conftest import KaasBroker, _serve


@pytest.fixture
def acl_broker(request, tmp_path):
    yield from _serve(request, KaasBroker(
        data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
        extra_args=("--authorizer", "acl", "--super-user", "User:ANONYMOUS")))


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def key(b):
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
            b.permission_type)


ALICE_READ_T = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)
ALICE_WRITE_PRE = AclBinding(ResourceType.TOPIC, "pre", ResourcePatternType.PREFIXED, "User:alice",
                             "*", AclOperation.WRITE, AclPermissionType.ALLOW)
BOB_GROUP = AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:bob", "*",
                       AclOperation.READ, AclPermissionType.DENY)
ANY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)


def describe(a, f):
    return sorted(key(b) for b in a.describe_acls(f, request_timeout=OP_TIMEOUT).result(OP_TIMEOUT))


def test_acls_are_created_described_deleted_and_kept_across_a_restart(acl_broker):
    a = admin(acl_broker.bootstrap)
    created = a.create_acls([ALICE_READ_T, ALICE_WRITE_PRE, BOB_GROUP], request_timeout=OP_TIMEOUT)
    for f in created.values():
        assert f.result(OP_TIMEOUT) is None
    everything = sorted(key(b) for b in (ALICE_READ_T, ALICE_WRITE_PRE, BOB_GROUP))
    assert describe(a, ANY_ACL) == everything
    match_pre = AclBindingFilter(ResourceType.TOPIC, "prefix-1", ResourcePatternType.MATCH, None,
                                 None, AclOperation.ANY, AclPermissionType.ANY)
    assert describe(a, match_pre) == [key(ALICE_WRITE_PRE)]

    groups = AclBindingFilter(ResourceType.GROUP, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
    deleted = a.delete_acls([groups], request_timeout=OP_TIMEOUT)[groups].result(OP_TIMEOUT)
    assert [key(b) for b in deleted] == [key(BOB_GROUP)]

    acl_broker.restart()
    a = admin(acl_broker.bootstrap)
    assert describe(a, ANY_ACL) == sorted(key(b) for b in (ALICE_READ_T, ALICE_WRITE_PRE))


def test_an_invalid_acl_is_refused_with_its_reason(acl_broker):
    a = admin(acl_broker.bootstrap)
    bad = AclBinding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL,
                     "User:alice", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    f = a.create_acls([bad], request_timeout=OP_TIMEOUT)[bad]
    with pytest.raises(KafkaException) as e:
        f.result(OP_TIMEOUT)
    assert "kafka-cluster" in str(e.value)


def test_without_an_authorizer_acl_changes_fail_with_security_disabled(kaas):
    # (librdkafka reports DescribeAcls' top-level error as an empty list.)
    a = admin(kaas.bootstrap)
    created = a.create_acls([ALICE_READ_T], request_timeout=OP_TIMEOUT)[ALICE_READ_T]
    deleted = a.delete_acls([ANY_ACL], request_timeout=OP_TIMEOUT)[ANY_ACL]
    for f in (created, deleted):
        with pytest.raises(KafkaException) as e:
            f.result(OP_TIMEOUT)
        assert e.value.args[0].code() == 54, str(e.value)  # SECURITY_DISABLED
