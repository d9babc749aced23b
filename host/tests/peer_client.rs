//! The inter-broker client (`kaas::cluster::peer`) against
//! the in-process broker, a counting frame proxy in front of it, and fake
//! peers that never answer or claim a huge response.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kaas::cluster::peer::{PeerError, Peers};
use kaas::log::FsyncMode;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use support::InProcess;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn read_frame(sock: &mut TcpStream) -> Option<Vec<u8>> {
    let mut size = [0u8; 4];
    sock.read_exact(&mut size).await.ok()?;
    let len = usize::try_from(i32::from_be_bytes(size)).ok()?;
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body).await.ok()?;
    let mut frame = size.to_vec();
    frame.extend_from_slice(&body);
    Some(frame)
}

/// A proxy in front of `upstream` relaying one request frame and then one
/// response frame at a time. It counts the connections it accepts, and it
/// closes the first one after `first_lives` exchanges (None: never).
struct Proxy {
    addr: String,
    accepted: Arc<AtomicUsize>,
    closed: tokio::sync::watch::Receiver<usize>,
}

impl Proxy {
    async fn start(upstream: std::net::SocketAddr, first_lives: Option<usize>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let (closed_tx, closed) = tokio::sync::watch::channel(0usize);
        let closed_tx = Arc::new(closed_tx);
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                let nth = count.fetch_add(1, Ordering::SeqCst);
                let limit = if nth == 0 { first_lives } else { None };
                let closed_tx = closed_tx.clone();
                tokio::spawn(async move {
                    let mut server = TcpStream::connect(upstream).await.unwrap();
                    let mut done = 0usize;
                    while limit.is_none_or(|l| done < l) {
                        let Some(req) = read_frame(&mut client).await else {
                            break;
                        };
                        server.write_all(&req).await.unwrap();
                        let Some(resp) = read_frame(&mut server).await else {
                            break;
                        };
                        if client.write_all(&resp).await.is_err() {
                            break;
                        }
                        done += 1;
                    }
                    drop(client);
                    drop(server);
                    closed_tx.send_modify(|n| *n += 1);
                });
            }
        });
        Proxy {
            addr,
            accepted,
            closed,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

async fn api_versions(peers: &Peers, addr: &str) -> Result<ApiVersionsResponse, PeerError> {
    peers.call(addr, 3, &support::api_versions_v3()).await
}

#[tokio::test]
async fn a_peer_call_round_trips_api_versions_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let addr = b.addr.to_string();
    let peers = Peers::new("kaas-peer-test", Duration::from_secs(5));

    // ApiVersions v3: flexible request header, response header v0.
    let av = api_versions(&peers, &addr).await.unwrap();
    assert_eq!(av.error_code, 0);
    assert!(
        av.api_keys
            .iter()
            .any(|k| k.api_key == 3 && k.max_version >= 12),
        "Metadata v12 listed: {:?}",
        av.api_keys
    );

    // Metadata v12: flexible both ways; the broker names itself.
    let md: MetadataResponse = peers
        .call(&addr, 12, &MetadataRequest::default().with_topics(None))
        .await
        .unwrap();
    assert!(
        md.brokers
            .iter()
            .any(|n| n.port == i32::from(b.addr.port())),
        "the broker is listed: {:?}",
        md.brokers
    );

    // AddPartitionsToTxn v4 (batched, verify-only), the lead's use: a
    // transaction the coordinator does not know is not verified.
    let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s("t-peer")))
            .with_producer_id(ProducerId(7))
            .with_producer_epoch(0)
            .with_verify_only(true)
            .with_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s("no-such-topic")))
                    .with_partitions(vec![0]),
            ]),
    ]);
    let resp: AddPartitionsToTxnResponse = peers.call(&addr, 4, &req).await.unwrap();
    let txn = &resp.results_by_transaction[0];
    assert_eq!(txn.transactional_id.0.as_str(), "t-peer");
    assert_ne!(
        txn.topic_results[0].results_by_partition[0].partition_error_code, 0,
        "an unknown transaction is not verified"
    );
    b.stop().await;
}

