#!/usr/bin/env python3
"""Hostile clients against one broker: the broker's memory, a
well-behaved client's latency, and the durability of what it was told.

    .venv/bin/python bench/hostile_bench.py [--seconds 60] [--attacks 1,2,...,8] [--json FILE]
    .venv/bin/python bench/hostile_bench.py --bootstrap HOST:PORT --pid PID   # a broker started elsewhere

Without --bootstrap it starts `target/release/kaas broker` (or --kaas PATH) with
DEFAULT limits: only `--listen 127.0.0.1:0 --data-dir <fresh dir under
target/bench-data> --fsync always --metrics-listen 127.0.0.1:0` (fsync always is
the broker's default, spelled out by kaasbench), and stops it at the end.

Phases, in one run against one broker:
  prepare   every selected attacker process builds its frames (the 100 MiB
            tagged-field frame, the compression bombs) and seeds its own topics
            (bombs for attack 4, --fetch-fill-mib of records for attack 6);
            then waits.
  warm-up   the well-behaved load starts (--warmup-seconds, not counted).
  reference the same well-behaved load, NO attackers (--ref-seconds, 10 s).
  attack    the well-behaved load continues; every selected attacker runs its
            attack in a loop for --seconds (60 s).
  drain     attackers stop; the producer stops producing and waits up to
            --drain-seconds for its last acknowledgements.
  verify    a fresh consumer reads the well-behaved topic from the start.

The well-behaved client (confluent-kafka / librdkafka, in this process): one
idempotent producer (acks=all, linger.ms=5) sending --rate (200) records/s of
100 bytes to its own 2-partition topic; the latency of a record is its
delivery callback time minus its produce() time; every acknowledged
(partition, offset, value) is kept. One consumer (assign, no group) reads the
topic as it is written; its latency is receive time minus produce() time
(end to end). In p99s a record that never got its acknowledgement (delivery
error, or still pending after the drain), or that was acknowledged but never
reached the live consumer, counts as infinitely slow.

The attackers (one process each, raw sockets, hand-built frames from the
small wire encoder below: request header v1/v2, ApiVersions v3, Metadata v4,
CreateTopics v4, Produce v3 with RecordBatch v2 and CRC-32C, Fetch v4,
ListOffsets v1, InitProducerId v0). Each tolerates errors and closed
connections (that is a fix working) and reconnects:
  1 tagged-field flood: one ApiVersions v3 frame of exactly the default
    max request size (100 MiB) whose request header carries ~21 million
    empty tagged fields, every --flood-interval (3) s.
  2 corrupt compressed batches, in a loop: gzip/zstd/lz4/snappy batches
    with a valid CRC whose bodies are garbage after the codec's magic; a
    gzip batch claiming 2^31-1 records holding one; gzip and zstd bombs
    (a < 1 MiB batch decompressing to --bomb-mib (256) MiB).
  3 forged producer ids: InitProducerId v0 gives X; then seq-0 idempotent
    batches under X+1..X+--forged (50), pipelined, in a loop.
  4 timestamp lookups: --lookups (48) pipelined ListOffsets v1 by
    timestamp on 4 partitions that hold gzip and zstd bombs (a 2-record
    batch: record 0 is --bomb-mib of zeros, the timestamp asked for lies
    between its two records, so a lookup must read through the bomb), in a
    loop; the bombs are re-sent every 10 s.
  5 half-sent frames: --half-open (1040) connections that each send 2
    bytes of a size field and then nothing, held; any the broker closes
    is reopened (once a second).
  6 fetch with no response cap: one Fetch v4 naming one partition
    (holding --fetch-fill-mib (8) MiB) --fetch-repeats (360) times, all with
    max_bytes and partition_max_bytes = i32::MAX, max_wait 0; the response
    is read and discarded, in a loop.
  7 CreateTopics v4 with --create-topics (12) x --create-partitions
    (10,000) partitions (new names each time), every --create-interval (10) s.
  8 Metadata v4 naming --metadata-topics (10,000) unknown topics with
    allow_auto_topic_creation (new names each time), every
    --metadata-interval (5) s.
Per attack the bench counts attempts and their outcome: `error` (the broker
answered with an error code), `closed` (it closed the connection, or refused
it), `timeout` (no answer in 60 s), `ok` (served: for an attack, the
hostile request was accepted). For attack 5, attempts are connections opened,
`closed` the ones the broker closed, `ok` the ones still held at the end.

Broker memory: VmRSS from /proc/<pid>/status every --rss-interval-ms (200)
ms, its maximum, and VmHWM (the kernel's peak RSS, which also catches peaks
between samples); the verdict uses the larger. Also its open file
descriptors (/proc/<pid>/fd, every second) and CPU seconds. Safety cut-off
for the shared machine: a separate 20 ms watch stops every attacker when
RSS passes --rss-abort-mib (2048), and SIGKILLs a broker this bench started
when it passes --rss-kill-mib (3072); the run then fails.

Verdicts (exit code 0 only if all hold): max(RSS samples, VmHWM) < --rss-bound-mib
(512); produce p99 and fetch p99 under attack < --p99-bound-ms (1000); every
acknowledged record read back exactly once (none missing, none duplicated);
every selected attack made attempts; the broker still running; no cut-off.
The reference p50/p99 (no attackers) is printed next to the attack figures,
with the ratio attack p99 / reference p99. --json FILE writes every figure.
"""

import argparse
import json
import math
import multiprocessing as mp
import os
import queue
import random
import resource
import socket
import statistics
import struct
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kaasbench as kb  # noqa: E402

MIB = 1 << 20
I32_MAX = (1 << 31) - 1

# --------------------------------------------------------------------------
# A small Kafka wire encoder/decoder (only what the attacks need).


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    """STRING / NULLABLE_STRING (int16 length)."""
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n):
    """Zigzag varint/varlong (records)."""
    return uvarint((n << 1) ^ (n >> 63))


