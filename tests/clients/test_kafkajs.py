"""Runs kafkajs.test.js (node's test runner) against a fresh kaas broker, so
one pytest run covers kafkajs too. The node tests share this one broker."""

import pytest

from node_runner import run_node_tests

# 5 codecs round-trip + timestamps + auto-create.
EXPECTED_TESTS = 7
# Each node test has its own 90 s timeout; this bounds the whole file.
NODE_TIMEOUT_S = EXPECTED_TESTS * 90 + 60


@pytest.mark.timeout(NODE_TIMEOUT_S + 60)
def test_kafkajs(broker, tmp_path):
    run_node_tests("kafkajs.test.js", broker, EXPECTED_TESTS, tmp_path / "kafkajs.out",
                   NODE_TIMEOUT_S)
