//! Test support: an in-process broker on port 0, a spawned `kaas broker`
//! process, and a minimal Kafka client speaking exact wire bytes through
//! kafka-protocol's codecs.

#![allow(dead_code, unreachable_pub)]

pub mod records;
pub mod sasl;
pub mod txn;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kaas::broker::Broker;
use kaas::config::BrokerConfig;
use kaas::log::FsyncMode;
use kaas::policy::{PolicyRuntime, SandboxLimits};

/// The value of an unlabelled sample (`name value`) on a /metrics page.
pub fn metric_value(page: &str, name: &str) -> Option<u64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

pub fn wasm(name: &str) -> PathBuf {
    let p = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/wasm32-wasip2/release"
    ))
    .join(name);
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --release --target wasm32-wasip2 --workspace --exclude kaas` first",
        p.display()
    );
    p
}

/// A broker running inside the test process.
pub struct InProcess {
    pub addr: std::net::SocketAddr,
    pub broker: Arc<Broker>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl InProcess {
    pub async fn start(dir: &Path, fsync: FsyncMode) -> InProcess {
        Self::start_with(dir, fsync, |_| {}).await
    }

    pub async fn start_with(
        dir: &Path,
        fsync: FsyncMode,
        tweak: impl FnOnce(&mut BrokerConfig),
    ) -> InProcess {
        let rt = PolicyRuntime::new(SandboxLimits::default(), None).expect("runtime");
        let policy = Arc::new(
            rt.load_file(&wasm("kaas_policy_apache37.wasm"))
                .expect("policy"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut config = BrokerConfig::new(dir);
        config.advertised_port = i32::from(addr.port());
        tweak(&mut config);
        let broker = kaas::broker::open(config, fsync, policy).expect("broker opens");
        kaas::broker::spawn_tasks(&broker, std::time::Duration::from_millis(50));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let b = broker.clone();
        let task = tokio::spawn(async move {
            kaas::server::run(listener, b.serving(), async {
                let _ = rx.await;
            })
            .await;
        });
        InProcess {
            addr,
            broker,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Stops accepting and closes the log cleanly.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        self.broker.close_log().expect("clean close");
    }
}

/// A `kaas broker` child process.
pub struct Process {
    pub child: Child,
    pub addr: String,
}

impl Process {
    pub fn spawn(dir: &Path, extra: &[&str]) -> Process {
        Self::spawn_env(dir, extra, &[])
    }

    pub fn spawn_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Process {
        Self::spawn_full(dir, "kaas_policy_apache37.wasm", extra, env)
    }

    pub fn spawn_full(dir: &Path, policy: &str, extra: &[&str], env: &[(&str, &str)]) -> Process {
        let child = Command::new(env!("CARGO_BIN_EXE_kaas"))
            .envs(env.iter().copied())
            .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .args(["--policy"])
            .arg(wasm(policy))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn kaas broker");
        Self::listening(child)
    }

    /// A spawned broker (stdout piped), once it prints the address it
    /// listens on.
    pub fn listening(mut child: Child) -> Process {
        use std::io::BufRead;
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = std::io::BufReader::new(stdout).lines();
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = loop {
            assert!(
                Instant::now() < deadline,
                "broker did not start listening in time"
            );
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(a) = line.strip_prefix("kaas broker listening on ") {
                        break a.trim().to_string();
                    }
                }
                _ => panic!("broker exited before listening"),
            }
        };
        Process { child, addr }
    }

    /// Waits for the process to end by itself (a fault point aborted it).
    pub fn wait_crash(mut self) -> std::process::ExitStatus {
        self.child.wait().expect("wait")
    }

    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for the exit.
    pub fn sigterm(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().expect("wait")
    }

    pub fn terminate(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
    }
}

/// A test that panics must not leave its broker running (it would hold the
/// test binary's output open and outlive the run).
impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The library client with test-friendly (panicking) methods.
pub struct Client(kaas::conformance::client::Client);

impl Client {
    pub async fn connect(addr: &str) -> Client {
        Client(
            kaas::conformance::client::Client::connect(addr)
                .await
                .expect("connect"),
        )
    }

    pub async fn send_raw(&mut self, frame: &[u8]) {
        self.0.send_raw(frame).await.expect("write");
    }

    pub async fn read_frame(&mut self) -> Option<bytes::Bytes> {
        self.0.read_frame().await
    }

    pub fn frame<R: kafka_protocol::protocol::Request>(
        &mut self,
        req: &R,
        version: i16,
    ) -> (i32, bytes::BytesMut) {
        self.0.frame(req, version).expect("encode")
    }

    pub async fn call<R: kafka_protocol::protocol::Request>(
        &mut self,
        req: &R,
        version: i16,
    ) -> R::Response {
        self.0
            .call(req, version)
            .await
            .expect("a decodable response, in order")
    }
}

/// ApiVersions v3 as a client sends it: KIP-511 requires a client
/// software name and version (an empty one is INVALID_REQUEST).
pub fn api_versions_v3() -> kafka_protocol::messages::ApiVersionsRequest {
    kafka_protocol::messages::ApiVersionsRequest::default()
        .with_client_software_name(kafka_protocol::protocol::StrBytes::from_static_str(
            "kaas-tests",
        ))
        .with_client_software_version(kafka_protocol::protocol::StrBytes::from_static_str("1"))
}
