"""KIP-848's consumer group protocol (`group.protocol: consumer`) with
confluent-kafka 2.16 (librdkafka 2.16) against a real kaas broker:
ConsumerGroupHeartbeat, incremental rebalances as members join and leave,
OffsetCommit/OffsetFetch v9 with member epochs, ConsumerGroupDescribe and
ListGroups v5's type filter, a transactional copier whose TxnOffsetCommits
carry member epochs, a TxnOffsetCommit that names only the group (kafka-python's
producer), which Kafka accepts while the group has members, and a group that
lives through a broker kill -9.

With this protocol the broker sets the timing: kaas uses Kafka's defaults,
group.consumer.heartbeat.interval.ms 5000 and group.consumer.session.timeout.ms
45000 (kaas broker's --group-consumer-* flags change them; librdkafka refuses
session.timeout.ms and heartbeat.interval.ms here). So a member that joins gets its partitions
within about two heartbeats (the others revoke on their next one, it is given
them on its next one), and a SIGKILLed member keeps its partitions for 45 s.

Members are polled each from its own thread, as applications run them; a
consumer is only ever used by one thread at a time (librdkafka's
consumer-protocol consumer can block a call such as assignment() made from
another thread while one polls). What each member owns is taken from its
rebalance callbacks only (on_assign, on_revoke, on_lost: incremental, each
with the partitions that change), never from the client's own view.
"""

import collections
import threading
import time
import uuid

import pytest
from confluent_kafka import (Consumer, ConsumerGroupState, ConsumerGroupType, KafkaError,
                             KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KafkaTopicPartition

from common import OP_TIMEOUT
from conftest import KaasBroker, _serve
from test_exactly_once_copier import Copier, committed_total, seed
from test_transactions_confluent import read_committed

# As the other group tests run the broker: no initial rebalance delay for
# the classic groups, 1 s minimum classic session.
GROUP_FLAGS = ("--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000")
# The broker's consumer-protocol heartbeat interval and session (see above).
HEARTBEAT_S = 5.0
SESSION_S = 45.0
# Deadline for a group to settle after a member joins or leaves: a few
# heartbeat intervals.
SETTLE_TIMEOUT = 6 * HEARTBEAT_S


@pytest.fixture
def gkaas(request, tmp_path):
    """A started KaasBroker with GROUP_FLAGS."""
    yield from _serve(request, KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                                          extra_args=GROUP_FLAGS))


def create_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=OP_TIMEOUT, request_timeout=OP_TIMEOUT)
    futures[topic].result(timeout=OP_TIMEOUT)


def produce(bootstrap, topic, records):
    """Writes [(partition, value)] and waits until every one is acknowledged."""
    failed = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    for p, v in records:
        producer.produce(topic, value=v.encode(), partition=p,
                         on_delivery=lambda err, msg: err and failed.append(str(err)))
        producer.poll(0)
    assert producer.flush(OP_TIMEOUT) == 0
    assert failed == []


