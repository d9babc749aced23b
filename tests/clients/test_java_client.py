"""Kafka's own Java client (kafka-clients 4.4.0 from Maven Central,
scripts/setup-java) against a real kaas broker: admin, idempotent produce
with each codec, consumer groups (each with classic and with KIP-848
members, group.protocol=consumer), KIP-848 incremental rebalances,
transactions, zombie fencing, a KIP-447 copier SIGKILLed mid-transaction
(classic and KIP-848 members; and one with KIP-848 members that abandons a
transaction), and SASL_SSL with SCRAM-SHA-256/512 and ACLs (its group
members classic and KIP-848). kaas advertises Kafka 3.7's API versions and
finalizes no transaction.version, so the 4.x producer uses the transaction
protocol of before KIP-890 part 2.

java/KaasJava.java holds the scenarios; it is compiled once per session
(javac) and run as `java -cp ... KaasJava SCENARIO key=value...`, one JVM per
scenario. It checks what the client sees itself: each check prints
"ok N - what", a failed one "FAILED: ..." (exit 1), and a scenario that gets
to its end prints "OK SCENARIO N checks". Each test here requires exit 0 and
that line with exactly the number of checks it expects, so a scenario that
skipped a check fails. The copier's output (and `dump`'s records) are checked
here.

Each test gets its own broker, with the group flags the other group tests
use (no initial rebalance delay, 1 s minimum session timeout) and a 3 s
session with 500 ms heartbeats for KIP-848 members (so that a SIGKILLed one
is fenced as soon as a classic one); the security tests share one SASL_SSL
broker with the ACL authorizer.

Reference check: with KAFKA_REF_BOOTSTRAP=HOST:PORT the tests that need no
security run against that broker instead of a fresh kaas (the SASL_SSL ones
are skipped), e.g. Apache Kafka 4.4.0 started by scripts/kafka-ref with the
same group settings:

    ./scripts/kafka-ref start --dir /tmp/kref-java --tv 0 \
        --config group.initial.rebalance.delay.ms=0 \
        --config group.min.session.timeout.ms=1000 \
        --config group.consumer.min.session.timeout.ms=3000 \
        --config group.consumer.session.timeout.ms=3000 \
        --config group.consumer.min.heartbeat.interval.ms=500 \
        --config group.consumer.heartbeat.interval.ms=500
"""

import collections
import os
import queue
import subprocess
import threading
import time
from pathlib import Path

import pytest

from common import PARTITIONS
from conftest import KAAS_BIN, REPO, BrokerError, KaasBroker, _serve, report_broker_output
from security_setup import make_certs, set_user

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "java" / "KaasJava.java"
CLASSPATH_FILE = REPO / "target" / "java" / "classpath"
GROUP_FLAGS = ("--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000",
               "--group-consumer-session-timeout-ms", "3000",
               "--group-consumer-heartbeat-interval-ms", "500")
# Group members of each protocol: classic (JoinGroup/SyncGroup) and KIP-848.
PROTOCOLS = ("classic", "consumer")
# An external broker to run the plain-broker tests against (see above).
REF_BOOTSTRAP = os.environ.get("KAFKA_REF_BOOTSTRAP")
# Short-lived JVMs start faster with the C1 compiler only.
JAVA = ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
RUN_TIMEOUT = 180.0


