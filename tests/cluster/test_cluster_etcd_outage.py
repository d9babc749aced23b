"""etcd unavailable for longer than the lease TTL, in cluster mode.

etcd is stopped (SIGSTOP: its sockets stay open, so keep-alives hang rather
than fail) while an idempotent acks=all producer writes to every partition
and raw Produce requests go straight to each partition's leader. The claims
(docs/cluster.md, "Failures"; design.md, "etcd unavailable"):

- within 0.8 x TTL of the pause every leader answers a Produce with
  NOT_LEADER_OR_FOLLOWER, and nothing is acknowledged while etcd is away;
- what was acknowledged before stays readable from the leader meanwhile;
- once etcd is back, produces succeed again, every acknowledged record
  (before, during, after) is read exactly once at its offset;
- at no sampled moment do two brokers each say, in their own Metadata,
  that they lead one partition.
"""

import threading
import time


from checker import History, assert_ok, check
from harness import HarnessError, wait_for
import kwire
from workload import ConfluentWriter, confluent_read_all, kafka_python_read_all

PARTITIONS = 3


class LeaderSampler(threading.Thread):
    """Asks every running broker for Metadata over and over and records, per
    round, which brokers name themselves leader of each partition."""

    def __init__(self, cluster, topic: str):
        super().__init__(name="leader-sampler", daemon=True)
        self.cluster, self.topic = cluster, topic
        self._halt = threading.Event()
        self.rounds = 0
        self.conflicts: list[str] = []
        # node id -> monotonic times at which it answered Metadata
        self.answered: dict[int, list[float]] = {n: [] for n in cluster.brokers}

    def run(self) -> None:
        while not self._halt.is_set():
            claims: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
            for n in sorted(self.cluster.brokers):
                if not self.cluster.brokers[n].live:
                    continue
                try:
                    md = kwire.metadata(self.cluster.addr(n), None, timeout=2.0)
                except kwire.WireError:
                    continue
                self.answered[n].append(time.monotonic())
                for p, (err, leader) in md.partitions.get(self.topic, {}).items():
                    if err == 0 and leader == n:
                        claims.setdefault(p, set()).add(n)
            self.rounds += 1
            for p, who in sorted(claims.items()):
                if len(who) > 1:
                    self.conflicts.append(f"round {self.rounds}: {self.topic}/{p} led by "
                                          f"{sorted(who)} at once")
            self._halt.wait(0.05)

    def answered_between(self, n: int, start: float, end: float) -> int:
        return sum(1 for t in self.answered[n] if start <= t <= end)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


