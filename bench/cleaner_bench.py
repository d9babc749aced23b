#!/usr/bin/env python3
"""Log cleaner throughput and its effect on produce latency.

    .venv/bin/python bench/cleaner_bench.py [--mib 400] [--keys 100000]

1. Fill: a broker with `--log-cleaner-enable false` gets --mib MiB of
   --record-bytes records over --keys keys (librdkafka, idempotent, no
   compression) on one partition of a compacted topic (segment.bytes
   64 MiB), and a second, delete-policy topic for the latency probe. Then
   it is stopped (SIGTERM).
2. Reference, same files, same disk: every segment file of the compacted
   partition read sequentially and written to a copy beside it (1 MiB
   chunks, one fdatasync per file, as the cleaner syncs each cleaned
   segment), after evicting them from the page cache. The figure is log
   MB per second of wall time.
3. Cleaner: the files evicted again, the broker started with the cleaner on
   at the default I/O rate (unbounded, Kafka's default); while its first
   pass runs (kaas_log_cleaner_cleaning = 1), a probe sends ProduceRequests
   (acks=-1, one 1 KiB record, one in flight) to the other topic and times
   each. The cleaner figure is the log MB of the cleanable range divided
   by the pass's own duration (kaas_log_cleaner_last_duration_ms).
4. Baseline: once the pass is done and nothing is dirty, the same probe for
   as many requests as it sent during the pass.
5. Reference for the probe (run in step 1, cleaner off): the probe while a
   plain copy of the same files (step 2's read+write, in another process)
   runs: what this machine's cores and disk do to the probe under the same
   I/O without kaas's cleaner.

Prints the cleaner's MB/s against the reference (target >= 0.5x) and the
probe's p50/p99 during the pass against without (target p99 <= 1.5x).
"""

import argparse
import multiprocessing
import os
import statistics
import struct
import sys
import socket
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kaasbench as kb  # noqa: E402

from confluent_kafka import Producer  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kaas", default=kb.DEFAULT_KAAS)
    ap.add_argument("--data-root", default=kb.DEFAULT_DATA_ROOT)
    ap.add_argument("--mib", type=int, default=400, help="MiB written to the compacted topic")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--record-bytes", type=int, default=200, help="value bytes per record")
    ap.add_argument("--warm", action="store_true",
                    help="leave the log in the page cache for the cleaner (tells disk from CPU contention)")
    ap.add_argument("--keep", action="store_true")
    return ap.parse_args()


