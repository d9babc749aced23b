"""Kafka requests spoken as raw bytes to ONE chosen broker.

The cluster tests need to ask a particular broker (a paused one, one that just
took a partition over) something, with a deadline, and to see its exact
answer: real clients pick a broker themselves, retry, and hide error codes. So
this module encodes Metadata v1, Produce v3 (acks=-1), Fetch v4, FindCoordinator
v1, CreateTopics v2, CreatePartitions v1, DeleteTopics v1 and InitProducerId
v0 by hand (all
non-flexible versions: plain big-endian fields) over one socket per call. The
RecordBatch inside a Produce comes from kafka-python's MemoryRecordsBuilder,
and a Fetch's records are read with its MemoryRecords.
"""

import socket
import struct
from dataclasses import dataclass, field

from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

METADATA, PRODUCE, FETCH, FIND_COORDINATOR = 3, 0, 1, 10
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
INIT_PRODUCER_ID = 22
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 3, 6
INVALID_PRODUCER_EPOCH = 47
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS = 36, 37

_CLIENT_ID = b"kaas-cluster-test"


class WireError(Exception):
    """The broker could not be reached, closed the connection or timed out."""


def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _call(addr: str, api_key: int, version: int, body: bytes, timeout: float) -> bytes:
    host, port = addr.rsplit(":", 1)
    header = struct.pack(">hhi", api_key, version, 1) + struct.pack(">h", len(_CLIENT_ID)) + _CLIENT_ID
    frame = header + body
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(frame)) + frame)
            size = struct.unpack(">i", _read_exact(s, 4))[0]
            data = _read_exact(s, size)
    except (OSError, struct.error) as e:
        raise WireError(f"{addr}: api {api_key} v{version}: {e!r}") from e
    corr = struct.unpack(">i", data[:4])[0]
    if corr != 1:
        raise WireError(f"{addr}: correlation id {corr}, sent 1")
    return data[4:]


def _read_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise WireError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        vals = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return vals[0] if len(vals) == 1 else vals

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s


@dataclass
class Metadata:
    brokers: dict[int, str]                      # node id -> "host:port"
    controller: int
    # topic -> partition -> (error code, leader node id); topic errors under -1
    partitions: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)


def metadata(addr: str, topics: list[str] | None, timeout: float = 5.0) -> Metadata:
    """Metadata v1 from the broker at `addr`; topics=None asks for every
    topic. (A broker that auto-creates topics creates a named one it lacks.)"""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(_str(t) for t in topics)
    r = _Reader(_call(addr, METADATA, 1, body, timeout))
    brokers = {}
    for _ in range(r.take(">i")):
        node = r.take(">i")
        host = r.string()
        port = r.take(">i")
        r.string()  # rack
        brokers[node] = f"{host}:{port}"
    md = Metadata(brokers=brokers, controller=r.take(">i"))
    for _ in range(r.take(">i")):
        err = r.take(">h")
        name = r.string()
        r.take(">?")  # is_internal
        parts = {}
        for _ in range(r.take(">i")):
            perr, pid, leader = r.take(">hii")
            for _list in ("replicas", "isr"):
                n = r.take(">i")
                r.pos += 4 * n
            parts[pid] = (perr, leader)
        md.partitions[name] = parts
        md.topic_errors[name] = err
    return md


def record_batch(values: list[bytes], producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1) -> bytes:
    """One uncompressed magic-2 RecordBatch holding `values` (no keys)."""
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    if producer_id >= 0:
        b.set_producer_state(producer_id, producer_epoch, base_sequence, False)
    for v in values:
        b.append(timestamp=None, key=None, value=v)
    b.close()
    return bytes(b.buffer())


def produce(addr: str, topic: str, partition: int, batch: bytes, timeout: float = 10.0,
            timeout_ms: int = 5000) -> tuple[int, int]:
    """Produce v3, acks=-1, one batch to one partition of the broker at
    `addr`: returns (error code, base offset)."""
    body = (_str(None) + struct.pack(">hi", -1, timeout_ms) + struct.pack(">i", 1) + _str(topic)
            + struct.pack(">i", 1) + struct.pack(">ii", partition, len(batch)) + batch)
    r = _Reader(_call(addr, PRODUCE, 3, body, timeout))
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            pid, err, base, _append_time = r.take(">ihqq")
            if pid == partition:
                return err, base
    raise WireError(f"{addr}: Produce response has no partition {partition}")