class Feeder:
    """Produces record i (value PREFIX-i) to partition i % partitions, one
    every `every` seconds, from its own thread until stop(); `records` is
    [(partition, value)] of every acknowledged one."""

    def __init__(self, bootstrap, topic, partitions, prefix, every=0.02):
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 2,
                                  # Rides out a broker restart.
                                  "message.timeout.ms": 60000})
        self.topic, self.partitions, self.prefix, self.every = topic, partitions, prefix, every
        self.records, self.failed = [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _acked(self, err, msg):
        if err is not None:
            self.failed.append(str(err))
        else:
            self.records.append((msg.partition(), msg.value().decode()))

    def _run(self):
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, value=f"{self.prefix}-{i:06d}".encode(),
                                  partition=i % self.partitions, on_delivery=self._acked)
            self.producer.poll(0)
            i += 1
            self._stop.wait(self.every)  # the pace, not a wait for a condition
        self.producer.flush(OP_TIMEOUT)
        self.sent = i

    def stop(self):
        """Stops producing; every record sent is acknowledged on return."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(timeout=OP_TIMEOUT + 5)
            assert not self._thread.is_alive(), "the producer's flush never returned"
            assert self.failed == [], self.failed[:5]
            assert len(self.records) == self.sent


class Ledger:
    """Who owns each partition, as the members' rebalance callbacks say, and
    every time a member was given a partition another member still had."""

    def __init__(self):
        self.lock = threading.Lock()
        self.owner = {}      # partition -> member name
        self.overlaps = []   # (member, partition, the member that still had it)

    def assigned(self, name, partitions):
        with self.lock:
            for p in partitions:
                other = self.owner.get(p)
                if other is not None and other != name:
                    self.overlaps.append((name, p, other))
                self.owner[p] = name

    def released(self, name, partitions):
        with self.lock:
            for p in partitions:
                if self.owner.get(p) == name:
                    del self.owner[p]

    def holdings(self):
        """{member name: set of partitions} of the members that own any."""
        with self.lock:
            out = collections.defaultdict(set)
            for p, name in self.owner.items():
                out[name].add(p)
            return dict(out)


class Member:
    """A consumer-protocol group member that commits each record
    synchronously once it has processed it (appended it to `consumed`)
    unless commit=False."""

    def __init__(self, name, bootstrap, topic, group, ledger=None, commit=True, **conf):
        self.name = name
        self.ledger = ledger if ledger is not None else Ledger()
        self.commit_each = commit
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **conf,
        })
        self.events = []          # (kind, frozenset of partitions): assign, revoke, lost
        self.held = set()         # partitions owned, by the callbacks
        self.consumed = []        # (partition, offset, value)
        self.committed = {}       # partition -> next offset, once its commit succeeded
        self.commit_errors = []   # (partition, offset, error)
        self.stale_commits = 0    # commits answered STALE_MEMBER_EPOCH, then retried
        self.strays = []          # records from partitions it did not own
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke,
                                on_lost=self._lost)

    # The callbacks run inside poll() (or close()) on the member's thread,
    # before librdkafka acknowledges the change to the coordinator.
    def _assign(self, _consumer, partitions):
        ps = frozenset(tp.partition for tp in partitions)
        self.events.append(("assign", ps))
        self.ledger.assigned(self.name, ps)
        self.held |= ps

    def _revoke(self, _consumer, partitions):
        ps = frozenset(tp.partition for tp in partitions)
        self.events.append(("revoke", ps))
        self.held -= ps
        self.ledger.released(self.name, ps)

    def _lost(self, _consumer, partitions):
        ps = frozenset(tp.partition for tp in partitions)
        self.events.append(("lost", ps))
        self.held -= ps
        self.ledger.released(self.name, ps)

    def poll(self, timeout=0.1):
        msg = self.consumer.poll(timeout)
        if msg is None:
            return
        err = msg.error()
        if err is not None:
            assert not err.fatal(), f"{self.name}: {err}"
            return
        p, o = msg.partition(), msg.offset()
        if p not in self.held:
            self.strays.append((p, o))
        self.consumed.append((p, o, msg.value().decode()))
        if self.commit_each:
            self._commit(msg)

    def _commit(self, msg):
        """Commits the position after `msg`, again when the answer is
        STALE_MEMBER_EPOCH: the commit raced a heartbeat that moved the
        member to a new epoch (Kafka answers so too: its OffsetCommit v9 takes
        only the current epoch), and the member still owns the partition (no
        callback ran since the record was polled)."""
        p, o = msg.partition(), msg.offset()
        for _ in range(3):
            try:
                self.consumer.commit(message=msg, asynchronous=False)
                self.committed[p] = o + 1
                return
            except KafkaException as e:
                if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                    self.commit_errors.append((p, o, str(e)))
                    return
                self.stale_commits += 1
        self.commit_errors.append((p, o, "STALE_MEMBER_EPOCH three times"))

    def changes_since(self, mark):
        """Its rebalance events after the first `mark` ones, empty
        assignments (librdkafka's after a revocation) left out."""
        return [(kind, set(ps)) for kind, ps in self.events[mark:] if ps]

    def close(self):
        self.consumer.close()


class Pollers:
    """Polls each started member from its own thread until it is stopped.
    wait() blocks until a condition holds; a poller's exception fails it."""

    def __init__(self):
        self.threads = {}
        self.errors = []
        self.cond = threading.Condition()

    def start(self, member):
        stop = threading.Event()
        t = threading.Thread(target=self._run, args=(member, stop), daemon=True)
        self.threads[member.name] = (t, stop)
        t.start()

    def _run(self, member, stop):
        try:
            while not stop.is_set():
                member.poll()
                with self.cond:
                    self.cond.notify_all()
        except Exception as e:  # reported by wait()
            with self.cond:
                self.errors.append((member.name, e))
                self.cond.notify_all()

    def stop(self, member):
        t, stop = self.threads.pop(member.name)
        stop.set()
        t.join(timeout=60)
        assert not t.is_alive(), f"{member.name}'s poll never returned"

    def stop_all(self):
        for name in list(self.threads):
            t, stop = self.threads.pop(name)
            stop.set()
            t.join(timeout=60)
            assert not t.is_alive(), f"{name}'s poll never returned"

    def wait(self, condition, what, timeout, state=lambda: ""):
        with self.cond:
            done = self.cond.wait_for(lambda: self.errors or condition(), timeout=timeout)
        assert not self.errors, f"a member failed while waiting for {what}: {self.errors[0]!r}"
        assert done, f"timed out after {timeout} s waiting for {what}; {state()}"


def settled(ledger, members, sizes, partitions):
    """Every partition owned, by exactly `members`, in shares of `sizes`."""
    h = ledger.holdings()
    return (set(h) == {m.name for m in members}
            and sorted(len(ps) for ps in h.values()) == sorted(sizes)
            and set().union(*h.values()) == set(range(partitions)))


def exactly_once(produced, members):
    """Asserts that `members` together consumed each produced (partition,
    value) exactly once, and each partition in offset order per member."""
    counts = collections.Counter((p, v) for m in members for p, _, v in m.consumed)
    twice = {k: n for k, n in counts.items() if n > 1}
    missing = set(produced) - counts.keys()
    unexpected = counts.keys() - set(produced)
    assert not twice and not missing and not unexpected, (
        f"{len(twice)} consumed more than once (e.g. {sorted(twice)[:5]}), "
        f"{len(missing)} missing (e.g. {sorted(missing)[:5]}), {len(unexpected)} unexpected")
    for m in members:
        for p in {p for p, _, _ in m.consumed}:
            offsets = [o for q, o, _ in m.consumed if q == p]
            assert offsets == sorted(set(offsets)), f"{m.name} went back on partition {p}"


# -- (a) incremental rebalances --------------------------------------------------

def test_members_share_partitions_and_rebalance_incrementally_as_they_join_and_leave(
        gkaas, topic_name):
    """Six partitions, records produced all along. A alone owns all six; B
    joins (3/3), C joins (2/2/2), B leaves (3/3). The callbacks never give a
    member a partition another still has; a member already in the group is
    only ever revoked partitions when one joins (it keeps the rest and is
    never handed them back), and only ever given partitions when one leaves.
    Each member commits every record it processed, so every record is
    consumed exactly once across the members, and the group's final offsets
    are the partitions' ends."""
    bootstrap = gkaas.bootstrap
    topic, partitions = topic_name(), 6
    create_topic(bootstrap, topic, partitions)
    group = f"{topic}-group"
    ledger = Ledger()
    pollers = Pollers()
    feeder = Feeder(bootstrap, topic, partitions, topic)
    members = {}    # name -> Member, while it is in the group
    everyone = []   # every member, in the order they joined

    def state():
        return f"holdings {ledger.holdings()}, events { {m.name: m.events for m in everyone} }"

    def join(name):
        m = Member(name, bootstrap, topic, group, ledger)
        members[name] = m
        everyone.append(m)
        pollers.start(m)
        return m

    try:
        a = join("A")
        pollers.wait(lambda: settled(ledger, [a], [6], partitions) and len(a.consumed) >= 20,
                     "A to own every partition and consume", SETTLE_TIMEOUT, state)

        for name, sizes in (("B", [3, 3]), ("C", [2, 2, 2])):
            before = {n: set(m.held) for n, m in members.items()}
            marks = {n: len(m.events) for n, m in members.items()}
            new = join(name)
            group_now = list(members.values())
            pollers.wait(lambda: settled(ledger, group_now, sizes, partitions),
                         f"{name} to join ({sizes})", SETTLE_TIMEOUT, state)
            for n, held in before.items():
                changes = members[n].changes_since(marks[n])
                assert changes and all(kind == "revoke" for kind, _ in changes), (
                    f"{name} joining: {n} may only give partitions up: {changes}")
                revoked = set().union(*(ps for _, ps in changes))
                assert members[n].held == held - revoked, (n, held, revoked, members[n].held)
            assert [k for k, _ in new.changes_since(0)] == ["assign"] * len(new.changes_since(0))
            n0 = len(new.consumed)
            pollers.wait(lambda: len(new.consumed) - n0 >= 10, f"{name} to consume",
                         SETTLE_TIMEOUT, state)

        # B leaves: its partitions go to A and C, which lose none.
        a, b, c = members["A"], members["B"], members["C"]
        before = {"A": set(a.held), "C": set(c.held)}
        marks = {"A": len(a.events), "C": len(c.events)}
        b_had = set(b.held)
        pollers.stop(b)
        del members["B"]
        b.close()  # revokes its partitions, then leaves (member epoch -1)
        assert b.held == set() and b.changes_since(0)[-1] == ("revoke", b_had), b.events
        pollers.wait(lambda: settled(ledger, [a, c], [3, 3], partitions),
                     "A and C to take B's partitions", SETTLE_TIMEOUT, state)
        for n, m in (("A", a), ("C", c)):
            changes = m.changes_since(marks[n])
            assert all(kind == "assign" for kind, _ in changes), (
                f"B leaving: {n} may only gain partitions: {changes}")
            assert m.held >= before[n]
        counts = (len(a.consumed), len(c.consumed))
        pollers.wait(lambda: len(a.consumed) > counts[0] and len(c.consumed) > counts[1],
                     "A and C to consume after B left", SETTLE_TIMEOUT, state)

        feeder.stop()
        produced = set(feeder.records)
        pollers.wait(lambda: {(p, v) for m in everyone for p, _, v in m.consumed} >= produced,
                     "every record to be consumed", SETTLE_TIMEOUT, state)
        pollers.stop_all()

        assert ledger.overlaps == [], f"a partition given while another member had it: {ledger.overlaps}"
        assert [e for m in everyone for e in m.events if e[0] == "lost"] == []
        assert [m.strays for m in everyone] == [[], [], []]
        assert [m.commit_errors for m in everyone] == [[], [], []]
        exactly_once(produced, everyone)
        ends = collections.Counter(p for p, _ in produced)
        got = a.consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                   timeout=OP_TIMEOUT)
        assert {tp.partition: tp.offset for tp in got} == {p: ends[p] for p in range(partitions)}
        print(f"{len(produced)} records; consumed by A {len(a.consumed)}, B {len(b.consumed)}, "
              f"C {len(c.consumed)}; commits retried after STALE_MEMBER_EPOCH: "
              f"{[m.stale_commits for m in everyone]}")
    finally:
        feeder.stop()
        pollers.stop_all()
        for m in members.values():
            m.close()