def fill(bootstrap, topic, mib, keys, record_bytes):
    p = Producer(kb.producer_config(bootstrap, **{"linger.ms": 20}))
    value = os.urandom(record_bytes // 2).hex().encode()[:record_bytes]
    n = mib * kb.MIB // (record_bytes + 8)
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"k%08d" % (i % keys), value=value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    if p.flush(300) != 0:
        raise RuntimeError("fill did not complete")
    return n


def raw_read_write(files):
    """Reads each file and writes a copy beside it (fdatasync per file);
    returns (bytes of the originals, seconds)."""
    total = 0
    t0 = time.perf_counter()
    for path in files:
        copy = path + ".rawcopy"
        with open(path, "rb", buffering=0) as src, open(copy, "wb", buffering=0) as dst:
            while True:
                chunk = src.read(kb.MIB)
                if not chunk:
                    break
                dst.write(chunk)
                total += len(chunk)
            os.fdatasync(dst.fileno())
    took = time.perf_counter() - t0
    for path in files:
        kb.remove_file(path + ".rawcopy")
    return total, took


def read_twice(files):
    """Reads each file twice (what a pass reads: the offset map, then the
    rewrite), writing nothing."""
    for _ in range(2):
        for path in files:
            with open(path, "rb", buffering=0) as src:
                while src.read(kb.MIB):
                    pass


def probe(bootstrap, topic, until, max_requests=100_000):
    """Produce v3 requests (acks=-1, one record) one at a time until
    `until()` (asked every 20 requests, outside the timed part) is true;
    returns each request's latency in seconds."""
    batch = kb.record_batch(1, b"x" * 1024)
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client = b"kaas-cleaner-bench"
    t = topic.encode()
    body = (struct.pack(">hhi", -1, -1, 30000) + struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
            + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(batch)))
    lat = []
    corr = 0
    while len(lat) < max_requests and not (len(lat) % 20 == 0 and until()):
        head = struct.pack(">ihhi", 2 + 2 + 4 + 2 + len(client) + len(body) + len(batch), 0, 3, corr)
        t0 = time.perf_counter()
        s.sendall(head + struct.pack(">h", len(client)) + client + body + batch)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed")
            buf += chunk
        lat.append(time.perf_counter() - t0)
        corr += 1
    s.close()
    return lat


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def main():
    args = parse_args()
    data = kb.fresh_dir(args.data_root, "cleaner")
    compacted, plain = "compacted", "probe"
    b = kb.Kaas(args.kaas, data, extra=["--log-cleaner-enable", "false"]).start()
    kb.create_topic(b.addr, compacted, 1, {"cleanup.policy": "compact",
                                          "segment.bytes": str(64 * kb.MIB)})
    kb.create_topic(b.addr, plain, 1)
    t0 = time.monotonic()
    n = fill(b.addr, compacted, args.mib, args.keys, args.record_bytes)
    kb.log(f"filled {n} records in {time.monotonic() - t0:.1f} s")
    part = os.path.join(data, f"{compacted}-0")
    files = sorted(os.path.join(part, f) for f in os.listdir(part) if f.endswith(".log"))
    # Reference for the probe: the same read+write of the same files by a
    # plain copy in another process, with the cleaner off.
    kb.evict_from_page_cache(part)
    copier = multiprocessing.Process(target=raw_read_write, args=(files[:-1],))
    copier.start()
    under_copy = probe(b.addr, plain, lambda: not copier.is_alive())
    copier.join()
    kb.evict_from_page_cache(part)
    reader = multiprocessing.Process(target=read_twice, args=(files[:-1],))
    reader.start()
    under_read = probe(b.addr, plain, lambda: not reader.is_alive())
    reader.join()
    b.stop()

    # The cleanable range: every segment but the active (last) one.
    cleanable = sum(os.path.getsize(f) for f in files[:-1])
    kb.evict_from_page_cache(part)
    raw_bytes, raw_s = raw_read_write(files[:-1])
    raw = raw_bytes / raw_s / kb.MB
    kb.log(f"raw read+write: {raw_bytes / kb.MB:.0f} MB in {raw_s:.2f} s")

    if not args.warm:
        kb.evict_from_page_cache(part)
    b = kb.Kaas(args.kaas, data, extra=["--log-cleaner-backoff-ms", "100"]).start()

    def cleaning():
        return b.scrape().get("kaas_log_cleaner_cleaning", 0) == 1

    def passes():
        return b.scrape().get("kaas_log_cleaner_passes_total", 0)

    deadline = time.monotonic() + 60
    while not cleaning() and passes() == 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the cleaner did not start a pass")
        time.sleep(0.01)
    during = probe(b.addr, plain, lambda: passes() >= 1)
    m = b.scrape()
    pass_s = m["kaas_log_cleaner_last_duration_ms"] / 1000
    read_b, written_b = m["kaas_log_cleaner_bytes_read_total"], m["kaas_log_cleaner_bytes_written_total"]
    # The same scrapes as during the pass, so both probes load the broker alike.
    after = probe(b.addr, plain, lambda: passes() < 0, max_requests=max(len(during), 2000))
    b.stop()
    if not args.keep:
        kb.remove(data)

    cleaner = cleanable / pass_s / kb.MB
    print(f"cleaner: {cleanable / kb.MB:.0f} MB of log cleaned in {pass_s:.2f} s = {cleaner:.0f} MB/s "
          f"(read {read_b / kb.MB:.0f} MB, wrote {written_b / kb.MB:.1f} MB)")
    print(f"raw sequential read+write, same files: {raw:.0f} MB/s")
    print(f"ratio cleaner/raw: {cleaner / raw:.2f} (target >= 0.5)")
    print(f"produce probe during the pass: {len(during)} requests, p50 {statistics.median(during) * 1e3:.2f} ms, "
          f"p99 {pct(during, 0.99) * 1e3:.2f} ms")
    print(f"produce probe without cleaning: {len(after)} requests, p50 {statistics.median(after) * 1e3:.2f} ms, "
          f"p99 {pct(after, 0.99) * 1e3:.2f} ms")
    print(f"ratio p99 during/without: {pct(during, 0.99) / pct(after, 0.99):.2f} (target <= 1.5)")
    print(f"reference, probe during a plain copy of the same files (cleaner off): {len(under_copy)} requests, "
          f"p50 {statistics.median(under_copy) * 1e3:.2f} ms, p99 {pct(under_copy, 0.99) * 1e3:.2f} ms, "
          f"ratio p99 copy/without {pct(under_copy, 0.99) / pct(after, 0.99):.2f}")
    print(f"reference, probe while another process reads the same files twice (a pass's reads, no writes): "
          f"{len(under_read)} requests, p50 {statistics.median(under_read) * 1e3:.2f} ms, "
          f"p99 {pct(under_read, 0.99) * 1e3:.2f} ms, ratio p99 read/without {pct(under_read, 0.99) / pct(after, 0.99):.2f}")


if __name__ == "__main__":
    main()
