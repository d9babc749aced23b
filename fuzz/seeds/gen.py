#!/usr/bin/env python3
"""Writes the seed inputs under fuzz/seeds/<target>/ (run from anywhere).

Hand-built, well-formed inputs the fuzzer mutates from: request frames of
every API the broker accepts, record batches in every codec (with valid
CRC-32C), state records and producer snapshots. Python's standard library
only: CRC-32C, xxHash32 (LZ4 frame header), a literal-only snappy block and
a raw-block zstd frame are written out here.
"""
import gzip
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))


def out(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- primitives -----------------------------------------------------------

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def xxh32(data, seed=0):
    P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    M = 0xFFFFFFFF
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & M
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed & M, (seed - P1) & M]
        while i + 16 <= n:
            for k in range(4):
                lane = struct.unpack_from("<I", data, i + 4 * k)[0]
                v[k] = (rotl((v[k] + lane * P2) & M, 13) * P1) & M
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 4 <= n:
        h = (rotl((h + struct.unpack_from("<I", data, i)[0] * P3) & M, 17) * P4) & M
        i += 4
    while i < n:
        h = (rotl((h + data[i] * P5) & M, 11) * P1) & M
        i += 1
    h ^= h >> 15
    h = (h * P2) & M
    h ^= h >> 13
    h = (h * P3) & M
    h ^= h >> 16
    return h


def uvarint(n):
    b = bytearray()
    while True:
        if n < 0x80:
            b.append(n)
            return bytes(b)
        b.append((n & 0x7F) | 0x80)
        n >>= 7


def varint(n):  # zigzag
    return uvarint((n << 1) ^ (n >> 63) if n < 0 else n << 1)


def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)
def u16(v): return struct.pack(">H", v)
def u32(v): return struct.pack(">I", v)


def string(s, flexible=False):
    if s is None:
        return uvarint(0) if flexible else i16(-1)
    b = s.encode()
    return (uvarint(len(b) + 1) if flexible else i16(len(b))) + b


def nbytes(b, flexible=False):
    if b is None:
        return uvarint(0) if flexible else i32(-1)
    return (uvarint(len(b) + 1) if flexible else i32(len(b))) + b


def array(items, flexible=False):
    return (uvarint(len(items) + 1) if flexible else i32(len(items))) + b"".join(items)


TAGS = b"\x00"  # empty tagged-field section


# ---- record batches -------------------------------------------------------

def record(i, key, value, ts_delta=0, headers=()):
    body = b"\x00" + varint(ts_delta) + varint(i)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        body += varint(len(hk)) + hk + varint(len(hv)) + hv
    return varint(len(body)) + body


def batch(payload, count, attributes=0, ts=1000, max_ts=None, pid=-1, epoch=-1, seq=-1):
    after_crc = (i16(attributes) + i32(count - 1) + i64(ts) + i64(ts if max_ts is None else max_ts)
                 + i64(pid) + i16(epoch) + i32(seq) + i32(count) + payload)
    crc = crc32c(after_crc)
    return i64(0) + i32(4 + 1 + 4 + len(after_crc)) + i32(0) + i8(2) + u32(crc) + after_crc


def snappy_literal(data):
    assert len(data) < 60
    return uvarint(len(data)) + bytes([(len(data) - 1) << 2]) + data


def xerial(data):
    raw = snappy_literal(data)
    return b"\x82SNAPPY\x00" + i32(1) + i32(1) + i32(len(raw)) + raw


def zstd_raw(data):
    # Frame: magic, descriptor (single segment, 1-byte content size), one raw last block.
    hdr = struct.pack("<I", 0xFD2FB528) + bytes([0x20, len(data)])
    block = struct.pack("<I", (len(data) << 3) | 0x1)[:3]  # last block, raw
    return hdr + block + data


def lz4_frame(data):
    desc = bytes([0x60, 0x40])  # version 01, block independence; 64 KiB blocks
    hc = (xxh32(desc) >> 8) & 0xFF
    block = struct.pack("<I", len(data) | 0x80000000) + data  # uncompressed block
    return struct.pack("<I", 0x184D2204) + desc + bytes([hc]) + block + struct.pack("<I", 0)


