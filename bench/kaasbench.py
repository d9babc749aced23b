"""Shared helpers for bench/broker_bench.py and bench/restart_bench.py.

Starting and stopping a `kaas broker` child, scraping its /metrics, timing a
librdkafka (confluent-kafka) producer and consumer, and the two reference
measurements (raw append+fdatasync on the data dir's filesystem, loopback
TCP). Units: MB = 10^6 bytes, MiB = 2^20 bytes.
"""

import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_KAAS = os.path.join(REPO, "target", "release", "kaas")
DEFAULT_DATA_ROOT = os.path.join(REPO, "target", "bench-data")

MB = 1e6
MIB = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")

LISTENING = re.compile(r"kaas broker listening on (\S+)")
METRICS_ADDR = re.compile(r"metrics listening.*addr=(\S+)")
RECOVERED = re.compile(r"log recovered.*took_ms=(\d+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def fs_of(path):
    """'device on mountpoint (fstype)' for the filesystem holding path."""
    path = os.path.abspath(path)
    try:
        out = subprocess.run(["df", "-P", "-T", path], capture_output=True, text=True).stdout
        line = out.strip().splitlines()[-1].split()
        return f"{line[0]} {line[1]} mounted on {line[6]}"
    except Exception:  # noqa: BLE001 - informational only
        return "unknown"


def fresh_dir(root, prefix):
    os.makedirs(root, exist_ok=True)
    d = os.path.join(root, f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    n = 0
    while os.path.exists(d + (f"-{n}" if n else "")):
        n += 1
    d = d + (f"-{n}" if n else "")
    os.makedirs(d)
    return d


class Kaas:
    """A `kaas broker` child process.

    start() measures the time from just before spawning the process to the
    moment its stdout line `kaas broker listening on ADDR` is read (so it
    includes policy loading and log recovery); the broker logs at info level
    (RUST_LOG=info) to stderr, which is kept in memory and in `stderr.log`
    next to (not inside) the data dir.
    """

    def __init__(self, binary, data_dir, fsync="always", extra=(), metrics=True, log_path=None):
        self.binary = binary
        self.data_dir = data_dir
        self.fsync = fsync
        self.extra = list(extra)
        self.metrics = metrics
        self.log_path = log_path or (data_dir.rstrip("/") + ".stderr.log")
        self.proc = None
        self.addr = None
        self.metrics_addr = None
        self.startup_s = None
        self.recovered_ms = None
        self.stderr_lines = []
        self._threads = []

    def command(self):
        cmd = [self.binary, "broker", "--listen", "127.0.0.1:0", "--data-dir", self.data_dir,
               "--fsync", self.fsync]
        if self.metrics:
            cmd += ["--metrics-listen", "127.0.0.1:0"]
        return cmd + self.extra

    def start(self, timeout=120):
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env["NO_COLOR"] = "1"
        cmd = self.command()
        logf = open(self.log_path, "a", buffering=1)
        logf.write(f"==== {time.strftime('%H:%M:%S')} {' '.join(cmd)}\n")
        self.stderr_lines = []
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1, env=env)
        deadline = t0 + timeout
        addr = None
        while addr is None:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                time.sleep(0.2)
                raise RuntimeError(f"kaas exited ({self.proc.returncode}) before listening; "
                                   f"see {self.log_path}")
            m = LISTENING.search(line)
            if m:
                addr = m.group(1)
            elif time.monotonic() > deadline:
                raise RuntimeError("kaas did not start in time")
        self.startup_s = time.monotonic() - t0
        self.addr = addr

        def drain(stream, sink, keep):
            for line in stream:
                line = ANSI.sub("", line)
                if keep is not None:
                    keep.append(line)
                sink.write(line)

        self._threads = [
            threading.Thread(target=drain, args=(self.proc.stdout, logf, None), daemon=True),
            threading.Thread(target=drain, args=(self.proc.stderr, logf, self.stderr_lines),
                             daemon=True),
        ]
        for t in self._threads:
            t.start()
        self._logf = logf
        # The info lines are written before the listening line; give the
        # stderr reader a moment to see them.
        self.recovered_ms = None
        end = time.monotonic() + 5
        while time.monotonic() < end:
            text = "".join(self.stderr_lines)
            r = RECOVERED.search(text)
            m = METRICS_ADDR.search(text)
            if r:
                self.recovered_ms = int(r.group(1))
            if m:
                self.metrics_addr = m.group(1)
            if r and (m or not self.metrics):
                break
            time.sleep(0.01)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def cpu_seconds(self):
        """user+system CPU seconds the broker has used so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def scrape(self):
        """{name or name{labels}: float} from /metrics."""
        if not self.metrics_addr:
            return {}
        with urllib.request.urlopen(f"http://{self.metrics_addr}/metrics", timeout=10) as r:
            body = r.read().decode()
        out = {}
        for line in body.splitlines():
            if not line or line.startswith("#"):
                continue
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
        return out

    def stop(self, sig=signal.SIGTERM, timeout=120):
        """Sends sig and waits for the exit; returns seconds to exit."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"kaas {self.proc.pid} did not exit in {timeout} s; killing it")
            self.proc.kill()
            self.proc.wait()
        took = time.monotonic() - t0
        for t in self._threads:
            t.join(5)
        self._logf.close()
        return took


def delta(after, before, key):
    return after.get(key, 0.0) - before.get(key, 0.0)


def create_topic(bootstrap, name, partitions, config=None, timeout=60):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                       config=config or {})], operation_timeout=timeout)
    for _, f in fs.items():
        f.result(timeout)
    # Wait until metadata shows every partition with a leader.
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} not ready")


