//! SASL on the wire: SaslHandshake v0/v1 and
//! SaslAuthenticate v0-v2 with PLAIN and SCRAM-SHA-256/512 against a spawned
//! `kaas broker` with a SASL_PLAINTEXT listener, bad input (wrong passwords,
//! unknown mechanisms, out-of-order and malformed messages, oversize frames,
//! clients that never finish), KIP-368 session lifetime and re-authentication,
//! and KIP-554 Describe/AlterUserScramCredentials.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/security.rs"]
mod security;
mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use security::*;

const SASL: &str = "SASL=SASL_PLAINTEXT://127.0.0.1:0";
const FAILED: &str = "kaas_sasl_authentication_failed_total";

/// A broker with one SASL_PLAINTEXT listener and users alice (both SCRAM
/// mechanisms) and bob (SCRAM-SHA-512).
fn start(extra: &[&str]) -> (tempfile::TempDir, Secured) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    user_set(&data, "SCRAM-SHA-512", "alice", "alice-secret");
    user_set(&data, "SCRAM-SHA-256", "alice", "alice-secret");
    user_set(&data, "SCRAM-SHA-512", "bob", "bob-secret");
    let b = Secured::spawn(&data, &[SASL], extra, "warn");
    (tmp, b)
}

async fn connect(b: &Secured) -> Wire<tokio::net::TcpStream> {
    Wire::tcp(b.addr("SASL")).await
}

async fn metadata_served(w: &mut Wire<tokio::net::TcpStream>) {
    let m = w.call(&metadata(), 12).await;
    assert!(!m.brokers.is_empty(), "{m:?}");
}

#[tokio::test]
async fn plain_over_handshake_v1_and_authenticate_v0_v1_v2_then_metadata_is_served() {
    let (_tmp, b) = start(&[]);
    for version in 0..=2 {
        let mut w = connect(&b).await;
        let v = w.call(&support::api_versions_v3(), 3).await;
        assert_eq!(v.error_code, 0);
        let h = w.call(&handshake("PLAIN"), 1).await;
        assert_eq!(h.error_code, 0);
        assert_eq!(
            h.mechanisms
                .iter()
                .map(|m| m.to_string())
                .collect::<Vec<_>>(),
            ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        );
        let r = w
            .call(&token(&plain_token("alice", "alice-secret")), version)
            .await;
        assert_eq!(r.error_code, 0, "v{version}: {r:?}");
        assert!(r.auth_bytes.is_empty());
        assert_eq!(r.session_lifetime_ms, 0, "no connections.max.reauth.ms");
        metadata_served(&mut w).await;
    }
    b.await_metric("kaas_sasl_authentication_succeeded_total", 3)
        .await;
}

#[tokio::test]
async fn scram_sha_512_and_256_exchanges_complete_and_return_the_session_lifetime() {
    let (_tmp, b) = start(&["--connections-max-reauth-ms", "60000"]);
    for mech in ["SCRAM-SHA-512", "SCRAM-SHA-256"] {
        let mut w = connect(&b).await;
        let r = scram_login(&mut w, mech, "alice", "alice-secret").await;
        assert_eq!(r.error_code, 0, "{mech}: {r:?}");
        assert!(r.auth_bytes.starts_with(b"v="), "server-final message");
        assert_eq!(r.session_lifetime_ms, 60_000, "{mech}");
        metadata_served(&mut w).await;
    }
    // bob has no SCRAM-SHA-256 credential.
    let mut w = connect(&b).await;
    let r = scram_login(&mut w, "SCRAM-SHA-256", "bob", "bob-secret").await;
    assert_eq!(r.error_code, 58, "{r:?}");
}

#[tokio::test]
async fn handshake_v0_then_a_raw_plain_token_gets_an_empty_raw_token_back() {
    let (_tmp, b) = start(&[]);
    let mut w = connect(&b).await;
    let h = w.call(&handshake("PLAIN"), 0).await;
    assert_eq!(h.error_code, 0);
    w.send_raw(&plain_token("alice", "alice-secret")).await;
    let reply = w.read_frame().await.expect("a raw server token");
    assert!(reply.is_empty(), "PLAIN's server token is empty: {reply:?}");
    metadata_served(&mut w).await;
}