def compact_string(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


def array(items):
    items = list(items)
    return i32(len(items)) + b"".join(items)


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), table-driven; slow in Python (~5 MB/s), so the
    bench builds each batch once and reuses it (the CRC does not cover the
    base offset)."""
    t = CRC32C_TABLE
    crc = 0xFFFFFFFF
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the standard check value


def record(offset_delta, ts_delta, value, key=None):
    body = (b"\x00" + varint(ts_delta) + varint(offset_delta)
            + (varint(-1) if key is None else varint(len(key)) + key)
            + varint(len(value)) + value + varint(0))
    return varint(len(body)) + body


def record_batch(records, count, compression=0, base_ts=None, max_ts=None, pid=-1, epoch=-1,
                 seq=-1, last_offset_delta=None):
    """A RecordBatch v2 around `records` (already encoded, maybe compressed)."""
    base_ts = int(time.time() * 1000) if base_ts is None else base_ts
    max_ts = base_ts if max_ts is None else max_ts
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = (i16(compression) + i32(lod) + i64(base_ts) + i64(max_ts) + i64(pid) + i16(epoch)
                 + i32(seq) + i32(count) + records)
    inner = i32(-1) + i8(2) + struct.pack(">I", crc32c(after_crc)) + after_crc
    return i64(0) + i32(len(inner)) + inner


def frame(api_key, version, corr, body, flexible=False, client_id="kaas-hostile"):
    """A size-prefixed request: header v1, or v2 (empty tagged fields) when flexible."""
    hdr = i16(api_key) + i16(version) + i32(corr) + string(client_id) + (b"\x00" if flexible else b"")
    return i32(len(hdr) + len(body)) + hdr + body


def produce_body(topic, partitions_batches, acks=-1, timeout_ms=30000):
    """Produce v3: {partition: batch} for one topic."""
    parts = [i32(p) + i32(len(b)) + b for p, b in partitions_batches.items()]
    return string(None) + i16(acks) + i32(timeout_ms) + array([string(topic) + array(parts)])


def create_topics_body(topics, timeout_ms=30000):
    """CreateTopics v4: [(name, partitions)]."""
    return (array([string(n) + i32(p) + i16(1) + array([]) + array([]) for n, p in topics])
            + i32(timeout_ms) + i8(0))


class Reader:
    def __init__(self, b, pos=0):
        self.b = b
        self.pos = pos

    def _take(self, fmt, n):
        (v,) = struct.unpack_from(fmt, self.b, self.pos)
        self.pos += n
        return v

    def i8(self):
        return self._take(">b", 1)

    def i16(self):
        return self._take(">h", 2)

    def i32(self):
        return self._take(">i", 4)

    def i64(self):
        return self._take(">q", 8)

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.b[self.pos:self.pos + n]
        self.pos += n
        return s


def produce_errors(resp):
    """Error codes of a Produce v3 response (after the correlation id)."""
    r = Reader(resp, 4)
    codes = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            codes.append(r.i16())
            r.i64()
            r.i64()
    return codes


class Closed(Exception):
    """The broker closed (or refused) the connection."""


class TimedOut(Exception):
    pass


class Stopped(Exception):
    pass


class Conn:
    """A blocking client connection that notices `stop` every 0.5 s."""

    def __init__(self, addr, stop, connect_timeout=5.0):
        self.stop = stop
        try:
            self.s = socket.create_connection(addr, timeout=connect_timeout)
        except OSError as e:
            raise Closed(f"connect: {e}") from e
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s.settimeout(0.5)
        self.corr = 0
        self.buf = bytearray()

    def next_corr(self):
        self.corr += 1
        return self.corr

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    def send(self, *parts, timeout=60.0):
        deadline = time.monotonic() + timeout
        for p in parts:
            view = memoryview(p)
            while view:
                if self.stop.is_set():
                    raise Stopped()
                try:
                    n = self.s.send(view[:4 * MIB])
                except socket.timeout:
                    if time.monotonic() > deadline:
                        raise TimedOut() from None
                    continue
                except OSError as e:
                    raise Closed(str(e)) from e
                view = view[n:]

    def _fill(self, deadline):
        if self.stop.is_set():
            raise Stopped()
        try:
            chunk = self.s.recv(1 * MIB)
        except socket.timeout:
            if time.monotonic() > deadline:
                raise TimedOut() from None
            return
        except OSError as e:
            raise Closed(str(e)) from e
        if not chunk:
            raise Closed("eof")
        self.buf += chunk

    def read_frame(self, timeout=60.0, keep=None):
        """The next response frame (without its size). With keep=N, only its
        first N bytes are kept and the rest is read and discarded; returns
        (size, head) then."""
        deadline = time.monotonic() + timeout
        while len(self.buf) < 4:
            self._fill(deadline)
        (size,) = struct.unpack_from(">i", self.buf, 0)
        if keep is None:
            while len(self.buf) < 4 + size:
                self._fill(deadline)
            out = bytes(self.buf[4:4 + size])
            del self.buf[:4 + size]
            return out
        left = size
        head = bytearray()
        del self.buf[:4]
        while left:
            if not self.buf:
                self._fill(deadline)
                continue
            take = min(left, len(self.buf))
            if len(head) < keep:
                head += self.buf[:min(take, keep - len(head))]
            del self.buf[:take]
            left -= take
        return size, bytes(head)


# --------------------------------------------------------------------------
# Attacks. Each runs in its own process: prepare (build frames, seed
# topics), signal ready, wait for go, loop until stop, then report counts.

# counters per attack (shared arrays)
ATTEMPTS, ERROR, CLOSED, TIMEOUT, OK, EXTRA = range(6)
COUNTER_NAMES = ["attempts", "error", "closed", "timeout", "ok", "extra"]

ATTACK_NAMES = {
    1: "tagged-field flood (100 MiB ApiVersions v3)",
    2: "corrupt compressed batches and bombs",
    3: "forged producer ids",
    4: "ListOffsets by timestamp over bombs",
    5: "half-sent frames (held connections)",
    6: "Fetch 360x one partition, no cap",
    7: "CreateTopics 12 x 10,000 partitions",
    8: "Metadata v4 auto-creating 10k topics",
}
EXTRA_NAMES = {1: "", 2: "", 3: "", 4: "", 5: "held at end", 6: "largest response bytes", 7: "", 8: ""}


class Ctx:
    def __init__(self, addr, stop, counts, opts, run_id):
        self.addr = addr
        self.stop = stop
        self.c = counts
        self.o = opts
        self.run_id = run_id

    def add(self, i, n=1):
        with self.c.get_lock():
            self.c[i] += n

    def outcome(self, fn):
        """Counts one attempt by what fn() did (True ok, False error, or
        Closed/TimedOut raised); returns the counter it went to."""
        self.add(ATTEMPTS)
        try:
            which = OK if fn() else ERROR
        except Closed:
            which = CLOSED
        except TimedOut:
            which = TIMEOUT
        self.add(which)
        return which

    def sleep(self, s):
        self.stop.wait(s)


def ensure_topic(ctx, name, partitions):
    """CreateTopics v4 for one topic; an existing topic is fine."""
    for _ in range(20):
        try:
            c = Conn(ctx.addr, ctx.stop)
            try:
                c.send(frame(19, 4, c.next_corr(), create_topics_body([(name, partitions)])))
                r = Reader(c.read_frame(), 4)
                r.i32()
                r.i32()
                r.string()
                err = r.i16()
            finally:
                c.close()
            if err in (0, 36):
                return
        except (Closed, TimedOut):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"could not create topic {name}")


def produce_once(c, topic, batches, timeout=60.0):
    c.send(frame(0, 3, c.next_corr(), produce_body(topic, batches)), timeout=timeout)
    return produce_errors(c.read_frame(timeout))


def bomb_records(mib, codec):
    """Two records compressed with codec ('gzip' or 'zstd'): record 0 holds
    `mib` MiB of zeros (timestamp delta 0), record 1 one byte (delta 1000).
    Built by streaming, never holding the bomb uncompressed."""
    v = mib * MIB
    body_len = 1 + 1 + 1 + 1 + len(varint(v)) + v + 1
    head = varint(body_len) + b"\x00" + varint(0) + varint(0) + varint(-1) + varint(v)
    tail = varint(0) + record(1, 1000, b"x")
    if codec == "gzip":
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        comp, fin = z.compress, z.flush
    else:
        import zstandard
        z = zstandard.ZstdCompressor(level=3).compressobj()
        comp, fin = z.compress, z.flush
    out = [comp(head)]
    zeros = bytes(MIB)
    for _ in range(mib):
        out.append(comp(zeros))
    out.append(comp(tail))
    out.append(fin())
    return b"".join(out)


def make_bombs(mib, base_ts):
    bombs = {}
    bombs["gzip bomb"] = record_batch(bomb_records(mib, "gzip"), 2, 1, base_ts, base_ts + 1000)
    try:
        bombs["zstd bomb"] = record_batch(bomb_records(mib, "zstd"), 2, 4, base_ts, base_ts + 1000)
    except ImportError:
        pass
    return bombs


# 1 ----------------------------------------------------------------------

def tagged_flood_frame(max_bytes):
    """(prefix, fields, suffix) of an ApiVersions v3 frame whose size is at
    most max_bytes: header v2 with N empty tagged fields (tags 2^21.. so
    each is a 4-byte tag and a 0 size), N as large as fits."""
    client = "kaas-hostile"
    hdr = i16(18) + i16(3) + i32(1) + string(client)
    body = compact_string("kaas-hostile") + compact_string("1.0") + b"\x00"
    fixed = len(hdr) + 4 + len(body)  # the count takes 4 bytes for N >= 2^21
    n = (max_bytes - fixed) // 5
    base = 1 << 21
    arr = bytearray(5 * n)
    p0 = bytes(range(0x80, 0x100))
    arr[0::5] = (p0 * (n // 128 + 1))[:n]
    p1 = b"".join(bytes([0x80 | v]) * 128 for v in range(128))
    arr[1::5] = (p1 * (n // 16384 + 1))[:n]
    p2 = b"".join(bytes([0x80 | v]) * 16384 for v in range(128))
    arr[2::5] = (p2 * (n // (1 << 21) + 1))[:n]
    arr[3::5] = b"".join(bytes([1 + v]) * (1 << 21) for v in range(n // (1 << 21) + 1))[:n]
    count = uvarint(n)
    assert len(count) == 4 and base + n < 1 << 28
    size = len(hdr) + len(count) + len(arr) + len(body)
    assert size <= max_bytes
    return i32(size) + hdr + count, arr, body, n


def attack_1(ctx):
    prefix, fields, suffix, n = tagged_flood_frame(ctx.o["max_request_bytes"])
    yield f"{n:,} tagged fields, {len(prefix) + len(fields) + len(suffix) - 4:,}-byte frame"
    while not ctx.stop.is_set():
        def once():
            c = Conn(ctx.addr, ctx.stop)
            try:
                c.send(prefix, fields, suffix, timeout=60)
                r = Reader(c.read_frame(60))
                r.i32()
                return r.i16() == 0
            finally:
                c.close()
        try:
            ctx.outcome(once)
        except Stopped:
            return
        ctx.sleep(ctx.o["flood_interval"])


# 2 ----------------------------------------------------------------------

def corrupt_batches(bomb_mib):
    now = int(time.time() * 1000)
    rnd = random.Random(13)

    def garbage(magic, n=2048):
        return magic + bytes(rnd.getrandbits(8) for _ in range(n))

    out = {
        "gzip garbage": record_batch(garbage(b"\x1f\x8b\x08\x00"), 10, 1, now),
        "snappy garbage": record_batch(garbage(b"\x82SNAPPY\x00"), 10, 2, now),
        "lz4 garbage": record_batch(garbage(b"\x04\x22\x4d\x18"), 10, 3, now),
        "zstd garbage": record_batch(garbage(b"\x28\xb5\x2f\xfd"), 10, 4, now),
        "gzip 2^31-1 records holding one": record_batch(
            _gzip(record(0, 0, b"one")), I32_MAX, 1, now),
    }
    out.update(make_bombs(bomb_mib, now))
    return out


def _gzip(data):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    return z.compress(data) + z.flush()


def attack_2(ctx):
    topic = f"hostile-2-{ctx.run_id}"
    ensure_topic(ctx, topic, 4)
    batches = corrupt_batches(ctx.o["bomb_mib"])
    yield ", ".join(f"{k} {len(v):,} B" for k, v in batches.items())
    c = None
    part = 0
    while not ctx.stop.is_set():
        for _, b in batches.items():
            part = (part + 1) % 4

            def once():
                nonlocal c
                if c is None:
                    c = Conn(ctx.addr, ctx.stop)
                try:
                    return all(e == 0 for e in produce_once(c, topic, {part: b}))
                except (Closed, TimedOut):
                    c.close()
                    c = None
                    raise
            try:
                ctx.outcome(once)
            except Stopped:
                return
        ctx.sleep(0.2)


# 3 ----------------------------------------------------------------------

def attack_3(ctx):
    topic = f"hostile-3-{ctx.run_id}"
    ensure_topic(ctx, topic, 4)
    yield f"InitProducerId then seq-0 batches under X+1..X+{ctx.o['forged']}"
    rec = record(0, 0, b"forged")
    while not ctx.stop.is_set():
        try:
            c = Conn(ctx.addr, ctx.stop)
        except Closed:
            ctx.add(ATTEMPTS)
            ctx.add(CLOSED)
            ctx.sleep(1)
            continue
        try:
            c.send(frame(22, 0, c.next_corr(), string(None) + i32(60000)))
            r = Reader(c.read_frame(30), 4)
            r.i32()
            err = r.i16()
            pid = r.i64()
            if err != 0 or pid < 0:
                ctx.sleep(1)
                continue
            n = ctx.o["forged"]
            now = int(time.time() * 1000)
            frames = [frame(0, 3, c.next_corr(), produce_body(
                topic, {k % 4: record_batch(rec, 1, 0, now, pid=pid + k, epoch=0, seq=0)}))
                for k in range(1, n + 1)]
            c.send(*frames)
            for k in range(n):
                def once():
                    return all(e == 0 for e in produce_errors(c.read_frame(60)))
                which = ctx.outcome(once)
                if which in (CLOSED, TIMEOUT):  # the rest were sent too
                    ctx.add(ATTEMPTS, n - k - 1)
                    ctx.add(which, n - k - 1)
                    break
        except (Closed, TimedOut):
            pass
        except Stopped:
            return
        finally:
            c.close()
        ctx.sleep(0.1)


# 4 ----------------------------------------------------------------------

def attack_4(ctx):
    topic = f"hostile-4-{ctx.run_id}"
    parts = 4
    ensure_topic(ctx, topic, parts)
    base_ts = int(time.time() * 1000) - 60_000
    bombs = make_bombs(ctx.o["bomb_mib"], base_ts)

    def seed():
        c = Conn(ctx.addr, ctx.stop)
        try:
            codes = []
            for b in bombs.values():
                codes += produce_once(c, topic, {p: b for p in range(parts)})
            return codes
        finally:
            c.close()

    codes = seed()
    yield (f"{len(bombs)} bombs ({', '.join(f'{len(b):,} B' for b in bombs.values())}) x {parts} "
           f"partitions, produce errors {sorted(set(codes))}")
    body = i32(-1) + array([string(topic) + array(
        [i32(p) + i64(base_ts + 500) for p in range(parts)])])
    last_seed = time.monotonic()
    while not ctx.stop.is_set():
        try:
            if time.monotonic() - last_seed > 10:
                last_seed = time.monotonic()
                try:
                    seed()
                except (Closed, TimedOut):
                    pass
            c = Conn(ctx.addr, ctx.stop)
        except Closed:
            ctx.add(ATTEMPTS)
            ctx.add(CLOSED)
            ctx.sleep(1)
            continue
        except Stopped:
            return
        try:
            n = ctx.o["lookups"]
            c.send(*[frame(2, 1, c.next_corr(), body) for _ in range(n)])
            for k in range(n):
                def once():
                    r = Reader(c.read_frame(60), 4)
                    errs = []
                    for _ in range(r.i32()):
                        r.string()
                        for _ in range(r.i32()):
                            r.i32()
                            errs.append(r.i16())
                            r.i64()
                            r.i64()
                    return all(e == 0 for e in errs)
                which = ctx.outcome(once)
                if which in (CLOSED, TIMEOUT):  # the rest were sent too
                    ctx.add(ATTEMPTS, n - k - 1)
                    ctx.add(which, n - k - 1)
                    break
        except (Closed, TimedOut):
            pass
        except Stopped:
            return
        finally:
            c.close()


# 5 ----------------------------------------------------------------------

def attack_5(ctx):
    import select
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = ctx.o["half_open"] + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(want, soft)), hard))
    yield f"{ctx.o['half_open']} connections, 2 bytes each"
    socks = [None] * ctx.o["half_open"]
    host, port = ctx.addr
    while not ctx.stop.is_set():
        for i, s in enumerate(socks):
            if s is not None or ctx.stop.is_set():
                continue
            ctx.add(ATTEMPTS)
            try:
                s = socket.create_connection((host, port), timeout=2)
                s.sendall(b"\x00\x00")
                s.setblocking(False)
                socks[i] = s
            except OSError:
                ctx.add(CLOSED)
        # Which did the broker close? (readable and EOF/reset)
        live = [s for s in socks if s is not None]
        p = select.poll()
        fds = {}
        for s in live:
            p.register(s.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
            fds[s.fileno()] = s
        for fd, _ in p.poll(0):
            s = fds[fd]
            try:
                data = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                ctx.add(CLOSED)
                s.close()
                socks[socks.index(s)] = None
        ctx.sleep(1)
    held = sum(1 for s in socks if s is not None)
    ctx.add(OK, held)
    with ctx.c.get_lock():
        ctx.c[EXTRA] = held
    for s in socks:
        if s is not None:
            s.close()


# 6 ----------------------------------------------------------------------

def attack_6(ctx):
    topic = f"hostile-6-{ctx.run_id}"
    ensure_topic(ctx, topic, 1)
    value = os.urandom(60_000)
    recs = b"".join(record(i, 0, value) for i in range(16))
    batch = record_batch(recs, 16)
    n_batches = math.ceil(ctx.o["fetch_fill_mib"] * MIB / len(batch))
    c = Conn(ctx.addr, ctx.stop)
    errs = set()
    try:
        for _ in range(n_batches):
            errs |= set(produce_once(c, topic, {0: batch}))
    finally:
        c.close()
    reps = ctx.o["fetch_repeats"]
    yield (f"partition holds {n_batches * len(batch):,} B (produce errors {sorted(errs)}), "
           f"named {reps} times")
    body = (i32(-1) + i32(0) + i32(1) + i32(I32_MAX) + i8(0)
            + array([string(topic) + array([i32(0) + i64(0) + i32(I32_MAX)] * reps)]))
    while not ctx.stop.is_set():
        def once():
            c = Conn(ctx.addr, ctx.stop)
            try:
                c.send(frame(1, 4, c.next_corr(), body))
                size, head = c.read_frame(60, keep=64)
                with ctx.c.get_lock():
                    ctx.c[EXTRA] = max(ctx.c[EXTRA], size)
                r = Reader(head, 4)
                r.i32()  # throttle
                if r.i32() < 1:
                    return False
                r.string()
                if r.i32() < 1:
                    return False
                r.i32()
                return r.i16() == 0
            finally:
                c.close()
        try:
            ctx.outcome(once)
        except Stopped:
            return
        ctx.sleep(0.5)


# 7 ----------------------------------------------------------------------

def attack_7(ctx):
    nt, np_ = ctx.o["create_topics"], ctx.o["create_partitions"]
    yield f"{nt} topics x {np_} partitions per request"
    round_ = 0
    while not ctx.stop.is_set():
        round_ += 1
        t0 = time.monotonic()
        names = [(f"hostile-7-{ctx.run_id}-{round_}-{k}", np_) for k in range(nt)]

        def once():
            c = Conn(ctx.addr, ctx.stop)
            try:
                c.send(frame(19, 4, c.next_corr(), create_topics_body(names, 60000)))
                r = Reader(c.read_frame(90), 4)
                r.i32()
                errs = []
                for _ in range(r.i32()):
                    r.string()
                    errs.append(r.i16())
                    r.string()
                return all(e == 0 for e in errs)
            finally:
                c.close()
        try:
            ctx.outcome(once)
        except Stopped:
            return
        ctx.sleep(max(0.0, ctx.o["create_interval"] - (time.monotonic() - t0)))


# 8 ----------------------------------------------------------------------

def attack_8(ctx):
    nt = ctx.o["metadata_topics"]
    yield f"{nt} unknown topics per request, allow_auto_topic_creation"
    round_ = 0
    while not ctx.stop.is_set():
        round_ += 1
        t0 = time.monotonic()
        body = array(string(f"hostile-8-{ctx.run_id}-{round_}-{k}") for k in range(nt)) + i8(1)

        def once():
            c = Conn(ctx.addr, ctx.stop)
            try:
                c.send(frame(3, 4, c.next_corr(), body))
                r = Reader(c.read_frame(90), 4)
                r.i32()
                for _ in range(r.i32()):
                    r.i32()
                    r.string()
                    r.i32()
                    r.string()
                r.string()
                r.i32()
                errs = []
                for _ in range(r.i32()):
                    errs.append(r.i16())
                    r.string()
                    r.i8()
                    for _ in range(r.i32()):
                        r.i16()
                        r.i32()
                        r.i32()
                        # Read the count first: `r.pos += 4 * r.i32()` would
                        # add to the position from before the count was read.
                        for _ in range(2):  # replica nodes, isr nodes
                            n = r.i32()
                            r.pos += 4 * n
                # 5 LEADER_NOT_AVAILABLE is Kafka's answer for a topic it just created.
                return all(e in (0, 5) for e in errs)
            finally:
                c.close()
        try:
            ctx.outcome(once)
        except Stopped:
            return
        ctx.sleep(max(0.0, ctx.o["metadata_interval"] - (time.monotonic() - t0)))


ATTACKS = {1: attack_1, 2: attack_2, 3: attack_3, 4: attack_4, 5: attack_5, 6: attack_6,
           7: attack_7, 8: attack_8}


def attacker_main(n, addr, ready, go, stop, counts, opts, run_id, info_q):
    """Entry point of one attacker process."""
    ctx = Ctx(addr, stop, counts, opts, run_id)
    gen = ATTACKS[n](ctx)
    try:
        info = next(gen)
    except Exception as e:  # noqa: BLE001 - reported, the attack then did not run
        info_q.put((n, f"PREPARE FAILED: {type(e).__name__}: {e}"))
        ready.set()
        return
    info_q.put((n, info))
    ready.set()
    go.wait()
    if stop.is_set():
        return
    try:
        for _ in gen:
            pass
    except Stopped:
        pass
    except Exception as e:  # noqa: BLE001
        info_q.put((n, f"CRASHED: {type(e).__name__}: {e}"))


# --------------------------------------------------------------------------
# The broker's memory.

def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / kb.CLK_TCK
    except OSError:
        return None


class Memory:
    """RSS samples every interval; a 20 ms safety watch."""

    def __init__(self, pid, interval_s, abort_mib, kill_mib, on_abort, on_kill):
        self.pid = pid
        self.interval = interval_s
        self.abort_kib = abort_mib * 1024
        self.kill_kib = kill_mib * 1024
        self.on_abort = on_abort
        self.on_kill = on_kill
        self.samples = []  # (t, rss KiB)
        self.max_rss = 0
        self.hwm = 0
        self.max_fds = 0
        self.max_threads = 0
        self.aborted = None
        self.killed = None
        self.mark = None  # the phase the sampler is in
        self.max_by_phase = {}
        self._stop = threading.Event()
        self.t0 = time.monotonic()
        self._threads = [threading.Thread(target=self._sample, daemon=True),
                         threading.Thread(target=self._watch, daemon=True)]
        for t in self._threads:
            t.start()

    def _sample(self):
        last_fd = 0.0
        while not self._stop.is_set():
            st = proc_status(self.pid)
            if "VmRSS" in st:
                rss = st["VmRSS"]
                self.samples.append((time.monotonic() - self.t0, rss))
                self.max_rss = max(self.max_rss, rss)
                self.hwm = max(self.hwm, st.get("VmHWM", 0))
                self.max_threads = max(self.max_threads, st.get("Threads", 0))
                if self.mark:
                    self.max_by_phase[self.mark] = max(self.max_by_phase.get(self.mark, 0), rss)
            if time.monotonic() - last_fd >= 1.0:
                last_fd = time.monotonic()
                n = fd_count(self.pid)
                if n is not None:
                    self.max_fds = max(self.max_fds, n)
            self._stop.wait(self.interval)

    def _watch(self):
        while not self._stop.is_set():
            rss = proc_status(self.pid).get("VmRSS")
            if rss is not None:
                if rss > self.abort_kib and self.aborted is None:
                    self.aborted = (time.monotonic() - self.t0, rss)
                    self.on_abort(rss)
                if rss > self.kill_kib and self.killed is None:
                    self.killed = (time.monotonic() - self.t0, rss)
                    self.on_kill(rss)
            self._stop.wait(0.02)

    def close(self):
        st = proc_status(self.pid)
        self.hwm = max(self.hwm, st.get("VmHWM", 0))
        self._stop.set()
        for t in self._threads:
            t.join(2)


# --------------------------------------------------------------------------
# The well-behaved client.

VALUE_LEN = 100


class WellBehaved:
    def __init__(self, bootstrap, topic, partitions, rate):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.phase = "warmup"
        self.sent = {}  # seq -> (phase, t_ns)
        self.acked = {}  # seq -> (partition, offset, value)
        self.produce_lat = {}  # phase -> [s]
        self.delivery_errors = {}  # phase -> n
        self.errors_seen = []
        self.buffer_full = 0
        self.fetch_lat = {}  # phase -> [s]
        self.consumed = set()
        self.consume_errors = 0
        self._stop_produce = threading.Event()
        self._stop_consume = threading.Event()
        self.producer = Producer(kb.producer_config(bootstrap, **{
            "delivery.report.only.error": False,
            "queue.buffering.max.messages": 100_000,
            "queue.buffering.max.kbytes": 65536,
            "batch.size": 64 * 1024,
            "message.max.bytes": 1_000_000,
            "error_cb": lambda e: self.errors_seen.append(("producer", str(e))),
        }))
        self.producer.list_topics(topic, timeout=30)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": "kaas-hostile-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 100,
            "enable.partition.eof": False,
            "error_cb": lambda e: self.errors_seen.append(("consumer", str(e))),
        })
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self._pt = threading.Thread(target=self._produce, daemon=True)
        self._ct = threading.Thread(target=self._consume, daemon=True)
        self._pt.start()
        self._ct.start()

    @staticmethod
    def parse(value):
        parts = value.split(b" ", 3)
        return int(parts[1]), int(parts[2])

    def _on_delivery(self, err, msg):
        now = time.monotonic_ns()
        seq, t0 = self.parse(msg.value())
        phase = self.sent[seq][0]
        if err is not None:
            self.delivery_errors[phase] = self.delivery_errors.get(phase, 0) + 1
            if len(self.errors_seen) < 50:
                self.errors_seen.append(("delivery", str(err)))
            return
        self.acked[seq] = (msg.partition(), msg.offset(), msg.value())
        self.produce_lat.setdefault(phase, []).append((now - t0) / 1e9)

    def _produce(self):
        p = self.producer
        interval = 1.0 / self.rate
        nxt = time.perf_counter()
        seq = 0
        while not self._stop_produce.is_set():
            now = time.perf_counter()
            if now < nxt:
                p.poll(min(nxt - now, 0.05))
                continue
            seq += 1
            t = time.monotonic_ns()
            value = b"wb %d %d " % (seq, t)
            value += b"." * (VALUE_LEN - len(value))
            self.sent[seq] = (self.phase, t)
            try:
                p.produce(self.topic, value, on_delivery=self._on_delivery)
            except BufferError:
                del self.sent[seq]
                seq -= 1
                self.buffer_full += 1
                p.poll(0.01)
                continue
            nxt += interval
            if nxt < now - 1.0:
                nxt = now
        p.flush(self.drain_s)
        # Whatever is still queued now counts as never acknowledged.

    def _consume(self):
        c = self.consumer
        while not self._stop_consume.is_set():
            msgs = c.consume(num_messages=500, timeout=0.1)
            now = time.monotonic_ns()
            for m in msgs:
                if m.error() is not None:
                    self.consume_errors += 1
                    continue
                try:
                    seq, t0 = self.parse(m.value())
                except (ValueError, IndexError):
                    continue
                if seq in self.consumed:
                    continue
                self.consumed.add(seq)
                phase = self.sent.get(seq, ("?", 0))[0]
                self.fetch_lat.setdefault(phase, []).append((now - t0) / 1e9)

    def stop(self, drain_s, consume_grace_s):
        self.drain_s = drain_s
        self._stop_produce.set()
        self._pt.join(drain_s + 10)
        # Let the live consumer catch up with everything acknowledged.
        end = time.monotonic() + consume_grace_s
        while time.monotonic() < end and not set(self.acked) <= self.consumed:
            time.sleep(0.1)
        self._stop_consume.set()
        self._ct.join(10)
        try:
            self.consumer.close()
        except Exception:  # noqa: BLE001
            pass
        try:
            self.producer.purge()
        except Exception:  # noqa: BLE001
            pass

    def phase_stats(self, phase):
        sent = [s for s, (ph, _) in self.sent.items() if ph == phase]
        acked = [s for s in sent if s in self.acked]
        lat = sorted(self.produce_lat.get(phase, []))
        not_acked = len(sent) - len(acked)
        plat = lat + [math.inf] * not_acked
        fl = sorted(self.fetch_lat.get(phase, []))
        never_fetched = sum(1 for s in acked if s not in self.consumed)
        flat = fl + [math.inf] * never_fetched
        return {
            "produced": len(sent), "acked": len(acked), "not_acked": not_acked,
            "delivery_errors": self.delivery_errors.get(phase, 0),
            "produce_p50_ms": pct(plat, 50) * 1000, "produce_p99_ms": pct(plat, 99) * 1000,
            "produce_max_ms": (plat[-1] if plat else math.nan) * 1000,
            "fetched": len(fl), "acked_never_fetched": never_fetched,
            "fetch_p50_ms": pct(flat, 50) * 1000, "fetch_p99_ms": pct(flat, 99) * 1000,
            "fetch_max_ms": (flat[-1] if flat else math.nan) * 1000,
        }


class ConnectProbe:
    """A client arriving while the attack runs: every --probe-interval s a
    new TCP connection sends ApiVersions v0 and waits for the answer (10 s);
    the time from connect() to the answer, a failure counted as infinite."""

    def __init__(self, addr, interval):
        self.addr = addr
        self.interval = interval
        self.phase = "warmup"
        self.lat = {}
        self.failed = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            phase = self.phase
            t0 = time.monotonic()
            try:
                c = Conn(self.addr, self._stop, connect_timeout=10)
                try:
                    c.send(frame(18, 0, 1, b""), timeout=10)
                    c.read_frame(10)
                finally:
                    c.close()
                self.lat.setdefault(phase, []).append(time.monotonic() - t0)
            except (Closed, TimedOut):
                self.failed[phase] = self.failed.get(phase, 0) + 1
            except Stopped:
                return
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        self._t.join(15)

    def stats(self, phase):
        lat = sorted(self.lat.get(phase, [])) + [math.inf] * self.failed.get(phase, 0)
        return {"probes": len(lat), "failed": self.failed.get(phase, 0),
                "p50_ms": pct(lat, 50) * 1000, "p99_ms": pct(lat, 99) * 1000}


def pct(sorted_vals, p):
    if not sorted_vals:
        return math.nan
    k = min(len(sorted_vals) - 1, max(0, math.ceil(p / 100 * len(sorted_vals)) - 1))
    return sorted_vals[k]


def read_back(bootstrap, topic, partitions, timeout_s=120):
    """Every (partition, offset, value) of the topic, from a fresh consumer."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kaas-hostile-verify",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "auto.offset.reset": "earliest"})
    highs = {}
    for p in range(partitions):
        _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        highs[p] = hi
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    done = {p for p, hi in highs.items() if hi <= 0}
    end = time.monotonic() + timeout_s
    while len(done) < partitions and time.monotonic() < end:
        for m in c.consume(num_messages=1000, timeout=1.0):
            if m.error() is not None:
                if m.error().code() == -191:  # _PARTITION_EOF
                    if m.offset() >= highs[m.partition()]:
                        done.add(m.partition())
                continue
            out.append((m.partition(), m.offset(), m.value()))
            if m.offset() + 1 >= highs[m.partition()]:
                done.add(m.partition())
    c.close()
    return out, highs, len(done) == partitions


