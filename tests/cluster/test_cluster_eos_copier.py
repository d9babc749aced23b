"""The exactly-once copier on three brokers (issue 15, "Done means" 3).

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


def _seed(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0


def _committed_total(bootstrap: str, group: str, topic: str) -> int:
    try:
        return sum(max(o, 0) for o in txnlib.committed_offsets(bootstrap, group, topic,
                                                               PARTITIONS).values())
    except Exception:
        return -1  # a coordinator is moving, or an offset is unstable: ask again


def _strikes(scale: int) -> list[tuple[float, str]]:
    """(fraction of N copied, what to kill): brokers 1, 2, 3 in turn and the
    copiers in between, evenly over 5 %..80 % of the copy."""
    events = []
    for r in range(3 * scale):
        events += [("copier", r % len(SLOTS)), ("broker", r % 3 + 1)]
    step = 0.75 / len(events)
    return [(0.05 + i * step, e) for i, e in enumerate(events)]


def test_copier_output_has_every_input_exactly_once_despite_broker_and_copier_kills(
        cluster_factory, topic_name, tmp_path, scale):
    c = cluster_factory(extra_args=GROUP_FLAGS)
    n = N_PER_ROUND * scale
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("copiers")
    txnlib.spread_topic(c, src, PARTITIONS)
    txnlib.spread_topic(c, dst, PARTITIONS)
    _seed(c.bootstrap, src, n)
    log_dir = tmp_path / "copiers"
    log_dir.mkdir()
    copiers = [Copier(s, c.bootstrap, src, dst, group, log_dir) for s in SLOTS]
    strikes = _strikes(scale)
    done: list[str] = []
    try:
        deadline = time.monotonic() + DEADLINE_PER_ROUND_S * scale
        total = 0
        while True:
            assert time.monotonic() < deadline, (
                f"copied {total}/{n}; strikes done {done}\n"
                + "\n".join(cp.logs() for cp in copiers))
            for cp in copiers:
                cp.ensure_running()
            total = _committed_total(c.bootstrap, group, src)
            if total == n:
                break
            if strikes and total >= strikes[0][0] * n:
                _, (kind, which) = strikes.pop(0)
                if kind == "copier":
                    copiers[which].kill()
                else:
                    c.kill9(which)
                    # The survivors take its partitions and shards; then it comes back.
                    c.wait_ready(src, PARTITIONS, timeout=60)
                    c.wait_ready(dst, PARTITIONS, timeout=60)
                    c.start_broker(which)
                    c.wait_ready(dst, PARTITIONS, timeout=60)
                done.append(f"{kind} {which} at {total}")
            time.sleep(0.2)
        for cp in copiers:
            cp.kill()
        assert not strikes, f"the copy finished before every strike (done {done}); slow it down"

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
