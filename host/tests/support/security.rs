//! Test support for the security tests: `kaas user set`, a
//! spawned broker with named listeners and a metrics port, a raw-wire
//! client over any stream (TCP or TLS), SASL logins (PLAIN by hand,
//! SCRAM through rsasl's client) and test certificates (rcgen). Included
//! by the security test files with `#[path]` (next to `mod support`).

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::support::{Process, wasm};

/// `kaas user set` in `data`.
pub fn user_set(data: &Path, mechanism: &str, name: &str, password: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["user", "set", "--data-dir"])
        .arg(data)
        .args([
            "--mechanism",
            mechanism,
            "--name",
            name,
            "--password",
            password,
        ])
        .output()
        .expect("run kaas user set");
    assert!(
        out.status.success(),
        "kaas user set failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A spawned broker with named listeners.
pub struct Secured {
    pub process: Process,
    /// Listener name to `HOST:PORT`.
    pub listeners: HashMap<String, String>,
    /// `HOST:PORT` of the metrics endpoint.
    pub metrics: String,
    /// The broker's stderr.
    pub log: PathBuf,
}

impl Secured {
    /// Starts `kaas broker` on `data` with `listeners` (`NAME=PROTO://127.0.0.1:0`)
    /// and `extra` flags; stderr goes to `log` with `rust_log` as RUST_LOG.
    pub fn spawn(data: &Path, listeners: &[&str], extra: &[&str], rust_log: &str) -> Secured {
        use std::io::BufRead;
        let log = data.with_extension("stderr.log");
        let metrics = format!("127.0.0.1:{}", free_port());
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kaas"));
        cmd.env("RUST_LOG", rust_log)
            .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .args(["--policy"])
            .arg(wasm("kaas_policy_apache37.wasm"))
            .args(["--metrics-listen", &metrics]);
        for l in listeners {
            cmd.args(["--listener", l]);
        }
        let mut child = cmd
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(&log).expect("log file")))
            .spawn()
            .expect("spawn kaas broker");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = std::io::BufReader::new(stdout).lines();
        let mut first = None;
        let mut named = HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while first.is_none() || (listeners.len() > 1 && named.len() < listeners.len()) {
            assert!(Instant::now() < deadline, "broker did not start in time");
            let Some(Ok(line)) = lines.next() else {
                panic!(
                    "broker exited before listening: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            };
            let Some(rest) = line.strip_prefix("kaas broker listening on ") else {
                continue;
            };
            match rest.trim().split_once(' ') {
                Some((name, addr)) => {
                    named.insert(name.to_owned(), addr.to_owned());
                }
                None => first = Some(rest.trim().to_owned()),
            }
        }
        let first = first.expect("first address");
        if listeners.len() == 1 {
            let name = listeners[0].split('=').next().expect("a name");
            named.insert(name.to_owned(), first.clone());
        }
        Secured {
            process: Process { child, addr: first },
            listeners: named,
            metrics,
            log,
        }
    }

    pub fn addr(&self, listener: &str) -> &str {
        self.listeners
            .get(listener)
            .unwrap_or_else(|| panic!("no listener {listener}"))
    }

    /// One counter or gauge from `/metrics`.
    pub async fn metric(&self, name: &str) -> u64 {
        let mut s = TcpStream::connect(&self.metrics).await.expect("metrics");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: kaas\r\n\r\n")
            .await
            .expect("metrics request");
        let mut text = String::new();
        s.read_to_string(&mut text).await.expect("metrics body");
        crate::support::metric_value(&text, name).unwrap_or_else(|| panic!("no metric {name}"))
    }

    /// Waits until `name` reaches `at_least`.
    pub async fn await_metric(&self, name: &str, at_least: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self.metric(name).await;
            if v >= at_least {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{name} stayed at {v} < {at_least}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the broker's log has a line containing every one of `parts`.
    pub async fn await_log(&self, parts: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(line) = text.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
                return line.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "no log line with {parts:?} in:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// How long a response may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// A raw Kafka connection over any byte stream.
pub struct Wire<S> {
    stream: BufReader<S>,
    correlation: i32,
}

impl Wire<TcpStream> {
    pub async fn tcp(addr: &str) -> Self {
        let s = TcpStream::connect(addr).await.expect("connect");
        s.set_nodelay(true).expect("nodelay");
        Wire::new(s)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    pub fn new(stream: S) -> Self {
        Wire {
            stream: BufReader::new(stream),
            correlation: 0,
        }
    }

    /// Sends `frame` with its size prefix.
    pub async fn send_raw(&mut self, frame: &[u8]) {
        let mut buf = Vec::with_capacity(4 + frame.len());
        buf.extend_from_slice(&(frame.len() as i32).to_be_bytes());
        buf.extend_from_slice(frame);
        self.send_bytes(&buf).await;
    }

    /// Sends bytes as they are.
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
        self.stream.flush().await.expect("flush");
    }

    /// One size-prefixed frame, or None once the broker closed.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        match tokio::time::timeout(RESPONSE_TIMEOUT, self.stream.read_exact(&mut size)).await {
            Ok(Ok(_)) => {}
            _ => return None,
        }
        let len = usize::try_from(i32::from_be_bytes(size)).ok()?;
        let mut buf = BytesMut::zeroed(len);
        self.stream.read_exact(&mut buf).await.ok()?;
        Some(buf.freeze())
    }

    pub fn frame<R: Request>(&mut self, req: &R, version: i16) -> (i32, BytesMut) {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("kaas-security-test")));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, R::header_version(version))
            .expect("header");
        req.encode(&mut buf, version).expect("body");
        (self.correlation, buf)
    }

    /// Sends a request; its response, or None if the broker closed instead.
    pub async fn try_call<R: Request>(&mut self, req: &R, version: i16) -> Option<R::Response> {
        let (id, frame) = self.frame(req, version);
        if self.stream.write_all(&framed(&frame)).await.is_err()
            || self.stream.flush().await.is_err()
        {
            return None;
        }
        let mut resp = self.read_frame().await?;
        let header = ResponseHeader::decode(
            &mut resp,
            <R::Response as HeaderVersion>::header_version(version),
        )
        .expect("response header");
        assert_eq!(header.correlation_id, id, "responses in order");
        let body = R::Response::decode(&mut resp, version).expect("response body");
        assert_eq!(resp.remaining(), 0, "bytes left after the response");
        Some(body)
    }

    pub async fn call<R: Request>(&mut self, req: &R, version: i16) -> R::Response {
        self.try_call(req, version)
            .await
            .expect("the broker answered")
    }

    /// Asserts the broker closes the connection without sending a byte;
    /// returns how long that took.
    pub async fn closed_silently(&mut self) -> Duration {
        let start = Instant::now();
        let mut buf = [0u8; 64];
        match tokio::time::timeout(RESPONSE_TIMEOUT, self.stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => start.elapsed(),
            Ok(Ok(n)) => panic!("expected a close, got {n} bytes: {:?}", &buf[..n]),
            Err(_) => panic!("the broker did not close the connection"),
        }
    }

    pub fn get_ref(&self) -> &S {
        self.stream.get_ref()
    }

    pub fn stream_mut(&mut self) -> &mut BufReader<S> {
        &mut self.stream
    }
}

