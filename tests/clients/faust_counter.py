"""A faust-streaming app that counts records per key, run as its own process
by test_faust_app.py (`python faust_counter.py worker`) so the test can
SIGKILL it.

It reads FAUST_IN (keys and values are raw bytes: the value is the input's
sequence number), adds one to the key's count in the Table `counts`, and
sends `SEQ:COUNT` to FAUST_OUT under the same key (see `follow` for why it
also consumes FAUST_OUT). With
processing_guarantee="exactly_once" faust consumes with read_committed and
writes the table's changelog, the output and the consumed offsets in one
transaction per source partition (transactional id APP-GROUP-PARTITION;
see `last_counted` for the two ways faust 0.15 falls short of that, and how
the app closes them), so
a SIGKILLed worker's open transactions are aborted when its successor's
producers fence them, and the successor starts from the committed offsets
with the table rebuilt from the committed changelog.

The table lives in faust's in-memory store (store="memory://"): a restarted
worker keeps no local state and recovers every count from the changelog
topic, APP-counts-changelog, which faust creates itself with
cleanup.policy=compact.

Configuration comes from the environment: FAUST_BROKER (host:port),
FAUST_APP (the app id, also the consumer group), FAUST_IN, FAUST_OUT,
FAUST_PARTITIONS (of the input, output and changelog topics) and
FAUST_DATADIR.
"""

import asyncio
import os

import faust
from faust.transport.consumer import TransactionManager

env = os.environ
PARTITIONS = int(env["FAUST_PARTITIONS"])

app = faust.App(
    env["FAUST_APP"],
    broker=f"kafka://{env['FAUST_BROKER']}",
    store="memory://",
    processing_guarantee="exactly_once",
    datadir=env["FAUST_DATADIR"],
    topic_partitions=PARTITIONS,
    topic_replication_factor=1,
    web_enabled=False,  # the worker command needs --without-web as well
    consumer_auto_offset_reset="earliest",
    # Short timeouts, so a SIGKILLed member leaves the group quickly, and a
    # commit (one transaction per partition) twice a second.
    broker_session_timeout=4.0,
    broker_heartbeat_interval=1.0,
    broker_commit_interval=0.5,
)

source = app.topic(env["FAUST_IN"], key_serializer="raw", value_serializer="raw",
                   partitions=PARTITIONS)
output = app.topic(env["FAUST_OUT"], key_serializer="raw", value_serializer="raw",
                   partitions=PARTITIONS)
# Small changelog segments, cleaned as soon as a little is dirty: the broker
# compacts the changelog while the app writes it and recovers from it.
counts = app.Table("counts", default=int, partitions=PARTITIONS, key_type=bytes,
                   value_type=int,
                   extra_topic_configs={"segment.bytes": 4096,
                                        "min.cleanable.dirty.ratio": 0.01})


# faust 0.15's exactly_once, as read in its code and seen against kaas (one
# run's files each), splits an input's effects over two transactions in two
# ways, and this app closes both:
# - A transaction's offsets are the acked inputs' (Consumer._new_offset),
#   while everything already sent goes into it: the committed transaction of
#   producer 3, epoch 0, held the outputs of input offsets 137..230 of
#   partition 0 with a TxnOffsetCommit of 226, so the worker that followed a
#   kill counted 226..230 again. The app keeps each key's last counted input
#   in a second table and skips an input at or below it (a key's inputs
#   arrive in order, on one partition), saying so on stdout.
# - A table's changelog records wait in faust's ProducerBuffer (send_soon),
#   and a transactional commit does not flush that buffer
#   (Consumer._commit_offsets flushes only outside transactions), so they can
#   land after the commit marker, in the next transaction: the outputs of
#   inputs 1027 and 1028 were committed at offsets 362-363 of output
#   partition 3 while their changelog records followed the marker of
#   changelog partition 3, and a kill aborted them. The app wraps the
#   transaction manager's commit so that it waits for the input being worked
#   on and flushes that buffer first.
# Then an input's output, count and skip mark are in one transaction, and
# the broker is held to committing or aborting them together: a count
# committed without its output (or the other way round) shows up as a
# missing or doubled output, or a wrong count.
last_counted = app.Table("last-counted", default=lambda: -1, partitions=PARTITIONS,
                         key_type=bytes, value_type=int)

# Held while one input is worked on, and by a commit.
working = asyncio.Lock()
_commit = TransactionManager.commit


async def commit_between_inputs(self, offsets, start_new_transaction=True):
    async with working:
        await self.app.producer.flush()
        return await _commit(self, offsets, start_new_transaction=start_new_transaction)


TransactionManager.commit = commit_between_inputs


@app.agent(source)
async def count(stream):
    async for event in stream.events():
        async with working:
            key, value = event.key, event.value
            seq = int(value)
            if seq <= last_counted[key]:
                tp = event.message.tp
                print(f"skipping {tp.topic}[{tp.partition}]@{event.message.offset} "
                      f"(input {seq}): counted already", flush=True)
                continue
            last_counted[key] = seq
            counts[key] += 1
            await output.send(key=key, value=b"%s:%d" % (value, counts[key]))


# faust 0.15 picks a send's transaction (APP-GROUP-PARTITION) from its
# consumer's metadata, which holds only topics the app consumes; a send to
# any other topic goes out through its plain producer, outside every
# transaction (faust-streaming issue 177), and a restarted worker would
# repeat it. Consuming the output too (and doing nothing with it) puts the
# output in that metadata, co-partitioned with the input, so an output
# record joins the transaction of its input's partition: the input's
# murmur2 partition is the output's, as both are keyed alike.
@app.agent(output)
async def follow(stream):
    async for _ in stream:
        pass


if __name__ == "__main__":
    app.main()