def seeds_batches():
    recs = [record(0, b"k", b"v0"), record(1, None, b"value-1", ts_delta=5),
            record(2, b"key", b"", ts_delta=9, headers=[(b"h", b"x")])]
    payload = b"".join(recs)
    out("batch_validate", "plain_3_records", batch(payload, 3, ts=1000, max_ts=1009))
    out("batch_validate", "idempotent", batch(recs[0], 1, pid=7, epoch=0, seq=5))
    out("batch_validate", "transactional", batch(recs[0], 1, attributes=0x10, pid=7, epoch=1, seq=0))
    out("batch_validate", "log_append_time", batch(recs[0], 1, attributes=0x08))
    out("batch_validate", "control_refused", batch(recs[0], 1, attributes=0x30, pid=7, epoch=0))
    for name, attr, data in [
        ("gzip", 1, gzip.compress(payload, mtime=0)),
        ("snappy_xerial", 2, xerial(recs[0])),
        ("snappy_raw", 2, snappy_literal(recs[0])),
        ("lz4", 3, lz4_frame(payload)),
        ("zstd", 4, zstd_raw(payload)),
    ]:
        out("batch_validate", name, batch(data, 3 if len(data) > 40 else 1, attributes=attr))
    # Deliberately wrong ones: a huge count, a truncated batch.
    out("batch_validate", "huge_count_gzip",
        batch(gzip.compress(recs[0], mtime=0), 0x7FFFFFFF, attributes=1))
    b = batch(payload, 3)
    out("batch_validate", "truncated", b[:40])


