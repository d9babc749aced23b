"""Topic config changes across brokers: an
IncrementalAlterConfigs of retention.ms sent to a broker that does not lead
the partition is agreed in etcd and applied by the leader (its retention
deletes the old segments), and after the leader is killed -9 the broker
that takes the partition over applies it too, from the agreed record.
"""

import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

import kwire
from harness import create_topics, wait_for


def _earliest(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
    finally:
        c.close()


def _earliest_or_none(bootstrap: str, topic: str) -> int | None:
    """The earliest offset, or None while a client still learns that a
    broker died (librdkafka fails a request in flight to a broker that left
    the metadata with _DESTROY_BROKER; the next attempt asks the live ones)."""
    try:
        return _earliest(bootstrap, topic)
    except KafkaException:
        return None


def _write_old(bootstrap: str, topic: str, n: int) -> None:
    """`n` records an hour old, one batch each (segment.bytes 1024: many segments)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    old = int(time.time() * 1000) - 3_600_000
    for i in range(n):
        p.produce(topic, value=b"x" * 300, partition=0, timestamp=old)
        assert p.flush(30) == 0


def test_a_config_change_is_agreed_and_applied_by_whoever_leads(cluster_factory, topic_name):
    c = cluster_factory(extra_args=("--retention-check-ms", "200"))
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    create_topics(admin, [NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})])
    c.wait_ready(topic, 1)
    leader = c.leader_of(topic, 0)
    other = min(set(c.brokers) - {leader})
    _write_old(c.bootstrap, topic, 30)
    assert _earliest(c.bootstrap, topic) == 0

    via_other = AdminClient({"bootstrap.servers": c.addr(other)})
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    for f in via_other.incremental_alter_configs([res]).values():
        f.result(30)
    first = wait_for(lambda: _earliest(c.bootstrap, topic) or None, 15,
                     f"broker {leader} (the leader) to apply retention.ms")

    c.kill9(leader)
    successor = c.wait_leader_moved(topic, 0, leader)
    _write_old(c.bootstrap, topic, 30)
    wait_for(lambda: (_earliest_or_none(c.bootstrap, topic) or 0) > first + 20 or None, 15,
             f"broker {successor} (the new leader) to apply the agreed retention.ms")
    # A client made before the kill may have sent this to the dead broker;
    # ask the successor with a fresh one.
    via_successor = AdminClient({"bootstrap.servers": c.addr(successor)})
    (f,) = via_successor.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    assert f.result(30)["retention.ms"].value == "60000"


def test_a_dynamic_broker_default_is_agreed_and_applied_by_every_broker(cluster_factory, topic_name):
    """log.retention.ms set on the default broker resource through one
    broker: every broker describes it as the dynamic default, the leader of
    a topic without its own retention.ms deletes hour-old segments, and a
    topic with its own keeps them."""
    c = cluster_factory(extra_args=("--retention-check-ms", "200"))
    plain, own = topic_name("plain"), topic_name("own")
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    create_topics(admin, [
        NewTopic(plain, 1, 1, config={"segment.bytes": "1024"}),
        NewTopic(own, 1, 1, config={"segment.bytes": "1024", "retention.ms": "-1"})])
    c.wait_ready(plain, 1)
    c.wait_ready(own, 1)
    _write_old(c.bootstrap, plain, 30)
    _write_old(c.bootstrap, own, 30)
    via = min(c.brokers)
    err, msg = kwire.incremental_alter_configs(
        c.addr(via), kwire.RESOURCE_BROKER, "",
        [("log.retention.ms", kwire.CONFIG_SET, "60000")])
    assert err == 0, msg
    for n in sorted(c.brokers):
        wait_for(lambda: kwire.describe_configs(c.addr(n), kwire.RESOURCE_TOPIC, plain)[1]
                 .get("retention.ms") == ("60000", 3) or None, 10,
                 f"broker {n} to describe retention.ms as the dynamic default")
    wait_for(lambda: _earliest_or_none(c.bootstrap, plain) or None, 15,
             f"broker {c.leader_of(plain, 0)} (the leader) to apply the dynamic default")
    assert _earliest(c.bootstrap, own) == 0, "a topic's own retention.ms wins"
    err, configs = kwire.describe_configs(c.addr(max(c.brokers)), kwire.RESOURCE_BROKER, "")
    assert err == 0 and configs == {"log.retention.ms": ("60000", 3)}, configs
