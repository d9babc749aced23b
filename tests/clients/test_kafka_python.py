"""kafka-python 3 against a real kaas broker.

Consumers have group_id=None and use assign() with explicit seeks: kaas has no
group coordinator yet.
"""

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from common import (CODECS, CONSUME_TIMEOUT, OP_TIMEOUT, PARTITIONS, TS_CONSUME_FROM,
                    TS_FLUSH_BEFORE, TS_PARTITION, by_partition, roundtrip_records,
                    timestamp_lookups, timestamp_records)

OP_TIMEOUT_MS = int(OP_TIMEOUT * 1000)
CREATE_TIME = 0  # ConsumerRecord.timestamp_type


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker, request_timeout_ms=OP_TIMEOUT_MS,
                              bootstrap_timeout_ms=OP_TIMEOUT_MS)
    yield client
    client.close()


def create_topic(admin, topic, partitions=PARTITIONS):
    admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                        timeout_ms=OP_TIMEOUT_MS, wait_for_metadata=True)  # raises on error
    [md] = admin.describe_topics([topic])
    assert md["error_code"] == 0, md
    assert sorted(p["partition_index"] for p in md["partitions"]) == list(range(partitions))


def idempotent_producer(bootstrap, codec="none"):
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,  # set explicitly: kafka-python then raises rather than
        acks="all",               # silently dropping idempotence if the broker looks too old
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
        max_block_ms=OP_TIMEOUT_MS,
        request_timeout_ms=OP_TIMEOUT_MS,
        bootstrap_timeout_ms=OP_TIMEOUT_MS,
    )


def new_consumer(bootstrap):
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="none",  # an out-of-range fetch must raise, not silently reset
        request_timeout_ms=OP_TIMEOUT_MS,
        bootstrap_timeout_ms=OP_TIMEOUT_MS,
    )


def consume(bootstrap, topic, start_offsets):
    """Reads each partition in start_offsets ({partition: offset, or None for
    the beginning}) until the consumer's position reaches the partition's end
    offset (ListOffsets latest), taken before reading. Returns
    {partition: [ConsumerRecord]}."""
    consumer = new_consumer(bootstrap)
    try:
        tps = {p: TopicPartition(topic, p) for p in start_offsets}
        consumer.assign(list(tps.values()))
        for p, offset in start_offsets.items():
            if offset is None:
                consumer.seek_to_beginning(tps[p])
            else:
                consumer.seek(tps[p], offset)
        end = consumer.end_offsets(list(tps.values()), timeout_ms=OP_TIMEOUT_MS)
        got = {p: [] for p in start_offsets}
        deadline = time.monotonic() + CONSUME_TIMEOUT

        def behind():
            return [p for p, tp in tps.items()
                    if consumer.position(tp, timeout_ms=OP_TIMEOUT_MS) < end[tp]]

        while behind():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"partitions {behind()} not read up to their end offsets {end} within "
                    f"{CONSUME_TIMEOUT} s; got {({p: len(r) for p, r in got.items()})} records")
            for tp, recs in consumer.poll(timeout_ms=500).items():
                assert tp.topic == topic
                got[tp.partition].extend(recs)
        return got
    finally:
        consumer.close(autocommit=False)


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_produce_then_consume_from_beginning(broker, admin, topic_name, codec):
    topic = topic_name()
    create_topic(admin, topic)
    records = roundtrip_records(codec)
    expected = by_partition(records)

    producer = idempotent_producer(broker, codec)
    try:
        futures = [producer.send(topic, key=key, value=value, partition=p)
                   for p, key, value in records]
        producer.flush(timeout=OP_TIMEOUT)
        acked = [f.get(timeout=OP_TIMEOUT) for f in futures]  # raises if a send failed
    finally:
        producer.close(timeout=OP_TIMEOUT)
    # Every record acknowledged at the offset the broker must have given it.
    assert sorted((m.partition, m.offset, k, v) for m, (_, k, v) in zip(acked, records)) == \
        sorted((p, off, k, v) for p, recs in expected.items() for off, k, v in recs)

    consumer = new_consumer(broker)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        assert consumer.beginning_offsets(tps, timeout_ms=OP_TIMEOUT_MS) == {
            tp: 0 for tp in tps}
        assert consumer.end_offsets(tps, timeout_ms=OP_TIMEOUT_MS) == {
            tp: len(expected[tp.partition]) for tp in tps}
    finally:
        consumer.close(autocommit=False)

    got = consume(broker, topic, {p: None for p in range(PARTITIONS)})
    assert {p: [(r.offset, r.key, r.value) for r in recs] for p, recs in got.items()} == expected


