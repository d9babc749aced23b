"""Log compaction across brokers: the workload of
tests/clients/compaction_workload.py (a million records over ten thousand
keys, tombstones, transactions with some aborted) on a three-broker
cluster, with the partition's leader killed -9 while its cleaner is in the
middle of a pass (kaas_log_cleaner_cleaning is 1; the cleaner's I/O is
paced so a pass lasts long enough to be caught). Another broker takes the
partition over, finishes the workload's writes and cleans; afterwards the
read_committed view is exactly the last committed record of each live key
at its acknowledged offset, tombstoned keys are gone, and the shared log
shrank to about the live records.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))

import compaction_workload as w  # noqa: E402
from harness import HarnessError, wait_for  # noqa: E402


def _cleaning(c, n: int) -> bool:
    try:
        return c.brokers[n].metric("kaas_log_cleaner_cleaning") == 1
    except HarnessError:
        return False


def test_compacted_log_survives_its_leader_killed_mid_clean(cluster_factory, topic_name):
    c = cluster_factory(metrics=True, extra_args=(
        "--log-cleaner-backoff-ms", "100",
        "--log-cleaner-io-max-bytes-per-second", "8000000"))
    topic = topic_name()
    w.create_topic(c.bootstrap, topic)
    c.wait_ready(topic, 1)
    leader = c.leader_of(topic, 0)
    killed = []

    def kill_the_leader_mid_clean(r: int) -> None:
        if r == 8:
            wait_for(lambda: _cleaning(c, leader), 60, f"broker {leader} in a cleaning pass", 0.01)
            c.kill9(leader)
            killed.append(leader)

    model = w.run(c.bootstrap, topic, on_round=kill_the_leader_mid_clean)
    assert killed == [leader]
    successor = c.wait_leader_moved(topic, 0, leader)
    c.start_broker(leader)
    c.wait_ready(topic, 1)

    def passes() -> float:
        total = 0.0
        for n in c.live_ids():
            try:
                total += c.brokers[n].metric("kaas_log_cleaner_passes_total")
            except HarnessError:
                pass
        return total

    w.settle(c.bootstrap, topic, model, passes)
    assert c.brokers[successor].metric("kaas_log_cleaner_bytes_written_total") > 0, \
        "the new leader cleaned"
    (part_dir,) = [d for d in c.shared.rglob(f"{topic}-0") if d.is_dir()]
    w.check_shrunk(part_dir, model)