# -- (b) commits -----------------------------------------------------------------

def test_sync_commits_read_back_and_a_new_member_resumes_from_them(gkaas, topic_name):
    """A member reads 40 records, commits its positions synchronously and
    committed() reads them back (OffsetCommit / OffsetFetch v9 with its
    member id and epoch); it then commits offsets 7..10 with metadata, read
    back too. A consumer outside the group cannot commit while the group has
    a member (UNKNOWN_MEMBER_ID). After the member left, a new member
    resumes exactly at the committed offsets."""
    bootstrap = gkaas.bootstrap
    topic = topic_name()
    create_topic(bootstrap, topic, 4)
    group = f"{topic}-group"
    produce(bootstrap, topic, [(i % 4, f"first-{i:03d}") for i in range(40)])
    tps = [TopicPartition(topic, p) for p in range(4)]

    m = Member("first", bootstrap, topic, group, commit=False)
    try:
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(m.consumed) < 40:
            assert time.monotonic() < deadline, f"read {len(m.consumed)} of 40; {m.events}"
            m.poll()
        assert sorted((p, o) for p, o, _ in m.consumed) == [(p, o) for p in range(4) for o in range(10)]
        assert m.consumer.commit(asynchronous=False) is not None
        got = m.consumer.committed(tps, timeout=OP_TIMEOUT)
        assert [(tp.partition, tp.offset) for tp in got] == [(p, 10) for p in range(4)]

        m.consumer.commit(offsets=[TopicPartition(topic, p, 7 + p, f"meta-{p}") for p in range(4)],
                          asynchronous=False)
        got = m.consumer.committed(tps, timeout=OP_TIMEOUT)
        assert [(tp.partition, tp.offset, tp.metadata) for tp in got] == [
            (p, 7 + p, f"meta-{p}") for p in range(4)]

        outsider = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                             "enable.auto.commit": False})
        try:
            with pytest.raises(KafkaException) as refused:
                outsider.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
            assert refused.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID, refused.value
        finally:
            outsider.close()
    finally:
        m.close()

    # The offsets are what the member committed, not the outsider's.
    produce(bootstrap, topic, [(i % 4, f"second-{i:03d}") for i in range(8)])
    n = Member("second", bootstrap, topic, group, commit=False)
    try:
        want = sorted([(p, o) for p in range(4) for o in range(7 + p, 10)]
                      + [(p, o) for p in range(4) for o in (10, 11)])
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(n.consumed) < len(want):
            assert time.monotonic() < deadline, f"read {n.consumed}; {n.events}"
            n.poll()
        # And nothing more: poll a second longer.
        quiet = time.monotonic() + 1.0
        while time.monotonic() < quiet:
            n.poll()
        assert sorted((p, o) for p, o, _ in n.consumed) == want
    finally:
        n.close()