def init_producer_id(addr: str, transactional_id: str | None = None,
                     txn_timeout_ms: int = 60000, timeout: float = 5.0) -> tuple[int, int, int]:
    """InitProducerId v0 (idempotent without a transactional id):
    (error code, producer id, epoch)."""
    body = _str(transactional_id) + struct.pack(">i", txn_timeout_ms)
    r = _Reader(_call(addr, INIT_PRODUCER_ID, 0, body, timeout))
    r.take(">i")  # throttle
    return r.take(">hqh")


def find_coordinator(addr: str, group: str, timeout: float = 5.0) -> tuple[int, int]:
    """FindCoordinator v1 for a consumer group: (error code, node id)."""
    r = _Reader(_call(addr, FIND_COORDINATOR, 1, _str(group) + struct.pack(">b", 0), timeout))
    r.take(">i")  # throttle
    err = r.take(">h")
    r.string()    # error message
    return err, r.take(">i")


def fetch(addr: str, topic: str, partition: int, offset: int, timeout: float = 5.0,
          max_bytes: int = 8 << 20) -> tuple[int, int, list[tuple[int, bytes]]]:
    """Fetch v4 (read-uncommitted, no wait) of one partition from the broker
    at `addr`: (error code, high watermark, [(offset, value)] from `offset`)."""
    body = (struct.pack(">iiiib", -1, 0, 0, max_bytes, 0) + struct.pack(">i", 1) + _str(topic)
            + struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, max_bytes))
    r = _Reader(_call(addr, FETCH, 4, body, timeout))
    r.take(">i")  # throttle
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            pid, err, high, _lso = r.take(">ihqq")
            aborted = r.take(">i")
            r.pos += 16 * max(aborted, 0)
            size = r.take(">i")
            raw = r.data[r.pos:r.pos + max(size, 0)]
            r.pos += max(size, 0)
            if pid != partition:
                continue
            out = []
            records = MemoryRecords(bytes(raw))
            while (batch := records.next_batch()) is not None:
                out += [(rec.offset, rec.value) for rec in batch if rec.offset >= offset]
            return err, high, out
    raise WireError(f"{addr}: Fetch response has no partition {partition}")


def _topic_results(r: _Reader, with_message: bool) -> dict[str, tuple[int, str | None]]:
    out = {}
    for _ in range(r.take(">i")):
        name = r.string()
        err = r.take(">h")
        out[name] = (err, r.string() if with_message else None)
    return out


def create_topics(addr: str, topics: dict[str, int], timeout: float = 30.0,
                  validate_only: bool = False) -> dict[str, tuple[int, str | None]]:
    """CreateTopics v2 (replication factor 1, no configs) to the broker at
    `addr`: topic -> (error code, error message)."""
    body = struct.pack(">i", len(topics)) + b"".join(
        _str(name) + struct.pack(">ihii", n, 1, 0, 0) for name, n in topics.items())
    body += struct.pack(">i?", int(timeout * 1000), validate_only)
    r = _Reader(_call(addr, CREATE_TOPICS, 2, body, timeout + 5))
    r.take(">i")  # throttle
    return _topic_results(r, with_message=True)


def create_partitions(addr: str, topics: dict[str, int], timeout: float = 30.0,
                      validate_only: bool = False) -> dict[str, tuple[int, str | None]]:
    """CreatePartitions v1 (no assignments: the broker places them) to the
    broker at `addr`: topic -> (error code, error message)."""
    body = struct.pack(">i", len(topics)) + b"".join(
        _str(name) + struct.pack(">ii", n, -1) for name, n in topics.items())
    body += struct.pack(">i?", int(timeout * 1000), validate_only)
    r = _Reader(_call(addr, CREATE_PARTITIONS, 1, body, timeout + 5))
    r.take(">i")  # throttle
    return _topic_results(r, with_message=True)


def delete_topics(addr: str, topics: list[str], timeout: float = 30.0) -> dict[str, int]:
    """DeleteTopics v1 to the broker at `addr`: topic -> error code."""
    body = struct.pack(">i", len(topics)) + b"".join(_str(t) for t in topics)
    body += struct.pack(">i", int(timeout * 1000))
    r = _Reader(_call(addr, DELETE_TOPICS, 1, body, timeout + 5))
    r.take(">i")  # throttle
    return {name: err for name, (err, _) in _topic_results(r, with_message=False).items()}
