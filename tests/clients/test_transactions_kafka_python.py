"""Transactions with kafka-python 3 against a real kaas broker, under both
shipped policies (the counterpart of test_transactions_confluent.py):

1. committed records are read exactly once by a read_committed consumer,
   aborted ones never (a read_uncommitted consumer does see them);
2. a consume-transform-produce copier (a group member with auto commit off
   plus a transactional producer) sends the consumed offsets in each
   transaction with send_offsets_to_transaction(offsets,
   consumer.group_metadata()), which kafka-python drives as AddOffsetsToTxn +
   TxnOffsetCommit v3 (member id and generation included); one transaction
   is aborted after its offsets were sent: while it is open a require_stable
   OffsetFetch does not answer, and after the abort the group's offsets are
   the ones before it. Afterwards the output is the input transformed
   exactly once and the group's offsets are the input's end offsets;
3. zombie fencing: a second producer with the same transactional_id fences
   the first, whose later produce/commit fails with PRODUCER_FENCED, and only
   the second's records are visible read_committed.
"""

import time
import uuid
from collections import Counter

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import (InvalidProducerEpochError, KafkaError, KafkaTimeoutError,
                          ProducerFencedError)
from kafka.structs import OffsetAndMetadata


OP_TIMEOUT = 30.0
OP_TIMEOUT_MS = int(OP_TIMEOUT * 1000)
SESSION_MS = 6000
HEARTBEAT_MS = 500


@pytest.fixture
def bootstrap(policy_broker):
    return policy_broker.bootstrap


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=OP_TIMEOUT_MS)
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                            timeout_ms=OP_TIMEOUT_MS, wait_for_metadata=True)
    finally:
        admin.close()


def txn_producer(bootstrap: str, txn_id: str) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                         transaction_timeout_ms=60000, linger_ms=5, max_block_ms=OP_TIMEOUT_MS,
                         request_timeout_ms=OP_TIMEOUT_MS)


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str,
             timeout: float = OP_TIMEOUT):
    """[(partition, value)] of everything a consumer with this isolation level
    reads from the start of each partition up to its end offset (the last
    stable offset for read_committed, the high watermark otherwise), in order."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      isolation_level=isolation, auto_offset_reset="none",
                      request_timeout_ms=OP_TIMEOUT_MS)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, (
                f"{isolation} read of {topic} stuck at "
                f"{ {tp.partition: c.position(tp) for tp in tps} } below {end}; read {len(out)}")
            for tp, records in c.poll(timeout_ms=200).items():
                out.extend((tp.partition, r.value.decode()) for r in records)
        return out
    finally:
        c.close()


def values(records):
    return sorted(v for _, v in records)


def test_committed_records_are_read_once_and_aborted_never(bootstrap):
    topic = unique("txn")
    create_topic(bootstrap, topic, 2)
    p = txn_producer(bootstrap, unique("tx"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(50):
            p.send(topic, value=f"committed-{i}".encode(), partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        aborted = [p.send(topic, value=f"aborted-{i}".encode(), partition=i % 2) for i in range(20)]
        p.flush(timeout=OP_TIMEOUT)
        for f in aborted:  # written to the log (and acknowledged) before the abort
            f.get(timeout=OP_TIMEOUT)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, value=b"committed-last", partition=0)
        p.commit_transaction()
    finally:
        p.close()

    committed = sorted([f"committed-{i}" for i in range(50)] + ["committed-last"])
    aborted_values = sorted(f"aborted-{i}" for i in range(20))
    seen = read_all(bootstrap, topic, 2, "read_committed")
    assert values(seen) == committed, Counter(v for _, v in seen)
    # In each partition, in the order produced.
    assert [v for p, v in seen if p == 1] == [f"committed-{i}" for i in range(1, 50, 2)]
    everything = read_all(bootstrap, topic, 2, "read_uncommitted")
    assert values(everything) == sorted(committed + aborted_values)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict:
    """{partition: offset} through the admin client's OffsetFetch (no
    require_stable): the group's committed offsets, -1 where there is none."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=OP_TIMEOUT_MS)
    try:
        got = admin.list_group_offsets({group: [TopicPartition(topic, p) for p in range(partitions)]})
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in got[group].items() if tp.topic == topic}