# --------------------------------------------------------------------------


def broker_log_counts(broker):
    """How often the started broker's log mentions a few failure kinds."""
    if broker is None:
        return None
    lines = list(broker.stderr_lines)
    keys = {"too many open files": "Too many open files", "panic": "panicked",
            "WARN lines": " WARN ", "ERROR lines": " ERROR "}
    return {k: sum(1 for ln in lines if pat in ln) for k, pat in keys.items()}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="use this broker (HOST:PORT) instead of starting kaas; needs --pid")
    ap.add_argument("--pid", type=int, help="the --bootstrap broker's process id (for its RSS)")
    ap.add_argument("--kaas", default=kb.DEFAULT_KAAS, help="kaas binary (default: %(default)s)")
    ap.add_argument("--data-dir", help="the started broker's data dir (default: fresh under target/bench-data)")
    ap.add_argument("--seconds", type=float, default=60, help="attack phase (default: %(default)s)")
    ap.add_argument("--ref-seconds", type=float, default=10, help="reference phase (default: %(default)s)")
    ap.add_argument("--warmup-seconds", type=float, default=2, help="(default: %(default)s)")
    ap.add_argument("--drain-seconds", type=float, default=30,
                    help="how long the producer waits for its last acks (default: %(default)s)")
    ap.add_argument("--attacks", default="1,2,3,4,5,6,7,8", help="which attacks (default: %(default)s)")
    ap.add_argument("--rate", type=float, default=200, help="well-behaved records/s (default: %(default)s)")
    ap.add_argument("--rss-bound-mib", type=float, default=512, help="(default: %(default)s)")
    ap.add_argument("--p99-bound-ms", type=float, default=1000, help="(default: %(default)s)")
    ap.add_argument("--rss-interval-ms", type=float, default=200, help="(default: %(default)s)")
    ap.add_argument("--rss-abort-mib", type=float, default=2048,
                    help="stop every attacker when the broker's RSS passes this (default: %(default)s)")
    ap.add_argument("--rss-kill-mib", type=float, default=3072,
                    help="SIGKILL a broker this bench started when its RSS passes this (default: %(default)s)")
    ap.add_argument("--max-request-bytes", type=int, default=100 << 20,
                    help="size of the attack-1 frame: the broker's --max-request-bytes (default: %(default)s)")
    ap.add_argument("--flood-interval", type=float, default=3, help="attack 1 period, s (default: %(default)s)")
    ap.add_argument("--bomb-mib", type=int, default=256, help="attacks 2, 4 (default: %(default)s)")
    ap.add_argument("--forged", type=int, default=50, help="attack 3 (default: %(default)s)")
    ap.add_argument("--lookups", type=int, default=48, help="attack 4 (default: %(default)s)")
    ap.add_argument("--half-open", type=int, default=1040, help="attack 5 (default: %(default)s)")
    ap.add_argument("--fetch-repeats", type=int, default=360, help="attack 6 (default: %(default)s)")
    ap.add_argument("--fetch-fill-mib", type=float, default=8, help="attack 6 (default: %(default)s)")
    ap.add_argument("--create-topics", type=int, default=12, help="attack 7 (default: %(default)s)")
    ap.add_argument("--create-partitions", type=int, default=10_000, help="attack 7 (default: %(default)s)")
    ap.add_argument("--create-interval", type=float, default=10, help="attack 7 period, s (default: %(default)s)")
    ap.add_argument("--metadata-topics", type=int, default=10_000, help="attack 8 (default: %(default)s)")
    ap.add_argument("--metadata-interval", type=float, default=5,
                    help="attack 8 period, s (default: %(default)s)")
    ap.add_argument("--probe-interval", type=float, default=2,
                    help="new-connection probe period, s (default: %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the data dir")
    ap.add_argument("--json", help="also write every figure to this file")
    args = ap.parse_args()
    if args.bootstrap and not args.pid:
        ap.error("--bootstrap needs --pid (the broker's RSS is the point)")
    try:
        args.attack_list = sorted({int(x) for x in args.attacks.split(",") if x.strip()})
    except ValueError:
        ap.error("--attacks takes numbers 1-8, comma-separated")
    if any(a not in ATTACKS for a in args.attack_list):
        ap.error("--attacks takes numbers 1-8")
    return args


