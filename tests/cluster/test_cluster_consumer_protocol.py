"""KIP-848 consumer groups across a coordinator's kill -9.

A consumer-protocol group (ConsumerGroupHeartbeat) lives in its group
coordinator shard's journal: its epoch, every member with its epoch and
assignment, the target assignment. When the coordinator broker is killed
with SIGKILL, the shard's new owner reads that journal back, so the members'
next heartbeats (same member id, same epoch) are simply accepted there. Were
anything lost, the new coordinator would answer UNKNOWN_MEMBER_ID or
FENCED_MEMBER_EPOCH, the clients would rejoin at epoch 0, and the group
would rebalance: its epoch would rise, and members would be told to give up
partitions (librdkafka's revoke or lost callback).

1. Three librdkafka members (group.protocol=consumer) consume a 12-partition
   topic that a producer keeps writing to; the group's coordinator is killed.
   The new coordinator describes the same group epoch, members, member
   epochs and assignments, still after a whole session timeout (so the
   members' heartbeats there were accepted); no member is told to revoke or
   has lost anything; every partition is consumed past what was written
   before the kill, none skipped (and none twice where nothing moved). Then a
   fourth member joins at the new coordinator: the epoch rises by one and the
   members give up only the partitions the newcomer gets.
2. Two exactly-once copiers (tests/clients/eos_copier.py, their consumers in
   one consumer-protocol group through consumer_protocol_copier.py:
   TxnOffsetCommit carries the member id and epoch, which the coordinator
   checks) copy while the group's coordinator is killed twice and started
   again: each time the new coordinator goes on at the group's epoch, not
   from scratch; the read_committed output holds every input exactly once,
   in order per partition, and the group's committed offsets are the end of
   the input. A copier that stops on an error is started again, as a
   supervisor would. (That happens: when the killed broker comes back it
   takes its shard back, and a librdkafka member still backing off from
   reconnecting to that address can miss the 6 s session there; the
   coordinator fences it, as Kafka's would, its next TxnOffsetCommit is
   UNKNOWN_MEMBER_ID, and its transaction is aborted.)
"""

import collections
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer

import kwire
import txnlib
from harness import Cluster, wait_for
from test_cluster_eos_copier import PARTITIONS as COPY_PARTITIONS, Copier, Feeder

HERE = Path(__file__).resolve().parent

PARTITIONS = 12
HEARTBEAT_MS = 500
SESSION_MS = 6000
CONSUMER_GROUP_FLAGS = ("--group-consumer-heartbeat-interval-ms", str(HEARTBEAT_MS),
                        "--group-consumer-session-timeout-ms", str(SESSION_MS))


def coordinator(c: Cluster, group: str, not_on: int | None = None) -> int:
    """The live broker every live broker names as the group's coordinator
    (other than `not_on`), awaited."""
    last: dict = {}

    def agreed():
        answers = set()
        for n in sorted(c.live_ids()):
            try:
                err, node = kwire.find_coordinator(c.addr(n), group, 2.0)
            except kwire.WireError as e:
                last[n] = repr(e)
                return None
            last[n] = (err, node)
            if err != 0:
                return None
            answers.add(node)
        node = answers.pop() if len(answers) == 1 else None
        return node if node in c.live_ids() and node != not_on else None
    return wait_for(agreed, 30, lambda: f"the coordinator of {group!r} (not {not_on}; last "
                    f"answers, broker: (error, node): {last})")


def describe(c: Cluster, node: int, group: str) -> kwire.ConsumerGroup | None:
    """ConsumerGroupDescribe at `node`; None when it cannot answer yet."""
    try:
        d = kwire.consumer_group_describe(c.addr(node), group, 3.0)
    except kwire.WireError:
        return None
    return d if d.error == 0 else None