def test_list_offsets_by_timestamp(broker, admin, topic_name):
    topic = topic_name()
    create_topic(admin, topic)
    records = timestamp_records()
    timestamps = [ts for _, _, ts in records]

    producer = idempotent_producer(broker)
    try:
        futures = []
        for i, (key, value, ts) in enumerate(records):
            if i in TS_FLUSH_BEFORE:
                producer.flush(timeout=OP_TIMEOUT)  # the next records go in a new batch
            futures.append(producer.send(topic, key=key, value=value, partition=TS_PARTITION,
                                         timestamp_ms=ts))
        producer.flush(timeout=OP_TIMEOUT)
        acked = [f.get(timeout=OP_TIMEOUT) for f in futures]
    finally:
        producer.close(timeout=OP_TIMEOUT)
    assert [(m.partition, m.offset) for m in acked] == [
        (TS_PARTITION, i) for i in range(len(records))]

    consumer = new_consumer(broker)
    try:
        tp = TopicPartition(topic, TS_PARTITION)
        answers = []
        for target, _ in timestamp_lookups(timestamps):
            found = consumer.offsets_for_times({tp: target}, timeout_ms=OP_TIMEOUT_MS)[tp]
            # kafka-python answers None when no record is that new.
            answers.append((target, None if found is None else found.offset))
            if found is not None:
                assert found.timestamp == timestamps[found.offset]
        assert answers == timestamp_lookups(timestamps)
        # A partition with no records has no record at or after any time.
        empty = TopicPartition(topic, (TS_PARTITION + 1) % PARTITIONS)
        assert consumer.offsets_for_times({empty: timestamps[0]},
                                          timeout_ms=OP_TIMEOUT_MS) == {empty: None}
    finally:
        consumer.close(autocommit=False)

    # Consume from the offset looked up for a time between two records.
    start = dict(answers)[timestamps[TS_CONSUME_FROM] - 500]
    got = consume(broker, topic, {TS_PARTITION: start})
    assert [(r.offset, r.key, r.value, r.timestamp, r.timestamp_type)
            for r in got[TS_PARTITION]] == [
        (i, key, value, ts, CREATE_TIME)
        for i, (key, value, ts) in enumerate(records) if i >= TS_CONSUME_FROM]


def test_produce_auto_creates_topic(broker, admin, topic_name):
    topic = topic_name()
    assert topic not in admin.list_topics()

    producer = idempotent_producer(broker)
    try:
        meta = producer.send(topic, key=b"auto-key", value=b"auto-value").get(timeout=OP_TIMEOUT)
    finally:
        producer.close(timeout=OP_TIMEOUT)
    assert meta.offset == 0

    [md] = admin.describe_topics([topic])
    assert md["error_code"] == 0, md
    assert sorted(p["partition_index"] for p in md["partitions"]) == list(range(PARTITIONS))
    assert all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in md["partitions"]), md

    got = consume(broker, topic, {p: None for p in range(PARTITIONS)})
    assert {p: [(r.offset, r.key, r.value) for r in recs] for p, recs in got.items()} == {
        p: ([(0, b"auto-key", b"auto-value")] if p == meta.partition else [])
        for p in range(PARTITIONS)}
