"""Transactions with a real librdkafka client (confluent-kafka), under both
shipped policies: commit visible exactly once to read_committed consumers,
abort never visible, zombie fencing between two producers sharing a
transactional.id, and recovery from an abortable error through a KIP-360
epoch bump (InitProducerId v3+ claim).

Under both policies these behave the same: strict's differences concern
claims apache37 accepts leniently (see policies/strict/README.md), and a
well-behaved client never sends those.
"""

import os
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import POLICIES, KaasBroker, free_port


def start(tmp_path: Path, policy: str, env: dict | None = None,
          extra_args: tuple[str, ...] = ()) -> KaasBroker:
    metrics = free_port()
    b = KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                   extra_args=("--policy", str(POLICIES[policy]), "--metrics-listen", f"127.0.0.1:{metrics}",
                               *extra_args))
    b.metrics = f"http://127.0.0.1:{metrics}/metrics"
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        b.start()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return b


def create_topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        f.result(30)


def txn_producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "transaction.timeout.ms": 60000, "linger.ms": 5})


def read_committed(bootstrap: str, topic: str, partitions: int, expect_at_least: int, timeout: float = 30):
    """Everything a read_committed consumer sees up to the end of each partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, eof = [], set()
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    if len(eof) == partitions and len(values) >= expect_at_least:
                        break
                    continue
                raise KafkaException(m.error())
            values.append(m.value().decode())
            eof.discard(m.partition())
    finally:
        c.close()
    return values


def test_committed_records_are_read_once_and_aborted_never(tmp_path, policy):
    b = start(tmp_path, policy)
    try:
        topic = f"txn-{uuid.uuid4().hex[:8]}"
        create_topic(b.bootstrap, topic)
        p = txn_producer(b.bootstrap, f"tx-{uuid.uuid4().hex[:8]}")
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(50):
            p.produce(topic, value=f"committed-{i}".encode(), partition=i % 2)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(20):
            p.produce(topic, value=f"aborted-{i}".encode(), partition=i % 2)
        p.flush(30)
        p.abort_transaction(30)
        p.begin_transaction()
        p.produce(topic, value=b"committed-last", partition=0)
        p.commit_transaction(30)
        seen = read_committed(b.bootstrap, topic, 2, expect_at_least=51)
        assert sorted(seen) == sorted([f"committed-{i}" for i in range(50)] + ["committed-last"])
        assert not [v for v in seen if v.startswith("aborted")]
    finally:
        b.stop()


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(tmp_path, policy):
    b = start(tmp_path, policy)
    try:
        topic = f"zombie-{uuid.uuid4().hex[:8]}"
        create_topic(b.bootstrap, topic)
        txn_id = f"shared-{uuid.uuid4().hex[:8]}"
        zombie = txn_producer(b.bootstrap, txn_id)
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.produce(topic, value=b"zombie", partition=0)
        zombie.flush(30)
        fresh = txn_producer(b.bootstrap, txn_id)
        fresh.init_transactions(30)  # fences the zombie and aborts its transaction
        fresh.begin_transaction()
        fresh.produce(topic, value=b"fresh", partition=1)
        fresh.commit_transaction(30)
        with pytest.raises(KafkaException) as err:
            zombie.produce(topic, value=b"zombie-late", partition=1)
            zombie.commit_transaction(30)
        assert err.value.args[0].fatal() or err.value.args[0].code() in (
            KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH, KafkaError.PRODUCER_FENCED)
        assert read_committed(b.bootstrap, topic, 2, expect_at_least=1) == ["fresh"]
    finally:
        b.stop()


def txn_epochs(metrics_url: str, txn_id: str):
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(f'kaas_txn_entry_epoch{{transactional_id="{txn_id}"'):
            pid = line.split('producer_id="')[1].split('"')[0]
            return int(pid), int(line.rsplit(" ", 1)[1])
    return None


def test_an_abortable_error_is_recovered_with_a_kip360_epoch_bump(tmp_path, policy):
    b = start(tmp_path, policy, env={"KAAS_FAULT": "produce-unknown-producer-id-once"})
    try:
        topic = f"kip360-{uuid.uuid4().hex[:8]}"
        create_topic(b.bootstrap, topic)
        txn_id = f"bump-{uuid.uuid4().hex[:8]}"
        p = txn_producer(b.bootstrap, txn_id)
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, value=b"first", partition=0)
        p.commit_transaction(30)
        before = txn_epochs(b.metrics, txn_id)
        assert before is not None and before[1] == 0
        # The broker answers this batch (sequence 1) UNKNOWN_PRODUCER_ID once (a test-only fault).
        p.begin_transaction()
        p.produce(topic, value=b"doomed", partition=0)
        with pytest.raises(KafkaException) as err:
            p.commit_transaction(30)
        assert err.value.args[0].txn_requires_abort(), err.value
        p.abort_transaction(30)  # librdkafka bumps the epoch: InitProducerId with its (pid, epoch) claim
        p.begin_transaction()
        p.produce(topic, value=b"recovered", partition=0)
        p.commit_transaction(30)
        after = txn_epochs(b.metrics, txn_id)
        assert after[0] == before[0], "the same producer id after a KIP-360 bump"
        assert after[1] > before[1], f"the epoch was bumped: {before} -> {after}"
        assert read_committed(b.bootstrap, topic, 2, expect_at_least=2) == ["first", "recovered"]
    finally:
        b.stop()
