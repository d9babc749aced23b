#!/usr/bin/env python3
"""Soak: one broker under an hour of mixed load, sampled every minute.

    .venv/bin/python bench/soak_bench.py [--minutes 60] [--kaas target/release/kaas]

Not part of CI (it runs for an hour). The load, all real
clients (confluent-kafka / librdkafka):

- idempotent producers that restart every --restart-s seconds (each restart
  is a new producer id, as a redeployed service's producers are);
- transactional producers with a fresh random transactional.id per instance
  (as libraries that name an instance by a uuid do), aborting one
  transaction in ten;
- a stream-processing app: a read_committed, transactional copier (KIP-447:
  offsets sent to the transaction) that restarts with the same
  transactional.id;
- consumer groups that rebalance: a classic group and a KIP-848 group whose
  members leave and rejoin in turn;
- topics created, written and deleted every minute;
- a quota-limited tenant (client.id soak-tenant) producing as fast as it
  may, when the broker has client quotas (AlterClientQuotas, API 49): its
  producer_byte_rate is set to --tenant-rate bytes/s;
- a probe: one acks=all message every 100 ms, timed to its delivery
  (produce latency) and to its arrival at a consumer (fetch latency, end
  to end).

Every minute it prints the broker's RSS (at the minute, and the lowest of
the minute's samples taken every 5 s: the floor under the allocator's
sawtooth, which a large request's buffers raise and free), open descriptors, producer-state
entries (kaas_producer_state_entries: (partition, producer id) pairs),
producer ids bound to principals (kaas_producer_id_owners, with an
authorizer), transactional ids (kaas_txn_entry_epoch lines), and the probe's
p99 produce and fetch latency over that minute; at the end, for the last 30
minutes, each series' least-squares slope as a percentage of its mean per
10 minutes (the target for RSS, descriptors and producer state: under 1%).

The broker runs with producer.id.expiration.ms and
transactional.id.expiration.ms of --expiration-ms (5 minutes, so that state
reaches its steady size within the hour; Kafka's defaults are a day and a
week), and the data topics with retention.ms 10 minutes and segment.ms 1
minute (so the number of segments is steady too).
"""

import argparse
import os
import random
import statistics
import struct
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import kaasbench as kb  # noqa: E402

sys.path.insert(0, os.path.join(kb.REPO, "tests", "clients"))
import quota_setup  # noqa: E402

DATA = "soak-data"
COPY = "soak-copy"
PROBE = "soak-probe"
TENANT_TOPIC = "soak-tenant"


class Stop:
    def __init__(self):
        self.ev = threading.Event()

    def wait(self, s):
        return self.ev.wait(s)

    @property
    def set(self):
        return self.ev.is_set()


def guarded(name, stop, errors):
    """Runs a load loop forever; an exception is counted and the loop
    restarted after a second (the soak reports errors; it does not end)."""

    def wrap(fn):
        def run():
            while not stop.set:
                try:
                    fn()
                except Exception as e:  # noqa: BLE001 - counted and reported
                    errors[name] = errors.get(name, 0) + 1
                    kb.log(f"[{name}] {type(e).__name__}: {e}")
                    stop.wait(1)

        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        return t

    return wrap


def idempotent_producer(bs, stop, restart_s, rate, n):
    """One idempotent producer instance at a time, replaced every restart_s."""
    value = os.urandom(200)
    while not stop.set:
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True,
                      "client.id": f"soak-idem-{n}", "linger.ms": 5})
        end = time.monotonic() + restart_s
        i = 0
        while time.monotonic() < end and not stop.set:
            p.produce(DATA, value, key=str(i).encode())
            i += 1
            p.poll(0)
            stop.wait(1.0 / rate)
        p.flush(30)


def transactional_producer(bs, stop, restart_s, n):
    """Fresh transactional.id per instance; one transaction in ten aborted."""
    value = os.urandom(100)
    while not stop.set:
        p = Producer({"bootstrap.servers": bs, "transactional.id": f"soak-txn-{uuid.uuid4()}",
                      "client.id": f"soak-txn-{n}"})
        p.init_transactions(30)
        end = time.monotonic() + restart_s
        k = 0
        while time.monotonic() < end and not stop.set:
            p.begin_transaction()
            for i in range(20):
                p.produce(DATA, value, key=f"{n}-{k}-{i}".encode())
            if k % 10 == 9:
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
            k += 1
            stop.wait(0.5)
        p.flush(10)


def copier(bs, stop, restart_s):
    """A stream-processing app: read_committed in, transactional out,
    offsets in the transaction, restarted with the same transactional.id."""
    while not stop.set:
        c = Consumer({"bootstrap.servers": bs, "group.id": "soak-copier",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "client.id": "soak-copier"})
        p = Producer({"bootstrap.servers": bs, "transactional.id": "soak-copier",
                      "client.id": "soak-copier"})
        p.init_transactions(60)
        c.subscribe([DATA])
        end = time.monotonic() + restart_s
        try:
            while time.monotonic() < end and not stop.set:
                msgs = c.consume(500, 1.0)
                msgs = [m for m in msgs if not m.error()]
                if not msgs:
                    continue
                p.begin_transaction()
                for m in msgs:
                    p.produce(COPY, m.value(), key=m.key())
                p.send_offsets_to_transaction(c.position(c.assignment()),
                                              c.consumer_group_metadata(), 30)
                p.commit_transaction(30)
        finally:
            c.close()
            p.flush(10)


