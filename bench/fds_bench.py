#!/usr/bin/env python3
"""Descriptors, memory, start-up and shutdown of one broker holding many
partitions (the open-file cache).

    .venv/bin/python bench/fds_bench.py --partitions 5000 [--kaas BIN] [--extra "--flag v"]

For each --partitions N (a fresh data dir under target/bench-data each):
1. starts `kaas broker --fsync always --max-partitions N`, creates topics of
   --per-topic partitions until N are created or creation is refused (the
   count reached is reported), and produces one small record to every
   partition (librdkafka, acks=all);
2. reads the broker's open descriptors (/proc/<pid>/fd) and RSS (VmRSS);
3. clean shutdown after the writes (SIGTERM to exit), clean start-up (spawn
   to the `listening` line; the broker's own `log recovered took_ms`),
   descriptors after it, then a clean shutdown with nothing written since
   start;
4. starts again, produces one more record to every partition, SIGKILLs the
   broker and times the recovery start-up.
Figures go to stdout as one JSON object per N (and to --json).
"""

import argparse
import json
import os
import shlex
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kaasbench as kb  # noqa: E402

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kaas", default=kb.DEFAULT_KAAS)
    ap.add_argument("--data-root", default=kb.DEFAULT_DATA_ROOT)
    ap.add_argument("--partitions", type=int, nargs="+", default=[5000])
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--extra", default="", help="more broker flags, shell-quoted")
    ap.add_argument("--label", default="")
    ap.add_argument("--json")
    return ap.parse_args()


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def create_topics(bootstrap, total, per_topic):
    """Creates topics of per_topic partitions until total; returns
    (topics, partitions created, seconds, the refusal if any)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    made, topics, refusal = 0, [], None
    t0 = time.monotonic()
    while made < total:
        n = min(per_topic, total - made)
        name = f"p{len(topics):03d}"
        fs = admin.create_topics([NewTopic(name, num_partitions=n, replication_factor=1)],
                                 operation_timeout=120, request_timeout=180)
        try:
            fs[name].result(180)
        except Exception as e:  # noqa: BLE001 - the refusal is a figure
            refusal = str(e)
            break
        topics.append((name, n))
        made += n
    return topics, made, time.monotonic() - t0, refusal


def produce_one_each(bootstrap, topics):
    errors = []
    p = Producer(kb.producer_config(bootstrap, **{
        "on_delivery": lambda err, msg: errors.append(err) if err else None,
        "delivery.report.only.error": True,
        "topic.metadata.refresh.interval.ms": 600000,
    }))
    t0 = time.monotonic()
    for name, n in topics:
        for part in range(n):
            while True:
                try:
                    p.produce(name, b"x" * 100, partition=part)
                    break
                except BufferError:
                    p.poll(0.01)
        p.poll(0)
    left = p.flush(600)
    if left or errors:
        raise RuntimeError(f"{left} undelivered, errors {errors[:3]}")
    return time.monotonic() - t0


def run(args, n):
    extra = ["--max-partitions", str(n)] + shlex.split(args.extra)
    data = kb.fresh_dir(args.data_root, f"fds-{n}")
    out = {"label": args.label, "partitions_asked": n, "kaas": args.kaas, "extra": extra}
    k = kb.Kaas(args.kaas, data, fsync="always", extra=extra, metrics=False).start()
    out["empty_fds"] = fds(k.pid)
    topics, made, secs, refusal = create_topics(k.addr, n, args.per_topic)
    out.update(partitions=made, create_s=round(secs, 2), refusal=refusal)
    out["fds_after_create"] = fds(k.pid)
    out["produce_s"] = round(produce_one_each(k.addr, topics), 2)
    out["fds_after_produce"] = fds(k.pid)
    out["rss_mib"] = round(rss_mib(k.pid), 1)
    out["shutdown_after_writes_s"] = round(k.stop(signal.SIGTERM, 600), 2)
    out["shutdown_rc"] = k.proc.returncode

    k = kb.Kaas(args.kaas, data, fsync="always", extra=extra, metrics=False).start(600)
    out["clean_start_s"] = round(k.startup_s, 2)
    out["clean_start_recovered_ms"] = k.recovered_ms
    out["fds_after_clean_start"] = fds(k.pid)
    out["rss_after_clean_start_mib"] = round(rss_mib(k.pid), 1)
    out["shutdown_untouched_s"] = round(k.stop(signal.SIGTERM, 600), 2)

    k = kb.Kaas(args.kaas, data, fsync="always", extra=extra, metrics=False).start(600)
    produce_one_each(k.addr, topics)
    k.stop(signal.SIGKILL, 60)
    k = kb.Kaas(args.kaas, data, fsync="always", extra=extra, metrics=False).start(600)
    out["crash_start_s"] = round(k.startup_s, 2)
    out["crash_start_recovered_ms"] = k.recovered_ms
    out["fds_after_crash_start"] = fds(k.pid)
    out["shutdown_after_crash_start_s"] = round(k.stop(signal.SIGTERM, 600), 2)
    kb.remove(data)
    return out


def main():
    args = parse_args()
    results = []
    for n in args.partitions:
        r = run(args, n)
        print(json.dumps(r), flush=True)
        results.append(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
