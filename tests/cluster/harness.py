"""Fault-injection harness for kaas clusters.

Starts one etcd and N `kaas broker` processes on loopback that share one
--data-dir, and does to them what machines do: kill -9 (`kill9`), a long
stall (`pause` = SIGSTOP, `resume` = SIGCONT), a restart on the same port
(`restart`), and an etcd outage (`pause_etcd`/`resume_etcd`: etcd stopped
with its sockets open, so requests hang rather than fail fast). It asks brokers directly (kwire, raw Metadata v1) who is alive
and who leads what: `wait_ready`, `leader_of`, `wait_leader_moved`.

Single-node mode is the same class with etcd=False: one broker, no cluster
flags, exactly as `kaas broker` runs today (the benchmark's baseline).

Per broker: its own environment (`env`, e.g. KAAS_FAULT or
RUST_LOG; read at each start, so a test can change it between runs), extra
arguments (`broker_args`), and with metrics=True a /metrics listener
(`scrape`, `metric`). `fence_lines` reads the `kaas::fence` debug lines a
broker logged (RUST_LOG=kaas::fence=debug); `seed_txn` runs the test-only
`kaas txn-seed` on the shared directory before the brokers start.

Every process logs to files under the cluster's directory (etcd.log,
broker-<id>-<run>.stdout/.stderr) which outlive the run; the pytest plugin
in conftest.py attaches them to a failing test's report. The broker binary
is $KAAS_BIN or target/release/kaas; etcd is `etcd` on PATH
(scripts/setup-cluster installs it).
"""

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import kwire

REPO = Path(__file__).resolve().parents[2]
KAAS_BIN = Path(os.environ.get("KAAS_BIN", REPO / "target" / "release" / "kaas"))
LISTENING_PREFIX = "kaas broker listening on "
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback TCP port that was free a moment ago and was not handed out
    before by this process."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no fresh free port after 100 tries")


def wait_for(condition, timeout: float, what: str, interval: float = 0.05):
    """Calls condition() until it returns something truthy and returns that;
    AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)


def create_topics(admin, new_topics: list, timeout: float = 30.0) -> None:
    """confluent-kafka's CreateTopics of `new_topics`, each asked again when
    librdkafka failed it in flight on a bootstrap connection it swapped for
    the broker's own (_DESTROY_BROKER); asked again, a topic may exist."""
    from confluent_kafka import KafkaError, KafkaException

    for t in new_topics:
        for attempt in range(3):
            try:
                admin.create_topics([t], operation_timeout=timeout)[t.topic].result(timeout)
                break
            except KafkaException as e:
                code = e.args[0].code()
                if attempt > 0 and code == KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if code != KafkaError._DESTROY_BROKER or attempt == 2:
                    raise


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of process `pid` is in the stopped state (T)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                # The state follows the parenthesised command name.
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            continue
        if state not in ("T", "t"):
            return False
    return True


class HarnessError(Exception):
    pass


