"""Zombie producers across brokers.

The cross-broker fence ring under test: producer A (transactional id T)
writes to two partitions, each led by one of the two brokers that do not
coordinate T; A's transaction is COMMITTED, so no marker of a later fence
ever reaches those partitions. Producer B with T initialises through T's
coordinator X (InitProducerId, the bump to A's epoch + 1). The only way the
leaders of A's partitions can learn the new epoch is the fence ring: the
push path, or the polled file `__cluster/producer_fences/from-<X>.json`.

A's zombie batch is an idempotent (non-transactional) Produce with A's
producer id, A's epoch and the next sequence, sent raw to each leader. The
same kind of batch is ACCEPTED just before B initialises (spec PS-02: the
control that shows it would be accepted without the fence); after the
fence it is refused with INVALID_PRODUCER_EPOCH (47; PS-06, PS-17): once
with the push path (the polled file every 60 s, so it cannot be what
delivered the fence), once with `--fence-push false` and
`--fence-poll-ms 500`, where the batch is sent one poll interval plus slack
after B's answer. Each peer's `kaas::fence` debug line names the path that
applied the fence, and `kaas_fences_applied_total{path}` counts it.

The rejoin contract (IF-01, IF-02, IF-09, IF-10): A with an ONGOING
transaction on those two partitions; B's InitProducerId fences it and the
coordinator aborts it on both remote leaders; read_committed readers never
see A's records there, and A's next transactional batch to each partition
is refused (47), as are its AddPartitionsToTxn and EndTxn.
"""

import time

import pytest

import kwire
from harness import wait_for
import txnlib

PARTITIONS = 6
FENCE_LOG = {"RUST_LOG": "warn,kaas::fence=debug"}
POLL_MS = 500
# Room for the poll tick, the file read and the apply on a loaded 2-core VM.
POLL_SLACK_S = 0.5
PUSH_DEADLINE_S = 2.0


def _placement(c, topic_name):
    """(topic, T, coordinator X, {peer broker: a partition it leads}) with
    every broker other than X leading one of the chosen partitions."""
    topic = topic_name()
    led = txnlib.spread_topic(c, topic, PARTITIONS)
    tid, x = txnlib.txn_id_on(c, prefix="zombie")
    targets = {}
    for p, leader in sorted(led.items()):
        if leader != x and leader not in targets:
            targets[leader] = p
    assert set(targets) == c.live_ids() - {x}, (led, x)
    return topic, tid, x, targets


def _fence_lines(c, node: int, pid: int, epoch: int) -> list[dict]:
    return [f for f in c.brokers[node].fence_lines()
            if f.get("pid") == str(pid) and f.get("epoch") == str(epoch)]


def _zombie_batches_refused(c, a: txnlib.RawTxn, topic: str, targets: dict[int, int]) -> None:
    for leader, p in sorted(targets.items()):
        got = a.produce(topic, p, [b"A-zombie"], leader=leader, transactional=False)
        assert got[0] == kwire.INVALID_PRODUCER_EPOCH, \
            f"A's zombie batch (pid {a.pid}, epoch {a.epoch}, seq {a.seq.get((topic, p))}) to " \
            f"{topic}/{p} on broker {leader} answered {got}, not INVALID_PRODUCER_EPOCH"


def _committed_then_fenced(c, topic_name, push: bool) -> None:
    topic, tid, x, targets = _placement(c, topic_name)
    a = txnlib.RawTxn(c, tid).init()
    assert a.add(topic, sorted(targets.values())) == {(topic, p): 0 for p in targets.values()}
    for leader, p in targets.items():
        assert a.produce(topic, p, [b"A-commit"], leader=leader) == (0, 0)
    assert a.end(commit=True) == 0
    txnlib.wait_stable(c, topic, PARTITIONS)
    # The control: without a fence, A's idempotent batch at its epoch is accepted.
    for leader, p in targets.items():
        got = a.produce(topic, p, [b"A-idempotent"], leader=leader, transactional=False)
        assert got[0] == 0, f"A's idempotent batch to {topic}/{p} on {leader} before the fence: {got}"
    counts = {n: c.brokers[n].metric("kaas_fences_applied_total", path="push" if push else "poll")
              for n in targets}

    err, pid, epoch = txnlib.init(c, tid)  # B, through the coordinator X
    answered = time.monotonic()
    assert (err, pid, epoch) == (0, a.pid, a.epoch + 1), (err, pid, epoch, a.pid, a.epoch)
    path = "push" if push else "poll"
    if push:
        for n in targets:
            lines = wait_for(lambda: _fence_lines(c, n, pid, epoch), PUSH_DEADLINE_S,
                             f"broker {n} to apply the fence ({pid}, {epoch}) by push")
            assert lines[0].get("path") == "push", lines
    else:
        time.sleep(max(0.0, answered + POLL_MS / 1000 + POLL_SLACK_S - time.monotonic()))
    _zombie_batches_refused(c, a, topic, targets)
    for n in targets:
        lines = _fence_lines(c, n, pid, epoch)
        assert lines and all(f.get("path") == path for f in lines), \
            f"broker {n}'s fence lines for ({pid}, {epoch}): {lines}"
        # It fenced A's state on the partition it leads (the line's count of partitions).
        assert int(lines[0].get("fenced", "1")) >= 1, lines
        assert c.brokers[n].metric("kaas_fences_applied_total", path=path) > counts[n]
    assert _fence_lines(c, x, pid, epoch) == [], "the coordinator skips its own file"

    # B carries on; the zombie's record is nowhere.
    b = txnlib.RawTxn(c, tid)
    b.pid, b.epoch = pid, epoch
    assert b.add(topic, sorted(targets.values())) == {(topic, p): 0 for p in targets.values()}
    for leader, p in targets.items():
        assert b.produce(topic, p, [b"B-commit"], leader=leader)[0] == 0
    assert b.end(commit=True) == 0
    txnlib.wait_stable(c, topic, PARTITIONS)
    got = txnlib.raw_committed(c, topic, PARTITIONS)
    for p in targets.values():
        assert got[p] == [b"A-commit", b"A-idempotent", b"B-commit"], (p, got[p])


