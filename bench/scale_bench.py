#!/usr/bin/env python3
"""Scale of one kaas broker: many partitions, many idle connections.

    .venv/bin/python bench/scale_bench.py [--sizes 1000,10000,50000] [options]
    .venv/bin/python bench/scale_bench.py --connections 10000 [options]

Partitions mode (the default), for each N in --sizes, on a fresh data dir
under --data-root (default /tmp, deleted afterwards):

1. Starts `kaas broker --listen 127.0.0.1:0 --data-dir DIR --fsync always
   --max-partitions N+100 --max-partitions-per-request P` (P = 10 000, the
   default), plus `--max-open-segment-files F` when `kaas broker --help`
   lists that flag (the bounded open-file cache; absent before it), and
   creates N/100 topics of 100 partitions by CreateTopics (confluent-kafka
   AdminClient) in requests of at most P partitions. A refusal (the
   broker's partition limit or its open-file budget: today one descriptor
   per partition, against this machine's hard limit of 20 000) is reported
   with the broker's message and the size is measured no further.
2. RSS (VmRSS of /proc/PID/status) and open descriptors (entries of
   /proc/PID/fd) once every partition has a leader in Metadata; the latency
   of a Metadata for all topics, of a Metadata for one topic and of a small
   acks=1 Produce to one partition (raw socket, sequential: per-request
   costs that should not grow with N).
3. Produce then fetch throughput over the 100 partitions of the first topic
   (confluent-kafka, acks=all, idempotent, linger.ms 5; --messages of
   --value-bytes), as broker_bench.py measures it.
4. Clean shutdown: SIGTERM -> exit. Start-up on the existing data dir:
   spawn -> the `kaas broker listening on ADDR` line -> the first Metadata
   (all topics) that lists every partition with a leader -> a ListOffsets
   (latest) over every partition answered without error (the broker serves
   every partition). Repeated --restarts times.
5. Recovery after SIGKILL: kill -9 the running broker, start it again and
   time the same three points. Repeated --restarts times.

Then the ratios of the largest size to the smallest for every figure,
against the linear ratio (N_max / N_min), and whether the descriptors
stayed under the cap (--max-open-segment-files plus the connection
reserve when the flag exists, else the RLIMIT_NOFILE of the broker).

Connections mode (--connections C): starts the broker with
--max-connections C+100 (--fsync never: the figure is the per-request cost,
not the disk), creates one 1-partition topic and, for --rounds rounds,
measures an active client's sequential acks=1 Produce latency (--requests
requests of one small record batch, raw socket, one in flight) alone, then
with C idle connections open, --alternations times alternately (a fresh
broker per round) (each has sent an ApiVersions v0 request and
read the answer; held by a child process whose RLIMIT_NOFILE is raised to
its hard limit), plus the broker's RSS and descriptors without and with
them. Prints the medians and the p99 ratio with / alone (target <= 1.5),
next to a reference: the same number of sequential 160-byte round trips
to a loopback echo server in another Python process (the machine's own
tail: on a loaded 2-core VM the p99 is scheduling, not the broker).

Units: MB = 10^6 bytes; KiB = 1024 bytes.
"""

import argparse
import json
import os
import resource
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kaasbench as kb  # noqa: E402

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CLIENT_ID = b"kaas-scale-bench"


# ---------------------------------------------------------------- raw wire


class Wire:
    """One blocking Kafka connection speaking hand-encoded requests
    (request header v1: api key, version, correlation id, client id)."""

    def __init__(self, addr, timeout=120):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0

    def frame(self, key, version, body):
        self.corr += 1
        head = struct.pack(">hhih", key, version, self.corr, len(CLIENT_ID)) + CLIENT_ID
        return struct.pack(">i", len(head) + len(body)) + head + body

    def send(self, key, version, body):
        self.s.sendall(self.frame(key, version, body))

    def recv(self):
        size = struct.unpack(">i", self._exact(4))[0]
        resp = self._exact(size)
        if struct.unpack_from(">i", resp, 0)[0] != self.corr:
            raise RuntimeError("correlation id mismatch")
        return resp[4:]

    def request(self, key, version, body):
        self.send(key, version, body)
        return self.recv()

    def _exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.s.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise RuntimeError("connection closed")
            buf += chunk
        return bytes(buf)

    def close(self):
        self.s.close()


