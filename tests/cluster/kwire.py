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

Transactions: InitProducerId v4 (flexible: compact strings and
tagged fields, request header v2), AddPartitionsToTxn v1 and EndTxn v1, a
transactional Produce, FindCoordinator of a transactional id (key type 1),
`send_no_reply` for a request the broker must die before answering, and
`Conn`, one kept-open connection for a benchmark's request loop.

KIP-848: ConsumerGroupDescribe v1 (flexible), which shows a
consumer-protocol group's epochs and each member's epoch, current and target
assignment; the admin clients keep the epochs to themselves.
"""

import socket
import struct
from dataclasses import dataclass, field

from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

METADATA, PRODUCE, FETCH, FIND_COORDINATOR = 3, 0, 1, 10
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 22, 24, 26
CONSUMER_GROUP_DESCRIBE = 69
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 3, 6
INVALID_PRODUCER_EPOCH = 47
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS = 36, 37
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED = 47, 51, 90
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
# Answers a transactional client retries (after looking the coordinator up again).
COORDINATOR_RETRIABLE = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
                         CONCURRENT_TRANSACTIONS)
GROUP_KEY, TXN_KEY = 0, 1

_CLIENT_ID = b"kaas-cluster-test"


class WireError(Exception):
    """The broker could not be reached, closed the connection or timed out."""


def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _frame(api_key: int, version: int, body: bytes, flexible: bool = False,
           correlation: int = 1) -> bytes:
    """The size-prefixed request: header v1, or v2 (a tagged-field section
    after the client id) for a flexible version."""
    header = (struct.pack(">hhi", api_key, version, correlation)
              + struct.pack(">h", len(_CLIENT_ID)) + _CLIENT_ID)
    if flexible:
        header += b"\x00"
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def _call(addr: str, api_key: int, version: int, body: bytes, timeout: float,
          flexible: bool = False) -> bytes:
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(_frame(api_key, version, body, flexible))
            size = struct.unpack(">i", _read_exact(s, 4))[0]
            data = _read_exact(s, size)
    except (OSError, struct.error) as e:
        raise WireError(f"{addr}: api {api_key} v{version}: {e!r}") from e
    return _body(addr, data, 1, flexible)


def _body(addr: str, data: bytes, correlation: int, flexible: bool) -> bytes:
    corr = struct.unpack(">i", data[:4])[0]
    if corr != correlation:
        raise WireError(f"{addr}: correlation id {corr}, sent {correlation}")
    # Response header v1 (flexible versions): a tagged-field section.
    return data[4:] if not flexible else data[5:] if data[4] == 0 else _skip_tags(data, 4)


def _skip_tags(data: bytes, pos: int) -> bytes:
    r = _Reader(data)
    r.pos = pos
    for _ in range(r.uvarint()):
        r.uvarint()
        r.pos += r.uvarint()
    return data[r.pos:]


def send_no_reply(addr: str, api_key: int, version: int, body: bytes, timeout: float,
                  flexible: bool = False) -> bytes | None:
    """Sends one request and waits up to `timeout` s: None when the broker
    closed the connection (or reset it) without answering, else the
    response body. WireError when it neither answered nor closed in time."""
    host, port = addr.rsplit(":", 1)
    try:
        s = socket.create_connection((host, int(port)), timeout=timeout)
    except OSError as e:
        raise WireError(f"{addr}: connect: {e!r}") from e
    with s:
        s.settimeout(timeout)
        try:
            s.sendall(_frame(api_key, version, body, flexible))
            head = s.recv(4)
        except (ConnectionResetError, BrokenPipeError):
            return None
        except OSError as e:
            raise WireError(f"{addr}: api {api_key} v{version}: no answer and no close: {e!r}") \
                from e
        if not head:
            return None
        try:
            head += _read_exact(s, 4 - len(head))
            size = struct.unpack(">i", head)[0]
            data = _read_exact(s, size)
        except (OSError, WireError):
            return None
    return _body(addr, data, 1, flexible)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _cstr(s: str | None) -> bytes:
    """A COMPACT_NULLABLE_STRING."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return _uvarint(len(b) + 1) + b


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

    def uvarint(self) -> int:
        shift = n = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def cstring(self) -> str | None:
        """A COMPACT_(NULLABLE_)STRING."""
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def carray(self, item) -> list:
        """A COMPACT_ARRAY of item(); [] for null."""
        return [item() for _ in range(max(self.uvarint() - 1, 0))]

    def tags(self) -> None:
        """Skips a tagged-field section."""
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


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
                 base_sequence: int = -1, transactional: bool = False) -> bytes:
    """One uncompressed magic-2 RecordBatch holding `values` (no keys)."""
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    if producer_id >= 0:
        b.set_producer_state(producer_id, producer_epoch, base_sequence, transactional)
    for v in values:
        b.append(timestamp=None, key=None, value=v)
    b.close()
    return bytes(b.buffer())


