"""kafka-python 3 consumer groups against a real kaas broker: partitions
split between members, a member leaving or being SIGKILLed and another
taking over from the committed offsets, and committed offsets (with their
metadata) across a broker restart.
"""

import sys

from kafka import ConsumerRebalanceListener, KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from common import OP_TIMEOUT
from groups_common import (HEARTBEAT_MS, SESSION_MS, kill_and_takeover, leave_and_takeover,
                           poll_until, values)

# As group_member.py names this client.
NAME = "kafka-python"

OP_TIMEOUT_MS = int(OP_TIMEOUT * 1000)

def create_topic(bootstrap, topic, partitions=4):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=OP_TIMEOUT_MS)
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                            timeout_ms=OP_TIMEOUT_MS, wait_for_metadata=True)
    finally:
        admin.close()


def produce(bootstrap, topic, records):
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                             linger_ms=5, request_timeout_ms=OP_TIMEOUT_MS)
    try:
        futures = [producer.send(topic, value=v.encode(), partition=p) for p, v in records]
        producer.flush(timeout=OP_TIMEOUT)
        for f in futures:
            f.get(timeout=OP_TIMEOUT)  # raises on a failed send
    finally:
        producer.close()


class GroupConsumer:
    """An in-process group member that commits each record synchronously
    once it has "processed" it (appended it to `consumed`)."""

    def __init__(self, bootstrap, topic, group):
        self.topic = topic
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS, request_timeout_ms=OP_TIMEOUT_MS)
        self.consumed = []
        self.assignment = set()
        outer = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                outer.assignment = set()

            def on_partitions_assigned(self, assigned):
                outer.assignment = {tp.partition for tp in assigned}

        self.consumer.subscribe([topic], listener=Listener())

    def poll(self, timeout_ms=50):
        for tp, records in self.consumer.poll(timeout_ms=timeout_ms, max_records=1).items():
            for r in records:
                self.consumed.append((r.partition, r.offset, r.value.decode()))
                self.consumer.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})

    def close(self):
        self.consumer.close()


def test_two_consumers_split_partitions_and_the_survivor_resumes_from_commits(broker, topic_name):
    leave_and_takeover(sys.modules[__name__], broker, topic_name)


def test_a_killed_member_is_replaced_from_its_last_commit(broker, topic_name):
    kill_and_takeover(sys.modules[__name__], broker, topic_name)


def test_committed_offsets_and_metadata_survive_a_broker_restart(kaas, topic_name):
    topic = topic_name()
    create_topic(kaas.bootstrap, topic)
    produced = values(40, topic)
    produce(kaas.bootstrap, topic, produced)
    group = f"{topic}-group"
    tps = [TopicPartition(topic, p) for p in range(4)]
    c = KafkaConsumer(bootstrap_servers=kaas.bootstrap, group_id=group, enable_auto_commit=False,
                      request_timeout_ms=OP_TIMEOUT_MS)
    try:
        c.commit({tp: OffsetAndMetadata(3 + tp.partition, f"meta-{tp.partition}", -1)
                  for tp in tps})
    finally:
        c.close()

    kaas.restart()

    c = KafkaConsumer(bootstrap_servers=kaas.bootstrap, group_id=group, enable_auto_commit=False,
                      request_timeout_ms=OP_TIMEOUT_MS)
    try:
        got = [c.committed(tp, metadata=True, timeout_ms=OP_TIMEOUT_MS) for tp in tps]
        assert [(o.offset, o.metadata) for o in got] == [(3 + p, f"meta-{p}") for p in range(4)]
    finally:
        c.close()
    m = GroupConsumer(kaas.bootstrap, topic, group)
    try:
        want = [(p, v) for p, v in produced if int(v.rsplit("-", 1)[1]) // 4 >= 3 + p]
        poll_until([m], lambda: len(m.consumed) >= len(want), "the member to consume the rest")
        assert sorted((p, v) for p, _, v in m.consumed) == sorted(want)
        assert {p: min(o for q, o, _ in m.consumed if q == p) for p in range(4)} == {
            p: 3 + p for p in range(4)}
    finally:
        m.close()
