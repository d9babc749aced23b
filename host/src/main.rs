//! The `kaas` command line: `broker`, `conformance`, `policy inspect|load`
//! and `txn describe`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

mod cli;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use kaas::conformance;
use kaas::log::FsyncMode;
use kaas::policy::{ArtifactCache, PolicyRuntime, SandboxLimits};

#[derive(Debug, Parser)]
#[command(
    name = "kaas",
    version,
    about = "Kafka-wire-compatible broker with a programmable transaction coordinator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the broker.
    Broker(Box<BrokerArgs>),
    /// Run the conformance vectors against a policy component, compare two
    /// policies (--against), or run the wire probes against a live broker
    /// (--bootstrap).
    Conformance(ConformanceArgs),
    /// Test-only (built with the fault-injection feature): writes one
    /// transaction entry through the real state store before a broker
    /// starts, as a previous run would have left it.
    #[cfg(feature = "fault-injection")]
    TxnSeed(TxnSeedArgs),
    /// Manage SCRAM users (SASL credentials).
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Work with policy components.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Look at transactions on a running broker.
    Txn {
        #[command(subcommand)]
        command: TxnCommand,
    },
}

#[derive(Debug, Subcommand)]
enum TxnCommand {
    /// Print a transactional id's state, producer id and epoch, timeout,
    /// partitions, the policy that decided its last transition and the
    /// policy deciding now.
    Describe {
        /// A broker of the cluster (HOST:PORT).
        #[arg(long)]
        bootstrap: String,
        /// The transactional.id.
        transactional_id: String,
    },
}

#[derive(Debug, clap::Args)]
struct ConformanceArgs {
    /// The policy component (.wasm).
    #[arg(long, required_unless_present = "bootstrap")]
    policy: Option<PathBuf>,
    /// Run the wire test kit (wirekit/) against a live broker at HOST:PORT
    /// instead of running vectors.
    #[arg(long, conflicts_with_all = ["policy", "suite", "against"])]
    bootstrap: Option<String>,
    /// With --bootstrap: run every probe against this broker too (Apache
    /// Kafka) and print the differences side by side; fails on one that
    /// --expect does not declare.
    #[arg(long, requires = "bootstrap")]
    against_bootstrap: Option<String>,
    /// With --against-bootstrap: the reference's major version (3 or 4),
    /// which selects the declarations that apply.
    #[arg(long, default_value = "4", requires = "against_bootstrap")]
    kafka_version: String,
    /// With --bootstrap: only the probes whose id or name starts with this
    /// (repeatable).
    #[arg(long, requires = "bootstrap")]
    probe: Vec<String>,
    /// With --bootstrap: print every probe's observations.
    #[arg(long, requires = "bootstrap")]
    show: bool,
    /// A directory of *.json vector files, or one such file; may be given
    /// more than once (the cases of all, ids unique). Default tests/conformance.
    #[arg(long)]
    suite: Vec<PathBuf>,
    /// The policy's declared differences (JSON: {"policy", "differences":
    /// [{"case", "step", expected fields, "reason"}]}): those steps must
    /// answer as declared instead of as the suite expects. With
    /// --against-bootstrap: kaas's declared differences from Apache Kafka
    /// (a file or a directory of them: compat/kafka/differences).
    #[arg(long, conflicts_with = "against")]
    expect: Option<PathBuf>,
    /// The differential report: run every case under --policy and this
    /// policy and list every step where they decide differently (exit 0
    /// when the report completed).
    #[arg(long, conflicts_with = "junit")]
    against: Option<PathBuf>,
    /// Also write a JUnit XML report here.
    #[arg(long)]
    junit: Option<PathBuf>,
}