def string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Reader:
    def __init__(self, buf):
        self.b = buf
        self.p = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)
        self.p += struct.calcsize(fmt)
        return v if len(v) > 1 else v[0]

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        s = self.b[self.p:self.p + n].decode()
        self.p += n
        return s


def metadata(w, topics=None):
    """Metadata v1; topics None = all. Returns {topic: (error, [(partition,
    error, leader)])}."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(string(t) for t in topics)
    r = Reader(w.request(3, 1, body))
    for _ in range(r.take(">i")):  # brokers
        r.take(">i")
        r.string()
        r.take(">i")
        r.string()
    r.take(">i")  # controller
    out = {}
    for _ in range(r.take(">i")):
        err = r.take(">h")
        name = r.string()
        r.take(">b")
        parts = []
        for _ in range(r.take(">i")):
            perr, pid, leader = r.take(">hii")
            for _ in range(2):  # replicas, isr
                n = r.take(">i")
                r.p += 4 * n
            parts.append((pid, perr, leader))
        out[name] = (err, parts)
    return out


def all_led(md, expect):
    """Whether Metadata `md` lists every topic of `expect` ({topic: n})
    with n partitions, each with a leader and no error."""
    for t, n in expect.items():
        e = md.get(t)
        if e is None or e[0] != 0 or len(e[1]) != n:
            return False
        if any(err != 0 or leader < 0 for _, err, leader in e[1]):
            return False
    return True


def list_offsets(w, expect, chunk=10_000):
    """ListOffsets v1 (latest) over every partition of `expect` ({topic:
    n}), in requests of up to `chunk` partitions; returns (answered without
    error, answered with an error)."""
    ok = bad = 0
    pairs = [(t, p) for t, n in expect.items() for p in range(n)]
    for i in range(0, len(pairs), chunk):
        by_topic = {}
        for t, p in pairs[i:i + chunk]:
            by_topic.setdefault(t, []).append(p)
        body = struct.pack(">ii", -1, len(by_topic))
        for t, ps in by_topic.items():
            body += string(t) + struct.pack(">i", len(ps))
            body += b"".join(struct.pack(">iq", p, -1) for p in ps)
        r = Reader(w.request(2, 1, body))
        for _ in range(r.take(">i")):
            r.string()
            for _ in range(r.take(">i")):
                _, err, _, _ = r.take(">ihqq")
                if err == 0:
                    ok += 1
                else:
                    bad += 1
    return ok, bad


def produce_frame_body(topic, partition, batch, acks=1, timeout_ms=30000):
    """Produce v3 body carrying `batch` for one partition."""
    return (struct.pack(">hhi", -1, acks, timeout_ms) + struct.pack(">i", 1) + string(topic)
            + struct.pack(">i", 1) + struct.pack(">i", partition) + struct.pack(">i", len(batch))
            + batch)


def produce_latencies(addr, topic, n, value_bytes=100, records=1):
    """n sequential Produce v3 (acks=1) of one small batch to partition 0,
    one in flight; returns the latencies in seconds."""
    batch = kb.record_batch(records, os.urandom(value_bytes))
    body = produce_frame_body(topic, 0, batch)
    w = Wire(addr)
    lat = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            resp = w.request(0, 3, body)
            lat.append(time.perf_counter() - t0)
            r = Reader(resp)
            r.take(">i")
            r.string()
            r.take(">ii")
            err = r.take(">h")
            if err:
                raise RuntimeError(f"produce error {err}")
    finally:
        w.close()
    return lat


def pct(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q))]


# ---------------------------------------------------------------- broker


def proc_status(pid):
    """(VmRSS KiB, open descriptors) of a process."""
    rss = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def fd_limit_of(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return None


class Broker:
    """A `kaas broker` child; start() returns the seconds from spawn to its
    `listening` line and leaves the spawn time in t_spawn."""

    def __init__(self, binary, data_dir, extra):
        self.binary = binary
        self.data_dir = data_dir
        self.extra = list(extra)
        self.log_path = data_dir.rstrip("/") + ".stderr.log"
        self.proc = None
        self.addr = None
        self.t_spawn = None
        self.lines = []

    def start(self, timeout=600):
        env = dict(os.environ, NO_COLOR="1")
        env.setdefault("RUST_LOG", "info")
        cmd = [self.binary, "broker", "--listen", "127.0.0.1:0", "--data-dir", self.data_dir] + self.extra
        self.cmd = cmd
        self.logf = open(self.log_path, "a", buffering=1)
        self.logf.write(f"==== {time.strftime('%H:%M:%S')} {' '.join(cmd)}\n")
        self.t_spawn = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.logf, text=True, bufsize=1,
                                     env=env)
        end = self.t_spawn + timeout
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                raise RuntimeError(f"kaas exited ({self.proc.returncode}) before listening; see "
                                   f"{self.log_path}: {tail(self.log_path)}")
            m = kb.LISTENING.search(line)
            if m:
                self.addr = m.group(1)
                break
            if time.monotonic() > end:
                raise RuntimeError("kaas did not start in time")
        listening = time.monotonic() - self.t_spawn
        threading.Thread(target=lambda: [self.logf.write(x) for x in self.proc.stdout], daemon=True).start()
        return listening

    @property
    def pid(self):
        return self.proc.pid

    def stop(self, sig=signal.SIGTERM, timeout=600):
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kb.log(f"kaas {self.proc.pid} did not exit in {timeout} s; killing it")
            self.proc.kill()
            self.proc.wait()
        took = time.monotonic() - t0
        self.logf.close()
        return took


def tail(path, n=3):
    try:
        with open(path) as f:
            return " | ".join(kb.ANSI.sub("", x).strip() for x in f.readlines()[-n:])
    except OSError:
        return ""


def help_text(binary):
    return subprocess.run([binary, "broker", "--help"], capture_output=True, text=True).stdout


def create_topics(addr, names, partitions, per_request, timeout=600):
    """CreateTopics of `names` x `partitions`, at most `per_request`
    partitions per request. Returns (topics created, seconds, the first
    refusal's message or None)."""
    admin = AdminClient({"bootstrap.servers": addr, "socket.timeout.ms": 300000})
    per = max(1, per_request // partitions)
    created = 0
    t0 = time.monotonic()
    for i in range(0, len(names), per):
        batch = names[i:i + per]
        fs = admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1) for n in batch],
                                 operation_timeout=timeout, request_timeout=timeout)
        refusal = None
        for name, f in fs.items():
            try:
                f.result(timeout)
                created += 1
            except Exception as e:  # noqa: BLE001 - a refusal is a result here
                refusal = refusal or f"{name}: {e}"
        if refusal:
            return created, time.monotonic() - t0, refusal
    return created, time.monotonic() - t0, None


