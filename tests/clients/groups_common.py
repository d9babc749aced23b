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