# -- (c) describe and list ---------------------------------------------------------

def test_admin_lists_consumer_groups_by_type_and_describes_members_and_assignments(
        gkaas, topic_name):
    """ListGroups v5 with the type filter: the consumer-protocol group is
    listed as CONSUMER (and not under CLASSIC), a classic group beside it as
    CLASSIC. ConsumerGroupDescribe: the group STABLE, assignor uniform, the
    coordinator, each member with its client id, host, and an assignment
    (current and target) equal to what its callbacks report; after both
    left, EMPTY with no members. A group with group.remote.assignor=range is
    described with range and contiguous partition ranges."""
    bootstrap = gkaas.bootstrap
    topic = topic_name()
    create_topic(bootstrap, topic, 4)
    group, classic_group, range_group = (f"{topic}-group", f"{topic}-classic", f"{topic}-range")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ledger, range_ledger = Ledger(), Ledger()
    pollers = Pollers()
    a = Member("member-a", bootstrap, topic, group, ledger)
    b = Member("member-b", bootstrap, topic, group, ledger)
    r1 = Member("range-1", bootstrap, topic, range_group, range_ledger,
                **{"group.remote.assignor": "range"})
    r2 = Member("range-2", bootstrap, topic, range_group, range_ledger,
                **{"group.remote.assignor": "range"})
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": classic_group,
                        "client.id": "classic-member", "session.timeout.ms": 6000})
    classic_assigned = []
    classic.subscribe([topic], on_assign=lambda _c, ps: classic_assigned.append(ps))
    members = [a, b, r1, r2]
    try:
        for m in members:
            pollers.start(m)
        pollers.wait(lambda: settled(ledger, [a, b], [2, 2], 4)
                     and settled(range_ledger, [r1, r2], [2, 2], 4),
                     "both groups to split the partitions", SETTLE_TIMEOUT,
                     lambda: f"{ledger.holdings()} {range_ledger.holdings()}")
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while not classic_assigned:
            assert time.monotonic() < deadline, "the classic member got no assignment"
            classic.poll(0.1)

        def listed(**kw):
            res = admin.list_consumer_groups(request_timeout=OP_TIMEOUT, **kw).result(OP_TIMEOUT)
            assert res.errors == []
            return {g.group_id: (g.type, g.state) for g in res.valid
                    if g.group_id in (group, classic_group, range_group)}

        stable = ConsumerGroupState.STABLE
        assert listed() == {group: (ConsumerGroupType.CONSUMER, stable),
                            range_group: (ConsumerGroupType.CONSUMER, stable),
                            classic_group: (ConsumerGroupType.CLASSIC, stable)}
        assert listed(types={ConsumerGroupType.CONSUMER}) == {
            group: (ConsumerGroupType.CONSUMER, stable),
            range_group: (ConsumerGroupType.CONSUMER, stable)}
        assert listed(types={ConsumerGroupType.CLASSIC}) == {
            classic_group: (ConsumerGroupType.CLASSIC, stable)}

        descs = admin.describe_consumer_groups([group, range_group], request_timeout=OP_TIMEOUT)
        d = descs[group].result(OP_TIMEOUT)
        coordinator = d.coordinator
        assert (d.group_id, d.type, d.state, d.partition_assignor, d.is_simple_consumer_group) == (
            group, ConsumerGroupType.CONSUMER, stable, "uniform", False)
        assert f"{coordinator.host}:{coordinator.port}" == bootstrap
        holdings = ledger.holdings()

        def described(desc):
            out = {}
            for mem in desc.members:
                assert mem.member_id and mem.host.endswith("127.0.0.1"), (mem.member_id, mem.host)
                assert mem.group_instance_id is None
                current = {tp.partition for tp in mem.assignment.topic_partitions
                           if tp.topic == topic}
                target = {tp.partition for tp in mem.target_assignment.topic_partitions
                          if tp.topic == topic}
                out[mem.client_id] = (current, target)
            return out

        assert described(d) == {n: (ps, ps) for n, ps in holdings.items()}
        rd = descs[range_group].result(OP_TIMEOUT)
        assert (rd.type, rd.state, rd.partition_assignor) == (ConsumerGroupType.CONSUMER, stable,
                                                              "range")
        ranges = described(rd)
        assert ranges == {n: (ps, ps) for n, ps in range_ledger.holdings().items()}
        assert sorted(sorted(cur) for cur, _ in ranges.values()) == [[0, 1], [2, 3]]

        pollers.stop_all()
        for m in members:
            m.close()
        members = []
        for g in (group, range_group):
            d = admin.describe_consumer_groups([g], request_timeout=OP_TIMEOUT)[g].result(OP_TIMEOUT)
            assert (d.type, d.state, d.members) == (ConsumerGroupType.CONSUMER,
                                                    ConsumerGroupState.EMPTY, [])
        assert listed(types={ConsumerGroupType.CONSUMER}) == {
            group: (ConsumerGroupType.CONSUMER, ConsumerGroupState.EMPTY),
            range_group: (ConsumerGroupType.CONSUMER, ConsumerGroupState.EMPTY)}
    finally:
        pollers.stop_all()
        for m in members:
            m.close()
        classic.close()


