#!/usr/bin/env python3
"""kaas and Apache Kafka side by side, on this machine, in one run.

    .venv/bin/python bench/vs_kafka.py --quick      # a subset, under 5 minutes
    .venv/bin/python bench/vs_kafka.py              # everything (~15 min + 10,000-partition recovery)
    .venv/bin/python bench/vs_kafka.py --recovery-only   # start-up and kill -9 recovery alone

Needs target/release/kaas (cargo build --locked --release -p kaas --features
fault-injection), Apache Kafka 4.4.0 (./scripts/setup-kafka broker4; started
through ./scripts/kafka-ref) and the Python clients (./scripts/setup-clients:
confluent-kafka, i.e. librdkafka).

Brokers (each on a fresh dir under --data-root, removed at the end; every
process this starts is stopped at the end, also on Ctrl-C, SIGTERM or an
error):
  kaas always    `kaas broker --fsync always` (kaas's default: a Produce is
                 acknowledged after fdatasync)
  kaas never     `kaas broker --fsync never` (no fdatasync on the produce path:
                 Kafka's default durability)
  Kafka default  Apache Kafka 4.4.0, KRaft, one combined broker+controller
                 node, kafka-ref's defaults (-Xmx1G -Xms1G, G1): acknowledges
                 before any fsync (flush.messages is Long.MAX_VALUE)
  Kafka flush1   the same with log.flush.interval.messages=1: fsync of every
                 append before the acknowledgement (kaas always's durability)
Figures without a suffix compare each broker's default (kaas always against
Kafka default: durable against not durable). `@both_fsync` compares kaas
always with Kafka flush1, `@no_fsync` kaas never with Kafka default.

Every figure runs its load alternately (kaas, Kafka, kaas, Kafka, ...),
--reps times on each, and reports the medians; ratio = kaas / Kafka. A name
ends in `_higher` when higher is better, `_lower` when lower is better.
Loads (a fresh topic per run, 1 replica):
  produce_<size>_p<N>_<tool>_MBps   record values produced per second
      (MB = 10^6 bytes), acks=all, idempotent, no compression, linger.ms 5
      (20 for 64 KiB), batch.size 1 MiB, round-robin (rdkafka: confluent-kafka,
      one record per partition in turn) or Kafka's sticky partitioner
      (kafkaperf: org.apache.kafka.tools.ProducerPerformance --throughput -1).
  fetch_<size>_p<N>_rdkafka_MBps    reading back a topic the produce figure
      filled (assign from the beginning, no group), librdkafka consumer.
  e2e_<pct>_ms (rdkafka)  1 KiB records at a fixed --e2e-rate (records/s) to
      one partition (acks=all, idempotent, linger.ms 0) from this process; a
      consumer in a second process takes now - send time (CLOCK_MONOTONIC,
      carried in the record) of each record after a 1 s warm-up.
  e2e_kafkatool_<pct>_ms  org.apache.kafka.tools.EndToEndLatency: one 1 KiB
      record at a time, acks=all, send -> consumed (whole milliseconds: the
      tool's own rounding).
  txn_<P>prod_per_s  P threads, each with its own transactional producer
      (confluent-kafka) and partition: begin, one 100 B record, commit, back
      to back, for --txn-seconds; committed transactions per second.
  cpu_produce/fetch_..._s_per_GB  broker CPU (utime+stime of its processes,
      /proc/PID/stat) over the rdkafka produce/fetch load, per GB of values.
  rss_peak_MiB  VmHWM of the broker process after all loads.
  startup_empty_s  a broker on an empty (for Kafka: formatted) data dir, from
      spawn to the first Metadata answered with a broker and a controller.
  recovery_p<N>_* after kill -9 of a broker holding N partitions (N/100
      topics of 100, a few 1 KiB records each): from spawn to a Metadata
      listing every partition with a leader (_metadata_s), then to an acks=all
      Produce answered without error (_produce_s).
The kaas CPU and RSS are its one process; Kafka's the JVM (kafka-ref pids).
Java tools run with -Xmx512M and kafka-run-class's JVM flags.
"""

import argparse
import importlib.machinery
import importlib.util
import json
import os
import re
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kaasbench as kb  # noqa: E402
import scale_bench as sb  # noqa: E402  (raw-wire Metadata/ListOffsets/Produce)

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

KAFKA_REF = os.path.join(kb.REPO, "scripts", "kafka-ref")


