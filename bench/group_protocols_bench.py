#!/usr/bin/env python3
"""Group rebalances under three protocols, in one run:

    .venv/bin/python bench/group_protocols_bench.py [--members 50] [--leaves 10]
        [--partitions 200] [--protocols eager,cooperative,consumer] [--keep]
        [--brokers kaas,kafka,kaas=PATH,...]

One broker at a time and one topic of --partitions partitions (empty: what
is measured is who owns what, not how fast records flow). --brokers lists
them, run one after another, each on a fresh data dir (default: kaas):
  kaas        single-node kaas ($KAAS_BIN or target/release/kaas, --fsync always)
  kaas=PATH   the same with the binary at PATH (a before/after pair)
  kafka       Apache Kafka 4.4.0 (./scripts/kafka-ref, KRaft, one node), the
              reference: its group settings below set to kaas's
With more than one broker a last table gives each broker's total time to
stable per protocol and its ratio to the first Kafka (or the first broker).
For each protocol a new group
grows from 1 to --members members, one at a time, and then loses --leaves of
them, one at a time, each step waiting until the group is stable again:

  eager        classic protocol (JoinGroup/SyncGroup), partition.assignment.
               strategy=range: every rebalance revokes everything. The
               reference the others are compared with.
  cooperative  classic protocol, cooperative-sticky: only the partitions
               that move are revoked, in a first rebalance, and handed out
               in a second one.
  consumer     KIP-848 (group.protocol=consumer, ConsumerGroupHeartbeat): the
               broker computes the target assignment (its default assignor,
               uniform) and each member reconciles towards it on its own
               heartbeats.

Members are librdkafka consumers (confluent-kafka) in this process, each
polling in its own thread. A join starts when the new member calls
subscribe(); a leave when the member calls close() (its LeaveGroup, or its
leave heartbeat, then goes out at once). The group is stable when, from the
members' own rebalance callbacks (on_assign, on_revoke, on_lost), every
partition is owned by exactly one current member and every member owns
floor(P/n) or ceil(P/n) partitions (all three assignors balance a single
topic that way), and no callback then follows for --quiet-ms. Per step:

  time to stable  from the change to the callback that made the group stable
  paused          the partitions revoked from (or lost by) some member during
                  the step, each counted once, whether or not the same member
                  got it back; a leaver's own partitions count: their
                  consumption stops until another member takes them
  moved           the partitions whose owner differs before and after the step

Settings: classic session.timeout.ms=6000, heartbeat.interval.ms=500 and the
broker's --group-initial-rebalance-delay-ms 0; consumer protocol, the
broker's --group-consumer-session-timeout-ms 6000 and
--group-consumer-heartbeat-interval-ms 500 (the client may not set them).
Kafka gets the same through group.initial.rebalance.delay.ms,
group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms
(with their .min. bounds lowered to match: Kafka's defaults are 45 s and 5 s).

Target: with the consumer protocol a join pauses only the
partitions that move (paused == moved), and the group is stable within 2
heartbeat intervals (1 s) of the last change.
"""

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import harness  # noqa: E402
from harness import Cluster  # noqa: E402

SESSION_MS = 6000
HEARTBEAT_MS = 500
STEP_TIMEOUT_S = 120.0