#[tokio::test]
async fn handshake_v0_with_a_bad_password_closes_after_the_delay_without_an_error_frame() {
    let (_tmp, b) = start(&["--connection-failed-authentication-delay-ms", "300"]);
    let mut w = connect(&b).await;
    let h = w.call(&handshake("PLAIN"), 0).await;
    assert_eq!(h.error_code, 0);
    w.send_raw(&plain_token("alice", "wrong")).await;
    let took = w.closed_silently().await;
    assert!(took >= Duration::from_millis(300), "closed after {took:?}");
    b.await_metric(FAILED, 1).await;
}

#[tokio::test]
async fn a_wrong_password_is_answered_58_after_the_delay_then_closed_and_counted() {
    let (_tmp, b) = start(&["--connection-failed-authentication-delay-ms", "300"]);
    for (mech, version) in [("PLAIN", 2), ("SCRAM-SHA-512", 2), ("PLAIN", 0)] {
        let mut w = connect(&b).await;
        let h = w.call(&handshake(mech), 1).await;
        assert_eq!(h.error_code, 0);
        let start = Instant::now();
        let r = if mech == "PLAIN" {
            w.call(&token(&plain_token("alice", "wrong")), version)
                .await
        } else {
            scram_exchange(&mut w, mech, "alice", "wrong").await
        };
        let took = start.elapsed();
        assert_eq!(r.error_code, 58, "{mech} v{version}: {r:?}");
        assert!(
            took >= Duration::from_millis(300),
            "answered after {took:?}"
        );
        let msg = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        assert!(
            msg.contains("Authentication failed"),
            "a generic message: {msg}"
        );
        w.closed_silently().await;
    }
    b.await_metric(FAILED, 3).await;
    // An unknown user fails the same way (no user enumeration).
    let mut w = connect(&b).await;
    let r = scram_login(&mut w, "SCRAM-SHA-512", "mallory", "x").await;
    assert_eq!(r.error_code, 58);
    assert!(
        r.error_message
            .map(|m| m.to_string())
            .unwrap_or_default()
            .contains("invalid credentials")
    );
}

#[tokio::test]
async fn an_unknown_mechanism_is_answered_33_with_the_enabled_list_then_closed() {
    let (_tmp, b) = start(&["--sasl-mechanisms", "PLAIN,SCRAM-SHA-512"]);
    for mech in ["GSSAPI", "SCRAM-SHA-512-PLUS", "SCRAM-SHA-256", "plain", ""] {
        let mut w = connect(&b).await;
        let h = w.call(&handshake(mech), 1).await;
        assert_eq!(h.error_code, 33, "{mech:?}: {h:?}");
        assert_eq!(
            h.mechanisms
                .iter()
                .map(|m| m.to_string())
                .collect::<Vec<_>>(),
            ["PLAIN", "SCRAM-SHA-512"]
        );
        w.closed_silently().await;
    }
    b.await_metric(FAILED, 5).await;
}

#[tokio::test]
async fn sasl_authenticate_before_the_handshake_is_answered_34_then_closed() {
    let (_tmp, b) = start(&[]);
    let mut w = connect(&b).await;
    let r = w
        .call(&token(&plain_token("alice", "alice-secret")), 2)
        .await;
    assert_eq!(r.error_code, 34, "{r:?}");
    w.closed_silently().await;
}

#[tokio::test]
async fn other_apis_before_authentication_close_the_connection_without_an_answer() {
    let (_tmp, b) = start(&[]);
    let mut w = connect(&b).await;
    assert!(w.try_call(&metadata(), 12).await.is_none());
    let mut w = connect(&b).await;
    let produce = ProduceRequest::default().with_acks(1).with_timeout_ms(1000);
    assert!(w.try_call(&produce, 9).await.is_none());
    // After the handshake, before SaslAuthenticate: the same.
    let mut w = connect(&b).await;
    assert_eq!(w.call(&handshake("PLAIN"), 1).await.error_code, 0);
    assert!(w.try_call(&metadata(), 12).await.is_none());
    // The broker still serves.
    let mut w = connect(&b).await;
    assert_eq!(
        plain_login(&mut w, "bob", "bob-secret", 2).await.error_code,
        0
    );
    metadata_served(&mut w).await;
}