/// The lead sends WriteTxnMarkers v1 through the same call; this only
/// proves the request type fits `call` (the broker does not serve key 27).
#[allow(dead_code)]
async fn write_txn_markers_fits(peers: &Peers, addr: &str) -> Result<(), PeerError> {
    let _: WriteTxnMarkersResponse = peers
        .call(addr, 1, &WriteTxnMarkersRequest::default())
        .await?;
    Ok(())
}

#[tokio::test]
async fn idle_connections_are_reused_between_calls() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let proxy = Proxy::start(b.addr, None).await;
    let peers = Peers::new("kaas-peer-test", Duration::from_secs(5));
    for _ in 0..5 {
        api_versions(&peers, &proxy.addr).await.unwrap();
    }
    assert_eq!(
        proxy.accepted(),
        1,
        "five calls in a row share one connection"
    );

    // forget drops it: the next call connects anew, and keeps that one.
    peers.forget(&proxy.addr);
    api_versions(&peers, &proxy.addr).await.unwrap();
    api_versions(&peers, &proxy.addr).await.unwrap();
    assert_eq!(proxy.accepted(), 2);
    b.stop().await;
}

/// A fake peer answering ApiVersions with an empty v3 response. The k-th
/// request it receives (from 0, over all connections) is answered only once
/// `release_at(k)` requests have arrived, so a test can hold calls in
/// flight together. Counts the connections it accepts.
async fn held_peer(release_at: fn(usize) -> usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let (arrived_tx, arrived) = tokio::sync::watch::channel(0usize);
    let arrived_tx = Arc::new(arrived_tx);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let arrived_tx = arrived_tx.clone();
            let mut arrived = arrived.clone();
            tokio::spawn(async move {
                while let Some(req) = read_frame(&mut sock).await {
                    let corr = i32::from_be_bytes(req[8..12].try_into().unwrap());
                    let mut ticket = 0;
                    arrived_tx.send_modify(|n| {
                        ticket = *n;
                        *n += 1;
                    });
                    let at = release_at(ticket);
                    arrived.wait_for(|n| *n >= at).await.unwrap();
                    let mut body = bytes::BytesMut::new();
                    ResponseHeader::default()
                        .with_correlation_id(corr)
                        .encode(&mut body, 0)
                        .unwrap();
                    ApiVersionsResponse::default().encode(&mut body, 3).unwrap();
                    let mut out = (body.len() as i32).to_be_bytes().to_vec();
                    out.extend_from_slice(&body);
                    if sock.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// Spawns `n` ApiVersions calls at once; all must succeed.
async fn burst(peers: &Arc<Peers>, addr: &str, n: usize) {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let peers = peers.clone();
            let addr = addr.to_string();
            tokio::spawn(async move { api_versions(&peers, &addr).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn at_most_four_idle_connections_are_kept_per_peer() {
    // Requests are answered in groups of 8, so each burst of 8 calls holds
    // 8 connections at once.
    let (addr, accepted) = held_peer(|k| (k / 8 + 1) * 8).await;
    let peers = Arc::new(Peers::new("kaas-peer-test", Duration::from_secs(5)));
    burst(&peers, &addr, 8).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 8);
    // 4 were kept idle: the next burst of 8 opens only 4 more.
    burst(&peers, &addr, 8).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 12);
}

#[tokio::test]
async fn at_most_sixteen_calls_are_in_flight_per_peer() {
    // The first 16 requests are answered once all 16 have arrived; a 17th
    // call in flight with them would open a 17th connection.
    let (addr, accepted) = held_peer(|k| if k < 16 { 16 } else { 0 }).await;
    let peers = Arc::new(Peers::new("kaas-peer-test", Duration::from_secs(5)));
    burst(&peers, &addr, 17).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        16,
        "the 17th call waited for a permit and reused a connection"
    );
}

#[tokio::test]
async fn a_silent_peer_times_out_within_the_bound() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let timeout = Duration::from_millis(300);
    let peers = Peers::new("kaas-peer-test", timeout);
    let t0 = Instant::now();
    let r = api_versions(&peers, &addr).await;
    let took = t0.elapsed();
    assert!(matches!(r, Err(PeerError::Timeout(_))), "{r:?}");
    assert!(
        took >= timeout,
        "gave up after {took:?}, before the timeout"
    );
    assert!(
        took < timeout + Duration::from_secs(1),
        "took {took:?}: more than the timeout and slack"
    );
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains(&addr), "the error names the peer: {msg}");
}

#[tokio::test]
async fn a_peer_that_closed_its_connection_is_reconnected() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let mut proxy = Proxy::start(b.addr, Some(1)).await;
    let peers = Peers::new("kaas-peer-test", Duration::from_secs(5));
    api_versions(&peers, &proxy.addr).await.unwrap();
    // The proxy has closed the (now idle) first connection.
    proxy.closed.wait_for(|n| *n >= 1).await.unwrap();
    let r = api_versions(&peers, &proxy.addr).await;
    assert!(r.is_ok(), "the second call connects anew: {r:?}");
    assert_eq!(proxy.accepted(), 2);
    // And the new connection is kept for the next call.
    api_versions(&peers, &proxy.addr).await.unwrap();
    assert_eq!(proxy.accepted(), 2);
    b.stop().await;
}

#[tokio::test]
async fn an_oversize_response_is_refused_without_allocating_it() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut sock, _)) = listener.accept().await {
            if read_frame(&mut sock).await.is_some() {
                // 1 GiB claimed, 8 bytes sent, the connection kept open.
                let mut out = (1i32 << 30).to_be_bytes().to_vec();
                out.extend_from_slice(&[0u8; 8]);
                sock.write_all(&out).await.unwrap();
            }
            held.push(sock);
        }
    });
    let timeout = Duration::from_secs(5);
    let peers = Peers::new("kaas-peer-test", timeout);
    let t0 = Instant::now();
    let r = api_versions(&peers, &addr).await;
    assert!(matches!(r, Err(PeerError::Decode(_))), "{r:?}");
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "refused at once, not after waiting for the body: {:?}",
        t0.elapsed()
    );
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains(&addr), "the error names the peer: {msg}");
}