def load_kafka_ref():
    loader = importlib.machinery.SourceFileLoader("kafka_ref", KAFKA_REF)
    spec = importlib.util.spec_from_loader("kafka_ref", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


kref = load_kafka_ref()
KAFKA_REF_LAUNCH = """import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("kafka_ref", sys.argv[1])
mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("kafka_ref", loader))
loader.exec_module(mod)
mod.READY_TIMEOUT_S = 900
sys.argv = sys.argv[1:]
mod.main()
"""

CHILDREN = []  # Popen objects of load generators, killed at exit


def spawn(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    CHILDREN.append(p)
    return p


def reap(p, timeout=5):
    if p.poll() is None:
        p.kill()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    if p in CHILDREN:
        CHILDREN.remove(p)


# ------------------------------------------------------------------ /proc


def proc_cpu(pids):
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / kb.CLK_TCK
        except OSError:
            pass
    return total


def proc_hwm_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def metadata_ready(addr):
    """Whether Metadata answers with a broker and a controller (as kafka-ref
    decides that Kafka is up)."""
    port = int(addr.rsplit(":", 1)[1])
    m = kref.metadata_brokers(port, timeout=2.0)
    return bool(m and m[0] and m[1] >= 0)


def wait_metadata(addr, t0, deadline_s=300):
    end = time.monotonic() + deadline_s
    while not metadata_ready(addr):
        if time.monotonic() > end:
            raise RuntimeError(f"{addr}: no Metadata answer in {deadline_s} s")
        time.sleep(0.005)
    return time.monotonic() - t0


# ------------------------------------------------------------------ brokers


class KaasBroker:
    kind = "kaas"

    def __init__(self, args, root, name, fsync, extra=()):
        self.name = name
        self.fsync = fsync
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.k = kb.Kaas(args.kaas, self.dir, fsync=fsync, extra=list(extra), metrics=False,
                         log_path=os.path.join(root, name + ".log"))

    @property
    def addr(self):
        return self.k.addr

    def pids(self):
        p = self.k.proc
        return [p.pid] if p is not None and p.poll() is None else []

    def start(self):
        """Starts the broker; returns seconds from spawn to Metadata answered."""
        t0 = time.monotonic()
        self.k.start(timeout=600)
        return wait_metadata(self.addr, t0)

    def start_timed(self, on_spawn):
        """Starts the broker, calling on_spawn(t0) right after the spawn begins
        (kaas prints its port only once it listens, so the poller starts
        then; t0 is taken before the spawn)."""
        t0 = time.monotonic()
        self.k.start(timeout=600)
        return on_spawn(t0)

    def stop(self):
        self.k.stop()

    def kill(self):
        self.k.stop(signal.SIGKILL)


class KafkaBroker:
    kind = "kafka"

    def __init__(self, args, root, name, configs=()):
        self.name = name
        self.dir = os.path.join(root, name)
        self.configs = list(configs)
        self.heap = args.kafka_heap
        self.log_path = os.path.join(root, name + ".log")
        self.addr = None
        self.proc = None  # the running `kafka-ref start`

    def _spawn_start(self):
        # kafka-ref's own main, with a longer wait for readiness than its
        # 120 s: Kafka recovering 10,000 partitions after kill -9 may need it.
        cmd = [sys.executable, "-c", KAFKA_REF_LAUNCH, KAFKA_REF, "start", "--dir", self.dir]
        for c in self.configs:
            cmd += ["--config", c]
        if self.heap:
            cmd += ["--heap", self.heap]
        logf = open(self.log_path, "a")
        logf.write(f"==== {time.strftime('%H:%M:%S')} {' '.join(cmd)}\n")
        logf.flush()
        self.proc = spawn(cmd, stdout=subprocess.PIPE, stderr=logf, text=True)
        logf.close()
        return self.proc

    def _finish_start(self, timeout=600):
        out, _ = self.proc.communicate(timeout=timeout)
        rc = self.proc.returncode
        reap(self.proc)
        m = re.search(r"bootstrap=(\S+)", out or "")
        if rc != 0 or not m:
            raise RuntimeError(f"kafka-ref start --dir {self.dir} failed ({rc}); see {self.log_path} "
                               f"and {self.dir}/node-1/server.log")
        self.addr = m.group(1)

    def start(self):
        """Starts (formats on first use); returns seconds from spawn to
        Metadata answered (when the port is known: a restart) or to
        kafka-ref's bootstrap line."""
        known = self.known_addr()
        t0 = time.monotonic()
        self._spawn_start()
        if known:
            took = wait_metadata(known, t0)
            self._finish_start()
            return took
        self._finish_start()
        return time.monotonic() - t0

    def start_timed(self, on_spawn):
        known = self.known_addr()
        if not known:
            raise RuntimeError("start_timed needs a formatted dir")
        self.addr = known
        t0 = time.monotonic()
        self._spawn_start()
        try:
            return on_spawn(t0)
        finally:
            self._finish_start()

    def known_addr(self):
        try:
            with open(os.path.join(self.dir, "kafka-ref.json")) as f:
                state = json.load(f)
            return f"127.0.0.1:{state['nodes'][0]['port']}"
        except (OSError, ValueError, KeyError, IndexError):
            return None

    def pids(self):
        if not os.path.isdir(self.dir):
            return []
        out = subprocess.run([sys.executable, KAFKA_REF, "pids", "--dir", self.dir],
                             capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]

    def stop(self):
        if self.proc is not None:
            reap(self.proc)
        if os.path.isdir(self.dir):
            subprocess.run([sys.executable, KAFKA_REF, "stop", "--dir", self.dir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill(self):
        subprocess.run([sys.executable, KAFKA_REF, "kill", "--dir", self.dir], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ------------------------------------------------------------------ loads


def new_topic(b, prefix, partitions):
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kb.create_topic(b.addr, name, partitions, {"max.message.bytes": str(4 * kb.MIB)}, timeout=300)
    return name


def delete_topic(b, name):
    try:
        admin = AdminClient({"bootstrap.servers": b.addr})
        for f in admin.delete_topics([name], operation_timeout=60).values():
            f.result(60)
    except Exception as e:  # noqa: BLE001 - cleanup only
        kb.log(f"  delete {name} on {b.name}: {e}")


def size_label(size):
    return f"{size // 1024}KiB" if size >= 1024 else f"{size}B"


def linger_for(size):
    return 20 if size >= 64 * 1024 else 5


def load_produce_rdkafka(b, size, parts, n, keep=None):
    topic = new_topic(b, "prod", parts)
    conf = kb.producer_config(b.addr, **{"linger.ms": linger_for(size)})
    value = os.urandom(size)
    pids = b.pids()
    cpu0 = proc_cpu(pids)
    r = kb.produce(conf, topic, parts, value, n)
    cpu = proc_cpu(pids) - cpu0
    if r["errors"]:
        raise RuntimeError(f"{b.name}: {len(r['errors'])} delivery errors, first {r['errors'][0]}")
    gb = n * size / 1e9
    if keep is not None:
        keep.append((topic, parts, n, size))
    elif parts >= 100:
        delete_topic(b, topic)
    return {"MBps": n * size / r["seconds"] / kb.MB, "cpu_s_per_GB": cpu / gb, "seconds": r["seconds"]}


def java_cmd(args, main_class, *rest):
    return [kref.java(), "-Xmx512M", *kref.JVM_PERF, f"-Dlog4j2.configurationFile={args.tool_log4j}",
            "-cp", kref.classpath(4), main_class, *rest]


PERF_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                          r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def load_produce_kafkaperf(args, b, size, parts, n):
    topic = new_topic(b, "perf", parts)
    cmd = java_cmd(args, "org.apache.kafka.tools.ProducerPerformance",
                   "--bootstrap-server", b.addr, "--topic", topic, "--num-records", str(n),
                   "--record-size", str(size), "--throughput", "-1", "--command-property",
                   "acks=all", "enable.idempotence=true", f"linger.ms={linger_for(size)}",
                   f"batch.size={kb.MIB}", f"max.request.size={4 * kb.MIB}",
                   "buffer.memory=268435456", "compression.type=none")
    pids = b.pids()
    cpu0 = proc_cpu(pids)
    p = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=args.load_timeout)
    finally:
        reap(p)
    cpu = proc_cpu(pids) - cpu0
    m = None
    for m in PERF_SUMMARY.finditer(out):
        pass
    if p.returncode != 0 or m is None or int(m.group(1)) != n:
        raise RuntimeError(f"ProducerPerformance against {b.name} failed ({p.returncode}):\n{out[-3000:]}")
    if parts >= 100:
        delete_topic(b, topic)
    rps = float(m.group(2))
    return {"MBps": rps * size / kb.MB, "cpu_s_per_GB": cpu / (n * size / 1e9),
            "p99_ms": int(m.group(8))}


def load_fetch(b, topics):
    topic, parts, n, size = topics.pop(0)
    pids = b.pids()
    cpu0 = proc_cpu(pids)
    secs, _, got, nbytes = kb.consume_all(b.addr, topic, parts, n, deadline_s=600)
    cpu = proc_cpu(pids) - cpu0
    if got != n or nbytes != n * size:
        raise RuntimeError(f"{b.name}: fetched {got} records / {nbytes} B of {n} / {n * size}")
    return {"MBps": nbytes / secs / kb.MB, "cpu_s_per_GB": cpu / (nbytes / 1e9)}


def e2e_consumer_main(bootstrap, topic, total, warmup):
    """The consumer process of the fixed-rate latency load: prints `ready`,
    then, once `total` records arrived, one JSON list of latencies (ns)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "vs-kafka-unused", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1,
                  "enable.partition.eof": False, "error_cb": lambda e: kb.log(f"e2e consumer: {e}")})
    c.list_topics(topic, timeout=30)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    c.poll(0.5)
    print("ready", flush=True)
    lat = []
    got = 0
    end = time.monotonic() + 600
    while got < total and time.monotonic() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        now = time.monotonic_ns()
        if m.error():
            continue
        seq, sent = struct.unpack_from(">qq", m.value())
        got += 1
        if seq >= warmup:
            lat.append(now - sent)
    c.close()
    print(json.dumps(lat), flush=True)


def pct(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q))]


def load_e2e_rdkafka(args, b):
    topic = new_topic(b, "e2e", 1)
    rate = args.e2e_rate
    warmup = rate  # 1 s
    total = warmup + int(rate * args.e2e_seconds)
    cons = spawn([sys.executable, os.path.abspath(__file__), "--e2e-consumer", b.addr, topic, str(total),
                  str(warmup)], stdout=subprocess.PIPE, text=True)
    try:
        if cons.stdout.readline().strip() != "ready":
            raise RuntimeError("e2e consumer did not start")
        conf = kb.producer_config(b.addr, **{"linger.ms": 0, "delivery.report.only.error": True})
        errors = []
        conf["on_delivery"] = lambda err, msg: errors.append(err) if err else None
        p = Producer(conf)
        p.list_topics(topic, timeout=30)
        pad = bytes(1024 - 16)
        t0 = time.monotonic()
        for i in range(total):
            due = t0 + i / rate
            while True:
                now = time.monotonic()
                if now >= due:
                    break
                p.poll(min(due - now, 0.001))
            p.produce(topic, struct.pack(">qq", i, time.monotonic_ns()) + pad, partition=0)
            p.poll(0)
        if p.flush(60):
            raise RuntimeError("e2e: records not delivered")
        if errors:
            raise RuntimeError(f"e2e: {len(errors)} delivery errors: {errors[0]}")
        out, _ = cons.communicate(timeout=120)
    finally:
        reap(cons)
    lat = json.loads(out.strip().splitlines()[-1])
    if len(lat) < total - warmup:
        raise RuntimeError(f"e2e: {len(lat)} of {total - warmup} records consumed")
    return {"p50_ms": pct(lat, 0.5) / 1e6, "p99_ms": pct(lat, 0.99) / 1e6, "p99.9_ms": pct(lat, 0.999) / 1e6}


E2E_TOOL = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99\.9th = (\d+)")
E2E_AVG = re.compile(r"Avg latency: ([\d.]+) ms")


def load_e2e_kafkatool(args, b):
    topic = new_topic(b, "e2etool", 1)
    cmd = java_cmd(args, "org.apache.kafka.tools.EndToEndLatency", "--bootstrap-server", b.addr,
                   "--topic", topic, "--num-records", str(args.e2e_tool_records), "--producer-acks", "all",
                   "--record-size", "1024")
    p = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=args.load_timeout)
    finally:
        reap(p)
    m = E2E_TOOL.search(out)
    a = E2E_AVG.search(out)
    if p.returncode != 0 or not m or not a:
        raise RuntimeError(f"EndToEndLatency against {b.name} failed ({p.returncode}):\n{out[-3000:]}")
    return {"p50_ms": float(m.group(1)), "p99_ms": float(m.group(2)), "p99.9_ms": float(m.group(3)),
            "avg_ms": float(a.group(1))}


def load_txn(args, b, producers):
    topic = new_topic(b, "txn", producers)
    run = uuid.uuid4().hex[:8]
    counts = [0] * producers
    errors = []
    ready = threading.Barrier(producers + 1)
    go = threading.Event()
    window = {}

    def worker(i):
        p = None
        try:
            p = Producer({"bootstrap.servers": b.addr, "transactional.id": f"vsk-{run}-{i}", "acks": "all",
                          "enable.idempotence": True, "linger.ms": 0,
                          "error_cb": lambda e: kb.log(f"txn producer {i}: {e}")})
            p.init_transactions(60)
            p.begin_transaction()  # one warm-up transaction
            p.produce(topic, b"w", partition=i)
            p.commit_transaction(60)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        ready.wait()
        go.wait()
        if errors:
            return
        value = bytes(100)
        try:
            while time.monotonic() < window["end"]:
                p.begin_transaction()
                p.produce(topic, value, partition=i)
                p.commit_transaction(60)
                if time.monotonic() <= window["end"]:
                    counts[i] += 1
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(producers)]
    for t in threads:
        t.start()
    ready.wait(120)
    window["end"] = time.monotonic() + args.txn_seconds
    go.set()
    for t in threads:
        t.join(args.txn_seconds + 120)
    if errors:
        raise RuntimeError(f"{b.name}: transactional producer failed: {errors[0]}")
    return {"per_s": sum(counts) / args.txn_seconds}


# ------------------------------------------------------------------ recovery


class GiveUp(Exception):
    pass


def wait_recovered(addr, expect, topic, t0, deadline_s=600):
    """From t0: seconds to a Metadata (all topics) listing every partition of
    `expect` with a leader, then to an acks=-1 Produce to `topic` partition 0
    answered without error."""
    end = t0 + deadline_s
    batch = kb.record_batch(1, os.urandom(1024))
    body = sb.produce_frame_body(topic, 0, batch, acks=-1)
    t_md = None
    while True:
        if time.monotonic() > end:
            raise GiveUp(f"{addr}: not recovered in {deadline_s} s (metadata {t_md})")
        w = None
        try:
            w = sb.Wire(addr, timeout=60)
            while t_md is None:
                if sb.all_led(sb.metadata(w), expect):
                    t_md = time.monotonic() - t0
                    break
                if time.monotonic() > end:
                    raise GiveUp(f"{addr}: metadata incomplete after {deadline_s} s")
                time.sleep(0.01)
            while True:
                r = sb.Reader(w.request(0, 3, body))
                r.take(">i")
                r.string()
                r.take(">ii")
                if r.take(">h") == 0:
                    return t_md, time.monotonic() - t0
                if time.monotonic() > end:
                    raise GiveUp(f"{addr}: produce still failing after {deadline_s} s")
                time.sleep(0.01)
        except GiveUp:
            raise
        except (OSError, RuntimeError, struct.error):
            time.sleep(0.01)
        finally:
            if w is not None:
                w.close()


def fill_partitions(b, n_parts, per_partition):
    topics = [f"r{i:04d}" for i in range(n_parts // 100)]
    # 2,000 partitions a request: Kafka refuses 10,000 in one CreateTopics
    # ("excessively large batch operation": its controller's record limit).
    created, took, refusal = sb.create_topics(b.addr, topics, 100, 2_000)
    if refusal:
        raise RuntimeError(f"{b.name}: creating {n_parts} partitions refused: {refusal}")
    expect = {t: 100 for t in topics}
    # every partition led before writing
    t0 = time.monotonic()
    wait_recovered(b.addr, expect, topics[-1], t0)
    value = os.urandom(1024)
    # Not idempotent: a fresh Kafka makes InitProducerId wait ~20 s for its
    # transaction coordinator, which is not what this measures.
    p = Producer(kb.producer_config(b.addr, **{"linger.ms": 20, "enable.idempotence": False}))
    for _ in range(per_partition):
        for t in topics:
            for part in range(100):
                while True:
                    try:
                        p.produce(t, value, partition=part)
                        break
                    except BufferError:
                        p.poll(0.01)
            p.poll(0)
    if p.flush(600):
        raise RuntimeError(f"{b.name}: fill not delivered")
    return expect, topics[-1], took


# ------------------------------------------------------------------ figures


class Figures:
    def __init__(self):
        self.rows = []  # (name, kaas, kafka, pair label, detail)

    def add(self, name, kaas_vals, kafka_vals, pair):
        """Medians of the runs that did not fail (None); `failed` when none
        succeeded."""
        ok_k = [x for x in kaas_vals if x is not None]
        ok_f = [x for x in kafka_vals if x is not None]
        k = statistics.median(ok_k) if ok_k else None
        f = statistics.median(ok_f) if ok_f else None
        if k is None or f is None:
            ratio = None
        else:
            ratio = k / f if f else float("inf") if k else float("nan")
        self.rows.append((name, k, f, ratio, pair, kaas_vals, kafka_vals))
        print(f"FIGURE {name} kaas={num(k)} kafka={num(f)} ratio={num(ratio)}", flush=True)

    def markdown(self):
        out = ["| figure | kaas | Kafka | kaas/Kafka | better | brokers | runs (kaas; Kafka) |",
               "| --- | ---: | ---: | ---: | --- | --- | --- |"]
        for name, k, f, ratio, pair, kv, fv in self.rows:
            better = "higher" if name.split("@")[0].endswith("_higher") else "lower"
            if ratio is None:
                mark = ""
            else:
                kaas_wins = (ratio > 1) if better == "higher" else (ratio < 1)
                mark = "" if kaas_wins or ratio == 1 else " (kaas behind)"
            out.append(f"| `{name}` | {num(k)} | {num(f)} | {num(ratio)}{mark} | {better} | {pair} | "
                       f"{', '.join(num(x) for x in kv)}; {', '.join(num(x) for x in fv)} |")
        return "\n".join(out)


def num(x):
    if x is None:
        return "failed"
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def alternate(args, pair, fn, label, reps=None):
    """Runs fn(broker) --reps times on each broker of the pair, alternately.
    Returns ([kaas results], [Kafka results])."""
    reps = reps or args.reps
    res = ([], [])
    for rep in range(reps):
        for i, b in enumerate(pair):
            t0 = time.monotonic()
            try:
                r = fn(b)
            except Exception as e:  # noqa: BLE001 - a failed run is a result; the figure says so
                kb.log(f"  {label} [{b.name} {rep + 1}/{reps}] FAILED: {str(e)[-2000:]}")
                res[i].append(None)
                continue
            res[i].append(r)
            kb.log(f"  {label} [{b.name} {rep + 1}/{reps}] {fmt_result(r)} ({time.monotonic() - t0:.1f} s)")
    return res


def vals(rs, key):
    return [r[key] if r is not None else None for r in rs]


def fmt_result(r):
    return " ".join(f"{k}={num(v)}" for k, v in r.items())


PAIR_NAMES = {"": "kaas --fsync always vs Kafka default", "@both_fsync": "kaas --fsync always vs Kafka flush.messages=1",
              "@no_fsync": "kaas --fsync never vs Kafka default"}


def plan(args):
    """The figures of this mode."""
    if args.quick:
        return {
            "produce_rdkafka": [(100, 1), (1024, 16)],
            "produce_kafkaperf": [(1024, 16)],
            "produce_variants": [(1024, 16)],
            "fetch": (1024, 16),
            "txn": [1],
            "txn_variants": [],
            "e2e_variants": False,
            "recovery_partitions": args.recovery_partitions or 1000,
        }
    return {
        "produce_rdkafka": [(s, p) for s in (100, 1024, 64 * 1024) for p in (1, 16, 1000)],
        "produce_kafkaperf": [(100, 16), (1024, 1), (1024, 16), (1024, 1000), (64 * 1024, 16)],
        "produce_variants": [(1024, 16), (64 * 1024, 1)],
        "fetch": (1024, 16),
        "txn": [1, 8],
        "txn_variants": [1],
        "e2e_variants": True,
        "recovery_partitions": args.recovery_partitions or 10_000,
    }


def records_for(args, size, parts):
    mb = args.mb if size != 100 else args.mb_small
    n = int(mb * kb.MB) // size
    return max(n, parts * 4)


def run_figures(args, root, brokers, figs):
    kaas_a, kaas_n, kafka_d, kafka_f = brokers
    pairs = {"": (kaas_a, kafka_d), "@both_fsync": (kaas_a, kafka_f), "@no_fsync": (kaas_n, kafka_d)}
    p = plan(args)
    fetch_topics = {kaas_a.name: [], kafka_d.name: []}

    # produce, rdkafka
    for size, parts in p["produce_rdkafka"]:
        n = records_for(args, size, parts)
        keep = (size, parts) == p["fetch"]
        name = f"produce_{size_label(size)}_p{parts}_rdkafka_MBps_higher"

        def fn(b, size=size, parts=parts, n=n, keep=keep):
            return load_produce_rdkafka(b, size, parts, n, fetch_topics[b.name] if keep else None)

        k, f = alternate(args, pairs[""], fn, name)
        figs.add(name, vals(k, "MBps"), vals(f, "MBps"), PAIR_NAMES[""])
        if keep:
            cname = f"cpu_produce_{size_label(size)}_p{parts}_rdkafka_s_per_GB_lower"
            figs.add(cname, vals(k, "cpu_s_per_GB"), vals(f, "cpu_s_per_GB"), PAIR_NAMES[""])

    # fetch of what the produce figure wrote
    size, parts = p["fetch"]
    name = f"fetch_{size_label(size)}_p{parts}_rdkafka_MBps_higher"
    k, f = alternate(args, pairs[""], lambda b: load_fetch(b, fetch_topics[b.name]), name)
    figs.add(name, vals(k, "MBps"), vals(f, "MBps"), PAIR_NAMES[""])
    figs.add(f"cpu_fetch_{size_label(size)}_p{parts}_rdkafka_s_per_GB_lower", vals(k, "cpu_s_per_GB"),
             vals(f, "cpu_s_per_GB"), PAIR_NAMES[""])

    # produce, Kafka's ProducerPerformance
    for size, parts in p["produce_kafkaperf"]:
        n = records_for(args, size, parts)
        name = f"produce_{size_label(size)}_p{parts}_kafkaperf_MBps_higher"
        k, f = alternate(args, pairs[""], lambda b, s=size, pp=parts, n=n: load_produce_kafkaperf(args, b, s, pp, n),
                         name)
        figs.add(name, vals(k, "MBps"), vals(f, "MBps"), PAIR_NAMES[""])

    # produce at matched durability
    for suffix in ("@both_fsync", "@no_fsync"):
        for size, parts in p["produce_variants"]:
            n = records_for(args, size, parts)
            name = f"produce_{size_label(size)}_p{parts}_rdkafka_MBps_higher{suffix}"
            k, f = alternate(args, pairs[suffix], lambda b, s=size, pp=parts, n=n: load_produce_rdkafka(b, s, pp, n),
                             name)
            figs.add(name, vals(k, "MBps"), vals(f, "MBps"), PAIR_NAMES[suffix])

    # end-to-end latency
    for suffix in ("", "@both_fsync", "@no_fsync") if p["e2e_variants"] else ("",):
        k, f = alternate(args, pairs[suffix], lambda b: load_e2e_rdkafka(args, b), f"e2e{suffix}")
        for q in ("p50", "p99", "p99.9"):
            figs.add(f"e2e_{q}_rdkafka_{args.e2e_rate}rps_ms_lower{suffix}", vals(k, f"{q}_ms"),
                     vals(f, f"{q}_ms"), PAIR_NAMES[suffix])
    k, f = alternate(args, pairs[""], lambda b: load_e2e_kafkatool(args, b), "e2e_kafkatool")
    for q in ("p50", "p99", "p99.9"):
        figs.add(f"e2e_{q}_kafkatool_ms_lower", vals(k, f"{q}_ms"), vals(f, f"{q}_ms"),
                 PAIR_NAMES[""])

    # transactions
    for producers in p["txn"]:
        name = f"txn_{producers}prod_per_s_higher"
        k, f = alternate(args, pairs[""], lambda b, n=producers: load_txn(args, b, n), name)
        figs.add(name, vals(k, "per_s"), vals(f, "per_s"), PAIR_NAMES[""])
    for producers in p["txn_variants"]:
        for suffix in ("@both_fsync", "@no_fsync"):
            name = f"txn_{producers}prod_per_s_higher{suffix}"
            k, f = alternate(args, pairs[suffix], lambda b, n=producers: load_txn(args, b, n), name)
            figs.add(name, vals(k, "per_s"), vals(f, "per_s"), PAIR_NAMES[suffix])

    # peak RSS of the default brokers after every load
    figs.add("rss_peak_MiB_lower", [proc_hwm_kib(kaas_a.pids()) / 1024], [proc_hwm_kib(kafka_d.pids()) / 1024],
             PAIR_NAMES[""] + " (VmHWM after all loads; Kafka -Xmx1G -Xms1G)")


def recovery_brokers(args, root):
    n_parts = plan(args)["recovery_partitions"]
    kaas = KaasBroker(args, root, "rec-kaas", "always",
                      ["--max-partitions", str(n_parts + 1000), "--max-partitions-per-request", "10000"])
    kafka = KafkaBroker(args, root, "rec-kafka")
    return [kaas, kafka]


def run_startup_recovery(args, brokers, figs):
    """Fresh brokers (formatted, started, idle until now): start-up on an
    empty dir, then kill -9 with N partitions."""
    n_parts = plan(args)["recovery_partitions"]
    kaas, kafka = brokers
    try:
        if kaas.pids() == []:
            kaas.start()
        kb.log(f"recovery brokers: kaas {kaas.addr}, Kafka {kafka.addr}")

        def restart(b):
            b.stop()
            return {"s": b.start_timed(lambda t0: wait_metadata(b.addr, t0))}

        k, f = alternate(args, brokers, restart, "startup_empty", args.recovery_reps)
        figs.add("startup_empty_s_lower", vals(k, "s"), vals(f, "s"), "kaas --fsync always vs Kafka default")

        expect = {}
        for b in brokers:
            t0 = time.monotonic()
            expect[b.name] = fill_partitions(b, n_parts, args.recovery_records)
            kb.log(f"  {b.name}: {n_parts} partitions created in {expect[b.name][2]:.1f} s, filled "
                   f"({time.monotonic() - t0:.1f} s in all)")

        def crash(b):
            b.kill()
            ex, topic, _ = expect[b.name]
            md, prod = b.start_timed(lambda t0: wait_recovered(b.addr, ex, topic, t0))
            return {"metadata_s": md, "produce_s": prod}

        k, f = alternate(args, brokers, crash, f"recovery_p{n_parts}", args.recovery_reps)
        for key in ("metadata_s", "produce_s"):
            figs.add(f"recovery_p{n_parts}_{key}_lower", vals(k, key), vals(f, key),
                     "kaas --fsync always vs Kafka default")
    finally:
        for b in brokers:
            try:
                b.stop()
            except Exception as e:  # noqa: BLE001
                kb.log(f"stopping {b.name}: {e}")


LOG4J_TOOLS = """status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a subset, under 5 minutes")
    ap.add_argument("--kaas", default=kb.DEFAULT_KAAS, help="kaas binary (default: %(default)s)")
    ap.add_argument("--data-root", default=kb.DEFAULT_DATA_ROOT,
                    help="a fresh dir is made under this and removed at the end (default: %(default)s)")
    ap.add_argument("--reps", type=int, help="runs per broker per figure (default: 2 quick, 3 full)")
    ap.add_argument("--mb", type=float, help="MB of values per produce run, 1 KiB and 64 KiB records "
                    "(default: 60 quick, 120 full)")
    ap.add_argument("--mb-small", type=float, help="MB per produce run with 100 B records (default: 15 quick, 30 full)")
    ap.add_argument("--e2e-rate", type=int, default=1000, help="records/s of the fixed-rate latency load (%(default)s)")
    ap.add_argument("--e2e-seconds", type=float, help="measured seconds of it (default: 4 quick, 10 full)")
    ap.add_argument("--e2e-tool-records", type=int, help="EndToEndLatency records (default: 500 quick, 2000 full)")
    ap.add_argument("--txn-seconds", type=float, help="seconds per transactions run (default: 3 quick, 5 full)")
    ap.add_argument("--recovery-partitions", type=int, help="partitions for the kill -9 recovery "
                    "(default: 1000 quick, 10000 full)")
    ap.add_argument("--recovery-reps", type=int, help="start-up and kill -9 runs per broker (default: 1 quick, "
                    "2 full)")
    ap.add_argument("--recovery-records", type=int, default=2, help="1 KiB records per partition before the kill")
    ap.add_argument("--kafka-heap", help="Kafka's heap (default: kafka-ref's, 1G)")
    ap.add_argument("--load-timeout", type=float, default=600)
    ap.add_argument("--no-recovery", action="store_true", help="skip start-up and recovery")
    ap.add_argument("--recovery-only", action="store_true", help="only start-up and recovery")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs and logs")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--e2e-consumer", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    q = a.quick
    for k, quick, full in (("reps", 2, 3), ("mb", 60, 120), ("mb_small", 15, 30), ("e2e_seconds", 4, 10),
                           ("e2e_tool_records", 500, 2000), ("txn_seconds", 3, 5)):
        if getattr(a, k) is None:
            setattr(a, k, quick if q else full)
    if a.recovery_reps is None:
        a.recovery_reps = 1 if q else 2
    return a


def terminate(signum, frame):
    raise SystemExit(128 + signum)


def main():
    args = parse_args()
    if args.e2e_consumer:
        bootstrap, topic, total, warmup = args.e2e_consumer
        e2e_consumer_main(bootstrap, topic, int(total), int(warmup))
        return
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    if not os.access(args.kaas, os.X_OK):
        sys.exit(f"no kaas binary at {args.kaas}: cargo build --locked --release -p kaas --features fault-injection")
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    t_start = time.monotonic()
    root = kb.fresh_dir(args.data_root, "vs-kafka")
    args.tool_log4j = os.path.join(root, "tools-log4j2.properties")
    with open(args.tool_log4j, "w") as f:
        f.write(LOG4J_TOOLS)
    kref.classpath(4)  # runs ./scripts/setup-kafka broker4 when missing
    fs = kb.fs_of(root)
    kb.log(f"vs_kafka: {'quick' if args.quick else 'full'} run in {root} ({fs}), {args.reps} runs per broker per figure")
    figs = Figures()
    brokers = []
    ok = False
    try:
        kaas_a = KaasBroker(args, root, "kaas-always", "always")
        kaas_n = KaasBroker(args, root, "kaas-never", "never")
        kafka_d = KafkaBroker(args, root, "kafka-default")
        kafka_f = KafkaBroker(args, root, "kafka-flush1", ["log.flush.interval.messages=1"])
        brokers = [] if args.recovery_only else [kaas_a, kaas_n, kafka_d, kafka_f]
        # The recovery pair's Kafka is formatted and started now, beside the
        # others (it idles until its turn), to save a JVM start.
        rec = [] if args.no_recovery else recovery_brokers(args, root)
        kafkas = ([] if args.recovery_only else [kafka_d, kafka_f]) + rec[1:]
        brokers += rec
        for b in kafkas:
            b._spawn_start()
        if not args.recovery_only:
            kaas_a.start()
            kaas_n.start()
        for b in kafkas:
            b._finish_start()
        kb.log("brokers: " + ", ".join(f"{b.name} {b.addr} pids {b.pids()}" for b in brokers if b.pids())
               + f" ({time.monotonic() - t_start:.1f} s)")
        if not args.recovery_only:
            run_figures(args, root, [kaas_a, kaas_n, kafka_d, kafka_f], figs)
            for b in (kaas_a, kaas_n, kafka_d, kafka_f):
                b.stop()
        if rec:
            run_startup_recovery(args, rec, figs)
        ok = True
    finally:
        for p in list(CHILDREN):
            reap(p)
        for b in brokers:
            try:
                b.stop()
            except Exception as e:  # noqa: BLE001
                kb.log(f"stopping {b.name}: {e}")
        if not args.keep and ok:
            kb.remove(root)
        elif not ok:
            kb.log(f"kept {root} (logs: *.log, Kafka's node-1/server.log)")
    took = time.monotonic() - t_start
    print(f"# vs_kafka {'--quick ' if args.quick else ''}{started}, {took:.0f} s; {os.cpu_count()} cores; "
          f"filesystem {fs}; load average at end {os.getloadavg()[0]:.2f}; {args.reps} runs per broker per figure "
          f"(median); Apache Kafka 4.4.0")
    if not args.quick:
        print()
        print(figs.markdown())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started, "seconds": took, "quick": args.quick, "argv": sys.argv,
                       "figures": [{"name": r[0], "kaas": r[1], "kafka": r[2], "ratio": r[3], "brokers": r[4],
                                    "kaas_runs": r[5], "kafka_runs": r[6]} for r in figs.rows]}, f, indent=1)


if __name__ == "__main__":
    main()