#[tokio::test]
async fn malformed_scram_tokens_fail_with_58_and_the_broker_keeps_serving() {
    let (_tmp, b) = start(&["--connection-failed-authentication-delay-ms", "10"]);
    let garbage: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\xff\xfe\x00garbage".to_vec(),
        b"p=tls-unique,,n=alice,r=abcdef".to_vec(),
        b"p=tls-server-end-point,,n=alice,r=abcdef".to_vec(),
        b"n,,n=alice".to_vec(),
        b"n,,".to_vec(),
        b"n,,n=alice,r=abc,".to_vec(),
        b"n,a,n=alice,r=abc".to_vec(),
        b"y,,n".to_vec(),
        vec![b'n'; 100_000],
    ];
    for (i, first) in garbage.iter().enumerate() {
        let mut w = connect(&b).await;
        assert_eq!(w.call(&handshake("SCRAM-SHA-512"), 1).await.error_code, 0);
        let r = w.call(&token(first), 2).await;
        assert_eq!(r.error_code, 58, "token {i}: {r:?}");
        w.closed_silently().await;
    }
    // A client-first the server answers (an escaped or unknown name, an
    // authzid, extensions), then a bad client-final (wrong nonce,
    // truncated, a trailing comma, a bad proof encoding).
    let firsts = [
        &b"n,,n=alice,r=clientnonce"[..],
        b"n,,n=al=3Dice,r=clientnonce",
        b"n,a=bob,n=alice,r=clientnonce",
        b"n,,n=alice,r=clientnonce,m=mandatory",
    ];
    for (first, last) in firsts.iter().cycle().zip([
        &b"c=biws,r=not-the-nonce,p=AAAA"[..],
        b"c=biws",
        b"c=biws,r=",
        b"c=biws,r=clientnonce,p=AAAA,",
        b"c=biws,r=clientnonce,,p=AAAA",
        b"c=biws,r=clientnonce,p=!!!!",
        b"\0\0\0",
        b"",
    ]) {
        let mut w = connect(&b).await;
        assert_eq!(w.call(&handshake("SCRAM-SHA-512"), 1).await.error_code, 0);
        let r = w.call(&token(first), 2).await;
        assert_eq!(r.error_code, 0, "{r:?}");
        assert!(r.auth_bytes.starts_with(b"r=clientnonce"));
        let r = w.call(&token(last), 2).await;
        assert_eq!(r.error_code, 58, "{last:?}: {r:?}");
        w.closed_silently().await;
    }
    let mut w = connect(&b).await;
    let r = scram_login(&mut w, "SCRAM-SHA-512", "alice", "alice-secret").await;
    assert_eq!(r.error_code, 0);
    metadata_served(&mut w).await;
}

#[tokio::test]
async fn an_oversize_frame_before_authentication_closes_the_connection_at_once() {
    let (_tmp, b) = start(&["--sasl-server-max-receive-size", "4096"]);
    // Only the size prefix: a broker that waited for (or allocated) the
    // body would neither answer nor close.
    for size in [4097_i32, 1 << 20, 0x7fff_ffff, -1] {
        let mut w = connect(&b).await;
        w.send_bytes(&size.to_be_bytes()).await;
        let took = w.closed_silently().await;
        assert!(took < Duration::from_secs(2), "size {size}: {took:?}");
    }
    // After the handshake too.
    let mut w = connect(&b).await;
    assert_eq!(w.call(&handshake("PLAIN"), 1).await.error_code, 0);
    w.send_bytes(&0x7fff_ffff_i32.to_be_bytes()).await;
    w.closed_silently().await;
    // Once authenticated, the usual limit applies: a 10 KB token-free
    // request is fine.
    let mut w = connect(&b).await;
    assert_eq!(
        plain_login(&mut w, "alice", "alice-secret", 2)
            .await
            .error_code,
        0
    );
    let names: Vec<_> = (0..1000)
        .map(|i| {
            metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(
                StrBytes::from_string(format!("topic-{i:05}")),
            )))
        })
        .collect();
    let m = w
        .call(
            &MetadataRequest::default()
                .with_topics(Some(names))
                .with_allow_auto_topic_creation(false),
            12,
        )
        .await;
    assert_eq!(m.topics.len(), 1000);
}