def producer_config(bootstrap, **over):
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": MIB,
        "compression.type": "none",
        "message.max.bytes": 4 * MIB,
        "queue.buffering.max.kbytes": 1024 * 1024,
        "queue.buffering.max.messages": 2_000_000,
        "delivery.report.only.error": True,
    }
    conf.update(over)
    return conf


def produce(conf, topic, partitions, value, n, deadline_s=600):
    """Produces n copies of `value` round-robin over the partitions; returns
    (seconds from first produce() to flush() return, producer process CPU
    seconds (Python thread + librdkafka threads), CPU seconds of the Python
    thread calling produce(), delivery errors) as a dict."""
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    inflight = []  # librdkafka's requests awaiting a response (waitresp_cnt), every 100 ms

    def on_stats(js):
        try:
            st = json.loads(js)
            inflight.append(sum(b.get("waitresp_cnt", 0) for b in st["brokers"].values()
                                if b.get("nodeid", -1) >= 0))
        except (ValueError, KeyError):
            pass

    conf = dict(conf)
    conf["on_delivery"] = on_delivery
    conf["error_cb"] = lambda e: log(f"producer error: {e}")
    conf.setdefault("statistics.interval.ms", 100)
    conf["stats_cb"] = on_stats
    p = Producer(conf)
    # Connect and fetch metadata before the clock starts.
    p.list_topics(topic, timeout=30)
    produce_ = p.produce
    poll = p.poll
    cpu0 = time.process_time()
    th0 = time.thread_time()
    t0 = time.perf_counter()
    for i in range(n):
        part = i % partitions
        while True:
            try:
                produce_(topic, value, partition=part)
                break
            except BufferError:
                poll(0.002)
        if not i & 1023:
            poll(0)
    th1 = time.thread_time()
    t_loop = time.perf_counter()
    left = p.flush(deadline_s)
    t1 = time.perf_counter()
    cpu1 = time.process_time()
    if left:
        raise RuntimeError(f"{left} records not delivered in {deadline_s} s")
    samples = inflight[1:] or inflight
    return {"seconds": t1 - t0, "loop_seconds": t_loop - t0, "process_cpu": cpu1 - cpu0,
            "thread_cpu": th1 - th0, "errors": errors,
            "inflight_max": max(samples) if samples else None,
            "inflight_mean": statistics.mean(samples) if samples else None}