@pytest.fixture(scope="session")
def classpath(tmp_path_factory) -> str:
    """KaasJava compiled once; the classpath to run it with."""
    if not CLASSPATH_FILE.is_file():
        pytest.fail(f"{CLASSPATH_FILE} is missing: run scripts/setup-java "
                    "(scripts/setup-clients runs it)", pytrace=False)
    jars = CLASSPATH_FILE.read_text().strip()
    out = tmp_path_factory.mktemp("java-classes")
    p = subprocess.run(["javac", "-d", str(out), "-cp", jars, str(SOURCE)],
                       capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    return f"{out}:{jars}"


def command(classpath: str, scenario: str, **args) -> list[str]:
    return [*JAVA, "-cp", classpath, "KaasJava", scenario, *(f"{k}={v}" for k, v in args.items())]


def run_java(classpath: str, scenario: str, checks: int | None, **args) -> list[str]:
    """Runs one scenario to its end; its output lines. `checks`: the number
    of checks it must report (None: not counted)."""
    p = subprocess.run(command(classpath, scenario, **args), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=RUN_TIMEOUT)
    out = p.stdout + (f"\n--- stderr ---\n{p.stderr}" if p.stderr.strip() else "")
    assert p.returncode == 0, f"KaasJava {scenario} exited with {p.returncode}:\n{out}"
    lines = p.stdout.splitlines()
    ok = [line for line in lines if line.startswith("OK ")]
    if checks is not None:
        assert ok == [f"OK {scenario} {checks} checks"], out
        assert sum(1 for line in lines if line.startswith("ok ")) == checks, out
    return lines


class External:
    bootstrap = REF_BOOTSTRAP


@pytest.fixture
def gkaas(request, tmp_path):
    if REF_BOOTSTRAP:
        yield External()
        return
    yield from _serve(request, KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                                          extra_args=GROUP_FLAGS))


# -- plain broker -------------------------------------------------------------

def test_java_admin_topics_configs_partitions_log_dirs_and_cluster(gkaas, classpath, topic_name):
    """describeCluster (one broker, the controller, every cluster operation),
    createTopics with configs (and TopicExistsException), listTopics,
    describeTopics (leader, replicas, ISR, topic id, authorized operations),
    describeConfigs (sources and defaults), incrementalAlterConfigs (SET,
    APPEND, DELETE, SUBTRACT; a bad value refused and nothing changed),
    createPartitions (2 -> 5; fewer refused), describeLogDirs (every
    partition, sized by what it holds; total and usable bytes), deleteTopics."""
    run_java(classpath, "admin", 25, bootstrap=gkaas.bootstrap, prefix=topic_name())


def test_java_idempotent_produce_with_each_codec_reads_back_exactly_once(
        gkaas, classpath, topic_name):
    """Per codec (none, gzip, snappy, lz4, zstd): 200 records over 4
    partitions, idempotent, acks=all, each acknowledged at its offset;
    listOffsets 0 / 50; read back exactly, in order; describeProducers shows
    one producer id, epoch 0, last sequence 49 on each partition; and the
    compressed topics take under a third of the uncompressed one's bytes on
    disk (the batches are stored as the producer compressed them)."""
    run_java(classpath, "produce", 34, bootstrap=gkaas.bootstrap, prefix=topic_name())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_java_consumer_group_members_share_hand_over_and_resume_from_commits(
        gkaas, classpath, topic_name, protocol):
    """Two members split 4 partitions (range, 2 each: the client's
    RangeAssignor for classic members, the broker's range assignor,
    group.remote.assignor, for KIP-848 ones) and read each record once from
    their own partitions; describeConsumerGroups / listGroups show the group
    (CLASSIC or CONSUMER) stable with each member's partitions; deleting it
    while it has members is refused (GroupNotEmptyException); after both
    commit (listConsumerGroupOffsets and committed() agree), one leaves and
    the other takes over at its commits; a new member after both left
    resumes at the committed offsets; deleteConsumerGroups removes the group
    and its offsets."""
    run_java(classpath, "groups", 18, bootstrap=gkaas.bootstrap, prefix=topic_name(),
             protocol=protocol)


def test_java_consumer_protocol_members_rebalance_incrementally_commit_and_describe(
        gkaas, classpath, topic_name):
    """KIP-848 (group.protocol=consumer, the broker's uniform assignor): a
    member alone is assigned every partition; when a second joins they
    split 2/2, the first only being revoked partitions and the second only
    assigned some (the listeners' incremental callbacks);
    describeConsumerGroups (ConsumerGroupDescribe) shows a CONSUMER group,
    stable, uniform, each member's assignment and target as its listener
    has it, and the coordinator; listConsumerGroups with withTypes keeps
    only the consumer or only a classic group beside it. The new member
    reads its partitions from the first one's commits, each member only its
    own partitions, every record once; listConsumerGroupOffsets and
    committed() (OffsetFetch v9 with the member's epoch) agree; when one
    leaves, the other is only assigned partitions and reads them from the
    leaver's commits; no partition is ever lost; the group ends EMPTY."""
    run_java(classpath, "consumer-protocol", 22, bootstrap=gkaas.bootstrap, prefix=topic_name())


