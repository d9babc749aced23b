"""A stream-processing application on kaas: faust_counter.py, a
faust-streaming app (aiokafka underneath) with a Table whose changelog is a
compacted topic and processing_guarantee="exactly_once", counts N keyed
records while the test SIGKILLs it twice. Each kill is followed by a
restart; the second restart also gets an empty data directory, and the
table lives in faust's memory store, so every restart rebuilds the counts
from the changelog alone. At the first kill the broker is SIGKILLed and
restarted as well, with the dead worker's transactions open.

A kill comes once the committed output has reached a fraction of N (a
read_committed consumer watches it) and the output also holds records of a
transaction still open (a read_uncommitted consumer sees past the last
stable offset); the input is fed no more than LEAD records ahead of the
committed output, so the app always has work while it runs. The broker
compacts the changelog meanwhile (small segments, a busy cleaner), so the
restarted workers recover from a compacted log with transaction markers and
aborted records in it.

Afterwards a read_committed consumer must see exactly one output record per
input, with the running counts of each key 1, 2, ..., n in order (so no
input was counted twice or lost from the table); the output log must hold
aborted records too (a kill did catch a transaction open); and the
changelog's last committed value for each key must be that key's number of
inputs, with fewer records left in it than were written (it was compacted).

Runtime is mostly faust's: a restarted worker waits for the dead member's
session to end (4 s) and, in recovery, twice 5 s for a changelog record past
the commit marker that ends each partition (faust's own timeout, the same
against Kafka). FAUST_TEST_LOG_LEVEL=debug makes the workers log aiokafka's
requests and responses (tmp_path/faust/worker-N.log).
"""

import collections
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from conftest import KaasBroker, _serve

HERE = Path(__file__).resolve().parent
N = 3000
KEYS = 40
PARTITIONS = 4
# The feeder keeps the input at most this many records ahead of the
# committed output, so the output grows in steps well below the gap between
# two kill points and each kill finds work in progress.
LEAD = 500
KILL_AT = (0.25, 0.55)
DEADLINE_S = 120
# Joins are not held back for more members, and the app's short session
# timeout (4 s, so a SIGKILLed member leaves the group soon) is allowed.
GROUP_FLAGS = ("--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000")
# The cleaner looks for dirty logs often, so the changelog (small segments,
# see faust_counter.py) is compacted while the app runs.
BROKER_FLAGS = (*GROUP_FLAGS, "--log-cleaner-backoff-ms", "200")


@pytest.fixture
def kaas_groups(request, tmp_path):
    yield from _serve(request, KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                                          extra_args=BROKER_FLAGS))


def key_of(i: int) -> bytes:
    return b"key-%02d" % (i % KEYS)


class Worker:
    """`python faust_counter.py worker`, started again after each kill; every
    run logs to its own file."""

    def __init__(self, bootstrap: str, app_id: str, src: str, dst: str, work: Path):
        self.work = work
        self.datadir = work / "faust-data"
        self.env = dict(os.environ, FAUST_BROKER=bootstrap, FAUST_APP=app_id, FAUST_IN=src,
                        FAUST_OUT=dst, FAUST_PARTITIONS=str(PARTITIONS),
                        FAUST_DATADIR=str(self.datadir), PYTHONUNBUFFERED="1")
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        with open(self.work / f"worker-{self.runs}.log", "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE / "faust_counter.py"), "worker", "--without-web",
                 "-l", os.environ.get("FAUST_TEST_LOG_LEVEL", "info")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.work, env=self.env)

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    def logs(self, tail: int = 4000) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-tail:]}"
                         for p in sorted(self.work.glob("worker-*.log")))


def consumer(bootstrap: str, topic: str, isolation: str = "read_committed") -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    return c


def drain(c: Consumer, into: dict, timeout: float) -> set:
    """Adds what `c` has now to `into` ({partition: [(offset, key, value)]})
    until a poll comes back empty; returns the partitions that reported their
    end."""
    eof = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msgs = c.consume(num_messages=500, timeout=0.1)
        if not msgs:
            break
        for m in msgs:
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise KafkaException(m.error())
            into[m.partition()].append((m.offset(), m.key(), m.value()))
            eof.discard(m.partition())
    return eof


def read_all(bootstrap: str, topic: str, isolation: str = "read_committed",
             timeout: float = 30) -> dict:
    """Everything a fresh consumer of `topic` gets up to the end of every
    partition: {partition: [(offset, key, value)]} in offset order."""
    c = consumer(bootstrap, topic, isolation)
    out = collections.defaultdict(list)
    eof: set = set()
    deadline = time.monotonic() + timeout
    try:
        while len(eof) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic}: no end of partitions in {timeout} s"
            eof |= drain(c, out, 1.0)
    finally:
        c.close()
    return out


def uncommitted_output(topic: str, watch: Consumer, peek: Consumer, peeked: dict) -> bool:
    """Whether the output holds records of a transaction still open: a record
    that a read_uncommitted consumer (`peek`) got at or past where the
    read_committed `watch`, drained to the end, stands (the last stable
    offset)."""
    drain(peek, peeked, 0.2)
    positions = watch.position([TopicPartition(topic, p) for p in range(PARTITIONS)])
    return any(peeked[tp.partition] and peeked[tp.partition][-1][0] >= max(tp.offset, 0)
               for tp in positions)