# -- (d) an exactly-once copier --------------------------------------------------

COPY_N = 2000
COPY_PARTITIONS = 4
COPY_DEADLINE_S = SESSION_S + 90
# The broker is SIGKILLed and restarted when the committed total first
# reaches this fraction of COPY_N (the copiers alive), copier A is SIGKILLed
# at the second, and copier B as soon as the total moved on after that (or a
# heartbeat interval later: B may have nothing to copy until A's partitions
# move on, 45 s after its death). Each SIGKILL costs one session timeout, so
# the two are close together.
BROKER_STRIKE, COPIER_STRIKE = 0.10, 0.25


def test_consumer_protocol_copier_is_exactly_once_despite_broker_and_copier_kills(
        gkaas, tmp_path):
    """eos_copier.py with group.protocol=consumer: two copiers copy 2000
    records in -> out, one transaction per batch with the consumed offsets
    (send_offsets_to_transaction with consumer_group_metadata(): the member
    id and epoch in TxnOffsetCommit). The broker is SIGKILLed and restarted
    with the copiers running; then each copier is SIGKILLed (mid-transaction
    or between two) and restarted: its successor's init_transactions aborts
    what it left open, and the dead member's partitions move on once its
    45 s session ends. read_committed, `out` holds every input exactly once
    (each partition's copies in input order), and the group's committed
    offsets are the input's end."""
    b = gkaas
    src, dst = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    group = f"copier-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, src, COPY_PARTITIONS)
    create_topic(b.bootstrap, dst, COPY_PARTITIONS)
    seed(b.bootstrap, src, COPY_N)
    log_dir = tmp_path / "copiers"
    log_dir.mkdir()
    copiers = [Copier(s, b.bootstrap, src, dst, group, log_dir, protocol="consumer")
               for s in ("A", "B")]
    strikes = []  # (what, committed total at the time)
    try:
        deadline = time.monotonic() + COPY_DEADLINE_S
        total = 0
        while total != COPY_N:
            assert time.monotonic() < deadline, (
                f"copied {total}/{COPY_N} in {COPY_DEADLINE_S} s; strikes {strikes}\n"
                + "\n".join(c.logs() for c in copiers))
            for c in copiers:
                c.ensure_running()
            total = committed_total(b.bootstrap, group, src)
            done = [w for w, _ in strikes]
            if "broker" not in done and total >= BROKER_STRIKE * COPY_N:
                b.kill()
                b.start()
                strikes.append(("broker", total))
            elif "broker" in done and "A" not in done and total >= COPIER_STRIKE * COPY_N:
                copiers[0].kill()
                a_killed_at = time.monotonic()
                strikes.append(("A", total))
            elif "A" in done and "B" not in done and (
                    total > strikes[-1][1] or time.monotonic() > a_killed_at + HEARTBEAT_S):
                copiers[1].kill()
                strikes.append(("B", total))
            # committed_total's own round trip paces this loop.
        assert [w for w, _ in strikes] == ["broker", "A", "B"], (
            f"the copy finished before every strike: {strikes}")
    finally:
        for c in copiers:
            c.kill()

    seen = read_committed(b.bootstrap, dst, COPY_PARTITIONS, expect_at_least=COPY_N, timeout=60)
    counts = collections.Counter(seen)
    expected = {f"copy:v{i}" for i in range(COPY_N)}
    missing = expected - counts.keys()
    duplicated = {v: n for v, n in counts.items() if n > 1}
    unexpected = counts.keys() - expected
    assert not missing and not duplicated and not unexpected, (
        f"{len(missing)} missing, {len(duplicated)} duplicated (e.g. "
        f"{list(duplicated.items())[:5]}), {len(unexpected)} unexpected; strikes {strikes}")
    assert len(seen) == COPY_N
    # Each partition's copies in input order (read_committed reads
    # partitions in turn; within one, record i precedes record i + 4).
    for p in range(COPY_PARTITIONS):
        got = [int(v[len("copy:v"):]) for v in seen if int(v[len("copy:v"):]) % COPY_PARTITIONS == p]
        assert got == sorted(got), f"partition {p} out of order"
    assert committed_total(b.bootstrap, group, src) == COPY_N
    print(f"strikes (what, committed total): {strikes}; copier runs "
          f"{[c.runs for c in copiers]}")