class Member(threading.Thread):
    """One librdkafka consumer-protocol member polling in its own thread:
    what it consumed, and its assignment as its own callbacks tell it."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str):
        super().__init__(daemon=True, name=name)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "client.id": name, "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        self.topic = topic
        self.lock = threading.Lock()
        self.owned: set[int] = set()
        # (monotonic time, "assign" | "revoke" | "lost", partitions)
        self.events: list[tuple[float, str, list[int]]] = []
        self.consumed: dict[int, list[int]] = collections.defaultdict(list)  # partition -> offsets
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.member_id = ""

    def _event(self, kind: str, parts) -> None:
        ps = sorted(p.partition for p in parts)
        with self.lock:
            self.events.append((time.monotonic(), kind, ps))
            if kind == "assign":
                self.owned |= set(ps)
            else:
                self.owned -= set(ps)

    def run(self) -> None:
        self.consumer.subscribe(
            [self.topic], on_assign=lambda _c, ps: self._event("assign", ps),
            on_revoke=lambda _c, ps: self._event("revoke", ps),
            on_lost=lambda _c, ps: self._event("lost", ps))
        while not self.stopping.is_set():
            m = self.consumer.poll(0.1)
            if m is None:
                continue
            if m.error() is not None:
                self.errors.append(str(m.error()))
                continue
            with self.lock:
                self.consumed[m.partition()].append(m.offset())
            self.member_id = self.member_id or self.consumer.memberid()
        self.member_id = self.member_id or self.consumer.memberid()
        self.consumer.close()

    def view(self) -> tuple[str, set[int]]:
        with self.lock:
            return self.consumer.memberid() if self.is_alive() else self.member_id, set(self.owned)

    def given_up_since(self, t: float) -> list[tuple[float, str, list[int]]]:
        with self.lock:
            return [e for e in self.events if e[0] > t and e[1] != "assign" and e[2]]

    def high(self, partition: int) -> int:
        with self.lock:
            return max(self.consumed.get(partition, [-1]))


class Writer(threading.Thread):
    """Writes records round-robin over the partitions until stopped
    (idempotent, acks=all); `acked[p]` is the highest acknowledged offset."""

    def __init__(self, bootstrap: str, topic: str, per_second: int = 200):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.per_second = bootstrap, topic, per_second
        self.acked = [-1] * PARTITIONS
        self.failed: list[str] = []
        self.stopping = threading.Event()
        self.undelivered = -1

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "linger.ms": 5, "delivery.timeout.ms": 60000})

        def report(err, msg):
            if err is not None:
                self.failed.append(str(err))
            else:
                self.acked[msg.partition()] = max(self.acked[msg.partition()], msg.offset())
        i, start = 0, time.monotonic()
        while not self.stopping.is_set():
            wait = start + i / self.per_second - time.monotonic()
            if wait > 0:
                time.sleep(min(wait, 0.05))
                p.poll(0)
                continue
            p.produce(self.topic, value=f"v{i}".encode(), partition=i % PARTITIONS,
                      on_delivery=report)
            p.poll(0)
            i += 1
        self.undelivered = p.flush(60)


def stable_view(c: Cluster, node: int, group: str, members: list[Member]):
    """The group as its coordinator describes it, once it is stable: every
    member at the group epoch, owning its target, the targets covering
    every partition exactly once, and each client's own view (its callbacks)
    the same as the coordinator's. None until then."""
    d = describe(c, node, group)
    if d is None or d.state != "Stable" or len(d.members) != len(members):
        return None
    if d.epoch != d.assignment_epoch:
        return None
    owned = []
    for m in d.members.values():
        if m.member_epoch != d.epoch or m.assignment != m.target:
            return None
        owned += [p for ps in m.assignment.values() for p in ps]
    if sorted(owned) != list(range(PARTITIONS)):
        return None
    for mem in members:
        member_id, own = mem.view()
        described = d.members.get(member_id)
        if described is None or partitions_of(described) != own:
            return None
    return d


def partitions_of(m: kwire.ConsumerMember) -> set[int]:
    return {p for ps in m.assignment.values() for p in ps}