def _produce_body(topic: str, partition: int, batch: bytes, timeout_ms: int,
                  transactional_id: str | None) -> bytes:
    return (_str(transactional_id) + struct.pack(">hi", -1, timeout_ms) + struct.pack(">i", 1)
            + _str(topic) + struct.pack(">i", 1) + struct.pack(">ii", partition, len(batch)) + batch)


def _produce_answer(addr: str, data: bytes, partition: int) -> tuple[int, int]:
    r = _Reader(data)
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            pid, err, base, _append_time = r.take(">ihqq")
            if pid == partition:
                return err, base
    raise WireError(f"{addr}: Produce response has no partition {partition}")


def produce(addr: str, topic: str, partition: int, batch: bytes, timeout: float = 10.0,
            timeout_ms: int = 5000, transactional_id: str | None = None) -> tuple[int, int]:
    """Produce v3, acks=-1, one batch to one partition of the broker at
    `addr` (with `transactional_id` for a transactional batch): returns
    (error code, base offset)."""
    return _produce_answer(addr, _call(addr, PRODUCE, 3, _produce_body(
        topic, partition, batch, timeout_ms, transactional_id), timeout), partition)


def find_coordinator(addr: str, key: str, timeout: float = 5.0,
                     key_type: int = GROUP_KEY) -> tuple[int, int]:
    """FindCoordinator v1 for a consumer group (key type 0) or a
    transactional id (TXN_KEY, 1): (error code, node id)."""
    r = _Reader(_call(addr, FIND_COORDINATOR, 1, _str(key) + struct.pack(">b", key_type), timeout))
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


DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
CONFIG_SET, CONFIG_DELETE = 0, 1


def incremental_alter_configs(addr: str, resource_type: int, name: str,
                              ops: list[tuple[str, int, str | None]], timeout: float = 30.0,
                              validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v0 of one resource (BROKER with name "" is
    the cluster-wide default) to the broker at `addr`: (error code,
    message). `ops` are (config name, operation, value)."""
    body = struct.pack(">i", 1) + struct.pack(">b", resource_type) + _str(name)
    body += struct.pack(">i", len(ops)) + b"".join(
        _str(n) + struct.pack(">b", op) + _str(v) for n, op, v in ops)
    body += struct.pack(">?", validate_only)
    r = _Reader(_call(addr, INCREMENTAL_ALTER_CONFIGS, 0, body, timeout))
    r.take(">i")  # throttle
    assert r.take(">i") == 1
    err, msg = r.take(">h"), r.string()
    return err, msg


def describe_configs(addr: str, resource_type: int, name: str,
                     timeout: float = 10.0) -> tuple[int, dict[str, tuple[str | None, int]]]:
    """DescribeConfigs v1 of one resource from the broker at `addr`:
    (error code, {config name: (value, source)})."""
    body = struct.pack(">i", 1) + struct.pack(">b", resource_type) + _str(name)
    body += struct.pack(">i", -1) + struct.pack(">?", False)
    r = _Reader(_call(addr, DESCRIBE_CONFIGS, 1, body, timeout))
    r.take(">i")  # throttle
    assert r.take(">i") == 1
    err = r.take(">h")
    r.string()  # message
    r.take(">b")
    r.string()  # resource name
    out = {}
    for _ in range(r.take(">i")):
        cname, value = r.string(), r.string()
        _read_only, source, _sensitive = r.take(">?b?")
        for _ in range(r.take(">i")):
            r.string(), r.string(), r.take(">b")
        out[cname] = (value, source)
    return err, out


# -- transactions --------------------------------------------------------------

def init_producer_id_body(transactional_id: str | None, claim: tuple[int, int] = (-1, -1),
                          timeout_ms: int = 60000) -> bytes:
    """InitProducerId v4's body: the id, its timeout and the (producer id,
    epoch) the producer claims (KIP-360; (-1, -1): none)."""
    return (_cstr(transactional_id) + struct.pack(">iqh", timeout_ms, claim[0], claim[1])
            + b"\x00")


def parse_init_producer_id(data: bytes) -> tuple[int, int, int]:
    _throttle, err, pid, epoch = struct.unpack_from(">ihqh", data, 0)
    return err, pid, epoch


def init_producer_id(addr: str, transactional_id: str | None = None, claim: tuple[int, int] = (-1, -1),
                     timeout_ms: int = 60000, timeout: float = 10.0) -> tuple[int, int, int]:
    """InitProducerId v4: (error code, producer id, epoch)."""
    return parse_init_producer_id(_call(addr, INIT_PRODUCER_ID, 4, init_producer_id_body(
        transactional_id, claim, timeout_ms), timeout, flexible=True))


def add_partitions_body(transactional_id: str, pid: int, epoch: int,
                        partitions: dict[str, list[int]]) -> bytes:
    body = _str(transactional_id) + struct.pack(">qh", pid, epoch) + struct.pack(">i", len(partitions))
    for topic, ps in partitions.items():
        body += _str(topic) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return body


def parse_add_partitions(data: bytes) -> dict[tuple[str, int], int]:
    r = _Reader(data)
    r.take(">i")  # throttle
    out = {}
    for _ in range(r.take(">i")):
        topic = r.string()
        for _ in range(r.take(">i")):
            p, err = r.take(">ih")
            out[(topic, p)] = err
    return out


def add_partitions_to_txn(addr: str, transactional_id: str, pid: int, epoch: int,
                          partitions: dict[str, list[int]],
                          timeout: float = 10.0) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn v1: (topic, partition) -> error code."""
    return parse_add_partitions(_call(addr, ADD_PARTITIONS_TO_TXN, 1, add_partitions_body(
        transactional_id, pid, epoch, partitions), timeout))


