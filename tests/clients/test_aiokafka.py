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
