"""KAFKA-20357 across brokers, over the wire, with real processes
(scenarios IX-03, IX-08, IX-15 and IT-04, IT-05, IX-09 of
../shared/spec/kafka-txn-3.7.md, §4.5).

The story: a coordinator persists a rotation (or a bump), dies before the
producer hears back, another broker takes the coordinator's shard, and the
producer's retry must get the identity the lost reply carried. Apache 3.7
answers it PRODUCER_FENCED, because the record lacked the previous producer
id and last epoch; ours must not.

Seeding: `kaas txn-seed` (test-only, fault-injection builds) writes the
entry into the shard's state log on the shared volume through the real
store before any broker starts: CompleteCommit(P, 32766, last -1) for the
rotation, CompleteCommit(P, 5, last -1) for the bump.

The fault point (KAAS_FAULT=after-append-rotate / after-append-bump) aborts
the process right after the state record is durable and before the reply.
Every broker of the cluster is started with it, because which broker leads
T's shard is only known once they run (restarting the leader with the
variable would move the shard). No other broker can reach the point first:
the only transactional id in the test is T; only the shard leader appends
to T's state log; the one InitProducerId that rotates (bumps) goes to that
leader; and the retries on the new coordinator are retries (IX-08, IX-09:
answered from the stored entry, nothing appended). A new coordinator that
rotated or bumped again would hit the point and die too; the test then fails
naming it, which is the bug the test is about (a new pid or a second bump).
"""

import re

import kwire
from harness import seed_txn, wait_for
import txnlib

P = 1_000_000
ENTRY_METRIC = "kaas_txn_entry_epoch"


def stored(cluster, node: int, tid: str) -> tuple[int, int] | None:
    """(producer id, epoch) of `tid`'s entry as broker `node` holds it
    (kaas_txn_entry_epoch on /metrics), None when it holds none."""
    try:
        text = cluster.brokers[node].scrape()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(ENTRY_METRIC + "{") and f'transactional_id="{tid}"' in line:
            pid = re.search(r'producer_id="(-?\d+)"', line)
            if pid:
                return int(pid.group(1)), int(float(line.rsplit(" ", 1)[1]))
    return None


def _die_before_replying(cluster, tid: str, claim: tuple[int, int]) -> int:
    """Sends InitProducerId(tid, claim) to tid's coordinator, which must die
    before answering: asserts no reply and that the process exited by the
    fault; returns the dead broker's id."""
    x = cluster.txn_coordinator(tid)
    # The coordinator has loaded the seeded entry.
    wait_for(lambda: stored(cluster, x, tid) == claim, 30,
             lambda: f"broker {x} to hold the seeded entry {claim} (has {stored(cluster, x, tid)})")
    reply = kwire.send_no_reply(cluster.addr(x), kwire.INIT_PRODUCER_ID, 4,
                                kwire.init_producer_id_body(tid, claim), timeout=30, flexible=True)
    assert reply is None, \
        f"broker {x} answered {kwire.parse_init_producer_id(reply)} instead of dying first"
    b = cluster.brokers[x]
    code = b.proc.wait(timeout=15)
    b.expected_exit = True
    assert code != 0, f"broker {x} exited with {code}, not by the fault point"
    return x


def _new_coordinator(cluster, tid: str, dead: int) -> int:
    y = cluster.txn_coordinator(tid, timeout=cluster.lease_ttl_ms / 1000 * 5 + 20)
    assert y != dead and y in cluster.live_ids(), (y, dead)
    return y


def _others_answer_not_coordinator(cluster, tid: str, coordinator: int, claim) -> None:
    """A broker that does not lead the shard answers NOT_COORDINATOR."""
    for n in sorted(cluster.live_ids() - {coordinator}):
        err, _, _ = kwire.init_producer_id(cluster.addr(n), tid, claim)
        assert err == kwire.NOT_COORDINATOR, f"broker {n} (not the coordinator) answered {err}"


def test_a_rotation_retried_after_the_coordinator_died_gets_the_rotated_identity_from_another_broker(
        cluster_factory, topic_name):
    tid = "kafka-20357-rotation"
    c = cluster_factory(env={"KAAS_FAULT": "after-append-rotate"}, metrics=True,
                        before_start=lambda c: seed_txn(c.shared, tid, P, 32766, -1))
    topic = topic_name()
    c.create_topic(topic, 3)
    x = _die_before_replying(c, tid, (P, 32766))
    y = _new_coordinator(c, tid, x)
    # The rotation record the dead broker made durable, loaded by the new coordinator.
    rotated = wait_for(lambda: (lambda s: s if s and s[0] != P else None)(stored(c, y, tid)), 30,
                       lambda: f"broker {y} to load the rotated entry (has {stored(c, y, tid)})")
    q = rotated[0]
    assert rotated == (q, 0), f"the rotation record holds {rotated}"

    # IX-08: the retry gets the lost reply's (Q, 0), no new producer id.
    err, pid, epoch = txnlib.init(c, tid, claim=(P, 32766))
    assert (err, pid, epoch) == (0, q, 0), \
        f"the retry (P, 32766) on broker {y} answered {(err, pid, epoch)}, want (0, {q}, 0)"
    # IX-04 after the failover: a second retry, the same.
    assert txnlib.init(c, tid, claim=(P, 32766)) == (0, q, 0)
    assert y in c.live_ids(), f"broker {y} died: it rotated again"
    assert stored(c, y, tid) == (q, 0), "no new producer id was stored"
    _others_answer_not_coordinator(c, tid, y, (P, 32766))
    # IX-15: the producer goes on with (Q, 0).
    got = kwire.add_partitions_to_txn(c.addr(y), tid, q, 0, {topic: [0]})
    assert got == {(topic, 0): 0}, got


def test_a_bump_retried_after_the_coordinator_died_gets_the_bumped_epoch_from_another_broker(
        cluster_factory):
    tid = "kafka-20357-bump"
    c = cluster_factory(env={"KAAS_FAULT": "after-append-bump"}, metrics=True,
                        before_start=lambda c: seed_txn(c.shared, tid, P, 5, -1))
    x = _die_before_replying(c, tid, (P, 5))
    y = _new_coordinator(c, tid, x)
    wait_for(lambda: stored(c, y, tid) == (P, 6), 30,
             lambda: f"broker {y} to load the bumped entry (P, 6) (has {stored(c, y, tid)})")
    # IX-09: the retry (P, 5) gets (P, 6); IT-05: a second one too, no second bump.
    for attempt in range(2):
        got = txnlib.init(c, tid, claim=(P, 5))
        assert got == (0, P, 6), \
            f"retry {attempt + 1} (P, 5) on broker {y} answered {got}, want (0, {P}, 6)"
    assert y in c.live_ids(), f"broker {y} died: it bumped again"
    assert stored(c, y, tid) == (P, 6)
    _others_answer_not_coordinator(c, tid, y, (P, 5))
