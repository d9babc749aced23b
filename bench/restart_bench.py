#!/usr/bin/env python3
"""Restart time of kaas with ~1 GiB of log across 100 partitions.

    .venv/bin/python bench/restart_bench.py [options]

1. Starts `target/release/kaas broker --listen 127.0.0.1:0 --data-dir <fresh
   dir under target/bench-data> --fsync always --metrics-listen 127.0.0.1:0`
   and fills --gib GiB of --record-kib KiB records round-robin over
   --topics x --partitions partitions (librdkafka producer, acks=1,
   linger.ms=20, batch.size=1 MiB, no compression).
2. Clean restarts: SIGTERM, wait for the exit, start again; the figure is the
   time from spawning the process to reading its stdout line `kaas broker
   listening on ADDR` (policy load + log recovery + bind), next to the
   broker's own `log recovered took_ms=N` (stderr, RUST_LOG=info).
3. Crash restarts: a producer writes --crash-mib MiB over every partition and
   the broker gets SIGKILL from the delivery callback as soon as half of it is
   acknowledged (so the rest is in flight: no clean marker, possibly torn
   tails), then it is started again and timed the same way. Each crash run
   adds up to --crash-mib MiB to the log.
Every restart checks that the log end offsets (from /metrics) cover every
record acknowledged before the stop. With --cold, each kind is also measured
after evicting the data dir's files from the page cache (fdatasync +
POSIX_FADV_DONTNEED on those files only; nothing system-wide).
"""

import argparse
import gc
import json
import os
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kaasbench as kb  # noqa: E402