class Etcd:
    """One etcd member on loopback with its data in `data_dir`."""

    def __init__(self, data_dir: Path, log_path: Path):
        self.data_dir, self.log_path = Path(data_dir), Path(log_path)
        self.client_port, self.peer_port = free_port(), free_port()
        self.proc: subprocess.Popen | None = None
        self.paused = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        etcd = shutil.which("etcd")
        if etcd is None:
            raise HarnessError("etcd is not on PATH: run scripts/setup-cluster")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd = [etcd, "--name", "kaas-test", "--data-dir", str(self.data_dir),
               "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
               "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
               "--initial-cluster", f"kaas-test={peer}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        wait_for(self._healthy, timeout, f"etcd healthy on {self.url}", interval=0.1)

    def _healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise HarnessError(f"etcd exited with {self.proc.returncode}; see {self.log_path}")
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                return json.loads(r.read()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def pause(self) -> None:
        """SIGSTOP: etcd keeps its sockets, so clients' requests and
        keep-alives hang until their own deadlines (an unreachable etcd)."""
        if self.proc is None or self.proc.poll() is not None:
            raise HarnessError("etcd is not running")
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True
        wait_for(lambda: _all_threads_stopped(self.proc.pid), 10,
                 "every thread of etcd to stop", interval=0.005)

    def resume(self) -> None:
        if self.paused and self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        self.resume()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Broker:
    """One broker (node id, fixed port) that can be started again and again."""

    def __init__(self, node_id: int, data_dir: Path, log_dir: Path, etcd_url: str | None,
                 lease_ttl_ms: int, extra_args: tuple[str, ...], env: dict | None = None,
                 metrics: bool = False):
        self.node_id, self.data_dir, self.log_dir = node_id, Path(data_dir), Path(log_dir)
        self.etcd_url, self.lease_ttl_ms, self.extra_args = etcd_url, lease_ttl_ms, extra_args
        self.env: dict[str, str] = dict(env or {})
        self.metrics_port = free_port() if metrics else None
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self.runs = 0
        self.expected_exit = True
        self._reader: threading.Thread | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def live(self) -> bool:
        """Running and not paused: able to answer."""
        return self.running and not self.paused

    def command(self) -> list[str]:
        cmd = [str(KAAS_BIN), "broker", "--listen", self.addr, "--data-dir", str(self.data_dir)]
        if self.etcd_url is not None:
            cmd += ["--node-id", str(self.node_id), "--etcd", self.etcd_url,
                    "--lease-ttl-ms", str(self.lease_ttl_ms)]
        if self.metrics_port is not None:
            cmd += ["--metrics-listen", f"127.0.0.1:{self.metrics_port}"]
        return cmd + list(self.extra_args)

    def scrape(self, timeout: float = 3.0) -> str:
        """The broker's /metrics text (metrics=True)."""
        if self.metrics_port is None:
            raise HarnessError(f"broker {self.node_id} has no metrics listener")
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels` (0
        when none); HarnessError when the broker does not answer."""
        try:
            text = self.scrape()
        except OSError as e:
            raise HarnessError(f"broker {self.node_id} /metrics: {e!r}") from e
        return metric_value(text, name, **labels)

    def stderr_text(self) -> str:
        """Everything the broker wrote to stderr, over all its runs."""
        out = []
        for run in range(1, self.runs + 1):
            try:
                out.append((self.log_dir / f"broker-{self.node_id}-{run}.stderr")
                           .read_text(errors="replace"))
            except FileNotFoundError:
                pass
        return "".join(out)

    def fence_lines(self) -> list[dict[str, str]]:
        """The `kaas::fence` lines of its logs (RUST_LOG=kaas::fence=debug),
        each as its key=value fields (pid, epoch, path, delay_ms, ...)."""
        return parse_fence_lines(self.stderr_text())

    def log_paths(self) -> list[Path]:
        out = []
        for run in range(1, self.runs + 1):
            out += [self.log_dir / f"broker-{self.node_id}-{run}.stdout",
                    self.log_dir / f"broker-{self.node_id}-{run}.stderr"]
        return out

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        if self.running:
            raise HarnessError(f"broker {self.node_id} is already running")
        if not KAAS_BIN.is_file():
            raise HarnessError(f"{KAAS_BIN} does not exist: cargo build --release -p kaas")
        self.runs += 1
        out_path = self.log_dir / f"broker-{self.node_id}-{self.runs}.stdout"
        err_path = self.log_dir / f"broker-{self.node_id}-{self.runs}.stderr"
        lines: queue.Queue = queue.Queue()
        with open(err_path, "wb") as err:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=err,
                                         env=dict(os.environ, **self.env))
        self.paused, self.expected_exit = False, False
        self._reader = threading.Thread(target=_drain, args=(self.proc, out_path, lines),
                                        daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                line = ""
            if line is None:
                code = self.proc.wait()
                raise HarnessError(f"broker {self.node_id} exited with {code} before listening: "
                                   f"{' '.join(self.command())}; see {err_path}")
            if line.startswith(LISTENING_PREFIX):
                return
            if time.monotonic() >= deadline:
                self.kill9()
                raise HarnessError(f"broker {self.node_id} did not listen within {timeout} s")

    def kill9(self) -> None:
        """SIGKILL: no flush, no lease revoke; etcd ends the lease at its TTL."""
        if self.proc is None:
            return
        self.expected_exit = True
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and files but runs nothing,
        like a machine stalled by GC, swap or a hypervisor."""
        if not self.running:
            raise HarnessError(f"broker {self.node_id} is not running")
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True
        # kill() returns before every thread has stopped: a thread still
        # running may read a request sent "after" the pause and write it with
        # its lease still valid (seen: such a write answered REQUEST_TIMED_OUT
        # and then readable, as designed). Stopped means every thread is.
        wait_for(lambda: _all_threads_stopped(self.proc.pid), 10,
                 f"every thread of broker {self.node_id} to stop", interval=0.005)

    def resume(self) -> None:
        if self.running and self.paused:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        """SIGTERM (after SIGCONT if paused), SIGKILL after STOP_TIMEOUT_S."""
        if self.proc is None:
            return
        self.expected_exit = True
        self.resume()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def died_unexpectedly(self) -> int | None:
        if self.proc is None or self.expected_exit:
            return None
        return self.proc.poll()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FIELD = re.compile(r"(\w+)=(\"[^\"]*\"|\S+)")


def parse_fence_lines(text: str) -> list[dict[str, str]]:
    """The log lines of target `kaas::fence` in `text` (tracing's text
    format: `<time> DEBUG kaas::fence: <message> pid=.. epoch=.. ...`),
    each as a dict of its key=value fields."""
    out = []
    for line in _ANSI.sub("", text).splitlines():
        if " kaas::fence" not in line:
            continue
        fields = {k: v.strip('"') for k, v in _FIELD.findall(line.split(" kaas::fence", 1)[1])}
        fields["_line"] = line
        out.append(fields)
    return out


def metric_value(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` in Prometheus text whose labels include
    `labels`."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, rest = head.partition("{")
        if metric != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total


def seed_txn(data_dir: Path, transactional_id: str, producer_id: int, epoch: int,
             last_epoch: int, state: str = "complete-commit", cluster: bool = True) -> None:
    """Writes a transactional id's entry into its coordinator's state log
    on `data_dir` through the real store (`kaas txn-seed`, built with the
    fault-injection feature), before any broker starts. (Numbers as
    --flag=N: clap takes a separate "-1" for a flag.)"""
    cmd = [str(KAAS_BIN), "txn-seed", "--data-dir", str(data_dir),
           "--transactional-id", transactional_id, f"--producer-id={producer_id}",
           f"--epoch={epoch}", f"--last-epoch={last_epoch}", "--state", state]
    if cluster:
        cmd.insert(4, "--cluster")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise HarnessError(f"{' '.join(cmd)} exited with {out.returncode}: "
                           f"{out.stderr.strip() or out.stdout.strip()}")


def _drain(proc: subprocess.Popen, out_path: Path, lines: queue.Queue) -> None:
    with open(out_path, "w", encoding="utf-8") as out:
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace")
            out.write(line)
            out.flush()
            lines.put(line.rstrip("\r\n"))
    lines.put(None)


class Cluster:
    """etcd + brokers 1..n on one shared data directory under `root`.

    etcd=False: a single broker in single-node mode (n must be 1)."""

    def __init__(self, root: Path, n: int = 3, lease_ttl_ms: int = 2000, etcd: bool = True,
                 extra_args: tuple[str, ...] = (), env: dict | None = None,
                 broker_env: dict[int, dict] | None = None,
                 broker_args: dict[int, tuple[str, ...]] | None = None, metrics: bool = False):
        if not etcd and n != 1:
            raise HarnessError("single-node mode has exactly one broker")
        self.root = Path(root)
        self.log_dir = self.root / "logs"
        self.shared = self.root / "shared"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.shared.mkdir(parents=True, exist_ok=True)
        self.lease_ttl_ms = lease_ttl_ms
        self.etcd = Etcd(self.root / "etcd", self.log_dir / "etcd.log") if etcd else None
        url = self.etcd.url if self.etcd else None
        self.brokers = {
            i: Broker(i, self.shared, self.log_dir, url, lease_ttl_ms,
                      tuple(extra_args) + tuple((broker_args or {}).get(i, ())),
                      env={**(env or {}), **(broker_env or {}).get(i, {})}, metrics=metrics)
            for i in range(1, n + 1)}

    # -- life cycle ---------------------------------------------------------
    def start(self) -> "Cluster":
        if self.etcd is not None:
            _require_cluster_mode()
            self.etcd.start()
        for b in self.brokers.values():
            b.start()
        return self

    def stop(self) -> None:
        for b in self.brokers.values():
            b.stop()
        if self.etcd is not None:
            self.etcd.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- faults -------------------------------------------------------------
    def kill9(self, n: int) -> None:
        self.brokers[n].kill9()

    def pause(self, n: int) -> None:
        self.brokers[n].pause()

    def resume(self, n: int) -> None:
        self.brokers[n].resume()

    def restart(self, n: int) -> None:
        """Stops broker n (SIGTERM, or nothing if it is down) and starts it on the same port."""
        b = self.brokers[n]
        b.stop()
        b.start()

    def pause_etcd(self) -> None:
        """Stops etcd (SIGSTOP) until resume_etcd; the brokers keep running."""
        if self.etcd is None:
            raise HarnessError("single-node mode has no etcd")
        self.etcd.pause()

    def resume_etcd(self) -> None:
        if self.etcd is not None:
            self.etcd.resume()

    def start_broker(self, n: int) -> None:
        """Starts broker n again after kill9 (same node id and port)."""
        self.brokers[n].start()

    # -- views --------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """Every broker's address, comma-separated (clients need only one live)."""
        return ",".join(b.addr for b in self.brokers.values())

    def live_ids(self) -> set[int]:
        return {i for i, b in self.brokers.items() if b.live}

    def addr(self, n: int) -> str:
        return self.brokers[n].addr

    def metadata(self, topics: list[str] | None, via: int | None = None) -> kwire.Metadata:
        """Metadata from broker `via`, or from the first live broker that answers."""
        order = [via] if via is not None else sorted(self.live_ids())
        last = None
        for n in order:
            try:
                return kwire.metadata(self.addr(n), topics, timeout=3.0)
            except kwire.WireError as e:
                last = e
        raise HarnessError(f"no live broker answered Metadata: {last}")

    def leader_of(self, topic: str, partition: int, via: int | None = None) -> int:
        md = self.metadata([topic], via)
        err, leader = md.partitions.get(topic, {}).get(partition, (-1, -1))
        return leader if err == 0 else -1

    def group_coordinator(self, group: str, timeout: float = 30.0) -> int:
        """The live broker FindCoordinator names for `group`, asked again
        while it answers COORDINATOR_NOT_AVAILABLE (15: the group's shard is
        being handed over, as it is while brokers join; clients retry it)."""
        last = {}

        def found():
            last["answer"] = kwire.find_coordinator(self.addr(min(self.live_ids())), group)
            err, node = last["answer"]
            return err == 0 and node in self.live_ids()

        wait_for(found, timeout,
                 lambda: f"a live coordinator for group {group} (last answer {last.get('answer')})")
        return last["answer"][1]

    def _agreed(self, topic: str | None, partitions: int | None) -> bool:
        """Every live broker lists exactly the live brokers, and (for `topic`)
        that each of its `partitions` partitions has a live leader."""
        live = self.live_ids()
        single = self.etcd is None  # one broker; its node id is its own business
        for n in live:
            try:
                md = kwire.metadata(self.addr(n), [topic] if topic else [], timeout=2.0)
            except kwire.WireError:
                return False
            ids = {n} if single else live
            if not single and (set(md.brokers) != live or md.controller not in live):
                return False
            if topic is not None:
                parts = md.partitions.get(topic, {})
                if partitions is not None and len(parts) != partitions:
                    return False
                if any(err != 0 or (not single and leader not in ids)
                       for err, leader in parts.values()):
                    return False
        return True

    def wait_ready(self, topic: str | None = None, partitions: int | None = None,
                   timeout: float = 30.0) -> None:
        """Until every live broker agrees on membership and (given a topic)
        every partition of it has a live leader."""
        wait_for(lambda: self._agreed(topic, partitions), timeout,
                 lambda: f"cluster agreement (live {sorted(self.live_ids())}, topic {topic}); "
                 f"each live broker says: {self._views(topic)}", 0.1)

    def _views(self, topic: str | None) -> dict:
        """broker -> (brokers, controller, {partition: (error, leader)}) as
        it answers Metadata now, or its error: for a failure message."""
        out = {}
        for n in sorted(self.live_ids()):
            try:
                md = kwire.metadata(self.addr(n), [topic] if topic else [], timeout=2.0)
                out[n] = (sorted(md.brokers), md.controller,
                          md.partitions.get(topic, {}) if topic else {})
            except kwire.WireError as e:
                out[n] = repr(e)
        return out

    def wait_leader_moved(self, topic: str, partition: int, old: int,
                          timeout: float = 30.0) -> int:
        """Until a live broker other than `old` says it leads the partition
        (and says so itself); returns the new leader's id."""
        def moved():
            for n in sorted(self.live_ids() - {old}):
                try:
                    leader = self.leader_of(topic, partition, via=n)
                except HarnessError:
                    continue
                if leader not in (-1, old) and leader in self.live_ids():
                    if self.leader_of(topic, partition, via=leader) == leader:
                        return leader
            return None
        return wait_for(moved, timeout, f"{topic}/{partition} to move off broker {old}", 0.05)

    def txn_coordinator(self, transactional_id: str, via: int | None = None,
                        timeout: float = 30.0) -> int:
        """The node id every live broker (or `via`) names as the coordinator of
        `transactional_id` (FindCoordinator key type 1), awaited until they
        agree on a live one."""
        last: dict = {}

        def agreed():
            answers = set()
            for n in ([via] if via is not None else sorted(self.live_ids())):
                try:
                    err, node = kwire.txn_coordinator(self.addr(n), transactional_id, 2.0)
                except kwire.WireError as e:
                    last[n] = repr(e)
                    return None
                last[n] = (err, node)
                if err != 0:
                    return None
                answers.add(node)
            node = answers.pop() if len(answers) == 1 else None
            return node if node in self.live_ids() else None
        return wait_for(agreed, timeout, lambda: f"the coordinator of {transactional_id!r} "
                        f"(last answers, broker: (error, node): {last})", 0.05)

    def create_topic(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        """CreateTopics through any live broker, then waits until every
        partition has a live leader that every live broker agrees on."""
        from confluent_kafka.admin import AdminClient, NewTopic

        live = ",".join(self.addr(n) for n in sorted(self.live_ids()))
        create_topics(AdminClient({"bootstrap.servers": live}),
                      [NewTopic(topic, partitions, 1)], timeout)
        self.wait_ready(topic, partitions, timeout)

    def logs(self, max_chars: int = 12000) -> str:
        parts = []
        paths = [self.etcd.log_path] if self.etcd else []
        for b in self.brokers.values():
            paths += b.log_paths()
        for p in paths:
            try:
                text = p.read_text(errors="replace")
            except FileNotFoundError:
                continue
            if len(text) > max_chars:
                text = f"[... {len(text) - max_chars} chars cut ...]\n" + text[-max_chars:]
            parts.append(f"----- {p} -----\n{text}")
        return "\n".join(parts) or "(no output)"


def _require_cluster_mode() -> None:
    """A kaas without cluster mode fails here with a clear message, not in
    the middle of a test with 'unexpected argument'."""
    out = subprocess.run([str(KAAS_BIN), "broker", "--help"], capture_output=True, text=True,
                         timeout=30)
    if "--etcd" not in out.stdout:
        raise HarnessError(f"{KAAS_BIN} has no cluster mode (`kaas broker --help` lists no --etcd)")
