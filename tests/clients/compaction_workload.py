"""The log-compaction acceptance workload, shared by the
single-node test (tests/clients/test_compaction_confluent.py) and the
cluster one (tests/cluster/test_cluster_compaction.py).

One partition of a compacted topic gets RECORDS records over KEYS keys from
confluent-kafka: plain idempotent rounds (2% tombstones) and transactional
rounds (LZ4-compressed, every third transaction aborted), then a sweep that
tombstones a tenth of the keys (half through the idempotent producer, half
in committed transactions) and "tombstones" another tenth in aborted
transactions only (those keys stay live). Every record a producer had
acknowledged in a committed round goes into the model with the offset its
delivery report gave, so the expected view is exact: for each key, the
last committed record by offset.

`settle()` then writes filler (one key, overwritten) so that the workload's
records leave the active segment and the cleaner passes again after
delete.retention.ms, until the read_committed view holds each live key
once, at the offset its last record was acknowledged at, and no tombstoned
key at all; `check_view()` asserts that view.
"""

import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KEYS = 10_000
RECORDS = 1_000_000
ROUND = 50_000  # records per round
TXN = 5_000  # records per transaction
SEGMENT_BYTES = 1 << 20
DELETE_RETENTION_MS = 3_000
FILLER_KEY = b"~filler"
FILLER_VALUE = b"f" * 1000

TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(SEGMENT_BYTES),
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
    "min.compaction.lag.ms": "0",
}


def key_of(k: int) -> bytes:
    return b"k%05d" % k


def create_topic(bootstrap: str, topic: str, replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=1, replication_factor=replication_factor,
                   config=TOPIC_CONFIGS)
    for attempt in range(3):
        try:
            admin.create_topics([new])[topic].result(30)
            return
        except KafkaException as e:
            code = e.args[0].code()
            # With several bootstrap brokers librdkafka may fail a request in
            # flight on a bootstrap connection when it swaps that for the
            # broker's own (_DESTROY_BROKER, as tests/cluster/harness.py's
            # create_topic says); asked again, the topic may already exist.
            if attempt > 0 and code == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if code != KafkaError._DESTROY_BROKER or attempt == 2:
                raise


@dataclass
class Model:
    """What committed: (offset, key, value-or-None) per acknowledged record."""
    records: list = field(default_factory=list)
    produced: int = 0
    payload_bytes: int = 0
    aborted: int = 0
    committed_txns: int = 0
    aborted_txns: int = 0

    def last(self) -> dict:
        """{key: (offset, value or None)}: the last committed record of each key."""
        out = {}
        for offset, key, value in sorted(self.records):
            out[key] = (offset, value)
        return out

    def live(self) -> dict:
        return {k: v for k, v in self.last().items() if v[1] is not None}

    def tombstoned(self) -> set:
        return {k for k, (_, v) in self.last().items() if v is None}


class _Acks:
    """Delivery reports of one producer: acknowledged records, or the first error."""

    def __init__(self):
        self.delivered: list = []
        self.error = None

    def __call__(self, err, msg):
        if err is not None:
            self.error = self.error or err
        else:
            self.delivered.append((msg.offset(), msg.key(), msg.value()))

    def take(self) -> list:
        if self.error is not None:
            raise KafkaException(self.error)
        out, self.delivered = self.delivered, []
        return out


def _produce(p: Producer, topic: str, records, acks: _Acks, model: Model) -> None:
    for key, value in records:
        while True:
            try:
                p.produce(topic, key=key, value=value, partition=0, on_delivery=acks)
                break
            except BufferError:
                p.poll(0.05)
        model.produced += 1
        model.payload_bytes += len(key) + len(value or b"")
        if model.produced % 5000 == 0:
            p.poll(0)


def _flush(p: Producer, timeout: float = 180) -> None:
    if p.flush(timeout) != 0:
        raise AssertionError(f"records still unacknowledged after {timeout} s")


def _txn(p: Producer, topic: str, records, acks: _Acks, model: Model, commit: bool) -> None:
    """One transaction; an abortable error (a broker restart in the middle)
    aborts it, and then nothing of it counts as committed."""
    p.begin_transaction()
    _produce(p, topic, records, acks, model)
    try:
        if commit:
            p.commit_transaction(180)
        else:
            p.flush(180)
            p.abort_transaction(180)
    except KafkaException as e:
        if not e.args[0].txn_requires_abort():
            raise
        p.abort_transaction(180)
        commit = False
    delivered, acks.delivered = acks.delivered, []
    error, acks.error = acks.error, None
    if commit:
        if error is not None:
            raise KafkaException(error)
        model.records += delivered
        model.committed_txns += 1
    else:
        model.aborted += len(records)
        model.aborted_txns += 1


