"""Replication factor across three brokers (with
min.insync.replicas): a topic of replication factor 3 is described by every
client view as three replicas, all in sync, leader first; a manual
assignment's first broker leads; a factor of 4 is refused with Kafka's
message. After a kill -9 of one replica the replica set stays (Kafka's
shape) and the ISR shrinks to the live ones, so with min.insync.replicas=3 an
acks=all Produce is answered NOT_ENOUGH_REPLICAS; once the broker is back
in the ISR, the same Produce succeeds.
"""

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from harness import create_topics, wait_for

BOUND_S = 30.0


def _create(admin, topic):
    create_topics(admin, [topic])


def _partitions(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr) from a fresh client's Metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t = admin.list_topics(topic, timeout=10).topics[topic]
    return {p: (m.leader, list(m.replicas), list(m.isrs)) for p, m in t.partitions.items()}


def _produce_all(bootstrap: str, topic: str) -> KafkaError | None:
    """One acks=all record to partition 0, not retried: its delivery error."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                  "enable.idempotence": False, "linger.ms": 0, "message.timeout.ms": 10000})
    out = []
    p.produce(topic, b"v", partition=0, on_delivery=lambda err, msg: out.append(err))
    assert p.flush(30) == 0
    return out[0]


def test_replication_factor_3_reports_three_replicas_and_the_isr_follows_live_brokers(
        cluster_factory, topic_name):
    c = cluster_factory()
    c.wait_ready()
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    too_many = topic_name("rf4")
    (f,) = admin.create_topics([NewTopic(too_many, 1, 4)]).values()
    with pytest.raises(KafkaException) as e:
        f.result(30)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert e.value.args[0].str() == (
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
        "cannot be reached because only 3 broker(s) are registered.")

    assigned = topic_name("assigned")
    _create(admin, NewTopic(assigned, 2, replica_assignment=[[3, 1], [2, 3]]))
    c.wait_ready(assigned, 2)
    parts = _partitions(c.bootstrap, assigned)
    assert parts[0] == (3, [3, 1], [3, 1]), "the first of an assignment leads"
    assert parts[1] == (2, [2, 3], [2, 3])

    topic = topic_name()
    _create(admin, NewTopic(topic, 3, 3, config={"min.insync.replicas": "3"}))
    c.wait_ready(topic, 3)
    (f,) = admin.describe_topics(TopicCollection([topic])).values()
    described = f.result(30)
    assert len(described.partitions) == 3
    for p in described.partitions:
        replicas = [n.id for n in p.replicas]
        isr = [n.id for n in p.isr]
        assert sorted(replicas) == [1, 2, 3], (p.id, replicas)
        assert replicas[0] == p.leader.id, (p.id, replicas, p.leader.id)
        assert isr == replicas, (p.id, isr, replicas)
    assert _produce_all(c.bootstrap, topic) is None

    leader, replicas, _ = _partitions(c.bootstrap, topic)[0]
    victim = replicas[-1]
    assert victim != leader
    c.kill9(victim)
    live = sorted(set(c.brokers) - {victim})

    def shrunk():
        parts = _partitions(c.addr(leader), topic)
        ok = all(sorted(r) == [1, 2, 3] and victim not in isr and l in live and isr[0] == l
                 and sorted(isr) == live for l, r, isr in parts.values())
        return parts if ok else None
    wait_for(shrunk, BOUND_S,
             lambda: f"the ISR to drop broker {victim}: {_partitions(c.addr(leader), topic)}", 0.1)

    err = _produce_all(c.addr(leader), topic)
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err

    c.start_broker(victim)
    c.wait_ready()

    def whole():
        parts = _partitions(c.addr(leader), topic)
        return parts if all(sorted(isr) == [1, 2, 3] for _, _, isr in parts.values()) else None
    wait_for(whole, BOUND_S,
             lambda: f"broker {victim} back in the ISR: {_partitions(c.addr(leader), topic)}", 0.1)
    assert _produce_all(c.bootstrap, topic) is None
