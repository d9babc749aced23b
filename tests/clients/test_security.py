"""Real clients against a secured kaas (the security acceptance test): confluent-kafka,
kafka-python and kafkajs log in with SASL_SSL + SCRAM-SHA-512 and with PLAIN
(on a SASL_PLAINTEXT listener), produce, consume in a group (committing
offsets) and run a transaction with exactly the ACLs that needs; without
them they are refused with TOPIC_AUTHORIZATION_FAILED (29),
GROUP_AUTHORIZATION_FAILED (30) and TRANSACTIONAL_ID_AUTHORIZATION_FAILED
(53); a wrong password is an authentication error in each client.

One broker serves the whole module: listeners SECURE (SASL_SSL) and INTERNAL
(SASL_PLAINTEXT), the ACL authorizer with super user User:admin. Users are
set with `kaas user set` before it starts; ACLs are created by the admin
through confluent-kafka's AdminClient. Every test uses its own topic, group
and transactional.id, so the ACLs one test grants never help another.
"""

import json
import logging
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from conftest import KAAS_BIN, BrokerError, KaasBroker, report_broker_output
from node_runner import run_node_tests
from security_setup import kafka_python_config, librdkafka_config, make_certs, set_user

USERS = {  # name: (password, mechanism of its SCRAM credential)
    "admin": ("admin-secret", "SCRAM-SHA-512"),
    "alice": ("alice-secret", "SCRAM-SHA-512"),   # confluent-kafka
    "kate": ("kate-secret", "SCRAM-SHA-512"),     # kafka-python
    "jess": ("jess-secret", "SCRAM-SHA-512"),     # kafkajs
    "sam": ("sam-secret", "SCRAM-SHA-256"),       # a SCRAM-SHA-256 credential
    "mallory": ("mallory-secret", "SCRAM-SHA-512"),  # granted (almost) nothing
}
# (listener, security.protocol, mechanism): SCRAM-SHA-512 over TLS, and PLAIN
# (checked against the SCRAM credential) over the plaintext listener.
LOGINS = [("SECURE", "SASL_SSL", "SCRAM-SHA-512"), ("INTERNAL", "SASL_PLAINTEXT", "PLAIN")]
LOGIN_IDS = ["SASL_SSL-SCRAM-SHA-512", "SASL_PLAINTEXT-PLAIN"]
RECORDS = 10      # idempotent records per happy-path test
TXN_RECORDS = 5   # committed transactional records
TIMEOUT = 30.0

# Error codes (Kafka's).
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


class Secure:
    def __init__(self, broker: KaasBroker, certs):
        self.broker = broker
        self.certs = certs
        self._admin = None

    def address(self, listener: str) -> str:
        return self.broker.address(listener)

    def rdkafka(self, user: str, listener="SECURE", protocol="SASL_SSL",
                mechanism="SCRAM-SHA-512", password: str | None = None, **over) -> dict:
        pw = USERS[user][0] if password is None else password
        conf = librdkafka_config(self.address(listener), protocol, mechanism, user, pw,
                                 self.certs.ca)
        conf.update(over)
        return conf

    def kafka_python(self, user: str, listener="SECURE", protocol="SASL_SSL",
                     mechanism="SCRAM-SHA-512", password: str | None = None, **over) -> dict:
        pw = USERS[user][0] if password is None else password
        conf = kafka_python_config(self.address(listener), protocol, mechanism, user, pw,
                                   self.certs.ca)
        conf.update(over)
        return conf

    def admin(self) -> AdminClient:
        """User:admin's client (one, kept: a dropped AdminClient fails its futures)."""
        if self._admin is None:
            self._admin = AdminClient(self.rdkafka("admin"))
        return self._admin

    def create_topic(self, name: str, partitions: int = 2) -> None:
        fs = self.admin().create_topics([NewTopic(name, num_partitions=partitions,
                                                  replication_factor=1)])
        for f in fs.values():
            f.result(TIMEOUT)

    def grant(self, user: str, *acls) -> None:
        """ALLOW `user` each (resource type, name, operation), literal, any host."""
        bindings = [AclBinding(rt, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                               AclPermissionType.ALLOW) for rt, name, op in acls]
        for f in self.admin().create_acls(bindings).values():
            f.result(TIMEOUT)

    def grant_all_needed(self, user: str, topic: str, group: str, txn_id: str) -> None:
        """Exactly what produce + group consume + a transaction need."""
        self.grant(user,
                   (ResourceType.TOPIC, topic, AclOperation.WRITE),
                   (ResourceType.TOPIC, topic, AclOperation.READ),
                   (ResourceType.GROUP, group, AclOperation.READ),
                   (ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.WRITE))