def test_a_zombie_batch_is_refused_on_every_peer_after_the_bump_by_the_push_path(
        cluster_factory, topic_name):
    c = cluster_factory(env=FENCE_LOG, metrics=True,
                        extra_args=("--fence-push", "true", "--fence-poll-ms", "60000"))
    _committed_then_fenced(c, topic_name, push=True)


def test_a_zombie_batch_is_refused_on_every_peer_one_poll_interval_after_the_bump_without_push(
        cluster_factory, topic_name):
    c = cluster_factory(env=FENCE_LOG, metrics=True,
                        extra_args=("--fence-push", "false", "--fence-poll-ms", str(POLL_MS)))
    _committed_then_fenced(c, topic_name, push=False)


def test_a_rejoin_aborts_the_ongoing_transaction_on_every_broker_and_refuses_the_zombie(
        cluster_factory, topic_name):
    c = cluster_factory(env=FENCE_LOG, metrics=True)
    topic, tid, x, targets = _placement(c, topic_name)
    a = txnlib.RawTxn(c, tid).init()
    assert a.add(topic, sorted(targets.values())) == {(topic, p): 0 for p in targets.values()}
    for leader, p in targets.items():
        assert a.produce(topic, p, [b"A-open-0", b"A-open-1"], leader=leader) == (0, 0)
    assert not txnlib.stable(c, topic, PARTITIONS), "A's transaction is open"

    # IF-01: B's InitProducerId fences A (epoch + 1) and aborts; IF-02: the retry gets epoch + 2.
    err, pid, epoch = txnlib.init(c, tid)
    assert (err, pid, epoch) == (0, a.pid, a.epoch + 2), (err, pid, epoch, a.pid, a.epoch)
    # IF-09: A's next transactional batch, to each partition of its transaction.
    for leader, p in targets.items():
        got = a.produce(topic, p, [b"A-late"], leader=leader)
        assert got[0] == kwire.INVALID_PRODUCER_EPOCH, \
            f"A's transactional batch to {topic}/{p} on broker {leader} after the rejoin: {got}"
    # IF-10 (v1 of both: INVALID_PRODUCER_EPOCH rather than PRODUCER_FENCED).
    coordinator = c.addr(c.txn_coordinator(tid))
    assert set(kwire.add_partitions_to_txn(coordinator, tid, a.pid, a.epoch,
                                           {topic: sorted(targets.values())}).values()) \
        == {kwire.INVALID_PRODUCER_EPOCH}
    assert kwire.end_txn(coordinator, tid, a.pid, a.epoch, True) == kwire.INVALID_PRODUCER_EPOCH

    txnlib.wait_stable(c, topic, PARTITIONS)
    for leader, p in targets.items():
        err, _, everything = kwire.fetch(c.addr(leader), topic, p, 0)
        data = [v for _, v in everything if v and v.startswith(b"A-")]  # not the marker
        assert err == 0 and data == [b"A-open-0", b"A-open-1"], \
            f"A's records were written to {topic}/{p} (and only those): {everything}"
    want = {p: [] for p in range(PARTITIONS)}
    assert txnlib.raw_committed(c, topic, PARTITIONS) == want
    assert txnlib.confluent_committed(c.bootstrap, topic, PARTITIONS) == want
    assert txnlib.kafka_python_committed(c.bootstrap, topic, PARTITIONS) == want
