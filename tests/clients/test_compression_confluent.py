"""compression.type as a topic config: a topic whose
compression.type names a codec stores every client batch in it, whatever
codec the producer used; transaction markers stay uncompressed; consumers
(confluent-kafka, kafka-python) read the records back intact; a change made
with IncrementalAlterConfigs applies to the next batch without a restart.

What was stored is read from the partition's segment files (plain record
batches, one after another), so a broker that kept the producer's codec
fails the codec assertions.
"""

import struct
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewTopic, ResourceType)
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from common import OP_TIMEOUT, poll_until

GZIP, SNAPPY, LZ4, ZSTD, NONE = 1, 2, 3, 4, 0


def stored_batches(data_dir, topic, partition=0):
    """[(codec, is_control, record_count)] of every batch in the partition's
    segments, in offset order."""
    out = []
    for seg in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        b = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(b):
            (length,) = struct.unpack_from(">i", b, pos + 8)
            if length < 49 or b[pos + 16] != 2:
                break  # the zero-filled tail
            (attributes,) = struct.unpack_from(">h", b, pos + 21)
            (count,) = struct.unpack_from(">i", b, pos + 57)
            out.append((attributes & 0x07, bool(attributes & 0x20), count))
            pos += 12 + length
    return out


def _create(admin, topic, config=None):
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=config or {})]).values():
        f.result(OP_TIMEOUT)


def _set(admin, topic, name, value):
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(OP_TIMEOUT)


def _described(admin, topic):
    (f,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return f.result(OP_TIMEOUT)


def _consume(bootstrap, topic, n):
    """The first n committed records of partition 0 as (key, value, headers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    try:
        while len(out) < n:
            m = c.poll(OP_TIMEOUT)
            assert m is not None, f"only {len(out)} of {n} records came"
            if m.error():
                raise KafkaException(m.error())
            out.append((m.key(), m.value(), m.headers() or []))
    finally:
        c.close()
    return out


def _consume_kafka_python(bootstrap, topic, n):
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      request_timeout_ms=int(OP_TIMEOUT * 1000),
                      bootstrap_timeout_ms=int(OP_TIMEOUT * 1000))
    tp = KpTopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    out = []
    try:
        for _ in range(50):
            for records in c.poll(timeout_ms=1000).values():
                out.extend((r.key, r.value) for r in records)
            if len(out) >= n:
                break
    finally:
        c.close()
    return out


def _produce(bootstrap, topic, codec, records, **extra):
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                  **extra})
    errors = []
    for key, value, headers in records:
        p.produce(topic, key=key, value=value, headers=headers, partition=0,
                  on_delivery=lambda e, m: errors.append(e))
    assert p.flush(OP_TIMEOUT) == 0
    assert errors == [None] * len(records)


def _records(tag, n):
    return [(b"%s-key-%03d" % (tag, i), (b"%s value %03d " % (tag, i)) * 10,
             [("h", b"%s-%d" % (tag, i))]) for i in range(n)]


def test_a_gzip_topic_stores_lz4_uncompressed_and_transactional_batches_gzip(kaas, topic_name):
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": kaas.bootstrap})
    _create(admin, topic, {"compression.type": "gzip"})
    entry = _described(admin, topic)["compression.type"]
    assert (entry.value, entry.source) == ("gzip", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    lz4, plain, txn = _records(b"lz4", 100), _records(b"none", 100), _records(b"txn", 20)
    _produce(kaas.bootstrap, topic, "lz4", lz4, **{"enable.idempotence": True})
    _produce(kaas.bootstrap, topic, "none", plain)
    p = Producer({"bootstrap.servers": kaas.bootstrap, "compression.type": "snappy",
                  "transactional.id": uuid.uuid4().hex})
    p.init_transactions(OP_TIMEOUT)
    p.begin_transaction()
    for key, value, headers in txn:
        p.produce(topic, key=key, value=value, headers=headers, partition=0)
    p.commit_transaction(OP_TIMEOUT)

    # The commit marker is written after EndTxn is answered.
    def with_marker():
        b = stored_batches(kaas.data_dir, topic)
        return b if any(control for _, control, _ in b) else None
    batches = poll_until(with_marker, 10, what="the commit marker")
    data = [b for b in batches if not b[1]]
    markers = [b for b in batches if b[1]]
    assert {codec for codec, _, _ in data} == {GZIP}, batches
    assert sum(count for _, _, count in data) == 220
    assert markers and {codec for codec, _, _ in markers} == {NONE}, "markers stay uncompressed"

    assert _consume(kaas.bootstrap, topic, 220) == [(k, v, h) for k, v, h in lz4 + plain + txn]
    assert _consume_kafka_python(kaas.bootstrap, topic, 220) == [
        (k, v) for k, v, _ in lz4 + plain + txn]


def test_a_compression_type_change_applies_to_the_next_batch_without_a_restart(kaas, topic_name):
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": kaas.bootstrap})
    _create(admin, topic)
    assert _described(admin, topic)["compression.type"].value == "producer"
    written = []
    for setting in ["producer", "uncompressed", "zstd", "snappy"]:
        if setting != "producer":
            _set(admin, topic, "compression.type", setting)
        batch = _records(setting.encode(), 10)
        _produce(kaas.bootstrap, topic, "lz4", batch)
        written += batch
    codecs = [codec for codec, _, _ in stored_batches(kaas.data_dir, topic)]
    # librdkafka may split a flush into several batches: each run is one codec.
    assert [c for i, c in enumerate(codecs) if i == 0 or codecs[i - 1] != c] == \
        [LZ4, NONE, ZSTD, SNAPPY], codecs

    with pytest.raises(KafkaException) as e:
        _set(admin, topic, "compression.type", "brotli")
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert _described(admin, topic)["compression.type"].value == "snappy"

    assert _consume(kaas.bootstrap, topic, 40) == written
    assert _consume_kafka_python(kaas.bootstrap, topic, 40) == [(k, v) for k, v, _ in written]