fn framed(frame: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(4 + frame.len());
    buf.extend_from_slice(&(frame.len() as i32).to_be_bytes());
    buf.extend_from_slice(frame);
    buf
}

pub fn handshake(mechanism: &str) -> SaslHandshakeRequest {
    SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.to_owned()))
}

pub fn token(bytes: &[u8]) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(bytes))
}

pub fn plain_token(user: &str, password: &str) -> Vec<u8> {
    format!("\0{user}\0{password}").into_bytes()
}

/// SASL PLAIN over SaslHandshake v1 and SaslAuthenticate `version`; the final
/// SaslAuthenticate answer.
pub async fn plain_login<S: AsyncRead + AsyncWrite + Unpin>(
    w: &mut Wire<S>,
    user: &str,
    password: &str,
    version: i16,
) -> SaslAuthenticateResponse {
    let h = w.call(&handshake("PLAIN"), 1).await;
    assert_eq!(h.error_code, 0, "handshake: {h:?}");
    w.call(&token(&plain_token(user, password)), version).await
}

/// A SCRAM exchange driven by rsasl's client over SaslAuthenticate v2
/// (the handshake included); the last answer.
pub async fn scram_login<S: AsyncRead + AsyncWrite + Unpin>(
    w: &mut Wire<S>,
    mechanism: &str,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    let h = w.call(&handshake(mechanism), 1).await;
    assert_eq!(h.error_code, 0, "handshake: {h:?}");
    scram_exchange(w, mechanism, user, password).await
}