def seeds_compressed():
    # compressed_batch_validate: mode byte (codec in the low 3 bits; 0x80 =
    # the rest is the batch body as is), record count (i32), then plain
    # records (the harness compresses them) or the raw body.
    t = "compressed_batch_validate"
    recs = [record(0, b"k", b"v0"), record(1, None, b"value-1", ts_delta=5),
            record(2, b"key", b"", ts_delta=9, headers=[(b"h", b"x")])]
    payload = b"".join(recs)
    for codec, name in [(1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")]:
        out(t, f"valid_{name}", bytes([codec]) + i32(3) + payload)
        # Garbage that does not decompress (the issue: answered NONE before).
        garbage = bytes((i * 31 + 7) & 0xFF for i in range(300))
        out(t, f"garbage_{name}", bytes([0x80 | codec]) + i32(1) + garbage)
    # The gzip batch claiming 2^31-1 records while holding one.
    out(t, "huge_count_gzip", bytes([1]) + i32(0x7FFFFFFF) + recs[0])
    out(t, "huge_count_gzip_raw", bytes([0x81]) + i32(0x7FFFFFFF) + gzip.compress(recs[0], mtime=0))
    # Inner offsets not sequential, trailing bytes, a record cut short.
    out(t, "offset_delta_zstd", bytes([4]) + i32(2) + record(0, None, b"a") + record(2, None, b"b"))
    out(t, "trailing_lz4", bytes([3]) + i32(1) + recs[0] + b"\x00\x00")
    out(t, "short_record_snappy", bytes([2]) + i32(1) + recs[0][:-1])
    # A header count of 2^31-1 inside one record.
    lying = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(1) + b"v" + varint(0x7FFFFFFF)
    out(t, "header_count_gzip", bytes([1]) + i32(1) + varint(len(lying)) + lying)
    # A gzip bomb: 70 records of 1 MiB of zeros (70 MiB, past the 64 MiB
    # bound) in ~70 KiB.
    zeros = b"\x00" * (1 << 20)
    bomb = b"".join(record(i, None, zeros) for i in range(70))
    out(t, "bomb_gzip", bytes([0x81]) + i32(70) + gzip.compress(bomb, 9, mtime=0))


# ---- request frames -------------------------------------------------------

def frame(api, version, body, header_v2):
    h = i16(api) + i16(version) + i32(42) + string("fuzz")
    if header_v2:
        h += TAGS
    return h + body


def seeds_requests():
    rec = batch(record(0, None, b"v"), 1)
    for v in (3, 8, 9, 10):
        f = v >= 9
        part = i32(0) + nbytes(rec, f) + (TAGS if f else b"")
        topic = string("t", f) + array([part], f) + (TAGS if f else b"")
        body = string(None, f) + i16(1) + i32(30000) + array([topic], f) + (TAGS if f else b"")
        out("request_decode", f"produce_v{v}", frame(0, v, body, f))
    for v in (4, 7, 11, 12, 13, 16):
        f = v >= 12
        p = i32(0) + (i32(-1) if v >= 9 else b"") + i64(0) + (i32(-1) if v >= 12 else b"") \
            + (i64(-1) if v >= 5 else b"") + i32(1 << 20) + (TAGS if f else b"")
        t = (string("t", f) if v <= 12 else b"\x11" * 16) + array([p], f) + (TAGS if f else b"")
        body = (i32(-1) if v <= 14 else b"") + i32(500) + i32(1) + i32(50 << 20) + i8(0)
        if v >= 7:
            body += i32(0) + i32(-1)
        body += array([t], f)
        if v >= 7:
            ft = (string("g", f) if v <= 12 else b"\x22" * 16) + array([i32(1), i32(2)], f) + (TAGS if f else b"")
            body += array([ft], f)
        if v >= 11:
            body += string("rack", f)
        if f:
            body += b"\x01" + uvarint(0) + uvarint(2) + string("c", True)  # cluster_id tag
        out("request_decode", f"fetch_v{v}", frame(1, v, body, f))
    for v in (1, 4, 6, 8):
        f = v >= 6
        p = i32(0) + (i32(-1) if v >= 4 else b"") + i64(-2) + (TAGS if f else b"")
        body = i32(-1) + (i8(0) if v >= 2 else b"") + array([string("t", f) + array([p], f) + (TAGS if f else b"")], f) \
            + (TAGS if f else b"")
        out("request_decode", f"list_offsets_v{v}", frame(2, v, body, f))
    for v in (0, 1, 4, 8, 9, 10, 12):
        f = v >= 9
        t = (b"\x00" * 16 if v >= 10 else b"") + string("t", f) + (TAGS if f else b"")
        body = array([t], f) + (b"\x01" if v >= 4 else b"") + (b"\x00" if 8 <= v <= 10 else b"") \
            + (b"\x00" if v >= 8 else b"") + (TAGS if f else b"")
        out("request_decode", f"metadata_v{v}", frame(3, v, body, f))
    out("request_decode", "metadata_v1_all_topics", frame(3, 1, i32(-1), False))
    for v in (0, 3, 4):
        body = string("kaas", True) + string("1.0", True) + TAGS if v >= 3 else b""
        out("request_decode", f"api_versions_v{v}", frame(18, v, body, v >= 3))
    for v in (2, 5, 7):
        f = v >= 5
        a = i32(0) + array([i32(1)], f) + (TAGS if f else b"")
        c = string("retention.ms", f) + string("1000", f) + (TAGS if f else b"")
        t = string("t", f) + i32(-1) + i16(-1) + array([a], f) + array([c], f) + (TAGS if f else b"")
        body = array([t], f) + i32(1000) + b"\x00" + (TAGS if f else b"")
        out("request_decode", f"create_topics_v{v}", frame(19, v, body, f))
    for v in (1, 4, 6):
        f = v >= 4
        if v >= 6:
            body = array([string("t", True) + b"\x00" * 16 + TAGS], True)
        else:
            body = array([string("t", f)], f)
        body += i32(1000) + (TAGS if f else b"")
        out("request_decode", f"delete_topics_v{v}", frame(20, v, body, f))
    for v in (0, 2):
        f = v >= 2
        p = i32(0) + i64(-1) + (TAGS if f else b"")
        body = array([string("t", f) + array([p], f) + (TAGS if f else b"")], f) + i32(1000) + (TAGS if f else b"")
        out("request_decode", f"delete_records_v{v}", frame(21, v, body, f))
    for v in (0, 2, 4):
        f = v >= 2
        body = string("tx", f) + i32(60000) + (i64(-1) + i16(-1) if v >= 3 else b"") + (TAGS if f else b"")
        out("request_decode", f"init_producer_id_v{v}", frame(22, v, body, f))
    for v in (1, 3, 4):
        f = v >= 4
        r = i8(2) + string("t", f) + array([string("retention.ms", f)], f) + (TAGS if f else b"")
        body = array([r], f) + b"\x00" + (b"\x00" if v >= 3 else b"") + (TAGS if f else b"")
        out("request_decode", f"describe_configs_v{v}", frame(32, v, body, f))
    out("request_decode", "short", b"\x00\x03\x00")


# ---- state records and producer snapshots ---------------------------------

def str16(s):
    b = s.encode()
    return u16(len(b)) + b


def seeds_state():
    upsert = (u16(1) + b"\x00" + str16("orders-tx") + i64(101) + i16(0) + i64(100) + i16(32766)
              + i8(1) + i32(60000) + i64(-1) + i64(1700000000000)
              + u32(2) + str16("t0") + i32(3) + str16("t1") + i32(0)
              + u16(2) + u16(0) + u32(14) + b"apache37@0.1.0" + u16(7) + u32(3) + b"\x01\x02\x03")
    out("state_record", "upsert", upsert)
    out("state_record", "tombstone", u16(1) + b"\x01" + str16("gone"))
    out("state_record", "newer_format", u16(2) + b"\x01" + str16("x"))


def seeds_snapshots():
    def entry(pid, epoch, cepoch, txn, ts, batches):
        b = i64(pid) + i16(epoch) + i32(cepoch) + i64(txn) + i64(ts) + bytes([len(batches)])
        for (f, l, bo, lo, mt) in batches:
            b += i32(f) + i32(l) + i64(bo) + i64(lo) + i64(mt)
        return b
    out("producer_snapshot", "empty", u32(0))
    out("producer_snapshot", "two_producers",
        u32(2) + entry(1, 0, -1, -1, 5, [(0, 1, 0, 1, 5), (2, 4, 2, 4, 5)]) + entry(9, 4, 2, 10, 7, []))
    out("producer_snapshot", "open_txn", u32(1) + entry(3, 1, 0, 42, 9, [(0, 0, 42, 42, 9)]))


if __name__ == "__main__":
    seeds_batches()
    seeds_compressed()
    seeds_requests()
    seeds_state()
    seeds_snapshots()
