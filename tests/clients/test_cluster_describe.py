"""DescribeCluster, DescribeLogDirs and KIP-430's authorized operations as
real admin clients read them: confluent-kafka's
describe_cluster and describe_topics with include_authorized_operations
(DescribeCluster and Metadata v10+ on the wire), kafka-python's
describe_cluster and describe_log_dirs. The broker runs without an
authorizer, so a caller may do everything the resource type supports
(tests in host/tests/authorization.rs cover what ACLs take away).
"""

from confluent_kafka import Producer, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from common import OP_TIMEOUT

CLUSTER_OPERATIONS = {AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                      AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                      AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}
TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                    AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}


def test_describe_cluster_and_topics_answer_brokers_and_authorized_operations(kaas, topic_name):
    admin = AdminClient({"bootstrap.servers": kaas.bootstrap})
    topic = topic_name()
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(OP_TIMEOUT)
    c = admin.describe_cluster(include_authorized_operations=True).result(OP_TIMEOUT)
    assert [(n.id, n.port) for n in c.nodes] == [(1, kaas.port)]
    assert c.controller.id == 1
    assert c.cluster_id
    assert set(c.authorized_operations) == CLUSTER_OPERATIONS
    (f,) = admin.describe_topics(TopicCollection([topic]),
                                 include_authorized_operations=True).values()
    d = f.result(OP_TIMEOUT)
    assert [p.id for p in d.partitions] == [0, 1]
    assert set(d.authorized_operations) == TOPIC_OPERATIONS


def test_describe_log_dirs_reports_each_partitions_size_on_disk(kaas, topic_name):
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": kaas.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(OP_TIMEOUT)
    p = Producer({"bootstrap.servers": kaas.bootstrap})
    for i in range(50):
        p.produce(topic, value=b"x" * 1000, partition=1)
    assert p.flush(OP_TIMEOUT) == 0

    ka = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
    try:
        cluster = ka.describe_cluster()
        assert [b["broker_id"] for b in cluster["brokers"]] == [1]
        (answer,) = ka.describe_log_dirs()
        (log_dir,) = answer["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"] == str(kaas.data_dir.resolve())
        sizes = {(t["name"], q["partition_index"]): q["partition_size"]
                 for t in log_dir["topics"] for q in t["partitions"]}
        assert sizes[(topic, 1)] >= 50 * 1000, sizes
        assert sizes[(topic, 0)] < 1000, "nothing written to partition 0"
        (answer,) = ka.describe_log_dirs({topic: [0]})
        (log_dir,) = answer["log_dirs"]
        assert [(t["name"], [q["partition_index"] for q in t["partitions"]])
                for t in log_dir["topics"]] == [(topic, [0])]
    finally:
        ka.close()