def fmt_ms(v):
    return "inf" if v == math.inf else ("-" if v != v else f"{v:.1f}")


def main():
    args = parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    run_id = f"{os.getpid()}-{int(time.time())}"
    broker = None
    data = None
    procs = []
    stop = None
    result = {"started": started, "argv": sys.argv, "attacks": args.attack_list}
    verdicts = {}
    try:
        if args.bootstrap:
            bootstrap, pid = args.bootstrap, args.pid
            kb.log(f"using broker {bootstrap} pid {pid}")
        else:
            data = args.data_dir or kb.fresh_dir(kb.DEFAULT_DATA_ROOT, "hostile")
            os.makedirs(data, exist_ok=True)
            broker = kb.Kaas(args.kaas, data).start()
            bootstrap, pid = broker.addr, broker.pid
            kb.log(f"kaas pid {pid} on {bootstrap}, data {data}, metrics {broker.metrics_addr}")
            result["broker_command"] = " ".join(broker.command())
        host, port = bootstrap.rsplit(":", 1)
        addr = (host, int(port))
        try:
            with open(f"/proc/{pid}/limits") as f:
                nofile = next((ln.split()[3:5] for ln in f if ln.startswith("Max open files")), None)
        except OSError:
            nofile = None
        result["broker_nofile_limit"] = nofile

        # Attackers: prepare (build, seed) first, before any timing.
        ctx = mp.get_context("spawn")
        stop = ctx.Event()
        go = ctx.Event()
        info_q = ctx.Queue()
        opts = {k: getattr(args, k) for k in (
            "max_request_bytes", "flood_interval", "bomb_mib", "forged", "lookups", "half_open",
            "fetch_repeats", "fetch_fill_mib", "create_topics", "create_partitions",
            "create_interval", "metadata_topics", "metadata_interval")}
        counts = {}
        readies = []
        for n in args.attack_list:
            counts[n] = ctx.Array("q", 6)
            ready = ctx.Event()
            readies.append(ready)
            pr = ctx.Process(target=attacker_main, name=f"attack-{n}",
                             args=(n, addr, ready, go, stop, counts[n], opts, run_id, info_q),
                             daemon=True)
            pr.start()
            procs.append(pr)
        t_prep = time.monotonic()
        for r in readies:
            r.wait(300)
        infos = {}
        for _ in args.attack_list:
            try:
                n, info = info_q.get(timeout=10)
            except queue.Empty:
                break
            infos[n] = info
        kb.log(f"attackers prepared in {time.monotonic() - t_prep:.1f} s")
        for n in args.attack_list:
            kb.log(f"  {n} {ATTACK_NAMES[n]}: {infos.get(n, '?')}")

        def on_abort(rss):
            kb.log(f"!! broker RSS {rss / 1024:.0f} MiB > --rss-abort-mib {args.rss_abort_mib}: "
                   "stopping every attacker")
            stop.set()

        def on_kill(rss):
            if broker is not None:
                kb.log(f"!! broker RSS {rss / 1024:.0f} MiB > --rss-kill-mib {args.rss_kill_mib}: SIGKILL")
                broker.proc.kill()

        mem = Memory(pid, args.rss_interval_ms / 1000, args.rss_abort_mib, args.rss_kill_mib,
                     on_abort, on_kill)
        mem.mark = "setup"

        # The well-behaved client, its own topic.
        wb_topic = f"well-behaved-{run_id}"
        kb.create_topic(bootstrap, wb_topic, 2)
        wb = WellBehaved(bootstrap, wb_topic, 2, args.rate)
        probe = ConnectProbe(addr, args.probe_interval)
        time.sleep(args.warmup_seconds)
        kb.log(f"reference: {args.ref_seconds} s of the well-behaved load, no attackers")
        wb.phase = probe.phase = "reference"
        mem.mark = "reference"
        time.sleep(args.ref_seconds)

        kb.log(f"attack: {args.seconds} s, attacks {args.attacks}")
        wb.phase = probe.phase = "attack"
        mem.mark = "attack"
        cpu0 = cpu_seconds(pid)
        t_attack = time.monotonic()
        go.set()
        last_log = 0.0
        while time.monotonic() - t_attack < args.seconds and not stop.is_set():
            time.sleep(0.1)
            if time.monotonic() - last_log >= 5:
                last_log = time.monotonic()
                cs = " ".join(f"{n}:{counts[n][ATTEMPTS]}/{counts[n][ERROR]}/{counts[n][CLOSED]}/"
                              f"{counts[n][TIMEOUT]}/{counts[n][OK]}" for n in args.attack_list)
                kb.log(f"  t={time.monotonic() - t_attack:4.0f}s RSS {mem.samples[-1][1] / 1024 if mem.samples else 0:.0f} MiB "
                       f"acked {len(wb.acked)} fetched {len(wb.consumed)}  attempts/error/closed/timeout/ok {cs}")
        attack_s = time.monotonic() - t_attack
        cpu1 = cpu_seconds(pid)
        stop.set()
        wb.phase = probe.phase = "drain"
        mem.mark = "drain"
        kb.log(f"stopping attackers after {attack_s:.1f} s")
        for pr in procs:
            pr.join(20)
        for pr in procs:
            if pr.is_alive():
                kb.log(f"attacker {pr.name} did not stop; terminating pid {pr.pid}")
                pr.terminate()
                pr.join(5)
        while not info_q.empty():
            n, info = info_q.get()
            infos[n] = infos.get(n, "") + " | " + info
        kb.log("draining the well-behaved producer")
        wb.stop(args.drain_seconds, 10)
        probe.stop()
        broker_alive = (broker.proc.poll() is None) if broker else os.path.exists(f"/proc/{pid}")

        # Read back.
        mem.mark = "verify"
        acked = dict(wb.acked)
        readback, highs, complete = [], {}, False
        readback_error = None
        if broker_alive:
            try:
                readback, highs, complete = read_back(bootstrap, wb_topic, 2)
            except Exception as e:  # noqa: BLE001 - reported as a failed verdict
                readback_error = f"{type(e).__name__}: {e}"
        else:
            readback_error = "broker not running"
        at = {}
        by_value = {}
        for p, o, v in readback:
            at[(p, o)] = v
            by_value[v] = by_value.get(v, 0) + 1
        missing = sum(1 for (p, o, v) in acked.values() if at.get((p, o)) != v)
        duplicated = sum(1 for v, k in by_value.items() if k > 1)
        mem.close()

        ref = wb.phase_stats("reference")
        att = wb.phase_stats("attack")
        per_attack = {n: dict(zip(COUNTER_NAMES, counts[n][:])) for n in args.attack_list}
        peak_kib = max(mem.max_rss, mem.hwm)
        result.update({
            "bootstrap": bootstrap, "pid": pid, "attack_seconds": attack_s,
            "rss_max_MiB": mem.max_rss / 1024, "vmhwm_MiB": mem.hwm / 1024,
            "rss_max_by_phase_MiB": {k: v / 1024 for k, v in mem.max_by_phase.items()},
            "rss_bound_MiB": args.rss_bound_mib, "rss_samples": len(mem.samples),
            "broker_max_fds": mem.max_fds, "broker_max_threads": mem.max_threads,
            "broker_cpu_s_attack": (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None,
            "aborted": mem.aborted, "killed": mem.killed, "broker_alive": broker_alive,
            "reference": ref, "attack": att,
            "connect_probe": {"reference": probe.stats("reference"), "attack": probe.stats("attack")},
            "broker_log": broker_log_counts(broker),
            "acked": len(acked), "read_back": len(readback), "read_back_complete": complete,
            "read_back_error": readback_error, "high_watermarks": highs,
            "missing": missing, "duplicated": duplicated,
            "buffer_full": wb.buffer_full, "client_errors": wb.errors_seen[:20],
            "per_attack": per_attack, "attack_info": infos,
            "load_average_end": os.getloadavg()[0],
        })
        verdicts = {
            f"broker RSS peak < {args.rss_bound_mib:.0f} MiB": peak_kib / 1024 < args.rss_bound_mib,
            f"produce p99 under attack < {args.p99_bound_ms:.0f} ms": att["produce_p99_ms"] < args.p99_bound_ms,
            f"fetch p99 under attack < {args.p99_bound_ms:.0f} ms": att["fetch_p99_ms"] < args.p99_bound_ms,
            "every acknowledged record read back exactly once": (
                readback_error is None and complete and missing == 0 and duplicated == 0 and len(acked) > 0),
            "every selected attack made attempts": all(c["attempts"] > 0 for c in per_attack.values()),
            "broker still running, no safety cut-off": broker_alive and mem.aborted is None,
        }
        result["verdicts"] = verdicts
        result["pass"] = all(verdicts.values())
    finally:
        if stop is not None:
            stop.set()
        for pr in procs:
            if pr.is_alive():
                pr.terminate()
                pr.join(5)
        if broker is not None:
            broker.stop(timeout=60)

    report(args, result)
    sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2, default=str)
    # After the report: a data dir with the partitions of attacks 7 and 8
    # takes minutes to delete.
    if broker is not None and not args.keep and data:
        kb.log(f"removing {data}")
        kb.remove(data)
        if result.get("pass"):
            kb.remove_file(broker.log_path)
    sys.exit(0 if result.get("pass") else 1)


