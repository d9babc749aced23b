#!/usr/bin/env python3
"""Produce over PLAINTEXT vs SASL_SSL (SCRAM-SHA-512) on one kaas.

    .venv/bin/python bench/security_bench.py [--runs 3] [--records 60000] [--fsync always]

Starts `target/release/kaas broker` with two listeners, PLAIN
(PLAINTEXT://127.0.0.1:P1) and SECURE (SASL_SSL://127.0.0.1:P2, a test CA and
server certificate made with the openssl CLI), one SCRAM-SHA-512 user `bench`
(`kaas user set`), and, when this kaas has the ACL authorizer, `--super-user
User:admin` and ACLs (made by admin) that give `User:bench` and
`User:ANONYMOUS` (the PLAINTEXT principal) WRITE on the bench topics, so both
sides pay for the same authorization checks. Then, --runs times, alternating
PLAINTEXT and SASL_SSL (which side goes first alternates too):

  throughput  one librdkafka producer (acks=all, idempotent, linger.ms=5,
              batch.size=1 MiB, no compression) writes --records records of
              1 KiB (1024-byte values) to a new 4-partition topic as fast as
              it can: time from the first produce() to flush() returning.
  latency     a new producer with the same settings sends --rate records/s
              for --latency-seconds to a new topic; ack latency of a record =
              its delivery report - its produce() call; p50 and p99.

It prints every run, the medians per protocol and the ratios SASL_SSL /
PLAINTEXT (throughput; target >= 0.70) and PLAINTEXT p99 / SASL_SSL p99.
Same broker process, same data dir, same fsync mode (--fsync, default
always), and the client runs on the same machine: on a small machine the
client's TLS work competes with the broker's for the same cores.
MB = 10^6 bytes of record values.
"""

import argparse
import collections
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "clients"))

import kaasbench as kb  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)
from security_setup import librdkafka_config, make_certs, set_user  # noqa: E402

VALUE = b"k" * 1024
PARTITIONS = 4
TOPIC_PREFIX = "sec-bench-"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kaas", default=kb.DEFAULT_KAAS)
    p.add_argument("--data-root", default=kb.DEFAULT_DATA_ROOT)
    p.add_argument("--fsync", default="always", choices=["always", "interval", "never"])
    p.add_argument("--runs", type=int, default=3, help="runs per protocol (alternating)")
    p.add_argument("--records", type=int, default=60_000, help="records per throughput run")
    p.add_argument("--rate", type=int, default=1000, help="records/s in the latency phase")
    p.add_argument("--latency-seconds", type=float, default=5.0)
    p.add_argument("--keep", action="store_true", help="keep the data dir")
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def has_authorizer(binary):
    out = subprocess.run([binary, "broker", "--help"], capture_output=True, text=True).stdout
    return "--allow-everyone-if-no-acl-found" in out


def producer_conf(side, **over):
    conf = kb.producer_config(side["bootstrap"], **side["login"])
    conf.update(over)
    return conf


def throughput(side, topic, n, broker):
    cpu0 = broker.cpu_seconds()
    r = kb.produce(producer_conf(side), topic, PARTITIONS, VALUE, n)
    broker_cpu = broker.cpu_seconds() - cpu0
    if r["errors"]:
        raise RuntimeError(f"{len(r['errors'])} delivery errors, first {r['errors'][0]}")
    return {"mb_s": n * len(VALUE) / kb.MB / r["seconds"], "rec_s": n / r["seconds"],
            "seconds": r["seconds"], "broker_cpu": broker_cpu / r["seconds"],
            "client_cpu": r["process_cpu"] / r["seconds"]}


