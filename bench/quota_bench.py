#!/usr/bin/env python3
"""Client quotas on one kaas: a user over producer_byte_rate, and an
unthrottled user beside it.

    .venv/bin/python bench/quota_bench.py [--quota 1000000] [--warmup 11] [--measure 33]

Starts `target/release/kaas broker` with a PLAINTEXT listener (where the
quota is set with AlterClientQuotas, tests/clients/quota_setup.py) and a
SASL_PLAINTEXT one with two SCRAM-SHA-512 users, `heavy` and `light`, and
sets producer_byte_rate=--quota for user `heavy` only. Then:

  alone     `light` sends --rate records/s of 1 KiB (acks=1) for
            --latency-seconds: ack latency p50 / p99 (the reference).
  throttled `heavy` produces 1 KiB records as fast as it can (acks=1,
            linger.ms=5) for --warmup + --measure seconds. Its rate is the
            bytes acknowledged during the last --measure seconds over that
            time (the first --warmup seconds hold Kafka's initial allowance
            of ten windows; --measure should span whole 11 s periods, since
            each expiring sample lets a burst through) and the broker's own
            windowed rate (kaas_quota_rate) read every second, median.
  beside    while `heavy` is throttled, `light` repeats the latency run.
  again     once `heavy` has stopped, `light` runs alone again.

Prints the measured rates against the quota (target within 10%) and
light's p99 beside the throttled user over the lower of its two p99s alone
(target <= 1.5).
Same broker, data dir and fsync mode (--fsync, default always); the clients
run on the same machine.
"""

import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "clients"))

import kaasbench as kb  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from quota_setup import alter_client_quotas, quota_metric  # noqa: E402
from security_setup import set_user  # noqa: E402

