"""Fixtures that run a real `kaas broker` for the real-client tests.

`broker` yields the bootstrap address ("127.0.0.1:PORT") of a fresh broker
with its own data directory; `kaas` yields the `KaasBroker` object behind it,
for tests that stop, SIGKILL or restart the broker on the same data directory.
Both are function-scoped: every test gets its own broker. A KaasBroker can
also have several listeners (`listeners=`, `address(name)`): test_security.py
shares one secured broker per module.

The broker binary is target/release/kaas unless KAAS_BIN says otherwise. It
is started as `kaas broker --listen 127.0.0.1:PORT --data-dir DIR`, and it is
ready when it prints `kaas broker listening on 127.0.0.1:PORT` on stdout. The
port is chosen here (bind to port 0, read it, close) and passed explicitly.

When a test fails, its report gets a section with the broker's stdout and
stderr. A broker that exits by itself during a test fails that test.
"""

import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KAAS_BIN = Path(os.environ.get("KAAS_BIN", REPO / "target" / "release" / "kaas"))

# How long a broker may take to print its listening line, and to exit after
# SIGTERM before it is killed.
LISTEN_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

LISTENING_PREFIX = "kaas broker listening on "

_EOF = object()
_BROKERS = pytest.StashKey[list]()


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and that this
    process has not handed out before (the kernel readily offers a port it
    just released, so two calls in a row, say a broker's and its metrics
    port, could otherwise get the same one)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no fresh free port after 100 tries")


class BrokerError(Exception):
    pass


