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

from common import CONSUME_TIMEOUT, OP_TIMEOUT, PARTITIONS
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