def test_consumer_group_keeps_epochs_and_assignments_when_its_coordinator_is_killed(
        cluster_factory, topic_name):
    c = cluster_factory(extra_args=CONSUMER_GROUP_FLAGS)
    topic = topic_name()
    txnlib.spread_topic(c, topic, PARTITIONS)
    group = topic_name("g")
    feeder = Writer(c.bootstrap, topic)
    members = [Member(f"m{i}", c.bootstrap, topic, group) for i in range(3)]
    try:
        feeder.start()
        for m in members:
            m.start()
        # The coordinator is asked again on each try: shards may still move
        # while the brokers settle after start.
        at: dict = {}

        def settled():
            at["b"] = coordinator(c, group)
            return stable_view(c, at["b"], group, members)
        before = wait_for(settled, 60,
                          lambda: f"a stable group of 3 at broker {at.get('b')}: "
                          f"{describe(c, at.get('b'), group)}; clients: {[m.view() for m in members]}")
        old = at["b"]
        wait_for(lambda: all(m.consumed for m in members), 30, "every member to consume")

        # 1. The coordinator dies; another broker takes its shard over.
        killed_at = time.monotonic()
        written = list(feeder.acked)
        c.kill9(old)
        new = coordinator(c, group, not_on=old)
        after = wait_for(lambda: describe(c, new, group), 30,
                         lambda: f"broker {new} to describe {group}")
        took_over = time.monotonic()
        assert after.epoch == before.epoch and after.assignment_epoch == before.assignment_epoch, \
            (before, after)
        assert {i: (m.member_epoch, m.assignment) for i, m in after.members.items()} == \
               {i: (m.member_epoch, m.assignment) for i, m in before.members.items()}, \
            f"members before the kill: {before.members}\nafter: {after.members}"

        # 2. The members go on there: consumption continues on every
        # partition (also those whose leader died with the coordinator), and
        # a session timeout later nobody was fenced or rejoined.
        wait_for(lambda: all(max(m.high(p) for m in members) > written[p]
                             for p in range(PARTITIONS)), 60,
                 lambda: f"every partition consumed past {written} "
                 f"(now {[max(m.high(p) for m in members) for p in range(PARTITIONS)]})")
        wait_for(lambda: time.monotonic() > took_over + (SESSION_MS + 2 * HEARTBEAT_MS) / 1000,
                 30, "a session timeout to pass", 0.2)
        later = stable_view(c, new, group, members)
        assert later is not None and later.epoch == before.epoch and \
            {i: (m.member_epoch, m.assignment) for i, m in later.members.items()} == \
            {i: (m.member_epoch, m.assignment) for i, m in before.members.items()}, \
            f"a session after the takeover: {describe(c, new, group)} (before: {before})"
        given_up = {m.name: m.given_up_since(killed_at) for m in members}
        assert not any(given_up.values()), f"revoked or lost after the kill: {given_up}"

        # 3. The new coordinator runs the group on: a fourth member joins,
        # the epoch rises by one, and only the partitions it gets move.
        joined_at = time.monotonic()
        members.append(Member("m3", c.bootstrap, topic, group))
        members[-1].start()
        grown = wait_for(lambda: stable_view(c, new, group, members), 60,
                         lambda: f"a stable group of 4 at broker {new}: "
                         f"{describe(c, new, group)}; clients: {[m.view() for m in members]}")
        assert grown.epoch == before.epoch + 1, (before.epoch, grown.epoch)
        newcomer = partitions_of(grown.members[members[-1].view()[0]])
        assert newcomer, grown
        moved: set[int] = set()
        for m in members[:3]:
            member_id, _ = m.view()
            kept = partitions_of(grown.members[member_id])
            had = partitions_of(before.members[member_id])
            assert kept <= had, f"{m.name} had {had}, now {kept}"
            revoked = {p for _, _, ps in m.given_up_since(joined_at) for p in ps}
            assert revoked == had - kept, f"{m.name} had {had}, kept {kept}, revoked {revoked}"
            moved |= revoked
        assert moved == newcomer, (moved, newcomer)

        # 4. Nothing skipped, and nothing twice on the partitions that never moved.
        feeder.stopping.set()
        feeder.join(70)
        assert feeder.failed == [] and feeder.undelivered == 0, \
            (feeder.failed[:5], feeder.undelivered)
        final = list(feeder.acked)
        wait_for(lambda: all(max(m.high(p) for m in members) >= final[p]
                             for p in range(PARTITIONS)), 60, "everything consumed")
        for p in range(PARTITIONS):
            seen = collections.Counter(o for m in members for o in m.consumed.get(p, []))
            assert set(seen) == set(range(final[p] + 1)), f"partition {p}: gaps"
            if p not in moved:
                twice = {o: k for o, k in seen.items() if k > 1}
                assert not twice, f"partition {p} (never moved) delivered twice: {twice}"
        assert all(m.errors == [] for m in members), [m.errors[:3] for m in members]
    finally:
        feeder.stopping.set()
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)


class ConsumerProtocolCopier(Copier):
    """eos_copier.py's consumer in a consumer-protocol group."""

    def __init__(self, *args):
        super().__init__(*args)
        self.args[1] = str(HERE / "consumer_protocol_copier.py")


COPY_N = 1200
COPY_FEED_S = 40.0
COPY_KILLS = 2  # kills of the group's coordinator, evenly over 20 %..80 % of the feed


