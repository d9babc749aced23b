"""Log compaction under a real client (confluent-kafka), the
acceptance workload: a million records over ten thousand keys, with tombstones and
transactions (some aborted), written while the cleaner runs; the broker
dies in the middle of a clean (a fault point aborts it: once with the
cleaned copy synced but not renamed, once just after the rename, before its
indexes are written) and is started again; afterwards the read_committed
view is exactly the last committed record of each live key, at the offset
its producer was told, every tombstoned key is gone after
delete.retention.ms, offsets increase, and the log shrank to about the live
records. A kill -9 and restart after that changes nothing.

The broker binary must be built with `--features fault-injection`
(scripts/test does); without it the fault never fires and the test says so.
"""

import re
import threading
import urllib.request

import pytest

import compaction_workload as w
from conftest import KaasBroker, free_port, report_broker_output


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.mark.parametrize("fault", ["cleaner-before-swap", "cleaner-after-rename"])
def test_compacted_log_is_the_last_committed_value_per_key_after_a_crash_mid_clean(
        request, tmp_path, topic_name, fault):
    port = free_port()
    metrics = f"http://127.0.0.1:{port}/metrics"
    b = KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                   extra_args=("--metrics-listen", f"127.0.0.1:{port}",
                               "--log-cleaner-backoff-ms", "100"))
    report_broker_output(request.node, b)
    b.start()
    crashes = []

    def restart_after_the_fault() -> None:
        code = b.proc.wait()
        if b._stopped_on_purpose:
            return
        crashes.append(code)
        b.env = {}
        b.start()

    watcher = threading.Thread(target=restart_after_the_fault, daemon=True)

    def arm_the_fault(r: int) -> None:
        # Halfway through, the broker is restarted with the fault point
        # armed; the rounds written next make the log dirty, and its
        # cleaner dies in the middle of cleaning them. The watcher starts
        # it again without the fault while the workload goes on.
        if r != 9:
            return
        b.stop()
        b.env = {"KAAS_FAULT": fault}
        b.start()
        watcher.start()

    try:
        topic = topic_name()
        w.create_topic(b.bootstrap, topic)
        model = w.run(b.bootstrap, topic, on_round=arm_the_fault)
        watcher.join(60)
        if not crashes:
            pytest.fail(f"the broker never reached fault point {fault} (is it built with "
                        "--features fault-injection?)")
        assert crashes == [-6], f"one abort at the fault point, got exit codes {crashes}"
        assert model.aborted_txns >= 15 and model.committed_txns >= 35, \
            (model.aborted_txns, model.committed_txns)

        view = w.settle(b.bootstrap, topic, model, lambda: _metric(metrics, "kaas_log_cleaner_passes_total"))
        live = model.live()
        assert len(model.tombstoned()) >= w.KEYS // 10, "the sweep tombstoned a tenth of the keys"
        # Tombstones written only in aborted transactions left their keys
        # live (but for the few a random tombstone had deleted before).
        assert sum(w.key_of(k) in live for k in range(5, w.KEYS, 10)) >= 0.9 * w.KEYS / 10

        (part_dir,) = [d for d in (tmp_path / "data").iterdir() if d.name == f"{topic}-0"]
        assert not list(part_dir.glob("*.cleaned")), "a later pass removed the crash's leftover"
        w.check_shrunk(part_dir, model)

        # A crash now (kill -9) and a restart: the compacted log reads the same.
        b.kill()
        b.start()
        assert w.read_committed(b.bootstrap, topic) == view
    finally:
        b.stop()
