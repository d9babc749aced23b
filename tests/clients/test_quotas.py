"""Client quotas with real clients: a SCRAM user over `producer_byte_rate`
is throttled (librdkafka reports the broker's throttle time through
`throttle_cb`; Kafka's Java producer through produce-throttle-time-max),
and the broker's own measurement of its rate (Kafka's windowed byte rate,
`kaas_quota_rate` on /metrics) settles near the quota; another user on the
same broker is not throttled.

One broker for the module (no authorizer: quotas, not ACLs, are tested
here): a PLAINTEXT listener (quotas are set there:
neither Python client has AlterClientQuotas, so quota_setup.py sends it; the
Java scenario uses the Java AdminClient) and a SASL_SSL listener with SCRAM
users. The rate checks are loose (±25%) and read the broker's measurement
many times, taking the median: Kafka's sampled windows let a burst through
whenever an old sample expires, so any one reading, or a client's own count
over a few seconds, can be far off while the average holds.
"""

import statistics
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import KAAS_BIN, BrokerError, KaasBroker, free_port, report_broker_output
from quota_setup import alter_client_quotas, metrics, quota_metric
from security_setup import make_certs, set_user
from test_java_client import classpath, run_java  # noqa: F401 (a fixture)

USERS = {"throttled": "throttled-secret", "free": "free-secret", "admin": "admin-secret",
         "jthrottled": "jthrottled-secret"}
MECHANISM = "SCRAM-SHA-512"
QUOTA = 200_000.0  # producer_byte_rate, bytes per second
RUN_S = 16.0
# Readings of the broker's windowed rate, from when the first window has
# filled (the initial allowance of 10 windows has been spent) to the end.
READ_FROM_S = 6.0


@pytest.fixture(scope="module")
def qbroker(tmp_path_factory):
    root = tmp_path_factory.mktemp("quotas")
    certs = make_certs(root / "certs")
    data = root / "data"
    for name, password in USERS.items():
        set_user(KAAS_BIN, data, name, password, MECHANISM)
    metrics_addr = f"127.0.0.1:{free_port()}"
    b = KaasBroker(data_dir=data, log_dir=root / "logs",
                   listeners=(("PLAIN", "PLAINTEXT"), ("SECURE", "SASL_SSL")),
                   extra_args=("--ssl-cert", str(certs.cert), "--ssl-key", str(certs.key),
                               "--metrics-listen", metrics_addr, "--authorizer", "none"))
    try:
        b.start()
    except BrokerError as e:
        pytest.fail(str(e), pytrace=False)
    yield b, certs, metrics_addr
    b.stop()


@pytest.fixture
def q(request, qbroker):
    b = qbroker[0]
    report_broker_output(request.node, b)
    yield qbroker
    died = b.died_unexpectedly()
    if died is not None:
        pytest.fail(f"kaas broker exited by itself (code {died})", pytrace=False)


def scram(b: KaasBroker, certs, user: str) -> dict:
    return {"bootstrap.servers": b.address("SECURE"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM, "sasl.username": user,
            "sasl.password": USERS[user], "ssl.ca.location": str(certs.ca)}


class RateReader:
    """Reads the broker's windowed rate of (quota type, user) every 0.5 s
    in a thread, from `start_s` after it starts until stopped."""

    def __init__(self, metrics_addr: str, user: str, start_s: float):
        self.addr, self.user, self.start_s = metrics_addr, user, start_s
        self.readings: list[float] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        t0 = time.monotonic()
        while not self._stop.wait(0.5):
            if time.monotonic() - t0 < self.start_s:
                continue
            v = quota_metric(metrics(self.addr), "kaas_quota_rate", "producer_byte_rate",
                             self.user)
            if v is not None:
                self.readings.append(v)

    def stop(self) -> list[float]:
        self._stop.set()
        self._t.join(timeout=15)
        return self.readings


def assert_near_quota(readings: list[float], what: str):
    assert len(readings) >= 5, f"{what}: too few readings {readings}"
    median = statistics.median(readings)
    assert 0.75 * QUOTA <= median <= 1.25 * QUOTA, (
        f"{what}: the broker's measured rate (median {median:.0f} B/s of {len(readings)} "
        f"readings) is not within 25% of the quota {QUOTA:.0f}: {readings}")


def test_confluent_scram_user_over_producer_byte_rate_is_throttled_near_the_quota(q, topic_name):
    b, certs, metrics_addr = q
    topic = topic_name()
    admin = AdminClient(scram(b, certs, "admin"))
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    said = alter_client_quotas(b.bootstrap, [([("user", "throttled")],
                                              {"producer_byte_rate": QUOTA})])
    assert said == [(0, None)]

    throttles: list[float] = []
    acked = [0]

    def delivered(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    conf = scram(b, certs, "throttled")
    conf.update({"acks": 1, "linger.ms": 5, "batch.size": 16384,
                 "queue.buffering.max.kbytes": 256,
                 "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    p = Producer(conf)
    value = b"q" * 1000
    reader = RateReader(metrics_addr, "throttled", READ_FROM_S)
    start = time.monotonic()
    while time.monotonic() - start < RUN_S:
        try:
            p.produce(topic, value, on_delivery=delivered)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    readings = reader.stop()
    elapsed = time.monotonic() - start
    assert p.flush(60) == 0
    assert throttles and max(throttles) > 0, "librdkafka reported no throttle time"
    assert_near_quota(readings, "confluent-kafka")
    # The client's own count includes the initial allowance (ten windows
    # of the quota at once) and the bursts of expiring samples: loose.
    client_rate = acked[0] / elapsed
    assert 0.5 * QUOTA <= client_rate <= 2.5 * QUOTA, client_rate

    # Another user on the same broker is not throttled.
    free_throttles: list[float] = []
    conf = scram(b, certs, "free")
    conf.update({"acks": 1, "throttle_cb": lambda ev: free_throttles.append(ev.throttle_time)})
    f = Producer(conf)
    for _ in range(500):
        f.produce(topic, value)
        f.poll(0)
    assert f.flush(60) == 0
    assert not [t for t in free_throttles if t > 0], free_throttles


def test_java_scram_user_over_producer_byte_rate_sees_produce_throttle_time(
        q, classpath, topic_name):
    b, certs, metrics_addr = q
    args = {"bootstrap": b.address("SECURE"), "ca": str(certs.ca)}
    for user, password in USERS.items():
        args[f"user.{user}"] = f"{MECHANISM}:{password}"
    reader = RateReader(metrics_addr, "jthrottled", READ_FROM_S + 4.0)
    try:
        out = run_java(classpath, "quota", 4, prefix=topic_name(), quser="jthrottled",
                       rate=int(QUOTA), seconds=int(RUN_S), **args)
    finally:
        readings = reader.stop()
    rate = [float(line.split()[1]) for line in out if line.startswith("RATE ")]
    assert rate and 0.5 * QUOTA <= rate[0] <= 2.5 * QUOTA, rate
    assert_near_quota(readings, "Java producer")
