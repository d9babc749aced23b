"""Load for the cluster tests: writers, full readers and consumer-group
members for confluent-kafka and kafka-python (kafkajs: cluster_client.js,
driven by KafkajsClient). Writers record what they sent and what was
acknowledged in a checker.History; readers return what the checker reads.

Every value is unique in a run: "<writer name>-<seq>". Record i of a writer
goes to partition i % partitions, so every partition gets load.
"""

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from checker import History

HERE = Path(__file__).resolve().parent
CLIENTS = HERE.parent / "clients"

# Long enough that no record times out inside one failover (lease TTL + a
# metadata refresh); a timeout would make an acknowledged-or-not unknown.
DELIVERY_TIMEOUT_MS = 120_000


class Writer(threading.Thread):
    """Produces paced records until stop(); then waits for every outcome."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int,
                 interval_s: float = 0.002, only_partition: int | None = None):
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.interval_s, self.only_partition = interval_s, only_partition
        self.history = History()
        self.errors: list[str] = []        # delivery-report errors, by name
        self.fatal: list[str] = []         # client-level errors (error_cb)
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self.exception: BaseException | None = None
        self.sent = 0

    def partition_of(self, i: int) -> int:
        return self.only_partition if self.only_partition is not None else i % self.partitions

    def value(self, i: int) -> bytes:
        return f"{self.name}-{i:07d}".encode()

    def acked_count(self) -> int:
        with self._lock:
            return len(self.history.acked)

    def acked_on(self, partition: int) -> int:
        with self._lock:
            return sum(1 for p, _ in self.history.acked.values() if p == partition)

    def _ack(self, value: bytes, partition: int, offset: int) -> None:
        with self._lock:
            self.history.ack(value, partition, offset)

    def _fail(self, value: bytes, why: str) -> None:
        with self._lock:
            self.errors.append(why)

    def stop(self, timeout: float = 150.0) -> None:
        self._halt.set()
        self.join(timeout)
        assert not self.is_alive(), f"writer {self.name} did not finish within {timeout} s"
        if self.exception is not None:
            raise self.exception

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported by stop()
            self.exception = e


class ConfluentWriter(Writer):
    def _run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5,
                      "message.timeout.ms": DELIVERY_TIMEOUT_MS,
                      "topic.metadata.refresh.interval.ms": 1000,
                      # A request stuck on a frozen leader is given up (and
                      # retried on the new one) after 5 s, not the default 30.
                      "request.timeout.ms": 5000,
                      # ... and librdkafka's own in-flight timeout, which
                      # is socket.timeout.ms (default 60 s), not the above:
                      # with it a Produce sent just before the freeze held
                      # the partition for 60 s (the zombie test's writer
                      # waits 60 s for progress).
                      "socket.timeout.ms": 10000,
                      "error_cb": lambda err: self.fatal.append(err.name()) if err.fatal() else None})

        def report(err, msg):
            if err is None:
                self._ack(msg.value(), msg.partition(), msg.offset())
            else:
                self._fail(msg.value(), err.name())

        i = 0
        while not self._halt.is_set():
            v = self.value(i)
            with self._lock:
                self.history.send(v)
            while True:
                try:
                    p.produce(self.topic, v, partition=self.partition_of(i), on_delivery=report)
                    break
                except BufferError:
                    # The local queue is full (a leader is moving): wait for
                    # delivery reports, then try the same record again.
                    p.poll(0.1)
            self.sent = i = i + 1
            p.poll(self.interval_s)
        left = p.flush(DELIVERY_TIMEOUT_MS / 1000 + 10)
        assert left == 0, f"{self.name}: {left} records without an outcome after flush"


class KafkaPythonWriter(Writer):
    def _run(self) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=self.bootstrap.split(","), acks="all",
                          enable_idempotence=True, linger_ms=5, retries=2**31 - 1,
                          delivery_timeout_ms=DELIVERY_TIMEOUT_MS, request_timeout_ms=10_000,
                          metadata_max_age_ms=1000, max_in_flight_requests_per_connection=5)
        i = 0
        while not self._halt.is_set():
            v = self.value(i)
            with self._lock:
                self.history.send(v)
            f = p.send(self.topic, value=v, partition=self.partition_of(i))
            f.add_callback(lambda md, v=v: self._ack(v, md.partition, md.offset))
            f.add_errback(lambda e, v=v: self._fail(v, type(e).__name__))
            self.sent = i = i + 1
            time.sleep(self.interval_s)
        p.flush(timeout=DELIVERY_TIMEOUT_MS / 1000 + 10)
        p.close(timeout=10)


def confluent_read_all(bootstrap: str, topic: str, partitions: int,
                       timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition, from offset 0 to the high watermark
    at the time of the call, with librdkafka (no group)."""
    from confluent_kafka import (Consumer, KafkaError, KafkaException, TopicPartition,
                                 OFFSET_BEGINNING)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kaas-cluster-reader",
                  "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})

    moving = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError._TRANSPORT}

    def high_watermark(p: int, deadline: float) -> int:
        # librdkafka does not retry this query: a partition moving between
        # brokers just now (placement settling after a rejoin) answers
        # NOT_LEADER_OR_FOLLOWER once; ask again, as kafka-python does.
        while True:
            try:
                return c.get_watermark_offsets(TopicPartition(topic, p),
                                               timeout=max(deadline - time.monotonic(), 1))[1]
            except KafkaException as e:
                if e.args[0].code() not in moving or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    try:
        until = time.monotonic() + timeout
        ends = {p: high_watermark(p, until) for p in range(partitions)}
        out = {p: [] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        pos = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(pos[p] < ends[p] for p in pos):
            assert time.monotonic() < deadline, f"confluent reader: at {pos}, ends {ends}"
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error() is not None:
                    continue
                out[m.partition()].append((m.offset(), m.value()))
                pos[m.partition()] = m.offset() + 1
        return out
    finally:
        c.close()


def kafka_python_end_offsets(consumer, tps: list, timeout: float = 60.0) -> dict[int, int]:
    """partition -> end offset of each of `tps`, by kafka-python's
    end_offsets, asked again while a partition has no leader.

    kafka-python (3.0.12) leaves a partition whose leader its metadata shows
    as unknown (-1: LEADER_NOT_AVAILABLE, a partition moving between brokers
    just now) out of the ListOffsets round, and if every other partition
    answers it looks that partition up in the answer anyway: KeyError on the
    TopicPartition. Apache Kafka's brokers answer the same -1 while a leader
    is being chosen; the Java client waits for metadata instead."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return {tp.partition: off for tp, off in consumer.end_offsets(tps).items()}
        except KeyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def kafka_python_read_all(bootstrap: str, topic: str, partitions: int,
                          timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """The same as confluent_read_all, with kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None,
                      enable_auto_commit=False, metadata_max_age_ms=1000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = kafka_python_end_offsets(c, tps, timeout)
        out = {p: [] for p in range(partitions)}
        pos = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(pos[p] < ends[p] for p in pos):
            assert time.monotonic() < deadline, f"kafka-python reader: at {pos}, ends {ends}"
            for tp, msgs in c.poll(timeout_ms=500, max_records=1000).items():
                for m in msgs:
                    out[tp.partition].append((m.offset, m.value))
                    pos[tp.partition] = m.offset + 1
        return out
    finally:
        c.close()


class GroupMember(threading.Thread):
    """One consumer-group member that records every delivery until stop()."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str):
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._delivered: list[tuple[int, int, bytes]] = []
        self.exception: BaseException | None = None

    def delivered(self) -> list[tuple[int, int, bytes]]:
        with self._lock:
            return list(self._delivered)

    def _got(self, p: int, offset: int, value: bytes) -> None:
        with self._lock:
            self._delivered.append((p, offset, value))

    def stop(self, timeout: float = 60.0) -> None:
        self._halt.set()
        self.join(timeout)
        assert not self.is_alive(), f"group member {self.name} did not stop"
        if self.exception is not None:
            raise self.exception

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:
            self.exception = e


class ConfluentGroupMember(GroupMember):
    def _run(self) -> None:
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "auto.commit.interval.ms": 500, "session.timeout.ms": 10_000,
                      "heartbeat.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 1000})
        c.subscribe([self.topic])
        try:
            while not self._halt.is_set():
                for m in c.consume(num_messages=500, timeout=0.2):
                    if m.error() is None:
                        self._got(m.partition(), m.offset(), m.value())
        finally:
            c.close()


class KafkaPythonGroupMember(GroupMember):
    def _run(self) -> None:
        from kafka import KafkaConsumer

        c = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap.split(","),
                          group_id=self.group, auto_offset_reset="earliest",
                          enable_auto_commit=True, auto_commit_interval_ms=500,
                          session_timeout_ms=10_000, heartbeat_interval_ms=1000,
                          metadata_max_age_ms=1000)
        try:
            while not self._halt.is_set():
                for tp, msgs in c.poll(timeout_ms=200).items():
                    for m in msgs:
                        self._got(tp.partition, m.offset, m.value)
        finally:
            c.close()


class KafkajsClient:
    """cluster_client.js in a node process: an idempotent kafkajs producer and
    a kafkajs consumer-group member, both until stop(); then a full read of
    every partition. Results come back as JSON-lines files in `out_dir`."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, group: str,
                 out_dir: Path):
        self.name, self.out_dir = name, Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        node = shutil.which("node")
        assert node, "node is not on PATH (scripts/setup-clients)"
        assert (CLIENTS / "node_modules" / "kafkajs").is_dir(), "run scripts/setup-clients"
        env = dict(os.environ, KAAS_BOOTSTRAP=bootstrap, KAAS_TOPIC=topic,
                   KAAS_PARTITIONS=str(partitions), KAAS_GROUP=group, KAAS_NAME=name,
                   KAAS_OUT=str(self.out_dir), NODE_PATH=str(CLIENTS / "node_modules"),
                   KAFKAJS_NO_PARTITIONER_WARNING="1")
        self.log = open(self.out_dir / "node.log", "wb")
        self.proc = subprocess.Popen([node, str(HERE / "cluster_client.js")], env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def _lines(self, name: str) -> list[dict]:
        try:
            text = (self.out_dir / name).read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.endswith("}")]

    def history(self) -> History:
        h = History()
        for r in self._lines("sent.jsonl"):
            h.send(r["value"].encode())
        for r in self._lines("acked.jsonl"):
            h.ack(r["value"].encode(), r["partition"], r["offset"])
        return h

    def errors(self) -> list[str]:
        return [r["error"] for r in self._lines("errors.jsonl")]

    def acked_count(self) -> int:
        return len(self._lines("acked.jsonl"))

    def delivered(self) -> list[tuple[int, int, bytes]]:
        return [(r["partition"], r["offset"], r["value"].encode())
                for r in self._lines("consumed.jsonl")]

    def stop_producing(self) -> None:
        (self.out_dir / "stop-producing").touch()

    def wait_produced(self, timeout: float = 150.0) -> None:
        """Until the producer has an outcome for every send and has left."""
        deadline = time.monotonic() + timeout
        while not (self.out_dir / "produced").exists():
            assert self.proc.poll() is None, f"kafkajs client exited {self.proc.returncode}"
            assert time.monotonic() < deadline, "kafkajs producer did not finish"
            time.sleep(0.1)

    def finish(self, timeout: float = 180.0) -> dict[int, list[tuple[int, bytes]]]:
        """Stops the group member, lets the script read every partition in
        full, waits for it to exit 0 and returns that full read."""
        (self.out_dir / "stop").touch()
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.log.close()
        log = (self.out_dir / "node.log").read_text(errors="replace")
        assert code == 0, f"kafkajs client exited {code}:\n{log[-4000:]}"
        out: dict[int, list[tuple[int, bytes]]] = {}
        for r in self._lines("read.jsonl"):
            out.setdefault(r["partition"], []).append((r["offset"], r["value"].encode()))
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