def latency(side, topic, rate, seconds):
    """Per-record ack latency at a fixed rate. Delivery reports of an
    idempotent producer come in order per partition, so each partition's
    produce() times wait in a FIFO."""
    sent = {p: collections.deque() for p in range(PARTITIONS)}
    lat = []
    errors = []

    def on_delivery(err, msg):
        t = time.perf_counter()
        t0 = sent[msg.partition()].popleft()
        if err is not None:
            errors.append(err)
        else:
            lat.append(t - t0)

    p = Producer(producer_conf(side, on_delivery=on_delivery,
                               **{"delivery.report.only.error": False}))
    # Connect, log in and get a producer id before the clock starts.
    for part in range(PARTITIONS):
        sent[part].append(time.perf_counter())
        p.produce(topic, VALUE, partition=part)
    if p.flush(30):
        raise RuntimeError("warm-up records not delivered in 30 s")
    lat.clear()
    n = int(rate * seconds)
    start = time.perf_counter()
    for i in range(n):
        due = start + i / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            p.poll(min(due - now, 0.005))
        part = i % PARTITIONS
        sent[part].append(time.perf_counter())
        p.produce(topic, VALUE, partition=part)
        p.poll(0)
    if p.flush(60):
        raise RuntimeError("records not delivered in 60 s")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first {errors[0]}")
    lat.sort()
    return {"p50_ms": 1000 * lat[len(lat) // 2], "p99_ms": 1000 * lat[int(len(lat) * 0.99)]}


def main():
    args = parse_args()
    root = kb.fresh_dir(args.data_root, "security")
    data = os.path.join(root, "data")
    certs = make_certs(os.path.join(root, "certs"))
    set_user(args.kaas, data, "bench", "bench-secret", "SCRAM-SHA-512")
    set_user(args.kaas, data, "admin", "admin-secret", "SCRAM-SHA-512")
    plain_port, secure_port = free_port(), free_port()
    extra = ["--listener", f"PLAIN=PLAINTEXT://127.0.0.1:{plain_port}",
             "--listener", f"SECURE=SASL_SSL://127.0.0.1:{secure_port}",
             "--ssl-cert", str(certs.cert), "--ssl-key", str(certs.key)]
    acls = has_authorizer(args.kaas)
    if acls:
        extra += ["--authorizer", "acl", "--super-user", "User:admin"]
    broker = kb.Kaas(args.kaas, data, fsync=args.fsync, extra=extra, metrics=False).start()
    secure_login = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": "bench", "sasl.password": "bench-secret",
                    "ssl.ca.location": str(certs.ca)}
    sides = {
        "PLAINTEXT": {"bootstrap": f"127.0.0.1:{plain_port}", "login": {}},
        "SASL_SSL": {"bootstrap": f"127.0.0.1:{secure_port}", "login": secure_login},
    }
    admin_conf = librdkafka_config(sides["SASL_SSL"]["bootstrap"], "SASL_SSL", "SCRAM-SHA-512",
                                   "admin", "admin-secret", certs.ca)
    try:
        if acls:
            bindings = [AclBinding(ResourceType.TOPIC, TOPIC_PREFIX, ResourcePatternType.PREFIXED,
                                   principal, "*", op, AclPermissionType.ALLOW)
                        for principal in ("User:bench", "User:ANONYMOUS")
                        for op in (AclOperation.WRITE,)]
            admin = AdminClient(admin_conf)  # kept: a dropped client fails its futures
            for f in admin.create_acls(bindings).values():
                f.result(30)
        kb.log(f"kaas {args.kaas} fsync={args.fsync} data={data} authorizer={'acl' if acls else 'none'}")
        results = {name: [] for name in sides}
        for run in range(args.runs):
            order = list(sides) if run % 2 == 0 else list(reversed(list(sides)))
            for name in order:
                side = sides[name]
                topic = f"{TOPIC_PREFIX}{run}-{name}"
                create_topic(admin_conf, topic)
                t = throughput(side, topic, args.records, broker)
                create_topic(admin_conf, topic + "-lat")
                lt = latency(side, topic + "-lat", args.rate, args.latency_seconds)
                r = {**t, **lt}
                results[name].append(r)
                print(f"run {run + 1} {name:9s} {r['mb_s']:7.1f} MB/s {r['rec_s']:9.0f} rec/s"
                      f"   ack p50 {r['p50_ms']:6.2f} ms  p99 {r['p99_ms']:6.2f} ms"
                      f"   CPU broker {r['broker_cpu']:.2f} client {r['client_cpu']:.2f}", flush=True)
        med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
               for name, rs in results.items()}
        print()
        print(f"median of {args.runs} runs, {args.records} x 1 KiB records, "
              f"latency at {args.rate} rec/s, fsync={args.fsync}, cores={os.cpu_count()}")
        print(f"{'':10s} {'MB/s':>8s} {'rec/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s}"
              f" {'broker CPU':>11s} {'client CPU':>11s}")
        for name, m in med.items():
            print(f"{name:10s} {m['mb_s']:8.1f} {m['rec_s']:9.0f} {m['p50_ms']:8.2f} {m['p99_ms']:8.2f}"
                  f" {m['broker_cpu']:11.2f} {m['client_cpu']:11.2f}")
        print("(CPU: cores busy during the throughput phase; the machine has "
              f"{os.cpu_count()} shared with other work)")
        ratio = med["SASL_SSL"]["mb_s"] / med["PLAINTEXT"]["mb_s"]
        print(f"throughput SASL_SSL / PLAINTEXT = {ratio:.2f} (target >= 0.70)"
              f"   p99 SASL_SSL / PLAINTEXT = {med['SASL_SSL']['p99_ms'] / med['PLAINTEXT']['p99_ms']:.2f}")
        return 0 if ratio >= 0.7 else 1
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def create_topic(admin_conf, topic):
    admin = AdminClient(admin_conf)
    for f in admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS,
                                           replication_factor=1)]).values():
        f.result(60)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md and md.error is None and len(md.partitions) == PARTITIONS:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} not ready")


if __name__ == "__main__":
    sys.exit(main())