def end_txn_body(transactional_id: str, pid: int, epoch: int, commit: bool) -> bytes:
    return _str(transactional_id) + struct.pack(">qh?", pid, epoch, commit)


def end_txn(addr: str, transactional_id: str, pid: int, epoch: int, commit: bool,
            timeout: float = 30.0) -> int:
    """EndTxn v1 (commit or abort): the error code."""
    data = _call(addr, END_TXN, 1, end_txn_body(transactional_id, pid, epoch, commit), timeout)
    return struct.unpack_from(">ih", data, 0)[1]


def txn_coordinator(addr: str, transactional_id: str, timeout: float = 5.0) -> tuple[int, int]:
    """FindCoordinator v1, key type 1: (error code, node id)."""
    return find_coordinator(addr, transactional_id, timeout, key_type=TXN_KEY)


def fetch_committed(addr: str, topic: str, partition: int, offset: int = 0,
                    timeout: float = 5.0, max_bytes: int = 8 << 20
                    ) -> tuple[int, int, int, list[tuple[int, bytes]]]:
    """Fetch v4 with isolation read_committed (no wait) from the broker at
    `addr`: (error code, high watermark, last stable offset, [(offset,
    value)] a read_committed consumer keeps: data below the LSO, without
    control batches and without the batches of the aborted transactions
    the response lists)."""
    body = (struct.pack(">iiiib", -1, 0, 0, max_bytes, 1) + struct.pack(">i", 1) + _str(topic)
            + struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, max_bytes))
    r = _Reader(_call(addr, FETCH, 4, body, timeout))
    r.take(">i")  # throttle
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            pid, err, high, lso = r.take(">ihqq")
            aborted = [r.take(">qq") for _ in range(max(r.take(">i"), 0))]
            size = r.take(">i")
            raw = r.data[r.pos:r.pos + max(size, 0)]
            r.pos += max(size, 0)
            if pid != partition:
                continue
            aborted.sort(key=lambda a: a[1])
            open_aborts: set[int] = set()
            out = []
            records = MemoryRecords(bytes(raw))
            while (batch := records.next_batch()) is not None:
                while aborted and aborted[0][1] <= batch.base_offset + batch.last_offset_delta:
                    open_aborts.add(aborted.pop(0)[0])
                if batch.is_control_batch:
                    open_aborts.discard(batch.producer_id)
                    continue
                if batch.is_transactional and batch.producer_id in open_aborts:
                    continue
                out += [(rec.offset, rec.value) for rec in batch
                        if rec.offset >= offset and rec.offset < lso]
            return err, high, lso, out
    raise WireError(f"{addr}: Fetch response has no partition {partition}")


