"""The exactly-once copier (an acceptance test of transactions): N records are copied
from `in` to `out` by two transactional consume-transform-produce copiers
(eos_copier.py, librdkafka) that are SIGKILLed and restarted several times,
while the broker itself is SIGKILLed and restarted mid-run. A read_committed
consumer of `out` must then see every input record exactly once, and the
group's committed offsets must sit at the end of `in`.

What makes this hold: a restarted copier's InitProducerId fences its dead
predecessor and aborts its open transaction (with the consumed offsets in
it); the new owner of a partition reads the group's committed offset with
require_stable, so it waits out any transaction still pending on it; the
broker's logs, transaction state and offsets journal are fsynced before
each reply, so the broker's own SIGKILL loses nothing a client was told.
"""

import collections
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from test_transactions_confluent import create_topic, read_committed, start

HERE = Path(__file__).resolve().parent
N = 3000
PARTITIONS = 4
SLOTS = ("A", "B")
# A copier is SIGKILLed when the committed total first reaches each of these
# fractions of N; the broker is SIGKILLed and restarted at the second. They
# are far enough apart that a slow poll of the progress still sees each.
STRIKES = (0.10, 0.25, 0.40, 0.55)
KILLS = len(STRIKES)
DEADLINE_S = 240
GROUP_FLAGS = ("--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000")


def seed(bootstrap: str, topic: str, n: int = N) -> None:
    """Writes k<i>/v<i> to partition i % PARTITIONS for i < n."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


def committed_total(bootstrap: str, group: str, topic: str) -> int:
    """Sum of the group's committed offsets (stable ones: require_stable)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return sum(max(tp.offset, 0) for tp in tps)
    except Exception:
        return -1  # the broker is restarting, or an offset is unstable: ask again
    finally:
        c.close()


class Copier:
    """One eos_copier.py slot (transactional id copier-SLOT), restarted by
    ensure_running() after it died; `protocol` is its group.protocol."""

    def __init__(self, slot: str, bootstrap: str, src: str, dst: str, group: str, log_dir: Path,
                 protocol: str = "classic"):
        self.slot, self.runs = slot, 0
        self.args = [sys.executable, str(HERE / "eos_copier.py"), bootstrap, src, dst, group,
                     f"copier-{slot}", "25", "0.05", protocol]
        self.log_dir = log_dir
        self.proc: subprocess.Popen | None = None

    def ensure_running(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.runs += 1
            out = open(self.log_dir / f"copier-{self.slot}-{self.runs}.log", "w")
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
            out.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.log_dir.glob(f"copier-{self.slot}-*.log")))


def test_copier_output_has_every_input_exactly_once_despite_kills(tmp_path, policy):
    b = start(tmp_path, policy, extra_args=GROUP_FLAGS)
    copiers: list[Copier] = []
    try:
        src, dst = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
        group = f"copier-{uuid.uuid4().hex[:6]}"
        create_topic(b.bootstrap, src, PARTITIONS)
        create_topic(b.bootstrap, dst, PARTITIONS)
        seed(b.bootstrap, src)
        log_dir = tmp_path / "copiers"
        log_dir.mkdir()
        copiers = [Copier(s, b.bootstrap, src, dst, group, log_dir) for s in SLOTS]

        kills, broker_restarts = 0, 0
        deadline = time.time() + DEADLINE_S
        total = 0
        while True:
            assert time.time() < deadline, (
                f"copied {total}/{N} in {DEADLINE_S} s\n" + "\n".join(c.logs() for c in copiers))
            for c in copiers:
                c.ensure_running()
            total = committed_total(b.bootstrap, group, src)
            if total == N:
                break
            if kills < KILLS and total >= STRIKES[kills] * N:
                copiers[kills % len(copiers)].kill()
                kills += 1
                if kills == 2:
                    b.kill()
                    b.start()
                    broker_restarts += 1
            time.sleep(0.2)
        for c in copiers:
            c.kill()
        assert kills == KILLS and broker_restarts == 1, (
            f"the copy finished before every strike: {kills} kills, {broker_restarts} broker "
            "restarts; slow the copiers down")

        seen = read_committed(b.bootstrap, dst, PARTITIONS, expect_at_least=N, timeout=60)
        counts = collections.Counter(seen)
        expected = {f"copy:v{i}" for i in range(N)}
        missing = expected - counts.keys()
        duplicated = {v: n for v, n in counts.items() if n > 1}
        unexpected = counts.keys() - expected
        assert not missing and not duplicated and not unexpected, (
            f"{len(missing)} missing, {len(duplicated)} duplicated (e.g. "
            f"{list(duplicated.items())[:5]}), {len(unexpected)} unexpected")
        assert len(seen) == N
    finally:
        for c in copiers:
            c.kill()
        b.stop()
