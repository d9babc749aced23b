"""How long a consumer group takes to converge after a member is killed.

Starts a kaas broker (target/release/kaas, or KAAS_BIN) on a fresh data
directory, creates a 16-partition topic with records in it, and per trial
starts 4 confluent-kafka members (group_member.py, one process each) in a
new group. Once the group is stable (4 partitions each, every member
consuming), one member is SIGKILLed, and the time is measured until the 3
survivors have each been assigned again and their assignments cover all 16
partitions without overlap. The dead member is only noticed when its session
expires, so the figure is session.timeout.ms plus one rebalance (the
survivors learn of it at their next heartbeat, rejoin, and sync). The
rebalance is also reported alone: from the first survivor's revocation to the
last survivor's new assignment.

    .venv/bin/python tests/clients/bench_group_convergence.py [--trials 5]
        [--session-timeout-ms 6000] [--heartbeat-ms 500]
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conftest import KaasBroker  # noqa: E402
from groups_common import MemberProcess  # noqa: E402

PARTITIONS = 16
MEMBERS = 4
RECORDS = PARTITIONS * 500
TIMEOUT = 120.0


def setup_topic(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                        operation_timeout=30)[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def covers(members, after=None):
    """True when the members' latest assignments (each made after `after`)
    are disjoint and cover every partition."""
    seen = []
    for m in members:
        if m.assignment is None or (after is not None and m.assigned_at <= after):
            return False
        seen.extend(m.assignment)
    return sorted(seen) == list(range(PARTITIONS))


def wait(members, condition, what):
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        for m in members:
            if m.proc.poll() is not None:
                raise SystemExit(f"a member exited: {''.join(m.stderr[-20:])}")
            m.pump(timeout=0.01)


def trial(bootstrap, topic, n, session_ms, heartbeat_ms):
    group = f"bench-{n}-{int(time.time())}"
    members = [MemberProcess("confluent", bootstrap, topic, group, commit_every=50, delay_ms=2,
                             session_ms=session_ms, heartbeat_ms=heartbeat_ms)
               for _ in range(MEMBERS)]
    try:
        wait(members, lambda: covers(members) and all(len(m.assignment) == PARTITIONS // MEMBERS
                                                      for m in members), "a stable group")
        counts = [len(m.consumed) for m in members]
        wait(members, lambda: all(len(m.consumed) > c for m, c in zip(members, counts)),
             "every member to consume")
        victim, survivors = members[0], members[1:]
        victim.kill()
        killed_at = time.monotonic()
        wait(survivors, lambda: covers(survivors, after=killed_at), "the survivors to converge")
        converged = max(m.assigned_at for m in survivors)
        # The rebalance: from the first survivor told to give up its
        # partitions to the last one assigned again.
        told = min(t for m in survivors for t in m.revoked_at if t > killed_at)
        return converged - killed_at, converged - told
    finally:
        for m in members:
            m.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = KaasBroker(data_dir=Path(tmp) / "data", log_dir=Path(tmp) / "logs")
        broker.start()
        try:
            topic = "bench-convergence"
            setup_topic(broker.bootstrap, topic)
            results = []
            for n in range(1, args.trials + 1):
                t, rebalance = trial(broker.bootstrap, topic, n, args.session_timeout_ms,
                                     args.heartbeat_ms)
                results.append((t, rebalance))
                print(f"trial {n}: converged {t:.2f} s after SIGKILL, rebalance {rebalance:.3f} s "
                      f"(session.timeout.ms={args.session_timeout_ms}, "
                      f"heartbeat.interval.ms={args.heartbeat_ms}, {MEMBERS} members, "
                      f"{PARTITIONS} partitions)", flush=True)
            ts = [t for t, _ in results]
            rs = [r for _, r in results]
            print(f"converged after SIGKILL: median {statistics.median(ts):.2f} s "
                  f"(min {min(ts):.2f}, max {max(ts):.2f}) with session.timeout.ms="
                  f"{args.session_timeout_ms}; rebalance: median {statistics.median(rs):.3f} s "
                  f"(max {max(rs):.3f})")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
