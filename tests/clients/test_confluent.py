"""confluent-kafka (librdkafka) against a real kaas broker.

Consumers use manual assignment only (assign() with explicit offsets, no
commits): kaas has no group coordinator yet. confluent-kafka refuses to build a
Consumer without group.id, so one is set, but nothing here uses it.
"""

import time

import pytest
from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, KafkaError,
                             Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from common import (CODECS, CONSUME_TIMEOUT, OP_TIMEOUT, PARTITIONS, TS_CONSUME_FROM,
                    TS_FLUSH_BEFORE, TS_PARTITION, by_partition, roundtrip_records,
                    timestamp_lookups, timestamp_records)


class Errors:
    """Collects librdkafka's client-level errors (error_cb)."""

    def __init__(self):
        self.all = []

    def __call__(self, err):
        self.all.append(err)

    def fatal(self):
        return [str(e) for e in self.all if e.fatal()]


def create_topic(bootstrap, topic, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=OP_TIMEOUT, request_timeout=OP_TIMEOUT)
    futures[topic].result(timeout=OP_TIMEOUT)  # raises KafkaException on failure
    md = admin.list_topics(topic=topic, timeout=OP_TIMEOUT)
    assert md.topics[topic].error is None, md.topics[topic].error
    assert sorted(md.topics[topic].partitions) == list(range(partitions))


def idempotent_producer(bootstrap, codec="none", errors=None):
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": codec,
        "linger.ms": 20,
        "message.timeout.ms": int(OP_TIMEOUT * 1000),
    }
    if errors is not None:
        conf["error_cb"] = errors
    return Producer(conf)


class Deliveries:
    """Delivery reports, in the order the producer reported them."""

    def __init__(self):
        self.ok = []      # (partition, offset, key, value)
        self.failed = []  # (key, error)

    def __call__(self, err, msg):
        if err is not None:
            self.failed.append((msg.key(), str(err)))
        else:
            self.ok.append((msg.partition(), msg.offset(), msg.key(), msg.value()))


def flush(producer):
    remaining = producer.flush(OP_TIMEOUT)
    assert remaining == 0, f"{remaining} records still undelivered after {OP_TIMEOUT} s"


