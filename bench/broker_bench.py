#!/usr/bin/env python3
"""Produce/fetch throughput of a Kafka-compatible broker, with references.

    .venv/bin/python bench/broker_bench.py [--bootstrap HOST:PORT] [options]

Without --bootstrap it starts `target/release/kaas broker --listen
127.0.0.1:0 --data-dir <fresh dir under target/bench-data> --fsync always
--metrics-listen 127.0.0.1:0` itself (port 0: the broker binds a free port and
prints it in `kaas broker listening on ADDR`, which this waits for), and stops
it with SIGTERM at the end. With --bootstrap it drives that broker instead and
measures the raw-disk reference in --data-dir (default: the current dir).

Load (librdkafka through confluent-kafka; every case is a new topic):
  a  1 KiB records, acks=all, idempotent, linger.ms=5, batch.size=1 MiB, no compression
  b  100-byte records, same settings
  c  64 KiB records, linger.ms=20, batch.size=1 MiB: ~1 MiB per partition per request
  w  (diagnostic) no librdkafka on the produce side: a minimal wire-level
     producer re-sends one pre-built 1 MiB RecordBatch (16 x ~64 KiB records,
     no producer id) as ProduceRequest v3, acks=-1, --wire-depth (5) requests
     in flight on one connection: the broker's durable-produce rate when the
     client costs almost no CPU
  s  (diagnostic) the same with 16 KiB batches (16 x ~1 KiB): fdatasync-bound,
     shows whether pipelined requests on one connection share an fdatasync
Fetch is always read back with librdkafka.
Produce time runs from the first produce() to flush() returning; fetch time
from assign() (OFFSET_BEGINNING, no group, enable.auto.commit=false) to the
last record received via consume(num_messages=...).

References, measured in the same run next to every case, because this
machine's disk and CPUs drift (the virtual disk's sync-write bandwidth drops
by about half after ~1 GB of writes, and other builds share the 2 cores):
  raw   1 MiB os.write + os.fdatasync loop on a new file in the data dir,
        --ref-seconds right before and right after each produce phase
  tcp   one 127.0.0.1 TCP connection streaming 1 MiB buffers, right before
        each fetch phase
Each case also reports the Linux pressure-stall share (PSI `some`, cpu and
io) during its produce phase: how much of that time some task on the machine
waited for a CPU or for I/O (other work shares this machine).
In the second table, `wall ms/req` is the produce phase divided by the
Produce requests the broker saw, `req ms` the broker's mean time from reading
a Produce request to having its response ready (includes waiting for its
fdatasync), `ms/fsync` the mean fdatasync time inside the broker, `client CPU` the
producer process (Python + librdkafka threads) and `py thread` the Python
thread calling produce(), both as a share of one core over the produce phase,
`py loop` the share of the phase before the last produce() call returned
(the rest is flush() waiting), `inflight max` the most
Produce requests the client had awaiting a response (librdkafka statistics
`waitresp_cnt`, sampled every 100 ms; for w and s, --wire-depth).
Ratios: produce MB/s / mean(raw before, raw after) (target >= 0.70 for case
c), fetch MB/s / tcp MB/s. MB = 10^6 bytes of record values (batch and
protocol framing not counted).

--compare-fsync MODE (e.g. never) repeats --compare-cases against a second
kaas with that --fsync (fresh dir, after the first one is stopped), to
separate the cost of durability from the rest. With kaas started here, each
case also reports the broker's /metrics deltas: Produce requests and their
mean size and latency, fdatasync calls (kaas_fsync_total), their mean time
and the share of the produce phase spent in them, and CPU use of the broker,
of the producer process and of the Python thread calling produce().
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kaasbench as kb  # noqa: E402

CASES = {
    # name: (record bytes, default records, linger.ms, label)
    "a": (1024, 1_000_000, 5, "1 KiB records"),
    "b": (100, 2_000_000, 5, "100 B records"),
    "c": (64 * 1024, 24_000, 20, "64 KiB records, ~1 MiB/request"),
    # Diagnostic cases without librdkafka on the produce side: a minimal
    # wire-level producer re-sends one pre-built batch (records of the given
    # size, `linger` = records per batch) with --wire-depth requests in flight
    # on one connection, so the client needs almost no CPU.
    "w": (64 * 1024 - 80, 24_000, 16, "wire: 1 MiB batches"),
    "s": (1024 - 80, 80_000, 16, "wire: 16 KiB batches"),
}
WIRE = {"w", "s"}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="use this broker instead of starting kaas")
    ap.add_argument("--kaas", default=kb.DEFAULT_KAAS, help="kaas binary (default: %(default)s)")
    ap.add_argument("--data-dir", help="the broker's data dir (default: a fresh dir under target/bench-data); "
                    "with --bootstrap, where the raw-disk reference file goes (default: the current dir)")
    ap.add_argument("--fsync", default="always", choices=["always", "interval", "never"],
                    help="kaas --fsync for the main run (default: %(default)s)")
    ap.add_argument("--cases", default="abcws", help="which cases to run, in order (default: %(default)s)")
    ap.add_argument("--n-a", type=int, default=CASES["a"][1], help="records in case a (default: %(default)s)")
    ap.add_argument("--n-b", type=int, default=CASES["b"][1], help="records in case b (default: %(default)s)")
    ap.add_argument("--n-c", type=int, default=CASES["c"][1], help="records in case c (default: %(default)s)")
    ap.add_argument("--n-w", type=int, default=CASES["w"][1], help="records in case w (default: %(default)s)")
    ap.add_argument("--n-s", type=int, default=CASES["s"][1], help="records in case s (default: %(default)s)")
    ap.add_argument("--wire-depth", type=int, default=5,
                    help="requests in flight for the wire cases w and s (default: %(default)s)")
    ap.add_argument("--no-idempotence", action="store_true",
                    help="librdkafka enable.idempotence=false (acks=all stays; max.in.flight 5)")
    ap.add_argument("--partitions", type=int, default=4, help="partitions for cases a and b (default: %(default)s)")
    ap.add_argument("--partitions-c", type=int, default=1, help="partitions for case c (default: %(default)s)")
    ap.add_argument("--ref-seconds", type=float, default=3.0,
                    help="duration of each reference measurement (default: %(default)s)")
    ap.add_argument("--compare-fsync", choices=["always", "interval", "never"],
                    help="repeat --compare-cases against a second kaas (fresh dir) with this --fsync")
    ap.add_argument("--compare-fsync-never", dest="compare_fsync", action="store_const", const="never",
                    help="same as --compare-fsync never")
    ap.add_argument("--compare-cases", default="c", help="(default: %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs")
    ap.add_argument("--json", help="also write every figure to this file")
    return ap.parse_args()


def run_case(args, bootstrap, broker, ref_dir, case, tag):
    size, _, linger, label = CASES[case]
    n = getattr(args, f"n_{case}")
    parts = args.partitions if case in "ab" else args.partitions_c
    if case in WIRE:
        parts = 1
        n -= n % linger
        label = f"{label}, depth {args.wire_depth}"
    topic = f"bench-{case}-{tag}-{int(time.time() * 1000)}"
    kb.create_topic(bootstrap, topic, parts, {"max.message.bytes": str(4 * kb.MIB)})
    value = os.urandom(size)
    conf = kb.producer_config(bootstrap, **{"linger.ms": linger})
    if args.no_idempotence:
        conf.update({"enable.idempotence": False, "max.in.flight": 5})
    if case in WIRE:
        batch = kb.record_batch(linger, value)

    kb.log(f"[{tag}] case {case}: raw append+fdatasync reference (before)")
    raw_before = kb.raw_append_fdatasync(ref_dir, args.ref_seconds)
    m0 = broker.scrape() if broker else {}
    cpu0 = broker.cpu_seconds() if broker else 0.0
    psi0 = kb.psi("cpu"), kb.psi("io")
    kb.log(f"[{tag}] case {case}: producing {n} x {size} B to {parts} partition(s)")
    if case in WIRE:
        c0, th0 = time.process_time(), time.thread_time()
        took, codes = kb.wire_produce(bootstrap, topic, 0, batch, n // linger, args.wire_depth)
        p = {"seconds": took, "loop_seconds": took, "process_cpu": time.process_time() - c0,
             "thread_cpu": time.thread_time() - th0,
             "errors": [f"error code {k} x {v}" for k, v in codes.items()],
             "inflight_max": args.wire_depth, "inflight_mean": None}
    else:
        p = kb.produce(conf, topic, parts, value, n)
    if p["errors"]:
        raise RuntimeError(f"{len(p['errors'])} delivery errors, first: {p['errors'][0]}")
    psi1 = kb.psi("cpu"), kb.psi("io")
    cpu1 = broker.cpu_seconds() if broker else 0.0
    m1 = broker.scrape() if broker else {}
    kb.log(f"[{tag}] case {case}: raw append+fdatasync reference (after)")
    raw_after = kb.raw_append_fdatasync(ref_dir, args.ref_seconds)
    secs = p["seconds"]
    payload = n * size
    raw_mb = (raw_before[0] + raw_after[0]) / 2
    r = {
        "case": case, "label": label, "tag": tag, "records": n, "record_bytes": size,
        "partitions": parts, "linger_ms": None if case in WIRE else linger,
        "wire_depth": args.wire_depth if case in WIRE else None,
        "produce_s": secs, "produce_rec_s": n / secs, "produce_MB_s": payload / secs / kb.MB,
        "producer_cpu_pct": 100 * p["process_cpu"] / secs,
        "produce_loop_s": p["loop_seconds"],
        "python_thread_cpu_pct": 100 * p["thread_cpu"] / secs,
        "produce_loop_pct": 100 * p["loop_seconds"] / secs,
        "client_inflight_max": p["inflight_max"], "client_inflight_mean": p["inflight_mean"],
        "raw_before_MB_s": raw_before[0], "raw_after_MB_s": raw_after[0],
        "raw_p50_ms": 1000 * statistics.mean([raw_before[1], raw_after[1]]),
        "raw_MB_s": raw_mb, "produce_over_raw": payload / secs / kb.MB / raw_mb,
        "psi_cpu_some_pct": kb.psi_pct(psi0[0], psi1[0], secs),
        "psi_io_some_pct": kb.psi_pct(psi0[1], psi1[1], secs),
    }
    if broker:
        reqs = kb.delta(m1, m0, 'kaas_requests_total{api="Produce"}')
        req_s = kb.delta(m1, m0, 'kaas_request_seconds_sum{api="Produce"}')
        syncs = kb.delta(m1, m0, "kaas_fsync_total")
        sync_s = kb.delta(m1, m0, "kaas_fsync_seconds_sum")
        bytes_in = kb.delta(m1, m0, "kaas_bytes_in_total")
        r.update({
            "broker_cpu_pct": 100 * (cpu1 - cpu0) / secs,
            "broker_cpu_ms_per_MB": 1000 * (cpu1 - cpu0) / (payload / kb.MB),
            "produce_requests": reqs,
            "avg_request_KiB": bytes_in / reqs / 1024 if reqs else 0,
            "fsyncs": syncs,
            "fsync_mean_ms": 1000 * sync_s / syncs if syncs else 0,
            "fsync_busy_pct": 100 * sync_s / secs,
            "MiB_per_fsync": bytes_in / syncs / kb.MIB if syncs else 0,
            "produce_latency_mean_ms": 1000 * req_s / reqs if reqs else 0,
            "wall_ms_per_request": 1000 * secs / reqs if reqs else 0,
        })

    kb.log(f"[{tag}] case {case}: loopback TCP reference")
    tcp = kb.loopback_tcp(args.ref_seconds)
    kb.log(f"[{tag}] case {case}: consuming")
    m0 = broker.scrape() if broker else {}
    cpu0 = broker.cpu_seconds() if broker else 0.0
    fsecs, ccpu, got, nbytes = kb.consume_all(bootstrap, topic, parts, n)
    cpu1 = broker.cpu_seconds() if broker else 0.0
    m1 = broker.scrape() if broker else {}
    if got != n or nbytes != payload:
        raise RuntimeError(f"read {got} records / {nbytes} bytes, wrote {n} / {payload}")
    r.update({
        "fetch_s": fsecs, "fetch_rec_s": got / fsecs, "fetch_MB_s": nbytes / fsecs / kb.MB,
        "consumer_cpu_pct": 100 * ccpu / fsecs, "tcp_MB_s": tcp,
        "fetch_over_tcp": nbytes / fsecs / kb.MB / tcp,
    })
    if broker:
        r["fetch_broker_cpu_pct"] = 100 * (cpu1 - cpu0) / fsecs
        freqs = kb.delta(m1, m0, 'kaas_requests_total{api="Fetch"}')
        r["fetch_requests"] = freqs
        r["fetch_avg_KiB"] = kb.delta(m1, m0, "kaas_bytes_out_total") / freqs / 1024 if freqs else 0
        r["fetch_latency_mean_ms"] = (1000 * kb.delta(m1, m0, 'kaas_request_seconds_sum{api="Fetch"}') / freqs
                                      if freqs else 0)
    kb.log(f"[{tag}] case {case}: produce {r['produce_MB_s']:.1f} MB/s (raw {raw_before[0]:.0f}/"
           f"{raw_after[0]:.0f}), fetch {r['fetch_MB_s']:.1f} MB/s (tcp {tcp:.0f})")
    return r


def print_tables(results):
    print(f"{'broker':<12} {'case':<34} {'records':>9} {'prod rec/s':>11} {'prod MB/s':>9} "
          f"{'raw MB/s (before/after)':>23} {'prod/raw':>8} {'fetch rec/s':>11} {'fetch MB/s':>10} "
          f"{'tcp MB/s':>8} {'fetch/tcp':>9}")
    for r in results:
        print(f"{r['tag']:<12} {r['case'] + ' ' + r['label']:<34} {r['records']:>9} "
              f"{r['produce_rec_s']:>11,.0f} {r['produce_MB_s']:>9.1f} "
              f"{r['raw_MB_s']:>8.1f} ({r['raw_before_MB_s']:>4.0f}/{r['raw_after_MB_s']:>4.0f}) "
              f"{r['produce_over_raw']:>8.2f} {r['fetch_rec_s']:>11,.0f} {r['fetch_MB_s']:>10.1f} "
              f"{r['tcp_MB_s']:>8.0f} {r['fetch_over_tcp']:>9.3f}")
    print()
    print(f"{'broker':<12} {'case':<4} {'ProduceReq':>10} {'KiB/req':>8} {'wall ms/req':>11} {'req ms':>7} {'fsyncs':>7} "
          f"{'ms/fsync':>8} {'MiB/fsync':>9} {'fsync busy':>10} {'raw p50 ms':>10} {'broker CPU':>10} "
          f"{'CPU ms/MB':>9} {'client CPU':>10} {'py thread':>9} {'py loop':>7} {'FetchReq':>8} {'KiB/fetch':>9} {'fetch ms':>8} "
          f"{'fetch brkCPU':>12} {'consumer CPU':>12} {'PSI cpu':>7} {'PSI io':>6} {'inflight max':>12}")
    for r in results:
        if "fsyncs" not in r:
            continue
        print(f"{r['tag']:<12} {r['case']:<4} {r['produce_requests']:>10.0f} {r['avg_request_KiB']:>8.0f} "
              f"{r['wall_ms_per_request']:>11.2f} "
              f"{r['produce_latency_mean_ms']:>7.2f} {r['fsyncs']:>7.0f} {r['fsync_mean_ms']:>8.2f} "
              f"{r['MiB_per_fsync']:>9.2f} {r['fsync_busy_pct']:>9.0f}% {r['raw_p50_ms']:>10.2f} "
              f"{r['broker_cpu_pct']:>9.0f}% {r['broker_cpu_ms_per_MB']:>9.2f} "
              f"{r['producer_cpu_pct']:>9.0f}% {r['python_thread_cpu_pct']:>8.0f}% "
              f"{r['produce_loop_pct']:>6.0f}% "
              f"{r['fetch_requests']:>8.0f} {r['fetch_avg_KiB']:>9.0f} {r['fetch_latency_mean_ms']:>8.2f} "
              f"{r['fetch_broker_cpu_pct']:>11.0f}% {r['consumer_cpu_pct']:>11.0f}% "
              f"{r['psi_cpu_some_pct']:>6.0f}% {r['psi_io_some_pct']:>5.0f}% "
              f"{'' if r['client_inflight_max'] is None else r['client_inflight_max']:>12}")


def main():
    args = parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    t_start = time.monotonic()
    dirs = []
    brokers = []
    results = []
    ok = False
    try:
        if args.bootstrap:
            ref_dir = args.data_dir or os.getcwd()
            bootstrap, broker = args.bootstrap, None
            kb.log(f"using broker {bootstrap}; raw-disk reference in {ref_dir}")
            tag = "external"
        else:
            data = args.data_dir or kb.fresh_dir(kb.DEFAULT_DATA_ROOT, "broker")
            os.makedirs(data, exist_ok=True)
            dirs.append(data)
            ref_dir = data
            broker = kb.Kaas(args.kaas, data, fsync=args.fsync).start()
            brokers.append(broker)
            bootstrap = broker.addr
            tag = f"kaas-{args.fsync}"
            kb.log(f"kaas pid {broker.pid} on {bootstrap} (--fsync {args.fsync}), data {data}, "
                   f"started in {broker.startup_s:.3f} s, metrics {broker.metrics_addr}")
        fs = kb.fs_of(ref_dir)
        kb.log(f"filesystem: {fs}")

        for case in args.cases:
            results.append(run_case(args, bootstrap, broker, ref_dir, case, tag))

        if args.compare_fsync and broker:
            # Stop the first broker so that only one runs at a time.
            broker.stop()
            d2 = kb.fresh_dir(kb.DEFAULT_DATA_ROOT, f"broker-{args.compare_fsync}")
            dirs.append(d2)
            b2 = kb.Kaas(args.kaas, d2, fsync=args.compare_fsync).start()
            brokers.append(b2)
            for case in args.compare_cases:
                results.append(run_case(args, b2.addr, b2, d2, case, f"kaas-{args.compare_fsync}"))
            b2.stop()
        ok = True
    finally:
        for b in brokers:
            b.stop()
        if not args.keep:
            for d in dirs:
                kb.remove(d)
            if ok:  # the broker logs are kept only when something failed
                for b in brokers:
                    kb.remove_file(b.log_path)

    print(f"# broker_bench {started} ({time.monotonic() - t_start:.0f} s); cores: {os.cpu_count()}; "
          f"filesystem: {fs}; load average at end: {os.getloadavg()[0]:.2f}")
    print(f"# broker: {args.bootstrap or 'kaas started by the bench: ' + args.kaas + ' --fsync ' + args.fsync}")
    print_tables(results)
    for r in results:
        if r["case"] == "c":
            print(f"target {r['tag']} case c: produce/raw-disk = {r['produce_over_raw']:.2f} "
                  f"({'met' if r['produce_over_raw'] >= 0.70 else 'NOT met'}: target >= 0.70)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started, "filesystem": fs, "results": results, "argv": sys.argv,
                       "broker_startup_s": [b.startup_s for b in brokers]}, f, indent=2)


if __name__ == "__main__":
    main()
