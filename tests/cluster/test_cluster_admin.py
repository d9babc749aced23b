"""Topic administration from any broker in cluster mode.

A topic is created through broker 2, grown from 3 to 6 partitions through
broker 3 and deleted through broker 1; after each step every broker's own
Metadata must show the same thing, records must go in and come out of every
partition, and a deleted topic's directories must leave the shared disk.
Real admin clients (librdkafka, kafka-python) send these requests to the
controller whatever broker they were given, so the "through broker N" steps
are raw requests (kwire) to that broker; confluent's AdminClient is used for
what a client sees of a refusal (INVALID_PARTITIONS for a smaller count).
"""

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions

from checker import History, assert_ok, check
from harness import wait_for
import kwire
from workload import confluent_read_all

PARTITIONS, GROWN = 3, 6
BOUND_S = 30.0


def _agreed_leaders(cluster, topic: str, count: int) -> dict[int, int] | None:
    """partition -> leader if every live broker's own Metadata lists exactly
    `count` partitions of `topic`, each without error, with the same live
    leader, and that leader says so itself; None otherwise."""
    live = cluster.live_ids()
    seen = None
    for n in sorted(live):
        try:
            md = kwire.metadata(cluster.addr(n), None, timeout=2.0)
        except kwire.WireError:
            return None
        parts = md.partitions.get(topic, {})
        if sorted(parts) != list(range(count)) or any(err != 0 for err, _ in parts.values()):
            return None
        leaders = {p: leader for p, (_, leader) in parts.items()}
        if seen is not None and leaders != seen:
            return None
        seen = leaders
    if seen is None or any(leader not in live for leader in seen.values()):
        return None
    return seen


def _wait_agreed(cluster, topic: str, count: int) -> dict[int, int]:
    def views():
        out = {}
        for n in sorted(cluster.live_ids()):
            try:
                out[n] = kwire.metadata(cluster.addr(n), None, timeout=2.0).partitions.get(topic)
            except kwire.WireError as e:
                out[n] = repr(e)
        return out
    return wait_for(lambda: _agreed_leaders(cluster, topic, count), BOUND_S,
                    lambda: f"every broker to agree on {count} led partitions of {topic}: "
                            f"{views()}", 0.1)


def _listed_anywhere(cluster, topic: str) -> list[int]:
    """Brokers whose Metadata for all topics still lists `topic` (or that do
    not answer)."""
    out = []
    for n in sorted(cluster.live_ids()):
        try:
            if topic in kwire.metadata(cluster.addr(n), None, timeout=2.0).partitions:
                out.append(n)
        except kwire.WireError:
            out.append(n)
    return out


def _fetch_answered(addr: str, topic: str, p: int, answers: list):
    """The Fetch answer from 0 unless it is NOT_LEADER_OR_FOLLOWER (kept in
    `answers`)."""
    answer = kwire.fetch(addr, topic, p, 0)
    answers.append(answer)
    return answer if answer[0] != kwire.NOT_LEADER_OR_FOLLOWER else None


def test_a_topic_is_created_grown_and_deleted_through_any_broker_and_every_broker_agrees(
        cluster, topic_name):
    topic = topic_name()
    created = kwire.create_topics(cluster.addr(2), {topic: PARTITIONS})
    assert created[topic][0] == 0, f"CreateTopics through broker 2: {created}"
    _wait_agreed(cluster, topic, PARTITIONS)

    grown = kwire.create_partitions(cluster.addr(3), {topic: GROWN})
    assert grown[topic][0] == 0, f"CreatePartitions through broker 3: {grown}"
    _wait_agreed(cluster, topic, GROWN)

    # Produce to every partition as each broker's own Metadata routes it.
    history = History()
    for n in sorted(cluster.brokers):
        md = kwire.metadata(cluster.addr(n), None, timeout=3.0)
        for p in range(GROWN):
            err, leader = md.partitions[topic][p]
            assert err == 0, f"broker {n}: {topic}/{p} error {err}"
            value = f"via{n}-p{p}".encode()
            history.send(value)
            code, base = kwire.produce(cluster.addr(leader), topic, p, kwire.record_batch([value]))
            assert code == 0, f"Produce to {topic}/{p} at broker {leader} (named by {n}): {code}"
            history.ack(value, p, base)
    assert_ok(check(history, {"confluent": confluent_read_all(cluster.bootstrap, topic, GROWN)}))

    # A count that does not grow the topic is refused, through any broker.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_partitions([NewPartitions(topic, GROWN - 2)], operation_timeout=BOUND_S)
    with pytest.raises(KafkaException) as refused:
        futures[topic].result(timeout=BOUND_S)
    assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS, refused.value
    del admin, futures
    same = kwire.create_partitions(cluster.addr(2), {topic: GROWN})
    assert same[topic][0] == kwire.INVALID_PARTITIONS, f"an equal count through broker 2: {same}"
    _wait_agreed(cluster, topic, GROWN)

    deleted = kwire.delete_topics(cluster.addr(1), [topic])
    assert deleted == {topic: 0}, f"DeleteTopics through broker 1: {deleted}"
    wait_for(lambda: not _listed_anywhere(cluster, topic), BOUND_S,
             lambda: f"{topic} to leave every broker's Metadata (still on {_listed_anywhere(cluster, topic)})")
    dirs = [cluster.shared / f"{topic}-{p}" for p in range(GROWN)]
    wait_for(lambda: not any(d.exists() for d in dirs), BOUND_S,
             lambda: f"the partition directories to go: {[d.name for d in dirs if d.exists()]}")

    again = kwire.create_topics(cluster.addr(3), {topic: PARTITIONS})
    assert again[topic][0] == 0, f"re-creating {topic} through broker 3: {again}"
    leaders = _wait_agreed(cluster, topic, PARTITIONS)
    for p, leader in sorted(leaders.items()):
        # Metadata names a leader once it has taken the partition in etcd,
        # a moment before it has opened the files: await its own answer.
        answers = []
        answer = wait_for(lambda: _fetch_answered(cluster.addr(leader), topic, p, answers),
                          BOUND_S, lambda: f"broker {leader} to serve re-created {topic}/{p} "
                                           f"(answers {answers[-3:]})")
        assert answer == (0, 0, []), \
            f"re-created {topic}/{p} at broker {leader} is not empty: {answer}"
    code, base = kwire.produce(cluster.addr(leaders[0]), topic, 0, kwire.record_batch([b"fresh"]))
    assert (code, base) == (0, 0), f"first record of the re-created topic: {code}, {base}"
