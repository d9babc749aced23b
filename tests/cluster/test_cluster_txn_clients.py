"""Transactional clients across brokers, with the transaction markers and
the group's offsets going to other brokers.

confluent-kafka (librdkafka), kafka-python and kafkajs each run the same
three transactions with one transactional id over a topic whose partitions
are led by all three brokers: commit, abort, commit. Each transaction also
sends consumed offsets (AddOffsetsToTxn + TxnOffsetCommit) of a group whose
coordinator is a different broker than the transaction's, so the
coordinator's markers go to remote partition leaders (WriteTxnMarkers) and
the group's offsets to a remote group coordinator.

Afterwards read_committed readers (raw Fetch at each leader, librdkafka,
kafka-python) see exactly the committed records, in order, none of the
aborted one; the group's committed offsets are the last committed
transaction's, never the aborted one's (../shared/spec/kafka-txn-3.7.md
§2.3, §2.5; scenarios AP-01, AO-01, AO-04, ET-01, ET-02, PS-14, PS-15).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import _CLUSTERS, LEASE_TTL_MS
from harness import Cluster, HarnessError, wait_for
import txnlib

HERE = Path(__file__).resolve().parent
PARTITIONS = 6
SRC_PARTITIONS = 3
# (commit?, value prefix, records, offsets of the source topic to send)
PLAN = [(True, "c1", 60, {0: 10, 1: 11, 2: 12}),
        (False, "a2", 24, {0: 100, 1: 101, 2: 102}),
        (True, "c3", 12, {0: 20, 1: 21, 2: 22})]


def _values(prefix: str, n: int) -> list[tuple[int, bytes]]:
    """(partition, value) of one transaction: record i to partition i % 6."""
    return [(i % PARTITIONS, f"{prefix}-{i:03d}".encode()) for i in range(n)]


def _expected() -> dict[int, list[bytes]]:
    out = {p: [] for p in range(PARTITIONS)}
    for commit, prefix, n, _ in PLAN:
        if commit:
            for p, v in _values(prefix, n):
                out[p].append(v)
    return out


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One cluster for the three clients (each uses its own ids and topics)."""
    c = Cluster(tmp_path_factory.mktemp("txn-clients") / "cluster", n=3,
                lease_ttl_ms=LEASE_TTL_MS)
    try:
        c.start()
    except HarnessError as e:
        c.stop()
        pytest.fail(f"cluster did not start: {e}", pytrace=False)
    yield c
    c.stop()


@pytest.fixture
def cluster3(request, shared):
    request.node.stash.setdefault(_CLUSTERS, []).append(shared)
    yield shared
    died = {n: b.died_unexpectedly() for n, b in shared.brokers.items()}
    died = {n: code for n, code in died.items() if code is not None}
    if died:
        pytest.fail(f"broker(s) exited by themselves during the test: {died}", pytrace=False)


class Setup:
    """A spread topic, a source topic for the offsets, a transactional id
    on broker X and a group whose coordinator is another broker."""

    def __init__(self, cluster: Cluster, topic_name):
        self.cluster = cluster
        self.topic, self.src = topic_name("out"), topic_name("src")
        self.leaders = txnlib.spread_topic(cluster, self.topic, PARTITIONS)
        cluster.create_topic(self.src, SRC_PARTITIONS)
        self.tid, self.txn_node = txnlib.txn_id_on(cluster)
        self.group, self.group_node = txnlib.group_on(cluster, not_on={self.txn_node})
        assert self.group_node != self.txn_node

    def offsets(self) -> dict[int, int]:
        return txnlib.committed_offsets(self.cluster.bootstrap, self.group, self.src,
                                        SRC_PARTITIONS)

    def wait_offsets(self, want: dict[int, int], what: str) -> None:
        # OffsetFetch may lag EndTxn's answer (the offsets' marker follows it), as in Kafka.
        wait_for(lambda: self.offsets() == want, 30,
                 lambda: f"the group's offsets {want} {what} (have {self.offsets()})")

    def check_outcome(self) -> None:
        c = self.cluster
        txnlib.wait_stable(c, self.topic, PARTITIONS)
        want = _expected()
        assert txnlib.raw_committed(c, self.topic, PARTITIONS) == want, "raw read_committed"
        assert txnlib.confluent_committed(c.bootstrap, self.topic, PARTITIONS) == want, \
            "librdkafka read_committed"
        assert txnlib.kafka_python_committed(c.bootstrap, self.topic, PARTITIONS) == want, \
            "kafka-python read_committed"
        self.wait_offsets(PLAN[-1][3], "after the last commit")