def test_faust_table_counts_every_input_once_despite_kills(kaas_groups, tmp_path):
    bootstrap = kaas_groups.bootstrap
    tag = uuid.uuid4().hex[:6]
    src, dst, app_id = f"faust-in-{tag}", f"faust-out-{tag}", f"faust-count-{tag}"
    changelog = f"{app_id}-counts-changelog"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1)
                                  for t in (src, dst)]).values():
        f.result(30)

    work = tmp_path / "faust"
    work.mkdir()
    worker = Worker(bootstrap, app_id, src, dst, work)
    # murmur2 is the partitioner of the Java client and of aiokafka, so an
    # input lands on the partition faust sends its output (and its changelog
    # record) to: the app's topics are co-partitioned, as faust requires.
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "partitioner": "murmur2_random", "linger.ms": 5})
    watch = consumer(bootstrap, dst)
    peek = consumer(bootstrap, dst, "read_uncommitted")
    seen, peeked = collections.defaultdict(list), collections.defaultdict(list)
    fed, kills = 0, 0
    started = time.monotonic()
    try:
        worker.start()
        while True:
            drain(watch, seen, 0.5)
            total = sum(len(v) for v in seen.values())
            if total >= N:
                break
            assert time.monotonic() - started < DEADLINE_S, (
                f"{total}/{N} outputs after {DEADLINE_S} s, {fed} fed\n{worker.logs()}")
            code = worker.exited()
            assert code is None, f"the faust worker exited by itself ({code})\n{worker.logs()}"
            while fed < min(N, total + LEAD):
                producer.produce(src, key=key_of(fed), value=b"%d" % fed)
                fed += 1
            producer.poll(0)
            # A kill once the committed output has reached the next mark and
            # the app has output in an open transaction (which the restarted
            # worker's producers must abort when they fence the dead one's).
            if (kills < len(KILL_AT) and total >= KILL_AT[kills] * N
                    and uncommitted_output(dst, watch, peek, peeked)):
                worker.kill()
                kills += 1
                if kills == 1:
                    # The broker too, while the dead worker's transactions
                    # are open: it must recover them from its own files.
                    kaas_groups.kill()
                    kaas_groups.start()
                if kills == len(KILL_AT):
                    shutil.rmtree(worker.datadir, ignore_errors=True)
                worker.start()
        assert producer.flush(30) == 0
    finally:
        # Everything is committed by now; a SIGTERMed faust 0.15 worker
        # lingers after its event loop closed (its consumer thread), so it
        # is killed here too.
        worker.kill()
        watch.close()
        peek.close()
    elapsed = time.monotonic() - started
    assert kills == len(KILL_AT), f"only {kills} kills before the output was complete"

    # Every input exactly once in the committed output, with each key's
    # running count 1, 2, ..., n in order (a key always maps to one partition).
    out = read_all(bootstrap, dst)
    per_key = collections.defaultdict(list)
    for records in out.values():
        for _, key, value in records:
            seq, count = value.split(b":")
            per_key[key].append((int(seq), int(count)))
    expected = collections.defaultdict(list)
    for i in range(N):
        expected[key_of(i)].append(i)
    problems = []
    for key in sorted(expected.keys() | per_key.keys()):
        got = per_key.get(key, [])
        want = expected.get(key, [])
        seqs = [s for s, _ in got]
        counts = [c for _, c in got]
        if seqs != want:
            missing = sorted(set(want) - set(seqs))
            dup = sorted(s for s, n in collections.Counter(seqs).items() if n > 1)
            problems.append(f"{key!r}: {len(seqs)} outputs for {len(want)} inputs, "
                            f"missing {missing[:5]}, duplicated {dup[:5]}")
        elif counts != list(range(1, len(want) + 1)):
            problems.append(f"{key!r}: counts {counts[:10]}... are not 1..{len(want)}")
    assert not problems, "\n".join(problems[:20])
    assert sum(len(v) for v in out.values()) == N

    # The kills did catch output in open transactions: a read_uncommitted
    # consumer gets those records too (aborted, and then written again).
    aborted = sum(len(v) for v in read_all(bootstrap, dst, "read_uncommitted").values()) - N
    assert aborted > 0, "no kill caught an open transaction with output in it"

    # The table's changelog: compacted, created by faust, and its last
    # committed value per key is that key's number of inputs.
    cfg = admin.describe_configs([ConfigResource("topic", changelog)])
    for f in cfg.values():
        assert f.result(30)["cleanup.policy"].value == "compact"
    last, kept = {}, 0
    for records in read_all(bootstrap, changelog).values():
        kept += len(records)
        for _, key, value in records:
            last[key] = int(value)
    assert last == {k: len(v) for k, v in expected.items()}
    # One changelog record was committed per input: the cleaner removed some.
    assert kept < N, f"the changelog holds {kept} records for {N} updates: never compacted"
    skipped = worker.logs(tail=10**9).count("counted already")
    print(f"faust app: {N} inputs, {kills} kills, {worker.runs} runs, {aborted} aborted "
          f"outputs, {kept} changelog records kept, {skipped} redeliveries skipped, "
          f"{elapsed:.1f} s")
