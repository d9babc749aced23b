"""A consume-transform-produce copier written with aiokafka (asyncio), run as
its own process by test_aiokafka.py so the test can SIGKILL it.

It reads `in` as a member of GROUP with read_committed isolation and copies
each record to the same partition of `out` (same key, value prefixed with
"copy:"), one transaction per getmany() batch, committing the consumed
offsets inside the same transaction (send_offsets_to_transaction). Inside
each transaction, once the copies are flushed to the broker (so they sit in
`out` uncommitted), it prints "open TOTAL" and waits PAUSE_S before sending
the offsets and committing: the test SIGKILLs it in that window. Each commit
prints "committed TOTAL". On any error it exits with code 3 (the test then
fails, printing this log).

The producer starts (InitProducerId) before the consumer joins the group: a
restarted copier fences its dead predecessor and has its open transaction
aborted, with the offsets in it, before it reads the group's offsets.

usage: aiokafka_copier.py BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID BATCH PAUSE_S
"""

import asyncio
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError


async def main() -> int:
    bootstrap, src, dst, group, txn_id, batch, pause = sys.argv[1:8]
    batch, pause = int(batch), float(pause)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                                transaction_timeout_ms=20000, linger_ms=2,
                                request_timeout_ms=30000)
    consumer = AIOKafkaConsumer(src, bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False, isolation_level="read_committed",
                                auto_offset_reset="earliest", session_timeout_ms=2000,
                                heartbeat_interval_ms=300, request_timeout_ms=30000)
    copied = 0
    try:
        await producer.start()
        print(f"{txn_id} producer started", flush=True)
        await consumer.start()
        while True:
            got = await consumer.getmany(timeout_ms=300, max_records=batch)
            if not got:
                continue
            async with producer.transaction():
                offsets = {}
                for tp, records in got.items():
                    for r in records:
                        await producer.send(dst, key=r.key, value=b"copy:" + r.value,
                                            partition=tp.partition)
                    offsets[tp] = records[-1].offset + 1
                    copied += len(records)
                await producer.flush()
                print(f"{txn_id} open {copied}", flush=True)
                await asyncio.sleep(pause)
                await producer.send_offsets_to_transaction(offsets, group)
            print(f"{txn_id} committed {copied}", flush=True)
    except KafkaError as e:
        print(f"{txn_id} stops on error: {e!r}", flush=True)
        return 3
    finally:
        await consumer.stop()
        await producer.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