def _has_authorizer() -> bool:
    try:
        out = subprocess.run([str(KAAS_BIN), "broker", "--help"], capture_output=True, text=True,
                             timeout=30).stdout
    except OSError:
        return False
    return "--allow-everyone-if-no-acl-found" in out


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    if not _has_authorizer():
        pytest.skip(f"{KAAS_BIN} has no ACL authorizer (--super-user); build a kaas with the authorizer")
    root = tmp_path_factory.mktemp("security")
    certs = make_certs(root / "certs")
    data = root / "data"
    for name, (password, mechanism) in USERS.items():
        set_user(KAAS_BIN, data, name, password, mechanism)
    b = KaasBroker(data_dir=data, log_dir=root / "logs",
                   listeners=(("SECURE", "SASL_SSL"), ("INTERNAL", "SASL_PLAINTEXT")),
                   extra_args=("--ssl-cert", str(certs.cert), "--ssl-key", str(certs.key),
                               "--authorizer", "acl", "--super-user", "User:admin",
                               "--group-initial-rebalance-delay-ms", "0"))
    try:
        b.start()
    except BrokerError as e:
        pytest.fail(str(e), pytrace=False)
    yield Secure(b, certs)
    b.stop()


@pytest.fixture(autouse=True)
def _watch_broker(request, secure):
    """The shared broker's output goes into a failing test's report, and a
    broker that died during a test fails it."""
    report_broker_output(request.node, secure.broker)
    yield
    died = secure.broker.died_unexpectedly()
    if died is not None:
        pytest.fail(f"kaas broker exited by itself (code {died})", pytrace=False)


@pytest.fixture
def names(request):
    tag = "".join(c if c.isalnum() or c in "._-" else "-" for c in request.node.name)
    tag = f"{tag[:80]}-{uuid.uuid4().hex[:8]}"
    return {"topic": f"t-{tag}", "group": f"g-{tag}", "txn": f"x-{tag}"}


def errors_of(err):
    return err.code() if err is not None else None


# ---------------------------------------------------------------- confluent-kafka