/// Security: on a SASL_PLAINTEXT inter-broker listener the pool logs in
/// with SASL PLAIN on each new connection; without the login, or with a
/// wrong password, the peer refuses every request but ApiVersions.
#[tokio::test]
async fn a_peer_logs_in_with_sasl_plain_on_a_sasl_listener() {
    let dir = tempfile::tempdir().unwrap();
    let set = std::process::Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["user", "set", "--data-dir"])
        .arg(dir.path())
        .args([
            "--mechanism",
            "SCRAM-SHA-256",
            "--name",
            "broker",
            "--password",
            "inter-secret",
        ])
        .output()
        .unwrap();
    assert!(set.status.success(), "{set:?}");
    let b = support::Process::spawn(
        dir.path(),
        &["--listener", "INTERNAL=SASL_PLAINTEXT://127.0.0.1:0"],
    );
    let metadata = MetadataRequest::default().with_topics(None);

    let peers =
        Peers::new("kaas-peer-test", Duration::from_secs(5)).with_login("broker", "inter-secret");
    let md: MetadataResponse = peers.call(&b.addr, 12, &metadata).await.unwrap();
    assert!(!md.brokers.is_empty());
    // The pooled, logged-in connection is reused.
    let md: MetadataResponse = peers.call(&b.addr, 12, &metadata).await.unwrap();
    assert!(!md.brokers.is_empty());

    let anonymous = Peers::new("kaas-peer-test", Duration::from_secs(5));
    let r: Result<MetadataResponse, _> = anonymous.call(&b.addr, 12, &metadata).await;
    assert!(
        r.is_err(),
        "an unauthenticated Metadata is not answered: {r:?}"
    );

    let wrong = Peers::new("kaas-peer-test", Duration::from_secs(5)).with_login("broker", "nope");
    let r: Result<MetadataResponse, _> = wrong.call(&b.addr, 12, &metadata).await;
    assert!(
        matches!(&r, Err(PeerError::Connect(m)) if m.contains("SaslAuthenticate error 58")),
        "{r:?}"
    );
}
