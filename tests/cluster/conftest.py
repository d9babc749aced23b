"""pytest fixtures for the cluster tests: `cluster` is a started etcd + three
brokers (lease TTL $KAAS_LEASE_TTL_MS, default 2000 ms) in the test's tmp
directory, stopped at teardown. A failing test's report gets every process's
log; a broker that exits by itself (not through the harness) fails the test.

$KAAS_CLUSTER_SOAK=1 (scripts/cluster-soak) makes the fault tests run longer
with more faults; `scale` is the factor they multiply their durations and
fault counts by.

`cluster_factory(**kwargs)` makes clusters a test configures itself (per
broker env and flags, metrics, state seeded before the start):
each is stopped at teardown and its logs attached to a failing report.
"""

import os
import re
import uuid

import pytest

from harness import Cluster, HarnessError

_CLUSTERS = pytest.StashKey[list]()
LEASE_TTL_MS = int(os.environ.get("KAAS_LEASE_TTL_MS", "2000"))


@pytest.fixture
def scale() -> int:
    return int(os.environ.get("KAAS_CLUSTER_SOAK_SCALE", "6")) \
        if os.environ.get("KAAS_CLUSTER_SOAK") == "1" else 1


def _serve(request, c: Cluster):
    request.node.stash.setdefault(_CLUSTERS, []).append(c)
    try:
        c.start()
    except HarnessError as e:
        c.stop()
        pytest.fail(f"cluster did not start: {e}", pytrace=False)
    yield c
    died = {n: b.died_unexpectedly() for n, b in c.brokers.items()}
    c.stop()
    died = {n: code for n, code in died.items() if code is not None}
    if died:
        pytest.fail(f"broker(s) exited by themselves during the test: {died}", pytrace=False)


@pytest.fixture
def cluster(request, tmp_path):
    """etcd + brokers 1, 2, 3 on one shared data directory."""
    yield from _serve(request, Cluster(tmp_path / "cluster", n=3, lease_ttl_ms=LEASE_TTL_MS))


@pytest.fixture
def cluster_factory(request, tmp_path):
    """make(n=3, start=True, before_start=None, **Cluster kwargs) -> Cluster.
    before_start(c) runs on the fresh directories before any process starts."""
    made: list[Cluster] = []

    def make(n: int = 3, start: bool = True, before_start=None, **kwargs) -> Cluster:
        kwargs.setdefault("lease_ttl_ms", LEASE_TTL_MS)
        c = Cluster(tmp_path / f"cluster-{len(made)}", n=n, **kwargs)
        request.node.stash.setdefault(_CLUSTERS, []).append(c)
        made.append(c)
        if before_start is not None:
            before_start(c)
        if start:
            try:
                c.start()
            except HarnessError as e:
                c.stop()
                pytest.fail(f"cluster did not start: {e}", pytrace=False)
        return c

    yield make
    died = {}
    for i, c in enumerate(made):
        died.update({(i, n): b.died_unexpectedly() for n, b in c.brokers.items()})
        c.stop()
    died = {k: code for k, code in died.items() if code is not None}
    if died:
        pytest.fail(f"broker(s) exited by themselves during the test: {died}", pytrace=False)


@pytest.fixture
def topic_name(request):
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:150]
    return lambda suffix="": f"{base}{'-' + suffix if suffix else ''}-{uuid.uuid4().hex[:8]}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for i, c in enumerate(item.stash.get(_CLUSTERS, [])):
            report.sections.append((f"cluster {i} logs ({report.when}; kept in {c.root})",
                                    c.logs()))
    return report