#[tokio::test]
async fn a_client_that_never_finishes_authenticating_is_closed_at_the_timeout() {
    let (_tmp, b) = start(&["--authentication-timeout-ms", "500"]);
    // Silent after connecting.
    let mut w = connect(&b).await;
    let took = w.closed_silently().await;
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(5),
        "{took:?}"
    );
    // Handshake, then nothing.
    let mut w = connect(&b).await;
    let start = Instant::now();
    assert_eq!(w.call(&handshake("SCRAM-SHA-512"), 1).await.error_code, 0);
    w.closed_silently().await;
    assert!(start.elapsed() < Duration::from_secs(5));
    // Busy with ApiVersions, never authenticating.
    let mut w = connect(&b).await;
    let start = Instant::now();
    loop {
        match w.try_call(&support::api_versions_v3(), 3).await {
            Some(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            None => break,
        }
        assert!(start.elapsed() < Duration::from_secs(5), "never closed");
    }
    // Half a frame, never finished.
    let mut w = connect(&b).await;
    w.send_bytes(&100_i32.to_be_bytes()).await;
    w.send_bytes(b"abc").await;
    w.closed_silently().await;
    b.await_metric("kaas_sasl_sessions_expired_total", 1).await;
    // A client that does authenticate in time is not closed after the
    // deadline.
    let mut w = connect(&b).await;
    assert_eq!(
        plain_login(&mut w, "alice", "alice-secret", 2)
            .await
            .error_code,
        0
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    metadata_served(&mut w).await;
}

#[tokio::test]
async fn the_session_lifetime_is_returned_and_a_request_after_expiry_closes() {
    let (_tmp, b) = start(&["--connections-max-reauth-ms", "1000"]);
    let mut w = connect(&b).await;
    let start = Instant::now();
    let r = plain_login(&mut w, "alice", "alice-secret", 2).await;
    assert_eq!(r.session_lifetime_ms, 1000);
    metadata_served(&mut w).await;
    // The session ends 1 s after authentication: wait for it to pass.
    tokio::time::sleep(Duration::from_millis(1100).saturating_sub(start.elapsed())).await;
    assert!(
        w.try_call(&metadata(), 12).await.is_none(),
        "served after expiry"
    );
    b.await_metric("kaas_sasl_sessions_expired_total", 1).await;
    // SaslAuthenticate v0 has no lifetime field; the session still ends.
    let mut w = connect(&b).await;
    let r = plain_login(&mut w, "alice", "alice-secret", 0).await;
    assert_eq!(r.session_lifetime_ms, 0);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(w.try_call(&metadata(), 12).await.is_none());
}

#[tokio::test]
async fn reauthentication_on_the_same_connection_extends_the_session() {
    let (_tmp, b) = start(&["--connections-max-reauth-ms", "1000"]);
    for mech in ["PLAIN", "SCRAM-SHA-512"] {
        let mut w = connect(&b).await;
        let first = Instant::now();
        let r = if mech == "PLAIN" {
            plain_login(&mut w, "alice", "alice-secret", 2).await
        } else {
            scram_login(&mut w, mech, "alice", "alice-secret").await
        };
        assert_eq!(r.error_code, 0);
        tokio::time::sleep(Duration::from_millis(600)).await;
        let r = if mech == "PLAIN" {
            plain_login(&mut w, "alice", "alice-secret", 2).await
        } else {
            scram_login(&mut w, mech, "alice", "alice-secret").await
        };
        assert_eq!(r.error_code, 0, "{mech} re-authentication: {r:?}");
        assert_eq!(r.session_lifetime_ms, 1000);
        // Past the first session's end, within the second's.
        tokio::time::sleep(Duration::from_millis(1200).saturating_sub(first.elapsed())).await;
        metadata_served(&mut w).await;
    }
}

#[tokio::test]
async fn reauthenticating_as_another_user_fails_and_closes() {
    let (_tmp, b) = start(&["--connections-max-reauth-ms", "10000"]);
    let mut w = connect(&b).await;
    assert_eq!(
        plain_login(&mut w, "alice", "alice-secret", 2)
            .await
            .error_code,
        0
    );
    let r = plain_login(&mut w, "bob", "bob-secret", 2).await;
    assert_eq!(r.error_code, 58, "{r:?}");
    assert_eq!(
        r.error_message.map(|m| m.to_string()).as_deref(),
        Some("Cannot change principals during re-authentication")
    );
    w.closed_silently().await;
}

#[tokio::test]
async fn sasl_apis_on_a_plaintext_listener_are_answered_illegal_sasl_state() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    user_set(&data, "SCRAM-SHA-512", "alice", "alice-secret");
    let b = Secured::spawn(&data, &["PLAIN=PLAINTEXT://127.0.0.1:0"], &[], "warn");
    let mut w = Wire::tcp(b.addr("PLAIN")).await;
    for v in 0..=1 {
        assert_eq!(w.call(&handshake("PLAIN"), v).await.error_code, 34);
    }
    for v in 0..=2 {
        let r = w
            .call(&token(&plain_token("alice", "alice-secret")), v)
            .await;
        assert_eq!(r.error_code, 34);
    }
    metadata_served(&mut w).await;
}