class KaasBroker:
    """One kaas broker process at a time, on a fixed port and data directory.

    start() -> waits for the listening line; stop() -> SIGTERM, then SIGKILL
    after STOP_TIMEOUT_S; kill() -> SIGKILL (a crash); restart() -> stop() (or
    nothing, if already stopped) then start() on the same port and data dir.
    Every run's stdout and stderr are kept in log_dir (broker-N.stdout/.stderr).
    """

    def __init__(self, data_dir: Path, log_dir: Path, port: int | None = None,
                 binary: Path = KAAS_BIN, extra_args: tuple[str, ...] = (),
                 listeners: tuple[tuple[str, str], ...] = (), env: dict | None = None):
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.port = port if port is not None else free_port()
        self.binary = Path(binary)
        self.extra_args = tuple(extra_args)
        # Added to the broker's environment on each start (e.g. KAAS_FAULT).
        self.env: dict[str, str] = dict(env or {})
        # (NAME, PROTOCOL) pairs: `--listener NAME=PROTOCOL://127.0.0.1:PORT`
        # each, the first on self.port (the listening line's address), the
        # others on fresh ports (see address()).
        self.listeners = {}
        for i, (name, protocol) in enumerate(listeners):
            self.listeners[name] = (protocol, self.port if i == 0 else free_port())
        self.proc: subprocess.Popen | None = None
        self.runs = 0
        self._lines: queue.Queue = queue.Queue()
        self._reader: threading.Thread | None = None
        self._stopped_on_purpose = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _paths(self, run: int) -> tuple[Path, Path]:
        return (self.log_dir / f"broker-{run}.stdout", self.log_dir / f"broker-{run}.stderr")

    def address(self, listener: str) -> str:
        """"127.0.0.1:PORT" of the listener named `listener`."""
        return f"127.0.0.1:{self.listeners[listener][1]}"

    def command(self) -> list[str]:
        listen = ["--listen", self.bootstrap]
        for name, (protocol, port) in self.listeners.items():
            listen += ["--listener", f"{name}={protocol}://127.0.0.1:{port}"]
        return [str(self.binary), "broker", *listen,
                "--data-dir", str(self.data_dir), *self.extra_args]

    def start(self, timeout: float = LISTEN_TIMEOUT_S) -> None:
        if self.running:
            raise BrokerError("broker is already running")
        if not self.binary.is_file():
            raise BrokerError(
                f"{self.binary} does not exist: build it with `cargo build --release -p kaas` "
                "(or point KAAS_BIN at a kaas binary)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.runs += 1
        out_path, err_path = self._paths(self.runs)
        self._stopped_on_purpose = False
        self._lines = queue.Queue()
        with open(err_path, "wb") as err:
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=err, cwd=self.data_dir.parent, env=dict(os.environ, **self.env))
        # The reader keeps draining stdout for the broker's whole life, so the
        # broker never blocks on a full pipe; every line also goes to a file.
        self._reader = threading.Thread(
            target=self._read_stdout, args=(self.proc, out_path, self._lines), daemon=True)
        self._reader.start()

        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._abort_start(f"did not print '{LISTENING_PREFIX}{self.bootstrap}' "
                                  f"within {timeout:.0f} s")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is _EOF:
                code = self.proc.wait()
                self._abort_start(f"exited with code {code} before it was listening")
            if line.startswith(LISTENING_PREFIX):
                addr = line[len(LISTENING_PREFIX):].strip()
                if addr != self.bootstrap:
                    self._abort_start(f"listens on {addr!r}, but was told {self.bootstrap!r}")
                return

    @staticmethod
    def _read_stdout(proc: subprocess.Popen, out_path: Path, lines: queue.Queue) -> None:
        with open(out_path, "w", encoding="utf-8") as out:
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace")
                out.write(line)
                out.flush()
                lines.put(line.rstrip("\r\n"))
        proc.stdout.close()
        lines.put(_EOF)

    def _abort_start(self, why: str) -> None:
        if self.running:
            self.proc.kill()
            self.proc.wait()
        self._join_reader()
        raise BrokerError(f"kaas broker {why}: {' '.join(self.command())}\n{self.logs()}")

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL if still running after `timeout`. Returns the exit code."""
        if self.proc is None:
            return None
        self._stopped_on_purpose = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._join_reader()
        return self.proc.returncode

    def kill(self) -> int:
        """SIGKILL: the broker gets no chance to flush or clean up."""
        if self.proc is None:
            raise BrokerError("broker was never started")
        self._stopped_on_purpose = True
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait()
        self._join_reader()
        return code

    def restart(self, timeout: float = LISTEN_TIMEOUT_S) -> None:
        """Stops the broker if it runs, and starts it again on the same port and data dir."""
        self.stop()
        self.start(timeout=timeout)

    def died_unexpectedly(self) -> int | None:
        """The exit code if the broker exited without stop() or kill(), else None."""
        if self.proc is None or self._stopped_on_purpose:
            return None
        return self.proc.poll()

    def logs(self, max_chars: int = 20000) -> str:
        parts = []
        for run in range(1, self.runs + 1):
            for path in self._paths(run):
                try:
                    text = path.read_text(encoding="utf-8", errors="replace")
                except FileNotFoundError:
                    continue
                if len(text) > max_chars:
                    text = f"[... {len(text) - max_chars} chars cut ...]\n" + text[-max_chars:]
                parts.append(f"----- {path.name} -----\n{text}")
        return "\n".join(parts) if parts else "(no broker output)"


POLICIES = {
    "apache37": REPO / "target" / "wasm32-wasip2" / "release" / "kaas_policy_apache37.wasm",
    "strict": REPO / "target" / "wasm32-wasip2" / "release" / "kaas_policy_strict.wasm",
}


def report_broker_output(item, b: KaasBroker) -> None:
    """Puts `b`'s output into `item`'s report if that test fails (for a
    broker a module-scoped fixture shares between tests)."""
    item.stash.setdefault(_BROKERS, []).append(b)


def _serve(request, b: KaasBroker):
    """Starts `b` for a fixture: its output goes into a failing test's report,
    and a broker that exits by itself during the test fails it."""
    report_broker_output(request.node, b)
    try:
        b.start()
        error = None
    except BrokerError as e:
        error = str(e).split("\n", 1)[0]  # the broker's output goes in a report section
    if error is not None:
        pytest.fail(error, pytrace=False)
    yield b
    died = b.died_unexpectedly()
    b.stop()
    if died is not None:
        pytest.fail(f"kaas broker exited by itself during the test (code {died})", pytrace=False)


@pytest.fixture
def kaas(request, tmp_path):
    """A started KaasBroker with a fresh data dir; stopped (SIGTERM) at teardown."""
    yield from _serve(request, KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs"))


@pytest.fixture(params=sorted(POLICIES))
def policy(request) -> str:
    """The name of each shipped policy in turn (a key of POLICIES)."""
    return request.param


@pytest.fixture(params=sorted(POLICIES))
def policy_broker(request, tmp_path):
    """Like `kaas`, once per shipped policy (`--policy`)."""
    yield from _serve(request, KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs",
                                          extra_args=("--policy", str(POLICIES[request.param]))))


@pytest.fixture
def broker(kaas) -> str:
    """The bootstrap address "127.0.0.1:PORT" of a fresh kaas broker."""
    return kaas.bootstrap


@pytest.fixture
def topic_name(request):
    """A topic name unique to this test (legal Kafka topic characters only)."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:180]
    return lambda suffix="": f"{base}{'-' + suffix if suffix else ''}-{uuid.uuid4().hex[:8]}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for i, b in enumerate(item.stash.get(_BROKERS, [])):
            report.sections.append((f"kaas broker {i} output ({report.when})", b.logs()))
    return report

