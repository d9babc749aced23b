"""aiokafka 0.14 (asyncio, its own protocol code) against a real kaas broker:
admin, idempotent produce, consumer groups, transactions and a transactional
copier that is SIGKILLed mid-stream.

Each test is a plain function that runs one coroutine with asyncio.run (no
pytest-asyncio), each with its own broker, started with the group flags the
other group tests use (no initial rebalance delay, 1 s minimum session
timeout) so joins and hand-overs take well under a second.
"""

import asyncio
import collections
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.structs import TopicPartition

from common import CONSUME_TIMEOUT, N, OP_TIMEOUT, PARTITIONS, by_partition, roundtrip_records
from conftest import KaasBroker, _serve

HERE = Path(__file__).resolve().parent
OP_TIMEOUT_MS = int(OP_TIMEOUT * 1000)
GROUP_FLAGS = ("--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000")
TOPIC_ALREADY_EXISTS = 36


@pytest.fixture
def gkaas(request, tmp_path):
    """A started KaasBroker with GROUP_FLAGS; stopped at teardown."""
    yield from _serve(request, KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                                          extra_args=GROUP_FLAGS))


@pytest.fixture
def gbroker(gkaas) -> str:
    return gkaas.bootstrap


def run(coro, timeout: float = 2 * CONSUME_TIMEOUT):
    """Runs `coro` to completion in a fresh event loop, failing after `timeout` s."""
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro
    return asyncio.run(bounded())