PROTOCOLS = {
    "eager": {"partition.assignment.strategy": "range",
              "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS},
    "cooperative": {"partition.assignment.strategy": "cooperative-sticky",
                    "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS},
    "consumer": {"group.protocol": "consumer"},
}
LABELS = {"eager": "classic eager (range)", "cooperative": "classic cooperative-sticky",
          "consumer": "consumer (KIP-848, uniform)"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Group:
    """What every member owns, as its callbacks say, and when each callback ran."""

    def __init__(self):
        self.lock = threading.Lock()
        self.owned: dict[str, set[int]] = {}
        # (monotonic time, member, "assign" | "revoke" | "lost", partitions)
        self.events: list[tuple[float, str, str, frozenset[int]]] = []

    def event(self, member: str, kind: str, parts) -> None:
        ps = frozenset(p.partition for p in parts)
        with self.lock:
            self.events.append((time.monotonic(), member, kind, ps))
            own = self.owned.setdefault(member, set())
            if kind == "assign":
                own |= ps
            else:
                own -= ps

    def snapshot(self, members: list[str]) -> tuple[dict[str, set[int]], float, int]:
        """(member -> owned, time of the last event, number of events)."""
        with self.lock:
            return ({m: set(self.owned.get(m, ())) for m in members},
                    self.events[-1][0] if self.events else 0.0, len(self.events))

    def given_up(self, since: float) -> set[int]:
        with self.lock:
            return {p for t, _, kind, ps in self.events if t >= since and kind != "assign"
                    for p in ps}


def stable(owned: dict[str, set[int]], partitions: int) -> bool:
    n = len(owned)
    if n == 0:
        return False
    every = [p for ps in owned.values() for p in ps]
    if len(every) != partitions or set(every) != set(range(partitions)):
        return False
    low, high = partitions // n, -(-partitions // n)
    return all(low <= len(ps) <= high for ps in owned.values())


class Member(threading.Thread):
    def __init__(self, name: str, conf: dict, topic: str, group: Group):
        super().__init__(daemon=True, name=name)
        self.consumer = Consumer(dict(conf, **{"client.id": name}))
        self.topic, self.group = topic, group
        self.leave = threading.Event()
        self.subscribed_at = self.closing_at = 0.0
        self.failed: str | None = None

    def run(self) -> None:
        g, name = self.group, self.name
        try:
            self.subscribed_at = time.monotonic()
            self.consumer.subscribe(
                [self.topic], on_assign=lambda _c, ps: g.event(name, "assign", ps),
                on_revoke=lambda _c, ps: g.event(name, "revoke", ps),
                on_lost=lambda _c, ps: g.event(name, "lost", ps))
            while not self.leave.is_set():
                m = self.consumer.poll(0.05)
                if m is not None and m.error() is not None and m.error().fatal():
                    raise RuntimeError(str(m.error()))
            self.closing_at = time.monotonic()
            self.consumer.close()
        except Exception as e:  # noqa: BLE001 - reported by the step that waits
            self.failed = repr(e)


def await_stable(group: Group, members: list[Member], partitions: int, since: float,
                 quiet_s: float) -> float:
    """Until the members' views are stable and no callback followed for
    quiet_s: the time of the callback that made them stable."""
    names = [m.name for m in members]
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while True:
        for m in members:
            if m.failed:
                raise RuntimeError(f"member {m.name}: {m.failed}")
        owned, last, count = group.snapshot(names)
        if stable(owned, partitions):
            time.sleep(quiet_s)
            if group.snapshot(names)[2] == count:
                return max(last, since)
            continue
        if time.monotonic() > deadline:
            counts = {n: len(ps) for n, ps in owned.items()}
            raise RuntimeError(f"not stable {STEP_TIMEOUT_S} s after a change: {counts}")
        time.sleep(0.005)


def owners(owned: dict[str, set[int]]) -> dict[int, str]:
    return {p: m for m, ps in owned.items() for p in ps}


KAFKA_REF = REPO / "scripts" / "kafka-ref"


class KaasUnderBench:
    """Single-node kaas through the cluster tests' harness."""

    DEFAULT_BIN = harness.KAAS_BIN

    def __init__(self, root: Path, binary: str | None):
        self.binary = Path(binary) if binary else self.DEFAULT_BIN
        self.c = Cluster(root, n=1, etcd=False, extra_args=(
            "--group-initial-rebalance-delay-ms", "0",
            "--group-consumer-heartbeat-interval-ms", str(HEARTBEAT_MS),
            "--group-consumer-session-timeout-ms", str(SESSION_MS)))

    def start(self) -> None:
        harness.KAAS_BIN = self.binary  # the harness starts what this names
        self.c.start()

    @property
    def bootstrap(self) -> str:
        return self.c.bootstrap

    def create_topic(self, topic: str, partitions: int) -> None:
        self.c.create_topic(topic, partitions)

    def stop(self) -> None:
        self.c.stop()


class KafkaUnderBench:
    """Apache Kafka 4.4.0, one KRaft node, started by scripts/kafka-ref."""

    CONFIGS = (
        "group.initial.rebalance.delay.ms=0",
        f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
        f"group.consumer.min.heartbeat.interval.ms={HEARTBEAT_MS}",
        f"group.consumer.session.timeout.ms={SESSION_MS}",
        f"group.consumer.min.session.timeout.ms={SESSION_MS}",
    )

    def __init__(self, root: Path):
        self.dir = root / "kafka"
        self.bootstrap = ""

    def start(self) -> None:
        cmd = [sys.executable, str(KAFKA_REF), "start", "--dir", str(self.dir), "--version", "4"]
        for c in self.CONFIGS:
            cmd += ["--config", c]
        out = subprocess.run(cmd, capture_output=True, text=True)
        m = re.search(r"bootstrap=(\S+)", out.stdout)
        if out.returncode != 0 or not m:
            raise RuntimeError(f"kafka-ref start failed ({out.returncode}): {out.stderr[-2000:]}")
        self.bootstrap = m.group(1)

    def create_topic(self, topic: str, partitions: int) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fut = admin.create_topics([NewTopic(topic, partitions, 1)])[topic]
        fut.result(60)
        # Metadata shows every partition with a leader before the groups start.
        deadline = time.monotonic() + 60
        while True:
            md = admin.list_topics(topic, timeout=10).topics[topic]
            if len(md.partitions) == partitions and all(
                    p.leader >= 0 for p in md.partitions.values()):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: partitions without a leader after 60 s")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.dir.is_dir():
            subprocess.run([sys.executable, str(KAFKA_REF), "stop", "--dir", str(self.dir)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def broker_under_bench(spec: str, root: Path):
    if spec == "kafka":
        return KafkaUnderBench(root)
    if spec == "kaas":
        return KaasUnderBench(root, None)
    if spec.startswith("kaas="):
        return KaasUnderBench(root, spec.split("=", 1)[1])
    raise SystemExit(f"--brokers: {spec!r} is not kaas, kaas=PATH or kafka")


def run_protocol(c, protocol: str, topic: str, n_members: int, n_leaves: int,
                 partitions: int, quiet_s: float) -> dict:
    conf = {"bootstrap.servers": c.bootstrap, "group.id": f"bench-{protocol}-{time.time_ns()}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            **PROTOCOLS[protocol]}
    group = Group()
    members: list[Member] = []
    steps = []  # (kind, size after, seconds, paused, moved)
    try:
        for i in range(n_members + n_leaves):
            joining = i < n_members
            before, _, _ = group.snapshot([m.name for m in members])
            if joining:
                m = Member(f"{protocol}-{i:02d}", conf, topic, group)
                members.append(m)
                m.start()
                while not m.subscribed_at:
                    time.sleep(0.001)
                since = m.subscribed_at
            else:
                m = members.pop(0)  # the oldest member leaves
                m.leave.set()
                m.join(60)
                if m.is_alive() or m.failed:
                    raise RuntimeError(f"{m.name} did not close: {m.failed}")
                since = m.closing_at
            at = await_stable(group, members, partitions, since, quiet_s)
            after, _, _ = group.snapshot([x.name for x in members])
            was, now = owners(before), owners(after)
            moved = {p for p in range(partitions) if was.get(p) != now.get(p)} if before else set()
            paused = group.given_up(since)
            steps.append(("join" if joining else "leave", len(members), at - since,
                          len(paused), len(moved), paused <= moved))
            log(f"  {protocol:11s} {'join ' if joining else 'leave'} -> {len(members):2d} members: "
                f"stable after {at - since:6.3f} s, paused {len(paused):3d}, moved {len(moved):3d}")
    finally:
        for m in members:
            m.leave.set()
        for m in members:
            m.join(30)
    return {"steps": steps}


def summary(steps: list, kind: str) -> dict:
    xs = [s for s in steps if s[0] == kind]
    # The first join (an empty group) is no rebalance: left out of the joins.
    if kind == "join":
        xs = xs[1:]
    t = [s[2] for s in xs]
    return {"n": len(xs), "total": sum(t), "p50": statistics.median(t), "max": max(t),
            "paused": sum(s[3] for s in xs), "moved": sum(s[4] for s in xs),
            "only_moved": sum(1 for s in xs if s[5]), "times": t}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=50)
    ap.add_argument("--leaves", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--protocols", default="eager,cooperative,consumer")
    ap.add_argument("--quiet-ms", type=int, default=1000,
                    help="no callback for this long after the group looks stable")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--brokers", default="kaas",
                    help="comma-separated: kaas, kaas=PATH, kafka (default %(default)s)")
    args = ap.parse_args()
    protocols = args.protocols.split(",")
    assert args.leaves < args.members and set(protocols) <= set(PROTOCOLS), args
    root = REPO / "target" / "bench-group-protocols" / time.strftime("%Y%m%d-%H%M%S")
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"group_protocols_bench {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}: "
          f"1 -> {args.members} members joining one at a time, then {args.leaves} leaving, "
          f"{args.partitions} partitions; heartbeat {HEARTBEAT_MS} ms, session {SESSION_MS} ms, "
          f"quiet {args.quiet_ms} ms; data in {root}", flush=True)
    specs = args.brokers.split(",")
    by_broker = {}
    for i, spec in enumerate(specs):
        name = f"{i + 1}:{spec.rsplit('/', 1)[-1]}"
        broker_root = root / f"broker-{i + 1}"
        broker_root.mkdir()
        b = broker_under_bench(spec, broker_root)
        results = {}
        log(f"== broker {name}")
        try:
            b.start()
            topic = "group-protocols-bench"
            b.create_topic(topic, args.partitions)
            for p in protocols:
                log(f"{LABELS[p]}")
                results[p] = run_protocol(b, p, topic, args.members, args.leaves,
                                          args.partitions, args.quiet_ms / 1000)
        finally:
            b.stop()
        by_broker[name] = results
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)

    ok = True
    for name, results in by_broker.items():
        print(f"\n==== broker {name}")
        ok = report(results, protocols, args) and ok
    if len(by_broker) > 1:
        names = list(by_broker)
        ref = next((n for n in names if n.endswith(":kafka")), names[0])
        print(f"\nbrokers side by side: total seconds to stable (joins + leaves); ratio vs {ref}")
        print(f"{'broker':40s} " + " ".join(f"{p:>22s}" for p in protocols))
        totals = {n: {p: sum(summary(r[p]["steps"], k)["total"] for k in ("join", "leave"))
                      for p in protocols} for n, r in by_broker.items()}
        for n in names:
            cells = [f"{totals[n][p]:8.2f} s ({totals[n][p] / totals[ref][p]:5.2f})"
                     for p in protocols]
            print(f"{n:40s} " + " ".join(f"{c:>22s}" for c in cells))
    print(f"run took {time.monotonic() - started:.0f} s; " +
          ("target met" if ok else "target NOT met"))
    return 0 if ok else 1


def report(results: dict, protocols: list, args) -> bool:
    """One broker's tables; whether it meets the consumer protocol's target."""
    ref = "eager" if "eager" in results else protocols[0]
    sums = {p: {k: summary(r["steps"], k) for k in ("join", "leave")} for p, r in results.items()}
    for kind, what in (("join", f"{sums[ref]['join']['n']} joins, 2 -> {args.members} members "
                        "(the first member's join is no rebalance and is left out)"),
                       ("leave", f"{args.leaves} leaves, {args.members} -> "
                        f"{args.members - args.leaves} members")):
        r0 = sums[ref][kind]
        print(f"\n{what}; seconds to stable; ratios vs {LABELS[ref]}")
        print(f"{'protocol':30s} {'total s':>8s} {'p50 s':>7s} {'max s':>7s} {'paused':>7s} "
              f"{'moved':>6s} {'time ratio':>10s} {'paused ratio':>12s}")
        for p, s in sums.items():
            x = s[kind]
            print(f"{LABELS[p]:30s} {x['total']:8.2f} {x['p50']:7.3f} {x['max']:7.3f} "
                  f"{x['paused']:7d} {x['moved']:6d} {x['total'] / r0['total']:10.2f} "
                  f"{x['paused'] / max(1, r0['paused']):12.3f}")
    ok = True
    if "consumer" in sums:
        s, hb = sums["consumer"], HEARTBEAT_MS / 1000
        j, lv = s["join"], s["leave"]
        within_j = sum(1 for t in j["times"] if t <= 2 * hb)
        within_l = sum(1 for t in lv["times"] if t <= 2 * hb)
        print(f"\nconsumer protocol in heartbeat intervals ({HEARTBEAT_MS} ms): joins p50 "
              f"{j['p50'] / hb:.2f}, max {j['max'] / hb:.2f}; leaves p50 {lv['p50'] / hb:.2f}, "
              f"max {lv['max'] / hb:.2f}")
        print(f"target: a join pauses only the partitions that move: {j['only_moved']} of "
              f"{j['n']} joins (paused {j['paused']}, moved {j['moved']}); stable within 2 "
              f"heartbeat intervals: {within_j} of {j['n']} joins, {within_l} of {lv['n']} leaves")
        ok = j["only_moved"] == j["n"] and within_j == j["n"] and within_l == lv["n"]
    return ok


if __name__ == "__main__":
    sys.exit(main())
