"""Topic config changes across brokers (issue 25, "Done means"): an
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

from harness import wait_for


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
    for f in admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})]).values():
        f.result(30)
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