#[cfg(feature = "fault-injection")]
#[derive(Debug, clap::Args)]
struct TxnSeedArgs {
    /// Data directory (the shared volume in cluster mode).
    #[arg(long)]
    data_dir: PathBuf,
    /// Write into the transactional id's cluster shard, not the single-node log.
    #[arg(long)]
    cluster: bool,
    #[arg(long)]
    transactional_id: String,
    #[arg(long)]
    producer_id: i64,
    #[arg(long)]
    epoch: i16,
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    last_epoch: i16,
    /// empty, complete-commit or complete-abort.
    #[arg(long, default_value = "complete-commit")]
    state: String,
}

#[derive(Debug, clap::Args)]
struct BrokerArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: String,
    /// Data directory.
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
    /// Transaction-coordinator policy component; default: the embedded
    /// apache37. SIGHUP re-reads it and swaps it in once it passes the
    /// smoke vectors (see docs/policies.md, "Hot swap").
    #[arg(long)]
    policy: Option<PathBuf>,
    /// transaction.max.timeout.ms: the longest transaction timeout a
    /// producer may ask for (InitProducerId with more is refused
    /// INVALID_TRANSACTION_TIMEOUT); the policy is configured with it.
    #[arg(long, default_value_t = kaas::txn::machine::DEFAULT_MAX_TIMEOUT_MS,
          value_parser = clap::value_parser!(i32).range(1..))]
    transaction_max_timeout_ms: i32,
    /// PREFIX=CLASS: transactional ids starting with PREFIX are of tenant
    /// class CLASS (0-255), which every policy decision about them carries
    /// (ABI 3.0's tenant-class; e.g. `capped` caps the transaction timeout
    /// per class). Repeatable; the longest matching prefix wins; an id no
    /// prefix matches is class 0.
    #[arg(long = "tenant-class", value_name = "PREFIX=CLASS")]
    tenant_classes: Vec<String>,
    /// Serve the admin endpoint (policy hot swap: `kaas policy load`) on
    /// this loopback address; off by default. A non-loopback address is
    /// refused.
    #[arg(long)]
    admin_listen: Option<String>,
    /// File whose first line is the bearer token every admin request must
    /// carry (recommended: without it any local process may swap the
    /// policy).
    #[arg(long, requires = "admin_listen")]
    admin_token_file: Option<PathBuf>,
    /// Partitions of auto-created topics.
    #[arg(long, default_value_t = 4)]
    default_partitions: i32,
    /// Replication factor of topics created without one (CreateTopics'
    /// -1, auto-created topics): Kafka's default.replication.factor. At
    /// most the number of live brokers.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i16).range(1..))]
    default_replication_factor: i16,
    /// Do not create unknown topics on Metadata requests.
    #[arg(long)]
    no_auto_create_topics: bool,
    /// When appends are made durable.
    #[arg(long, value_enum, default_value_t = FsyncMode::Always)]
    fsync: FsyncMode,
    /// Background sync period for --fsync interval.
    #[arg(long, default_value_t = 100)]
    fsync_interval_ms: u64,
    /// Serve Prometheus metrics on this address.
    #[arg(long)]
    metrics_listen: Option<String>,
    /// Largest request frame; larger ones close the connection.
    #[arg(long, default_value_t = 100 << 20)]
    max_request_bytes: usize,
    /// max.connections: most concurrent client connections. When it is
    /// reached, the connection idle or stalled longest is closed to make
    /// room (one with a request in flight only once it has made no progress
    /// for --request-timeout-ms). Kafka's default is 2147483647.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// socket.listen.backlog.size: connections the kernel queues on each
    /// client listener before the broker accepts them (capped by
    /// net.core.somaxconn); connects beyond it are retried by their clients
    /// after a second. Kafka's default.
    #[arg(long, default_value_t = kaas::server::bind::DEFAULT_LISTEN_BACKLOG)]
    socket_listen_backlog_size: u32,
    /// Host advertised in Metadata (default: the listen host).
    #[arg(long)]
    advertised_host: Option<String>,
    /// How often retention runs.
    #[arg(long, default_value_t = 30_000)]
    retention_check_ms: u64,
    /// A broker-level default of a topic config under Kafka's broker name,
    /// NAME=VALUE (repeatable), as kafka-server-start's --override takes
    /// it: log.retention.ms (or .minutes, .hours), log.retention.bytes,
    /// log.segment.bytes, log.roll.ms (.hours), log.cleanup.policy,
    /// message.max.bytes, log.cleaner.delete.retention.ms,
    /// log.cleaner.min.compaction.lag.ms, log.cleaner.max.compaction.lag.ms,
    /// log.cleaner.min.cleanable.ratio, log.message.timestamp.type,
    /// compression.type, min.insync.replicas, ... (docs/design.md, "Topic
    /// configs"). Topics that do not set the config themselves follow it;
    /// a cluster-wide dynamic default (AlterConfigs) takes precedence.
    #[arg(long = "override", value_name = "NAME=VALUE", value_parser = parse_override)]
    overrides: Vec<(String, String)>,
    /// log.cleaner.enable: compact the topics whose cleanup.policy
    /// includes compact.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    log_cleaner_enable: bool,
    /// log.cleaner.dedupe.buffer.size: bytes of the cleaner's offset map
    /// (24 per key).
    #[arg(long, default_value_t = 128 << 20)]
    log_cleaner_dedupe_buffer_size: u64,
    /// log.cleaner.io.max.bytes.per.second: the cleaner's read plus write
    /// rate (unbounded without it, as Kafka's default).
    #[arg(long)]
    log_cleaner_io_max_bytes_per_second: Option<f64>,
    /// log.cleaner.backoff.ms: the cleaner's pause when nothing is dirty
    /// enough.
    #[arg(long, default_value_t = 15_000)]
    log_cleaner_backoff_ms: u64,
    /// How often the transaction timeout reaper runs.
    #[arg(long, default_value_t = 10_000)]
    txn_reaper_interval_ms: u64,
    /// transactional.id.expiration.ms: a transactional id with no
    /// transaction and no change for this long is removed.
    #[arg(long, default_value_t = 604_800_000)]
    transactional_id_expiration_ms: i64,
    /// producer.id.expiration.ms: a producer id that has not written to a
    /// partition for this long (and has no open transaction there) loses
    /// its idempotence state there; its next batch is from an unknown
    /// producer.
    #[arg(long, default_value_t = 86_400_000)]
    producer_id_expiration_ms: i64,
    /// producer.id.expiration.check.interval.ms: how often producer state is
    /// checked for expiry.
    #[arg(long, default_value_t = 600_000)]
    producer_id_expiration_check_interval_ms: u64,
    /// With --fsync always: the shared write-ahead log is checkpointed
    /// (segments synced, old files deleted) once its data is this old, or
    /// at 64 MiB.
    #[arg(long, default_value_t = 10_000)]
    wal_checkpoint_interval_ms: u64,
    /// group.initial.rebalance.delay.ms: how long a new group waits for more
    /// members before its first rebalance.
    #[arg(long, default_value_t = 3_000)]
    group_initial_rebalance_delay_ms: u64,
    /// group.min.session.timeout.ms: the shortest session a member may ask for.
    #[arg(long, default_value_t = 6_000)]
    group_min_session_timeout_ms: u64,
    /// group.max.session.timeout.ms: the longest session a member may ask for.
    #[arg(long, default_value_t = 1_800_000)]
    group_max_session_timeout_ms: u64,
    /// group.consumer.session.timeout.ms: a consumer-protocol member (KIP-848)
    /// silent this long is fenced.
    #[arg(long, default_value_t = 45_000)]
    group_consumer_session_timeout_ms: u64,
    /// group.consumer.heartbeat.interval.ms: how often consumer-protocol
    /// members heartbeat (told in every answer); below the session timeout.
    #[arg(long, default_value_t = 5_000)]
    group_consumer_heartbeat_interval_ms: u64,
    /// group.consumer.max.size: most members of one consumer-protocol group.
    #[arg(long, default_value_t = i32::MAX as usize)]
    group_consumer_max_size: usize,
    /// group.consumer.assignors: the server-side assignors members may ask
    /// for, the first being the default (`uniform`, `range`).
    #[arg(long, value_delimiter = ',', default_value = "uniform,range")]
    group_consumer_assignors: Vec<String>,
    /// Log format on stderr: text (coloured only on a terminal) or one JSON
    /// object a line. The filter is RUST_LOG, else `warn,kaas=info`.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Most partitions on this broker (the max.broker.partitions of
    /// KIP-578, which Kafka does not have): creating a topic past it is
    /// refused with POLICY_VIOLATION, so is one whose files would not fit
    /// the open-file limit.
    #[arg(long, default_value_t = kaas::config::DEFAULT_MAX_PARTITIONS)]
    max_partitions: usize,
    /// Most segment files open at once, shared by every partition (kaas's
    /// own; Kafka has no such bound): a partition's files are opened when
    /// read or written and the least recently used are closed (synced
    /// first if written), so the partition count is not bounded by the
    /// open-file limit. Lowered at start to what that limit leaves after
    /// the --max-connections reserve.
    #[arg(long, default_value_t = kaas::log::open_files::DEFAULT_MAX_OPEN)]
    max_open_segment_files: usize,
    /// Most partitions one CreateTopics may ask for, summed over its
    /// topics; a request over it is refused whole with POLICY_VIOLATION, as
    /// Kafka's controller does (its fixed cap is 10,000).
    #[arg(long, default_value_t = kaas::config::DEFAULT_MAX_PARTITIONS_PER_REQUEST)]
    max_partitions_per_request: usize,
    /// Most unknown topics one Metadata request auto-creates; the others
    /// are answered LEADER_NOT_AVAILABLE (retriable) and created when the
    /// client asks again.
    #[arg(long, default_value_t = kaas::config::DEFAULT_MAX_AUTO_CREATED_TOPICS_PER_REQUEST)]
    max_auto_created_topics_per_request: usize,
    /// connections.max.idle.ms: a connection with no request in flight that
    /// has received and sent nothing for this long is closed.
    #[arg(long, default_value_t = 600_000)]
    connections_max_idle_ms: u64,
    /// A request frame that has started arriving must be complete, and each
    /// response written, within this long, or the connection is closed
    /// (Kafka's brokers bound neither; 30000 is the clients'
    /// request.timeout.ms). A request in flight longer than this no longer
    /// keeps its connection from being evicted at --max-connections.
    #[arg(long, default_value_t = 30_000)]
    request_timeout_ms: u64,
    /// queued.max.request.bytes: bytes of large request frames (over 64 KiB)
    /// the broker reads, decodes and dispatches at once; a frame waits for
    /// its share, and one larger than the whole budget closes the
    /// connection. Kafka's default is unbounded; ours fits two frames of
    /// the default --max-request-bytes.
    #[arg(long, default_value_t = 256 << 20)]
    queued_max_request_bytes: usize,
    /// fetch.max.bytes: most record bytes in one Fetch response, whatever
    /// the request's max_bytes (only the response's first batch may exceed
    /// it, so a consumer makes progress). At least 1024, as in Kafka.
    #[arg(long, default_value_t = kaas::config::DEFAULT_FETCH_MAX_BYTES)]
    fetch_max_bytes: usize,
    /// max.incremental.fetch.session.cache.slots: incremental fetch
    /// sessions kept (KIP-227); 0 turns them off.
    #[arg(long, default_value_t = kaas::fetch_sessions::DEFAULT_SLOTS)]
    max_incremental_fetch_session_cache_slots: usize,
    /// quota.window.num: samples a client quota's rate is measured over.
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u32).range(2..=1000))]
    quota_window_num: u32,
    /// quota.window.size.seconds: the length of one quota sample.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=3600))]
    quota_window_size_seconds: u32,
    /// Most client-quota entities measured at once (each is a few hundred
    /// bytes); the least recently used is dropped at the bound.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    quota_max_entities: u32,
    /// A client-quota entity idle this long is forgotten (Kafka: 3600).
    #[arg(long, default_value_t = 3600)]
    quota_entity_idle_seconds: u64,
    // Cluster mode:
    /// This broker's id (node.id): unique in the cluster.
    #[arg(long, default_value_t = 1)]
    node_id: i32,
    /// etcd endpoints (comma-separated, e.g. http://127.0.0.1:2379): runs
    /// the broker in cluster mode, with every broker on the same
    /// --data-dir. Without it: single-node mode, no etcd.
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// TTL of the broker's etcd lease (rounded up to whole seconds, at
    /// least 2 s): a dead broker's partitions move after about this long.
    #[arg(long, default_value_t = 5_000)]
    lease_ttl_ms: u64,
    /// Cluster id in Metadata, and the etcd key prefix (/kaas/<id>/).
    #[arg(long, default_value = "kaas-cluster")]
    cluster_id: String,
    /// Cluster mode: how often the peers' producer-fence files on the
    /// shared volume are read (the fence ring's backstop path).
    #[arg(long, default_value_t = 2_000)]
    fence_poll_ms: u64,
    /// Cluster mode: also push each producer-epoch bump to the peers
    /// through etcd (`--fence-push false`: the files only).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    fence_push: bool,
    // Security: listeners, TLS, SASL.
    /// A listener, NAME=PROTOCOL://HOST:PORT with PROTOCOL one of
    /// PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (repeatable). The first is
    /// the one other brokers use. Default: PLAINTEXT=PLAINTEXT://<--listen>.
    #[arg(long = "listener")]
    listeners: Vec<String>,
    /// PEM certificate chain of SSL and SASL_SSL listeners.
    #[arg(long)]
    ssl_cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of --ssl-cert.
    #[arg(long)]
    ssl_key: Option<PathBuf>,
    /// PEM CA certificates client certificates must chain to.
    #[arg(long)]
    ssl_client_ca: Option<PathBuf>,
    /// ssl.client.auth: ask for client certificates (requested) or insist
    /// (required). On an SSL listener a verified certificate's subject is
    /// the principal (User:CN=...,O=...).
    #[arg(long, value_enum, default_value_t = kaas::security::tls::ClientAuth::None)]
    ssl_client_auth: kaas::security::tls::ClientAuth,
    /// sasl.enabled.mechanisms.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    )]
    sasl_mechanisms: Vec<String>,
    /// connections.max.reauth.ms (KIP-368): a SASL session lasts this long
    /// and the client re-authenticates; 0: sessions do not expire.
    #[arg(long, default_value_t = 0)]
    connections_max_reauth_ms: u64,
    /// connection.failed.authentication.delay.ms: a failed authentication is
    /// answered, and its connection closed, this much later.
    #[arg(long, default_value_t = 100)]
    connection_failed_authentication_delay_ms: u64,
    /// sasl.server.max.receive.size: the largest frame before a SASL
    /// connection has authenticated.
    #[arg(long, default_value_t = 524_288)]
    sasl_server_max_receive_size: usize,
    /// A SASL connection must authenticate, and a TLS connection finish its
    /// handshake, within this long of connecting.
    #[arg(long, default_value_t = 10_000)]
    authentication_timeout_ms: u64,
    /// Cluster mode with a SASL_PLAINTEXT first listener: the user this
    /// broker logs in as (SASL PLAIN) on the other brokers; it must be a
    /// --super-user. Its password is read from --inter-broker-password-file.
    #[arg(long, requires = "inter_broker_password_file")]
    inter_broker_user: Option<String>,
    /// File holding the inter-broker user's password (first line).
    #[arg(long)]
    inter_broker_password_file: Option<PathBuf>,
    // Security (the authorizer):
    /// Whether ACLs are enforced: acl, none, or auto (acl when some
    /// listener authenticates its clients).
    #[arg(long, default_value = "auto")]
    authorizer: kaas::security::authorizer::AuthorizerMode,
    /// A principal allowed everything, whatever the ACLs (repeatable),
    /// e.g. User:admin.
    #[arg(long = "super-user", value_name = "User:NAME", value_parser = parse_principal)]
    super_users: Vec<kaas::security::Principal>,
    /// allow.everyone.if.no.acl.found: an action on a resource no ACL
    /// names at all is allowed.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    allow_everyone_if_no_acl_found: bool,
    /// Most ACLs the broker (in cluster mode: the cluster) holds; a
    /// creation past it is refused with POLICY_VIOLATION.
    #[arg(long, default_value_t = kaas::security::authorizer::DEFAULT_MAX_ACLS)]
    max_acls: usize,
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Sets a user's SCRAM credential in the data directory (before the
    /// first start, as `kafka-storage format --add-scram`; at run time use
    /// AlterUserScramCredentials). The password is not stored.
    Set {
        #[arg(long, default_value = "./data")]
        data_dir: PathBuf,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        password: String,
        #[arg(long, default_value_t = 4096)]
        iterations: u32,
    },
    /// Removes a user's credential for one mechanism.
    Delete {
        #[arg(long, default_value = "./data")]
        data_dir: PathBuf,
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        #[arg(long)]
        name: String,
    },
    /// Lists users with their mechanisms and iteration counts.
    List {
        #[arg(long, default_value = "./data")]
        data_dir: PathBuf,
    },
}