VALUE = b"q" * 1024
USERS = {"heavy": "heavy-secret", "light": "light-secret"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kaas", default=kb.DEFAULT_KAAS)
    p.add_argument("--data-root", default=kb.DEFAULT_DATA_ROOT)
    p.add_argument("--fsync", default="always", choices=["always", "interval", "never"])
    p.add_argument("--quota", type=float, default=1_000_000.0, help="bytes per second")
    p.add_argument("--warmup", type=float, default=11.0)
    p.add_argument("--measure", type=float, default=33.0)
    p.add_argument("--rate", type=float, default=200.0, help="light's records per second")
    p.add_argument("--latency-seconds", type=float, default=15.0)
    return p.parse_args()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def login(bootstrap, user, **over):
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": USERS[user]}
    conf.update(over)
    return conf


def latency(bootstrap, topic, rate, seconds):
    """light's ack latency at a fixed rate: p50, p99 in ms."""
    lat = []
    errors = []

    def delivered(err, msg, t0):
        if err is not None:
            errors.append(err)
        else:
            lat.append(time.perf_counter() - t0)

    p = Producer(login(bootstrap, "light", acks=1, **{"linger.ms": 0}))
    p.produce(topic, VALUE)
    if p.flush(30):
        raise RuntimeError("warm-up record not delivered")
    n = int(rate * seconds)
    start = time.perf_counter()
    for i in range(n):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            p.poll(min(due - now, 0.005))
        t0 = time.perf_counter()
        p.produce(topic, VALUE, on_delivery=lambda e, m, t0=t0: delivered(e, m, t0))
        p.poll(0)
    if p.flush(60):
        raise RuntimeError("records not delivered in 60 s")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first {errors[0]}")
    lat.sort()
    return 1000 * lat[len(lat) // 2], 1000 * lat[int(len(lat) * 0.99)]


class Heavy(threading.Thread):
    """heavy produces as fast as it can for warmup + measure seconds."""

    def __init__(self, bootstrap, topic, warmup, measure, broker):
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.warmup, self.measure, self.broker = warmup, measure, broker
        self.acked = 0
        self.throttle_ms = []
        self.readings = []
        self.result = None

    def run(self):
        def delivered(err, msg):
            if err is None:
                self.acked += len(msg.value())

        p = Producer(login(self.bootstrap, "heavy", acks=1, **{
            "linger.ms": 5, "batch.size": 65536, "queue.buffering.max.kbytes": 1024,
            "throttle_cb": lambda ev: self.throttle_ms.append(1000 * ev.throttle_time)}))
        start = time.monotonic()
        mark = None
        next_read = start + self.warmup
        while (now := time.monotonic()) - start < self.warmup + self.measure:
            if mark is None and now - start >= self.warmup:
                p.poll(0)
                mark = (now, self.acked)
            if now >= next_read:
                s = self.broker.scrape()
                v = s.get('kaas_quota_rate{quota_type="producer_byte_rate",user="heavy",'
                          'client_id=""}')
                if v is not None:
                    self.readings.append(v)
                next_read += 1.0
            try:
                p.produce(self.topic, VALUE, on_delivery=delivered)
            except BufferError:
                p.poll(0.02)
            p.poll(0)
        p.poll(0)
        end = (time.monotonic(), self.acked)
        self.result = (end[1] - mark[1]) / (end[0] - mark[0])
        p.flush(120)


def main():
    args = parse_args()
    root = kb.fresh_dir(args.data_root, "quota")
    data = os.path.join(root, "data")
    for user, password in USERS.items():
        set_user(args.kaas, data, user, password, "SCRAM-SHA-512")
    plain, sasl = free_port(), free_port()
    extra = ["--listener", f"PLAIN=PLAINTEXT://127.0.0.1:{plain}",
             "--listener", f"SASL=SASL_PLAINTEXT://127.0.0.1:{sasl}"]
    extra += ["--authorizer", "none"]
    broker = kb.Kaas(args.kaas, data, fsync=args.fsync, extra=extra, metrics=True).start()
    bootstrap = f"127.0.0.1:{sasl}"
    try:
        said = alter_client_quotas(f"127.0.0.1:{plain}",
                                   [([("user", "heavy")], {"producer_byte_rate": args.quota})])
        assert said == [(0, None)], said
        for t in ("quota-heavy", "quota-light-alone", "quota-light-beside"):
            kb.create_topic(f"127.0.0.1:{plain}", t, 1)
        kb.log(f"kaas {args.kaas} fsync={args.fsync} quota={args.quota:.0f} B/s "
               f"cores={os.cpu_count()}")
        alone = latency(bootstrap, "quota-light-alone", args.rate, args.latency_seconds)
        print(f"light alone      ack p50 {alone[0]:6.2f} ms  p99 {alone[1]:6.2f} ms", flush=True)
        heavy = Heavy(bootstrap, "quota-heavy", args.warmup, args.measure, broker)
        heavy.start()
        # light's second run falls inside heavy's measured, throttled part.
        time.sleep(args.warmup)  # not a synchronisation: the schedule of the runs
        beside = latency(bootstrap, "quota-light-beside", args.rate, args.latency_seconds)
        heavy.join()
        print(f"light beside     ack p50 {beside[0]:6.2f} ms  p99 {beside[1]:6.2f} ms")
        kb.create_topic(f"127.0.0.1:{plain}", "quota-light-after", 1)
        after = latency(bootstrap, "quota-light-after", args.rate, args.latency_seconds)
        print(f"light alone again ack p50 {after[0]:5.2f} ms  p99 {after[1]:6.2f} ms")
        # The lower of the two references: the ratio errs against kaas.
        alone = min(alone, after, key=lambda a: a[1])
        q = args.quota
        med = statistics.median(heavy.readings) if heavy.readings else float("nan")
        print(f"heavy acked      {heavy.result:12.0f} B/s over the last {args.measure:.0f} s"
              f"   = {heavy.result / q:.3f} x quota (target 0.90..1.10)")
        print(f"heavy broker     {med:12.0f} B/s median windowed rate of {len(heavy.readings)}"
              f" readings = {med / q:.3f} x quota")
        print(f"heavy throttled  {len(heavy.throttle_ms)} responses, max "
              f"{max(heavy.throttle_ms, default=0):.0f} ms")
        print(f"light p99 beside / alone = {beside[1] / alone[1]:.2f} (target <= 1.5)")
        page = broker.scrape()
        key = ('kaas_quota_throttle_time_ms_total{quota_type="producer_byte_rate",'
               'user="heavy",client_id=""}')
        print(f"kaas_quota_throttle_time_ms_total heavy = {page.get(key, 0):.0f}")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
