"""What the Python client tests write and what they expect to read back.

Both Python clients (and kafkajs.test.js, which mirrors this by hand) write the
same records, so a failure reads the same whichever client found it.
"""

import time

PARTITIONS = 4
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

# Records per round-trip test, spread over the partitions: record i goes to
# partition i % PARTITIONS, so each partition gets N / PARTITIONS records.
N = 200

# Deadlines, in seconds, for any one wait on the broker.
OP_TIMEOUT = 30.0
CONSUME_TIMEOUT = 60.0


def roundtrip_records(codec: str, n: int = N):
    """[(partition, key, value)] for a round-trip test.

    Every 50th record (from i = 7) has a null key, so null keys are checked
    too. Values repeat text, so compressed batches are much smaller than the
    records.
    """
    out = []
    for i in range(n):
        key = None if i % 50 == 7 else f"key-{i:04d}".encode()
        value = (f"{codec} value {i:04d} " * 8).encode()
        out.append((i % PARTITIONS, key, value))
    return out


def by_partition(records):
    """{partition: [(offset, key, value)]} as the broker must return them: in
    the order written, with offsets 0, 1, 2, ... in each partition (a new
    topic, one producer, idempotent, so no gaps and no duplicates)."""
    out = {p: [] for p in range(PARTITIONS)}
    for p, key, value in records:
        out[p].append((len(out[p]), key, value))
    return out


# The timestamp test: TS_COUNT records, all in partition TS_PARTITION, with
# explicit CreateTime timestamps one second apart, produced in three separate
# flushes (so in at least three batches: 0-6, 7-13, 14-19).
TS_PARTITION = 2
TS_COUNT = 20
TS_FLUSH_BEFORE = (7, 14)


def timestamp_records():
    """[(key, value, timestamp_ms)] for the timestamp test, oldest first. The
    timestamps start an hour ago, well inside any retention."""
    base = (int(time.time()) - 3600) * 1000
    return [(f"ts-key-{i:02d}".encode(), f"ts value {i:02d}".encode(), base + i * 1000)
            for i in range(TS_COUNT)]


def timestamp_lookups(timestamps):
    """[(target_ms, expected_offset or None)]: ListOffsets by timestamp must
    answer the offset of the first record whose timestamp is >= target, and
    nothing (None) when every record is older than the target."""
    ts = timestamps
    return [
        (ts[0] - 60_000, 0),     # before every record
        (ts[0], 0),              # exactly the first
        (ts[6], 6),              # last record of the first batch
        (ts[7] - 1, 7),          # between two batches
        (ts[10], 10),            # exactly a record in the middle of a batch
        (ts[10] - 500, 10),      # between two records of a batch
        (ts[19], 19),            # exactly the last
        (ts[19] + 1, None),      # after every record
    ]


# The middle lookup that the timestamp tests then consume from.
TS_CONSUME_FROM = 10


def poll_until(condition, timeout: float, interval: float = 0.05, what: str = "condition"):
    """Calls condition() until it returns something truthy, and returns that.
    Raises AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