async def until(condition, what: str, timeout: float = OP_TIMEOUT, interval: float = 0.05):
    """Awaits condition() (a coroutine function) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = await condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


async def started(client):
    await client.start()
    return client


async def new_admin(bootstrap: str) -> AIOKafkaAdminClient:
    return await started(AIOKafkaAdminClient(bootstrap_servers=bootstrap,
                                             request_timeout_ms=OP_TIMEOUT_MS))


async def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = await new_admin(bootstrap)
    try:
        resp = await admin.create_topics([NewTopic(topic, partitions, 1)])
        assert [(t[0], t[1]) for t in resp.topic_errors] == [(topic, 0)], resp
    finally:
        await admin.close()


async def read_all(bootstrap: str, topic: str, partitions: int, isolation: str):
    """{partition: [ConsumerRecord]}: everything an `isolation` consumer
    (assign, no group) reads from the beginning of each partition up to its
    end offset (for read_committed, the last stable offset), taken first."""
    c = await started(AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                       enable_auto_commit=False, isolation_level=isolation,
                                       auto_offset_reset="earliest",
                                       request_timeout_ms=OP_TIMEOUT_MS))
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        end = await c.end_offsets(tps)
        got = {tp.partition: [] for tp in tps}

        async def behind():
            return [tp for tp in tps if await c.position(tp) < end[tp]]
        async with asyncio.timeout(CONSUME_TIMEOUT):
            while await behind():
                for tp, records in (await c.getmany(timeout_ms=200)).items():
                    got[tp.partition].extend(records)
        return got
    finally:
        await c.stop()


# -- 1. admin ---------------------------------------------------------------

def test_admin_creates_describes_grows_and_deletes_topics(gkaas, topic_name):
    compacted, plain = topic_name("compacted"), topic_name("plain")

    async def body():
        admin = await new_admin(gkaas.bootstrap)
        try:
            resp = await admin.create_topics([
                NewTopic(compacted, 3, 1, topic_configs={"cleanup.policy": "compact",
                                                         "retention.ms": "3600000"}),
                NewTopic(plain, 2, 1)])
            assert sorted((t[0], t[1]) for t in resp.topic_errors) == sorted(
                [(compacted, 0), (plain, 0)]), resp
            again = await admin.create_topics([NewTopic(plain, 2, 1)])
            assert [(t[0], t[1]) for t in again.topic_errors] == [(plain, TOPIC_ALREADY_EXISTS)]

            assert {compacted, plain} <= set(await admin.list_topics())
            described = {t["topic"]: t for t in await admin.describe_topics([compacted, plain])}
            assert {name: (t["error_code"], sorted(p["partition"] for p in t["partitions"]))
                    for name, t in described.items()} == {compacted: (0, [0, 1, 2]),
                                                          plain: (0, [0, 1])}

            [configs] = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, compacted)])
            [resource] = configs.resources
            assert resource[0] == 0 and resource[3] == compacted, resource
            entries = {e[0]: e for e in resource[4]}
            assert entries["cleanup.policy"][1] == "compact"
            assert entries["retention.ms"][1] == "3600000"
            [plain_configs] = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, plain, configs={"cleanup.policy": None})])
            [[_, _, _, _, plain_entries]] = plain_configs.resources
            assert [(e[0], e[1]) for e in plain_entries] == [("cleanup.policy", "delete")]

            await admin.create_partitions({plain: NewPartitions(5)})  # raises on an error code

            async def grown():
                [t] = await admin.describe_topics([plain])
                return len(t["partitions"]) == 5
            await until(grown, f"{plain} to have 5 partitions")

            deleted = await admin.delete_topics([plain])
            assert [(t[0], t[1]) for t in deleted.topic_error_codes] == [(plain, 0)], deleted

            async def gone():
                return plain not in await admin.list_topics()
            await until(gone, f"{plain} to disappear from the topic list")
            assert compacted in await admin.list_topics()

            cluster = await admin.describe_cluster()
            assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [
                ("127.0.0.1", gkaas.port)], cluster
            assert cluster["controller_id"] == cluster["brokers"][0]["node_id"], cluster
            assert cluster["cluster_id"], cluster
        finally:
            await admin.close()
    run(body())


# -- 2. idempotent produce --------------------------------------------------

def test_idempotent_producer_writes_each_record_once_in_partition_order(gbroker, topic_name):
    topic = topic_name()
    records = roundtrip_records("none")

    async def body():
        await create_topic(gbroker, topic)
        producer = await started(AIOKafkaProducer(
            bootstrap_servers=gbroker, enable_idempotence=True, acks="all", linger_ms=20,
            request_timeout_ms=OP_TIMEOUT_MS))
        try:
            assert producer._txn_manager.producer_id >= 0  # InitProducerId answered
            sent = [await producer.send(topic, key=k, value=v, partition=p) for p, k, v in records]
            acks = await asyncio.gather(*sent)
        finally:
            await producer.stop()
        expected = by_partition(records)
        # record i goes to partition i % PARTITIONS: its offset there is i // PARTITIONS
        assert [(a.partition, a.offset) for a in acks] == [
            (i % PARTITIONS, i // PARTITIONS) for i in range(N)]
        got = await read_all(gbroker, topic, PARTITIONS, "read_uncommitted")
        assert {p: [(r.offset, r.key, r.value) for r in rs] for p, rs in got.items()} == expected
        assert sum(len(rs) for rs in got.values()) == N
    run(body())


# -- 3. consumer groups -----------------------------------------------------

async def produce_round(bootstrap: str, topic: str, tag: str, per_partition: int) -> None:
    producer = await started(AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                              acks="all", request_timeout_ms=OP_TIMEOUT_MS))
    try:
        sent = [await producer.send(topic, value=f"{tag}-{i}".encode(), partition=i % PARTITIONS)
                for i in range(per_partition * PARTITIONS)]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def drain(members, want: int):
    """Polls every member in turn until they have read `want` records in all;
    returns [{partition: [(offset, value)]}] per member."""
    got = [collections.defaultdict(list) for _ in members]
    total = 0
    async with asyncio.timeout(CONSUME_TIMEOUT):
        while total < want:
            for m, seen in zip(members, got):
                for tp, records in (await m.getmany(timeout_ms=100)).items():
                    seen[tp.partition].extend((r.offset, r.value.decode()) for r in records)
                    total += len(records)
    assert total == want, got
    return got


def test_group_members_share_partitions_hand_over_on_leave_and_resume_from_commits(
        gbroker, topic_name):
    topic, group = topic_name(), topic_name("group")
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}

    def member():
        return started(AIOKafkaConsumer(
            topic, bootstrap_servers=gbroker, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=200,
            request_timeout_ms=OP_TIMEOUT_MS))

    def round_values(tag, first_offset, per_partition):
        """{partition: [(offset, value)]} of one produce_round into an
        empty-until-first_offset topic."""
        return {p: [(first_offset + j, f"{tag}-{p + PARTITIONS * j}") for j in range(per_partition)]
                for p in range(PARTITIONS)}

    async def body():
        await create_topic(gbroker, topic)
        a, b = await member(), await member()
        members = [a, b]
        try:
            async def split():
                sa, sb = a.assignment(), b.assignment()
                return sa and sb and not (sa & sb) and (sa | sb) == everything
            await until(split, "two members to split the partitions")
            owned = [set(a.assignment()), set(b.assignment())]

            await produce_round(gbroker, topic, "first", 10)
            got = await drain(members, 10 * PARTITIONS)
            for m, seen, mine in zip(members, got, owned):
                assert set(seen) == {tp.partition for tp in mine}
            assert {p: rs for seen in got for p, rs in seen.items()} == round_values("first", 0, 10)
            for m in members:
                await m.commit()
            for tp in everything:
                assert await a.committed(tp) == 10

            await b.stop()  # LeaveGroup: a gets b's partitions
            members.remove(b)

            async def took_over():
                return a.assignment() == everything
            await until(took_over, "the remaining member to own every partition")
            await produce_round(gbroker, topic, "second", 5)
            [seen] = await drain([a], 5 * PARTITIONS)
            # b's partitions resume at b's commits: no record of the first round again.
            assert dict(seen) == round_values("second", 10, 5)
            await a.commit()
            await a.stop()
            members.remove(a)

            c = await member()
            members.append(c)

            async def owns_all():
                return c.assignment() == everything
            await until(owns_all, "a restarted member to own every partition")
            for tp in everything:
                assert await c.committed(tp) == 15
            await produce_round(gbroker, topic, "third", 2)
            [seen] = await drain([c], 2 * PARTITIONS)
            assert dict(seen) == round_values("third", 15, 2)
        finally:
            for m in members:
                await m.stop()
    run(body())


# -- 4. transactions --------------------------------------------------------

def test_read_committed_sees_committed_transactions_only_read_uncommitted_sees_all(
        gbroker, topic_name):
    topic = topic_name()

    async def body():
        await create_topic(gbroker, topic, 2)
        producer = await started(AIOKafkaProducer(
            bootstrap_servers=gbroker, transactional_id=topic_name("txn"),
            transaction_timeout_ms=60000, linger_ms=5, request_timeout_ms=OP_TIMEOUT_MS))
        try:
            async with producer.transaction():
                for i in range(50):
                    await producer.send(topic, value=f"committed-{i}".encode(), partition=i % 2)
            await producer.begin_transaction()
            for i in range(20):
                await producer.send(topic, value=f"aborted-{i}".encode(), partition=i % 2)
            await producer.flush()  # the aborted records reach the log before the abort
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(topic, value=b"committed-last", partition=0)
        finally:
            await producer.stop()

        committed = {0: [f"committed-{i}" for i in range(0, 50, 2)] + ["committed-last"],
                     1: [f"committed-{i}" for i in range(1, 50, 2)]}
        aborted = {0: [f"aborted-{i}" for i in range(0, 20, 2)],
                   1: [f"aborted-{i}" for i in range(1, 20, 2)]}
        rc = await read_all(gbroker, topic, 2, "read_committed")
        assert {p: [r.value.decode() for r in rs] for p, rs in rc.items()} == committed
        ru = await read_all(gbroker, topic, 2, "read_uncommitted")
        assert {p: [r.value.decode() for r in rs] for p, rs in ru.items()} == {
            0: committed[0][:-1] + aborted[0] + ["committed-last"],
            1: committed[1] + aborted[1]}
    run(body())


# -- 5. a transactional copier, SIGKILLed mid-transaction --------------------

COPY_N = 600
COPY_BATCH = 25
COPY_PAUSE_S = 0.3
# The copier run i is SIGKILLed at its first "open" line after this many
# commits of its own; the last run copies the rest and is then stopped.
KILL_AFTER_COMMITS = (4, 6)


class CopierRun:
    """One aiokafka_copier.py process; its output lines are kept for a report."""

    def __init__(self, bootstrap, src, dst, group, txn_id, log: list):
        self.args = [sys.executable, str(HERE / "aiokafka_copier.py"), bootstrap, src, dst, group,
                     txn_id, str(COPY_BATCH), str(COPY_PAUSE_S)]
        self.log = log
        self.proc = None

    async def start(self):
        self.log.append(f"--- copier run {sum(1 for l in self.log if l.startswith('---')) + 1}")
        self.proc = await asyncio.create_subprocess_exec(
            *self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT)

    async def line(self) -> str:
        raw = await self.proc.stdout.readline()
        if not raw:
            code = await self.proc.wait()
            raise AssertionError(f"copier exited with {code}:\n" + "\n".join(self.log))
        self.log.append(raw.decode(errors="replace").rstrip())
        return self.log[-1]

    async def kill(self):
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


def test_transactional_copier_killed_mid_transaction_copies_every_record_exactly_once(
        gbroker, topic_name):
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("group")
    txn_id = topic_name("copier")
    log: list[str] = []

    async def group_offsets(admin):
        offsets = await admin.list_consumer_group_offsets(group)
        return sum(max(o.offset, 0) for tp, o in offsets.items() if tp.topic == src)

    async def body():
        await create_topic(gbroker, src)
        await create_topic(gbroker, dst)
        seeder = await started(AIOKafkaProducer(bootstrap_servers=gbroker, enable_idempotence=True,
                                                acks="all", linger_ms=5))
        try:
            sent = [await seeder.send(src, key=f"k{i}".encode(), value=f"v{i}".encode(),
                                      partition=i % PARTITIONS) for i in range(COPY_N)]
            await asyncio.gather(*sent)
        finally:
            await seeder.stop()

        admin = await new_admin(gbroker)
        copier = None
        aborted = []  # how many copies each killed run left in its open transaction
        try:
            for commits_before_kill in KILL_AFTER_COMMITS:
                copier = CopierRun(gbroker, src, dst, group, txn_id, log)
                await copier.start()
                commits, committed_total = 0, 0
                async with asyncio.timeout(CONSUME_TIMEOUT):
                    while True:
                        line = await copier.line()
                        if " committed " in line:
                            commits += 1
                            committed_total = int(line.rsplit(" ", 1)[1])
                        elif " open " in line and commits >= commits_before_kill:
                            break
                # Its copies are in `out`, its offsets not yet sent: kill it there.
                await copier.kill()
                aborted.append(int(line.rsplit(" ", 1)[1]) - committed_total)
                before = await group_offsets(admin)
                assert 0 < before < COPY_N, (before, "\n".join(log))

            copier = CopierRun(gbroker, src, dst, group, txn_id, log)
            await copier.start()

            async def all_copied():
                if copier.proc.returncode is not None:
                    raise AssertionError("copier exited:\n" + "\n".join(log))
                return await group_offsets(admin) == COPY_N
            # Keep draining its output so it never blocks on a full pipe.
            reader = asyncio.ensure_future(drain_lines(copier))
            try:
                await until(all_copied, f"the group's offsets to reach {COPY_N}",
                            timeout=CONSUME_TIMEOUT, interval=0.2)
            finally:
                await copier.kill()
                reader.cancel()
        finally:
            if copier is not None:
                await copier.kill()
            await admin.close()

        inputs = {p: [f"copy:v{i}" for i in range(p, COPY_N, PARTITIONS)]
                  for p in range(PARTITIONS)}
        rc = await read_all(gbroker, dst, PARTITIONS, "read_committed")
        got = {p: [r.value.decode() for r in rs] for p, rs in rc.items()}
        counts = collections.Counter(v for vs in got.values() for v in vs)
        duplicated = {v: n for v, n in counts.items() if n > 1}
        missing = {v for vs in inputs.values() for v in vs} - counts.keys()
        assert not duplicated and not missing, (
            f"{len(duplicated)} duplicated (e.g. {list(duplicated.items())[:5]}), "
            f"{len(missing)} missing\n" + "\n".join(log))
        assert got == inputs  # each partition copied in order, nothing else
        # Each kill caught an open transaction: exactly its copies are in the log too (aborted).
        ru = await read_all(gbroker, dst, PARTITIONS, "read_uncommitted")
        assert len(aborted) == 2 and all(aborted), aborted
        assert sum(len(rs) for rs in ru.values()) == COPY_N + sum(aborted), (
            aborted, "\n".join(log))
    run(body())


async def drain_lines(copier: CopierRun) -> None:
    """Keeps reading the copier's output (into its log) until it ends."""
    while raw := await copier.proc.stdout.readline():
        copier.log.append(raw.decode(errors="replace").rstrip())