# -- (e) a broker kill -9 ----------------------------------------------------------

def test_a_consumer_group_keeps_consuming_across_a_broker_kill_and_restart(gkaas, topic_name):
    """Two members share 4 partitions while records are produced all along
    and each record is committed once processed. The broker is SIGKILLed
    mid-stream and restarted on its data: the members keep their member ids,
    epochs and partitions (no revocation, no lost partitions: the group was
    journaled), go on consuming, and every record is consumed, more than
    once only at or after its partition's last successful commit before the
    kill."""
    b = gkaas
    topic = topic_name()
    create_topic(b.bootstrap, topic, 4)
    group = f"{topic}-group"
    ledger = Ledger()
    pollers = Pollers()
    feeder = Feeder(b.bootstrap, topic, 4, topic)
    x = Member("X", b.bootstrap, topic, group, ledger)
    y = Member("Y", b.bootstrap, topic, group, ledger)
    members = [x, y]

    def state():
        return f"holdings {ledger.holdings()}, events {[m.events for m in members]}"

    try:
        for m in members:
            pollers.start(m)
        pollers.wait(lambda: settled(ledger, members, [2, 2], 4)
                     and all(len(m.consumed) >= 20 for m in members),
                     "the members to split the partitions and consume", 2 * SETTLE_TIMEOUT, state)
        marks = [len(m.events) for m in members]
        held = [set(m.held) for m in members]

        b.kill()
        committed_at_kill = {}
        for m in members:
            for p, o in m.committed.items():
                committed_at_kill[p] = max(committed_at_kill.get(p, 0), o)
        consumed_at_kill = [len(m.consumed) for m in members]
        b.start()

        pollers.wait(lambda: all(len(m.consumed) >= n + 20 for m, n in zip(members, consumed_at_kill)),
                     "both members to consume after the restart", 2 * SETTLE_TIMEOUT, state)
        feeder.stop()
        produced = set(feeder.records)
        pollers.wait(lambda: {(p, v) for m in members for p, _, v in m.consumed} >= produced,
                     "every record to be consumed", SETTLE_TIMEOUT, state)
        pollers.stop_all()

        assert [m.events[n:] for m, n in zip(members, marks)] == [[], []], (
            "a rebalance after the restart", state())
        assert [m.held for m in members] == held
        assert ledger.overlaps == [] and [m.strays for m in members] == [[], []]
        counts = collections.Counter((p, v) for m in members for p, _, v in m.consumed)
        again = sorted((p, o) for m in members for p, o, v in m.consumed if counts[(p, v)] > 1)
        early = [(p, o) for p, o in again if o < committed_at_kill.get(p, 0)]
        assert early == [], f"re-read before the last commit: {early}"
        assert set(counts) == produced, (
            f"missing {sorted(produced - set(counts))[:5]}, unexpected {sorted(set(counts) - produced)[:5]}")
        print(f"{len(produced)} records; re-read after the last commit: {again}; commit errors "
              f"across the kill: {[m.commit_errors for m in members]}; commits retried after "
              f"STALE_MEMBER_EPOCH: {[m.stale_commits for m in members]}")
    finally:
        feeder.stop()
        pollers.stop_all()
        for m in members:
            m.close()


