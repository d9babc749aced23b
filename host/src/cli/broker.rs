//! `kaas broker`: the policy loaded, the listeners bound, the arguments
//! turned into a [`BrokerConfig`], the broker opened and its background
//! tasks started, the side endpoints (admin, metrics, retention) spawned,
//! then the listeners served until SIGTERM or Ctrl-C.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use kaas::config::BrokerConfig;
use kaas::log::FsyncMode;
use kaas::policy::{Policy, PolicyRuntime};
use kaas::security::listener::{ListenerSpec, Protocol};

use crate::BrokerArgs;

/// Runs the broker until a shutdown signal, then closes the log cleanly.
pub(crate) async fn run(args: BrokerArgs) -> anyhow::Result<()> {
    let runtime = crate::runtime()?;
    let policy = load_policy(&runtime, &args)?;
    let (specs, listeners) = bind_listeners(&args).await?;
    let config = config_from_args(&args, &specs, &listeners)?;
    let broker = open(&args, config, policy).await?;
    spawn_side_endpoints(&args, &broker, runtime).await?;
    let addr = listeners
        .first()
        .context("no listener")?
        .socket
        .local_addr()?;
    println!("kaas broker listening on {addr}");
    if listeners.len() > 1 {
        for l in &listeners {
            println!(
                "kaas broker listening on {} {}",
                l.name,
                l.socket.local_addr()?
            );
        }
    }
    for l in &listeners {
        tracing::info!(listener = %l.name, protocol = %l.protocol, addr = %l.socket.local_addr()?, "listening");
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    kaas::server::run_listeners(listeners, broker.serving(), shutdown_signal()).await;
    tracing::info!("shutting down: closing the log cleanly");
    if kaas::fault::once("slow-log-close") {
        // Tests: a close that takes a while, so any connection still
        // serving would write into a closing log.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let b = broker.clone();
    tokio::task::spawn_blocking(move || b.close_log()).await??;
    tracing::info!("log closed cleanly");
    Ok(())
}

/// The transaction policy: `--policy`, else the embedded apache37.
fn load_policy(runtime: &PolicyRuntime, args: &BrokerArgs) -> anyhow::Result<Policy> {
    let policy = match &args.policy {
        Some(path) => runtime.load_file(path)?,
        None => {
            anyhow::ensure!(
                !kaas::EMBEDDED_APACHE37.is_empty(),
                "this kaas was built before the apache37 policy: run `cargo build --release --target \
                 wasm32-wasip2 -p kaas-policy-apache37`, rebuild kaas, or pass --policy FILE.wasm"
            );
            runtime.load_bytes(kaas::EMBEDDED_APACHE37)?
        }
    };
    kaas::policy::features::serveable(&policy.identity().protocol_features)
        .map_err(|e| anyhow::anyhow!("the policy {} is refused: {e}", policy.identity()))?;
    tracing::info!(policy = %policy.identity(), wit = %policy.identity().wit_version, "transaction policy loaded");
    Ok(policy)
}

/// The listeners `--listeners` (else `--listen`, PLAINTEXT) names, bound,
/// with TLS where they use it.
async fn bind_listeners(
    args: &BrokerArgs,
) -> anyhow::Result<(Vec<ListenerSpec>, Vec<kaas::server::Listener>)> {
    let specs = if args.listeners.is_empty() {
        vec![ListenerSpec {
            name: "PLAINTEXT".into(),
            protocol: Protocol::Plaintext,
            addr: args.listen.clone(),
        }]
    } else {
        args.listeners
            .iter()
            .map(|l| ListenerSpec::parse(l).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    let mut names = std::collections::BTreeSet::new();
    for s in &specs {
        anyhow::ensure!(
            names.insert(s.name.clone()),
            "listener name {} is given twice",
            s.name
        );
    }
    let tls = if specs.iter().any(|s| s.protocol.uses_tls()) {
        let (Some(cert), Some(key)) = (&args.ssl_cert, &args.ssl_key) else {
            anyhow::bail!("an SSL or SASL_SSL listener needs --ssl-cert and --ssl-key");
        };
        let files = kaas::security::tls::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.ssl_client_ca.clone(),
            client_auth: args.ssl_client_auth,
        };
        Some(tokio_rustls::TlsAcceptor::from(
            kaas::security::tls::server_config(&files).context("configuring TLS")?,
        ))
    } else {
        None
    };
    let mut listeners = Vec::new();
    for s in &specs {
        let socket = kaas::server::bind::bind_listener(&s.addr, args.socket_listen_backlog_size)
            .await
            .with_context(|| format!("binding listener {} on {}", s.name, s.addr))?;
        listeners.push(kaas::server::Listener {
            socket,
            name: std::sync::Arc::from(s.name.as_str()),
            protocol: s.protocol,
            tls: if s.protocol.uses_tls() {
                tls.clone()
            } else {
                None
            },
        });
    }
    anyhow::ensure!(!listeners.is_empty(), "no listener");
    Ok((specs, listeners))
}

/// The broker's configuration from its arguments and bound listeners.
fn config_from_args(
    args: &BrokerArgs,
    specs: &[ListenerSpec],
    listeners: &[kaas::server::Listener],
) -> anyhow::Result<BrokerConfig> {
    let Some(first) = listeners.first() else {
        anyhow::bail!("no listener");
    };
    let addr = first.socket.local_addr()?;
    let mut config = BrokerConfig::new(&args.data_dir);
    if let Some(user) = &args.inter_broker_user {
        let file = args
            .inter_broker_password_file
            .as_ref()
            .context("--inter-broker-user needs --inter-broker-password-file")?;
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let password = text.lines().next().unwrap_or_default().to_owned();
        anyhow::ensure!(!password.is_empty(), "{} holds no password", file.display());
        config.inter_broker_login = Some((user.clone(), password));
    }
    if let Some(l) = listeners.first()
        && !args.etcd.is_empty()
        && l.protocol.uses_tls()
    {
        anyhow::bail!(
            "in cluster mode the first listener ({}) is the brokers' own and must be PLAINTEXT or SASL_PLAINTEXT (on a private address)",
            l.name
        );
    }
    config.security.failed_authentication_delay =
        std::time::Duration::from_millis(args.connection_failed_authentication_delay_ms);
    config.security.connections_max_reauth =
        std::time::Duration::from_millis(args.connections_max_reauth_ms);
    config.security.sasl_max_receive_size = args.sasl_server_max_receive_size.max(1024);
    config.security.authentication_timeout =
        std::time::Duration::from_millis(args.authentication_timeout_ms.max(1));
    config.security.sasl_mechanisms = args
        .sasl_mechanisms
        .iter()
        .map(|m| {
            kaas::security::sasl::Mechanism::parse(m).with_context(|| {
                format!("unknown SASL mechanism {m} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    config.advertised_host = args
        .advertised_host
        .clone()
        .unwrap_or_else(|| addr.ip().to_string());
    config.advertised_port = i32::from(addr.port());
    for l in listeners {
        let a = l.socket.local_addr()?;
        config
            .advertised_listeners
            .push(kaas::cluster::keys::Endpoint {
                name: l.name.to_string(),
                host: args
                    .advertised_host
                    .clone()
                    .unwrap_or_else(|| a.ip().to_string()),
                port: i32::from(a.port()),
            });
    }
    config.auto_create_topics = !args.no_auto_create_topics;
    config.default_partitions = args.default_partitions;
    config.default_replication_factor = args.default_replication_factor;
    config.max_request_bytes = args.max_request_bytes;
    config.max_connections = args.max_connections;
    config.log_overrides = args.overrides.iter().cloned().collect();
    config.log = kaas::log::config::broker_defaults::as_topic_configs(&config.log_overrides)
        .and_then(|topic| kaas::log::parse_configs(&config.log, &topic))
        .map_err(|e| anyhow::anyhow!("--override: {e}"))?;
    config.cleaner = kaas::log::cleaner::CleanerConfig {
        enable: args.log_cleaner_enable,
        dedupe_buffer_size: args.log_cleaner_dedupe_buffer_size,
        io_max_bytes_per_second: args.log_cleaner_io_max_bytes_per_second,
        backoff_ms: args.log_cleaner_backoff_ms,
    };
    config.connections_max_idle =
        std::time::Duration::from_millis(args.connections_max_idle_ms.max(1));
    config.request_timeout = std::time::Duration::from_millis(args.request_timeout_ms.max(1));
    config.queued_max_request_bytes = args.queued_max_request_bytes;
    config.transactional_id_expiration_ms = args.transactional_id_expiration_ms;
    config.producer_id_expiration_ms = args.producer_id_expiration_ms.max(1);
    config.producer_id_expiration_check =
        std::time::Duration::from_millis(args.producer_id_expiration_check_interval_ms.max(10));
    config.transaction_max_timeout_ms = args.transaction_max_timeout_ms;
    config.tenant_classes = kaas::txn::tenant::TenantClasses::parse(&args.tenant_classes)?;
    config.wal_checkpoint_interval =
        std::time::Duration::from_millis(args.wal_checkpoint_interval_ms.max(1));
    let consumer = &mut config.groups.consumer;
    consumer.session_timeout =
        std::time::Duration::from_millis(args.group_consumer_session_timeout_ms);
    consumer.heartbeat_interval =
        std::time::Duration::from_millis(args.group_consumer_heartbeat_interval_ms);
    consumer.max_size = args.group_consumer_max_size.max(1);
    consumer.assignors = args.group_consumer_assignors.clone();
    if consumer.heartbeat_interval >= consumer.session_timeout {
        anyhow::bail!(
            "group.consumer.heartbeat.interval.ms ({}) must be less than group.consumer.session.timeout.ms ({})",
            args.group_consumer_heartbeat_interval_ms,
            args.group_consumer_session_timeout_ms
        );
    }
    if let Some(bad) = consumer.assignors.iter().find(|a| {
        ![
            kaas::group::consumer::assignor::UNIFORM,
            kaas::group::consumer::assignor::RANGE,
        ]
        .contains(&a.as_str())
    }) {
        anyhow::bail!(
            "group.consumer.assignors: unknown assignor {bad:?} (kaas has uniform and range)"
        );
    }
    if consumer.assignors.is_empty() {
        anyhow::bail!("group.consumer.assignors: at least one assignor is needed");
    }
    config.groups.initial_rebalance_delay =
        std::time::Duration::from_millis(args.group_initial_rebalance_delay_ms);
    config.groups.min_session_timeout =
        std::time::Duration::from_millis(args.group_min_session_timeout_ms);
    config.groups.max_session_timeout = std::time::Duration::from_millis(
        args.group_max_session_timeout_ms
            .max(args.group_min_session_timeout_ms),
    );
    config.max_partitions = args.max_partitions;
    config.max_open_segment_files =
        open_files_bound(args.max_open_segment_files, args.max_connections);
    config.max_partitions_per_request = args.max_partitions_per_request;
    config.max_auto_created_topics_per_request = args.max_auto_created_topics_per_request;
    config.fetch_max_bytes = args.fetch_max_bytes.max(1024);
    config.fetch_session_slots = args.max_incremental_fetch_session_cache_slots;
    config.quotas = kaas::quota::QuotaSettings {
        window_num: args.quota_window_num as usize,
        window_ms: u64::from(args.quota_window_size_seconds) * 1000,
        max_entities: args.quota_max_entities as usize,
        idle_expiry_ms: args.quota_entity_idle_seconds.saturating_mul(1000),
    };
    config.node_id = args.node_id;
    config.cluster_id = args.cluster_id.clone();
    config.etcd = args.etcd.clone();
    config.lease_ttl = std::time::Duration::from_millis(args.lease_ttl_ms.max(2_000));
    config.fence_poll = std::time::Duration::from_millis(args.fence_poll_ms.max(10));
    config.fence_push = args.fence_push;
    config.authorizer.mode = args.authorizer;
    config.authorizer.super_users = args.super_users.iter().cloned().collect();
    config.authorizer.allow_everyone_if_no_acl_found = args.allow_everyone_if_no_acl_found;
    config.authorizer.max_acls = args.max_acls;
    // `auto` enforces ACLs when some listener authenticates: none does yet.
    // ACLs are enforced by default once some listener authenticates.
    let authenticates = specs.iter().any(|s| {
        s.protocol.uses_sasl()
            || (s.protocol.uses_tls()
                && args.ssl_client_auth != kaas::security::tls::ClientAuth::None)
    });
    config.authorizer.resolve(authenticates);
    Ok(config)
}

/// Opens the broker (single-node or through etcd) and starts its
/// background tasks.
async fn open(
    args: &BrokerArgs,
    config: BrokerConfig,
    policy: Policy,
) -> anyhow::Result<Arc<kaas::broker::Broker>> {
    let started = std::time::Instant::now();
    let broker = if config.etcd.is_empty() {
        kaas::broker::open(config, args.fsync, Arc::new(policy))
            .with_context(|| format!("opening the data directory {}", args.data_dir.display()))?
    } else {
        let endpoints = config.etcd.join(",");
        kaas::broker::open_clustered(config, args.fsync, Arc::new(policy))
            .await
            .with_context(|| {
                format!(
                    "joining the cluster through etcd {endpoints} on {}",
                    args.data_dir.display()
                )
            })?
    };
    tracing::info!(
        took_ms = started.elapsed().as_millis() as u64,
        topics = broker.logs.topics().len(),
        "log recovered"
    );
    if let Err(short) =
        kaas::fd_budget::check(0, kaas::fd_budget::reserve_for(args.max_connections))
    {
        tracing::warn!(
            partitions = broker.logs.partition_count(),
            %short,
            "the open log leaves too few open files for --max-connections; no topic can be created"
        );
    }
    kaas::broker::spawn_tasks(
        &broker,
        std::time::Duration::from_millis(args.txn_reaper_interval_ms.max(10)),
    );
    if args.fsync == FsyncMode::Interval {
        let gc = broker.logs.group_commit().clone();
        tokio::spawn(gc.run_interval(std::time::Duration::from_millis(
            args.fsync_interval_ms.max(1),
        )));
    }
    Ok(broker)
}

/// Hot swap through the admin endpoint and on SIGHUP, the metrics page,
/// and the retention ticker.
async fn spawn_side_endpoints(
    args: &BrokerArgs,
    broker: &Arc<kaas::broker::Broker>,
    runtime: PolicyRuntime,
) -> anyhow::Result<()> {
    let swapper = Arc::new(kaas::swap::Swapper::new(
        runtime.clone(),
        broker.policy_slot().clone(),
        broker.txn.limits(),
    ));
    if let Some(a) = &args.admin_listen {
        let token = match &args.admin_token_file {
            Some(f) => Some(Arc::<str>::from(kaas::admin::read_token(f)?)),
            None => {
                tracing::warn!(
                    "the admin endpoint has no --admin-token-file: any local process can swap the policy"
                );
                None
            }
        };
        let l = kaas::admin::bind(a).await?;
        let local = l.local_addr()?;
        tracing::info!(addr = %local, token = token.is_some(), "admin endpoint listening");
        println!("kaas admin listening on {local}");
        tokio::spawn(kaas::admin::serve(l, swapper.clone(), token));
    }
    spawn_sighup_reload(swapper, args.policy.clone());
    if let Some(m) = &args.metrics_listen {
        let l = tokio::net::TcpListener::bind(m)
            .await
            .with_context(|| format!("binding metrics {m}"))?;
        tracing::info!(addr = %l.local_addr()?, "metrics listening");
        tokio::spawn(kaas::exposition::serve(l, broker.clone()));
    }
    {
        let broker = broker.clone();
        let every = std::time::Duration::from_millis(args.retention_check_ms.max(100));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let now = kaas::clock::now_ms();
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || b.logs.apply_retention(now)).await;
            }
        });
    }
    Ok(())
}

/// Raises the soft open-file limit to the hard one and
/// says what the broker has: every partition segment and every connection
/// holds a descriptor, and topic creation is refused past the limit.
pub(crate) fn raise_fd_limit(max_connections: usize) {
    match kaas::fd_budget::raise_soft_limit() {
        Ok((before, after)) => {
            let open = kaas::fd_budget::open_fds().ok();
            tracing::info!(
                soft_before = before.soft,
                soft = after.soft,
                hard = after.hard,
                open,
                "open-file limit (RLIMIT_NOFILE)"
            );
            let reserve = kaas::fd_budget::reserve_for(max_connections);
            if reserve > after.soft / 2 {
                tracing::warn!(
                    limit = after.soft,
                    max_connections,
                    "the open-file limit is too low for --max-connections; raise the hard limit (ulimit -Hn) or lower --max-connections"
                );
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not raise the open-file limit (RLIMIT_NOFILE)")
        }
    }
}

/// `--max-open-segment-files`, lowered to what the open-file limit leaves
/// after the connection reserve (with a warning), never below the cache's
/// minimum.
fn open_files_bound(wanted: usize, max_connections: usize) -> usize {
    let reserve = kaas::fd_budget::reserve_for(max_connections);
    match kaas::fd_budget::room_for_cache(reserve) {
        Some(room) if (wanted as u64) > room => {
            let bound = usize::try_from(room)
                .unwrap_or(usize::MAX)
                .max(kaas::log::open_files::MIN_MAX_OPEN);
            tracing::warn!(
                wanted,
                bound,
                max_connections,
                "--max-open-segment-files does not fit the open-file limit with the connection reserve; lowered"
            );
            bound
        }
        _ => wanted,
    }
}

/// SIGHUP re-reads `--policy` and offers it for a hot swap (refused unless
/// it passes the vetting; the old policy keeps deciding either way). Without
/// --policy the embedded policy is running: there is nothing to re-read.
fn spawn_sighup_reload(swapper: Arc<kaas::swap::Swapper>, path: Option<PathBuf>) {
    #[cfg(unix)]
    {
        let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot handle SIGHUP; policy reload on SIGHUP is off");
                return;
            }
        };
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                let Some(path) = path.clone() else {
                    tracing::warn!(
                        "SIGHUP: this broker runs the embedded policy (no --policy), so there is no file to re-read; keeping it"
                    );
                    continue;
                };
                tracing::info!(path = %path.display(), "SIGHUP: re-reading the policy");
                let sw = swapper.clone();
                let done = tokio::task::spawn_blocking(move || {
                    let source = path.display().to_string();
                    match crate::read_bounded(&path) {
                        Ok(bytes) => sw.offer(&bytes, &source).map(|_| ()),
                        Err(e) => {
                            sw.slot().note_refused();
                            tracing::warn!(path = %source, error = %e, "SIGHUP: cannot read the policy; the current policy keeps deciding");
                            Ok(())
                        }
                    }
                })
                .await;
                if let Err(e) = done {
                    tracing::error!(error = %e, "SIGHUP: the reload task failed");
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = (swapper, path);
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
