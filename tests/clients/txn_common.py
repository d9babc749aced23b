"""The policy-parametrized broker of the kafka-python and kafkajs
transaction suites (test_transactions_confluent.py has its own, with a
metrics listener and fault injection)."""

import pytest

from conftest import _BROKERS, REPO, BrokerError, KaasBroker

POLICIES = {
    "apache37": REPO / "target" / "wasm32-wasip2" / "release" / "kaas_policy_apache37.wasm",
    "strict": REPO / "target" / "wasm32-wasip2" / "release" / "kaas_policy_strict.wasm",
}


@pytest.fixture(params=sorted(POLICIES))
def policy_broker(request, tmp_path):
    """A started KaasBroker running the parametrized shipped policy, with a
    fresh data dir; like conftest's `kaas`, its output goes into a failing
    test's report and a broker that exits by itself fails the test."""
    b = KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                   extra_args=("--policy", str(POLICIES[request.param])))
    request.node.stash.setdefault(_BROKERS, []).append(b)
    try:
        b.start()
        error = None
    except BrokerError as e:
        error = str(e).split("\n", 1)[0]  # the broker's output goes in a report section
    if error is not None:
        pytest.fail(error, pytrace=False)
    yield b
    died = b.died_unexpectedly()
    b.stop()
    if died is not None:
        pytest.fail(f"kaas broker exited by itself during the test (code {died})", pytrace=False)