def consume(bootstrap, topic, start_offsets):
    """Reads each partition in start_offsets ({partition: offset}) from that
    offset until the consumer reports the end of the partition (the high
    watermark). Returns ({partition: [Message]}, [non-fatal errors])."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "kaas-client-tests-unused",  # required by confluent-kafka; never used
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",  # an out-of-range fetch must fail, not silently reset
    })
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in start_offsets.items()])
        got = {p: [] for p in start_offsets}
        at_end = set()
        errors = []
        deadline = time.monotonic() + CONSUME_TIMEOUT
        while at_end != set(start_offsets):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no end of partition for {sorted(set(start_offsets) - at_end)} within "
                    f"{CONSUME_TIMEOUT} s; got {({p: len(m) for p, m in got.items()})} records; "
                    f"errors: {errors}")
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                err = msg.error()
                if err is None:
                    assert msg.topic() == topic
                    got[msg.partition()].append(msg)
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                elif err.fatal() or msg.topic() == topic:
                    raise AssertionError(f"consumer error: {err} (topic {msg.topic()}, "
                                         f"partition {msg.partition()})")
                else:
                    errors.append(str(err))
        return got, errors
    finally:
        consumer.close()


def watermarks(bootstrap, topic, partitions):
    consumer = Consumer({"bootstrap.servers": bootstrap,
                         "group.id": "kaas-client-tests-unused", "enable.auto.commit": False})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=OP_TIMEOUT)
                for p in partitions}
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_produce_then_consume_from_beginning(broker, topic_name, codec):
    topic = topic_name()
    create_topic(broker, topic)
    records = roundtrip_records(codec)
    expected = by_partition(records)

    errors = Errors()
    producer = idempotent_producer(broker, codec, errors)
    deliveries = Deliveries()
    for p, key, value in records:
        producer.produce(topic, key=key, value=value, partition=p, on_delivery=deliveries)
        producer.poll(0)
    flush(producer)
    assert deliveries.failed == []
    assert errors.fatal() == []
    # Every record acknowledged once, at the offset the broker must have given it.
    assert sorted(deliveries.ok) == sorted(
        (p, off, k, v) for p, recs in expected.items() for off, k, v in recs)

    assert watermarks(broker, topic, range(PARTITIONS)) == {
        p: (0, len(recs)) for p, recs in expected.items()}

    got, _ = consume(broker, topic, {p: OFFSET_BEGINNING for p in range(PARTITIONS)})
    assert {p: [(m.offset(), m.key(), m.value()) for m in msgs]
            for p, msgs in got.items()} == expected


def test_list_offsets_by_timestamp(broker, topic_name):
    topic = topic_name()
    create_topic(broker, topic)
    records = timestamp_records()
    timestamps = [ts for _, _, ts in records]

    errors = Errors()
    producer = idempotent_producer(broker, "none", errors)
    deliveries = Deliveries()
    for i, (key, value, ts) in enumerate(records):
        if i in TS_FLUSH_BEFORE:
            flush(producer)  # the next records go in a new batch
        producer.produce(topic, key=key, value=value, partition=TS_PARTITION,
                         timestamp=ts, on_delivery=deliveries)
    flush(producer)
    assert deliveries.failed == []
    assert errors.fatal() == []
    assert [(p, off) for p, off, _, _ in deliveries.ok] == [
        (TS_PARTITION, i) for i in range(len(records))]

    consumer = Consumer({"bootstrap.servers": broker,
                         "group.id": "kaas-client-tests-unused", "enable.auto.commit": False})
    try:
        answers = []
        for target, _ in timestamp_lookups(timestamps):
            [tp] = consumer.offsets_for_times([TopicPartition(topic, TS_PARTITION, target)],
                                              timeout=OP_TIMEOUT)
            assert tp.error is None, tp.error
            # librdkafka answers -1 (OFFSET_END) when no record is that new.
            answers.append((target, None if tp.offset == -1 else tp.offset))
        assert answers == timestamp_lookups(timestamps)
        # A partition with no records has no record at or after any time.
        empty = (TS_PARTITION + 1) % PARTITIONS
        [tp] = consumer.offsets_for_times([TopicPartition(topic, empty, timestamps[0])],
                                          timeout=OP_TIMEOUT)
        assert (tp.error, tp.offset) == (None, -1)
    finally:
        consumer.close()

    # Consume from the offset looked up for a time between two records.
    start = dict(answers)[timestamps[TS_CONSUME_FROM] - 500]
    got, _ = consume(broker, topic, {TS_PARTITION: start})
    assert [(m.offset(), m.key(), m.value(), m.timestamp()) for m in got[TS_PARTITION]] == [
        (i, key, value, (TIMESTAMP_CREATE_TIME, ts))
        for i, (key, value, ts) in enumerate(records) if i >= TS_CONSUME_FROM]


def test_produce_auto_creates_topic(broker, topic_name):
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": broker})
    assert topic not in admin.list_topics(timeout=OP_TIMEOUT).topics

    errors = Errors()
    producer = idempotent_producer(broker, "none", errors)
    deliveries = Deliveries()
    producer.produce(topic, key=b"auto-key", value=b"auto-value", on_delivery=deliveries)
    flush(producer)
    assert deliveries.failed == []
    assert errors.fatal() == []
    [(partition, offset, _, _)] = deliveries.ok
    assert offset == 0

    md = admin.list_topics(topic=topic, timeout=OP_TIMEOUT).topics[topic]
    assert md.error is None, md.error
    assert sorted(md.partitions) == list(range(PARTITIONS))  # the broker's default: 4

    got, _ = consume(broker, topic, {p: OFFSET_BEGINNING for p in range(PARTITIONS)})
    assert {p: [(m.offset(), m.key(), m.value()) for m in msgs] for p, msgs in got.items()} == {
        p: ([(0, b"auto-key", b"auto-value")] if p == partition else [])
        for p in range(PARTITIONS)}
