"""Helpers of the cluster transaction tests: topics whose
partitions every broker leads, transactional ids and groups whose
coordinators sit on a chosen broker, raw transactions over kwire that retry
what a client retries, and read_committed reads (raw and with librdkafka and
kafka-python) that wait until every partition is stable first.
"""

import time
import uuid

import kwire
from harness import Cluster, HarnessError, wait_for
from workload import kafka_python_end_offsets

RETRY_S = 30.0


def leaders(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """partition -> leader node id, as the leaders themselves say."""
    out = {}
    for p in range(partitions):
        leader = cluster.leader_of(topic, p)
        if leader in cluster.live_ids() and cluster.leader_of(topic, p, via=leader) == leader:
            out[p] = leader
        else:
            out[p] = -1
    return out


def spread_topic(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """Creates `topic` and returns partition -> leader; asserts every live
    broker leads at least one partition (the point of the cross-broker tests)."""
    cluster.create_topic(topic, partitions)
    led = wait_for(lambda: (lambda m: m if -1 not in m.values() else None)(
        leaders(cluster, topic, partitions)), 30, f"leaders of {topic}")
    assert set(led.values()) == cluster.live_ids(), \
        f"{topic}'s partitions are led by {sorted(set(led.values()))}, not every live broker " \
        f"{sorted(cluster.live_ids())}: {led}"
    return led


def txn_id_on(cluster: Cluster, broker: int | None = None, exclude: set[int] = frozenset(),
              prefix: str = "tx", tries: int = 200) -> tuple[str, int]:
    """A fresh transactional id whose coordinator is `broker` (any broker
    not in `exclude` when None): (id, coordinator)."""
    for _ in range(tries):
        t = f"{prefix}-{uuid.uuid4().hex[:8]}"
        node = cluster.txn_coordinator(t)
        if (broker is None and node not in exclude) or node == broker:
            return t, node
    raise HarnessError(f"no transactional id on broker {broker} (not {exclude}) in {tries} tries")


def group_on(cluster: Cluster, not_on: set[int], prefix: str = "g", tries: int = 200) -> tuple[str, int]:
    """A fresh group id whose coordinator is a live broker not in `not_on`."""
    live = min(cluster.live_ids())
    for _ in range(tries):
        g = f"{prefix}-{uuid.uuid4().hex[:8]}"
        err, node = kwire.find_coordinator(cluster.addr(live), g)
        if err == 0 and node not in not_on and node in cluster.live_ids():
            return g, node
    raise HarnessError(f"no group off brokers {not_on} in {tries} tries")


def init(cluster: Cluster, transactional_id: str, claim=(-1, -1), timeout: float = RETRY_S,
         via: int | None = None) -> tuple[int, int, int]:
    """InitProducerId at the id's current coordinator (or at `via`),
    repeated while the answer is retriable (coordinator loading or moved,
    CONCURRENT_TRANSACTIONS while a fence's markers are written): the
    (error, pid, epoch) of the first other answer."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            node = via if via is not None else cluster.txn_coordinator(transactional_id, timeout=5)
            last = kwire.init_producer_id(cluster.addr(node), transactional_id, claim)
            if last[0] not in kwire.COORDINATOR_RETRIABLE:
                return last
        except (kwire.WireError, AssertionError) as e:
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"InitProducerId({transactional_id}, {claim}) still retriable "
                                 f"after {timeout} s: {last}")
        time.sleep(0.05)


class RawTxn:
    """One transactional producer on the raw wire: every request goes to
    the broker named, so a test knows exactly who answered what, and keeps
    its own sequence numbers per partition (the ones a zombie reuses)."""

    def __init__(self, cluster: Cluster, transactional_id: str):
        self.cluster, self.tid = cluster, transactional_id
        self.pid = self.epoch = -1
        self.seq: dict[tuple[str, int], int] = {}

    def init(self) -> "RawTxn":
        err, self.pid, self.epoch = init(self.cluster, self.tid)
        assert err == 0, f"InitProducerId({self.tid}) answered {err}"
        self.seq.clear()
        return self

    def coordinator(self) -> int:
        return self.cluster.txn_coordinator(self.tid)

    def add(self, topic: str, partitions: list[int]) -> dict[tuple[str, int], int]:
        return kwire.add_partitions_to_txn(self.cluster.addr(self.coordinator()), self.tid,
                                           self.pid, self.epoch, {topic: partitions})

    def produce(self, topic: str, partition: int, values: list[bytes],
                leader: int | None = None, transactional: bool = True,
                epoch: int | None = None) -> tuple[int, int]:
        """One batch at the partition's next sequence; the sequence advances
        only when the batch is acknowledged."""
        leader = leader if leader is not None else self.cluster.leader_of(topic, partition)
        seq = self.seq.get((topic, partition), 0)
        batch = kwire.record_batch(values, self.pid, self.epoch if epoch is None else epoch, seq,
                                   transactional)
        r = kwire.produce(self.cluster.addr(leader), topic, partition, batch,
                          transactional_id=self.tid if transactional else None)
        if r[0] == 0:
            self.seq[(topic, partition)] = seq + len(values)
        return r

    def end(self, commit: bool, timeout: float = RETRY_S) -> int:
        """EndTxn at the coordinator, repeated while retriable."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                err = kwire.end_txn(self.cluster.addr(self.coordinator()), self.tid, self.pid,
                                    self.epoch, commit)
            except (kwire.WireError, AssertionError) as e:
                err = e
            if err not in kwire.COORDINATOR_RETRIABLE and not isinstance(err, Exception):
                return err
            if time.monotonic() >= deadline:
                raise AssertionError(f"EndTxn({self.tid}) still retriable after {timeout} s: {err}")
            time.sleep(0.05)


def stable(cluster: Cluster, topic: str, partitions: int) -> bool:
    """Every partition's last stable offset is its high watermark, at its leader."""
    for p in range(partitions):
        leader = cluster.leader_of(topic, p)
        if leader not in cluster.live_ids():
            return False
        try:
            err, high, lso, _ = kwire.fetch_committed(cluster.addr(leader), topic, p)
        except kwire.WireError:
            return False
        if err != 0 or lso != high:
            return False
    return True


def wait_stable(cluster: Cluster, topic: str, partitions: int, timeout: float = 60.0) -> None:
    wait_for(lambda: stable(cluster, topic, partitions), timeout,
             f"every partition of {topic} to be stable (no open transaction)", 0.1)


def raw_committed(cluster: Cluster, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """partition -> values a read_committed consumer keeps, read raw from
    each leader (after wait_stable)."""
    out = {}
    for p in range(partitions):
        leader = cluster.leader_of(topic, p)
        err, _high, _lso, recs = kwire.fetch_committed(cluster.addr(leader), topic, p)
        assert err == 0, f"Fetch {topic}/{p} at broker {leader}: error {err}"
        out[p] = [v for _, v in recs]
    return out


def confluent_committed(bootstrap: str, topic: str, partitions: int,
                        timeout: float = 60.0) -> dict[int, list[bytes]]:
    """partition -> values a librdkafka read_committed consumer reads from
    offset 0 up to the end of each partition (its EOF: the last stable
    offset; call after wait_stable)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True, "topic.metadata.refresh.interval.ms": 1000})
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    eof: set[int] = set()
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"confluent read_committed reader: eof {eof}"
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                    continue
                out[m.partition()].append(m.value())
                eof.discard(m.partition())
        return out
    finally:
        c.close()


def kafka_python_committed(bootstrap: str, topic: str, partitions: int,
                           timeout: float = 60.0) -> dict[int, list[bytes]]:
    """The same with kafka-python (read_committed: its end offsets are the
    last stable offsets)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None,
                      enable_auto_commit=False, isolation_level="read_committed",
                      metadata_max_age_ms=1000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = kafka_python_end_offsets(c, tps, timeout)
        out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(c.position(TopicPartition(topic, p)) < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"kafka-python read_committed reader: ends {ends}"
            for tp, msgs in c.poll(timeout_ms=300, max_records=1000).items():
                out[tp.partition] += [m.value for m in msgs]
        return out
    finally:
        c.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (require_stable), -1001 where none."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {t.partition: t.offset for t in got}
    finally:
        c.close()
