"""The exactly-once copier on three brokers.

N records are copied from `in` to `out` by two transactional
consume-transform-produce copiers (tests/clients/eos_copier.py, librdkafka:
read_committed consumer in a group, one transaction per batch, the consumed
offsets sent in the same transaction) while every broker in turn is killed
with SIGKILL and started again, and the copiers are SIGKILLed in between
(a killed copier is started again, as a supervisor would; it resumes from
the group's committed offsets). Both topics' partitions are led by all
three brokers, so each kill moves partitions, group shards and
transaction-coordinator shards at once (markers to remote leaders, resumed
Prepare* entries, the fence of a restarted copier's predecessor).

Afterwards a read_committed reader of `out` sees every input record exactly
once, and the group's committed offsets are the end of `in`. At default
scale: 3 broker kills and 3 copier kills; $KAAS_CLUSTER_SOAK multiplies both.
"""

import collections
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

import txnlib

HERE = Path(__file__).resolve().parent
COPIER = HERE.parent / "clients" / "eos_copier.py"
PARTITIONS = 6
SLOTS = ("A", "B")
GROUP_FLAGS = ("--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000")
N_PER_ROUND = 1200
FEED_PER_ROUND_S = 50
DEADLINE_PER_ROUND_S = 150


class Copier:
    def __init__(self, slot: str, bootstrap: str, src: str, dst: str, group: str, log_dir: Path):
        self.slot, self.runs, self.log_dir = slot, 0, log_dir
        self.args = [sys.executable, str(COPIER), bootstrap, src, dst, group,
                     f"copier-{slot}-{group}", "25", "0.05"]
        self.proc: subprocess.Popen | None = None

    def ensure_running(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.runs += 1
            with open(self.log_dir / f"copier-{self.slot}-{self.runs}.log", "w") as out:
                self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted(self.log_dir.glob(f"copier-{self.slot}-*.log")))


class Feeder(threading.Thread):
    """Produces the N input records (idempotent, acks=all) at a steady pace
    over `seconds`, so the copy runs for the whole schedule of kills
    whatever the copiers' speed."""

    def __init__(self, bootstrap: str, topic: str, n: int, seconds: float):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.n, self.seconds = bootstrap, topic, n, seconds
        self.failed: list[str] = []
        self.undelivered = -1

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "linger.ms": 5, "delivery.timeout.ms": 120000})

        def report(err, _msg):
            if err is not None:
                self.failed.append(str(err))
        start = time.monotonic()
        for i in range(self.n):
            wait = start + i * self.seconds / self.n - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            p.produce(self.topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                      partition=i % PARTITIONS, on_delivery=report)
            p.poll(0)
        self.undelivered = p.flush(150)


def _committed_total(bootstrap: str, group: str, topic: str) -> int:
    try:
        return sum(max(o, 0) for o in txnlib.committed_offsets(bootstrap, group, topic,
                                                               PARTITIONS).values())
    except Exception:
        return -1  # a coordinator is moving, or an offset is unstable: ask again


def _strikes(scale: int, feed_s: float) -> list[tuple[float, str, int]]:
    """(seconds after the start, what, which): brokers 1, 2, 3 in turn and
    the copiers in between, evenly over 10 %..85 % of the feed."""
    events = []
    for r in range(3 * scale):
        events += [("copier", r % len(SLOTS)), ("broker", r % 3 + 1)]
    step = 0.75 * feed_s / len(events)
    return [(0.1 * feed_s + i * step, kind, which) for i, (kind, which) in enumerate(events)]


def test_copier_output_has_every_input_exactly_once_despite_broker_and_copier_kills(
        cluster_factory, topic_name, tmp_path, scale):
    c = cluster_factory(extra_args=GROUP_FLAGS)
    n, feed_s = N_PER_ROUND * scale, FEED_PER_ROUND_S * scale
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("copiers")
    txnlib.spread_topic(c, src, PARTITIONS)
    txnlib.spread_topic(c, dst, PARTITIONS)
    log_dir = tmp_path / "copiers"
    log_dir.mkdir()
    copiers = [Copier(s, c.bootstrap, src, dst, group, log_dir) for s in SLOTS]
    strikes = _strikes(scale, feed_s)
    done: list[str] = []
    feeder = Feeder(c.bootstrap, src, n, feed_s)
    down: int | None = None  # the broker killed and not yet started again
    try:
        start = time.monotonic()
        feeder.start()
        deadline = start + feed_s + DEADLINE_PER_ROUND_S * scale
        total = 0
        while True:
            now = time.monotonic()
            assert now < deadline, (
                f"copied {total}/{n}; strikes done {done}, pending {strikes[:1]}, broker down "
                f"{down}; each live broker's Metadata of {src}: {c._views(src)}\n"
                + "\n".join(cp.logs() for cp in copiers))
            for cp in copiers:
                cp.ensure_running()
            total = _committed_total(c.bootstrap, group, src)
            if total == n and not strikes and down is None:
                break
            if down is not None:
                # Once the survivors lead everything, it comes back.
                if c._agreed(src, PARTITIONS) and c._agreed(dst, PARTITIONS):
                    c.start_broker(down)
                    done.append(f"broker {down} started again at {total}")
                    down = None
            elif strikes and now - start >= strikes[0][0]:
                _, kind, which = strikes.pop(0)
                if kind == "copier":
                    copiers[which].kill()
                elif c._agreed(src, PARTITIONS) and c._agreed(dst, PARTITIONS):
                    c.kill9(which)
                    down = which
                else:
                    strikes.insert(0, (now - start, kind, which))  # not yet settled: later
                    continue
                done.append(f"{kind} {which} killed at {now - start:.1f} s, copied {total}")
            time.sleep(0.2)
        feeder.join(10)
        assert feeder.failed == [] and feeder.undelivered == 0, \
            (feeder.failed[:5], feeder.undelivered)
        for cp in copiers:
            cp.kill()
        assert total == n, (total, n, done)

        txnlib.wait_stable(c, dst, PARTITIONS)
        out = txnlib.confluent_committed(c.bootstrap, dst, PARTITIONS, timeout=120)
        seen = [v.decode() for vs in out.values() for v in vs]
        counts = collections.Counter(seen)
        expected = {f"copy:v{i}" for i in range(n)}
        missing = expected - counts.keys()
        duplicated = {v: k for v, k in counts.items() if k > 1}
        unexpected = counts.keys() - expected
        assert not missing and not duplicated and not unexpected, (
            f"{len(missing)} missing (e.g. {sorted(missing)[:5]}), {len(duplicated)} duplicated "
            f"(e.g. {list(duplicated.items())[:5]}), {len(unexpected)} unexpected; strikes {done}")
        # Each record copied into the same partition, in order.
        for p, vs in out.items():
            assert vs == [f"copy:v{i}".encode() for i in range(p, n, PARTITIONS)], p
        assert txnlib.committed_offsets(c.bootstrap, group, src, PARTITIONS) == \
            {p: len(range(p, n, PARTITIONS)) for p in range(PARTITIONS)}
    finally:
        for cp in copiers:
            cp.kill()
        if down is not None and not c.brokers[down].running:
            c.start_broker(down)