class RawProducer:
    """Raw acks=-1 Produce requests of unique values straight to one broker,
    recorded in a History like a client's."""

    def __init__(self, cluster, topic: str):
        self.cluster, self.topic = cluster, topic
        self.history = History()
        self.seq = 0

    def send(self, partition: int, leader: int, timeout: float = 4.0):
        """(error code, base offset), or the WireError (outcome unknown)."""
        self.seq += 1
        value = f"raw-p{partition}-{self.seq:05d}".encode()
        self.history.send(value)
        try:
            code, base = kwire.produce(self.cluster.addr(leader), self.topic, partition,
                                       kwire.record_batch([value]), timeout=timeout,
                                       timeout_ms=int(timeout * 1000) // 2)
        except kwire.WireError as e:
            return e
        if code == 0:
            self.history.ack(value, partition, base)
        return code, base


def _read_from_leader(addr: str, topic: str, p: int) -> dict[bytes, int]:
    """value -> offset of every record of `topic`/`p` the broker at `addr`
    serves, from offset 0 to its high watermark; asserts each Fetch succeeds."""
    out: dict[bytes, int] = {}
    offset, high = 0, None
    while high is None or offset < high:
        code, high, records = kwire.fetch(addr, topic, p, offset)
        assert code == 0, f"Fetch {topic}/{p} from {offset} at {addr} answered {code}"
        if not records:
            break
        for off, value in records:
            out[value] = off
        offset = records[-1][0] + 1
    return out


def test_an_etcd_outage_stops_acknowledgements_loses_nothing_and_never_has_two_leaders(
        cluster, topic_name):
    ttl = cluster.lease_ttl_ms / 1000
    topic = topic_name()
    cluster.create_topic(topic, PARTITIONS)
    leaders = {p: cluster.leader_of(topic, p) for p in range(PARTITIONS)}
    assert all(n in cluster.live_ids() for n in leaders.values()), leaders

    writer = ConfluentWriter("ew", cluster.bootstrap, topic, PARTITIONS)
    raw = RawProducer(cluster, topic)
    sampler = LeaderSampler(cluster, topic)
    writer.start()
    sampler.start()
    try:
        wait_for(lambda: writer.acked_count() >= 150, 60, "acknowledged records before the outage")
        for p, n in leaders.items():
            r = raw.send(p, n)
            assert r[0] == 0, f"raw Produce to {topic}/{p} at broker {n} before the outage: {r}"

        cluster.pause_etcd()
        paused_at = time.monotonic()
        # Every leader must refuse writes once 0.8 x TTL has passed.
        refused_after: dict[int, float] = {}
        for p, n in leaders.items():
            answers = []

            def refuses(p=p, n=n, answers=answers):
                r = raw.send(p, n)
                answers.append(r)
                return isinstance(r, tuple) and r[0] == kwire.NOT_LEADER_OR_FOLLOWER

            wait_for(refuses, ttl * 0.8 + 1.0 - (time.monotonic() - paused_at),
                     lambda: f"broker {n} to refuse Produce to {topic}/{p} within 0.8 x TTL "
                             f"of the pause (last answers {answers[-3:]})", 0.05)
            refused_after[p] = time.monotonic() - paused_at
        gates_closed = time.monotonic()
        acked_when_closed = writer.acked_count()

        # What was acknowledged before is still served by its leader.
        with writer._lock:
            acked_before = dict(writer.history.acked)
        acked_before.update(raw.history.acked)
        for p, n in leaders.items():
            served = _read_from_leader(cluster.addr(n), topic, p)
            missing = [(v, off) for v, (q, off) in acked_before.items()
                       if q == p and served.get(v) != off]
            assert not missing, f"broker {n} does not serve {len(missing)} acknowledged " \
                                f"records of {topic}/{p} during the outage: {missing[:5]}"

        # Keep etcd away past the TTL; every write attempt is refused.
        while time.monotonic() - paused_at < ttl * 1.5:
            for p, n in leaders.items():
                r = raw.send(p, n)
                assert isinstance(r, tuple) and r[0] == kwire.NOT_LEADER_OR_FOLLOWER, \
                    f"broker {n} answered Produce to {topic}/{p} with {r} " \
                    f"{time.monotonic() - paused_at:.2f} s into the outage"
            time.sleep(0.2)
        assert writer.acked_count() == acked_when_closed, \
            f"{writer.acked_count() - acked_when_closed} records were acknowledged while " \
            "etcd was away and every leader refused writes"
        for n in sorted(cluster.brokers):
            assert sampler.answered_between(n, gates_closed, time.monotonic()) > 0, \
                f"broker {n} answered no Metadata while etcd was away"
        cluster.resume_etcd()
        resumed_at = time.monotonic()

        # Produces succeed again, wherever the partitions now are.
        bound = ttl * 5 + 20
        for p in range(PARTITIONS):
            answers = []

            def accepted(p=p, answers=answers):
                try:
                    leader = cluster.leader_of(topic, p)
                except HarnessError as e:  # no broker answered Metadata just now
                    answers.append(repr(e))
                    return False
                if leader < 0:
                    answers.append("no leader")
                    return False
                r = raw.send(p, leader)
                answers.append((leader, r))
                return isinstance(r, tuple) and r[0] == 0

            wait_for(accepted, bound, lambda: f"a Produce to {topic}/{p} to succeed after etcd "
                                              f"came back (last {answers[-3:]})", 0.1)
        wait_for(lambda: writer.acked_count() >= acked_when_closed + 150, bound,
                 "the producer to carry on after etcd came back")
        recovered_after = time.monotonic() - resumed_at
        cluster.wait_ready(topic, PARTITIONS)
        writer.stop()
        sampler.stop()
        assert writer.fatal == [], writer.fatal
        assert sampler.conflicts == [], sampler.conflicts[:10]
        assert sampler.rounds > 10, f"only {sampler.rounds} Metadata rounds sampled"

        history = History().merge(writer.history).merge(raw.history)
        reads = {"confluent": confluent_read_all(cluster.bootstrap, topic, PARTITIONS),
                 "kafka-python": kafka_python_read_all(cluster.bootstrap, topic, PARTITIONS)}
        assert_ok(check(history, reads))
        print(f"refused after {refused_after} s; writes again {recovered_after:.2f} s after "
              f"etcd resumed; {sampler.rounds} sample rounds; {len(history.acked)} acked")
    finally:
        cluster.resume_etcd()
        sampler.stop()
        writer._halt.set()  # a failed test leaves no producer running into teardown
