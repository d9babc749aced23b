"""Runs one kafkajs test file with node's test runner against a broker, for
the pytest wrappers (test_kafkajs*.py): one pytest run covers kafkajs too."""

import os
import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_node_tests(test_file: str, bootstrap: str, expected: int, out_path: Path,
                   timeout_s: float, env: dict[str, str] | None = None) -> None:
    """Runs `test_file` (with `env` added to the environment) and asserts that exactly `expected` node tests ran and
    passed (a file that stopped registering some fails instead of passing
    quietly). Output goes to `out_path`, not a pipe, so it can be shown even
    when the test is stopped by a timeout; --test-force-exit: a client that
    leaks a socket must not keep node running after the last test."""
    node = shutil.which("node")
    assert node, "node is not on PATH (scripts/setup-clients needs node and npm)"
    assert (HERE / "node_modules" / "kafkajs").is_dir(), \
        "tests/clients/node_modules is missing: run scripts/setup-clients"
    env = dict(os.environ, KAAS_BOOTSTRAP=bootstrap, KAFKAJS_NO_PARTITIONER_WARNING="1",
               **(env or {}))
    try:
        with open(out_path, "w") as out:
            proc = subprocess.run(
                [node, "--test", "--test-force-exit", "--test-reporter=tap", str(HERE / test_file)],
                cwd=HERE, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, timeout=timeout_s)
    finally:
        output = out_path.read_text(errors="replace") if out_path.exists() else ""
        print(output)  # shown by pytest when the test fails
    counts = {k: int(v) for k, v in re.findall(
        r"^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$", output, re.M)}
    assert proc.returncode == 0, f"node --test exited with {proc.returncode}: {counts}"
    assert counts.get("tests") == expected, counts
    assert counts.get("pass") == expected, counts
