"""The zombie leader.

The leader of a partition is frozen (SIGSTOP) while an idempotent acks=all
producer writes to it, stays frozen past its lease until another broker leads
the partition, and is then thawed (SIGCONT). Two raw Produce requests are
aimed at the zombie itself: one written into its socket WHILE it was frozen
(it reads it only after the takeover, the classic late write) and one sent
right after SIGCONT. Neither may be acknowledged (the second must be
NOT_LEADER_OR_FOLLOWER), and neither's record may ever be readable; every
record acknowledged by anyone is readable exactly once at its offset.
"""

import threading
import time

from checker import assert_ok, check
from harness import wait_for
import kwire
from workload import ConfluentWriter, confluent_read_all, kafka_python_read_all

PARTITIONS = 3
TARGET = 0


def _zombie_produce(addr, topic, values, timeout):
    """(error code, base offset) of one raw acks=-1 Produce, or the WireError."""
    try:
        return kwire.produce(addr, topic, TARGET, kwire.record_batch(values), timeout=timeout)
    except kwire.WireError as e:
        return e


def test_a_paused_leader_acknowledges_nothing_after_takeover_and_its_writes_never_appear(
        cluster, topic_name, scale):
    topic = topic_name()
    cluster.create_topic(topic, PARTITIONS)
    zombie = cluster.leader_of(topic, TARGET)
    assert zombie in cluster.live_ids()
    zaddr = cluster.addr(zombie)
    writer = ConfluentWriter("zw", cluster.bootstrap, topic, PARTITIONS, only_partition=TARGET)
    writer.start()
    late_values = [f"zombie-late-{i}".encode() for i in range(3)]
    fresh_values = [f"zombie-fresh-{i}".encode() for i in range(3)]
    try:
        wait_for(lambda: writer.acked_count() >= 100, 60, "acknowledged records before the pause")
        cluster.pause(zombie)
        paused_at = time.monotonic()
        # The late write: queued in the frozen broker's socket, read after the takeover.
        late: dict = {}
        sender = threading.Thread(target=lambda: late.update(
            r=_zombie_produce(zaddr, topic, late_values, timeout=120)), daemon=True)
        sender.start()

        acked_before_takeover = writer.acked_count()
        new_leader = cluster.wait_leader_moved(topic, TARGET, zombie,
                                               timeout=cluster.lease_ttl_ms / 1000 * 5 + 20)
        moved_after = time.monotonic() - paused_at
        # The lease was last renewed at most one keep-alive interval before
        # the pause (a third of the TTL, or less), so it expires no sooner
        # than about 2/3 TTL after it; half the TTL leaves room for that.
        assert moved_after >= cluster.lease_ttl_ms / 1000 * 0.5, \
            f"partition moved {moved_after:.2f} s after the pause, before the lease could expire"
        wait_for(lambda: writer.acked_count() >= acked_before_takeover + 100, 60,
                 f"the producer to carry on with broker {new_leader}")
        # Keep it frozen a little longer than needed, then thaw it.
        time.sleep(max(0.0, cluster.lease_ttl_ms / 1000 * (1 + scale) - moved_after))
        cluster.resume(zombie)

        fresh = _zombie_produce(zaddr, topic, fresh_values, timeout=10)
        assert isinstance(fresh, tuple) and fresh[0] == kwire.NOT_LEADER_OR_FOLLOWER, \
            f"the thawed zombie answered a Produce with {fresh}, not NOT_LEADER_OR_FOLLOWER"
        sender.join(60)
        assert not sender.is_alive(), "the late Produce to the zombie got no answer or close"
        r = late.get("r")
        assert isinstance(r, kwire.WireError) or r[0] != 0, \
            f"the zombie acknowledged a write it read after the takeover: {r}"

        cluster.wait_ready(topic, PARTITIONS)
        more = writer.acked_count()
        wait_for(lambda: writer.acked_count() >= more + 50, 60, "writes after the thaw")
        writer.stop()
        assert writer.fatal == [], writer.fatal
        # The zombie's values are not in the history: any appearance is a phantom.
        reads = {"confluent": confluent_read_all(cluster.bootstrap, topic, PARTITIONS),
                 "kafka-python": kafka_python_read_all(cluster.bootstrap, topic, PARTITIONS)}
        assert_ok(check(writer.history, reads))
        # The direct answer of the new leader agrees with the readers.
        assert cluster.leader_of(topic, TARGET, via=new_leader) in cluster.live_ids()
    finally:
        cluster.resume(zombie)
        if writer.is_alive():
            writer.stop()
