#!/usr/bin/env python3
"""Cluster-mode figures in one run:

    .venv/bin/python bench/cluster_bench.py [--kills 5] [--lease-ttl-ms 2000] [--mb 64]

1. Failover time. etcd + 3 brokers (tests/cluster/harness.py), a topic of 3
   partitions. Each round SIGKILLs the leader of partition 0 at t0, then from
   t0 on polls Metadata on the survivors every 20 ms and, as soon as one names
   a live leader other than the dead broker, sends that leader a raw
   acks=-1 Produce of one record (kwire, 2 s deadline); the failover time is
   t1 - t0, t1 = the first such Produce answered with no error. The killed
   broker is restarted and the cluster awaited before the next round.
   Reported: median and max over --kills rounds (target: median <= lease TTL
   + 1 s).
2. Throughput, 1 broker (single-node mode, no etcd) vs 3 brokers: librdkafka
   (confluent-kafka) produces --mb MB of 1 KiB records (acks=all,
   idempotent, linger.ms=5, batch.size=1 MiB) round-robin over 6 partitions
   from one producer, then one consumer reads them all back (assign from
   offset 0, no group). MB = 10^6 bytes of record values. Produce time runs
   from the first produce() to flush() returning; fetch time from assign()
   to the last record. --rounds alternating 1-broker / 3-broker rounds;
   the best round of each is compared (this shared VM's noise only ever
   slows a round down). Target: 3-broker >= 0.8 x 1 broker.

Brokers run $KAAS_BIN or target/release/kaas with --fsync always (the
default); data under target/bench-cluster/ (deleted at the end unless
--keep).
"""

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cluster"))

import kwire  # noqa: E402
from harness import Cluster, wait_for  # noqa: E402

RECORD = 1024
PARTITIONS = 6


def failover_round(c: Cluster, topic: str, n: int) -> float:
    victim = c.leader_of(topic, 0)
    t0 = time.monotonic()
    c.kill9(victim)
    batch = kwire.record_batch([f"failover-{n}".encode()])
    while True:
        if time.monotonic() - t0 > 120:
            raise RuntimeError(f"no acknowledged produce 120 s after killing broker {victim}")
        for via in sorted(c.live_ids()):
            try:
                leader = c.leader_of(topic, 0, via=via)
            except Exception:
                continue
            if leader in c.live_ids():
                try:
                    err, _ = kwire.produce(c.addr(leader), topic, 0, batch, timeout=2.0,
                                           timeout_ms=2000)
                except kwire.WireError:
                    break
                if err == 0:
                    took = time.monotonic() - t0
                    c.start_broker(victim)
                    c.wait_ready(topic, 3, timeout=60)
                    return took
            break
        time.sleep(0.02)


def failover(root: Path, kills: int, ttl_ms: int) -> list[float]:
    with Cluster(root / "failover", n=3, lease_ttl_ms=ttl_ms) as c:
        c.create_topic("failover", 3)
        times = []
        for n in range(kills):
            t = failover_round(c, "failover", n)
            print(f"  kill {n + 1}: {t * 1000:.0f} ms", flush=True)
            times.append(t)
        return times


def throughput(c: Cluster, topic: str, mb: int) -> tuple[float, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    c.create_topic(topic, PARTITIONS)
    count = mb * 1_000_000 // RECORD
    value = b"x" * RECORD
    p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20})
    failed = []
    t0 = time.monotonic()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS,
                          on_delivery=lambda err, _m: failed.append(err) if err else None)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(120) == 0 and not failed, f"produce failed: {failed[:3]}"
    produce_s = time.monotonic() - t0

    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "bench",
                     "enable.auto.commit": False, "fetch.max.bytes": 50 << 20})
    t0 = time.monotonic()
    cons.assign([TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
    got = 0
    while got < count:
        assert time.monotonic() - t0 < 300, f"fetch stalled at {got}/{count}"
        got += sum(1 for m in cons.consume(num_messages=10000, timeout=1) if m.error() is None)
    fetch_s = time.monotonic() - t0
    cons.close()
    total = count * RECORD / 1e6
    return total / produce_s, total / fetch_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--lease-ttl-ms", type=int, default=2000)
    ap.add_argument("--mb", type=int, default=64, help="MB produced per throughput round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep target/bench-cluster")
    args = ap.parse_args()
    root = REPO / "target" / "bench-cluster"
    shutil.rmtree(root, ignore_errors=True)
    try:
        print(f"== failover: {args.kills} x kill -9 of partition 0's leader, "
              f"lease TTL {args.lease_ttl_ms} ms", flush=True)
        times = failover(root, args.kills, args.lease_ttl_ms)
        med, worst = statistics.median(times), max(times)
        target = args.lease_ttl_ms / 1000 + 1
        print(f"failover median {med * 1000:.0f} ms, max {worst * 1000:.0f} ms "
              f"(target median <= {target * 1000:.0f} ms: {'met' if med <= target else 'MISSED'})")

        print(f"== throughput: {args.mb} MB of {RECORD}-byte records, {args.rounds} rounds",
              flush=True)
        best = {"1 broker": (0.0, 0.0), "3 brokers": (0.0, 0.0)}
        for r in range(args.rounds):
            for name, make in (("1 broker", lambda d: Cluster(d, n=1, etcd=False)),
                               ("3 brokers", lambda d: Cluster(d, n=3,
                                                               lease_ttl_ms=args.lease_ttl_ms))):
                d = root / f"tp-{r}-{name.replace(' ', '')}"
                with make(d) as c:
                    prod, fetch = throughput(c, f"bench-{r}", args.mb)
                shutil.rmtree(d, ignore_errors=True)
                print(f"  round {r + 1} {name}: produce {prod:.1f} MB/s, fetch {fetch:.1f} MB/s",
                      flush=True)
                b = best[name]
                best[name] = (max(b[0], prod), max(b[1], fetch))
        (p1, f1), (p3, f3) = best["1 broker"], best["3 brokers"]
        print("| setup | produce MB/s | fetch MB/s |\n| --- | ---: | ---: |")
        print(f"| 1 broker (single-node) | {p1:.1f} | {f1:.1f} |")
        print(f"| 3 brokers + etcd | {p3:.1f} | {f3:.1f} |")
        ok = p3 >= 0.8 * p1 and f3 >= 0.8 * f1
        print(f"ratio 3/1: produce {p3 / p1:.2f}x, fetch {f3 / f1:.2f}x "
              f"(target >= 0.80x: {'met' if ok else 'MISSED'})")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