fn parse_override(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    let (k, v) = (k.trim().to_string(), v.trim().to_string());
    let layer = std::collections::BTreeMap::from([(k.clone(), v.clone())]);
    kaas::log::config::broker_defaults::as_topic_configs(&layer)
        .and_then(|topic| kaas::log::parse_configs(&kaas::log::LogConfig::default(), &topic))
        .map_err(|e| {
            format!("{e} (a broker-level topic default is expected, e.g. log.retention.ms=3600000)")
        })?;
    Ok((k, v))
}

fn parse_principal(s: &str) -> Result<kaas::security::Principal, String> {
    kaas::security::Principal::parse(s)
        .ok_or_else(|| format!("{s:?}: expected Type:name, e.g. User:admin"))
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Print a policy's name, version, WIT package version, features and sha256.
    Inspect {
        /// The policy component (.wasm).
        file: PathBuf,
    },
    /// Write a new policy crate (DIR/NAME) that builds outside a kaas
    /// checkout, with `cargo build --release --target wasm32-wasip2` or
    /// `cargo component build --release`.
    New {
        /// The crate's (cargo package) name; also the policy's name.
        name: String,
        /// The starting point.
        #[arg(long, value_enum, default_value_t = kaas::policy_kit::Template::Apache37)]
        from: kaas::policy_kit::Template,
        /// The directory the crate's directory is created in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Hot-swap a running broker's policy through its admin endpoint: the
    /// broker vets the component (loads, WIT major, describe(), smoke
    /// vectors) and swaps it in, or refuses it and keeps the old one
    /// (non-zero exit).
    Load {
        /// The policy component (.wasm).
        file: PathBuf,
        /// The broker's --admin-listen address (HOST:PORT).
        #[arg(long)]
        admin: String,
        /// File holding the broker's admin token (first line).
        #[arg(long)]
        admin_token_file: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    // Traps must not capture host backtraces (costly on every trap).
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: called first thing in main, before any thread exists, so no
        // other thread can be reading the environment.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("RUST_LIB_BACKTRACE", "0");
        }
    }
    let cli = Cli::parse();
    init_logging(&cli);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kaas: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The broker's log filter when RUST_LOG is unset: its own start-up and
/// policy lines (info), dependencies only when they warn.
const BROKER_LOG_FILTER: &str = "warn,kaas=info";
/// The other commands print their results; their log shows only warnings.
const COMMAND_LOG_FILTER: &str = "warn";

/// Logs go to stderr, filtered by RUST_LOG (else the defaults above), as
/// text (coloured only on a terminal) or, with `broker --log-format json`,
/// one JSON object a line.
fn init_logging(cli: &Cli) {
    use std::io::IsTerminal as _;
    let (default, format) = match &cli.command {
        Command::Broker(args) => (BROKER_LOG_FILTER, args.log_format),
        _ => (COMMAND_LOG_FILTER, LogFormat::Text),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn runtime() -> anyhow::Result<PolicyRuntime> {
    PolicyRuntime::new(
        SandboxLimits::default(),
        Some(ArtifactCache::default_location()),
    )
}

fn default_suite() -> PathBuf {
    let here = PathBuf::from("tests/conformance");
    if here.is_dir() {
        here
    } else {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/conformance"))
    }
}

/// `kaas conformance`: wire probes, the vectors (with a policy's declared
/// differences), or the differential report between two policies.
fn conformance_cmd(args: ConformanceArgs) -> anyhow::Result<ExitCode> {
    let ok = |all: bool| {
        if all {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    };
    if let Some(addr) = args.bootstrap {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let opts = kaas_wirekit::Options {
            bootstrap: addr,
            against: args.against_bootstrap,
            kafka_version: args.kafka_version,
            expect: args.expect,
            only: args.probe,
            show: args.show,
        };
        let (passed, lines) = rt.block_on(kaas_wirekit::run_cli(&opts))?;
        if let Some(path) = args.junit {
            let results: Vec<_> = lines
                .into_iter()
                .map(|(id, failure)| conformance::CaseResult { id, failure })
                .collect();
            std::fs::write(&path, conformance::junit("wire-kit", &results))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        return Ok(ok(passed));
    }
    let policy = args
        .policy
        .context("--policy is required without --bootstrap")?;
    let rt = runtime()?;
    let policy = Arc::new(
        rt.load_file(&policy)
            .with_context(|| format!("loading {}", policy.display()))?,
    );
    let suites = if args.suite.is_empty() {
        vec![default_suite()]
    } else {
        args.suite
    };
    let cases = conformance::load_suites(&suites)?;
    if let Some(other) = args.against {
        let other = Arc::new(
            rt.load_file(&other)
                .with_context(|| format!("loading {}", other.display()))?,
        );
        let d = conformance::differential(&policy, &other, &cases);
        print!("{}", conformance::diff::report(&d));
        return Ok(ok(d.errors.is_empty()));
    }
    let declared = match &args.expect {
        Some(path) => {
            let d = conformance::Differences::load(path)?;
            d.check_against(&policy.identity().name, &cases)?;
            d
        }
        None => conformance::Differences::none(),
    };
    let run = conformance::run_suite(&policy, &cases, &declared);
    print!("{}", conformance::report_suite(&run));
    if let Some(path) = args.junit {
        std::fs::write(
            &path,
            conformance::junit(&policy.identity().name, &run.results),
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ok(run.results.iter().all(|r| r.failure.is_none())))
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Broker(args) => {
            cli::broker::raise_fd_limit(args.max_connections);
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            rt.block_on(cli::broker::run(*args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Conformance(args) => conformance_cmd(args),
        #[cfg(feature = "fault-injection")]
        Command::TxnSeed(a) => {
            let state = match a.state.as_str() {
                "empty" => kaas::policy::TxnState::Empty,
                "complete-commit" => kaas::policy::TxnState::CompleteCommit,
                "complete-abort" => kaas::policy::TxnState::CompleteAbort,
                other => anyhow::bail!("unknown --state {other}"),
            };
            let now = kaas::clock::now_ms();
            let entry = kaas::policy::Entry {
                transactional_id: a.transactional_id.clone(),
                producer_id: a.producer_id,
                producer_epoch: a.epoch,
                last_producer_id: a.producer_id,
                last_producer_epoch: a.last_epoch,
                state,
                partitions: vec![],
                timeout_ms: 60_000,
                start_timestamp_ms: now,
                last_update_timestamp_ms: now,
                next_producer_id: -1,
                client_transaction_version: 0,
                has_failed_epoch_fence: false,
            };
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let path = rt.block_on(kaas::txn::shards::seed(&a.data_dir, a.cluster, &entry))?;
            println!("seeded {} in {}", a.transactional_id, path.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::User { command } => {
            user_command(command)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy {
            command:
                PolicyCommand::Load {
                    file,
                    admin,
                    admin_token_file,
                },
        } => policy_load(&file, &admin, admin_token_file.as_deref()),
        Command::Txn {
            command:
                TxnCommand::Describe {
                    bootstrap,
                    transactional_id,
                },
        } => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let d = rt.block_on(kaas::txn_describe::describe(&bootstrap, &transactional_id))?;
            print!("{}", d.render());
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy {
            command: PolicyCommand::Inspect { file },
        } => {
            let rt = runtime()?;
            let policy = rt.load_file(&file)?;
            let id = policy.identity();
            println!("name: {}", id.name);
            println!("version: {}", id.version);
            println!("wit: kaas:txn-policy@{}", id.wit_version);
            println!("features: {}", id.features.join(", "));
            println!("sha256: {}", id.sha256);
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy {
            command: PolicyCommand::New { name, from, dir },
        } => {
            let path = kaas::policy_kit::new_policy(&name, from, &dir)?;
            println!("created policy crate {} (from {from})", path.display());
            println!(
                "next: cd {} && cargo test && cargo build --release --target wasm32-wasip2 (see README.md)",
                path.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn user_command(c: UserCommand) -> anyhow::Result<()> {
    use kaas::security::credentials::{Credentials, ScramMechanism};
    let mech = |m: &str| {
        ScramMechanism::parse(m)
            .with_context(|| format!("unknown mechanism {m} (SCRAM-SHA-256, SCRAM-SHA-512)"))
    };
    match c {
        UserCommand::Set {
            data_dir,
            mechanism,
            name,
            password,
            iterations,
        } => {
            let store = Credentials::open(&data_dir)?;
            store.set_password(&name, mech(&mechanism)?, &password, iterations)?;
            println!("{mechanism} credential set for user {name}");
        }
        UserCommand::Delete {
            data_dir,
            mechanism,
            name,
        } => {
            Credentials::open(&data_dir)?.delete(&name, mech(&mechanism)?)?;
            println!("{mechanism} credential removed for user {name}");
        }
        UserCommand::List { data_dir } => {
            for (user, mechs) in Credentials::open(&data_dir)?.describe() {
                let m: Vec<String> = mechs
                    .iter()
                    .map(|(m, i)| format!("{}(iterations={i})", m.name()))
                    .collect();
                println!("{user}\t{}", m.join(" "));
            }
        }
    }
    Ok(())
}

/// Reads a policy file, refusing one over [`kaas::swap::MAX_POLICY_BYTES`]
/// before reading it.
fn read_bounded(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    anyhow::ensure!(
        len <= kaas::swap::MAX_POLICY_BYTES as u64,
        "{} is {len} bytes, over the {}-byte limit",
        path.display(),
        kaas::swap::MAX_POLICY_BYTES
    );
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// `kaas policy load`: sends the component to the admin endpoint and prints
/// the broker's answer.
fn policy_load(
    file: &std::path::Path,
    admin: &str,
    token_file: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    let bytes = read_bounded(file)?;
    let token = token_file.map(kaas::admin::read_token).transpose()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (status, body) = rt.block_on(kaas::admin::request(
        admin,
        "POST",
        token.as_deref(),
        &bytes,
    ))?;
    if status == 200 {
        println!("{body}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "kaas: the broker refused {} (HTTP {status}): {body}",
            file.display()
        );
        Ok(ExitCode::FAILURE)
    }
}