def test_confluent_commits_and_aborts_across_brokers(cluster3, topic_name):
    from confluent_kafka import Consumer, Producer, TopicPartition

    s = Setup(cluster3, topic_name)
    p = Producer({"bootstrap.servers": cluster3.bootstrap, "transactional.id": s.tid,
                  "transaction.timeout.ms": 60000, "linger.ms": 5})
    meta_consumer = Consumer({"bootstrap.servers": cluster3.bootstrap, "group.id": s.group,
                              "enable.auto.commit": False})
    try:
        p.init_transactions(30)
        committed = {part: -1001 for part in range(SRC_PARTITIONS)}
        for commit, prefix, n, offsets in PLAN:
            p.begin_transaction()
            for part, v in _values(prefix, n):
                p.produce(s.topic, value=v, partition=part)
            p.send_offsets_to_transaction(
                [TopicPartition(s.src, part, o) for part, o in sorted(offsets.items())],
                meta_consumer.consumer_group_metadata(), 30)
            p.flush(30)
            if commit:
                p.commit_transaction(30)
                committed = dict(offsets)
                s.wait_offsets(committed, f"after committing {prefix}")
            else:
                p.abort_transaction(30)
                assert s.offsets() == committed, f"the aborted {prefix}'s offsets are visible"
    finally:
        meta_consumer.close()
    s.check_outcome()


def test_kafka_python_commits_and_aborts_across_brokers(cluster3, topic_name):
    from kafka import KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    s = Setup(cluster3, topic_name)
    p = KafkaProducer(bootstrap_servers=cluster3.bootstrap.split(","), transactional_id=s.tid,
                      transaction_timeout_ms=60000, linger_ms=5, max_block_ms=30000,
                      request_timeout_ms=30000)
    try:
        p.init_transactions()
        committed = {part: -1001 for part in range(SRC_PARTITIONS)}
        for commit, prefix, n, offsets in PLAN:
            p.begin_transaction()
            futures = [p.send(s.topic, value=v, partition=part) for part, v in _values(prefix, n)]
            p.send_offsets_to_transaction(
                {TopicPartition(s.src, part): OffsetAndMetadata(o, "", -1)
                 for part, o in offsets.items()}, s.group)
            p.flush(timeout=30)
            for f in futures:
                f.get(timeout=30)
            if commit:
                p.commit_transaction()
                committed = dict(offsets)
                s.wait_offsets(committed, f"after committing {prefix}")
            else:
                p.abort_transaction()
                assert s.offsets() == committed, f"the aborted {prefix}'s offsets are visible"
    finally:
        p.close(timeout=10)
    s.check_outcome()


def test_kafkajs_commits_and_aborts_across_brokers(cluster3, topic_name, tmp_path):
    node = shutil.which("node")
    assert node, "node is not on PATH (scripts/setup-clients)"
    clients = HERE.parent / "clients"
    assert (clients / "node_modules" / "kafkajs").is_dir(), "run scripts/setup-clients"
    s = Setup(cluster3, topic_name)
    env = dict(os.environ, KAAS_BOOTSTRAP=cluster3.bootstrap, KAAS_TOPIC=s.topic,
               KAAS_SRC=s.src, KAAS_TXN_ID=s.tid, KAAS_GROUP=s.group,
               KAAS_PLAN=json.dumps([{"commit": c, "values": [[p, v.decode()] for p, v in
                                                               _values(prefix, n)],
                                      "offsets": offsets} for c, prefix, n, offsets in PLAN]),
               NODE_PATH=str(clients / "node_modules"), KAFKAJS_NO_PARTITIONER_WARNING="1")
    out_path = tmp_path / "kafkajs-txn.out"
    with open(out_path, "w") as out:
        proc = subprocess.run([node, str(HERE / "cluster_txn_client.js")], cwd=clients, env=env,
                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              timeout=180)
    output = out_path.read_text(errors="replace")
    assert proc.returncode == 0, f"kafkajs exited with {proc.returncode}:\n{output[-4000:]}"
    # The node script checked the offsets after each transaction; its last line says so.
    assert output.strip().splitlines()[-1] == "ok", output[-4000:]
    s.check_outcome()
