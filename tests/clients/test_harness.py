"""Checks the broker fixture's process handling (conftest.KaasBroker) against a
stand-in broker, so the harness is known to work before kaas is involved."""

import os
import signal
import socket
import sys
import textwrap

import pytest

from conftest import BrokerError, KaasBroker

STUB = textwrap.dedent(f"""\
    #!{sys.executable}
    # Stand-in for `kaas broker --listen ADDR --data-dir DIR --stub-mode MODE`.
    import os, signal, socket, sys, time
    args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    host, port = args["--listen"].rsplit(":", 1)
    mode = args["--stub-mode"]
    os.makedirs(args["--data-dir"], exist_ok=True)
    with open(os.path.join(args["--data-dir"], "starts"), "a") as f:
        f.write("start\\n")
    print("stub starting", flush=True)
    print("stub diagnostics on stderr", file=sys.stderr, flush=True)
    if mode == "exit-early":
        sys.exit(3)
    if mode == "silent":
        time.sleep(60)
        sys.exit(0)
    signal.signal(signal.SIGTERM,
                  signal.SIG_IGN if mode == "ignore-term" else lambda *_: sys.exit(0))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen()
    shown = port if mode != "wrong-port" else str(int(port) + 1)
    print(f"kaas broker listening on {{host}}:{{shown}}", flush=True)
    while True:
        conn, _ = s.accept()
        conn.close()
""")


@pytest.fixture
def stub(tmp_path):
    path = tmp_path / "stub-kaas"
    path.write_text(STUB)
    path.chmod(0o755)

    def make(mode="ok"):
        return KaasBroker(data_dir=tmp_path / "data", log_dir=tmp_path / "logs", binary=path,
                          extra_args=("--stub-mode", mode))
    made = []
    yield lambda mode="ok": made.append(make(mode)) or made[-1]
    for b in made:
        if b.running:
            b.proc.kill()
            b.proc.wait()


def connects(bootstrap):
    host, port = bootstrap.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        return True
    except OSError:
        return False


def test_start_waits_for_listening_line_and_stop_terminates(stub):
    b = stub()
    b.start()
    assert b.running and connects(b.bootstrap)
    assert b.died_unexpectedly() is None
    assert b.stop() == 0  # the stub exits 0 on SIGTERM
    assert not b.running and not connects(b.bootstrap)
    assert "stub diagnostics on stderr" in b.logs()
    assert "kaas broker listening on" in b.logs()


def test_kill_then_restart_reuses_port_and_data_dir(stub):
    b = stub()
    b.start()
    port = b.port
    assert b.kill() == -signal.SIGKILL
    assert not connects(b.bootstrap)
    b.restart()
    assert b.port == port and connects(b.bootstrap)
    b.restart()  # restart of a running broker: SIGTERM, then start
    assert connects(b.bootstrap)
    assert (b.data_dir / "starts").read_text() == "start\n" * 3
    assert b.runs == 3
    b.stop()


def test_exit_before_listening_is_reported_with_stderr(stub):
    b = stub("exit-early")
    with pytest.raises(BrokerError, match=r"exited with code 3 before it was listening") as e:
        b.start()
    assert "stub diagnostics on stderr" in str(e.value)


def test_no_listening_line_times_out(stub):
    b = stub("silent")
    with pytest.raises(BrokerError, match=r"did not print 'kaas broker listening on"):
        b.start(timeout=1)
    assert not b.running


def test_wrong_address_is_an_error(stub):
    b = stub("wrong-port")
    with pytest.raises(BrokerError, match=r"listens on .*but was told"):
        b.start()
    assert not b.running


def test_stop_kills_a_broker_that_ignores_sigterm(stub):
    b = stub("ignore-term")
    b.start()
    assert b.stop(timeout=1) == -signal.SIGKILL


def test_unexpected_exit_is_detected(stub):
    b = stub()
    b.start()
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait()
    assert b.died_unexpectedly() == -signal.SIGKILL


def test_missing_binary(tmp_path):
    b = KaasBroker(data_dir=tmp_path / "d", log_dir=tmp_path / "l", binary=tmp_path / "nope")
    with pytest.raises(BrokerError, match="does not exist"):
        b.start()
