// Kafka's own Java client (kafka-clients 4.4.0, from Maven Central through
// scripts/setup-java) against a kaas broker: one scenario per run, driven by
// tests/clients/test_java_client.py. No API deprecated in 4.x is used.
//
// usage: java -cp CLASSPATH KaasJava SCENARIO key=value...
//
// Every check prints "ok N - what" and a failed one ends the run with
// "FAILED: what: want ..., got ..." and exit code 1 (any other exception:
// its stack trace and exit code 2). A scenario that gets to its end prints
// "OK SCENARIO N checks"; the pytest side requires that line with the
// number of checks it expects, so a run that skipped a check fails too.
//
// Scenarios (arguments in test_java_client.py):
//   admin         topics, configs, partitions, log dirs, the cluster
//   produce       idempotent produce with each codec, read back
//   groups        consumer groups (range assignor) and the group admin calls;
//                 protocol=classic (default) or protocol=consumer (KIP-848)
//   consumer-protocol  KIP-848 consumer groups (group.protocol=consumer):
//                 incremental rebalances, commits, the group admin calls
//   transactions  commit/abort, read_committed vs read_uncommitted, and the
//                 transaction admin calls while one is open
//   fencing       two producers with one transactional.id
//   seed          writes the copier's input
//   copier        KIP-447 consume-transform-produce (runs until killed or
//                 caught up; prints its progress for the test to kill it;
//                 protocol=consumer for a KIP-848 member, leave_after=N to
//                 leave the group and halt with a transaction open)
//   dump          prints a topic's records and a group's offsets
//   secure-admin  ACLs, SCRAM credentials, authorized operations (SASL_SSL)
//   secure-clients  produce and consume over SASL_SSL with SCRAM-SHA-256 and
//                 -512, a wrong password, and a user without ACLs (its group
//                 members classic, or KIP-848 ones with protocol=consumer)

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.DuplicateResourceException;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.ResourceNotFoundException;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KaasJava {
    /** Deadline of any one wait on the broker. */
    static final Duration TIMEOUT = Duration.ofSeconds(30);
    static final int PARTITIONS = 4;

    static Map<String, String> arg;
    static int checks;

    public static void main(String[] argv) throws Exception {
        String scenario = argv[0];
        arg = new HashMap<>();
        for (String a : Arrays.copyOfRange(argv, 1, argv.length)) {
            int eq = a.indexOf('=');
            arg.put(a.substring(0, eq), a.substring(eq + 1));
        }
        try {
            switch (scenario) {
                case "admin" -> admin();
                case "produce" -> produce();
                case "groups" -> groups();
                case "consumer-protocol" -> consumerProtocol();
                case "transactions" -> transactions();
                case "fencing" -> fencing();
                case "seed" -> seed();
                case "copier" -> copier();
                case "dump" -> dump();
                case "secure-admin" -> secureAdmin();
                case "secure-clients" -> secureClients();
                case "quota" -> quota();
                default -> throw new IllegalArgumentException("no scenario " + scenario);
            }
        } catch (Failure f) {
            System.out.println("FAILED: " + f.getMessage());
            System.out.flush();
            System.exit(1);
        } catch (Throwable t) {
            t.printStackTrace(System.out);
            System.out.flush();
            System.exit(2);
        }
        System.out.println("OK " + scenario + " " + checks + " checks");
        System.out.flush();
        // Kafka's clients leave no non-daemon threads once closed, but exit
        // at once regardless.
        System.exit(0);
    }

    // ---------------------------------------------------------------- checks

    static final class Failure extends RuntimeException {
        Failure(String m) {
            super(m);
        }
    }

    static void check(boolean ok, String what, Object detail) {
        checks++;
        if (!ok) throw new Failure(what + ": " + detail);
        System.out.println("ok " + checks + " - " + what);
    }

    static void same(Object want, Object got, String what) {
        check(Objects.equals(want, got), what, "want " + want + ", got " + got);
    }

    interface Action {
        void run() throws Exception;
    }

    /** Runs `action`, which must throw an exception of class `type` (itself
     * or as the cause of an ExecutionException or KafkaException). */
    static <E extends Throwable> E raises(Class<E> type, String what, Action action) {
        Throwable got = null;
        try {
            action.run();
        } catch (Throwable t) {
            got = t;
        }
        for (Throwable t = got; t != null; t = t.getCause()) {
            if (type.isInstance(t)) {
                check(true, what, null);
                return type.cast(t);
            }
        }
        check(false, what, "want " + type.getSimpleName() + ", got " + got);
        return null;
    }

    /** Calls `done` until it is true (each call may itself wait, e.g. poll a
     * consumer); fails after `timeout`. */
    static void until(String what, Duration timeout, BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) throw new Failure("timed out waiting for " + what);
            Thread.sleep(20);
        }
    }

    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(TIMEOUT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static byte[] bytes(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static void log(String line) {
        System.out.println("# " + line);
    }

    // ---------------------------------------------------------------- clients

    /** Settings every client gets: the bootstrap address, and for the
     * secured broker SASL_SSL with SCRAM as `user` (password from the
     * arguments unless given). */
    static Properties base(String user, String password) {
        Properties p = new Properties();
        p.put("bootstrap.servers", arg.get("bootstrap"));
        p.put("request.timeout.ms", "30000");
        p.put("default.api.timeout.ms", "60000");
        if (user != null) {
            String[] cred = arg.get("user." + user).split(":", 2);  // mechanism:password
            p.put("security.protocol", "SASL_SSL");
            p.put("sasl.mechanism", cred[0]);
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    + "username=\"" + user + "\" password=\"" + (password != null ? password : cred[1]) + "\";");
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", arg.get("ca"));
        }
        return p;
    }

    static Admin admin(String user) {
        return Admin.create(base(user, null));
    }

    static KafkaProducer<byte[], byte[]> producer(String user, String... kv) {
        Properties p = base(user, null);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String user, String... kv) {
        Properties p = base(user, null);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
        return new KafkaConsumer<>(p);
    }

    static List<TopicPartition> partitions(String topic, int n) {
        return IntStream.range(0, n).mapToObj(p -> new TopicPartition(topic, p)).toList();
    }

    static void createTopic(Admin admin, String topic, int partitions) throws Exception {
        get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all());
    }

    /** {partition: records} that an `isolation` consumer (assign, no group)
     * reads from the beginning up to each partition's end offset (for
     * read_committed, the last stable offset), taken first. */
    static Map<Integer, List<ConsumerRecord<byte[], byte[]>>> readAll(
            String user, String topic, int n, String isolation) throws Exception {
        try (KafkaConsumer<byte[], byte[]> c = consumer(user, "isolation.level", isolation)) {
            List<TopicPartition> tps = partitions(topic, n);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = new TreeMap<>();
            for (TopicPartition tp : tps) got.put(tp.partition(), new ArrayList<>());
            until(topic + " read to its end (" + isolation + ")", TIMEOUT.multipliedBy(2), () -> {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    got.get(r.partition()).add(r);
                }
                return tps.stream().allMatch(tp -> c.position(tp) >= end.get(tp));
            });
            return got;
        }
    }

    static Map<Integer, List<String>> values(Map<Integer, List<ConsumerRecord<byte[], byte[]>>> records) {
        Map<Integer, List<String>> out = new TreeMap<>();
        records.forEach((p, rs) -> out.put(p, rs.stream().map(r -> str(r.value())).toList()));
        return out;
    }

    // ---------------------------------------------------------------- admin

    static void admin() throws Exception {
        String compacted = arg.get("prefix") + "-compacted", plain = arg.get("prefix") + "-plain";
        try (Admin a = admin(null)) {
            // The cluster: one broker, at the bootstrap address, the controller.
            DescribeClusterResult cluster = a.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true));
            Collection<Node> nodes = get(cluster.nodes());
            same(List.of(arg.get("bootstrap")), nodes.stream().map(n -> n.host() + ":" + n.port()).toList(),
                    "describeCluster: one broker at the bootstrap address");
            Node node = nodes.iterator().next();
            same(node, get(cluster.controller()), "describeCluster: that broker is the controller");
            String clusterId = get(cluster.clusterId());
            check(clusterId != null && !clusterId.isEmpty(), "describeCluster: a cluster id", clusterId);
            // No authorizer: every operation on the cluster (KIP-430).
            same(Set.of(AclOperation.ALTER, AclOperation.ALTER_CONFIGS, AclOperation.CLUSTER_ACTION,
                            AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                            AclOperation.IDEMPOTENT_WRITE),
                    get(cluster.authorizedOperations()), "describeCluster: authorized operations");

            CreateTopicsResult created = a.createTopics(List.of(
                    new NewTopic(compacted, 3, (short) 1).configs(Map.of(
                            "cleanup.policy", "compact", "retention.ms", "3600000")),
                    new NewTopic(plain, 2, (short) 1)));
            get(created.all());
            same(3, get(created.numPartitions(compacted)), "createTopics: partitions in the answer");
            same("compact", get(created.config(compacted)).get("cleanup.policy").value(),
                    "createTopics: configs in the answer");
            check(!Uuid.ZERO_UUID.equals(get(created.topicId(plain))), "createTopics: a topic id",
                    get(created.topicId(plain)));
            raises(TopicExistsException.class, "createTopics: an existing topic is TOPIC_ALREADY_EXISTS",
                    () -> get(a.createTopics(List.of(new NewTopic(plain, 2, (short) 1))).all()));

            Set<String> listed = get(a.listTopics().names());
            check(listed.containsAll(Set.of(compacted, plain)), "listTopics names both topics", listed);

            Map<String, TopicDescription> described = get(a.describeTopics(List.of(compacted, plain),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames());
            Map<String, List<String>> layout = new TreeMap<>();
            described.forEach((name, d) -> layout.put(name, d.partitions().stream()
                    .map(p -> p.partition() + ":" + p.leader().id() + ":" + ids(p.replicas()) + ":" + ids(p.isr()))
                    .toList()));
            int id = node.id();
            same(Map.of(compacted, List.of(0 + ":" + id + ":[" + id + "]:[" + id + "]",
                            1 + ":" + id + ":[" + id + "]:[" + id + "]", 2 + ":" + id + ":[" + id + "]:[" + id + "]"),
                            plain, List.of(0 + ":" + id + ":[" + id + "]:[" + id + "]",
                            1 + ":" + id + ":[" + id + "]:[" + id + "]")),
                    layout, "describeTopics: partition:leader:replicas:isr");
            same(get(created.topicId(plain)), described.get(plain).topicId(), "describeTopics: the topic id");
            same(Set.of(AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                            AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                            AclOperation.ALTER_CONFIGS),
                    described.get(plain).authorizedOperations(), "describeTopics: authorized operations");

            // Configs: the overrides, their source, a default; then changed.
            ConfigResource cr = new ConfigResource(ConfigResource.Type.TOPIC, compacted);
            ConfigResource pr = new ConfigResource(ConfigResource.Type.TOPIC, plain);
            Map<ConfigResource, Config> configs = get(a.describeConfigs(List.of(cr, pr)).all());
            same(List.of("compact", "DYNAMIC_TOPIC_CONFIG", "3600000", "DYNAMIC_TOPIC_CONFIG"),
                    List.of(configs.get(cr).get("cleanup.policy").value(),
                            configs.get(cr).get("cleanup.policy").source().name(),
                            configs.get(cr).get("retention.ms").value(),
                            configs.get(cr).get("retention.ms").source().name()),
                    "describeConfigs: the overrides, as topic configs");
            same(List.of("delete", "DEFAULT_CONFIG", "604800000", true),
                    List.of(configs.get(pr).get("cleanup.policy").value(),
                            configs.get(pr).get("cleanup.policy").source().name(),
                            configs.get(pr).get("retention.ms").value(),
                            configs.get(pr).get("retention.ms").isDefault()),
                    "describeConfigs: a plain topic's defaults");

            get(a.incrementalAlterConfigs(Map.of(pr, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "123456"), AlterConfigOp.OpType.SET))))
                    .all());
            Config altered = get(a.describeConfigs(List.of(pr)).all()).get(pr);
            same(List.of("7200000", "delete,compact", "123456", "DYNAMIC_TOPIC_CONFIG"),
                    List.of(altered.get("retention.ms").value(), altered.get("cleanup.policy").value(),
                            altered.get("max.message.bytes").value(), altered.get("max.message.bytes").source().name()),
                    "incrementalAlterConfigs: SET and APPEND");
            get(a.incrementalAlterConfigs(Map.of(pr, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT))))
                    .all());
            altered = get(a.describeConfigs(List.of(pr)).all()).get(pr);
            same(List.of("604800000", "DEFAULT_CONFIG", "compact", "123456"),
                    List.of(altered.get("retention.ms").value(), altered.get("retention.ms").source().name(),
                            altered.get("cleanup.policy").value(), altered.get("max.message.bytes").value()),
                    "incrementalAlterConfigs: DELETE and SUBTRACT");
            raises(InvalidConfigurationException.class, "incrementalAlterConfigs: a bad value is INVALID_CONFIG",
                    () -> get(a.incrementalAlterConfigs(Map.of(pr, List.of(new AlterConfigOp(
                            new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all()));
            same("604800000", get(a.describeConfigs(List.of(pr)).all()).get(pr).get("retention.ms").value(),
                    "a refused change changes nothing");

            // Partitions: 2 -> 5; fewer is refused.
            get(a.createPartitions(Map.of(plain, NewPartitions.increaseTo(5))).all());
            same(5, get(a.describeTopics(List.of(plain)).allTopicNames()).get(plain).partitions().size(),
                    "createPartitions: 2 -> 5");
            raises(InvalidPartitionsException.class, "createPartitions: fewer partitions are refused",
                    () -> get(a.createPartitions(Map.of(plain, NewPartitions.increaseTo(3))).all()));

            // Log dirs: sizes on disk of what was written, per partition.
            // (`plain` is compacted now: every record needs a key.)
            try (KafkaProducer<byte[], byte[]> p = producer(null, "acks", "all")) {
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                for (int i = 0; i < 40; i++) {
                    acks.add(p.send(new ProducerRecord<>(plain, i % 4, bytes("k" + i), bytes("x".repeat(500)))));
                }
                for (Future<RecordMetadata> f : acks) f.get();
            }
            Map<String, LogDirDescription> dirs = get(a.describeLogDirs(List.of(id)).allDescriptions()).get(id);
            same(1, dirs.size(), "describeLogDirs: one log dir");
            LogDirDescription dir = dirs.values().iterator().next();
            same(null, dir.error(), "describeLogDirs: no error");
            Map<String, Boolean> written = new TreeMap<>();
            Map<String, Long> sizes = new TreeMap<>();
            dir.replicaInfos().forEach((tp, info) -> {
                if (tp.topic().equals(plain) || tp.topic().equals(compacted)) {
                    written.put(tp.toString(), info.size() > 10 * 500);
                    sizes.put(tp.toString(), info.size());
                }
            });
            log("sizes on disk: " + sizes);
            Map<String, Boolean> want = new TreeMap<>();
            for (int p = 0; p < 5; p++) want.put(plain + "-" + p, p < 4);
            for (int p = 0; p < 3; p++) want.put(compacted + "-" + p, false);
            same(want, written, "describeLogDirs: every partition, sized by what it holds");
            check(dir.totalBytes().isPresent() && dir.usableBytes().isPresent()
                            && dir.usableBytes().getAsLong() <= dir.totalBytes().getAsLong(),
                    "describeLogDirs: total and usable bytes", dir.totalBytes() + " " + dir.usableBytes());

            get(a.deleteTopics(List.of(plain)).all());
            Set<String> after = get(a.listTopics().names());
            check(!after.contains(plain) && after.contains(compacted), "deleteTopics: the topic is gone", after);
        }
    }

    static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).toList();
    }

    // ---------------------------------------------------------------- produce

    static void produce() throws Exception {
        int n = 200;
        Map<String, Long> sizes = new TreeMap<>();
        try (Admin a = admin(null)) {
            int id = get(a.describeCluster().controller()).id();
            for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
                String topic = arg.get("prefix") + "-" + codec;
                createTopic(a, topic, PARTITIONS);
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                Map<Integer, List<String>> want = new TreeMap<>();
                try (KafkaProducer<byte[], byte[]> p = producer(null, "enable.idempotence", "true",
                        "acks", "all", "compression.type", codec, "linger.ms", "20")) {
                    for (int i = 0; i < n; i++) {
                        String key = i % 50 == 7 ? null : String.format("key-%04d", i);
                        String value = String.format(codec + " value %04d ", i).repeat(8);
                        acks.add(p.send(new ProducerRecord<>(topic, i % PARTITIONS, bytes(key), bytes(value))));
                        want.computeIfAbsent(i % PARTITIONS, k -> new ArrayList<>()).add(key + "=" + value);
                    }
                    p.flush();
                }
                List<String> got = new ArrayList<>(), expected = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    RecordMetadata m = acks.get(i).get();
                    got.add(m.partition() + "@" + m.offset());
                    expected.add(i % PARTITIONS + "@" + i / PARTITIONS);
                }
                same(expected, got, codec + ": each record acknowledged at its offset");

                Map<TopicPartition, OffsetSpec> earliest = new HashMap<>(), latest = new HashMap<>();
                for (TopicPartition tp : partitions(topic, PARTITIONS)) {
                    earliest.put(tp, OffsetSpec.earliest());
                    latest.put(tp, OffsetSpec.latest());
                }
                List<Long> ends = new ArrayList<>();
                get(a.listOffsets(earliest).all()).entrySet().stream()
                        .sorted(Map.Entry.comparingByKey((x, y) -> x.partition() - y.partition()))
                        .forEach(e -> ends.add(e.getValue().offset()));
                get(a.listOffsets(latest).all()).entrySet().stream()
                        .sorted(Map.Entry.comparingByKey((x, y) -> x.partition() - y.partition()))
                        .forEach(e -> ends.add(e.getValue().offset()));
                same(List.of(0L, 0L, 0L, 0L, 50L, 50L, 50L, 50L), ends, codec + ": listOffsets earliest, latest");

                Map<Integer, List<ConsumerRecord<byte[], byte[]>>> read =
                        readAll(null, topic, PARTITIONS, "read_uncommitted");
                Map<Integer, List<String>> gotRecords = new TreeMap<>();
                boolean offsetsInOrder = true;
                for (var e : read.entrySet()) {
                    List<String> rs = new ArrayList<>();
                    for (int j = 0; j < e.getValue().size(); j++) {
                        var r = e.getValue().get(j);
                        offsetsInOrder &= r.offset() == j;
                        rs.add(str(r.key()) + "=" + str(r.value()));
                    }
                    gotRecords.put(e.getKey(), rs);
                }
                same(want, gotRecords, codec + ": read back exactly the records written, in order");
                check(offsetsInOrder, codec + ": offsets 0..49 in each partition", read);

                // Idempotence: one producer id, sequences 0..49 per partition.
                var states = get(a.describeProducers(partitions(topic, PARTITIONS)).all());
                Set<String> producerStates = new TreeSet<>();
                Set<Long> pids = new HashSet<>();
                states.forEach((tp, s) -> s.activeProducers().forEach(ps -> {
                    pids.add(ps.producerId());
                    producerStates.add(tp.partition() + ": epoch " + ps.producerEpoch() + " last sequence "
                            + ps.lastSequence() + " txn " + ps.currentTransactionStartOffset());
                }));
                same(Set.of("0: epoch 0 last sequence 49 txn OptionalLong.empty",
                                "1: epoch 0 last sequence 49 txn OptionalLong.empty",
                                "2: epoch 0 last sequence 49 txn OptionalLong.empty",
                                "3: epoch 0 last sequence 49 txn OptionalLong.empty"),
                        producerStates, codec + ": describeProducers, one idempotent producer per partition");
                same(1, pids.size(), codec + ": the same producer id on every partition");

                long size = 0;
                for (LogDirDescription d : get(a.describeLogDirs(List.of(id)).allDescriptions()).get(id).values()) {
                    for (var e : d.replicaInfos().entrySet()) {
                        if (e.getKey().topic().equals(topic)) size += e.getValue().size();
                    }
                }
                sizes.put(codec, size);
            }
        }
        log("bytes on disk per codec: " + sizes);
        // The batches are stored as the producer compressed them.
        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            check(sizes.get(codec) * 3 < sizes.get("none"), codec + ": stored compressed", sizes);
        }
    }

    // ---------------------------------------------------------------- groups

    static void produceRound(String topic, String tag, int perPartition) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = producer(null, "acks", "all")) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < perPartition * PARTITIONS; i++) {
                acks.add(p.send(new ProducerRecord<>(topic, i % PARTITIONS, null, bytes(tag + "-" + i))));
            }
            for (Future<RecordMetadata> f : acks) f.get();
        }
    }

    /** {partition: ["offset:value"]} of a produceRound into a topic whose
     * partitions each hold `first` records before it. */
    static Map<Integer, List<String>> round(String tag, long first, int perPartition) {
        Map<Integer, List<String>> out = new TreeMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> rs = new ArrayList<>();
            for (int j = 0; j < perPartition; j++) rs.add((first + j) + ":" + tag + "-" + (p + PARTITIONS * j));
            out.put(p, rs);
        }
        return out;
    }

    /** Polls each member in turn until they have read `want` records in all;
     * [{partition: ["offset:value"]}] per member. */
    static List<Map<Integer, List<String>>> drain(List<KafkaConsumer<byte[], byte[]>> members, int want)
            throws Exception {
        List<Map<Integer, List<String>>> got = new ArrayList<>();
        for (int i = 0; i < members.size(); i++) got.add(new TreeMap<>());
        int[] total = {0};
        until(want + " records", TIMEOUT.multipliedBy(2), () -> {
            for (int i = 0; i < members.size(); i++) {
                for (ConsumerRecord<byte[], byte[]> r : members.get(i).poll(Duration.ofMillis(50))) {
                    got.get(i).computeIfAbsent(r.partition(), k -> new ArrayList<>())
                            .add(r.offset() + ":" + str(r.value()));
                    total[0]++;
                }
            }
            return total[0] >= want;
        });
        // Nothing more than that arrives.
        for (int i = 0; i < 3; i++) {
            for (KafkaConsumer<byte[], byte[]> m : members) total[0] += m.poll(Duration.ofMillis(50)).count();
        }
        same(want, total[0], "the members read " + want + " records");
        return got;
    }

    static Map<Integer, Long> committed(Admin a, String group, String topic) throws Exception {
        Map<Integer, Long> out = new TreeMap<>();
        get(a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()).forEach((tp, o) -> {
            if (tp.topic().equals(topic)) out.put(tp.partition(), o.offset());
        });
        return out;
    }

    /** Whether the arguments ask for KIP-848 members (protocol=consumer;
     * protocol=classic, the default, for JoinGroup/SyncGroup ones). */
    static boolean protocolIsConsumer() {
        String protocol = arg.getOrDefault("protocol", "classic");
        if (!protocol.equals("classic") && !protocol.equals("consumer")) {
            throw new IllegalArgumentException("protocol=" + protocol);
        }
        return protocol.equals("consumer");
    }

    /** A group member's settings `kv`, with group.protocol=consumer added
     * when the arguments ask for it (protocol=consumer). */
    static String[] member(String... kv) {
        if (!protocolIsConsumer()) return kv;
        String[] out = Arrays.copyOf(kv, kv.length + 2);
        out[kv.length] = "group.protocol";
        out[kv.length + 1] = "consumer";
        return out;
    }

    static Map<Integer, Long> each(long offset) {
        Map<Integer, Long> out = new TreeMap<>();
        for (int p = 0; p < PARTITIONS; p++) out.put(p, offset);
        return out;
    }

    /**
     * Two members of a consumer group with the range assignor, then a
     * hand-over, and a new member resuming at the commits. protocol=classic
     * (the default): JoinGroup/SyncGroup, the client's RangeAssignor;
     * protocol=consumer: KIP-848 (ConsumerGroupHeartbeat), the broker's range
     * assignor (group.remote.assignor).
     */
    static void groups() throws Exception {
        String topic = arg.get("prefix") + "-topic", group = arg.get("prefix") + "-group";
        Set<TopicPartition> everything = new HashSet<>(partitions(topic, PARTITIONS));
        boolean kip848 = protocolIsConsumer();
        GroupType type = kip848 ? GroupType.CONSUMER : GroupType.CLASSIC;
        String[] member = kip848
                ? new String[] {"group.id", group, "group.protocol", "consumer", "group.remote.assignor", "range",
                        "client.id", ""}
                : new String[] {"group.id", group, "session.timeout.ms", "6000", "heartbeat.interval.ms", "200",
                        "client.id", ""};
        try (Admin a = admin(null)) {
            createTopic(a, topic, PARTITIONS);
            member[7] = "member-a";
            KafkaConsumer<byte[], byte[]> ca = consumer(null, member);
            member[7] = "member-b";
            KafkaConsumer<byte[], byte[]> cb = consumer(null, member);
            List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>(List.of(ca, cb));
            try {
                ca.subscribe(List.of(topic));
                cb.subscribe(List.of(topic));
                until("two members to split the partitions", TIMEOUT, () -> {
                    ca.poll(Duration.ofMillis(50));
                    cb.poll(Duration.ofMillis(50));
                    Set<TopicPartition> sa = ca.assignment(), sb = cb.assignment();
                    Set<TopicPartition> both = new HashSet<>(sa);
                    both.addAll(sb);
                    return !sa.isEmpty() && !sb.isEmpty() && both.size() == sa.size() + sb.size()
                            && both.equals(everything);
                });
                same(List.of(2, 2), List.of(ca.assignment().size(), cb.assignment().size()),
                        "the range assignor gives each member two partitions");

                ConsumerGroupDescription d = get(a.describeConsumerGroups(List.of(group)).all()).get(group);
                Map<String, Set<TopicPartition>> assigned = new TreeMap<>();
                for (MemberDescription m : d.members()) assigned.put(m.clientId(), m.assignment().topicPartitions());
                same(List.of(type, GroupState.STABLE, "range", Map.of("member-a", ca.assignment(),
                                "member-b", cb.assignment())),
                        List.of(d.type(), d.groupState(), d.partitionAssignor(), assigned),
                        "describeConsumerGroups: its type, stable, range, each member's partitions");
                same(get(a.describeCluster().controller()).id(), d.coordinator().id(),
                        "describeConsumerGroups: the coordinator");
                Optional<GroupListing> listing = get(a.listGroups(ListGroupsOptions.forConsumerGroups()).all())
                        .stream().filter(l -> l.groupId().equals(group)).findFirst();
                same(List.of(Optional.of(type), Optional.of(GroupState.STABLE)),
                        List.of(listing.flatMap(GroupListing::type), listing.flatMap(GroupListing::groupState)),
                        "listGroups (consumer groups): the group, its type, stable");
                raises(GroupNotEmptyException.class, "deleteConsumerGroups: a group with members is NON_EMPTY_GROUP",
                        () -> get(a.deleteConsumerGroups(List.of(group)).all()));

                // Round 1: each member reads its own partitions.
                produceRound(topic, "first", 10);
                List<Map<Integer, List<String>>> got = drain(members, 10 * PARTITIONS);
                same(List.of(ca.assignment().stream().map(TopicPartition::partition).collect(Collectors.toSet()),
                                cb.assignment().stream().map(TopicPartition::partition).collect(Collectors.toSet())),
                        List.of(got.get(0).keySet(), got.get(1).keySet()),
                        "each member reads only its own partitions");
                Map<Integer, List<String>> merged = new TreeMap<>(got.get(0));
                merged.putAll(got.get(1));
                same(round("first", 0, 10), merged, "round 1: every record once, in order");
                ca.commitSync();
                cb.commitSync();
                same(each(10), committed(a, group, topic), "listConsumerGroupOffsets after both commit");
                Map<Integer, Long> seen = new TreeMap<>();
                ca.committed(everything).forEach((tp, o) -> seen.put(tp.partition(), o.offset()));
                same(each(10), seen, "committed() from a member");

                // Hand-over: b leaves, a takes its partitions at b's commits.
                cb.close();
                members.remove(cb);
                until("a to own every partition", TIMEOUT, () -> {
                    ca.poll(Duration.ofMillis(50));
                    return ca.assignment().equals(everything);
                });
                produceRound(topic, "second", 5);
                got = drain(members, 5 * PARTITIONS);
                same(round("second", 10, 5), got.get(0), "after the hand-over: only round 2, from offset 10");
                ca.commitSync();
                ca.close();
                members.remove(ca);

                ConsumerGroupDescription empty = get(a.describeConsumerGroups(List.of(group)).all()).get(group);
                same(List.of(type, GroupState.EMPTY, 0),
                        List.of(empty.type(), empty.groupState(), empty.members().size()),
                        "describeConsumerGroups: empty once both left");
                same(each(15), committed(a, group, topic), "listConsumerGroupOffsets after the hand-over");

                // A new member resumes at the commits.
                member[7] = "member-c";
                KafkaConsumer<byte[], byte[]> cc = consumer(null, member);
                members.add(cc);
                cc.subscribe(List.of(topic));
                until("c to own every partition", TIMEOUT, () -> {
                    cc.poll(Duration.ofMillis(50));
                    return cc.assignment().equals(everything);
                });
                produceRound(topic, "third", 2);
                got = drain(members, 2 * PARTITIONS);
                same(round("third", 15, 2), got.get(0), "a new member resumes at the committed offsets");
                cc.close();
                members.remove(cc);

                get(a.deleteConsumerGroups(List.of(group)).all());
                boolean listed = get(a.listGroups().all()).stream().anyMatch(l -> l.groupId().equals(group));
                same(false, listed, "deleteConsumerGroups: the group is no longer listed");
                same(Map.of(), committed(a, group, topic), "deleteConsumerGroups: its offsets are gone");
            } finally {
                for (KafkaConsumer<byte[], byte[]> m : members) m.close(CloseOptions.timeout(Duration.ZERO));
            }
        }
    }

    // ---------------------------------------------------------------- consumer protocol

    /** What a member's rebalance listener was told: the partitions it holds,
     * and each change ("+[..]" assigned, "-[..]" revoked, "![..]" lost). */
    static final class Listener implements ConsumerRebalanceListener {
        final Set<Integer> held = new TreeSet<>();
        final List<String> changes = new ArrayList<>();

        static Set<Integer> nums(Collection<TopicPartition> ps) {
            return ps.stream().map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> ps) {
            if (!ps.isEmpty()) changes.add("+" + nums(ps));
            held.addAll(nums(ps));
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> ps) {
            if (!ps.isEmpty()) changes.add("-" + nums(ps));
            held.removeAll(nums(ps));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> ps) {
            changes.add("!" + nums(ps));
            held.removeAll(nums(ps));
        }

        /** Whether every change from the `from`-th on starts with `sign`. */
        boolean onlySince(int from, String sign) {
            return changes.subList(from, changes.size()).stream().allMatch(c -> c.startsWith(sign));
        }
    }

    /** Whether the listeners' partitions are disjoint, each non-empty, and
     * cover all PARTITIONS. */
    static boolean split(List<Listener> ls) {
        Set<Integer> all = new TreeSet<>();
        int n = 0;
        for (Listener l : ls) {
            if (l.held.isEmpty()) return false;
            all.addAll(l.held);
            n += l.held.size();
        }
        return n == PARTITIONS && all.size() == PARTITIONS;
    }

    static Map<String, List<Set<Integer>>> describedMembers(ConsumerGroupDescription d) {
        Map<String, List<Set<Integer>>> out = new TreeMap<>();
        for (MemberDescription m : d.members()) {
            out.put(m.clientId(), List.of(Listener.nums(m.assignment().topicPartitions()),
                    m.targetAssignment().map(t -> Listener.nums(t.topicPartitions())).orElse(Set.of())));
        }
        return out;
    }

    static Map<String, GroupType> listed(Admin a, String group, GroupType... types) throws Exception {
        ListGroupsOptions o = ListGroupsOptions.forConsumerGroups();
        if (types.length > 0) o = o.withTypes(Set.of(types));
        Map<String, GroupType> out = new TreeMap<>();
        for (GroupListing l : get(a.listGroups(o).all())) {
            if (l.groupId().startsWith(group)) out.put(l.groupId(), l.type().orElse(null));
        }
        return out;
    }

    /**
     * KIP-848 (group.protocol=consumer, the broker's assignor): a member
     * alone owns every partition; a second one joins and they split the
     * partitions, the first only giving some up (incremental revocation);
     * the group admin calls (ConsumerGroupDescribe, ListGroups by type); the
     * new member reads its partitions from the first one's commits; after
     * both commit, one leaves and the other only gains its partitions and
     * reads them from its commits.
     */
    static void consumerProtocol() throws Exception {
        String topic = arg.get("prefix") + "-topic", group = arg.get("prefix") + "-group";
        String[] member = {"group.id", group, "group.protocol", "consumer", "client.id", ""};
        try (Admin a = admin(null)) {
            createTopic(a, topic, PARTITIONS);
            // A classic group beside it, for the type filter.
            try (KafkaConsumer<byte[], byte[]> classic = consumer(null, "group.id", group + "-classic")) {
                classic.subscribe(List.of(topic));
                until("the classic member's assignment", TIMEOUT, () -> {
                    classic.poll(Duration.ofMillis(50));
                    return !classic.assignment().isEmpty();
                });
                classic.commitSync(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(0)));
            }
            member[5] = "member-a";
            KafkaConsumer<byte[], byte[]> ca = consumer(null, member);
            member[5] = "member-b";
            KafkaConsumer<byte[], byte[]> cb = consumer(null, member);
            List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>(List.of(ca));
            Listener la = new Listener(), lb = new Listener();
            try {
                ca.subscribe(List.of(topic), la);
                until("a to own every partition", TIMEOUT, () -> {
                    ca.poll(Duration.ofMillis(50));
                    return la.held.size() == PARTITIONS;
                });
                same(List.of("+[0, 1, 2, 3]"), la.changes, "a alone is assigned every partition");
                produceRound(topic, "first", 10);
                same(round("first", 0, 10), drain(members, 10 * PARTITIONS).get(0), "a reads round 1");
                ca.commitSync();

                // b joins: a gives partitions up and keeps the rest.
                int markA = la.changes.size();
                members.add(cb);
                cb.subscribe(List.of(topic), lb);
                until("a and b to split the partitions", TIMEOUT, () -> {
                    ca.poll(Duration.ofMillis(50));
                    cb.poll(Duration.ofMillis(50));
                    return split(List.of(la, lb));
                });
                same(List.of(2, 2), List.of(la.held.size(), lb.held.size()), "two partitions each");
                check(la.onlySince(markA, "-") && lb.onlySince(0, "+"),
                        "b joining: a is only revoked partitions, b only assigned", la.changes + " " + lb.changes);

                ConsumerGroupDescription d = get(a.describeConsumerGroups(List.of(group)).all()).get(group);
                same(List.of(GroupType.CONSUMER, GroupState.STABLE, "uniform"),
                        List.of(d.type(), d.groupState(), d.partitionAssignor()),
                        "describeConsumerGroups: a consumer group, stable, the uniform assignor");
                same(Map.of("member-a", List.of(la.held, la.held), "member-b", List.of(lb.held, lb.held)),
                        describedMembers(d), "describeConsumerGroups: each member's assignment and target");
                same(get(a.describeCluster().controller()).id(), d.coordinator().id(),
                        "describeConsumerGroups: the coordinator");
                same(Map.of(group, GroupType.CONSUMER, group + "-classic", GroupType.CLASSIC), listed(a, group),
                        "listConsumerGroups: both groups with their types");
                same(Map.of(group, GroupType.CONSUMER), listed(a, group, GroupType.CONSUMER),
                        "listConsumerGroups: only the consumer group with the CONSUMER filter");
                same(Map.of(group + "-classic", GroupType.CLASSIC), listed(a, group, GroupType.CLASSIC),
                        "listConsumerGroups: only the classic group with the CLASSIC filter");

                // Round 2: b starts its partitions at a's commits.
                produceRound(topic, "second", 5);
                List<Map<Integer, List<String>>> got = drain(members, 5 * PARTITIONS);
                same(List.of(la.held, lb.held), List.of(got.get(0).keySet(), got.get(1).keySet()),
                        "each member reads only its own partitions");
                Map<Integer, List<String>> merged = new TreeMap<>(got.get(0));
                merged.putAll(got.get(1));
                same(round("second", 10, 5), merged, "round 2: every record once, b from a's commits");
                ca.commitSync();
                cb.commitSync();
                same(each(15), committed(a, group, topic), "listConsumerGroupOffsets after both commit");
                Map<Integer, Long> seen = new TreeMap<>();
                cb.committed(new HashSet<>(partitions(topic, PARTITIONS)))
                        .forEach((tp, o) -> seen.put(tp.partition(), o.offset()));
                same(each(15), seen, "committed() from a member");

                // b leaves: a only gains its partitions and reads them from b's commits.
                markA = la.changes.size();
                cb.close();
                members.remove(cb);
                until("a to own every partition again", TIMEOUT, () -> {
                    ca.poll(Duration.ofMillis(50));
                    return la.held.size() == PARTITIONS;
                });
                check(la.onlySince(markA, "+"), "b leaving: a is only assigned partitions", la.changes);
                produceRound(topic, "third", 2);
                same(round("third", 15, 2), drain(members, 2 * PARTITIONS).get(0),
                        "round 3: a reads b's partitions from b's commits");
                ca.commitSync();
                ca.close();
                members.remove(ca);
                check(la.changes.stream().noneMatch(c -> c.startsWith("!")) && lb.changes.stream()
                        .noneMatch(c -> c.startsWith("!")), "no partition was lost", la.changes + " " + lb.changes);

                ConsumerGroupDescription empty = get(a.describeConsumerGroups(List.of(group)).all()).get(group);
                same(List.of(GroupType.CONSUMER, GroupState.EMPTY, 0),
                        List.of(empty.type(), empty.groupState(), empty.members().size()),
                        "describeConsumerGroups: empty once both left");
                same(each(17), committed(a, group, topic), "listConsumerGroupOffsets at the end");
            } finally {
                for (KafkaConsumer<byte[], byte[]> m : members) m.close(CloseOptions.timeout(Duration.ZERO));
            }
        }
    }

    // ---------------------------------------------------------------- transactions

    static void transactions() throws Exception {
        String topic = arg.get("prefix") + "-topic", txnId = arg.get("prefix") + "-txn";
        List<TopicPartition> tps = partitions(topic, 2);
        try (Admin a = admin(null);
             KafkaProducer<byte[], byte[]> p = producer(null, "transactional.id", txnId,
                     "transaction.timeout.ms", "60000", "linger.ms", "5")) {
            createTopic(a, topic, 2);
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 50; i++) p.send(new ProducerRecord<>(topic, i % 2, null, bytes("committed-" + i)));
            p.commitTransaction();

            // An open transaction, its records flushed: what the admin sees.
            p.beginTransaction();
            for (int i = 0; i < 20; i++) p.send(new ProducerRecord<>(topic, i % 2, null, bytes("aborted-" + i)));
            p.flush();
            Map<String, TransactionState> listed = new TreeMap<>();
            for (TransactionListing l : get(a.listTransactions().all())) listed.put(l.transactionalId(), l.state());
            same(TransactionState.ONGOING, listed.get(txnId), "listTransactions: ongoing");
            Set<String> ongoing = get(a.listTransactions(new ListTransactionsOptions()
                    .filterStates(List.of(TransactionState.ONGOING))).all()).stream()
                    .map(TransactionListing::transactionalId).collect(Collectors.toSet());
            check(ongoing.contains(txnId), "listTransactions filtered by state ONGOING", ongoing);
            TransactionDescription t = get(a.describeTransactions(List.of(txnId)).all()).get(txnId);
            same(List.of(TransactionState.ONGOING, new HashSet<>(tps), 60000L, true),
                    List.of(t.state(), t.topicPartitions(), t.transactionTimeoutMs(),
                            t.transactionStartTimeMs().isPresent()),
                    "describeTransactions: ongoing, both partitions, its timeout, a start time");
            var producers = get(a.describeProducers(tps).all());
            List<String> states = new ArrayList<>();
            for (TopicPartition tp : tps) {
                for (ProducerState s : producers.get(tp).activeProducers()) {
                    states.add(tp.partition() + ": pid " + (s.producerId() == t.producerId()) + " epoch "
                            + (s.producerEpoch() == t.producerEpoch()) + " last sequence " + s.lastSequence()
                            + " txn start " + s.currentTransactionStartOffset());
                }
            }
            // 25 committed records and their marker (offset 25) before it.
            same(List.of("0: pid true epoch true last sequence 34 txn start OptionalLong[26]",
                            "1: pid true epoch true last sequence 34 txn start OptionalLong[26]"),
                    states, "describeProducers: the transaction's producer and first offset");
            p.abortTransaction();
            until("the abort to complete", TIMEOUT, () -> state(a, txnId) == TransactionState.COMPLETE_ABORT);
            check(true, "describeTransactions: aborted", null);
            List<OptionalLong> starts = new ArrayList<>();
            get(a.describeProducers(tps).all()).forEach((tp, s) ->
                    s.activeProducers().forEach(ps -> starts.add(ps.currentTransactionStartOffset())));
            same(List.of(OptionalLong.empty(), OptionalLong.empty()), starts,
                    "describeProducers: no open transaction after the abort");

            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, null, bytes("committed-last")));
            p.commitTransaction();
            // EndTxn is answered once PrepareCommit is durable; the markers
            // follow (as on Kafka).
            until("the transaction to complete", TIMEOUT, () -> state(a, txnId) == TransactionState.COMPLETE_COMMIT);
            check(true, "describeTransactions: committed", null);
        }
        Map<Integer, List<String>> committed = new TreeMap<>(), aborted = new TreeMap<>();
        for (int part = 0; part < 2; part++) {
            final int q = part;
            committed.put(q, new ArrayList<>(IntStream.range(0, 50).filter(i -> i % 2 == q)
                    .mapToObj(i -> "committed-" + i).toList()));
            aborted.put(q, IntStream.range(0, 20).filter(i -> i % 2 == q).mapToObj(i -> "aborted-" + i).toList());
        }
        Map<Integer, List<String>> all = new TreeMap<>();
        for (int q = 0; q < 2; q++) {
            List<String> vs = new ArrayList<>(committed.get(q));
            vs.addAll(aborted.get(q));
            all.put(q, vs);
        }
        committed.get(0).add("committed-last");
        all.get(0).add("committed-last");
        same(committed, values(readAll(null, topic, 2, "read_committed")),
                "read_committed: exactly the committed records, in order");
        same(all, values(readAll(null, topic, 2, "read_uncommitted")),
                "read_uncommitted: all 71 records");
    }

    static TransactionState state(Admin a, String txnId) {
        try {
            return get(a.describeTransactions(List.of(txnId)).all()).get(txnId).state();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    /**
     * Zombie fencing: each initTransactions with the transactional id fences
     * the producer that had it before and aborts its open transaction.
     * The fenced producer's AddPartitionsToTxn, EndTxn and commit fail with
     * ProducerFencedException; its bare Produce (a partition already in its
     * transaction) with INVALID_PRODUCER_EPOCH, as Kafka answers Produce on
     * every version (KAFKA-10687), and none of its late records is written.
     */
    static void fencing() throws Exception {
        String topic = arg.get("prefix") + "-topic", txnId = arg.get("prefix") + "-txn";
        try (Admin a = admin(null)) {
            createTopic(a, topic, 2);
        }
        List<KafkaProducer<byte[], byte[]>> open = new ArrayList<>();
        try {
            KafkaProducer<byte[], byte[]> first = producer(null, "transactional.id", txnId);
            open.add(first);
            first.initTransactions();
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, null, bytes("first-0"))).get();

            KafkaProducer<byte[], byte[]> second = producer(null, "transactional.id", txnId);
            open.add(second);
            second.initTransactions();  // fences `first`, aborts its transaction
            raises(ProducerFencedException.class, "the fenced producer's send to a new partition",
                    () -> first.send(new ProducerRecord<>(topic, 1, null, bytes("first-late"))).get());
            raises(ProducerFencedException.class, "the fenced producer's commit", first::commitTransaction);

            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, null, bytes("second-0"))).get();
            KafkaProducer<byte[], byte[]> third = producer(null, "transactional.id", txnId);
            open.add(third);
            third.initTransactions();  // fences `second`, aborts its transaction
            raises(InvalidProducerEpochException.class, "the fenced producer's bare Produce: INVALID_PRODUCER_EPOCH",
                    () -> second.send(new ProducerRecord<>(topic, 0, null, bytes("second-late"))).get());
            raises(ProducerFencedException.class, "the fenced producer's abort", second::abortTransaction);

            third.beginTransaction();
            third.send(new ProducerRecord<>(topic, 0, null, bytes("third-0")));
            third.commitTransaction();
        } finally {
            for (KafkaProducer<byte[], byte[]> p : open) p.close(Duration.ZERO);
        }
        same(Map.of(0, List.of("third-0"), 1, List.of()), values(readAll(null, topic, 2, "read_committed")),
                "read_committed: only the last producer's record");
        same(Map.of(0, List.of("first-0", "second-0", "third-0"), 1, List.of()),
                values(readAll(null, topic, 2, "read_uncommitted")),
                "read_uncommitted: the fenced producers' aborted records, never a late one");
    }

    // ---------------------------------------------------------------- copier

    /** Creates `in` and `out` and writes n records k<i>/v<i> to `in`,
     * record i to partition i % PARTITIONS. */
    static void seed() throws Exception {
        int n = Integer.parseInt(arg.get("n"));
        try (Admin a = admin(null)) {
            get(a.createTopics(List.of(new NewTopic(arg.get("in"), PARTITIONS, (short) 1),
                    new NewTopic(arg.get("out"), PARTITIONS, (short) 1))).all());
        }
        try (KafkaProducer<byte[], byte[]> p = producer(null, "acks", "all", "linger.ms", "5")) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                acks.add(p.send(new ProducerRecord<>(arg.get("in"), i % PARTITIONS, bytes("k" + i), bytes("v" + i))));
            }
            for (Future<RecordMetadata> f : acks) f.get();
        }
        log("seeded " + n);
    }

    /**
     * Reads `in` as a member of `group` (read_committed) and copies each
     * record to the same partition of `out` as "copy:VALUE", one transaction
     * per poll, with the consumed offsets sent in the same transaction
     * (sendOffsetsToTransaction with the consumer's group metadata: KIP-447).
     * In each transaction it prints "open TOTAL" once its copies are flushed,
     * then "offsets TOTAL" once the offsets are sent, and waits pause_ms after
     * each (the test SIGKILLs it there), then "committed TOTAL". It exits 0
     * ("caught up") once it owns every partition of `in` and has committed
     * up to each one's end.
     *
     * protocol=consumer makes it a KIP-848 member (group.protocol=consumer:
     * the broker sets its session and heartbeats). leave_after=N: in the
     * transaction after its N-th commit, once the offsets are sent, it closes
     * its consumer (leaving the group) and halts ("left TOTAL") with that
     * transaction open, which its successor's initTransactions aborts.
     */
    static void copier() throws Exception {
        String in = arg.get("in"), out = arg.get("out");
        long pause = Long.parseLong(arg.get("pause_ms"));
        int leaveAfter = Integer.parseInt(arg.getOrDefault("leave_after", "-1"));
        List<TopicPartition> inputs = partitions(in, PARTITIONS);
        String[] timing = protocolIsConsumer()
                ? new String[] {"group.protocol", "consumer"}
                : new String[] {"session.timeout.ms", "2000", "heartbeat.interval.ms", "300"};
        List<String> conf = new ArrayList<>(List.of("group.id", arg.get("group"),
                "isolation.level", "read_committed", "max.poll.records", arg.get("batch")));
        conf.addAll(List.of(timing));
        try (KafkaProducer<byte[], byte[]> p = producer(null, "transactional.id", arg.get("txn"),
                "transaction.timeout.ms", "20000", "linger.ms", "2");
             KafkaConsumer<byte[], byte[]> c = consumer(null, conf.toArray(new String[0]))) {
            // Fences a dead predecessor and has its open transaction aborted
            // before this one reads the group's offsets.
            p.initTransactions();
            log("producer ready");
            c.subscribe(List.of(in));
            long copied = 0;
            int commits = 0;
            long deadline = System.nanoTime() + TIMEOUT.multipliedBy(4).toNanos();
            while (System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    if (c.assignment().equals(new HashSet<>(inputs))) {
                        Map<TopicPartition, Long> end = c.endOffsets(inputs);
                        if (inputs.stream().allMatch(tp -> c.position(tp) >= end.get(tp))) {
                            System.out.println("caught up " + copied);
                            return;
                        }
                    }
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    p.send(new ProducerRecord<>(out, r.partition(), r.key(), bytes("copy:" + str(r.value()))));
                    offsets.put(new TopicPartition(in, r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    copied++;
                }
                p.flush();
                System.out.println("open " + copied);
                Thread.sleep(pause);
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                System.out.println("offsets " + copied);
                if (commits == leaveAfter) {
                    c.close();
                    System.out.println("left " + copied);
                    System.out.flush();
                    Runtime.getRuntime().halt(3);
                }
                Thread.sleep(pause);
                p.commitTransaction();
                commits++;
                System.out.println("committed " + copied);
            }
            throw new Failure("did not catch up in " + TIMEOUT.multipliedBy(4));
        }
    }

    /** Prints "record ISOLATION PARTITION OFFSET VALUE" for every record of
     * `topic` as each isolation level reads it, then "committed PARTITION
     * OFFSET" for `group`'s offsets on `in`. */
    static void dump() throws Exception {
        for (String isolation : List.of("read_committed", "read_uncommitted")) {
            readAll(null, arg.get("topic"), PARTITIONS, isolation).forEach((p, rs) -> rs.forEach(r ->
                    System.out.println("record " + isolation + " " + p + " " + r.offset() + " " + str(r.value()))));
        }
        try (Admin a = admin(null)) {
            committed(a, arg.get("group"), arg.get("in")).forEach((p, o) ->
                    System.out.println("committed " + p + " " + o));
        }
    }

    // ---------------------------------------------------------------- security

    static AclBinding allow(String user, ResourceType type, String name, AclOperation op) {
        return new AclBinding(new ResourcePattern(type, name, PatternType.LITERAL),
                new AccessControlEntry("User:" + user, "*", op, AclPermissionType.ALLOW));
    }

    static Set<String> describeAcls(Admin a, String user) throws Exception {
        AclBindingFilter filter = new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter("User:" + user, null, AclOperation.ANY, AclPermissionType.ANY));
        return get(a.describeAcls(filter).values()).stream().map(KaasJava::acl).collect(Collectors.toCollection(TreeSet::new));
    }

    static String acl(AclBinding b) {
        return b.pattern().resourceType() + ":" + b.pattern().name() + ":" + b.pattern().patternType() + " "
                + b.entry().principal() + "@" + b.entry().host() + " " + b.entry().permissionType() + " "
                + b.entry().operation();
    }

    /** ACLs (create, describe, delete), KIP-554's SCRAM credentials, and
     * KIP-430's authorized operations, as the super user and as alice. */
    static void secureAdmin() throws Exception {
        String topic = arg.get("prefix") + "-topic", group = arg.get("prefix") + "-group";
        String carol = arg.get("new_user");
        try (Admin a = admin("admin")) {
            createTopic(a, topic, 2);
            List<AclBinding> alices = List.of(
                    allow("alice", ResourceType.TOPIC, topic, AclOperation.READ),
                    allow("alice", ResourceType.TOPIC, topic, AclOperation.WRITE),
                    allow("alice", ResourceType.GROUP, group, AclOperation.READ),
                    allow("alice", ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE),
                    allow("alice", ResourceType.TOPIC, topic + "-gone", AclOperation.ALTER));
            get(a.createAcls(alices).all());
            same(alices.stream().map(KaasJava::acl).collect(Collectors.toCollection(TreeSet::new)),
                    describeAcls(a, "alice"), "describeAcls: the ACLs created");
            AclBindingFilter gone = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic + "-gone", PatternType.LITERAL),
                    AccessControlEntryFilter.ANY);
            Collection<AclBinding> deleted = get(a.deleteAcls(List.of(gone)).all());
            same(List.of(acl(alices.get(4))), deleted.stream().map(KaasJava::acl).toList(),
                    "deleteAcls: answers the binding it deleted");
            same(alices.subList(0, 4).stream().map(KaasJava::acl).collect(Collectors.toCollection(TreeSet::new)),
                    describeAcls(a, "alice"), "describeAcls: the deleted one is gone");

            // The super user may do everything; alice what her ACLs say.
            same(Set.of(AclOperation.ALTER, AclOperation.ALTER_CONFIGS, AclOperation.CLUSTER_ACTION,
                            AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                            AclOperation.IDEMPOTENT_WRITE),
                    get(a.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true))
                            .authorizedOperations()), "describeCluster: the super user's operations");
            try (Admin alice = admin("alice")) {
                same(Set.of(AclOperation.DESCRIBE),
                        get(alice.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true))
                                .authorizedOperations()), "describeCluster: alice's operations");
                same(Set.of(AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE),
                        get(alice.describeTopics(List.of(topic),
                                new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames())
                                .get(topic).authorizedOperations(), "describeTopics: alice's operations");
            }

            // SCRAM credentials: the users set before the start, then a new one.
            Map<String, UserScramCredentialsDescription> users = get(a.describeUserScramCredentials().all());
            Map<String, String> mechanisms = new TreeMap<>();
            users.forEach((u, d) -> mechanisms.put(u, d.credentialInfos().stream()
                    .map(i -> i.mechanism().mechanismName()).sorted().collect(Collectors.joining(","))));
            same(Map.of("admin", "SCRAM-SHA-512", "alice", "SCRAM-SHA-512", "sam", "SCRAM-SHA-256",
                    "mallory", "SCRAM-SHA-512"), mechanisms, "describeUserScramCredentials: every user");

            // One change per user and request: a second one for the same user,
            // whatever its mechanism, is DUPLICATE_RESOURCE (as Kafka 3.7's
            // KRaft controller answers; ZooKeeper mode keyed it by mechanism).
            String carolPassword = arg.get("user." + carol).split(":", 2)[1];
            raises(DuplicateResourceException.class, "alterUserScramCredentials: one user twice in a request",
                    () -> get(a.alterUserScramCredentials(List.of(
                            new UserScramCredentialUpsertion(carol,
                                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), carolPassword),
                            new UserScramCredentialUpsertion(carol,
                                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "another")))
                            .all()));
            same(Map.of(), get(a.describeUserScramCredentials().all()).entrySet().stream()
                            .filter(e -> e.getKey().equals(carol))
                            .collect(Collectors.toMap(Map.Entry::getKey, Map.Entry::getValue)),
                    "a refused request adds no credential");
            get(a.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(carol,
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), carolPassword))).all());
            get(a.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(carol,
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "another-password"))).all());
            UserScramCredentialsDescription cd = get(a.describeUserScramCredentials(List.of(carol)).description(carol));
            same(List.of("SCRAM-SHA-256 8192", "SCRAM-SHA-512 4096"), cd.credentialInfos().stream()
                            .map(i -> i.mechanism().mechanismName() + " " + i.iterations()).sorted().toList(),
                    "alterUserScramCredentials: the new user's credentials");
            try (Admin c = admin(carol)) {
                same(get(a.describeCluster().clusterId()), get(c.describeCluster().clusterId()),
                        "the new user logs in");
            }
            for (ScramMechanism m : List.of(ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)) {
                get(a.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(carol, m))).all());
            }
            raises(ResourceNotFoundException.class, "describeUserScramCredentials: a deleted user is not found",
                    () -> get(a.describeUserScramCredentials(List.of(carol)).description(carol)));
            try (Admin c = admin(carol)) {
                raises(SaslAuthenticationException.class, "the deleted user cannot log in",
                        () -> get(c.describeCluster().clusterId()));
            }
        }
    }

    /** As `user` (whose credential has the mechanism the arguments give):
     * idempotent produce, a transaction, and a read_committed group member
     * reading it all and committing. */
    static void secureRoundTrip(Admin a, String user) throws Exception {
        String topic = arg.get("prefix") + "-" + user, group = topic + "-group", txn = topic + "-txn";
        createTopic(a, topic, 2);
        get(a.createAcls(List.of(allow(user, ResourceType.TOPIC, topic, AclOperation.WRITE),
                allow(user, ResourceType.TOPIC, topic, AclOperation.READ),
                allow(user, ResourceType.GROUP, group, AclOperation.READ),
                allow(user, ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE))).all());
        Set<String> want = new TreeSet<>();
        try (KafkaProducer<byte[], byte[]> p = producer(user, "enable.idempotence", "true", "acks", "all")) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                acks.add(p.send(new ProducerRecord<>(topic, i % 2, null, bytes("v" + i))));
                want.add("v" + i);
            }
            for (Future<RecordMetadata> f : acks) f.get();
        }
        try (KafkaProducer<byte[], byte[]> t = producer(user, "transactional.id", txn)) {
            t.initTransactions();
            t.beginTransaction();
            for (int i = 0; i < 5; i++) {
                t.send(new ProducerRecord<>(topic, i % 2, null, bytes("txn" + i)));
                want.add("txn" + i);
            }
            t.commitTransaction();
        }
        Set<String> got = new TreeSet<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(user, member("group.id", group,
                "isolation.level", "read_committed"))) {
            c.subscribe(List.of(topic));
            until(user + "'s records", TIMEOUT, () -> {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) got.add(str(r.value()));
                return got.size() >= want.size();
            });
            c.commitSync();
            long sum = 0;
            for (OffsetAndMetadata o : c.committed(new HashSet<>(partitions(topic, 2))).values()) sum += o.offset();
            // Past every record; past a partition's commit marker too if the
            // consumer has fetched it.
            check(sum >= 15 && sum <= 17, user + ": committed offsets past its records", sum);
        }
        same(want, got, user + ": read_committed in a group, every record once");
    }

    static void secureClients() throws Exception {
        String topic = arg.get("prefix") + "-refused", group = arg.get("prefix") + "-refused-group";
        try (Admin a = admin("admin")) {
            secureRoundTrip(a, "alice");  // SCRAM-SHA-512
            secureRoundTrip(a, "sam");    // SCRAM-SHA-256

            // A user with DESCRIBE only (so it gets past Metadata and
            // FindCoordinator) is refused what it is not granted.
            createTopic(a, topic, 1);
            get(a.createAcls(List.of(allow("mallory", ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
                    allow("mallory", ResourceType.GROUP, group, AclOperation.DESCRIBE))).all());
        }
        try (KafkaProducer<byte[], byte[]> p = producer("mallory", "enable.idempotence", "false",
                "max.block.ms", "10000")) {
            raises(TopicAuthorizationException.class, "mallory: produce without WRITE",
                    () -> p.send(new ProducerRecord<>(topic, 0, null, bytes("x"))).get());
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer("mallory", member("group.id", group))) {
            c.subscribe(List.of(topic));
            raises(GroupAuthorizationException.class, "mallory: joining a group without READ",
                    () -> c.poll(TIMEOUT));
        }
        try (KafkaProducer<byte[], byte[]> t = producer("mallory", "transactional.id", group, "max.block.ms", "10000")) {
            raises(TransactionalIdAuthorizationException.class, "mallory: a transactional id without WRITE",
                    t::initTransactions);
        }
        // A wrong password.
        Properties wrong = base("alice", "not-her-password");
        try (Admin a = Admin.create(wrong)) {
            raises(SaslAuthenticationException.class, "alice with a wrong password: authentication fails",
                    () -> get(a.describeCluster().clusterId()));
        }
        wrong = base("sam", "not-his-password");
        wrong.put("key.serializer", ByteArraySerializer.class.getName());
        wrong.put("value.serializer", ByteArraySerializer.class.getName());
        wrong.put("max.block.ms", "10000");
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(wrong)) {
            raises(SaslAuthenticationException.class, "sam (SCRAM-SHA-256) with a wrong password: produce fails",
                    () -> p.send(new ProducerRecord<>(topic, 0, null, bytes("x"))).get());
        }
    }

    // ---------------------------------------------------------------- quotas

    /** Client quotas: the admin sets producer_byte_rate for user `quser`
     * with alterClientQuotas and reads it back with describeClientQuotas
     * (strict filter on the user), then `quser` produces as fast as it can
     * for `seconds`: the producer's produce-throttle-time-max must show the
     * broker's throttle, and the acknowledged rate is printed (the Python
     * side compares it and the broker's own measurement with the quota). */
    static void quota() throws Exception {
        String quser = arg.get("quser");
        double rate = Double.parseDouble(arg.get("rate"));
        long seconds = Long.parseLong(arg.get("seconds"));
        String topic = arg.get("prefix") + "-quota";
        org.apache.kafka.common.quota.ClientQuotaEntity entity =
                new org.apache.kafka.common.quota.ClientQuotaEntity(
                        Map.of(org.apache.kafka.common.quota.ClientQuotaEntity.USER, quser));
        try (Admin a = admin("admin")) {
            createTopic(a, topic, 1);
            get(a.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(
                    entity, List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op(
                            "producer_byte_rate", rate))))).all());
            check(true, "alterClientQuotas sets producer_byte_rate for " + quser, null);
            Map<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> got = get(
                    a.describeClientQuotas(org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(
                            List.of(org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity(
                                    org.apache.kafka.common.quota.ClientQuotaEntity.USER, quser))))
                            .entities());
            same(Map.of(entity, Map.of("producer_byte_rate", rate)), got,
                    "describeClientQuotas reads it back");
            // Unknown keys are refused with Kafka's INVALID_REQUEST.
            raises(org.apache.kafka.common.errors.InvalidRequestException.class,
                    "an unknown quota key is refused", () -> get(a.alterClientQuotas(List.of(
                            new org.apache.kafka.common.quota.ClientQuotaAlteration(entity, List.of(
                                    new org.apache.kafka.common.quota.ClientQuotaAlteration.Op(
                                            "bogus_rate", 1.0))))).all()));
        }
        byte[] value = new byte[1000];
        long[] acked = {0};
        try (KafkaProducer<byte[], byte[]> p = producer(quser, "acks", "1", "linger.ms", "5",
                "batch.size", "16384", "buffer.memory", "262144", "enable.idempotence", "false")) {
            long start = System.nanoTime();
            long end = start + Duration.ofSeconds(seconds).toNanos();
            while (System.nanoTime() < end) {
                p.send(new ProducerRecord<>(topic, value), (md, e) -> {
                    if (e == null) {
                        synchronized (acked) {
                            acked[0] += value.length;
                        }
                    }
                });
            }
            p.flush();
            double elapsed = (System.nanoTime() - start) / 1e9;
            double throttleMax = 0;
            double throttleAvg = 0;
            for (var m : p.metrics().entrySet()) {
                if (!m.getKey().group().equals("producer-metrics")) continue;
                Object v = m.getValue().metricValue();
                if (!(v instanceof Double d) || d.isNaN()) continue;
                if (m.getKey().name().equals("produce-throttle-time-max")) throttleMax = d;
                if (m.getKey().name().equals("produce-throttle-time-avg")) throttleAvg = d;
            }
            log("throttle max " + throttleMax + " ms, avg " + throttleAvg + " ms");
            check(throttleMax > 0, "produce-throttle-time-max shows the throttle", throttleMax);
            synchronized (acked) {
                System.out.println("RATE " + (acked[0] / elapsed));
            }
        }
    }
}
