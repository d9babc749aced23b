"""Runs kafkajs_transactions.test.js (node's test runner) against a fresh kaas
broker once per shipped policy, so one pytest run covers kafkajs transactions
too. The node tests of one run share its broker."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from txn_common import policy_broker  # noqa: F401 (a fixture)

HERE = Path(__file__).resolve().parent
TEST_FILE = HERE / "kafkajs_transactions.test.js"
# Commit/abort, consume-transform-produce with sendOffsets, zombie fencing. A
# run that finds fewer tests (say the file stopped registering some) fails
# instead of passing quietly.
EXPECTED_TESTS = 3
# Each node test has its own 60 s timeout; this bounds the whole file.
NODE_TIMEOUT_S = EXPECTED_TESTS * 60 + 30


@pytest.mark.timeout(NODE_TIMEOUT_S + 30)
def test_kafkajs_transactions(policy_broker, tmp_path):
    node = shutil.which("node")
    assert node, "node is not on PATH (scripts/setup-clients needs node and npm)"
    assert (HERE / "node_modules" / "kafkajs").is_dir(), \
        "tests/clients/node_modules is missing: run scripts/setup-clients"
    env = dict(os.environ, KAAS_BOOTSTRAP=policy_broker.bootstrap,
               KAFKAJS_NO_PARTITIONER_WARNING="1")
    out_path = tmp_path / "kafkajs-transactions.out"
    # Output goes to a file, not a pipe, so that it can be shown even when this
    # test is stopped by a timeout. --test-force-exit: a client that leaks a
    # socket must not keep node running after the last test.
    try:
        with open(out_path, "w") as out:
            proc = subprocess.run(
                [node, "--test", "--test-force-exit", "--test-reporter=tap", str(TEST_FILE)],
                cwd=HERE, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, timeout=NODE_TIMEOUT_S)
    finally:
        output = out_path.read_text(errors="replace") if out_path.exists() else ""
        print(output)  # shown by pytest when the test fails
    counts = {k: int(v) for k, v in re.findall(
        r"^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$", output, re.M)}
    assert proc.returncode == 0, f"node --test exited with {proc.returncode}: {counts}"
    assert counts.get("tests") == EXPECTED_TESTS, counts
    assert counts.get("pass") == EXPECTED_TESTS, counts
