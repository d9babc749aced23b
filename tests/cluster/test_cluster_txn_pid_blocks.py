"""Producer-id blocks from etcd (KIP-730's
AllocateProducerIds): no two brokers ever hand out the same producer id,
and a broker that runs out of its block while many InitProducerIds are in
flight takes the next block without stalling them.

8 raw-wire clients send InitProducerId for fresh transactional ids, each
to its id's coordinator, until 1200 ids have been initialised on one broker
(so that broker crosses its first 1000-id block with requests in flight on
every runtime worker), plus the ids the others got meanwhile. Every answer
must come within ANSWER_S, and the producer ids of all answers must be
distinct (IT-01: a fresh id gets a fresh producer id).
"""

import threading
import time
import uuid

import kwire

CLIENTS = 8
ON_ONE_BROKER = 1200  # past pid.rs's BLOCK (1000)
ANSWER_S = 5.0
DEADLINE_S = 90.0


def test_concurrent_inits_across_a_block_boundary_are_answered_promptly_with_distinct_ids(cluster):
    cluster.wait_ready()
    target = min(cluster.live_ids())
    # Fresh ids with their coordinators (looked up before the load: placement settled).
    ids: list[tuple[str, int]] = []
    on_target = 0
    while on_target < ON_ONE_BROKER:
        t = f"blk-{uuid.uuid4().hex[:10]}"
        node = cluster.txn_coordinator(t, via=target)
        ids.append((t, node))
        on_target += node == target
    answers: list[tuple[str, int, int, int, int]] = []  # (id, node, err, pid, epoch)
    failures: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    deadline = time.monotonic() + DEADLINE_S

    def run(chunk):
        conns = {}
        try:
            for t, node in chunk:
                if stop.is_set() or time.monotonic() > deadline:
                    return
                t0 = time.monotonic()
                try:
                    for _ in range(5):
                        conn = conns.get(node) or conns.setdefault(
                            node, kwire.Conn(cluster.addr(node), timeout=ANSWER_S))
                        err, pid, epoch = conn.init_producer_id(t)
                        if err != kwire.NOT_COORDINATOR:
                            break
                        node = cluster.txn_coordinator(t, via=target)  # the shard moved
                except kwire.WireError as e:
                    with lock:
                        failures.append(f"{t} at broker {node}: no answer within {ANSWER_S} s "
                                        f"({e}); {len(answers)} answered before")
                    stop.set()
                    return
                took = time.monotonic() - t0
                with lock:
                    answers.append((t, node, err, pid, epoch))
                    if err != 0 or took > ANSWER_S:
                        failures.append(f"{t} at broker {node}: error {err} after {took:.2f} s")
        finally:
            for c in conns.values():
                c.close()

    threads = [threading.Thread(target=run, args=(ids[i::CLIENTS],), daemon=True)
               for i in range(CLIENTS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(DEADLINE_S + 2 * ANSWER_S)
    assert failures == [], failures[:5]
    assert len(answers) == len(ids), f"{len(answers)} of {len(ids)} answered in {DEADLINE_S} s"
    pids = [pid for _, _, _, pid, _ in answers]
    dupes = len(pids) - len(set(pids))
    assert dupes == 0, f"{dupes} producer ids handed out twice"
    assert all(epoch == 0 for *_, epoch in answers)
    # The target crossed a block: more than BLOCK ids came from it.
    assert sum(1 for _, node, *_ in answers if node == target) >= ON_ONE_BROKER - 50