from confluent_kafka import Producer  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kaas", default=kb.DEFAULT_KAAS, help="kaas binary (default: %(default)s)")
    ap.add_argument("--data-root", default=kb.DEFAULT_DATA_ROOT,
                    help="a fresh data dir is made under this (default: %(default)s)")
    ap.add_argument("--fsync", default="always", choices=["always", "interval", "never"])
    ap.add_argument("--gib", type=float, default=1.0, help="GiB to fill (default: %(default)s)")
    ap.add_argument("--topics", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    ap.add_argument("--record-kib", type=int, default=256)
    ap.add_argument("--clean-runs", type=int, default=3)
    ap.add_argument("--crash-runs", type=int, default=3)
    ap.add_argument("--crash-mib", type=int, default=64,
                    help="MiB produced around each SIGKILL; the kill comes once half is acknowledged")
    ap.add_argument("--cold", action="store_true", help="also measure with the data evicted from the page cache")
    ap.add_argument("--keep", action="store_true", help="keep the data dir")
    ap.add_argument("--json", help="also write the figures to this file")
    return ap.parse_args()


def total_leo(broker, topics):
    m = broker.scrape()
    return int(sum(v for k, v in m.items()
                   if k.startswith("kaas_log_end_offset{") and any(f'topic="{t}"' in k for t in topics)))


def producer_conf(bootstrap):
    return {
        "bootstrap.servers": bootstrap,
        "acks": "1",
        "linger.ms": 20,
        "batch.size": kb.MIB,
        "compression.type": "none",
        "message.max.bytes": 4 * kb.MIB,
        "queue.buffering.max.kbytes": 512 * 1024,
        "queue.buffering.max.messages": 1_000_000,
    }


def fill(bootstrap, tps, value, n):
    """Produces n records round-robin over tps; returns (seconds, acked)."""
    acked = [0]
    errs = []

    def dr(err, msg):
        if err is None:
            acked[0] += 1
        else:
            errs.append(err)

    p = Producer(dict(producer_conf(bootstrap), on_delivery=dr))
    t0 = time.perf_counter()
    for i in range(n):
        t, part = tps[i % len(tps)]
        while True:
            try:
                p.produce(t, value, partition=part)
                break
            except BufferError:
                p.poll(0.005)
        p.poll(0)
    left = p.flush(600)
    took = time.perf_counter() - t0
    if left or errs:
        raise RuntimeError(f"fill: {left} undelivered, {len(errs)} errors ({errs[:1]})")
    return took, acked[0]


class Background:
    """A producer writing `limit` records over every partition (for crash
    runs); the broker is killed while they are in flight."""

    def __init__(self, bootstrap, tps, value, limit, kill_pid):
        self.acked = 0
        self.sent = 0
        self.limit = limit
        self.kill_pid = kill_pid
        self.killed = threading.Event()
        self.in_flight_at_kill = None
        self.stop_flag = threading.Event()
        conf = dict(producer_conf(bootstrap), on_delivery=self._dr)
        conf["message.timeout.ms"] = 5000
        conf["log_level"] = 0
        conf["error_cb"] = lambda e: None
        self.p = Producer(conf)
        self.tps = tps
        self.value = value
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def _dr(self, err, msg):
        if err is None and not self.killed.is_set():
            self.acked += 1
            if self.acked >= self.limit // 2:
                # SIGKILL from the delivery callback: the rest is in flight.
                os.kill(self.kill_pid, signal.SIGKILL)
                self.in_flight_at_kill = self.sent - self.acked
                self.killed.set()

    def run(self):
        while not self.stop_flag.is_set():
            if self.sent < self.limit:
                t, part = self.tps[self.sent % len(self.tps)]
                try:
                    self.p.produce(t, self.value, partition=part)
                    self.sent += 1
                except BufferError:
                    self.p.poll(0.005)
                self.p.poll(0)
            else:
                self.p.poll(0.01)

    def stop(self):
        self.stop_flag.set()
        self.t.join(10)
        self.p.purge()
        self.p.flush(0)
        self.p = None  # break the producer <-> callback cycle so it stops reconnecting
        gc.collect()


def restart(args, broker, cold, topics, expect_at_least):
    if cold:
        n = kb.evict_from_page_cache(broker.data_dir)
        kb.log(f"  evicted {n} files from the page cache")
    size = kb.dir_bytes(broker.data_dir)
    broker.start()
    leo = total_leo(broker, topics)
    if leo < expect_at_least:
        raise RuntimeError(f"after restart the logs end at {leo} records, expected >= {expect_at_least}")
    return {"startup_s": broker.startup_s, "recovered_ms": broker.recovered_ms, "data_bytes": size,
            "records": leo}


def summary(rows, key):
    v = [r[key] for r in rows if r.get(key) is not None]
    return (statistics.median(v), min(v), max(v)) if v else (float("nan"),) * 3


def main():
    args = parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    data = kb.fresh_dir(args.data_root, "restart")
    fs = kb.fs_of(data)
    broker = kb.Kaas(args.kaas, data, fsync=args.fsync)
    results = {"clean": [], "crash": [], "clean_cold": [], "crash_cold": []}
    ok = False
    try:
        broker.start()
        kb.log(f"kaas pid {broker.pid} on {broker.addr}, data {data} ({fs}); "
               f"first start {broker.startup_s:.3f} s")
        topics = [f"restart-{i}" for i in range(args.topics)]
        for t in topics:
            kb.create_topic(broker.addr, t, args.partitions, {"max.message.bytes": str(4 * kb.MIB)})
        tps = [(t, p) for t in topics for p in range(args.partitions)]
        rec = args.record_kib * 1024
        n = int(args.gib * (1 << 30)) // rec
        value = os.urandom(rec)
        kb.log(f"filling {n} x {args.record_kib} KiB over {len(tps)} partitions")
        took, acked = fill(broker.addr, tps, value, n)
        kb.log(f"filled {n * rec / kb.MIB:.0f} MiB in {took:.1f} s ({n * rec / took / kb.MB:.0f} MB/s)")
        fill_info = {"records": n, "record_bytes": rec, "seconds": took, "partitions": len(tps)}
        expect = total_leo(broker, topics)
        assert expect == n, (expect, n)

        # Warm runs first (the fill left the data in the page cache), then
        # the cold ones, which evict it before every start.
        limit = max(1, args.crash_mib * kb.MIB // rec)
        phases = [("clean", False), ("crash", False)]
        if args.cold:
            phases += [("clean_cold", True), ("crash_cold", True)]
        for kind, cold in phases:
            runs = args.clean_runs if kind.startswith("clean") else args.crash_runs
            for i in range(runs):
                if kind.startswith("clean"):
                    stop_s = broker.stop(signal.SIGTERM)
                    r = restart(args, broker, cold, topics, expect)
                    r["stop_s"] = stop_s
                    kb.log(f"{kind} restart {i + 1}: {r['startup_s']:.3f} s to listening, "
                           f"log recovered took_ms={r['recovered_ms']} (SIGTERM exit took {stop_s:.2f} s)")
                else:
                    bg = Background(broker.addr, tps, value, limit, broker.pid)
                    if not bg.killed.wait(120):
                        raise RuntimeError("the crash-run producer got no acknowledgements")
                    broker.stop(signal.SIGKILL)
                    bg.stop()
                    # Everything acknowledged before the kill was fsynced (--fsync always).
                    expect = expect + (bg.acked if args.fsync == "always" else 0)
                    r = restart(args, broker, cold, topics, expect)
                    r["acked_before_kill"] = bg.acked
                    r["in_flight_at_kill"] = bg.in_flight_at_kill
                    kb.log(f"{kind} restart {i + 1}: {r['startup_s']:.3f} s to listening, "
                           f"log recovered took_ms={r['recovered_ms']}, data {r['data_bytes'] / kb.MIB:.0f} MiB, "
                           f"SIGKILL with {r['in_flight_at_kill']} of {limit} records produced "
                           f"but not yet acknowledged")
                expect = r["records"]
                results[kind].append(r)
        ok = True
    finally:
        broker.stop()
        if not args.keep:
            kb.remove(data)
            if ok:  # the broker log is kept only when something failed
                kb.remove_file(broker.log_path)

    try:
        with open("/proc/pressure/cpu") as f:
            pressure = f.readline().split()[2]
    except OSError:
        pressure = "n/a"
    print(f"# restart_bench {started}; cores: {os.cpu_count()}; filesystem: {fs}; "
          f"load average at end: {os.getloadavg()[0]:.2f}; cpu pressure some {pressure}")
    print(f"# kaas {args.kaas} --fsync {args.fsync}; {len(tps)} partitions "
          f"({args.topics} topic(s) x {args.partitions}); fill {n} x {args.record_kib} KiB = "
          f"{n * rec / (1 << 30):.2f} GiB in {fill_info['seconds']:.1f} s")
    print(f"{'restart':<12} {'runs':>4} {'to listening s (median, min-max)':>34} "
          f"{'log recovered took_ms (median, min-max)':>40} {'data MiB':>9}")
    for kind, rows in results.items():
        if not rows:
            continue
        s = summary(rows, "startup_s")
        t = summary(rows, "recovered_ms")
        d = summary(rows, "data_bytes")
        print(f"{kind:<12} {len(rows):>4} {s[0]:>14.3f} ({s[1]:.3f}-{s[2]:.3f}) "
              f"{t[0]:>22.0f} ({t[1]:.0f}-{t[2]:.0f}) {d[0] / kb.MIB:>9.0f}")
    clean = summary(results["clean"], "startup_s")[0]
    if args.gib >= 1 and len(tps) >= 100:
        print(f"target: clean restart < 2 s for 1 GiB/100 partitions: "
              f"{'met' if clean < 2 else 'NOT met'} ({clean:.3f} s median)")
    else:
        print(f"target (clean restart < 2 s for 1 GiB/100 partitions): not applicable to "
              f"{args.gib} GiB / {len(tps)} partitions ({clean:.3f} s median)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started, "filesystem": fs, "fill": fill_info, "results": results,
                       "argv": sys.argv}, f, indent=2)


if __name__ == "__main__":
    main()
