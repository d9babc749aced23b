"""One consumer-group member in its own process, for tests and benchmarks
that kill a member (SIGKILL) and watch the others take over.

    python group_member.py --client confluent|kafka-python --bootstrap HOST:PORT
        --topic T --group G [--session-timeout-ms 6000] [--heartbeat-ms 1000]
        [--commit-every N] [--delay-ms D] [--instance-id ID]

It subscribes to T in group G and prints one JSON object per line on stdout,
flushed at once, so the parent sees every step the member completed:

    {"event": "assigned", "partitions": [0, 1]}     after each (re)assignment
    {"event": "revoked", "partitions": [0, 1]}      when a rebalance takes them
    {"event": "consumed", "p": 0, "o": 5, "v": "..."}  a record "processed"
    {"event": "committed", "offsets": {"0": 6, ...}}   after a synchronous commit

A record counts as processed once its line is written. After every
`commit-every` processed records (and on revocation) it commits synchronously
the position after the last processed record of each assigned partition, then
prints "committed". `delay-ms` is the processing time per record, so a
SIGKILL lands between commits. Runs until killed (or SIGTERM).
"""

import argparse
import json
import signal
import sys
import time


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def run_confluent(args):
    from confluent_kafka import Consumer, TopicPartition

    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": args.heartbeat_ms,
        "client.id": f"group-member-{args.instance_id or 'dynamic'}",
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)
    positions = {}  # partition -> next offset after the last processed record

    def commit():
        offsets = [TopicPartition(args.topic, p, o) for p, o in positions.items()]
        if offsets:
            consumer.commit(offsets=offsets, asynchronous=False)
            emit(event="committed", offsets={str(p): o for p, o in positions.items()})

    def on_assign(c, partitions):
        emit(event="assigned", partitions=sorted(tp.partition for tp in partitions))

    def on_revoke(c, partitions):
        emit(event="revoked", partitions=sorted(tp.partition for tp in partitions))
        try:
            commit()
        except Exception as e:  # the group may already have moved on
            emit(event="commit_failed", error=str(e))
        positions.clear()

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    processed = 0
    try:
        while True:
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            time.sleep(args.delay_ms / 1000.0)
            emit(event="consumed", p=msg.partition(), o=msg.offset(),
                 v=msg.value().decode())
            positions[msg.partition()] = msg.offset() + 1
            processed += 1
            if processed % args.commit_every == 0:
                commit()
    finally:
        consumer.close()


def run_kafka_python(args):
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        client_id=f"group-member-{args.instance_id or 'dynamic'}",
    )
    positions = {}

    def commit():
        if positions:
            consumer.commit({TopicPartition(args.topic, p): OffsetAndMetadata(o, "", -1)
                             for p, o in positions.items()})
            emit(event="committed", offsets={str(p): o for p, o in positions.items()})

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            # kafka-python 3 runs listeners on its IO thread, where a
            # blocking commit is refused: commit asynchronously (the request
            # goes out before the JoinGroup, on the same connection).
            emit(event="revoked", partitions=sorted(tp.partition for tp in revoked))
            snapshot = dict(positions)
            positions.clear()
            if not snapshot:
                return

            def done(_offsets, result):
                if isinstance(result, Exception):
                    emit(event="commit_failed", error=str(result))
                else:
                    emit(event="committed", offsets={str(p): o for p, o in snapshot.items()})

            consumer.commit_async({TopicPartition(args.topic, p): OffsetAndMetadata(o, "", -1)
                                   for p, o in snapshot.items()}, callback=done)

        def on_partitions_assigned(self, assigned):
            emit(event="assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer.subscribe([args.topic], listener=Listener())
    processed = 0
    try:
        while True:
            for tp, records in consumer.poll(timeout_ms=100, max_records=1).items():
                for r in records:
                    time.sleep(args.delay_ms / 1000.0)
                    emit(event="consumed", p=r.partition, o=r.offset, v=r.value.decode())
                    positions[r.partition] = r.offset + 1
                    processed += 1
                    if processed % args.commit_every == 0:
                        commit()
    finally:
        consumer.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", choices=["confluent", "kafka-python"], required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--commit-every", type=int, default=10)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--instance-id", default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    (run_confluent if args.client == "confluent" else run_kafka_python)(args)


if __name__ == "__main__":
    main()
