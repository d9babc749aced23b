"""ACLs in cluster mode: they live in etcd, so an ACL created
through one broker applies on every broker (each follows the ACL keys with a
watch), a deletion through another broker reaches the first, and a restarted
broker reads them back before it serves. The connections are PLAINTEXT
(User:ANONYMOUS, made a super user), and the requests are raw CreateAcls /
DescribeAcls / DeleteAcls v1 to one chosen broker each."""

import struct

from harness import wait_for
import kwire

CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS = 30, 29, 31
ANY, LITERAL, PREFIXED = 1, 3, 4
TOPIC, GROUP = 2, 3
READ, WRITE, ALLOW = 3, 4, 3
BOUND_S = 15.0
ARGS = ("--authorizer", "acl", "--super-user", "User:ANONYMOUS")


def _acl_fields(rt, name, pt, principal, host, op, perm) -> bytes:
    return (struct.pack(">b", rt) + kwire._str(name) + struct.pack(">b", pt) + kwire._str(principal)
            + kwire._str(host) + struct.pack(">bb", op, perm))


def create(addr: str, acls: list[tuple]) -> list[int]:
    body = struct.pack(">i", len(acls)) + b"".join(_acl_fields(*a) for a in acls)
    r = kwire._Reader(kwire._call(addr, CREATE_ACLS, 1, body, timeout=10.0))
    r.take(">i")
    codes = []
    for _ in range(r.take(">i")):
        codes.append(r.take(">h"))
        r.string()
    return codes


def _any_filter() -> bytes:
    return _acl_fields(ANY, None, ANY, None, None, ANY, ANY)


def describe(addr: str) -> list[tuple]:
    r = kwire._Reader(kwire._call(addr, DESCRIBE_ACLS, 1, _any_filter(), timeout=5.0))
    r.take(">i")
    assert r.take(">h") == 0
    r.string()
    out = []
    for _ in range(r.take(">i")):
        rt, name, pt = r.take(">b"), r.string(), r.take(">b")
        for _ in range(r.take(">i")):
            principal, host, op, perm = r.string(), r.string(), r.take(">b"), r.take(">b")
            out.append((rt, name, pt, principal, host, op, perm))
    return sorted(out)


def delete_all(addr: str) -> int:
    body = struct.pack(">i", 1) + _any_filter()
    r = kwire._Reader(kwire._call(addr, DELETE_ACLS, 1, body, timeout=10.0))
    r.take(">i")
    assert r.take(">i") == 1
    assert r.take(">h") == 0
    r.string()
    return r.take(">i")


ALICE = (TOPIC, "t", LITERAL, "User:alice", "*", READ, ALLOW)
BOB = (GROUP, "g", PREFIXED, "User:bob", "*", WRITE, ALLOW)


def test_an_acl_created_on_one_broker_applies_on_every_broker(cluster_factory):
    c = cluster_factory(n=2, extra_args=ARGS)
    one, two = c.brokers[1].addr, c.brokers[2].addr
    assert create(one, [ALICE, BOB]) == [0, 0]
    assert describe(one) == sorted([ALICE, BOB]), "the creating broker sees its ACLs at once"
    wait_for(lambda: describe(two) == sorted([ALICE, BOB]), BOUND_S,
             "broker 2 to see the ACLs created through broker 1")
    assert delete_all(two) == 2
    wait_for(lambda: describe(one) == [], BOUND_S,
             "broker 1 to see the deletion made through broker 2")


def test_a_restarted_broker_reads_the_acls_from_etcd(cluster_factory):
    c = cluster_factory(n=2, extra_args=ARGS)
    assert create(c.brokers[1].addr, [ALICE]) == [0]
    c.brokers[2].stop()
    c.brokers[2].start()
    assert describe(c.brokers[2].addr) == [ALICE]