def test_java_transactions_read_committed_skips_aborted_records_and_admin_sees_them_open(
        gkaas, classpath, topic_name):
    """Commit 50, abort 20 (flushed first), commit 1 over two partitions.
    While the aborted one is open: listTransactions (ONGOING, also as a
    state filter), describeTransactions (its partitions, timeout, start
    time), describeProducers (same producer id and epoch, last sequence 34,
    transaction start offset 26: after 25 records and a commit marker);
    after the abort no open transaction is left; the final commit completes.
    read_committed reads exactly the 51 committed records in order,
    read_uncommitted all 71."""
    run_java(classpath, "transactions", 9, bootstrap=gkaas.bootstrap, prefix=topic_name())


def test_java_zombie_producers_are_fenced(gkaas, classpath, topic_name):
    """Three producers with one transactional.id, each initTransactions
    fencing the one before: the fenced ones get ProducerFencedException on a
    send to a new partition (AddPartitionsToTxn), on commit and on abort, and
    InvalidProducerEpochException on a bare Produce; read_committed sees only
    the last one's record, read_uncommitted also the aborted ones, never a
    fenced producer's late record."""
    run_java(classpath, "fencing", 6, bootstrap=gkaas.bootstrap, prefix=topic_name())


# -- a KIP-447 copier, SIGKILLed ------------------------------------------------

COPY_N = 600
COPY_BATCH = 25
COPY_PAUSE_MS = 150
# Each killed run is SIGKILLed at its first line of this kind after this many
# of its own commits: once with its copies flushed ("open"), once with its
# offsets also sent (TxnOffsetCommit pending: "offsets").
KILLS = (("open", 4), ("offsets", 6))


class Copier:
    """One KaasJava copier process; its output lines go to `log`."""

    def __init__(self, classpath: str, log: list, **args):
        log.append(f"--- copier run {sum(1 for l in log if l.startswith('---')) + 1}")
        self.log = log
        self.proc = subprocess.Popen(command(classpath, "copier", **args),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self, deadline: float) -> str | None:
        """The next line (None at the end of the output)."""
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("the copier printed nothing in time:\n" + "\n".join(self.log))
        if line is not None:
            self.log.append(line)
        return line

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_java_transactional_copier_sigkilled_mid_transaction_copies_every_record_exactly_once(
        gkaas, classpath, topic_name, protocol):
    """KIP-447 consume-transform-produce (sendOffsetsToTransaction with the
    consumer's group metadata): 600 records copied in -> out, one
    transaction per poll of up to 25, by a copier JVM that is SIGKILLed
    twice mid-transaction (once with its copies flushed, once with its
    offsets sent too) and restarted; its group member classic (2 s session)
    or KIP-848 (the broker's 3 s session: the restarted member is given the
    partitions once the dead one is fenced). read_committed, `out` is `in`
    copied exactly once, in order per partition; read_uncommitted it holds
    exactly the killed transactions' copies more; the group's offsets are
    the input's end offsets."""
    src, dst, group, txn = topic_name("in"), topic_name("out"), topic_name("group"), topic_name("x")
    run_java(classpath, "seed", 0, bootstrap=gkaas.bootstrap, **{"in": src}, out=dst, n=COPY_N)
    args = dict(bootstrap=gkaas.bootstrap, out=dst, group=group, txn=txn, batch=COPY_BATCH,
                pause_ms=COPY_PAUSE_MS, protocol=protocol, **{"in": src})
    log: list[str] = []
    aborted = []  # copies each killed run left in its open transaction
    copier = None
    try:
        for kind, commits_before in KILLS:
            copier = Copier(classpath, log, **args)
            deadline = time.monotonic() + 60
            commits, committed = 0, 0
            while True:
                line = copier.line(deadline)
                assert line is not None, "the copier ended before it was killed:\n" + "\n".join(log)
                word, _, count = line.partition(" ")
                if word == "committed":
                    commits, committed = commits + 1, int(count)
                elif word == kind and commits >= commits_before:
                    break
            copier.kill()
            aborted.append(int(count) - committed)
        copier = Copier(classpath, log, **args)
        deadline = time.monotonic() + 120
        while (line := copier.line(deadline)) is not None:
            pass
        assert copier.proc.wait() == 0, "\n".join(log)
        assert log[-2:] == [log[-2], "OK copier 0 checks"] and log[-2].startswith("caught up"), \
            "\n".join(log)
    finally:
        if copier is not None:
            copier.kill()

    assert len(aborted) == 2 and all(n > 0 for n in aborted), (aborted, "\n".join(log))
    check_copy(classpath, gkaas.bootstrap, src, dst, group, sum(aborted), log)


