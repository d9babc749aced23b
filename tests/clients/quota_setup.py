"""Client quotas for the Python tests and bench/quota_bench.py: neither
confluent-kafka nor kafka-python has an AlterClientQuotas API, so this sends
AlterClientQuotas v0 (API 49) itself over a PLAINTEXT listener, and reads a
user's measured rate from the broker's /metrics page.
"""

import socket
import struct
import urllib.request

ALTER_CLIENT_QUOTAS = 49


def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _recv(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return out


def alter_client_quotas(bootstrap: str, entries, validate_only: bool = False,
                        timeout: float = 30.0) -> list[tuple[int, str | None]]:
    """entries: [( [(entity_type, name or None for <default>)], {key: value or
    None to remove} )]. Returns each entry's (error code, message)."""
    body = struct.pack(">i", len(entries))
    for entity, ops in entries:
        body += struct.pack(">i", len(entity))
        for etype, name in entity:
            body += _str(etype) + _str(name)
        body += struct.pack(">i", len(ops))
        for key, value in ops.items():
            body += _str(key) + struct.pack(">d?", 0.0 if value is None else float(value),
                                            value is None)
    body += struct.pack(">?", validate_only)
    header = struct.pack(">hhi", ALTER_CLIENT_QUOTAS, 0, 1) + _str("quota-setup")
    frame = header + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv(s, 4))[0]
        resp = _recv(s, size)
    pos = 4 + 4  # correlation id, throttle_time_ms
    (n,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    out = []
    for _ in range(n):
        code, mlen = struct.unpack_from(">hh", resp, pos)
        pos += 4
        msg = None
        if mlen >= 0:
            msg = resp[pos:pos + mlen].decode()
            pos += mlen
        (ne,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        for _ in range(ne):
            (tl,) = struct.unpack_from(">h", resp, pos)
            pos += 2 + tl
            (nl,) = struct.unpack_from(">h", resp, pos)
            pos += 2 + max(nl, 0)
        out.append((code, msg))
    return out


def metrics(address: str, timeout: float = 10.0) -> str:
    """The broker's Prometheus page (--metrics-listen ADDRESS)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as r:
        return r.read().decode()


def quota_metric(page: str, name: str, quota_type: str, user: str, client_id: str = "") -> float | None:
    """One kaas_quota_* sample of the page, if present."""
    want = f'{name}{{quota_type="{quota_type}",user="{user}",client_id="{client_id}"}} '
    for line in page.splitlines():
        if line.startswith(want):
            return float(line[len(want):])
    return None


DESCRIBE_CLIENT_QUOTAS = 48


def describe_client_quotas(bootstrap: str, components=(), strict: bool = False,
                           timeout: float = 30.0):
    """DescribeClientQuotas v0: components [(entity_type, match_type, match or
    None)]. Returns (error code, {((type, name), ...): {key: value}})."""
    body = struct.pack(">i", len(components))
    for etype, mtype, match in components:
        body += _str(etype) + struct.pack(">b", mtype) + _str(match)
    body += struct.pack(">?", strict)
    header = struct.pack(">hhi", DESCRIBE_CLIENT_QUOTAS, 0, 1) + _str("quota-setup")
    frame = header + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv(s, 4))[0]
        resp = _recv(s, size)
    pos = 8  # correlation id, throttle_time_ms

    def string():
        nonlocal pos
        (n,) = struct.unpack_from(">h", resp, pos)
        pos += 2
        if n < 0:
            return None
        v = resp[pos:pos + n].decode()
        pos += n
        return v

    (code,) = struct.unpack_from(">h", resp, pos)
    pos += 2
    string()
    (n,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    out = {}
    for _ in range(max(n, 0)):
        (ne,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        entity = tuple((string(), string()) for _ in range(ne))
        (nv,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        values = {}
        for _ in range(nv):
            key = string()
            (v,) = struct.unpack_from(">d", resp, pos)
            pos += 8
            values[key] = v
        out[entity] = values
    return code, out
