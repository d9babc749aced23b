"""Three brokers + etcd under real clients.

confluent-kafka, kafka-python and kafkajs each produce (idempotent, acks=all)
and each runs a consumer group across the brokers, while the broker that
coordinates the confluent group is killed with SIGKILL (with $KAAS_CLUSTER_SOAK,
more kills, each broker restarted after). The clients must carry on on the
survivors, the groups must get every acknowledged record, and three full
readers (one per client) must each find every acknowledged record exactly
once (checker.check).
"""

from checker import assert_ok, check, check_group
from harness import wait_for
import kwire
from workload import (ConfluentGroupMember, ConfluentWriter, KafkaPythonGroupMember,
                      KafkaPythonWriter, KafkajsClient, confluent_read_all,
                      kafka_python_read_all)

PARTITIONS = 6


def test_clients_carry_on_and_lose_nothing_when_a_broker_is_killed(cluster, topic_name,
                                                                      tmp_path, scale):
    topic = topic_name()
    cluster.create_topic(topic, PARTITIONS)
    boot = cluster.bootstrap
    writers = [ConfluentWriter("ck", boot, topic, PARTITIONS),
               KafkaPythonWriter("kp", boot, topic, PARTITIONS)]
    groups = {"confluent": [ConfluentGroupMember(f"cg{i}", boot, topic, f"{topic}-cg")
                            for i in range(2)],
              "kafka-python": [KafkaPythonGroupMember(f"kg{i}", boot, topic, f"{topic}-kg")
                               for i in range(2)]}
    js = KafkajsClient("js", boot, topic, PARTITIONS, f"{topic}-jg", tmp_path / "kafkajs")
    try:
        for t in writers + [m for ms in groups.values() for m in ms]:
            t.start()
        wait_for(lambda: all(w.acked_count() >= 100 for w in writers) and js.acked_count() >= 50,
                 60, "every client to have records acknowledged before the fault")

        for round_ in range(scale):
            # The confluent group's coordinator, which also leads partitions.
            victim = cluster.group_coordinator(f"{topic}-cg")
            led = [p for p in range(PARTITIONS) if cluster.leader_of(topic, p) == victim]
            before = {w.name: w.acked_count() for w in writers}
            js_before = js.acked_count()
            cluster.kill9(victim)
            for p in led:
                cluster.wait_leader_moved(topic, p, victim)
            cluster.wait_ready(topic, PARTITIONS)
            # The clients carry on: more acknowledgements after the kill.
            wait_for(lambda: all(w.acked_count() >= before[w.name] + 100 for w in writers)
                     and js.acked_count() >= js_before + 25,
                     60, f"clients to carry on after broker {victim} was killed (round {round_})")
            # The moved group coordinator answers from a survivor.
            wait_for(lambda: kwire.find_coordinator(cluster.addr(min(cluster.live_ids())),
                                                    f"{topic}-cg")[1] in cluster.live_ids(),
                     30, "the group's coordinator to move to a live broker")
            cluster.start_broker(victim)
            cluster.wait_ready(topic, PARTITIONS)

        for w in writers:
            w.stop()
        js.stop_producing()
        js.wait_produced()
        history = writers[0].history
        for w in writers[1:]:
            history.merge(w.history)
        history.merge(js.history())
        for w in writers:
            assert w.fatal == [], f"{w.name}: fatal client errors {w.fatal}"

        for name, members in groups.items():
            wait_for(lambda: check_group(history, [d for m in members for d in m.delivered()])
                     == [], 90, f"the {name} group to receive every acknowledged record")
        # kafkajs's group member runs until finish(): it must have caught up first.
        wait_for(lambda: check_group(history, js.delivered()) == [], 90,
                 lambda: "the kafkajs group to receive every acknowledged record: "
                 + "; ".join(check_group(history, js.delivered())[:3]))
        for m in [m for ms in groups.values() for m in ms]:
            m.stop()

        reads = {"confluent": confluent_read_all(boot, topic, PARTITIONS),
                 "kafka-python": kafka_python_read_all(boot, topic, PARTITIONS),
                 "kafkajs": js.finish()}
        assert_ok(check_group(history, js.delivered()))
        assert_ok(check(history, reads))
        assert len(history.acked) >= 400
    finally:
        for t in writers + [m for ms in groups.values() for m in ms]:
            t._halt.set()  # a failed test leaves no client running into teardown
        js.kill()
