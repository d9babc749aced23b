"""Helpers the consumer-group client tests share: a group member running in
its own process (group_member.py, which a test may SIGKILL), and the check
that a takeover lost nothing and re-read only what at-least-once allows.

Group timings: the broker's group.min.session.timeout.ms is Kafka's 6000 ms,
so that is the shortest session a member may ask for; its
group.initial.rebalance.delay.ms is Kafka's 3000 ms.
"""

import collections
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MEMBER = HERE / "group_member.py"

# The topic's partitions.
ALL = {0, 1, 2, 3}

SESSION_MS = 6000
HEARTBEAT_MS = 500
# Deadline for a group to settle or a takeover to complete.
# Generous: kafka-python members polled from one thread occasionally take
# ~40 s to settle their first rebalance on a loaded machine (under
# investigation; the convergence benchmark measures the normal case).
GROUP_TIMEOUT = 150.0


def values(n, prefix):
    """[(partition, value)] for n records spread over 4 partitions."""
    return [(i % 4, f"{prefix}-{i:05d}") for i in range(n)]


class MemberProcess:
    """group_member.py in a child process; its events, as they arrive."""

    def __init__(self, client, bootstrap, topic, group, commit_every=10, delay_ms=0.0,
                 session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS, instance_id=None):
        cmd = [sys.executable, str(MEMBER), "--client", client, "--bootstrap", bootstrap,
               "--topic", topic, "--group", group, "--commit-every", str(commit_every),
               "--delay-ms", str(delay_ms), "--session-timeout-ms", str(session_ms),
               "--heartbeat-ms", str(heartbeat_ms)]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.events = queue.Queue()
        self.consumed = []          # (partition, offset, value)
        self.committed = {}         # partition -> last committed next offset
        self.assignment = None      # latest assignment (set of partitions)
        self.assigned_at = None     # time.monotonic() of the latest assignment
        self.revoked_at = []        # time.monotonic() of every revocation
        self.commit_failures = []   # errors of commits that failed
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ev["at"] = time.monotonic()
            self.events.put(ev)
        self.events.put(None)

    def _read_err(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def pump(self, timeout=0.0):
        """Applies the events that arrived (waiting up to `timeout` for one)."""
        try:
            ev = self.events.get(timeout=timeout) if timeout else self.events.get_nowait()
        except queue.Empty:
            return
        while ev is not None:
            kind = ev.get("event")
            if kind == "consumed":
                self.consumed.append((ev["p"], ev["o"], ev["v"]))
            elif kind == "committed":
                self.committed.update({int(p): o for p, o in ev["offsets"].items()})
            elif kind == "assigned":
                self.assignment = set(ev["partitions"])
                self.assigned_at = ev["at"]
            elif kind == "revoked":
                self.revoked_at.append(ev["at"])
            elif kind == "commit_failed":
                self.commit_failures.append(ev["error"])
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return

    def wait_for(self, condition, what, timeout=GROUP_TIMEOUT, also=None):
        """Pumps events (and calls `also()`, e.g. to poll an in-process
        consumer) until condition() holds."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None and self.events.empty():
                raise AssertionError(f"member exited ({self.proc.returncode}) waiting for "
                                     f"{what}:\n{''.join(self.stderr[-50:])}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            if also is not None:
                also()
                self.pump()
            else:
                self.pump(timeout=0.05)

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        self.pump()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.pump()


def check_takeover(produced, first, second, first_commits):
    """Asserts the handover from `first` (a member that died or left) to
    `second`, given what each consumed as [(partition, offset, value)]:
    together they consumed exactly the produced (partition, value)s, each
    consumed every record at most once, and a record both consumed lies at
    or after `first`'s last commit of its partition (the at-least-once
    window). Returns those duplicates as [(partition, offset)]."""
    c1 = collections.Counter((p, v) for p, _, v in first)
    c2 = collections.Counter((p, v) for p, _, v in second)
    again = [k for k, n in (c1 + c2).items() if n > 1 and (c1[k] > 1 or c2[k] > 1)]
    assert again == [], f"a member consumed a record twice: {again[:10]}"
    seen = set(c1) | set(c2)
    assert seen == set(produced), (
        f"missing {sorted(set(produced) - seen)[:10]}, "
        f"unexpected {sorted(seen - set(produced))[:10]}")
    dups = sorted((p, o) for p, o, v in first if (p, v) in c2)
    late = [(p, o) for p, o in dups if o < first_commits.get(p, 0)]
    assert late == [], f"re-read records before the last commit: {late}; commits {first_commits}"
    return dups


def poll_until(consumers, condition, what, timeout=GROUP_TIMEOUT):
    """Polls every consumer from its own thread until `condition()` holds.

    One thread per member, as real applications run them: a client may wait
    inside poll() for a rebalance that needs the group's other members to
    rejoin, and polling them all from one thread then starves the others
    until the rebalance timeout (seen with kafka-python: a member blocked in
    its JoinGroup while the member it waited for was never polled). Each
    consumer is only ever used by one thread at a time: the pollers are
    joined before this returns."""
    deadline = time.monotonic() + timeout
    stop = threading.Event()
    progress = threading.Condition()
    errors = []

    def run(c):
        try:
            while not stop.is_set():
                c.poll()
                with progress:
                    progress.notify_all()
        except Exception as e:  # reported by the waiting thread
            with progress:
                errors.append(e)
                progress.notify_all()

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in consumers]
    for t in threads:
        t.start()
    try:
        with progress:
            done = progress.wait_for(lambda: errors or condition(),
                                     timeout=max(0.0, deadline - time.monotonic()))
        assert not errors, f"a consumer failed while polling for {what}: {errors[0]!r}"
        assert done, f"timed out after {timeout} s waiting for {what}"
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a consumer's poll never returned"


def split(a, b):
    return bool(a) and bool(b) and not (a & b) and (a | b) == ALL


# The scenarios both Python clients run. `client` is the test module: it
# provides NAME (as group_member.py takes it), create_topic(bootstrap, topic),
# produce(bootstrap, topic, records) and GroupConsumer(bootstrap, topic, group).


def leave_and_takeover(client, broker, topic_name):
    """Two members split the partitions; one leaves (LeaveGroup) and the other
    takes over each of its partitions exactly at its last commit."""
    topic = topic_name()
    client.create_topic(broker, topic)
    group = f"{topic}-group"
    records = values(600, topic)
    first, second, third = records[:200], records[200:400], records[400:]
    client.produce(broker, topic, first)
    a = client.GroupConsumer(broker, topic, group)
    b = client.GroupConsumer(broker, topic, group)
    try:
        poll_until([a, b], lambda: split(a.assignment, b.assignment), "the partitions to be split")
        # More records, so both members consume after the split.
        client.produce(broker, topic, second)
        na, nb = len(a.consumed), len(b.consumed)
        poll_until([a, b], lambda: len(a.consumed) - na >= 20 and len(b.consumed) - nb >= 20,
                   "both members to consume")
        # Every record A processed is committed (synchronously, one by one).
        a_held = set(a.assignment)
        a_commits = {}
        for p, o, _ in a.consumed:
            a_commits[p] = max(a_commits.get(p, 0), o + 1)
        a.close()  # LeaveGroup: B is told to rejoin at once
        b_before = len(b.consumed)
        client.produce(broker, topic, third)
        produced = first + second + third
        poll_until([b], lambda: {(p, v) for p, _, v in a.consumed + b.consumed} >= set(produced),
                   "B to consume the rest")
        assert b.assignment == ALL
        dups = check_takeover(produced, a.consumed, b.consumed, a_commits)
        assert dups == [], "A committed everything it read before leaving"
        # B picked up each of A's partitions exactly at its last commit (each
        # record read before A left was committed by whoever read it).
        committed = {}
        for p, o, _ in a.consumed + b.consumed[:b_before]:
            committed[p] = max(committed.get(p, 0), o + 1)
        resumed = {p: min(o for q, o, _ in b.consumed[b_before:] if q == p) for p in a_held}
        assert resumed == {p: committed.get(p, 0) for p in a_held}
    finally:
        b.close()


def kill_and_takeover(client, broker, topic_name):
    """A member process is SIGKILLed with records read but not committed; the
    survivor takes over within the session timeout and re-reads only the dead
    member's uncommitted records."""
    topic = topic_name()
    client.create_topic(broker, topic)
    produced = values(400, topic)
    client.produce(broker, topic, produced)
    group = f"{topic}-group"
    # The member to kill processes a record every 20 ms and commits every
    # 10 records, so it dies with records read but not committed.
    child = MemberProcess(client.NAME, broker, topic, group, commit_every=10, delay_ms=20)
    b = None
    try:
        child.wait_for(lambda: child.consumed, "the child to consume")
        b = client.GroupConsumer(broker, topic, group)
        child.wait_for(lambda: split(child.assignment or set(), b.assignment),
                       "the partitions to be split", also=b.poll)
        n = len(child.consumed)
        child.wait_for(lambda: len(child.consumed) - n >= 15, "the child to consume more",
                       also=b.poll)
        held = set(child.assignment)
        child.kill()
        killed_at = time.monotonic()
        poll_until([b], lambda: b.assignment == ALL, "B to take over every partition")
        took = time.monotonic() - killed_at
        poll_until([b], lambda: {(p, v) for p, _, v in child.consumed + b.consumed}
                   >= set(produced), "B to consume the rest")
        dups = check_takeover(produced, child.consumed, b.consumed, child.committed)
        assert {p for p, _ in dups} <= held, (
            "only the killed member's partitions are re-read",
            dups, held, child.committed, child.commit_failures)
        # The session timeout removes the dead member; one rebalance follows.
        assert took < SESSION_MS / 1000 + 15, f"takeover took {took:.1f} s"
        print(f"takeover after SIGKILL: {took:.2f} s (session.timeout.ms={SESSION_MS}); "
              f"{len(dups)} records re-read after the last commit")
    finally:
        child.stop()
        if b is not None:
            b.close()