def test_consumer_protocol_copier_output_has_every_input_exactly_once_across_coordinator_kills(
        cluster_factory, topic_name, tmp_path, scale):
    c = cluster_factory(extra_args=CONSUMER_GROUP_FLAGS)
    n, feed_s = COPY_N * scale, COPY_FEED_S * scale
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("copiers")
    txnlib.spread_topic(c, src, COPY_PARTITIONS)
    txnlib.spread_topic(c, dst, COPY_PARTITIONS)
    log_dir = tmp_path / "copiers"
    log_dir.mkdir()
    copiers = [ConsumerProtocolCopier(s, c.bootstrap, src, dst, group, log_dir) for s in "AB"]
    k = COPY_KILLS * scale
    kills = [feed_s * (0.2 + 0.6 * i / (k - 1)) for i in range(k)]
    feeder = Feeder(c.bootstrap, src, n, feed_s)
    done: list[str] = []
    down: int | None = None
    try:
        for cp in copiers:
            cp.ensure_running()
        # Both copiers are members of one consumer-protocol group (a classic
        # group is GROUP_ID_NOT_FOUND to ConsumerGroupDescribe).
        first = coordinator(c, group)
        wait_for(lambda: (lambda d: d is not None and len(d.members) == 2)(
            describe(c, first, group)), 30, lambda: f"both copiers in the consumer group "
            f"{group} at broker {first}: {kwire.consumer_group_describe(c.addr(first), group)}")
        start = time.monotonic()
        feeder.start()
        deadline = start + feed_s + 150 * scale
        total = 0
        while True:
            now = time.monotonic()
            assert now < deadline, (
                f"copied {total}/{n}; done {done}, kills pending at {kills}, broker down {down}\n"
                + "\n".join(cp.logs() for cp in copiers))
            for cp in copiers:
                cp.ensure_running()
            total = committed_total(c.bootstrap, group, src)
            if total == n and not kills and down is None:
                break
            settled = c._agreed(src, COPY_PARTITIONS) and c._agreed(dst, COPY_PARTITIONS)
            if down is not None:
                if settled:
                    c.start_broker(down)
                    done.append(f"broker {down} started again at {total}")
                    down = None
            elif kills and now - start >= kills[0] and settled:
                kills.pop(0)
                down = coordinator(c, group)
                before = wait_for(lambda: describe(c, down, group), 10,
                                  lambda: f"broker {down} to describe {group}")
                c.kill9(down)
                new = coordinator(c, group, not_on=down)
                taken = wait_for(lambda: describe(c, new, group), 30,
                                 lambda: f"broker {new} to describe {group}")
                done.append(f"coordinator {down} killed at {now - start:.1f} s, copied {total}; "
                            f"epoch {before.epoch if before else None} there, {taken.epoch} at "
                            f"broker {new}")
                # The group goes on from its journal, not from scratch.
                assert taken.epoch >= before.epoch, done
            time.sleep(0.2)
        feeder.join(10)
        assert feeder.failed == [] and feeder.undelivered == 0, \
            (feeder.failed[:5], feeder.undelivered)
        for cp in copiers:
            cp.kill()

        txnlib.wait_stable(c, dst, COPY_PARTITIONS)
        out = txnlib.confluent_committed(c.bootstrap, dst, COPY_PARTITIONS, timeout=120)
        counts = collections.Counter(v.decode() for vs in out.values() for v in vs)
        expected = {f"copy:v{i}" for i in range(n)}
        missing = expected - counts.keys()
        duplicated = {v: k for v, k in counts.items() if k > 1}
        unexpected = counts.keys() - expected
        assert not missing and not duplicated and not unexpected, (
            f"{len(missing)} missing (e.g. {sorted(missing)[:5]}), {len(duplicated)} duplicated "
            f"(e.g. {list(duplicated.items())[:5]}), {len(unexpected)} unexpected; {done}; "
            f"copier runs {[cp.runs for cp in copiers]}")
        for p, vs in out.items():
            assert vs == [f"copy:v{i}".encode() for i in range(p, n, COPY_PARTITIONS)], p
        assert txnlib.committed_offsets(c.bootstrap, group, src, COPY_PARTITIONS) == \
            {p: len(range(p, n, COPY_PARTITIONS)) for p in range(COPY_PARTITIONS)}
        print(f"{done}; copier runs {[cp.runs for cp in copiers]}")
    finally:
        for cp in copiers:
            cp.kill()
        if down is not None and not c.brokers[down].running:
            c.start_broker(down)


def committed_total(bootstrap: str, group: str, topic: str) -> int:
    """The sum of the group's committed offsets on `topic` (-1 while they
    cannot be read: a coordinator moving, an offset unstable)."""
    try:
        return sum(max(o, 0) for o in txnlib.committed_offsets(
            bootstrap, group, topic, COPY_PARTITIONS).values())
    except Exception:
        return -1
