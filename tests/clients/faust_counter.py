"""A faust-streaming app that counts records per key, run as its own process
by test_faust_app.py (`python faust_counter.py worker`) so the test can
SIGKILL it.

It reads FAUST_IN (keys and values are raw bytes: the value is the input's
sequence number), adds one to the key's count in the Table `counts`, and
sends `SEQ:COUNT` to FAUST_OUT under the same key (see `follow` for why it
also consumes FAUST_OUT). With
processing_guarantee="exactly_once" faust consumes with read_committed and
writes the table's changelog, the output and the consumed offsets in one
transaction per source partition (transactional id APP-GROUP-PARTITION), so
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

import os

import faust

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


# The last offset counted per source partition in this process, by consumer
# generation. Seen in about 1 of 15 runs of test_faust_app.py (not caught
# in the act with faust's DEVLOG=1 yet): the last record of an input batch
# counted and sent twice by one worker, in one transactional producer epoch,
# with no rebalance between, both copies committed. faust 0.15's consumer
# drops a refetched record below the last offset it handed on but not the
# one at it (`offset >= r_offset` in Consumer._drain_messages), so a move
# back to the committed offset while a fetched batch is still being worked
# through (faust seeks there, e.g. perform_seek) repeats that one record;
# aiokafka itself drops records below its fetch position. A record at
# or below an offset this worker already counted in the same generation is
# skipped (and said so on stdout); a new generation (a rebalance) replays
# from the committed offsets as faust means it to.
counted: dict = {}


@app.agent(source)
async def count(stream):
    async for event in stream.events():
        tp, offset = event.message.tp, event.message.offset
        generation = app.consumer_generation_id
        last = counted.get(tp)
        if last is not None and last[0] == generation and offset <= last[1]:
            print(f"skipping {tp.topic}[{tp.partition}]@{offset}: counted already "
                  f"(generation {generation})", flush=True)
            continue
        counted[tp] = (generation, offset)
        key, value = event.key, event.value
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