class StableOffsets:
    """A group-less view of a group's committed offsets through OffsetFetch
    with require_stable (a read_committed consumer's committed()): it retries
    UNSTABLE_OFFSET_COMMIT until the offsets are stable or its timeout ends.
    The consumer never subscribes, so it never joins the group."""

    def __init__(self, bootstrap: str, group: str):
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                      enable_auto_commit=False, isolation_level="read_committed",
                                      request_timeout_ms=OP_TIMEOUT_MS)

    def get(self, tp: TopicPartition, timeout_ms: int = OP_TIMEOUT_MS):
        return self.consumer.committed(tp, timeout_ms=timeout_ms)

    def wait_for(self, tp: TopicPartition, offset: int, timeout: float = OP_TIMEOUT):
        deadline = time.monotonic() + timeout
        while (got := self.get(tp)) != offset:
            assert time.monotonic() < deadline, f"{tp} committed offset {got}, want {offset}"

    def close(self):
        self.consumer.close()


def seed(bootstrap: str, topic: str, n: int, partitions: int):
    """n values, value i in partition i % partitions, non-transactionally."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                             linger_ms=5, request_timeout_ms=OP_TIMEOUT_MS)
    try:
        records = [(i % partitions, f"in-{i:04d}") for i in range(n)]
        futures = [producer.send(topic, value=v.encode(), partition=p) for p, v in records]
        producer.flush(timeout=OP_TIMEOUT)
        for f in futures:
            f.get(timeout=OP_TIMEOUT)
    finally:
        producer.close()
    return records


def test_send_offsets_to_transaction_copies_input_exactly_once(bootstrap):
    partitions, n, chunk = 4, 200, 15
    src, dst = unique("ctp-in"), unique("ctp-out")
    group = unique("copier")
    create_topic(bootstrap, src, partitions)
    create_topic(bootstrap, dst, partitions)
    records = seed(bootstrap, src, n, partitions)
    end = {p: n // partitions for p in range(partitions)}

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed",
                             session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                             request_timeout_ms=OP_TIMEOUT_MS)
    consumer.subscribe([src])
    producer = txn_producer(bootstrap, unique("copier-tx"))
    stable = StableOffsets(bootstrap, group)
    done = {}  # partition -> next offset to copy, as of the last committed transaction
    commits = aborts = 0
    abort_rechecked, before_abort = False, None
    stale = []  # (transaction, partition, committed offset, require_stable answer)
    try:
        producer.init_transactions()
        deadline = time.monotonic() + 60
        while done != end:
            assert time.monotonic() < deadline, f"copier stuck: committed up to {done}, want {end}"
            batch = consumer.poll(timeout_ms=200, max_records=chunk)
            if not batch:
                continue
            offsets = {tp: OffsetAndMetadata(rs[-1].offset + 1, "", -1) for tp, rs in batch.items()}
            producer.begin_transaction()
            for tp, rs in batch.items():
                for r in rs:
                    producer.send(dst, value=f"out-{r.value.decode()}".encode(), partition=tp.partition)
            if aborts == 1 and not abort_rechecked:
                # This transaction's AddPartitionsToTxn went through (its records
                # are acknowledged), so the aborted one's markers are complete:
                # its offsets are gone for good, not merely not yet published.
                producer.flush(timeout=OP_TIMEOUT)
                assert committed_offsets(bootstrap, group, src, partitions) == before_abort
                abort_rechecked = True
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if commits == 3 and aborts == 0:
                # The offsets are pending in the open transaction: a plain
                # OffsetFetch answers the offsets before it, a require_stable one
                # keeps answering UNSTABLE_OFFSET_COMMIT (so committed() times out).
                producer.flush(timeout=OP_TIMEOUT)
                before_abort = committed_offsets(bootstrap, group, src, partitions)
                assert before_abort == {p: done.get(p, -1) for p in range(partitions)}, before_abort
                tp = next(iter(offsets))
                with pytest.raises(KafkaTimeoutError):
                    stable.get(tp, timeout_ms=1000)
                producer.abort_transaction()
                aborts += 1
                after = committed_offsets(bootstrap, group, src, partitions)
                assert after == before_abort, f"aborted offsets {offsets} became visible: {after}"
                for tp in offsets:
                    assert stable.get(tp) == done.get(tp.partition), tp
                    # Process these records again, as a copier does after an abort.
                    consumer.seek(tp, batch[tp][0].offset)
                continue
            producer.commit_transaction()
            commits += 1
            for tp, om in offsets.items():
                done[tp.partition] = om.offset
            for tp, om in offsets.items():
                # Right after EndTxn a require_stable OffsetFetch must answer
                # UNSTABLE_OFFSET_COMMIT (retried) or the new offset, never the
                # one before the transaction (KIP-447). A stale answer is noted,
                # and checked once the rest has been checked.
                first = stable.get(tp)
                if first != om.offset:
                    stale.append((commits, tp.partition, om.offset, first))
                    stable.wait_for(tp, om.offset)
    finally:
        producer.close()
        consumer.close()
        stable.close()
    assert aborts == 1 and abort_rechecked and commits >= 4, (commits, aborts)

    want = sorted(f"out-{v}" for _, v in records)
    out = read_all(bootstrap, dst, partitions, "read_committed")
    assert values(out) == want, [v for v, k in Counter(v for _, v in out).items() if k != 1][:10]
    for p in range(partitions):  # each partition copied in order into the same partition
        assert [v for q, v in out if q == p] == [f"out-{v}" for q, v in records if q == p]
    # The aborted transaction's records were written, only never visible read_committed.
    raw = read_all(bootstrap, dst, partitions, "read_uncommitted")
    assert len(raw) > n and set(values(raw)) == set(want)

    assert committed_offsets(bootstrap, group, src, partitions) == end
    fresh = StableOffsets(bootstrap, group)
    try:
        assert {p: fresh.get(TopicPartition(src, p)) for p in range(partitions)} == end
    finally:
        fresh.close()
    assert stale == [], (
        "OffsetFetch with require_stable, sent right after a successful EndTxn(commit), "
        "answered the offset from before the transaction with no error: "
        "(transaction, partition, offset committed, offset answered) " + repr(stale))


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(bootstrap):
    topic = unique("zombie")
    create_topic(bootstrap, topic, 2)
    txn_id = unique("shared")
    zombie = txn_producer(bootstrap, txn_id)
    fresh = txn_producer(bootstrap, txn_id)
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, value=b"zombie", partition=0).get(timeout=OP_TIMEOUT)
        fresh.init_transactions()  # fences the zombie and aborts its transaction
        fresh.begin_transaction()
        fresh.send(topic, value=b"fresh", partition=1)
        fresh.commit_transaction()
        with pytest.raises(KafkaError) as err:
            zombie.send(topic, value=b"zombie-late", partition=1)
            zombie.commit_transaction()
        # kafka-python raises the fencing itself, or, when its sender learned
        # of it first (the late send's AddPartitionsToTxn), a KafkaError
        # naming it as the producer's error state.
        fenced = (isinstance(err.value, ProducerFencedError)
                  or "ProducerFencedError" in str(err.value))
        assert fenced, repr(err.value)
        with pytest.raises(KafkaError):  # a fenced producer stays fenced
            zombie.begin_transaction()
    finally:
        zombie.close(timeout=5)
        fresh.close()
    assert read_all(bootstrap, topic, 2, "read_committed") == [(1, "fresh")]
    # The zombie's first record was written and aborted; the late one never written.
    assert values(read_all(bootstrap, topic, 2, "read_uncommitted")) == ["fresh", "zombie"]


def test_a_fenced_producers_batch_for_a_partition_already_in_its_transaction_is_refused(bootstrap):
    """The fence at the partitions: the zombie's partition 0 is already in its
    transaction, so its late record goes straight out as Produce (no
    AddPartitionsToTxn first), with the old epoch, and must be refused."""
    topic = unique("zombie-produce")
    create_topic(bootstrap, topic, 2)
    txn_id = unique("shared")
    zombie = txn_producer(bootstrap, txn_id)
    fresh = txn_producer(bootstrap, txn_id)
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, value=b"zombie", partition=0).get(timeout=OP_TIMEOUT)
        fresh.init_transactions()
        fresh.begin_transaction()
        fresh.send(topic, value=b"fresh", partition=0)
        fresh.commit_transaction()
        late = zombie.send(topic, value=b"zombie-late", partition=0)
        with pytest.raises((InvalidProducerEpochError, ProducerFencedError)):
            late.get(timeout=OP_TIMEOUT)
        # kafka-python 3.0.12 then tries a KIP-360 epoch bump and refuses to
        # commit from that state: either way the zombie cannot commit.
        with pytest.raises(KafkaError):
            zombie.commit_transaction()
    finally:
        zombie.close(timeout=5)
        fresh.close()
    assert read_all(bootstrap, topic, 2, "read_committed") == [(0, "fresh")]
    assert read_all(bootstrap, topic, 2, "read_uncommitted") == [(0, "zombie"), (0, "fresh")]