def rd_happy_path(secure: Secure, user: str, names: dict, **login) -> None:
    topic, group, txn_id = names["topic"], names["group"], names["txn"]
    secure.create_topic(topic)
    secure.grant_all_needed(user, topic, group, txn_id)

    delivered = []
    p = Producer(secure.rdkafka(user, **login, **{"enable.idempotence": True, "acks": "all"}))
    for i in range(RECORDS):
        p.produce(topic, f"v{i}".encode(), partition=i % 2,
                  on_delivery=lambda err, msg: delivered.append(errors_of(err)))
    assert p.flush(TIMEOUT) == 0
    assert delivered == [None] * RECORDS

    t = Producer(secure.rdkafka(user, **login, **{"transactional.id": txn_id}))
    t.init_transactions(TIMEOUT)
    t.begin_transaction()
    for i in range(TXN_RECORDS):
        t.produce(topic, f"txn{i}".encode(), partition=i % 2)
    t.commit_transaction(TIMEOUT)

    c = Consumer(secure.rdkafka(user, **login, **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed"}))
    c.subscribe([topic])
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < RECORDS + TXN_RECORDS and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        seen.append(m.value())
    assert sorted(seen) == sorted([f"v{i}".encode() for i in range(RECORDS)]
                                  + [f"txn{i}".encode() for i in range(TXN_RECORDS)])
    committed = c.commit(asynchronous=False)
    assert all(tp.error is None for tp in committed), committed
    got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=TIMEOUT)
    # Past every record; past each partition's commit marker too if the
    # consumer has fetched it.
    assert RECORDS + TXN_RECORDS <= sum(tp.offset for tp in got) <= RECORDS + TXN_RECORDS + 2, got
    c.close()


@pytest.mark.parametrize("listener,protocol,mechanism", LOGINS, ids=LOGIN_IDS)
def test_confluent_produces_consumes_in_a_group_and_commits_a_transaction_with_the_acls_it_needs(
        secure, names, listener, protocol, mechanism):
    rd_happy_path(secure, "alice", names, listener=listener, protocol=protocol,
                  mechanism=mechanism)


def test_confluent_logs_in_with_a_scram_sha_256_credential(secure, names):
    rd_happy_path(secure, "sam", names, listener="INTERNAL", protocol="SASL_PLAINTEXT",
                  mechanism="SCRAM-SHA-256")


def test_confluent_is_refused_without_the_acls(secure, names):
    topic, group, txn_id = names["topic"], names["group"], names["txn"]
    readable = topic + "-readable"
    secure.create_topic(topic)
    secure.create_topic(readable)
    # DESCRIBE only on `topic` and the group: Metadata names the leader and
    # FindCoordinator the coordinator, and Produce, Fetch, JoinGroup and
    # OffsetCommit themselves are refused.
    secure.grant("mallory", (ResourceType.TOPIC, readable, AclOperation.READ),
                 (ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
                 (ResourceType.GROUP, group, AclOperation.DESCRIBE))

    # Produce to a topic without WRITE (not idempotent: that would need
    # IDEMPOTENT_WRITE or WRITE on some topic first).
    delivered = []
    p = Producer(secure.rdkafka("mallory", **{"enable.idempotence": False,
                                              "message.timeout.ms": 10000}))
    p.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(errors_of(err)))
    p.flush(TIMEOUT)
    assert delivered == [TOPIC_AUTHORIZATION_FAILED]

    # Fetch a topic without READ.
    c = Consumer(secure.rdkafka("mallory", **{"group.id": names["group"] + "-unused",
                                              "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, 0)])
    assert first_error(c, TOPIC_AUTHORIZATION_FAILED) == TOPIC_AUTHORIZATION_FAILED
    c.close()

    # Join a group without READ on it (the topic is readable).
    c = Consumer(secure.rdkafka("mallory", **{"group.id": group, "enable.auto.commit": False,
                                              "auto.offset.reset": "earliest"}))
    c.subscribe([readable])
    assert first_error(c, GROUP_AUTHORIZATION_FAILED) == GROUP_AUTHORIZATION_FAILED
    c.close()

    # Commit offsets for a group without READ on it.
    c = Consumer(secure.rdkafka("mallory", **{"group.id": group, "enable.auto.commit": False}))
    with pytest.raises(KafkaException) as e:
        c.commit(offsets=[TopicPartition(readable, 0, 0)], asynchronous=False)
    assert e.value.args[0].code() == GROUP_AUTHORIZATION_FAILED
    c.close()

    # A transactional.id without WRITE.
    t = Producer(secure.rdkafka("mallory", **{"transactional.id": txn_id}))
    with pytest.raises(KafkaException) as e:
        t.init_transactions(TIMEOUT)
    assert e.value.args[0].code() == TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def first_error(c: Consumer, code: int, timeout: float = TIMEOUT) -> int | None:
    """`code` once the consumer reports it, else the first error it did
    report (None if none). A consumer with a group.id (confluent-kafka needs
    one even for assign()) also looks up its coordinator, so its group's
    refusal can come first."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is not None \
                and m.error().code() != KafkaError._PARTITION_EOF:
            seen.append(m.error().code())
            if seen[-1] == code:
                return code
    return seen[0] if seen else None


@pytest.mark.parametrize("listener,protocol,mechanism", LOGINS, ids=LOGIN_IDS)
def test_confluent_reports_a_wrong_password_as_an_authentication_error(
        secure, listener, protocol, mechanism):
    errors = []
    p = Producer(secure.rdkafka("alice", listener=listener, protocol=protocol,
                                mechanism=mechanism, password="wrong",
                                error_cb=lambda e: errors.append(e)))
    deadline = time.monotonic() + TIMEOUT
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) \
            and time.monotonic() < deadline:
        p.poll(0.1)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    assert "Authentication failed" in auth[0].str(), auth[0].str()


# ---------------------------------------------------------------- kafka-python

@pytest.mark.parametrize("listener,protocol,mechanism", LOGINS, ids=LOGIN_IDS)
def test_kafka_python_produces_consumes_in_a_group_and_commits_a_transaction_with_the_acls_it_needs(
        secure, names, listener, protocol, mechanism):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP
    topic, group, txn_id = names["topic"], names["group"], names["txn"]
    login = dict(listener=listener, protocol=protocol, mechanism=mechanism)
    secure.create_topic(topic)
    secure.grant_all_needed("kate", topic, group, txn_id)

    p = KafkaProducer(**secure.kafka_python("kate", **login, acks="all", enable_idempotence=True))
    futures = [p.send(topic, f"v{i}".encode(), partition=i % 2) for i in range(RECORDS)]
    for f in futures:
        f.get(TIMEOUT)
    p.close()

    t = KafkaProducer(**secure.kafka_python("kate", **login, transactional_id=txn_id))
    t.init_transactions()
    t.begin_transaction()
    for i in range(TXN_RECORDS):
        t.send(topic, f"txn{i}".encode(), partition=i % 2)
    t.commit_transaction()
    t.close()

    c = KafkaConsumer(topic, **secure.kafka_python(
        "kate", **login, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
        isolation_level="read_committed"))
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < RECORDS + TXN_RECORDS and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500).values():
            seen += [r.value for r in records]
    assert sorted(seen) == sorted([f"v{i}".encode() for i in range(RECORDS)]
                                  + [f"txn{i}".encode() for i in range(TXN_RECORDS)])
    c.commit()
    committed = [c.committed(KTP(topic, p)) for p in (0, 1)]
    assert RECORDS + TXN_RECORDS <= sum(committed) <= RECORDS + TXN_RECORDS + 2, committed
    c.close()


def test_kafka_python_is_refused_without_the_acls(secure, names):
    import kafka.errors as E
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata
    topic, group, txn_id = names["topic"], names["group"], names["txn"]
    readable = topic + "-readable"
    secure.create_topic(topic)
    secure.create_topic(readable)
    secure.grant("mallory", (ResourceType.TOPIC, readable, AclOperation.READ),
                 (ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
                 (ResourceType.GROUP, group, AclOperation.DESCRIBE))

    p = KafkaProducer(**secure.kafka_python("mallory", enable_idempotence=False,
                                            max_block_ms=10000))
    with pytest.raises(E.TopicAuthorizationFailedError):
        p.send(topic, b"x").get(TIMEOUT)
    p.close()

    c = KafkaConsumer(**secure.kafka_python("mallory", group_id=None, enable_auto_commit=False))
    c.assign([KTP(topic, 0)])
    with pytest.raises(E.TopicAuthorizationFailedError):
        poll_until_raises(c)
    c.close()

    c = KafkaConsumer(readable, **secure.kafka_python(
        "mallory", group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"))
    with pytest.raises(E.GroupAuthorizationFailedError):
        poll_until_raises(c)
    c.close()

    c = KafkaConsumer(**secure.kafka_python("mallory", group_id=group, enable_auto_commit=False))
    c.assign([KTP(readable, 0)])
    with pytest.raises(E.GroupAuthorizationFailedError):
        c.commit({KTP(readable, 0): OffsetAndMetadata(0, "", -1)})
    c.close()

    t = KafkaProducer(**secure.kafka_python("mallory", transactional_id=txn_id))
    with pytest.raises(E.TransactionalIdAuthorizationFailedError):
        t.init_transactions()
    t.close(timeout=1)


def poll_until_raises(c, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c.poll(timeout_ms=500)
    raise AssertionError(f"poll() did not raise within {timeout} s")


@pytest.mark.parametrize("listener,protocol,mechanism", LOGINS, ids=LOGIN_IDS)
def test_kafka_python_reports_a_wrong_password_as_an_authentication_error(
        secure, caplog, listener, protocol, mechanism):
    import kafka.errors as E
    from kafka import KafkaProducer
    # kafka-python keeps retrying the bootstrap and logs why each try failed.
    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(E.KafkaTimeoutError):
        KafkaProducer(**secure.kafka_python("kate", listener=listener, protocol=protocol,
                                            mechanism=mechanism, password="wrong",
                                            bootstrap_timeout_ms=3000))
    assert "SaslAuthenticationFailedError" in caplog.text, caplog.text[-2000:]


# ---------------------------------------------------------------- kafkajs

# kafkajs_security.test.js: SCRAM-SHA-512 over SASL_SSL and PLAIN over
# SASL_PLAINTEXT (each: produce, group consume + commit, transaction), refused
# without ACLs, wrong password.
KAFKAJS_TESTS = 4


@pytest.mark.timeout(KAFKAJS_TESTS * 60 + 60)
def test_kafkajs_security(secure, names, tmp_path):
    cases = {}
    for listener, protocol, mechanism in LOGINS:
        n = {k: f"{v}-js-{mechanism}" for k, v in names.items()}
        secure.create_topic(n["topic"])
        secure.grant_all_needed("jess", n["topic"], n["group"], n["txn"])
        cases[mechanism] = {"broker": secure.address(listener), "ssl": protocol == "SASL_SSL",
                            "mechanism": mechanism.lower(), **n}
    refused = {k: f"{v}-js-refused" for k, v in names.items()}
    refused["readable"] = refused["topic"] + "-readable"
    refused["hidden"] = refused["topic"] + "-hidden"  # no ACL at all
    secure.create_topic(refused["hidden"])
    secure.create_topic(refused["topic"])
    secure.create_topic(refused["readable"])
    secure.grant("mallory", (ResourceType.TOPIC, refused["readable"], AclOperation.READ),
                 (ResourceType.TOPIC, refused["topic"], AclOperation.DESCRIBE),
                 (ResourceType.GROUP, refused["group"], AclOperation.DESCRIBE),
                 # kafkajs reports a refused FindCoordinator only as
                 # KafkaJSGroupCoordinatorNotFound: let it find the
                 # coordinator, and InitProducerId is refused.
                 (ResourceType.TRANSACTIONAL_ID, refused["txn"], AclOperation.DESCRIBE))
    config = {"ca": str(secure.certs.ca), "secure": secure.address("SECURE"),
              "users": {u: USERS[u][0] for u in ("jess", "mallory")},
              "cases": cases, "refused": refused, "records": RECORDS, "txnRecords": TXN_RECORDS}
    run_node_tests("kafkajs_security.test.js", secure.address("SECURE"), KAFKAJS_TESTS,
                   tmp_path / "kafkajs-security.out", KAFKAJS_TESTS * 60,
                   env={"KAAS_SECURITY": json.dumps(config)})
