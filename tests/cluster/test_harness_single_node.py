"""The harness, workload and checker on one single-node broker with no
faults: every client's records must pass the checker. This keeps the test
machinery honest on its own (a harness that lost records by itself would
make every cluster failure look like the broker's), and it runs without etcd."""

from checker import assert_ok, check, check_group
from harness import Cluster, wait_for
from workload import (ConfluentGroupMember, ConfluentWriter, KafkaPythonWriter, KafkajsClient,
                      confluent_read_all, kafka_python_read_all)

PARTITIONS = 3


def test_the_workload_passes_the_checker_on_a_single_node_broker(tmp_path, topic_name):
    topic = topic_name()
    with Cluster(tmp_path / "single", n=1, etcd=False) as c:
        c.create_topic(topic, PARTITIONS)
        writers = [ConfluentWriter("sk", c.bootstrap, topic, PARTITIONS),
                   KafkaPythonWriter("sp", c.bootstrap, topic, PARTITIONS)]
        member = ConfluentGroupMember("sg", c.bootstrap, topic, f"{topic}-g")
        js = KafkajsClient("sj", c.bootstrap, topic, PARTITIONS, f"{topic}-jg", tmp_path / "js")
        try:
            for t in writers + [member]:
                t.start()
            wait_for(lambda: all(w.acked_count() >= 100 for w in writers)
                     and js.acked_count() >= 50, 60, "acknowledged records")
            for w in writers:
                w.stop()
            js.stop_producing()
            js.wait_produced()
            h = writers[0].history.merge(writers[1].history).merge(js.history())
            wait_for(lambda: check_group(h, member.delivered()) == [], 60, "the group to catch up")
            member.stop()
            reads = {"confluent": confluent_read_all(c.bootstrap, topic, PARTITIONS),
                     "kafka-python": kafka_python_read_all(c.bootstrap, topic, PARTITIONS),
                     "kafkajs": js.finish()}
            assert_ok(check_group(h, js.delivered()))
            assert_ok(check(h, reads))
            assert h.acked.keys() == h.attempted
        finally:
            js.kill()
