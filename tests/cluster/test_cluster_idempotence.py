"""Idempotent producers across a failover.

The producer-state (producer id, epoch, last sequences) must come back with
the partition when another broker takes it over, so a producer that retries
the batches in flight at the kill gets them deduplicated, not written twice
and not refused: no duplicate (checker), and no error in any delivery report
(an OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID storm would show as
failed deliveries or a fatal idempotence error).
"""

from checker import assert_ok, check
from harness import wait_for
from workload import (ConfluentWriter, KafkaPythonWriter, confluent_read_all,
                      kafka_python_read_all)

PARTITIONS = 4


def test_idempotent_producers_keep_exactly_once_across_a_leader_kill(cluster, topic_name, scale):
    topic = topic_name()
    cluster.create_topic(topic, PARTITIONS)
    boot = cluster.bootstrap
    # Fast, so batches are in flight when the leader dies.
    writers = [ConfluentWriter("ik", boot, topic, PARTITIONS, interval_s=0.0005),
               KafkaPythonWriter("ip", boot, topic, PARTITIONS, interval_s=0.001)]
    for w in writers:
        w.start()
    try:
        for round_ in range(scale):
            wait_for(lambda: all(w.acked_count() >= 200 * (round_ + 1) for w in writers), 60,
                     lambda: "acknowledged records before the kill: "
                     + ", ".join(f"{w.name} sent {w.sent} acked {w.acked_count()} "
                                 f"errors {sorted(set(w.errors))[:3]} fatal {w.fatal[:3]}"
                                 for w in writers))
            victim = cluster.leader_of(topic, 0)
            before = {w.name: w.acked_on(0) for w in writers}
            cluster.kill9(victim)
            cluster.wait_leader_moved(topic, 0, victim)
            wait_for(lambda: all(w.acked_on(0) >= before[w.name] + 50 for w in writers), 60,
                     f"acknowledged records on the moved partition (round {round_})")
            cluster.start_broker(victim)
            cluster.wait_ready(topic, PARTITIONS)
        for w in writers:
            w.stop()
        for w in writers:
            assert w.fatal == [], f"{w.name}: fatal errors {w.fatal}"
            assert w.errors == [], f"{w.name}: {len(w.errors)} failed deliveries: " \
                                   f"{sorted(set(w.errors))}"
        history = writers[0].history.merge(writers[1].history)
        reads = {"confluent": confluent_read_all(boot, topic, PARTITIONS),
                 "kafka-python": kafka_python_read_all(boot, topic, PARTITIONS)}
        assert_ok(check(history, reads))
        # Idempotence with no failed delivery: every record sent was acknowledged.
        assert history.acked.keys() == history.attempted
    finally:
        for w in writers:
            if w.is_alive():
                w.stop()