/// The SaslAuthenticate part of a SCRAM login (after the handshake).
pub async fn scram_exchange<S: AsyncRead + AsyncWrite + Unpin>(
    w: &mut Wire<S>,
    mechanism: &str,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    use rsasl::prelude::{Mechname, SASLClient, SASLConfig};
    let cfg = SASLConfig::with_credentials(None, user.into(), password.into()).expect("config");
    let name = Mechname::parse(mechanism.as_bytes()).expect("mechanism name");
    let mut client = SASLClient::new(cfg)
        .start_suggested(&[name])
        .expect("client session");
    let mut out = Vec::new();
    client.step(None, &mut out).expect("client-first");
    loop {
        let r = w.call(&token(&out), 2).await;
        if r.error_code != 0 {
            return r;
        }
        out.clear();
        let state = client
            .step(Some(&r.auth_bytes), &mut out)
            .expect("the server's SCRAM message is valid");
        if !state.is_running() {
            // The server-final message verified: the server knows the key.
            return r;
        }
    }
}

pub fn metadata() -> MetadataRequest {
    MetadataRequest::default().with_topics(None)
}

/// A test CA and certificates it signs.
pub struct Pki {
    pub dir: PathBuf,
    ca_cert: rcgen::Certificate,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    /// A CA, and a server certificate for localhost / 127.0.0.1, in `dir`
    /// (ca.pem, server.pem, server.key).
    pub fn new(dir: &Path) -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        std::fs::create_dir_all(dir).expect("pki dir");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, "kaas test CA");
        let ca_cert = p.self_signed(&ca_key).expect("CA cert");
        std::fs::write(dir.join("ca.pem"), ca_cert.pem()).expect("ca.pem");
        let pki = Pki {
            dir: dir.to_owned(),
            ca_cert,
            issuer: Issuer::new(p, ca_key),
        };
        pki.issue("server", "localhost", &["localhost", "127.0.0.1"]);
        pki
    }

    /// Writes `NAME.pem` and `NAME.key`: a certificate for CN=`cn`.
    pub fn issue(&self, name: &str, cn: &str, sans: &[&str]) {
        use rcgen::{CertificateParams, DnType, KeyPair};
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .expect("params");
        p.distinguished_name.push(DnType::CommonName, cn);
        let cert = p.signed_by(&key, &self.issuer).expect("signed");
        std::fs::write(self.dir.join(format!("{name}.pem")), cert.pem()).expect("pem");
        std::fs::write(self.dir.join(format!("{name}.key")), key.serialize_pem()).expect("key");
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }

    /// A rustls client trusting the CA, presenting `identity` (NAME of
    /// [`Pki::issue`]) if given.
    pub fn client(&self, identity: Option<&str>) -> tokio_rustls::TlsConnector {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_cert.der().clone()).expect("trust the CA");
        let b = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        let cfg = match identity {
            None => b.with_no_client_auth(),
            Some(name) => {
                let chain: Vec<CertificateDer<'static>> =
                    CertificateDer::pem_file_iter(self.dir.join(format!("{name}.pem")))
                        .expect("chain")
                        .collect::<Result<_, _>>()
                        .expect("certs");
                let key = PrivateKeyDer::from_pem_file(self.dir.join(format!("{name}.key")))
                    .expect("key");
                b.with_client_auth_cert(chain, key).expect("client cert")
            }
        };
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
    }
}

/// A TLS connection to `addr` (server name 127.0.0.1).
pub async fn tls_connect(
    connector: &tokio_rustls::TlsConnector,
    addr: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")
        .expect("server name")
        .to_owned();
    connector.connect(name, tcp).await
}