fn salted(mech: i8, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    match mech {
        1 => {
            let mut out = vec![0u8; 32];
            pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password.as_bytes(), salt, iterations, &mut out);
            out
        }
        _ => {
            let mut out = vec![0u8; 64];
            pbkdf2::pbkdf2_hmac::<sha2::Sha512>(password.as_bytes(), salt, iterations, &mut out);
            out
        }
    }
}

fn upsertion(name: &str, mech: i8, password: &str, iterations: i32) -> ScramCredentialUpsertion {
    let salt = b"a-salt-of-the-client's-choosing".to_vec();
    ScramCredentialUpsertion::default()
        .with_name(StrBytes::from_string(name.into()))
        .with_mechanism(mech)
        .with_iterations(iterations)
        .with_salted_password(Bytes::from(salted(
            mech,
            password,
            &salt,
            iterations.max(1) as u32,
        )))
        .with_salt(Bytes::from(salt))
}

fn users(names: &[&str]) -> DescribeUserScramCredentialsRequest {
    DescribeUserScramCredentialsRequest::default().with_users(Some(
        names
            .iter()
            .map(|n| UserName::default().with_name(StrBytes::from_string(n.to_string())))
            .collect(),
    ))
}

#[tokio::test]
async fn kip554_describe_lists_mechanisms_and_iterations_and_flags_unknown_and_duplicate_users() {
    // ACLs are on (a SASL listener): the admin is a super user, bob is not.
    let (_tmp, b) = start(&["--super-user", "User:alice"]);
    let mut bob = connect(&b).await;
    assert_eq!(
        plain_login(&mut bob, "bob", "bob-secret", 2)
            .await
            .error_code,
        0
    );
    let refused = bob
        .call(&DescribeUserScramCredentialsRequest::default(), 0)
        .await;
    assert_eq!(refused.error_code, 31, "DESCRIBE on the cluster is needed");
    assert!(refused.results.is_empty());
    let mut w = connect(&b).await;
    assert_eq!(
        plain_login(&mut w, "alice", "alice-secret", 2)
            .await
            .error_code,
        0
    );
    let all = w
        .call(&DescribeUserScramCredentialsRequest::default(), 0)
        .await;
    assert_eq!(all.error_code, 0);
    let mut listed: Vec<(String, Vec<(i8, i32)>)> = all
        .results
        .iter()
        .map(|r| {
            let mut m: Vec<_> = r
                .credential_infos
                .iter()
                .map(|c| (c.mechanism, c.iterations))
                .collect();
            m.sort();
            (r.user.to_string(), m)
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            ("alice".to_owned(), vec![(1, 4096), (2, 4096)]),
            ("bob".to_owned(), vec![(2, 4096)])
        ]
    );
    let r = w
        .call(&users(&["bob", "nobody", "alice", "alice"]), 0)
        .await;
    let code = |u: &str| {
        r.results
            .iter()
            .find(|x| x.user.as_str() == u)
            .map(|x| x.error_code)
    };
    assert_eq!(code("bob"), Some(0));
    assert_eq!(code("nobody"), Some(91));
    assert_eq!(code("alice"), Some(92));
}

