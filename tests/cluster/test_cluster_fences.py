"""The cross-broker fence ring.

A producer-epoch bump made by one broker's transaction coordinator must
reach the partitions the other brokers lead, so a zombie producer's batches
at the old epoch are refused there too (INVALID_PRODUCER_EPOCH, 47). Two
paths carry a bump: each broker's fence file on the shared volume
(`__cluster/producer_fences/from-<id>.json`, polled every --fence-poll-ms)
and a put of `fences/<id>` in etcd that every broker's watch applies at once
(--fence-push, default on).

The bump here is made by hand, as a peer would publish it: an etcd put
through etcd's HTTP/JSON gateway (the push path) or the peer's fence file
written on the shared volume (the poll path). The producer is idempotent
and speaks raw wire (kwire), so its id and epoch are known exactly. (The
full zombie through the transaction coordinator is tested elsewhere.)
"""

import base64
import json
import os
import time
import urllib.request

import pytest

import kwire
from conftest import LEASE_TTL_MS, _serve
from harness import Cluster, wait_for

TARGET = 0
CLUSTER_ID = "kaas-cluster"  # the brokers' default --cluster-id
# The broker that made the bump: none of the three (one that has left; a
# live one would have recorded its own bump when it made it, and skips its
# own key and file).
BUMPER = 9


@pytest.fixture
def push_cluster(request, tmp_path):
    """The push path only: the files are read at start and then not for ten minutes."""
    yield from _serve(request, Cluster(tmp_path / "cluster", n=3, lease_ttl_ms=LEASE_TTL_MS,
                                       extra_args=("--fence-poll-ms", "600000")))


@pytest.fixture
def poll_cluster(request, tmp_path):
    """The poll path only (--fence-push false), polling every 300 ms."""
    yield from _serve(request, Cluster(tmp_path / "cluster", n=3, lease_ttl_ms=LEASE_TTL_MS,
                                       extra_args=("--fence-push", "false",
                                                   "--fence-poll-ms", "300")))


class Producer:
    """An idempotent producer on one partition, at one epoch, sequence by sequence."""

    def __init__(self, addr: str, topic: str):
        err, self.pid, self.epoch = kwire.init_producer_id(addr)
        assert err == 0, f"InitProducerId: {err}"
        self.topic, self.seq = topic, 0

    def send(self, addr: str) -> int:
        """One batch at the next sequence; the error code (the sequence
        moves on only when it was written)."""
        batch = kwire.record_batch([f"r-{self.seq}".encode()], self.pid, self.epoch, self.seq)
        err, _ = kwire.produce(addr, self.topic, TARGET, batch)
        if err == 0:
            self.seq += 1
        return err

    def refused(self, addr: str):
        """A condition for wait_for: true once `addr` refuses the batch as
        INVALID_PRODUCER_EPOCH; fails on any error but that and a leader
        move."""
        def check():
            err = self.send(addr)
            assert err in (0, kwire.NOT_LEADER_OR_FOLLOWER, kwire.INVALID_PRODUCER_EPOCH), \
                f"Produce answered {err}"
            return err == kwire.INVALID_PRODUCER_EPOCH
        return check


def etcd_put(cluster: Cluster, key: str, value: bytes) -> None:
    """A put through etcd's gRPC gateway (no etcd client library needed)."""
    body = json.dumps({"key": base64.b64encode(key.encode()).decode(),
                       "value": base64.b64encode(value).decode()}).encode()
    req = urllib.request.Request(cluster.etcd.url + "/v3/kv/put", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200, r.read()


def push_fence(cluster: Cluster, peer: int, pid: int, epoch: int) -> None:
    rec = {"pid": pid, "epoch": epoch, "at_ms": int(time.time() * 1000)}
    etcd_put(cluster, f"/kaas/{CLUSTER_ID}/fences/{peer}", json.dumps(rec).encode())


def write_fence_file(cluster: Cluster, peer: int, pid: int, epoch: int) -> None:
    """Peer `peer`'s outbound fence file, replaced atomically as the broker does."""
    d = cluster.shared / "__cluster" / "producer_fences"
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".from-{peer}.json.tmp"
    tmp.write_text(json.dumps({str(pid): {"epoch": epoch, "at_ms": int(time.time() * 1000)}}))
    os.replace(tmp, d / f"from-{peer}.json")


def setup_producer(cluster: Cluster, topic_name) -> tuple[str, int, Producer]:
    """A one-partition topic, its leader, and a producer that wrote a batch to it."""
    topic = topic_name()
    cluster.create_topic(topic, 1)
    leader = cluster.leader_of(topic, TARGET)
    p = Producer(cluster.addr(leader), topic)
    # Metadata names the leader a moment before it has opened the partition.
    wait_for(lambda: p.send(cluster.addr(leader)) == 0, 10, f"broker {leader} to take a batch")
    return topic, leader, p


def test_a_pushed_fence_refuses_the_old_epoch_on_the_leader(push_cluster, topic_name):
    c = push_cluster
    _, leader, p = setup_producer(c, topic_name)
    push_fence(c, BUMPER, p.pid, p.epoch + 1)
    started = time.monotonic()
    # The files are not read again for ten minutes: only the push can do it.
    wait_for(p.refused(c.addr(leader)), 10, "the leader to refuse the old epoch after the push")
    assert time.monotonic() - started < 10


def test_a_partition_taken_over_later_keeps_the_peer_fence(push_cluster, topic_name):
    """Every broker remembers the fences it applied: the one taking the
    partition over refuses the old epoch too (the fence was only in the old
    leader's memory, not in the partition's log)."""
    c = push_cluster
    topic, leader, p = setup_producer(c, topic_name)
    push_fence(c, BUMPER, p.pid, p.epoch + 1)
    wait_for(p.refused(c.addr(leader)), 10, "the leader to refuse the old epoch after the push")
    c.kill9(leader)
    new = c.wait_leader_moved(topic, TARGET, leader, timeout=c.lease_ttl_ms / 1000 * 5 + 20)

    def answer():
        err = p.send(c.addr(new))
        return None if err == kwire.NOT_LEADER_OR_FOLLOWER else ("answered", err)
    _, err = wait_for(answer, 20, f"broker {new} to answer as the leader")
    assert err == kwire.INVALID_PRODUCER_EPOCH, f"the new leader answered {err} to the old epoch"


def test_with_push_off_only_the_poll_of_the_fence_files_fences(poll_cluster, topic_name):
    c = poll_cluster
    _, leader, p = setup_producer(c, topic_name)
    addr = c.addr(leader)
    # --fence-push false: a put in etcd is not applied ...
    push_fence(c, BUMPER, p.pid, p.epoch + 1)
    until = time.monotonic() + 1.5  # five polls
    while time.monotonic() < until:
        assert p.send(addr) == 0, "fenced without the file"
        time.sleep(0.05)
    # ... the peer's fence file is, at the next poll.
    write_fence_file(c, BUMPER, p.pid, p.epoch + 1)
    started = time.monotonic()
    wait_for(p.refused(addr), 10, "the leader to refuse the old epoch after the file")
    assert time.monotonic() - started < 5
