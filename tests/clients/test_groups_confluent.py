"""confluent-kafka (librdkafka) consumer groups against a real kaas broker:
partitions split between members, a member leaving or being SIGKILLed and
another taking over from the committed offsets, static membership (KIP-345)
without a rebalance, and committed offsets across a broker restart.
"""

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from common import OP_TIMEOUT
from groups_common import (HEARTBEAT_MS, SESSION_MS, kill_and_takeover, leave_and_takeover,
                           poll_until, split, values)

# As group_member.py names this client.
NAME = "confluent"


def create_topic(bootstrap, topic, partitions=4):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=OP_TIMEOUT, request_timeout=OP_TIMEOUT)
    futures[topic].result(timeout=OP_TIMEOUT)


def produce(bootstrap, topic, records):
    """Writes [(partition, value)] and waits until every one is acknowledged."""
    failed = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    for p, v in records:
        producer.produce(topic, value=v.encode(), partition=p,
                         on_delivery=lambda err, msg: err and failed.append(str(err)))
        producer.poll(0)
    assert producer.flush(OP_TIMEOUT) == 0
    assert failed == []


class GroupConsumer:
    """An in-process group member that commits each record synchronously
    once it has "processed" it (appended it to `consumed`)."""

    def __init__(self, bootstrap, topic, group, **conf):
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            **conf,
        })
        self.consumed = []   # (partition, offset, value)
        self.assignment = set()
        self.assigns = 0
        self.revokes = 0
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, _consumer, partitions):
        self.assignment = {tp.partition for tp in partitions}
        self.assigns += 1

    def _revoked(self, _consumer, _partitions):
        self.assignment = set()
        self.revokes += 1

    def poll(self, timeout=0.05):
        msg = self.consumer.poll(timeout)
        if msg is None:
            return
        err = msg.error()
        if err is not None:
            assert not err.fatal(), str(err)
            return
        self.consumed.append((msg.partition(), msg.offset(), msg.value().decode()))
        self.consumer.commit(message=msg, asynchronous=False)

    def close(self):
        self.consumer.close()


def test_two_consumers_split_partitions_and_the_survivor_resumes_from_commits(broker, topic_name):
    leave_and_takeover(sys.modules[__name__], broker, topic_name)


def test_a_killed_member_is_replaced_from_its_last_commit(broker, topic_name):
    kill_and_takeover(sys.modules[__name__], broker, topic_name)


def test_a_static_member_rejoins_without_a_rebalance(broker, topic_name):
    topic = topic_name()
    create_topic(broker, topic)
    group = f"{topic}-group"
    a = GroupConsumer(broker, topic, group, **{"group.instance.id": "static-a"})
    b = GroupConsumer(broker, topic, group, **{"group.instance.id": "static-b"})
    b2 = None
    try:
        poll_until([a, b], lambda: split(a.assignment, b.assignment), "the partitions to be split")
        b_had = set(b.assignment)
        a_before = (a.assigns, a.revokes, set(a.assignment))
        b.close()  # a static member does not send LeaveGroup
        b2 = GroupConsumer(broker, topic, group, **{"group.instance.id": "static-b"})
        poll_until([a, b2], lambda: b2.assignment == b_had, "the restarted member's assignment")
        # A rebalance would reach A through its next heartbeat: poll through
        # a few heartbeat intervals and see that none came.
        quiet_until = time.monotonic() + 4 * HEARTBEAT_MS / 1000
        while time.monotonic() < quiet_until:
            a.poll()
            b2.poll()
        assert (a.assigns, a.revokes, a.assignment) == a_before
        admin = AdminClient({"bootstrap.servers": broker})
        desc = admin.describe_consumer_groups([group])[group].result(timeout=OP_TIMEOUT)
        assert desc.state.name == "STABLE"
        assert sorted(m.group_instance_id for m in desc.members) == ["static-a", "static-b"]
    finally:
        a.close()
        if b2 is not None:
            b2.close()


def test_committed_offsets_and_metadata_survive_a_broker_restart(kaas, topic_name):
    topic = topic_name()
    create_topic(kaas.bootstrap, topic)
    produced = values(40, topic)
    produce(kaas.bootstrap, topic, produced)
    group = f"{topic}-group"
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, 3 + p, f"meta-{p}") for p in range(4)],
                 asynchronous=False)
    finally:
        c.close()

    kaas.restart()

    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(4)], timeout=OP_TIMEOUT)
        assert [(tp.partition, tp.offset, tp.metadata) for tp in got] == [
            (p, 3 + p, f"meta-{p}") for p in range(4)]
    finally:
        c.close()
    # A member of the group resumes exactly there.
    m = GroupConsumer(kaas.bootstrap, topic, group)
    try:
        want = [(p, v) for p, v in produced if int(v.rsplit("-", 1)[1]) // 4 >= 3 + p]
        poll_until([m], lambda: len(m.consumed) >= len(want), "the member to consume the rest")
        assert sorted((p, v) for p, _, v in m.consumed) == sorted(want)
        assert {p: min(o for q, o, _ in m.consumed if q == p) for p in range(4)} == {
            p: 3 + p for p in range(4)}
    finally:
        m.close()