# -- a transactional commit that names only the group ----------------------------

def test_a_transactional_commit_naming_only_the_group_is_accepted_while_it_has_members(
        gkaas, topic_name):
    """A transactional producer that sends offsets with the group id alone
    (kafka-python 3's send_offsets_to_transaction(offsets, "group"), Java's
    pre-KIP-447 sendOffsetsToTransaction(offsets, groupId): TxnOffsetCommit
    with generation -1, member id "" and no instance id) while a
    consumer-protocol member is in the group: Kafka skips the member checks
    for such a commit, so it commits, and the member reads the offset back."""
    bootstrap = gkaas.bootstrap
    topic = topic_name()
    create_topic(bootstrap, topic, 1)
    group = f"{topic}-group"
    m = Member("member", bootstrap, topic, group, commit=False)
    producer = None
    try:
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while m.held != {0}:
            assert time.monotonic() < deadline, f"no assignment: {m.events}"
            m.poll()
        producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-txn")
        producer.init_transactions()
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            {KafkaTopicPartition(topic, 0): OffsetAndMetadata(5, "", -1)}, group)
        producer.commit_transaction()
        got = m.consumer.committed([TopicPartition(topic, 0)], timeout=OP_TIMEOUT)
        assert [tp.offset for tp in got] == [5]
    finally:
        if producer is not None:
            producer.close(timeout=5)
        m.close()