def group_member(bs, stop, group, protocol, stay_s, offset_s, n):
    """A member that stays stay_s, leaves, and joins again (a rebalance
    each way), staggered by offset_s."""
    stop.wait(offset_s)
    while not stop.set:
        conf = {"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "latest",
                "client.id": f"{group}-{n}"}
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        c = Consumer(conf)
        c.subscribe([DATA])
        end = time.monotonic() + stay_s
        try:
            while time.monotonic() < end and not stop.set:
                c.consume(500, 1.0)
        finally:
            c.close()
        stop.wait(5)


def topic_churn(bs, stop, period_s):
    """A topic created, written and deleted every period (two kept)."""
    admin = AdminClient({"bootstrap.servers": bs})
    live = []
    n = 0
    while not stop.set:
        name = f"soak-churn-{os.getpid()}-{n}"
        n += 1
        for f in admin.create_topics([NewTopic(name, 4, 1)]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": bs, "client.id": "soak-churn"})
        for i in range(100):
            p.produce(name, b"churn", partition=i % 4)
        p.flush(30)
        live.append(name)
        while len(live) > 2:
            old = live.pop(0)
            for f in admin.delete_topics([old]).values():
                f.result(30)
        stop.wait(period_s)


def tenant(bs, stop, throttled):
    """Produces as fast as the broker lets it (client.id soak-tenant)."""
    value = os.urandom(1000)

    def on_throttle(ev):
        throttled[0] += 1

    p = Producer({"bootstrap.servers": bs, "client.id": "soak-tenant", "linger.ms": 20,
                  "throttle_cb": on_throttle, "queue.buffering.max.kbytes": 4096})
    while not stop.set:
        try:
            p.produce(TENANT_TOPIC, value)
        except BufferError:
            p.poll(0.1)
            continue
        p.poll(0)
    p.flush(30)


class Probe:
    """One acks=all message every 100 ms: delivery and arrival latency."""

    def __init__(self, bs, stop):
        self.bs = bs
        self.stop = stop
        self.lock = threading.Lock()
        self.produce_ms = []
        self.fetch_ms = []

    def take(self):
        with self.lock:
            p, f = self.produce_ms, self.fetch_ms
            self.produce_ms, self.fetch_ms = [], []
        return p, f

    def producer(self):
        p = Producer({"bootstrap.servers": self.bs, "acks": "all", "linger.ms": 0,
                      "client.id": "soak-probe"})

        def done(err, msg, t0):
            if err is None:
                with self.lock:
                    self.produce_ms.append((time.monotonic() - t0) * 1000)

        while not self.stop.set:
            t0 = time.monotonic()
            p.produce(PROBE, struct.pack(">d", time.time()),
                      on_delivery=lambda e, m, t0=t0: done(e, m, t0))
            # Serve the delivery callback as soon as it is due (its timing
            # is the measurement), then wait out the 100 ms.
            deadline = t0 + 0.1
            while not self.stop.set and (left := deadline - time.monotonic()) > 0:
                p.poll(left)
        p.flush(10)

    def consumer(self):
        c = Consumer({"bootstrap.servers": self.bs, "group.id": f"soak-probe-{uuid.uuid4()}",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                      "client.id": "soak-probe"})
        c.assign([TopicPartition(PROBE, 0, -1)])  # from the end
        while not self.stop.set:
            m = c.poll(0.5)
            if m is not None and not m.error() and len(m.value()) == 8:
                (sent,) = struct.unpack(">d", m.value())
                with self.lock:
                    self.fetch_ms.append((time.time() - sent) * 1000)
        c.close()


def p99(xs):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def slope_pct_per_10min(ys):
    """Least-squares slope of one-minute samples, as % of their mean per 10 min."""
    n = len(ys)
    if n < 2:
        return float("nan")
    xs = range(n)
    mx, my = (n - 1) / 2, statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    if my == 0:
        return 0.0 if sxy == 0 else float("inf")
    return (sxy / sxx) * 10 / my * 100


def tenant_quota(bs, rate):
    """Sets the tenant's producer_byte_rate (tests/clients/quota_setup.py
    sends AlterClientQuotas itself); None when the broker has no API 49
    (it closes the connection on an API it does not know)."""
    try:
        [(code, _)] = quota_setup.alter_client_quotas(
            bs, [([("client-id", "soak-tenant")], {"producer_byte_rate": float(rate)})])
    except (ConnectionError, OSError, struct.error):
        return None
    return code


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--kaas", default=kb.DEFAULT_KAAS)
    ap.add_argument("--data-root", default=kb.DEFAULT_DATA_ROOT)
    ap.add_argument("--restart-s", type=float, default=120,
                    help="how long an idempotent producer instance lives")
    ap.add_argument("--expiration-ms", type=int, default=300_000)
    ap.add_argument("--tenant-rate", type=int, default=262_144)
    args = ap.parse_args()

    data = kb.fresh_dir(args.data_root, "soak")
    extra = ["--producer-id-expiration-ms", str(args.expiration_ms),
             "--producer-id-expiration-check-interval-ms", "30000",
             "--transactional-id-expiration-ms", str(args.expiration_ms),
             "--retention-check-ms", "30000"]
    broker = kb.Kaas(args.kaas, data, extra=extra).start()
    bs = broker.addr
    kb.log(f"soak: broker {bs} pid {broker.pid}, data {data}, {args.minutes} min")
    admin = AdminClient({"bootstrap.servers": bs})
    conf = {"retention.ms": "600000", "segment.ms": "60000"}
    for f in admin.create_topics([NewTopic(DATA, 12, 1, config=conf),
                                  NewTopic(COPY, 12, 1, config=conf),
                                  NewTopic(PROBE, 1, 1, config=conf),
                                  NewTopic(TENANT_TOPIC, 4, 1, config=conf)]).values():
        f.result(30)
    quota = tenant_quota(bs, args.tenant_rate)
    if quota is None:
        kb.log("soak: the broker has no AlterClientQuotas; the tenant runs unthrottled")
    elif quota != 0:
        raise SystemExit(f"AlterClientQuotas answered error {quota}")

    stop = Stop()
    errors = {}
    throttled = [0]
    probe = Probe(bs, stop)
    run = lambda name: guarded(name, stop, errors)  # noqa: E731
    run("probe-producer")(probe.producer)
    run("probe-consumer")(probe.consumer)
    for n in range(3):
        run(f"idem-{n}")(lambda n=n: idempotent_producer(bs, stop, args.restart_s, 100, n))
    for n in range(2):
        run(f"txn-{n}")(lambda n=n: transactional_producer(bs, stop, args.restart_s * 1.5, n))
    run("copier")(lambda: copier(bs, stop, 300))
    for n in range(3):
        run(f"classic-{n}")(lambda n=n: group_member(bs, stop, "soak-classic", "classic",
                                                     90, 30 * n, n))
    for n in range(2):
        run(f"kip848-{n}")(lambda n=n: group_member(bs, stop, "soak-848", "consumer",
                                                    120, 60 * n, n))
    run("churn")(lambda: topic_churn(bs, stop, 60))
    if quota == 0:
        run("tenant")(lambda: tenant(bs, stop, throttled))

    cols = ["min", "rss_mib", "rss_floor_mib", "fds", "producer_entries", "pid_owners", "txn_ids",
            "produce_p99_ms", "fetch_p99_ms", "tenant_throttled", "errors"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    rows = []
    t0 = time.monotonic()
    try:
        minute = 0
        while minute < args.minutes:
            minute += 1
            floor = float("inf")
            while True:
                left = t0 + 60 * minute - time.monotonic()
                if left <= 0 or stop.set:
                    break
                stop.wait(min(5.0, left))
                floor = min(floor, rss_mib(broker.pid))
            m = broker.scrape()
            pe, pf = probe.take()
            row = {
                "min": minute,
                "rss_mib": (rss := rss_mib(broker.pid)),
                "rss_floor_mib": min(floor, rss),
                "fds": fds(broker.pid),
                "producer_entries": m.get("kaas_producer_state_entries", float("nan")),
                "pid_owners": m.get("kaas_producer_id_owners", float("nan")),
                "txn_ids": sum(1 for k in m if k.startswith("kaas_txn_entry_epoch{")),
                "produce_p99_ms": p99(pe),
                "fetch_p99_ms": p99(pf),
                "tenant_throttled": throttled[0],
                "errors": sum(errors.values()),
            }
            rows.append(row)
            print("| " + " | ".join(f"{row[c]:.1f}" if isinstance(row[c], float) else str(row[c])
                                    for c in cols) + " |", flush=True)
    finally:
        stop.ev.set()
        time.sleep(3)
        took = broker.stop()
        kb.log(f"soak: broker stopped in {took:.1f} s")

    last = rows[-30:]
    print(f"\nslope over the last {len(last)} minutes, % of the mean per 10 minutes:")
    for c in ["rss_mib", "rss_floor_mib", "fds", "producer_entries", "txn_ids", "produce_p99_ms", "fetch_p99_ms"]:
        ys = [r[c] for r in last if r[c] == r[c]]
        if len(ys) >= 2:
            print(f"  {c:18} mean {statistics.fmean(ys):10.1f}   slope "
                  f"{slope_pct_per_10min(ys):+6.2f}%/10min")
    print(f"errors by load: {errors or 'none'}")
    kb.remove(data)


if __name__ == "__main__":
    main()
