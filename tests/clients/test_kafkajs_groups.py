"""Runs kafkajs_groups.test.js (node's test runner) against a fresh kaas
broker, so one pytest run covers kafkajs consumer groups too. The node tests
share this one broker."""

import os
import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEST_FILE = HERE / "kafkajs_groups.test.js"
# The split/takeover test and the admin test. A run that finds fewer tests
# fails instead of passing quietly.
EXPECTED_TESTS = 2
NODE_TIMEOUT_S = 600


def test_kafkajs_groups(broker):
    node = shutil.which("node")
    assert node, "node is not on PATH (scripts/setup-clients needs node and npm)"
    assert (HERE / "node_modules" / "kafkajs").is_dir(), \
        "tests/clients/node_modules is missing: run scripts/setup-clients"
    env = dict(os.environ, KAAS_BOOTSTRAP=broker, KAFKAJS_NO_PARTITIONER_WARNING="1")
    proc = subprocess.run(
        [node, "--test", "--test-reporter=tap", str(TEST_FILE)],
        cwd=HERE, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=NODE_TIMEOUT_S)
    output = f"exit code {proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    counts = dict((k, int(v)) for k, v in re.findall(r"^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$",
                                                     proc.stdout, re.M))
    assert proc.returncode == 0, output
    assert counts.get("tests") == EXPECTED_TESTS, output
    assert counts.get("pass") == EXPECTED_TESTS, output