def report(args, r):
    if "verdicts" not in r:
        print("# hostile_bench did not finish")
        return
    print(f"# hostile_bench {r['started']}; attacks {','.join(map(str, r['attacks']))} for "
          f"{r['attack_seconds']:.1f} s; cores {os.cpu_count()}; load average at end "
          f"{r['load_average_end']:.2f}")
    print(f"# broker: {r.get('broker_command') or (args.bootstrap + ' pid ' + str(args.pid))}; "
          f"open-files limit {r['broker_nofile_limit']}")
    print()
    print(f"broker memory: max RSS {r['rss_max_MiB']:.0f} MiB ({r['rss_samples']} samples every "
          f"{args.rss_interval_ms:.0f} ms), VmHWM {r['vmhwm_MiB']:.0f} MiB, bound {r['rss_bound_MiB']:.0f} MiB; "
          "by phase: " + ", ".join(f"{k} {v:.0f}" for k, v in r["rss_max_by_phase_MiB"].items()))
    print(f"broker: max open fds {r['broker_max_fds']}, max threads {r['broker_max_threads']}, CPU during "
          f"attack {r['broker_cpu_s_attack'] if r['broker_cpu_s_attack'] is None else round(r['broker_cpu_s_attack'], 1)} s, "
          f"alive at end: {r['broker_alive']}")
    if r["aborted"]:
        print(f"SAFETY CUT-OFF: attack stopped at t={r['aborted'][0]:.1f} s (RSS {r['aborted'][1] / 1024:.0f} MiB)"
              + (f"; broker SIGKILLed at t={r['killed'][0]:.1f} s (RSS {r['killed'][1] / 1024:.0f} MiB)"
                 if r["killed"] else ""))
    print()
    ref, att = r["reference"], r["attack"]

    def ratio(a, b):
        return "-" if not b or b != b or a != a else ("inf" if a == math.inf else f"{a / b:.1f}x")
    print(f"{'well-behaved client':<22} {'produced':>8} {'acked':>6} {'not acked':>9} "
          f"{'prod p50 ms':>11} {'prod p99 ms':>11} {'prod max ms':>11} {'fetched':>7} "
          f"{'never fetched':>13} {'fetch p50 ms':>12} {'fetch p99 ms':>12}")
    for name, s in (("reference (no attack)", ref), ("under attack", att)):
        print(f"{name:<22} {s['produced']:>8} {s['acked']:>6} {s['not_acked']:>9} "
              f"{fmt_ms(s['produce_p50_ms']):>11} {fmt_ms(s['produce_p99_ms']):>11} "
              f"{fmt_ms(s['produce_max_ms']):>11} {s['fetched']:>7} {s['acked_never_fetched']:>13} "
              f"{fmt_ms(s['fetch_p50_ms']):>12} {fmt_ms(s['fetch_p99_ms']):>12}")
    print(f"p99 under attack / reference: produce {ratio(att['produce_p99_ms'], ref['produce_p99_ms'])}, "
          f"fetch {ratio(att['fetch_p99_ms'], ref['fetch_p99_ms'])}")
    cp = r["connect_probe"]
    print(f"new-connection probe (connect + ApiVersions, every {args.probe_interval:g} s; not a verdict): "
          + "; ".join(f"{ph} {st['probes']} probes, {st['failed']} failed, p50 {fmt_ms(st['p50_ms'])} ms, "
                      f"p99 {fmt_ms(st['p99_ms'])} ms" for ph, st in cp.items()))
    if r.get("broker_log"):
        print("broker log: " + ", ".join(f"{k} {v}" for k, v in r["broker_log"].items()))
    print(f"read back: acknowledged {r['acked']}, read back {r['read_back']} "
          f"(complete: {r['read_back_complete']}), missing {r['missing']}, duplicated {r['duplicated']}"
          + (f"; error: {r['read_back_error']}" if r["read_back_error"] else ""))
    print()
    print(f"{'attack':<48} {'attempts':>8} {'error':>7} {'closed':>7} {'timeout':>7} {'ok':>7} "
          f"{'unfinished':>10}  note")
    for n, c in r["per_attack"].items():
        extra = f"{EXTRA_NAMES[n]} {c['extra']:,}" if EXTRA_NAMES[n] else ""
        print(f"{str(n) + ' ' + ATTACK_NAMES[n]:<48} {c['attempts']:>8} {c['error']:>7} {c['closed']:>7} "
              f"{c['timeout']:>7} {c['ok']:>7} "
              f"{c['attempts'] - c['error'] - c['closed'] - c['timeout'] - c['ok']:>10}  {extra}")
    for n, info in r["attack_info"].items():
        print(f"  {n}: {info}")
    if r["client_errors"]:
        print("client errors (first): " + "; ".join(f"{a}: {b}" for a, b in r["client_errors"][:5]))
    print()
    for k, v in r["verdicts"].items():
        print(f"{'PASS' if v else 'FAIL'}  {k}")
    print(f"overall: {'PASS' if r['pass'] else 'FAIL'}")


if __name__ == "__main__":
    main()
