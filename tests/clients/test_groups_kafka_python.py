"""kafka-python 3 consumer groups against a real kaas broker: partitions
split between members, a member leaving or being SIGKILLed and another
taking over from the committed offsets, and committed offsets (with their
metadata) across a broker restart.
"""

import time

from kafka import ConsumerRebalanceListener, KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from common import OP_TIMEOUT
from groups_common import (GROUP_TIMEOUT, HEARTBEAT_MS, SESSION_MS, MemberProcess,
                           check_takeover, values)

OP_TIMEOUT_MS = int(OP_TIMEOUT * 1000)
ALL = {0, 1, 2, 3}


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


def poll_until(consumers, condition, what, timeout=GROUP_TIMEOUT):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        for c in consumers:
            c.poll()


def split(a, b):
    return bool(a) and bool(b) and not (a & b) and (a | b) == ALL


def test_two_consumers_split_partitions_and_the_survivor_resumes_from_commits(broker, topic_name):
    topic = topic_name()
    create_topic(broker, topic)
    group = f"{topic}-group"
    records = values(600, topic)
    first, second, third = records[:200], records[200:400], records[400:]
    produce(broker, topic, first)
    a = GroupConsumer(broker, topic, group)
    b = GroupConsumer(broker, topic, group)
    try:
        poll_until([a, b], lambda: split(a.assignment, b.assignment), "the partitions to be split")
        # More records, so both members consume after the split.
        produce(broker, topic, second)
        na, nb = len(a.consumed), len(b.consumed)
        poll_until([a, b], lambda: len(a.consumed) - na >= 20 and len(b.consumed) - nb >= 20,
                   "both members to consume")
        # Every record A processed is committed (synchronously, one by one).
        a_held = set(a.assignment)
        a_commits = {}
        for p, o, _ in a.consumed:
            a_commits[p] = max(a_commits.get(p, 0), o + 1)
        a.close()  # LeaveGroup
        b_before = len(b.consumed)
        produce(broker, topic, third)
        produced = first + second + third
        poll_until([b], lambda: {(p, v) for p, _, v in a.consumed + b.consumed} >= set(produced),
                   "B to consume the rest")
        assert b.assignment == ALL
        dups = check_takeover(produced, a.consumed, b.consumed, a_commits)
        assert dups == [], "A committed everything it read before leaving"
        # B picked up each of A's partitions exactly at its last commit (each
        # record read before A left was committed by whoever read it).
        committed = {}
        for p, o, _ in a.consumed + b.consumed[:b_before]:
            committed[p] = max(committed.get(p, 0), o + 1)
        resumed = {p: min(o for q, o, _ in b.consumed[b_before:] if q == p) for p in a_held}
        assert resumed == {p: committed.get(p, 0) for p in a_held}
    finally:
        b.close()


def test_a_killed_member_is_replaced_from_its_last_commit(broker, topic_name):
    topic = topic_name()
    create_topic(broker, topic)
    produced = values(400, topic)
    produce(broker, topic, produced)
    group = f"{topic}-group"
    child = MemberProcess("kafka-python", broker, topic, group, commit_every=10, delay_ms=20)
    b = None
    try:
        child.wait_for(lambda: child.consumed, "the child to consume")
        b = GroupConsumer(broker, topic, group)
        child.wait_for(lambda: split(child.assignment or set(), b.assignment),
                       "the partitions to be split", also=b.poll)
        n = len(child.consumed)
        child.wait_for(lambda: len(child.consumed) - n >= 15, "the child to consume more",
                       also=b.poll)
        held = set(child.assignment)
        child.kill()
        killed_at = time.monotonic()
        poll_until([b], lambda: b.assignment == ALL, "B to take over every partition")
        took = time.monotonic() - killed_at
        poll_until([b], lambda: {(p, v) for p, _, v in child.consumed + b.consumed}
                   >= set(produced), "B to consume the rest")
        dups = check_takeover(produced, child.consumed, b.consumed, child.committed)
        assert {p for p, _ in dups} <= held, (dups, held, child.committed, child.commit_failures)
        assert took < SESSION_MS / 1000 + 15, f"takeover took {took:.1f} s"
        print(f"takeover after SIGKILL: {took:.2f} s (session.timeout.ms={SESSION_MS}); "
              f"{len(dups)} records re-read after the last commit")
    finally:
        child.stop()
        if b is not None:
            b.close()


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
