"""A consume-transform-produce copier (confluent-kafka), run as its own
process by test_exactly_once_copier.py so the test can SIGKILL it.

It reads `in` in a consumer group with read_committed isolation and copies
each record to `out` (same key, value prefixed with "copy:"), one
transaction per batch, committing the consumed offsets inside the same
transaction (send_offsets_to_transaction). On any error it aborts what it
can and exits with code 3: the test starts a new copier, which resumes from
the group's committed offsets; that is what a real deployment's supervisor
does, and it keeps the copier free of rewind logic.

usage: eos_copier.py BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID BATCH PAUSE_S [GROUP_PROTOCOL]

GROUP_PROTOCOL is librdkafka's group.protocol: `classic` (the default: a 2 s
session, 300 ms heartbeats) or `consumer` (KIP-848: the broker sets the
session and heartbeat interval, which librdkafka then refuses to set).
"""

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def main() -> int:
    bootstrap, src, dst, group, txn_id, batch, pause = sys.argv[1:8]
    batch, pause = int(batch), float(pause)
    protocol = sys.argv[8] if len(sys.argv) > 8 else "classic"
    if protocol == "classic":
        timing = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 300}
    elif protocol == "consumer":
        timing = {"group.protocol": "consumer"}
    else:
        raise SystemExit(f"unknown group protocol {protocol!r}")
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group,
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "auto.offset.reset": "earliest", "max.poll.interval.ms": 10000, **timing,
    })
    producer = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": txn_id,
        "transaction.timeout.ms": 20000, "linger.ms": 2,
    })
    try:
        producer.init_transactions(30)
        consumer.subscribe([src])
        copied, idle_since = 0, time.monotonic()
        while True:
            msgs = consumer.consume(num_messages=batch, timeout=0.3)
            for m in msgs:
                if m.error():
                    raise KafkaException(m.error())
            if not msgs:
                if time.monotonic() - idle_since > 5:
                    # For a reader of this log: what an idle copier holds.
                    held = consumer.assignment()
                    print(f"{txn_id} idle; assigned {[(t.partition) for t in held]}, "
                          f"positions {[t.offset for t in consumer.position(held)]}", flush=True)
                    idle_since = time.monotonic()
                continue
            idle_since = time.monotonic()
            producer.begin_transaction()
            next_offsets = {}
            for m in msgs:
                producer.produce(dst, key=m.key(), value=b"copy:" + m.value(), partition=m.partition())
                next_offsets[m.partition()] = m.offset() + 1
            offsets = [TopicPartition(src, p, o) for p, o in sorted(next_offsets.items())]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            copied += len(msgs)
            print(f"{txn_id} committed {len(msgs)} (total {copied})", flush=True)
            time.sleep(pause)
    except KafkaException as e:
        print(f"{txn_id} stops on error: {e}", flush=True)
        try:
            producer.abort_transaction(5)
        except KafkaException:
            pass
        return 3
    finally:
        try:
            consumer.close()
        except Exception:
            pass


if __name__ == "__main__":
    sys.exit(main())
