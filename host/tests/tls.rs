//! TLS on the wire: SSL and SASL_SSL listeners of
//! a spawned `kaas broker` with a test CA and certificates made by rcgen,
//! a rustls client; client certificates (ssl.client.auth required) and the
//! principal they name; clients that send nothing, garbage or plaintext
//! Kafka bytes to the TLS port.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/security.rs"]
mod security;
mod support;

use std::time::{Duration, Instant};

use security::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HANDSHAKES_FAILED: &str = "kaas_tls_handshakes_failed_total";

fn tls_flags(pki: &Pki) -> Vec<String> {
    vec![
        "--ssl-cert".into(),
        pki.path("server.pem"),
        "--ssl-key".into(),
        pki.path("server.key"),
    ]
}

fn start(listeners: &[&str], extra: &[&str], rust_log: &str) -> (tempfile::TempDir, Pki, Secured) {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::new(&tmp.path().join("pki"));
    let data = tmp.path().join("data");
    user_set(&data, "SCRAM-SHA-512", "alice", "alice-secret");
    let mut flags = tls_flags(&pki);
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let b = Secured::spawn(&data, listeners, &flags, rust_log);
    (tmp, pki, b)
}

/// Reads until the broker closes (a TLS alert may come first); panics if
/// it stays open.
async fn closed(s: &mut tokio::net::TcpStream) -> Duration {
    let start = Instant::now();
    let mut buf = Vec::new();
    match tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await {
        Ok(_) => start.elapsed(),
        Err(_) => panic!("the broker did not close the connection"),
    }
}

#[tokio::test]
async fn an_ssl_listener_serves_api_versions_and_metadata_over_tls() {
    let (_tmp, pki, b) = start(&["SSL=SSL://127.0.0.1:0"], &[], "warn");
    let stream = tls_connect(&pki.client(None), b.addr("SSL"))
        .await
        .expect("TLS handshake");
    let mut w = Wire::new(stream);
    let v = w.call(&support::api_versions_v3(), 3).await;
    assert_eq!(v.error_code, 0);
    let m = w.call(&metadata(), 12).await;
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(
        m.brokers[0].port.to_string(),
        b.addr("SSL").rsplit(':').next().unwrap(),
        "the SSL listener advertises itself"
    );
}

#[tokio::test]
async fn silence_garbage_and_plaintext_kafka_bytes_on_the_tls_port_are_closed_and_counted() {
    let (_tmp, pki, b) = start(
        &["SSL=SSL://127.0.0.1:0"],
        &["--authentication-timeout-ms", "500"],
        "warn",
    );
    let addr = b.addr("SSL").to_owned();
    // Nothing at all: closed at the handshake deadline.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let took = closed(&mut s).await;
    assert!(took >= Duration::from_millis(400), "{took:?}");
    b.await_metric(HANDSHAKES_FAILED, 1).await;
    // Garbage.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"\x16\x03\x01\xff\xffthis is not a ClientHello at all")
        .await
        .unwrap();
    closed(&mut s).await;
    b.await_metric(HANDSHAKES_FAILED, 2).await;
    // A plaintext Kafka client.
    let mut w = Wire::tcp(&addr).await;
    assert!(w.try_call(&support::api_versions_v3(), 3).await.is_none());
    b.await_metric(HANDSHAKES_FAILED, 3).await;
    // A TLS client that does not trust the broker's CA gives up itself.
    let other = Pki::new(&_tmp.path().join("other-pki"));
    assert!(tls_connect(&other.client(None), &addr).await.is_err());
    b.await_metric(HANDSHAKES_FAILED, 4).await;
    // The broker still serves.
    let mut w = Wire::new(tls_connect(&pki.client(None), &addr).await.unwrap());
    assert_eq!(w.call(&support::api_versions_v3(), 3).await.error_code, 0);
}