def consume_all(bootstrap, topic, partitions, n, deadline_s=600, **over):
    """Reads every record of the topic from the beginning with assign();
    returns (seconds from assign() to the n-th record, consumer CPU seconds,
    records read, bytes of values read)."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "kaas-bench-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": 64 * MIB,
        "max.partition.fetch.bytes": 16 * MIB,
        "receive.message.max.bytes": 64 * MIB + 65536,
        "queued.max.messages.kbytes": 512 * 1024,
        "queued.min.messages": 1_000_000,
        "fetch.wait.max.ms": 100,
        "enable.partition.eof": False,
        "error_cb": lambda e: log(f"consumer error: {e}"),
    }
    conf.update(over)
    c = Consumer(conf)
    c.list_topics(topic, timeout=30)
    got = 0
    nbytes = 0
    batch = 10_000
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    end = t0 + deadline_s
    while got < n:
        # No more than are left: consume() waits out its timeout for a
        # batch it cannot fill, which would add 1 s to the measured time.
        msgs = c.consume(num_messages=min(batch, n - got), timeout=1.0)
        if not msgs:
            if time.perf_counter() > end:
                raise RuntimeError(f"consumed {got} of {n} records in {deadline_s} s")
            continue
        bad = [m.error() for m in msgs if m.error() is not None]
        if bad:
            raise KafkaException(bad[0])
        got += len(msgs)
        nbytes += len(msgs) * len(msgs[-1].value())
    t1 = time.perf_counter()
    cpu1 = time.process_time()
    c.close()
    return t1 - t0, cpu1 - cpu0, got, nbytes


def raw_append_fdatasync(directory, seconds=4.0, chunk=MIB):
    """Appends `chunk`-byte writes to a new file in `directory`, with
    os.fdatasync after each, for `seconds`. Returns (MB/s, fdatasync p50 s,
    p99 s, chunks)."""
    path = os.path.join(directory, f".raw-append-{os.getpid()}.bin")
    buf = os.urandom(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    lat = []
    total = 0
    try:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            view = memoryview(buf)
            while view:
                view = view[os.write(fd, view):]
            s = time.perf_counter()
            os.fdatasync(fd)
            lat.append(time.perf_counter() - s)
            total += chunk
        el = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    return total / el / MB, statistics.median(lat), lat[min(len(lat) - 1, int(len(lat) * 0.99))], len(lat)


def loopback_tcp(seconds=3.0, chunk=MIB):
    """Streams `chunk`-byte buffers over one 127.0.0.1 TCP connection (sender
    and receiver threads) for `seconds`; returns receive MB/s."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    stop = threading.Event()

    def sender():
        s = socket.create_connection(srv.getsockname())
        buf = bytes(chunk)
        try:
            while not stop.is_set():
                s.sendall(buf)
        except OSError:
            pass
        finally:
            s.close()

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    conn, _ = srv.accept()
    buf = bytearray(chunk)
    view = memoryview(buf)
    total = 0
    t0 = time.perf_counter()
    while True:
        n = conn.recv_into(view)
        if not n:
            break
        total += n
        if time.perf_counter() - t0 >= seconds:
            break
    el = time.perf_counter() - t0
    stop.set()
    conn.close()
    srv.close()
    t.join(5)
    return total / el / MB


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def evict_from_page_cache(path):
    """fdatasync and POSIX_FADV_DONTNEED every file under path, so the next
    reader finds them on disk (only these files; nothing system-wide)."""
    n = 0
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                n += 1
            except OSError:
                pass
            finally:
                os.close(fd)
    return n


def remove(path):
    shutil.rmtree(path, ignore_errors=True)


def remove_file(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def psi(resource="cpu"):
    """The `some` total (microseconds) from /proc/pressure/<resource>, or None."""
    try:
        with open(f"/proc/pressure/{resource}") as f:
            for line in f:
                if line.startswith("some"):
                    return int(line.rsplit("total=", 1)[1])
    except OSError:
        return None
    return None


def psi_pct(before, after, seconds):
    """Share of `seconds` during which some task waited (PSI `some`)."""
    if before is None or after is None or seconds <= 0:
        return float("nan")
    return 100 * (after - before) / 1e6 / seconds


def record_batch(records, value):
    """A RecordBatch v2 (no producer id, no compression) of `records` copies
    of `value`, built with kafka-python's encoder."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    ts = int(time.time() * 1000)
    for i in range(records):
        b.append(i, ts, None, value, [])
    return bytes(b.build())


def wire_produce(bootstrap, topic, partition, batch, n_requests, depth, acks=-1, timeout_ms=30000):
    """Sends n_requests ProduceRequest v3 frames, each carrying the same
    pre-built `batch` for one partition, keeping up to `depth` requests in
    flight on one connection, and reads every response (client CPU per
    request is a few microseconds, so this measures the broker). Returns
    (seconds, error codes seen)."""
    import struct
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client = b"kaas-bench-wire"
    t = topic.encode()
    body = (struct.pack(">hhi", -1, acks, timeout_ms)        # transactional_id null, acks, timeout
            + struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
            + struct.pack(">i", 1) + struct.pack(">i", partition)
            + struct.pack(">i", len(batch)))
    header_len = 2 + 2 + 4 + 2 + len(client)

    def frame(corr):
        size = header_len + len(body) + len(batch)
        return (struct.pack(">ihhi", size, 0, 3, corr) + struct.pack(">h", len(client)) + client + body)

    rbuf = bytearray()

    def read_response():
        nonlocal rbuf
        while len(rbuf) < 4:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed")
            rbuf += chunk
        (size,) = struct.unpack_from(">i", rbuf, 0)
        while len(rbuf) < 4 + size:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed")
            rbuf += chunk
        resp = bytes(rbuf[4:4 + size])
        del rbuf[:4 + size]
        # v3: correlation, [topic: name, [partition: index, error, base_offset, append_time]], throttle
        pos = 4 + 4
        (nl,) = struct.unpack_from(">h", resp, pos)
        pos += 2 + nl + 4 + 4
        (err,) = struct.unpack_from(">h", resp, pos)
        return err

    errors = {}
    sent = done = 0
    t0 = time.perf_counter()
    while done < n_requests:
        while sent < n_requests and sent - done < depth:
            s.sendmsg([frame(sent), batch])
            sent += 1
        err = read_response()
        if err:
            errors[err] = errors.get(err, 0) + 1
        done += 1
    took = time.perf_counter() - t0
    s.close()
    return took, errors