#[tokio::test]
async fn kip554_alter_upserts_a_credential_a_new_connection_logs_in_with_and_refuses_bad_changes() {
    let (_tmp, b) = start(&["--super-user", "User:alice"]);
    let mut w = connect(&b).await;
    assert_eq!(
        plain_login(&mut w, "alice", "alice-secret", 2)
            .await
            .error_code,
        0
    );
    let alter = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        upsertion("carol", 2, "carol-secret", 8192),
        upsertion("bob", 2, "bob-new", 4096),
        upsertion("weak", 2, "x", 1000),
        upsertion("greedy", 1, "x", 20_000),
    ]);
    let r = w.call(&alter, 0).await;
    let code = |u: &str| {
        r.results
            .iter()
            .find(|x| x.user.as_str() == u)
            .map(|x| x.error_code)
    };
    assert_eq!(code("carol"), Some(0), "{r:?}");
    assert_eq!(code("bob"), Some(0));
    assert_eq!(code("weak"), Some(93));
    assert_eq!(code("greedy"), Some(93));
    // New logins see the new credentials, with either mechanism family.
    for mech in ["SCRAM-SHA-512", "PLAIN"] {
        let mut n = connect(&b).await;
        let r = if mech == "PLAIN" {
            plain_login(&mut n, "carol", "carol-secret", 2).await
        } else {
            scram_login(&mut n, mech, "carol", "carol-secret").await
        };
        assert_eq!(r.error_code, 0, "{mech}: {r:?}");
    }
    let mut n = connect(&b).await;
    assert_eq!(
        scram_login(&mut n, "SCRAM-SHA-512", "bob", "bob-secret")
            .await
            .error_code,
        58
    );
    let mut n = connect(&b).await;
    assert_eq!(
        scram_login(&mut n, "SCRAM-SHA-512", "bob", "bob-new")
            .await
            .error_code,
        0
    );
    let d = w.call(&users(&["carol"]), 0).await;
    assert_eq!(d.results[0].credential_infos[0].iterations, 8192);
    // Deleting: a missing credential is 91, an existing one goes.
    let del = |name: &str, mech: i8| {
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(name.into()))
            .with_mechanism(mech)
    };
    let r = w
        .call(
            &AlterUserScramCredentialsRequest::default().with_deletions(vec![
                del("carol", 1),
                del("nobody", 2),
                del("bob", 2),
            ]),
            0,
        )
        .await;
    let code = |u: &str| {
        r.results
            .iter()
            .find(|x| x.user.as_str() == u)
            .map(|x| x.error_code)
    };
    assert_eq!(code("carol"), Some(91), "carol has no SCRAM-SHA-256");
    assert_eq!(code("nobody"), Some(91));
    assert_eq!(code("bob"), Some(0));
    let mut n = connect(&b).await;
    assert_eq!(
        scram_login(&mut n, "SCRAM-SHA-512", "bob", "bob-new")
            .await
            .error_code,
        58
    );
    // The same user twice in one request.
    let r = w
        .call(
            &AlterUserScramCredentialsRequest::default()
                .with_deletions(vec![del("carol", 2)])
                .with_upsertions(vec![upsertion("carol", 2, "y", 4096)]),
            0,
        )
        .await;
    assert_eq!(r.results[0].error_code, 92);
}

#[tokio::test]
async fn a_reauthentication_started_and_never_finished_does_not_extend_the_session() {
    let (_tmp, b) = start(&["--connections-max-reauth-ms", "1000"]);
    let mut w = connect(&b).await;
    let start = Instant::now();
    assert_eq!(
        plain_login(&mut w, "alice", "alice-secret", 2)
            .await
            .error_code,
        0
    );
    // The re-authentication's SaslHandshake, and no SaslAuthenticate.
    assert_eq!(w.call(&handshake("PLAIN"), 1).await.error_code, 0);
    metadata_served(&mut w).await;
    tokio::time::sleep(Duration::from_millis(1100).saturating_sub(start.elapsed())).await;
    assert!(
        w.try_call(&metadata(), 12).await.is_none(),
        "served after the session ended"
    );
}

/// Per-listener addresses: Metadata and FindCoordinator give a client the
/// address of the listener it came in on.
#[tokio::test]
async fn each_listener_advertises_its_own_address() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    user_set(&data, "SCRAM-SHA-512", "alice", "alice-secret");
    let b = Secured::spawn(
        &data,
        &["PLAIN=PLAINTEXT://127.0.0.1:0", SASL],
        &["--super-user", "User:alice", "--authorizer", "none"],
        "warn",
    );
    for (listener, login) in [("PLAIN", false), ("SASL", true)] {
        let addr = b.addr(listener).to_string();
        let port: i32 = addr.rsplit_once(':').unwrap().1.parse().unwrap();
        let mut w = Wire::tcp(&addr).await;
        if login {
            assert_eq!(
                plain_login(&mut w, "alice", "alice-secret", 2)
                    .await
                    .error_code,
                0
            );
        }
        let m = w.call(&metadata(), 12).await;
        assert_eq!(
            m.brokers.iter().map(|n| n.port).collect::<Vec<_>>(),
            vec![port],
            "Metadata on {listener}"
        );
        let fc = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_static_str("g")]);
        let r = w.call(&fc, 4).await;
        assert_eq!(r.coordinators[0].error_code, 0);
        assert_eq!(
            r.coordinators[0].port, port,
            "FindCoordinator on {listener}"
        );
    }
}