#[tokio::test]
async fn required_client_auth_refuses_a_client_without_a_certificate_and_names_a_certified_one() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::new(&tmp.path().join("pki"));
    pki.issue("alice", "alice", &[]);
    let stranger = Pki::new(&tmp.path().join("stranger-pki"));
    stranger.issue("mallory", "mallory", &[]);
    let data = tmp.path().join("data");
    let mut flags = tls_flags(&pki);
    flags.extend([
        "--ssl-client-auth".into(),
        "required".into(),
        "--ssl-client-ca".into(),
        pki.path("ca.pem"),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let b = Secured::spawn(
        &data,
        &["SSL=SSL://127.0.0.1:0"],
        &flags,
        "warn,kaas::tls=debug",
    );
    let addr = b.addr("SSL").to_owned();
    // No certificate: with TLS 1.3 the client may finish its side of the
    // handshake; the broker's refusal arrives before any answer.
    if let Ok(s) = tls_connect(&pki.client(None), &addr).await {
        let mut w = Wire::new(s);
        assert!(w.try_call(&support::api_versions_v3(), 3).await.is_none());
    }
    b.await_metric(HANDSHAKES_FAILED, 1).await;
    // A certificate from another CA: refused too.
    let c = mixed_client(&pki, &stranger, "mallory");
    if let Ok(s) = tls_connect(&c, &addr).await {
        let mut w = Wire::new(s);
        assert!(w.try_call(&support::api_versions_v3(), 3).await.is_none());
    }
    b.await_metric(HANDSHAKES_FAILED, 2).await;
    // CN=alice signed by the broker's CA: served as User:CN=alice.
    let mut w = Wire::new(
        tls_connect(&pki.client(Some("alice")), &addr)
            .await
            .expect("mutual TLS"),
    );
    let m = w.call(&metadata(), 12).await;
    assert!(!m.brokers.is_empty());
    b.await_log(&["TLS client authenticated", "User:CN=alice"])
        .await;
}

/// A client trusting `trusted`'s CA and presenting `identity` issued by
/// `issuer`.
fn mixed_client(trusted: &Pki, issuer: &Pki, identity: &str) -> tokio_rustls::TlsConnector {
    for ext in ["pem", "key"] {
        std::fs::copy(
            issuer.dir.join(format!("{identity}.{ext}")),
            trusted.dir.join(format!("foreign-{identity}.{ext}")),
        )
        .unwrap();
    }
    trusted.client(Some(&format!("foreign-{identity}")))
}

#[tokio::test]
async fn a_sasl_ssl_listener_authenticates_scram_end_to_end() {
    let (_tmp, pki, b) = start(
        // SECURE first: Metadata advertises the first listener's address
        // whichever listener asked (per-listener answers are not built).
        &[
            "SECURE=SASL_SSL://127.0.0.1:0",
            "PLAIN=PLAINTEXT://127.0.0.1:0",
        ],
        &["--connections-max-reauth-ms", "30000"],
        "warn",
    );
    let connector = pki.client(None);
    let mut w = Wire::new(tls_connect(&connector, b.addr("SECURE")).await.unwrap());
    assert_eq!(w.call(&support::api_versions_v3(), 3).await.error_code, 0);
    let r = scram_login(&mut w, "SCRAM-SHA-512", "alice", "alice-secret").await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.session_lifetime_ms, 30_000);
    let m = w.call(&metadata(), 12).await;
    assert_eq!(
        m.brokers[0].port.to_string(),
        b.addr("SECURE").rsplit(':').next().unwrap()
    );
    // Unauthenticated requests over TLS are refused like over TCP.
    let mut w = Wire::new(tls_connect(&connector, b.addr("SECURE")).await.unwrap());
    assert!(w.try_call(&metadata(), 12).await.is_none());
    // A wrong password over TLS: 58.
    let mut w = Wire::new(tls_connect(&connector, b.addr("SECURE")).await.unwrap());
    let r = scram_login(&mut w, "SCRAM-SHA-512", "alice", "nope").await;
    assert_eq!(r.error_code, 58);
    // The PLAINTEXT listener next to it needs no login.
    let mut w = Wire::tcp(b.addr("PLAIN")).await;
    assert!(!w.call(&metadata(), 12).await.brokers.is_empty());
}

#[tokio::test]
async fn requested_client_auth_serves_a_client_without_a_certificate_as_anonymous() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::new(&tmp.path().join("pki"));
    pki.issue("bob", "bob", &[]);
    let data = tmp.path().join("data");
    let mut flags = tls_flags(&pki);
    flags.extend([
        "--ssl-client-auth".into(),
        "requested".into(),
        "--ssl-client-ca".into(),
        pki.path("ca.pem"),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let b = Secured::spawn(
        &data,
        &["SSL=SSL://127.0.0.1:0"],
        &flags,
        "warn,kaas::tls=debug",
    );
    let mut w = Wire::new(tls_connect(&pki.client(None), b.addr("SSL")).await.unwrap());
    assert!(!w.call(&metadata(), 12).await.brokers.is_empty());
    let mut w = Wire::new(
        tls_connect(&pki.client(Some("bob")), b.addr("SSL"))
            .await
            .unwrap(),
    );
    assert!(!w.call(&metadata(), 12).await.brokers.is_empty());
    b.await_log(&["TLS client authenticated", "User:CN=bob"])
        .await;
    assert_eq!(b.metric(HANDSHAKES_FAILED).await, 0);
}

#[tokio::test]
async fn on_sasl_ssl_the_authentication_deadline_counts_from_connecting_not_from_the_tls_handshake()
{
    let (_tmp, pki, b) = start(
        &["SECURE=SASL_SSL://127.0.0.1:0"],
        &["--authentication-timeout-ms", "1000"],
        "warn",
    );
    let connected = Instant::now();
    let tcp = tokio::net::TcpStream::connect(b.addr("SECURE"))
        .await
        .unwrap();
    // The TLS handshake starts late and finishes within the deadline.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")
        .unwrap()
        .to_owned();
    let s = pki.client(None).connect(name, tcp).await.expect("TLS");
    let mut w = Wire::new(s);
    // Then nothing: closed 1 s after connecting, not 1 s after the handshake.
    let mut buf = [0u8; 16];
    let r = tokio::time::timeout(Duration::from_secs(5), async {
        use tokio::io::AsyncReadExt as _;
        let _ = w.stream_mut().read(&mut buf).await;
    })
    .await;
    assert!(r.is_ok(), "never closed");
    let took = connected.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(1450),
        "closed {took:?} after connecting"
    );
}
