"""Committed offsets across brokers: a group's coordinator
takes offset commits for every partition of a topic, also those another
broker leads, and serves them back; after the coordinator is killed, the
shard's new coordinator serves the same offsets.
"""

from confluent_kafka import Consumer, TopicPartition

from harness import wait_for

PARTITIONS = 6


def _consumer(boot: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": boot, "group.id": group,
                     "enable.auto.commit": False})


def test_the_coordinator_takes_commits_for_partitions_other_brokers_lead(cluster, topic_name):
    topic = topic_name()
    cluster.create_topic(topic, PARTITIONS)
    leaders = {cluster.leader_of(topic, p) for p in range(PARTITIONS)}
    assert len(leaders) > 1, f"the partitions are spread over brokers ({leaders})"
    group = f"{topic}-g"
    c = _consumer(cluster.bootstrap, group)
    try:
        wanted = [TopicPartition(topic, p, 10 + p) for p in range(PARTITIONS)]
        done = c.commit(offsets=wanted, asynchronous=False)
        assert [(t.partition, t.offset, t.error) for t in done] == \
               [(p, 10 + p, None) for p in range(PARTITIONS)]
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert [(t.partition, t.offset) for t in got] == [(p, 10 + p) for p in range(PARTITIONS)]
    finally:
        c.close()
    # The coordinator dies: the shard moves, and its journal with it.
    coordinator = cluster.group_coordinator(group)
    cluster.kill9(coordinator)

    def served():
        c = _consumer(",".join(cluster.addr(n) for n in cluster.live_ids()), group)
        try:
            got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=5)
            return [(t.partition, t.offset) for t in got]
        except Exception:
            return None
        finally:
            c.close()

    wait_for(lambda: served() == [(p, 10 + p) for p in range(PARTITIONS)], 30,
             lambda: f"the new coordinator to serve the committed offsets (got {served()})")
