"""Topic configs changed on a running broker with confluent-kafka's
AdminClient: IncrementalAlterConfigs of retention.ms and
cleanup.policy take effect within one retention check / cleaner pass,
DescribeConfigs shows them as dynamic topic configs, they survive a
restart, validate_only changes nothing, a bad value is refused with
INVALID_CONFIG, and AlterConfigs replaces the whole override set.
"""

import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewTopic, ResourceType)

from conftest import KaasBroker, report_broker_output
from common import poll_until


def _incremental(admin, topic, ops, validate_only=False):
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    for f in admin.incremental_alter_configs([res], validate_only=validate_only).values():
        f.result(30)


def _described(admin, topic):
    (f,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return f.result(30)


def _earliest(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        low, _ = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low
    finally:
        c.close()


def _values(bootstrap, topic):
    """{key: value} of partition 0, read to its end (last value per key)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out, n = {}, 0
    try:
        while True:
            m = c.poll(5)
            if m is None:
                raise AssertionError("no end of partition")
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out, n
                raise KafkaException(m.error())
            out[m.key()] = m.value()
            n += 1
    finally:
        c.close()


@pytest.fixture
def broker(request, tmp_path):
    b = KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                   extra_args=("--retention-check-ms", "200", "--log-cleaner-backoff-ms", "100"))
    report_broker_output(request.node, b)
    b.start()
    yield b
    b.stop()


def test_incremental_alter_configs_take_effect_on_a_running_broker_and_survive_a_restart(
        broker, topic_name):
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    old = int(time.time() * 1000) - 3_600_000
    for i in range(60):
        p.produce(topic, key=b"k%d" % (i % 5), value=b"v%03d" % i + b"x" * 200, partition=0,
                  timestamp=old)
        p.flush(10)  # one batch each: many segments
    assert _earliest(broker.bootstrap, topic) == 0

    # validate_only changes nothing.
    _incremental(admin, topic, [("retention.ms", "60000", AlterConfigOpType.SET)], validate_only=True)
    assert _described(admin, topic)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # A bad value is refused as Kafka refuses it.
    with pytest.raises(KafkaException) as e:
        _incremental(admin, topic, [("retention.ms", "soon", AlterConfigOpType.SET)])
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    with pytest.raises(KafkaException) as e:
        _incremental(admin, topic, [("retention.ms", "1", AlterConfigOpType.APPEND)])
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG

    # retention.ms: an hour-old log goes at the next retention check.
    _incremental(admin, topic, [("retention.ms", "60000", AlterConfigOpType.SET)])
    entry = _described(admin, topic)["retention.ms"]
    assert (entry.value, entry.source) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    poll_until(lambda: _earliest(broker.bootstrap, topic) > 0, 10,
               what="retention to delete the old segments")

    # cleanup.policy: APPEND compact (delete,compact, in that order, as
    # Kafka shows a list it appended to), then the cleaner
    # compacts what is written now.
    _incremental(admin, topic, [("cleanup.policy", "compact", AlterConfigOpType.APPEND),
                                ("min.cleanable.dirty.ratio", "0.01", AlterConfigOpType.SET),
                                ("retention.ms", None, AlterConfigOpType.DELETE)])
    d = _described(admin, topic)
    assert d["cleanup.policy"].value == "delete,compact"
    assert d["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    for i in range(60):
        p.produce(topic, key=b"k%d" % (i % 5), value=b"w%03d" % i + b"x" * 200, partition=0)
        p.flush(10)
    expected = {b"k%d" % k: b"w%03d" % (55 + k) + b"x" * 200 for k in range(5)}

    def compacted():
        values, n = _values(broker.bootstrap, topic)
        return values == expected and n < 30
    poll_until(compacted, 20, what="the cleaner to compact under the new policy")

    # Durable: a restart keeps the overrides.
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    d = _described(admin, topic)
    assert d["cleanup.policy"].value == "delete,compact"
    assert d["min.cleanable.dirty.ratio"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert _values(broker.bootstrap, topic)[0] == expected


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_replaces_the_whole_override_set(broker, topic_name):
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "1000000",
                                                                 "segment.ms": "3600000"})]).values():
        f.result(30)
    res = ConfigResource(ResourceType.TOPIC, topic, set_config={"max.message.bytes": "500000"})
    for f in admin.alter_configs([res]).values():
        f.result(30)
    d = _described(admin, topic)
    assert d["max.message.bytes"].value == "500000"
    assert d["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value, "left out: back to default"
    assert d["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # The new limit is in force: a record over it is refused.
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 2_000_000})
    errors = []
    p.produce(topic, value=b"x" * 600_000, partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_log_append_time_and_timestamp_bounds_as_kafka_applies_them(broker, topic_name):
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
    stamped, bounded = topic_name("stamped"), topic_name("bounded")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([
            NewTopic(stamped, 1, 1, config={"message.timestamp.type": "LogAppendTime"}),
            NewTopic(bounded, 1, 1, config={"message.timestamp.before.max.ms": "3600000"})]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    before = int(time.time() * 1000)
    p.produce(stamped, key=b"k", value=b"v", partition=0, timestamp=1000)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex})
    c.assign([TopicPartition(stamped, 0, OFFSET_BEGINNING)])
    m = poll_until(lambda: c.poll(0.5), 10, what="the stamped record")
    c.close()
    kind, ts = m.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and ts >= before, (kind, ts)

    errors = []
    p.produce(bounded, value=b"old", partition=0, timestamp=before - 7_200_000,
              on_delivery=lambda e, m: errors.append(e))
    p.flush(30)  # its own batch: a refusal takes the whole batch, as on Kafka
    p.produce(bounded, value=b"recent", partition=0, timestamp=before - 60_000,
              on_delivery=lambda e, m: errors.append(e))
    p.flush(30)
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_TIMESTAMP, None]



def test_static_broker_defaults_apply_to_topics_and_are_described_with_their_source(
        request, tmp_path, topic_name):
    """`--override log.retention.minutes=30` (Kafka's broker name, in
    minutes) is every topic's retention unless the topic sets its own;
    DescribeConfigs says where each value comes from, with its synonyms
    (the cluster-wide dynamic default is set on the default broker resource,
    which librdkafka cannot name: tests/cluster covers it over the wire)."""
    b = KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                   extra_args=("--retention-check-ms", "200",
                               "--override", "log.retention.minutes=30",
                               "--override", "log.segment.bytes=1024"))
    report_broker_output(request.node, b)
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        plain, own = topic_name("plain"), topic_name("own")
        for f in admin.create_topics([NewTopic(plain, 1, 1),
                                      NewTopic(own, 1, 1, config={"retention.ms": "-1"})]).values():
            f.result(30)
        (f,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, plain)]).values()
        d = f.result(30)
        e = d["retention.ms"]
        # As Kafka describes it: the synonyms of log.retention.ms start at
        # log.retention.ms itself, which is not set (and has no default), so
        # none is listed and the source is DEFAULT_CONFIG (Kafka's
        # ConfigHelper drops the synonyms before the config's own name).
        assert (e.value, e.source) == ("1800000", ConfigSource.DEFAULT_CONFIG.value)
        assert [(s.name, s.value, s.source) for s in e.synonyms.values()] == []
        assert not e.is_read_only and not e.is_sensitive
        assert d["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
        assert (d["segment.bytes"].value, d["segment.bytes"].source) == (
            "1024", ConfigSource.STATIC_BROKER_CONFIG.value)
        (f,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, own)]).values()
        e = f.result(30)["retention.ms"]
        assert (e.value, e.source) == ("-1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        # The broker's own view: the static default and whether it may change at run time.
        (f,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
        d = f.result(30)
        # Each broker name with its own value: log.retention.ms is not set
        # (null, as on Kafka), log.retention.minutes is.
        assert d["log.retention.minutes"].value == "30"
        assert d["log.retention.minutes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert d["log.retention.ms"].value is None
        assert d["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
        assert not d["log.retention.ms"].is_read_only
        assert d["log.retention.hours"].value == "168"
        assert d["log.message.format.version"].is_read_only
        assert d["num.partitions"].is_read_only

        # Hour-old records in both: the default deletes them, the override keeps them.
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        old = int(time.time() * 1000) - 3_600_000
        for t in (plain, own):
            for i in range(20):
                p.produce(t, value=b"x" * 300, partition=0, timestamp=old)
                assert p.flush(10) == 0
        poll_until(lambda: _earliest(b.bootstrap, plain) > 0, 10,
                   what="the static default to delete the old segments")
        assert _earliest(b.bootstrap, own) == 0, "a topic's own retention.ms wins over the default"
    finally:
        b.stop()


def test_a_bad_static_default_stops_the_broker_at_start_with_kafkas_message(tmp_path):
    import subprocess
    from conftest import KAAS_BIN
    r = subprocess.run([str(KAAS_BIN), "broker", "--listen", "127.0.0.1:0", "--data-dir",
                        str(tmp_path / "d"), "--override", "log.cleanup.policy=shred"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "Invalid value shred for configuration cleanup.policy" in r.stderr, r.stderr