# -- consumer-protocol groups (KIP-848) ----------------------------------------

@dataclass
class ConsumerMember:
    member_id: str
    member_epoch: int
    client_id: str
    # topic name -> sorted partitions
    assignment: dict[str, list[int]]
    target: dict[str, list[int]]


@dataclass
class ConsumerGroup:
    error: int
    message: str | None
    state: str | None = None
    epoch: int = -1
    assignment_epoch: int = -1
    assignor: str | None = None
    members: dict[str, ConsumerMember] = field(default_factory=dict)  # by member id


def _cg_assignment(r: _Reader) -> dict[str, list[int]]:
    out = {}
    for _ in range(max(r.uvarint() - 1, 0)):
        r.pos += 16  # topic id
        name = r.cstring()
        out[name] = sorted(r.carray(lambda: r.take(">i")))
        r.tags()
    r.tags()
    return out


def consumer_group_describe(addr: str, group: str, timeout: float = 5.0) -> ConsumerGroup:
    """ConsumerGroupDescribe v1 of one group at the broker at `addr` (its
    coordinator: another broker answers NOT_COORDINATOR)."""
    g = group.encode()
    body = _uvarint(2) + _uvarint(len(g) + 1) + g + b"\x00" + b"\x00"
    r = _Reader(_call(addr, CONSUMER_GROUP_DESCRIBE, 1, body, timeout, flexible=True))
    r.take(">i")  # throttle
    groups = []
    for _ in range(max(r.uvarint() - 1, 0)):
        err = r.take(">h")
        out = ConsumerGroup(err, r.cstring())
        r.cstring()  # group id
        out.state = r.cstring()
        out.epoch, out.assignment_epoch = r.take(">ii")
        out.assignor = r.cstring()
        for _ in range(max(r.uvarint() - 1, 0)):
            member_id = r.cstring()
            r.cstring(), r.cstring()  # instance id, rack id
            epoch = r.take(">i")
            client_id = r.cstring()
            r.cstring()  # client host
            r.carray(r.cstring)  # subscribed topic names
            r.cstring()  # subscribed regex
            assignment, target = _cg_assignment(r), _cg_assignment(r)
            r.take(">b")  # member type (v1)
            r.tags()
            out.members[member_id] = ConsumerMember(member_id, epoch, client_id, assignment,
                                                    target)
        r.take(">i")  # authorized operations
        r.tags()
        groups.append(out)
    if len(groups) != 1:
        raise WireError(f"{addr}: ConsumerGroupDescribe answered {len(groups)} groups")
    return groups[0]


class Conn:
    """One kept-open connection to one broker, for request loops (a
    benchmark): call() sends one request and reads its answer."""

    def __init__(self, addr: str, timeout: float = 30.0):
        host, port = addr.rsplit(":", 1)
        self.addr = addr
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        except OSError as e:
            raise WireError(f"{addr}: connect: {e!r}") from e
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def call(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> bytes:
        self.correlation += 1
        try:
            self.sock.sendall(_frame(api_key, version, body, flexible, self.correlation))
            size = struct.unpack(">i", _read_exact(self.sock, 4))[0]
            data = _read_exact(self.sock, size)
        except (OSError, struct.error) as e:
            raise WireError(f"{self.addr}: api {api_key} v{version}: {e!r}") from e
        return _body(self.addr, data, self.correlation, flexible)

    def init_producer_id(self, transactional_id, claim=(-1, -1), timeout_ms=60000):
        return parse_init_producer_id(self.call(INIT_PRODUCER_ID, 4, init_producer_id_body(
            transactional_id, claim, timeout_ms), flexible=True))

    def add_partitions(self, transactional_id, pid, epoch, partitions):
        return parse_add_partitions(self.call(ADD_PARTITIONS_TO_TXN, 1, add_partitions_body(
            transactional_id, pid, epoch, partitions)))

    def produce(self, topic, partition, batch, transactional_id=None, timeout_ms=30000):
        return _produce_answer(self.addr, self.call(PRODUCE, 3, _produce_body(
            topic, partition, batch, timeout_ms, transactional_id)), partition)

    def end_txn(self, transactional_id, pid, epoch, commit):
        return struct.unpack_from(">ih", self.call(END_TXN, 1, end_txn_body(
            transactional_id, pid, epoch, commit)), 0)[1]

    def close(self):
        self.sock.close()