def wait_serving(addr, expect, t0, deadline_s=600):
    """From t0 (the spawn), seconds until a Metadata for all topics lists
    every partition led, then until ListOffsets answers every partition."""
    end = time.monotonic() + deadline_s
    w = None
    while w is None:
        try:
            w = Wire(addr)
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.005)
    try:
        while True:
            md = metadata(w)
            if all_led(md, expect):
                t_md = time.monotonic() - t0
                break
            if time.monotonic() > end:
                raise RuntimeError("metadata incomplete")
            time.sleep(0.01)
        while True:
            ok, bad = list_offsets(w, expect)
            if bad == 0:
                return t_md, time.monotonic() - t0
            if time.monotonic() > end:
                raise RuntimeError(f"ListOffsets: {bad} partitions with errors")
            time.sleep(0.01)
    finally:
        w.close()


def timed(f, n):
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        lat.append(time.perf_counter() - t0)
    return lat


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def one_size(args, n, fd_flag):
    data = kb.fresh_dir(args.data_root, f"scale-{n}")
    res = {"partitions": n}
    topics = [f"s{i:04d}" for i in range(max(1, n // 100))]
    per_topic = n // len(topics)
    extra = ["--fsync", args.fsync, "--max-partitions", str(n + 100),
             "--max-partitions-per-request", str(args.per_request)]
    if fd_flag:
        extra += ["--max-open-segment-files", str(args.max_open_segment_files)]
    extra += args.broker_arg
    b = Broker(args.kaas, data, extra)
    ok = False
    try:
        res["first_start_s"] = b.start()
        res["fd_limit"] = fd_limit_of(b.pid)
        res["rss_kib_empty"], res["fds_empty"] = proc_status(b.pid)
        created, took, refusal = create_topics(b.addr, topics, per_topic, args.per_request)
        res["create_s"] = took
        res["topics_created"] = created
        res["rss_kib_created"], res["fds_created"] = proc_status(b.pid)
        kb.log(f"N={n}: created {created} of {len(topics)} topics x {per_topic} in {took:.1f} s; "
               f"RSS {res['rss_kib_created'] / 1024:.0f} MiB, {res['fds_created']} fds")
        if refusal:
            res["refused"] = refusal
            kb.log(f"N={n}: creation refused after {created * per_topic} partitions: {refusal}")
            ok = True
            return res
        expect = {t: per_topic for t in topics}
        wait_serving(b.addr, expect, time.monotonic())
        w = Wire(b.addr)
        try:
            # Raw round trips: parsing 50k partitions in Python would dwarf the broker's time.
            everything = struct.pack(">i", -1)
            one = struct.pack(">i", 1) + string(topics[-1])
            res["metadata_all_ms"] = 1e3 * med(timed(lambda: w.request(3, 1, everything), args.probe_requests))
            res["metadata_one_ms"] = 1e3 * med(timed(lambda: w.request(3, 1, one), args.probe_requests * 10))
        finally:
            w.close()
        lat = produce_latencies(b.addr, topics[-1], args.probe_requests * 50)
        res["produce_p50_ms"], res["produce_p99_ms"] = 1e3 * pct(lat, 0.5), 1e3 * pct(lat, 0.99)
        res["rss_kib_idle"], res["fds_idle"] = proc_status(b.pid)

        # Throughput over the first topic's partitions.
        value = os.urandom(args.value_bytes)
        conf = kb.producer_config(b.addr, acks="all")
        p = kb.produce(conf, topics[0], per_topic, value, args.messages)
        if p["errors"]:
            raise RuntimeError(f"delivery errors: {p['errors'][:3]}")
        c = kb.consume_all(b.addr, topics[0], per_topic, args.messages)
        mb = args.messages * args.value_bytes / kb.MB
        res["produce_mb_s"], res["produce_msg_s"] = mb / p["seconds"], args.messages / p["seconds"]
        res["fetch_mb_s"], res["fetch_msg_s"] = mb / c[0], args.messages / c[0]
        res["rss_kib_loaded"], res["fds_loaded"] = proc_status(b.pid)
        kb.log(f"N={n}: produce {res['produce_mb_s']:.1f} MB/s, fetch {res['fetch_mb_s']:.1f} MB/s; "
               f"metadata(all) {res['metadata_all_ms']:.1f} ms; RSS {res['rss_kib_loaded'] / 1024:.0f} MiB, "
               f"{res['fds_loaded']} fds")

        stops, starts, crashes = [], [], []
        for i in range(args.restarts):
            stops.append(b.stop(signal.SIGTERM))
            listening = b.start()
            md, served = wait_serving(b.addr, expect, b.t_spawn)
            rss, fds = proc_status(b.pid)
            starts.append({"listening_s": listening, "metadata_s": md, "serving_s": served,
                           "rss_kib": rss, "fds": fds})
            kb.log(f"N={n}: SIGTERM exit {stops[-1]:.2f} s; start {listening:.2f} / {md:.2f} / {served:.2f} s")
        for i in range(args.restarts):
            b.stop(signal.SIGKILL)
            listening = b.start()
            md, served = wait_serving(b.addr, expect, b.t_spawn)
            rss, fds = proc_status(b.pid)
            crashes.append({"listening_s": listening, "metadata_s": md, "serving_s": served,
                            "rss_kib": rss, "fds": fds})
            kb.log(f"N={n}: after SIGKILL {listening:.2f} / {md:.2f} / {served:.2f} s")
        res["shutdown_s"] = med(stops)
        for k in ("listening_s", "metadata_s", "serving_s", "rss_kib", "fds"):
            res[f"start_{k}"] = med([s[k] for s in starts])
            res[f"recover_{k}"] = med([s[k] for s in crashes])
        res["runs"] = {"shutdown_s": stops, "start": starts, "recover": crashes}
        ok = True
        return res
    finally:
        b.stop()
        if not args.keep:
            kb.remove(data)
            if ok:
                kb.remove_file(b.log_path)
        if not ok:
            kb.log(f"broker log kept: {b.log_path}")


ROWS = [
    # key, label, format, scale
    ("rss_kib_created", "RSS after creation, MiB", "{:.0f}", 1 / 1024),
    ("rss_kib_loaded", "RSS after produce/fetch, MiB", "{:.0f}", 1 / 1024),
    ("fds_created", "open descriptors after creation", "{:.0f}", 1),
    ("fds_loaded", "open descriptors after produce/fetch", "{:.0f}", 1),
    ("create_s", "CreateTopics, all, s", "{:.2f}", 1),
    ("start_listening_s", "start-up: listening, s", "{:.2f}", 1),
    ("start_metadata_s", "start-up: Metadata complete, s", "{:.2f}", 1),
    ("start_serving_s", "start-up: ListOffsets all partitions, s", "{:.2f}", 1),
    ("start_rss_kib", "RSS after start-up, MiB", "{:.0f}", 1 / 1024),
    ("start_fds", "descriptors after start-up", "{:.0f}", 1),
    ("recover_listening_s", "after kill -9: listening, s", "{:.2f}", 1),
    ("recover_metadata_s", "after kill -9: Metadata complete, s", "{:.2f}", 1),
    ("recover_serving_s", "after kill -9: ListOffsets all partitions, s", "{:.2f}", 1),
    ("shutdown_s", "clean shutdown (SIGTERM -> exit), s", "{:.2f}", 1),
    ("metadata_all_ms", "Metadata (all topics) latency, ms", "{:.2f}", 1),
    ("metadata_one_ms", "Metadata (one topic) latency, ms", "{:.3f}", 1),
    ("produce_p50_ms", "Produce acks=1 1 partition p50, ms", "{:.3f}", 1),
    ("produce_p99_ms", "Produce acks=1 1 partition p99, ms", "{:.3f}", 1),
    ("produce_mb_s", "produce 100 partitions, MB/s", "{:.1f}", 1),
    ("produce_msg_s", "produce 100 partitions, msgs/s", "{:.0f}", 1),
    ("fetch_mb_s", "fetch 100 partitions, MB/s", "{:.1f}", 1),
    ("fetch_msg_s", "fetch 100 partitions, msgs/s", "{:.0f}", 1),
]


def partitions_mode(args):
    fd_flag = "--max-open-segment-files" in help_text(args.kaas)
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results = []
    for n in args.sizes:
        results.append(one_size(args, n, fd_flag))
    print(f"# scale_bench {started}; cores {os.cpu_count()}; load average at end "
          f"{os.getloadavg()[0]:.2f}; hard RLIMIT_NOFILE {resource.getrlimit(resource.RLIMIT_NOFILE)[1]}")
    print(f"# kaas {args.kaas} --fsync {args.fsync}; "
          + (f"--max-open-segment-files {args.max_open_segment_files}" if fd_flag
             else "no --max-open-segment-files flag (one open file per partition)")
          + f"; {args.messages} x {args.value_bytes} B over 100 partitions; medians of {args.restarts} restarts")
    head = f"{'figure':<46}" + "".join(f"{r['partitions']:>12}" for r in results)
    print(head)
    for key, label, fmt, scale in ROWS:
        cells = []
        for r in results:
            v = r.get(key)
            cells.append("-" if v is None else fmt.format(v * scale))
        print(f"{label:<46}" + "".join(f"{c:>12}" for c in cells))
    for r in results:
        if r.get("refused"):
            print(f"N={r['partitions']}: creation REFUSED after {r['topics_created']} topics "
                  f"({r['topics_created'] * (r['partitions'] // max(1, r['partitions'] // 100))} partitions): "
                  f"{r['refused']}")
    full = [r for r in results if not r.get("refused")]
    if len(full) >= 2:
        lo, hi = full[0], full[-1]
        lin = hi["partitions"] / lo["partitions"]
        print(f"ratios {hi['partitions']}/{lo['partitions']} (linear = {lin:.0f}):")
        for key, label, fmt, scale in ROWS:
            a, b = lo.get(key), hi.get(key)
            if a and b is not None:
                print(f"  {label:<46}{b / a:>10.2f}")
    for r in results:
        cap = (args.max_open_segment_files + args.connection_reserve) if fd_flag else r.get("fd_limit")
        peak = max(v for k, v in r.items() if k.startswith("fds") or k in ("start_fds", "recover_fds")
                   if isinstance(v, (int, float)))
        print(f"N={r['partitions']}: peak descriptors {peak} {'<=' if cap and peak <= cap else '>'} cap {cap} "
              f"({'--max-open-segment-files + connection reserve' if fd_flag else 'RLIMIT_NOFILE'})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started, "argv": sys.argv, "fd_flag": fd_flag, "results": results}, f, indent=2)


# ---------------------------------------------------------------- connections


def api_versions_v0():
    head = struct.pack(">hhih", 18, 0, 1, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(head)) + head


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def idle_child(addr, count):
    """Child process: opens `count` connections, each sends ApiVersions v0
    and reads the answer; prints `ready N SECONDS`, then on each `check`
    line from stdin prints how many are still open; exits at EOF."""
    raise_nofile()
    host, port = addr.rsplit(":", 1)
    req = api_versions_v0()
    socks = []
    t0 = time.monotonic()
    step = 40  # within the listen backlog (socket.listen.backlog.size, 50), so no SYN is dropped
    while len(socks) < count:
        batch = []
        for _ in range(min(step, count - len(socks))):
            s = socket.create_connection((host, int(port)), timeout=60)
            s.sendall(req)
            batch.append(s)
        for s in batch:
            size = struct.unpack(">i", recv_exact(s, 4))[0]
            recv_exact(s, size)
            s.setblocking(False)
        socks.extend(batch)
    print(f"ready {len(socks)} {time.monotonic() - t0:.2f}", flush=True)
    for line in sys.stdin:
        if line.strip() == "check":
            alive = 0
            for s in socks:
                try:
                    alive += s.recv(1, socket.MSG_PEEK) != b""
                except BlockingIOError:
                    alive += 1
                except OSError:
                    pass
            print(f"alive {alive}", flush=True)
    for s in socks:
        s.close()


def echo_child():
    """Child process: a loopback echo server (the reference round trip);
    prints its port, serves one connection until it closes."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    print(srv.getsockname()[1], flush=True)
    c, _ = srv.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)


def echo_latencies(n, size=160):
    """n sequential `size`-byte round trips to an echo server in another
    process: what this machine's loopback and scheduler alone cost."""
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--echo-child"], stdout=subprocess.PIPE,
                         text=True)
    try:
        port = int(p.stdout.readline())
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        msg = os.urandom(size)
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            s.sendall(msg)
            recv_exact(s, size)
            lat.append(time.perf_counter() - t0)
        s.close()
        return lat
    finally:
        p.wait(10)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            raise RuntimeError("closed")
        buf += c
    return buf


class Idle:
    def __init__(self, addr, count):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--idle-child", addr, str(count)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        line = self.p.stdout.readline().split()
        if not line or line[0] != "ready":
            self.p.kill()
            raise RuntimeError(f"idle connections child failed: {line}")
        self.opened, self.seconds = int(line[1]), float(line[2])

    def alive(self):
        self.p.stdin.write("check\n")
        return int(self.p.stdout.readline().split()[1])

    def close(self):
        self.p.stdin.close()
        self.p.wait(60)


def settle(pid, seconds=1.0):
    time.sleep(seconds)
    return proc_status(pid)


def connections_mode(args):
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    raise_nofile()
    extra = ["--fsync", args.conn_fsync, "--max-connections", str(args.connections + 100)] + args.broker_arg
    rounds = []
    for i in range(args.rounds):
        # A fresh broker per round: memory freed after closing connections
        # stays with the allocator, so "without" must come first.
        data = kb.fresh_dir(args.data_root, "scale-conns")
        b = Broker(args.kaas, data, extra)
        ok = False
        try:
            b.start()
            kb.create_topic(b.addr, "lat", 1)
            produce_latencies(b.addr, "lat", 500)  # warm-up
            r = {}
            r["rss_kib_alone"], r["fds_alone"] = settle(b.pid)
            # Alone and with alternate --alternations times (the idle
            # connections are opened and closed each time), so a burst of
            # load from elsewhere on the machine hits both.
            alone, withs, echo = [], [], []
            for k in range(args.alternations):
                echo += echo_latencies(args.requests)
                alone += produce_latencies(b.addr, "lat", args.requests)
                idle = Idle(b.addr, args.connections)
                try:
                    if k == 0:
                        r["open_s"] = idle.seconds
                        r["rss_kib_with"], r["fds_with"] = settle(b.pid)
                    withs += produce_latencies(b.addr, "lat", args.requests)
                    r["alive"] = idle.alive()
                finally:
                    idle.close()
                time.sleep(0.5)
            for name, lat in (("echo", echo), ("alone", alone), ("with", withs)):
                for q in (50, 90, 99):
                    r[f"{name}_p{q}_ms"] = 1e3 * pct(lat, q / 100)
            r["kib_per_conn"] = (r["rss_kib_with"] - r["rss_kib_alone"]) / args.connections
            r["p99_ratio"] = r["with_p99_ms"] / r["alone_p99_ms"]
            r["p90_ratio"] = r["with_p90_ms"] / r["alone_p90_ms"]
            rounds.append(r)
            kb.log(f"round {i + 1}: alone p50/p99 {r['alone_p50_ms']:.3f}/{r['alone_p99_ms']:.3f} ms, "
                   f"with {r['alive']} idle {r['with_p50_ms']:.3f}/{r['with_p99_ms']:.3f} ms; RSS "
                   f"{r['rss_kib_alone'] / 1024:.0f} -> {r['rss_kib_with'] / 1024:.0f} MiB "
                   f"({r['kib_per_conn']:.1f} KiB/conn), fds {r['fds_alone']} -> {r['fds_with']}; "
                   f"opened in {r['open_s']:.1f} s")
            ok = True
        finally:
            b.stop()
            if not args.keep:
                kb.remove(data)
                if ok:
                    kb.remove_file(b.log_path)
    print(f"# scale_bench --connections {args.connections} {started}; cores {os.cpu_count()}; load average "
          f"at end {os.getloadavg()[0]:.2f}; kaas {args.kaas} --fsync {args.conn_fsync}; "
          f"{args.alternations} x {args.requests} sequential Produce v3 acks=1 (1 record of 100 B) alone and with, "
          f"alternated; "
          f"medians of {len(rounds)} rounds")
    for key, label in [("rss_kib_alone", "broker RSS without idle connections, MiB"),
                       ("rss_kib_with", f"broker RSS with {args.connections} idle, MiB"),
                       ("kib_per_conn", "RSS per idle connection, KiB"),
                       ("fds_alone", "broker descriptors without"),
                       ("fds_with", "broker descriptors with"),
                       ("alive", "idle connections still open at the end"),
                       ("open_s", "seconds to open them (ApiVersions each)"),
                       ("echo_p50_ms", "reference: loopback echo p50, ms"),
                       ("echo_p90_ms", "reference: loopback echo p90, ms"),
                       ("echo_p99_ms", "reference: loopback echo p99, ms"),
                       ("alone_p50_ms", "produce p50 alone, ms"),
                       ("alone_p90_ms", "produce p90 alone, ms"),
                       ("alone_p99_ms", "produce p99 alone, ms"),
                       ("with_p50_ms", "produce p50 with idle connections, ms"),
                       ("with_p90_ms", "produce p90 with idle connections, ms"),
                       ("with_p99_ms", "produce p99 with idle connections, ms"),
                       ("p90_ratio", "p90 with / alone"),
                       ("p99_ratio", "p99 with / alone")]:
        vals = [r[key] for r in rounds]
        scale = 1 / 1024 if key.startswith("rss") else 1
        print(f"{label:<48}{med(vals) * scale:>12.3f}   runs: " + ", ".join(f"{v * scale:.3f}" for v in vals))
    ratio = med([r["p99_ratio"] for r in rounds])
    print(f"target: produce p99 with {args.connections} idle connections <= 1.5x alone: "
          f"{'met' if ratio <= 1.5 else 'NOT met'} ({ratio:.2f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started, "argv": sys.argv, "rounds": rounds}, f, indent=2)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kaas", default=kb.DEFAULT_KAAS, help="kaas binary (default: %(default)s)")
    ap.add_argument("--data-root", default="/tmp", help="fresh data dirs are made under this (default: %(default)s)")
    ap.add_argument("--sizes", default="1000,10000,50000", help="partition counts (default: %(default)s)")
    ap.add_argument("--fsync", default="always", choices=["always", "interval", "never"])
    ap.add_argument("--per-request", type=int, default=10_000, help="--max-partitions-per-request")
    ap.add_argument("--max-open-segment-files", type=int, default=4096,
                    help="passed when the broker has the flag (default: %(default)s)")
    ap.add_argument("--connection-reserve", type=int, default=1024 + 64,
                    help="descriptors allowed beyond the open-file cache (connections + the broker's own)")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--value-bytes", type=int, default=1000)
    ap.add_argument("--restarts", type=int, default=3, help="clean and crash restarts per size")
    ap.add_argument("--probe-requests", type=int, default=20,
                    help="Metadata(all) probes; x10 Metadata(one), x50 Produce")
    ap.add_argument("--connections", type=int, help="connections mode: this many idle connections")
    ap.add_argument("--conn-fsync", default="never", choices=["always", "interval", "never"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=3000, help="sequential produces per measurement")
    ap.add_argument("--alternations", type=int, default=3,
                    help="alone/with measurements per round, alternated (default: %(default)s)")
    ap.add_argument("--broker-arg", action="append", default=[], help="extra broker argument (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--idle-child", nargs=2, metavar=("ADDR", "COUNT"), help=argparse.SUPPRESS)
    ap.add_argument("--echo-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.sizes = [int(x) for x in args.sizes.split(",")]
    return args


def main():
    args = parse_args()
    if args.echo_child:
        echo_child()
    elif args.idle_child:
        idle_child(args.idle_child[0], int(args.idle_child[1]))
    elif args.connections:
        connections_mode(args)
    else:
        partitions_mode(args)


if __name__ == "__main__":
    main()
