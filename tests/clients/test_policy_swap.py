"""Policy hot swap under a real transactional load.

A confluent-kafka (librdkafka) transactional producer commits transactions
in a loop while the broker's policy is swapped several times between
apache37 and strict with `kaas policy load` over the admin endpoint. No
transaction may fail, every committed record must be read back exactly once
by a read_committed consumer, and `kaas txn describe` must show which policy
decided the producer's entry before and after the swaps.
"""

import os
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from confluent_kafka import Producer

from conftest import KAAS_BIN, POLICIES, KaasBroker, free_port
from test_transactions_confluent import create_topic, read_committed


def kaas_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAAS_BIN), *args], capture_output=True, text=True, timeout=300)


def describe(bootstrap: str, txn_id: str) -> dict:
    r = kaas_cli("txn", "describe", "--bootstrap", bootstrap, txn_id)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        key, _, value = line.partition(": ")
        out[key] = value
    return out


def load(admin: str, policy: Path) -> str:
    r = kaas_cli("policy", "load", str(policy), "--admin", admin)
    assert r.returncode == 0, f"kaas policy load {policy}: {r.stdout} {r.stderr}"
    return r.stdout


def test_swaps_under_a_transactional_load_fail_no_transaction(tmp_path):
    names = ["strict", "apache37", "strict", "apache37", "strict"]
    swap_under_load(tmp_path, [(n, POLICIES[n]) for n in names])


# Set by scripts/test-policy-kit (README's test command runs it): a policy
# crate made by `kaas policy new` outside the tree, built with plain cargo,
# as NAME=PATH.WASM[,NAME=PATH.WASM...] (the plain cargo and the
# cargo-component builds): each is swapped in, in turn.
KIT_POLICY = os.environ.get("KAAS_KIT_POLICY")


@pytest.mark.skipif(not KIT_POLICY, reason="scripts/test-policy-kit sets KAAS_KIT_POLICY")
def test_a_policy_made_by_kaas_policy_new_swaps_in_under_load(tmp_path):
    swaps = []
    for item in KIT_POLICY.split(","):
        name, _, path = item.partition("=")
        assert Path(path).is_file(), path
        swaps.append((name, Path(path)))
    swap_under_load(tmp_path, swaps)


def swap_under_load(tmp_path, swaps: list[tuple[str, Path]]) -> None:
    """Starts a broker on apache37, runs a transactional producer loop, and
    swaps to each (name, component) in turn while transactions commit; the
    entry must be decided by apache37 before and by the last one after."""
    admin = f"127.0.0.1:{free_port()}"
    b = KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                   extra_args=("--policy", str(POLICIES["apache37"]), "--admin-listen", admin))
    b.start()
    try:
        topic = f"swap-{uuid.uuid4().hex[:8]}"
        create_topic(b.bootstrap, topic)
        txn_id = f"swap-tx-{uuid.uuid4().hex[:8]}"
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": txn_id,
                      "transaction.timeout.ms": 60000, "linger.ms": 1})
        p.init_transactions(30)
        before = describe(b.bootstrap, txn_id)
        assert before["decided by"].startswith("apache37@"), before
        assert before["current policy"].startswith("apache37@"), before

        committed: list[str] = []
        failures: list[BaseException] = []
        stop = threading.Event()

        def produce_loop() -> None:
            n = 0
            try:
                while not stop.is_set() or n < 20:
                    p.begin_transaction()
                    values = [f"v-{n}-{i}" for i in range(5)]
                    for i, v in enumerate(values):
                        p.produce(topic, value=v.encode(), partition=i % 2)
                    p.commit_transaction(30)
                    committed.extend(values)
                    n += 1
            except BaseException as e:  # any failed transaction fails the test
                failures.append(e)

        t = threading.Thread(target=produce_loop)
        t.start()
        for target, component in swaps:
            out = load(admin, component)
            assert f"-> {target}@" in out, out
            # Let a few transactions commit under the new policy.
            deadline_count = len(committed) + 5 * 5
            while len(committed) < deadline_count and t.is_alive():
                t.join(0.05)
        stop.set()
        t.join(120)
        assert not t.is_alive(), "the producer loop did not finish"
        assert not failures, f"a transaction failed during the swaps: {failures[0]!r}"
        assert len(committed) >= 5 * 20

        after = describe(b.bootstrap, txn_id)
        last = swaps[-1][0]
        assert after["decided by"].startswith(f"{last}@"), after
        assert after["current policy"].startswith(f"{last}@"), after
        assert after["state"] == "CompleteCommit", after

        seen = read_committed(b.bootstrap, topic, 2, expect_at_least=len(committed))
        assert sorted(seen) == sorted(committed), "every committed record, exactly once"
        p.flush(10)
    finally:
        b.stop()