def run(bootstrap: str, topic: str, seed: int = 25, records: int = RECORDS,
        on_round=None) -> Model:
    """Writes the workload; `on_round(i)` is called after each round (the
    callers use it to kill brokers between or during rounds)."""
    rng = random.Random(seed)
    model = Model()
    common = {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 256 << 10,
              "message.timeout.ms": 120_000, "queue.buffering.max.messages": 400_000,
              "retry.backoff.ms": 100}
    plain = Producer({**common, "enable.idempotence": True})
    txn = Producer({**common, "transactional.id": f"compaction-{uuid.uuid4().hex[:8]}",
                    "compression.type": "lz4", "transaction.timeout.ms": 120_000})
    txn.init_transactions(60)
    plain_acks, txn_acks = _Acks(), _Acks()

    def value(i: int) -> bytes | None:
        return None if rng.random() < 0.02 else b"v%07d-%s" % (i, b"x" * (i % 17))

    rounds = records // ROUND
    written = 0
    for r in range(rounds):
        if r % 4 == 3:
            for t in range(ROUND // TXN):
                batch = [(key_of(rng.randrange(KEYS)), value(written + j)) for j in range(TXN)]
                written += TXN
                _txn(txn, topic, batch, txn_acks, model, commit=(t % 3 != 2))
        else:
            batch = [(key_of(rng.randrange(KEYS)), value(written + j)) for j in range(ROUND)]
            written += ROUND
            _produce(plain, topic, batch, plain_acks, model)
            _flush(plain)
            model.records += plain_acks.take()
        if on_round is not None:
            on_round(r)

    # The sweep: keys k % 10 == 0 tombstoned for good (half plain, half in
    # committed transactions), keys k % 10 == 5 tombstoned only in aborted
    # transactions (they stay live with their earlier value).
    gone = [key_of(k) for k in range(0, KEYS, 10)]
    half = len(gone) // 2
    _produce(plain, topic, [(k, None) for k in gone[:half]], plain_acks, model)
    _flush(plain)
    model.records += plain_acks.take()
    _txn(txn, topic, [(k, None) for k in gone[half:]], txn_acks, model, commit=True)
    _txn(txn, topic, [(key_of(k), None) for k in range(5, KEYS, 10)], txn_acks, model,
         commit=False)
    plain.flush(30)
    txn.flush(30)
    return model


def read_committed(bootstrap: str, topic: str, timeout: float = 120) -> list:
    """[(offset, key, value)] of partition 0 from the start to its end, read_committed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"view-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True, "fetch.max.bytes": 8 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(f"partition end not reached in {timeout} s ({len(out)} read)")
            msgs = c.consume(10_000, 0.5)
            done = False
            for m in msgs:
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        done = True
                        continue
                    raise KafkaException(m.error())
                out.append((m.offset(), m.key(), m.value()))
                done = False
            if done:
                return out
    finally:
        c.close()


def view_problems(view: list, model: Model) -> list:
    """What keeps `view` from being the fully compacted view of `model`
    (ignoring the filler key, whose copies sit in the active segment)."""
    live, tombstoned = model.live(), model.tombstoned()
    live.pop(FILLER_KEY, None)
    problems = []
    offsets = [o for o, _, _ in view]
    if any(b <= a for a, b in zip(offsets, offsets[1:])):
        problems.append("offsets are not strictly increasing")
    seen = {}
    for offset, key, value in view:
        if key == FILLER_KEY:
            continue
        if key in tombstoned:
            problems.append(f"tombstoned key {key!r} still present at {offset}")
            continue
        if key in seen:
            problems.append(f"key {key!r} twice ({seen[key][0]} and {offset})")
        seen[key] = (offset, value)
    if seen != live:
        missing = [k for k in live if k not in seen]
        wrong = [k for k in live if k in seen and seen[k] != live[k]]
        extra = [k for k in seen if k not in live]
        problems.append(f"{len(missing)} live keys missing (e.g. {missing[:3]}), "
                        f"{len(wrong)} with the wrong record (e.g. "
                        f"{[(k, seen[k], live[k]) for k in wrong[:2]]}), {len(extra)} unexpected")
    return problems[:10]


def log_bytes(partition_dir: Path) -> int:
    return sum(f.stat().st_size for f in partition_dir.glob("*.log"))


def check_shrunk(partition_dir: Path, model: Model) -> int:
    """Asserts the partition's segments hold about the live records only;
    returns their size. Each surviving record costs its key and value plus
    at most a record's framing and a batch header of its own; the active
    segment (filler) and one segment of slack come on top."""
    live = model.live()
    after = log_bytes(partition_dir)
    live_bytes = sum(len(k) + len(v) for k, (_, v) in live.items())
    bound = live_bytes + len(live) * (20 + 61) + 2 * SEGMENT_BYTES
    print(f"payload {model.payload_bytes} B in {model.produced} records; live {len(live)} keys, "
          f"{live_bytes} B; log now {after} B (bound {bound})")
    assert after <= bound, f"the log holds {after} B, expected at most {bound}"
    assert after < model.payload_bytes // 5, "the log shrank to a fifth of what was written"
    return after


def settle(bootstrap: str, topic: str, model: Model, passes, timeout: float = 180) -> list:
    """Writes filler until the view is fully compacted; returns the final view.

    `passes()` is the cleaner's pass count (from /metrics): after each
    filler round the check waits for a pass that ended after the filler
    arrived (the filler rolls the active segment, so the log is dirty and a
    pass comes). A tombstone's horizon is set by the first pass that sees
    it and it goes in the first pass after delete.retention.ms, so a few
    rounds are needed."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    acks = _Acks()
    deadline = time.monotonic() + timeout
    problems = ["not checked yet"]
    view = []
    while time.monotonic() < deadline:
        start = passes()
        filler = [(FILLER_KEY, FILLER_VALUE)] * (SEGMENT_BYTES // len(FILLER_VALUE) + 100)
        _produce(p, topic, filler, acks, Model())
        _flush(p)
        model.records += acks.take()
        wait = min(deadline, time.monotonic() + 20)
        while passes() < start + 1 and time.monotonic() < wait:
            time.sleep(0.05)
        view = read_committed(bootstrap, topic)
        problems = view_problems(view, model)
        if not problems:
            return view
    raise AssertionError(f"not compacted within {timeout} s: {problems}")
