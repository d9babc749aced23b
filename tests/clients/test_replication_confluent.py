"""Replication factor and manual replica assignments on one broker, with
confluent-kafka's AdminClient: RF 1 (and -1, the broker
default) is created and described as one replica in sync, RF 2 is refused
with Kafka's INVALID_REPLICATION_FACTOR message, an assignment naming this
broker is accepted (CreateTopics and CreatePartitions) and one naming an
unknown broker or a broker twice is refused with INVALID_REPLICA_ASSIGNMENT,
and min.insync.replicas above the replication factor is accepted at
creation and asks for every replica, as Kafka 3.7 does.
"""

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def _create(admin, topic):
    (f,) = admin.create_topics([topic]).values()
    return f.result(30)


def _refusal(admin, topic) -> KafkaError:
    (f,) = admin.create_topics([topic]).values()
    with pytest.raises(KafkaException) as e:
        f.result(30)
    return e.value.args[0]


def _describe(admin, topic):
    (f,) = admin.describe_topics(TopicCollection([topic])).values()
    return f.result(30)


def _node_id(admin) -> int:
    (node,) = admin.list_topics(timeout=10).brokers
    return node


def test_replication_factor_one_or_default_is_one_replica_in_sync(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker})
    me = _node_id(admin)
    for rf in (1, -1):
        topic = topic_name(f"rf{rf}")
        _create(admin, NewTopic(topic, 2, rf))
        d = _describe(admin, topic)
        assert [p.id for p in d.partitions] == [0, 1]
        for p in d.partitions:
            assert p.leader.id == me
            assert [r.id for r in p.replicas] == [me]
            assert [r.id for r in p.isr] == [me]


def test_replication_factor_beyond_the_live_brokers_is_refused_with_kafkas_message(
        broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker})
    topic = topic_name()
    err = _refusal(admin, NewTopic(topic, 1, 2))
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert err.str() == ("Unable to replicate the partition 2 time(s): The target replication "
                         "factor of 2 cannot be reached because only 1 broker(s) are registered.")
    assert topic not in admin.list_topics(timeout=10).topics


def test_a_manual_assignment_naming_this_broker_is_accepted_in_create_topics_and_partitions(
        broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker})
    me = _node_id(admin)
    topic = topic_name()
    _create(admin, NewTopic(topic, 2, replica_assignment=[[me], [me]]))
    assert len(_describe(admin, topic).partitions) == 2
    (f,) = admin.create_partitions([NewPartitions(topic, 3, replica_assignment=[[me]])]).values()
    f.result(30)
    d = _describe(admin, topic)
    assert [p.id for p in d.partitions] == [0, 1, 2]
    assert all([r.id for r in p.replicas] == [me] for p in d.partitions)


def test_a_manual_assignment_naming_an_unknown_broker_or_one_twice_is_refused(
        broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker})
    me = _node_id(admin)
    unknown = me + 100
    topic = topic_name()
    err = _refusal(admin, NewTopic(topic, 1, replica_assignment=[[unknown]]))
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert err.str() == (f"The manual partition assignment includes broker {unknown}, "
                         "but no such broker is registered.")
    err = _refusal(admin, NewTopic(topic, 1, replica_assignment=[[me, me]]))
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert err.str() == f"The manual partition assignment includes the broker {me} more than once."
    assert topic not in admin.list_topics(timeout=10).topics

    _create(admin, NewTopic(topic, 1, 1))
    (f,) = admin.create_partitions([NewPartitions(topic, 2, replica_assignment=[[unknown]])]).values()
    with pytest.raises(KafkaException) as e:
        f.result(30)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert len(_describe(admin, topic).partitions) == 1


def test_min_insync_replicas_above_the_replication_factor_is_accepted_and_asks_for_every_replica(
        broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker})
    topic = topic_name()
    _create(admin, NewTopic(topic, 1, 1, config={"min.insync.replicas": "2"}))
    delivered = []
    p = Producer({"bootstrap.servers": broker, "acks": "all", "linger.ms": 0})
    p.produce(topic, b"v", on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(30) == 0
    assert delivered == [None]
