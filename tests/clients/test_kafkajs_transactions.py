"""Runs kafkajs_transactions.test.js (node's test runner) against a fresh kaas
broker once per shipped policy, so one pytest run covers kafkajs transactions
too. The node tests of one run share its broker."""

import pytest

from node_runner import run_node_tests

# Commit/abort, consume-transform-produce with sendOffsets, zombie fencing.
EXPECTED_TESTS = 3
# Each node test has its own 60 s timeout; this bounds the whole file.
NODE_TIMEOUT_S = EXPECTED_TESTS * 60 + 30


@pytest.mark.timeout(NODE_TIMEOUT_S + 30)
def test_kafkajs_transactions(policy_broker, tmp_path):
    run_node_tests("kafkajs_transactions.test.js", policy_broker.bootstrap, EXPECTED_TESTS,
                   tmp_path / "kafkajs-transactions.out", NODE_TIMEOUT_S)
