"""Runs kafkajs_groups.test.js (node's test runner) against a fresh kaas
broker, so one pytest run covers kafkajs consumer groups too. The node tests
share this one broker."""

from node_runner import run_node_tests

# The split/takeover test and the admin test.
EXPECTED_TESTS = 2
NODE_TIMEOUT_S = 600


def test_kafkajs_groups(broker, tmp_path):
    run_node_tests("kafkajs_groups.test.js", broker, EXPECTED_TESTS,
                   tmp_path / "kafkajs-groups.out", NODE_TIMEOUT_S)