def check_copy(classpath, bootstrap, src, dst, group, aborted, log):
    """Reads `dst` back with the Java client (`dump`): read_committed, it is
    `src` copied exactly once, in order per partition; read_uncommitted it
    holds `aborted` copies more; `group`'s offsets are `src`'s ends."""
    lines = run_java(classpath, "dump", None, bootstrap=bootstrap, topic=dst, group=group,
                     **{"in": src})
    records = collections.defaultdict(lambda: collections.defaultdict(list))
    offsets = {}
    for line in lines:
        fields = line.split(" ")
        if fields[0] == "record":
            records[fields[1]][int(fields[2])].append(fields[4])
        elif fields[0] == "committed":
            offsets[int(fields[1])] = int(fields[2])
    inputs = {p: [f"copy:v{i}" for i in range(p, COPY_N, PARTITIONS)] for p in range(PARTITIONS)}
    got = {p: records["read_committed"][p] for p in range(PARTITIONS)}
    counts = collections.Counter(v for vs in got.values() for v in vs)
    duplicated = {v: n for v, n in counts.items() if n > 1}
    missing = {v for vs in inputs.values() for v in vs} - counts.keys()
    assert not duplicated and not missing, (
        f"{len(duplicated)} duplicated (e.g. {list(duplicated.items())[:5]}), "
        f"{len(missing)} missing\n" + "\n".join(log))
    assert got == inputs, "\n".join(log)
    assert sum(len(vs) for vs in records["read_uncommitted"].values()) == COPY_N + aborted, (
        aborted, "\n".join(log))
    assert offsets == {p: COPY_N // PARTITIONS for p in range(PARTITIONS)}, offsets


def test_java_consumer_protocol_copier_hands_over_an_open_transaction_exactly_once(
        gkaas, classpath, topic_name):
    """KIP-447 with KIP-848 members (group.protocol=consumer: the
    TxnOffsetCommits carry the member id and member epoch): 600 records
    copied in -> out. The first copier, in its fifth transaction, sends its
    copies and offsets, then leaves the group and halts with that
    transaction open; the next one fences it (initTransactions aborts the
    open transaction), is given every partition, resumes at the committed
    offsets and catches up. read_committed, `out` is `in` copied exactly
    once, in order per partition; read_uncommitted it holds exactly the
    abandoned transaction's copies more; the group's offsets are the
    input's ends. (A member that leaves hands its partitions over at once;
    a SIGKILLed one holds them for the broker's consumer session: the
    SIGKILL test above.)"""
    src, dst, group, txn = topic_name("in"), topic_name("out"), topic_name("group"), topic_name("x")
    run_java(classpath, "seed", 0, bootstrap=gkaas.bootstrap, **{"in": src}, out=dst, n=COPY_N)
    args = dict(bootstrap=gkaas.bootstrap, out=dst, group=group, txn=txn, batch=COPY_BATCH,
                pause_ms=COPY_PAUSE_MS, protocol="consumer", **{"in": src})
    log: list[str] = []
    copier = Copier(classpath, log, leave_after=4, **args)
    try:
        deadline = time.monotonic() + 60
        committed = 0
        while (line := copier.line(deadline)) is not None:
            word, _, count = line.partition(" ")
            if word == "committed":
                committed = int(count)
        assert copier.proc.wait() == 3 and log[-1].startswith("left "), "\n".join(log)
        abandoned = int(log[-1].split(" ")[1]) - committed
        assert abandoned > 0, "\n".join(log)
        copier = Copier(classpath, log, **args)
        deadline = time.monotonic() + 120
        while (line := copier.line(deadline)) is not None:
            pass
        assert copier.proc.wait() == 0, "\n".join(log)
        assert log[-2:] == [log[-2], "OK copier 0 checks"] and log[-2].startswith("caught up"), \
            "\n".join(log)
    finally:
        copier.kill()
    check_copy(classpath, gkaas.bootstrap, src, dst, group, abandoned, log)


# -- SASL_SSL -------------------------------------------------------------------

USERS = {  # name: (password, mechanism of its SCRAM credential)
    "admin": ("admin-secret", "SCRAM-SHA-512"),
    "alice": ("alice-secret", "SCRAM-SHA-512"),
    "sam": ("sam-secret", "SCRAM-SHA-256"),
    "mallory": ("mallory-secret", "SCRAM-SHA-512"),
}
# Made at run time with alterUserScramCredentials (never `kaas user set`).
NEW_USER = ("carol", "carol-secret", "SCRAM-SHA-256")


@pytest.fixture(scope="module")
def secure_java(tmp_path_factory):
    """A kaas with one SASL_SSL listener, the ACL authorizer (super user
    User:admin) and USERS; the KaasJava arguments that reach it."""
    if REF_BOOTSTRAP:
        pytest.skip("KAFKA_REF_BOOTSTRAP: the SASL_SSL tests need a kaas of their own")
    root = tmp_path_factory.mktemp("java-security")
    certs = make_certs(root / "certs")
    data = root / "data"
    for name, (password, mechanism) in USERS.items():
        set_user(KAAS_BIN, data, name, password, mechanism)
    b = KaasBroker(data_dir=data, log_dir=root / "logs", listeners=(("SECURE", "SASL_SSL"),),
                   extra_args=("--ssl-cert", str(certs.cert), "--ssl-key", str(certs.key),
                               "--authorizer", "acl", "--super-user", "User:admin",
                               *GROUP_FLAGS))
    try:
        b.start()
    except BrokerError as e:
        pytest.fail(str(e), pytrace=False)
    name, password, mechanism = NEW_USER
    args = {"bootstrap": b.address("SECURE"), "ca": str(certs.ca), "new_user": name,
            f"user.{name}": f"{mechanism}:{password}"}
    for user, (password, mechanism) in USERS.items():
        args[f"user.{user}"] = f"{mechanism}:{password}"
    yield b, args
    b.stop()


@pytest.fixture
def secure_args(request, secure_java):
    b, args = secure_java
    report_broker_output(request.node, b)
    yield args
    died = b.died_unexpectedly()
    if died is not None:
        pytest.fail(f"kaas broker exited by itself (code {died})", pytrace=False)


def test_java_sasl_ssl_admin_acls_scram_credentials_and_authorized_operations(
        secure_args, classpath, topic_name):
    """As the super user over SASL_SSL (SCRAM-SHA-512): createAcls,
    describeAcls, deleteAcls (answers the binding it deleted);
    describeCluster's authorized operations for the super user (all) and
    for alice (DESCRIBE, her one cluster ACL); describeTopics' for alice
    (READ, WRITE and the DESCRIBE they imply); describeUserScramCredentials
    lists the users set before the start with their mechanisms;
    alterUserScramCredentials adds a user with two credentials (iterations
    as asked), who then logs in, and deletes them: not found, and the login
    fails."""
    run_java(classpath, "secure-admin", 13, prefix=topic_name(), **secure_args)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_java_sasl_ssl_scram_256_and_512_clients_and_refusals(
        secure_args, classpath, topic_name, protocol):
    """alice (SCRAM-SHA-512) and sam (SCRAM-SHA-256), with the ACLs they need,
    produce idempotently, commit a transaction and read it all read_committed
    in a group (classic or KIP-848 members), committing offsets; mallory,
    with DESCRIBE only, is refused produce (TopicAuthorizationException), the
    group (GroupAuthorizationException: JoinGroup or ConsumerGroupHeartbeat)
    and a transactional id (TransactionalIdAuthorizationException); a wrong
    password is a SaslAuthenticationException for each mechanism."""
    run_java(classpath, "secure-clients", 9, prefix=topic_name(), protocol=protocol, **secure_args)
