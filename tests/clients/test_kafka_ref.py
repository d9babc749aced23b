"""The reference tooling other tests and benches rely on, exactly as
docs/compatibility.md and compat/kafka describe it: `scripts/kafka-ref start` formats a
KRaft Apache Kafka, starts it on loopback and prints one `bootstrap=` line;
`stop` returns once exactly its processes are gone; `setup-java --classpath
4|3` prints a classpath a Java probe compiles and runs against."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

KAFKA_REF = REPO / "scripts" / "kafka-ref"
SETUP_JAVA = REPO / "scripts" / "setup-java"
PROBE = Path(__file__).resolve().parent / "java" / "RefProbe.java"


def classpath(version: str) -> str:
    p = subprocess.run([SETUP_JAVA, "--classpath", version], capture_output=True, text=True,
                       timeout=600, check=True)
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout
    return lines[0]


def probe(version: str, bootstrap: str) -> str:
    p = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-cp", classpath(version), str(PROBE),
                        bootstrap], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout.strip()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("tv", ["2", "0"])
def test_kafka_ref_starts_prints_bootstrap_and_stops_what_it_started(tmp_path, tv):
    d = tmp_path / "kafka"
    start = subprocess.run([KAFKA_REF, "start", "--dir", d, "--version", "4", "--tv", tv,
                            "--heap", "512m"], capture_output=True, text=True, timeout=300)
    try:
        assert start.returncode == 0, start.stderr
        assert re.fullmatch(r"bootstrap=127\.0\.0\.1:\d+\n", start.stdout), start.stdout
        bootstrap = start.stdout.strip().split("=", 1)[1]
        pids = [int(x) for x in subprocess.run([KAFKA_REF, "pids", "--dir", d], capture_output=True,
                                               text=True, check=True).stdout.split()]
        assert len(pids) == 1 and all(alive(p) for p in pids)
        # The finalized transaction.version is what --tv asked (4.x lists a
        # feature at level 0 as not finalized), seen by both Java clients.
        want = "2" if tv == "2" else "none"
        assert probe("4", bootstrap) == f"client=4.4.0 nodes=1 transaction.version={want}"
        assert probe("3", bootstrap) == f"client=3.7.2 nodes=1 transaction.version={want}"
    finally:
        stop = subprocess.run([KAFKA_REF, "stop", "--dir", d], capture_output=True, text=True,
                              timeout=120)
    assert stop.returncode == 0, stop.stderr
    assert not any(alive(p) for p in pids)
    assert subprocess.run([KAFKA_REF, "pids", "--dir", d], capture_output=True, text=True,
                          check=True).stdout == ""


def test_kafka_ref_runs_apache_kafka_3_7_and_refuses_tv2_there(tmp_path):
    refused = subprocess.run([KAFKA_REF, "start", "--dir", tmp_path / "bad", "--version", "3",
                              "--tv", "2"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--tv 0 only" in refused.stderr
    d = tmp_path / "kafka3"
    start = subprocess.run([KAFKA_REF, "start", "--dir", d, "--version", "3", "--heap", "512m"],
                           capture_output=True, text=True, timeout=300)
    try:
        assert start.returncode == 0, start.stderr
        bootstrap = start.stdout.strip().split("=", 1)[1]
        assert probe("3", bootstrap) == "client=3.7.2 nodes=1 transaction.version=none"
    finally:
        subprocess.run([KAFKA_REF, "stop", "--dir", d], timeout=120, check=True)


def test_cluster_ids_never_start_with_a_dash_the_storage_tool_would_read_as_an_option():
    import base64
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("kafka_ref", str(KAFKA_REF))
    spec = importlib.util.spec_from_loader("kafka_ref", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    ids = [mod.new_cluster_id() for _ in range(4000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == len(ids)
