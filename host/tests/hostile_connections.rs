//! Hostile connections: a tagged-field flood,
//! half-sent frames, idle connections and large frames racing for the
//! queued-request budget, all over raw sockets against an in-process broker.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use support::{Client, InProcess};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use kaas::log::FsyncMode;

fn varint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// An ApiVersions v3 request header (v2) up to, not including, its tagged
/// fields.
fn api_versions_header(correlation: i32) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_i16(18);
    b.put_i16(3);
    b.put_i32(correlation);
    b.put_i16(4);
    b.put_slice(b"test");
    b
}

/// An ApiVersions v3 body whose client software name is `name_len` bytes.
fn api_versions_body(b: &mut BytesMut, name_len: usize) {
    varint(b, name_len as u32 + 1);
    b.put_bytes(b'a', name_len);
    varint(b, 2);
    b.put_slice(b"1");
    varint(b, 0);
}

/// Size prefix + `body`.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(4 + body.len());
    f.extend_from_slice(&(body.len() as i32).to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// A whole ApiVersions v3 frame of about `bytes` bytes.
fn api_versions_frame(correlation: i32, bytes: usize) -> Vec<u8> {
    let mut b = api_versions_header(correlation);
    varint(&mut b, 0);
    api_versions_body(&mut b, bytes.saturating_sub(32));
    framed(&b)
}

/// Reads one response frame (None: closed, or nothing within `wait`).
async fn read_response(s: &mut TcpStream, wait: Duration) -> Option<Bytes> {
    tokio::time::timeout(wait, async {
        let mut size = [0u8; 4];
        s.read_exact(&mut size).await.ok()?;
        let mut buf = vec![0u8; i32::from_be_bytes(size) as usize];
        s.read_exact(&mut buf).await.ok()?;
        Some(Bytes::from(buf))
    })
    .await
    .ok()
    .flatten()
}

/// The error code of an ApiVersions v3 response with this correlation id.
fn api_versions_error(mut resp: Bytes, correlation: i32) -> i16 {
    let header = ResponseHeader::decode(&mut resp, 0).unwrap();
    assert_eq!(header.correlation_id, correlation);
    ApiVersionsResponse::decode(&mut resp, 3)
        .unwrap()
        .error_code
}

/// Waits until the broker closes `s` (reads EOF, or a reset), or `wait` ends.
async fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    let mut sink = [0u8; 4096];
    tokio::time::timeout(wait, async {
        loop {
            match s.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

async fn wait_for(what: &str, wait: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + wait;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A field of /proc/self/status, in KiB.
fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

async fn served(addr: &str) {
    let mut c = Client::connect(addr).await;
    let resp = c.call(&support::api_versions_v3(), 3).await;
    assert_eq!(resp.error_code, 0);
}

/// A header with `n` empty tagged fields of distinct tags (0..n).
fn header_with_tagged_fields(n: u32) -> BytesMut {
    let mut b = api_versions_header(1);
    varint(&mut b, n);
    for tag in 0..n {
        varint(&mut b, tag);
        varint(&mut b, 0);
    }
    b
}

#[test]
fn a_struct_carries_at_most_64_tagged_fields() {
    let mut ok = header_with_tagged_fields(64).freeze();
    let header = RequestHeader::decode(&mut ok, 2).expect("64 tagged fields decode");
    assert_eq!(header.unknown_tagged_fields.len(), 64);
    let mut flood = header_with_tagged_fields(65).freeze();
    let err = RequestHeader::decode(&mut flood, 2).expect_err("65 tagged fields are refused");
    assert!(err.to_string().contains("tagged fields"), "{err}");
    // The same bound holds in a body struct.
    let mut body = BytesMut::new();
    api_versions_body(&mut body, 1);
    body.truncate(body.len() - 1);
    varint(&mut body, 65);
    for tag in 0..65 {
        varint(&mut body, tag);
        varint(&mut body, 0);
    }
    assert!(ApiVersionsRequest::decode(&mut body.freeze(), 3).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tagged_field_flood_is_refused_without_holding_memory() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start(dir.path(), FsyncMode::Never).await;
    const FLOOD: usize = 32 << 20;
    // Empty tagged fields of distinct, increasing tags (4 bytes each from
    // tag 2^14 on) until the frame is FLOOD bytes.
    let mut body = api_versions_header(7);
    let n = (FLOOD / 4) as u32;
    varint(&mut body, n);
    for tag in 0..n {
        varint(&mut body, tag);
        varint(&mut body, 0);
    }
    api_versions_body(&mut body, 1);
    let frame = framed(&body);
    drop(body);
    let before = proc_status_kib("VmHWM");
    let mut s = TcpStream::connect(b.addr).await.unwrap();
    s.write_all(&frame).await.unwrap();
    // Refused (closed) or answered, the frame must not stay in memory
    // many times over.
    let _ = read_response(&mut s, Duration::from_secs(30)).await;
    let grown = (proc_status_kib("VmHWM").saturating_sub(before)) << 10;
    assert!(
        grown < 3 * FLOOD as u64,
        "the peak RSS grew by {} MiB for a {} MiB frame",
        grown >> 20,
        FLOOD >> 20
    );
    served(&b.addr.to_string()).await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_frames_do_not_lock_out_new_clients() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |c| c.max_connections = 8).await;
    let mut stalled = Vec::new();
    for _ in 0..12 {
        let mut s = TcpStream::connect(b.addr).await.unwrap();
        s.write_all(&[0, 0]).await.unwrap();
        stalled.push(s);
    }
    let m = &b.broker.metrics;
    wait_for(
        "the broker to take 8 connections",
        Duration::from_secs(10),
        || m.connections.load(Ordering::Relaxed) >= 8,
    )
    .await;
    let started = Instant::now();
    let mut s = TcpStream::connect(b.addr).await.unwrap();
    s.write_all(&api_versions_frame(5, 64)).await.unwrap();
    let resp = read_response(&mut s, Duration::from_secs(5))
        .await
        .expect("a new client is answered while half-sent frames fill every slot");
    assert_eq!(api_versions_error(resp, 5), 0);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(m.connections_evicted.load(Ordering::Relaxed) >= 1);
    // The evicted connections were closed: the oldest stalled one first.
    assert!(closed_within(&mut stalled[0], Duration::from_secs(5)).await);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_frames_are_evicted_before_an_idle_client_that_sent_whole_ones() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |c| c.max_connections = 8).await;
    // A client that was answered and then went quiet: its last progress is
    // older than any half-sent frame's.
    let mut quiet = TcpStream::connect(b.addr).await.unwrap();
    quiet.write_all(&api_versions_frame(1, 64)).await.unwrap();
    let resp = read_response(&mut quiet, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(api_versions_error(resp, 1), 0);
    let m = &b.broker.metrics;
    let mut stalled = Vec::new();
    for _ in 0..12 {
        let mut s = TcpStream::connect(b.addr).await.unwrap();
        s.write_all(&[0, 0]).await.unwrap();
        stalled.push(s);
    }
    wait_for(
        "the half-sent frames to take every other slot and evict",
        Duration::from_secs(10),
        || m.connections_evicted.load(Ordering::Relaxed) >= 5,
    )
    .await;
    quiet.write_all(&api_versions_frame(2, 64)).await.unwrap();
    let resp = read_response(&mut quiet, Duration::from_secs(5))
        .await
        .expect("the quiet client keeps its connection; half-sent frames were evicted instead");
    assert_eq!(api_versions_error(resp, 2), 0);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_frame_is_closed_after_the_request_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let timeout = Duration::from_millis(300);
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |c| {
        c.request_timeout = timeout
    })
    .await;
    // Two bytes of the size prefix; a whole size prefix and part of a body.
    let mut in_size = TcpStream::connect(b.addr).await.unwrap();
    in_size.write_all(&[0, 0]).await.unwrap();
    let mut in_body = TcpStream::connect(b.addr).await.unwrap();
    let frame = api_versions_frame(3, 64);
    in_body.write_all(&frame[..10]).await.unwrap();
    let started = Instant::now();
    assert!(closed_within(&mut in_size, Duration::from_secs(5)).await);
    assert!(closed_within(&mut in_body, Duration::from_secs(5)).await);
    assert!(started.elapsed() >= timeout - Duration::from_millis(50));
    assert_eq!(b.broker.metrics.request_timeouts.load(Ordering::Relaxed), 2);
    served(&b.addr.to_string()).await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_after_connections_max_idle() {
    let dir = tempfile::tempdir().unwrap();
    let idle = Duration::from_millis(400);
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |c| {
        c.connections_max_idle = idle
    })
    .await;
    let mut s = TcpStream::connect(b.addr).await.unwrap();
    s.write_all(&api_versions_frame(1, 64)).await.unwrap();
    let resp = read_response(&mut s, Duration::from_secs(5)).await.unwrap();
    assert_eq!(api_versions_error(resp, 1), 0);
    let answered = Instant::now();
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
    assert!(answered.elapsed() >= idle - Duration::from_millis(50));
    assert_eq!(
        b.broker
            .metrics
            .connections_idle_closed
            .load(Ordering::Relaxed),
        1
    );
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_longer_than_connections_max_idle_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |c| {
        c.connections_max_idle = Duration::from_millis(300)
    })
    .await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let topic = TopicName(StrBytes::from_static_str("idle-poll"));
    let created = c
        .call(
            &CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic.clone())
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
            5,
        )
        .await;
    assert_eq!(created.topics[0].error_code, 0);
    let started = Instant::now();
    let fetch = FetchRequest::default()
        .with_max_wait_ms(1500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic)
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let resp = c.call(&fetch, 12).await;
    assert_eq!(resp.error_code, 0);
    assert!(started.elapsed() >= Duration::from_millis(1400));
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_frames_wait_for_the_queued_request_budget() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |c| {
        c.queued_max_request_bytes = 1 << 20
    })
    .await;
    let m = &b.broker.metrics;
    let frame_a = api_versions_frame(1, 700 << 10);
    let frame_b = api_versions_frame(2, 700 << 10);
    let body_len = (frame_a.len() - 4) as u64;
    // A sends all but the last bytes of its frame and holds its share.
    let mut a = TcpStream::connect(b.addr).await.unwrap();
    a.write_all(&frame_a[..frame_a.len() - 10]).await.unwrap();
    wait_for("A to hold the budget", Duration::from_secs(5), || {
        m.queued_request_bytes.load(Ordering::Relaxed) == body_len
    })
    .await;
    // B's whole frame waits: the budget cannot hold both.
    let mut bb = TcpStream::connect(b.addr).await.unwrap();
    bb.write_all(&frame_b).await.unwrap();
    assert!(
        read_response(&mut bb, Duration::from_millis(500))
            .await
            .is_none(),
        "B was served while A held the budget"
    );
    assert_eq!(m.queued_request_bytes.load(Ordering::Relaxed), body_len);
    // A completes: A then B are answered.
    a.write_all(&frame_a[frame_a.len() - 10..]).await.unwrap();
    let ra = read_response(&mut a, Duration::from_secs(5)).await.unwrap();
    assert_eq!(api_versions_error(ra, 1), 0);
    let rb = read_response(&mut bb, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(api_versions_error(rb, 2), 0);
    wait_for("the budget to be free", Duration::from_secs(5), || {
        m.queued_request_bytes.load(Ordering::Relaxed) == 0
    })
    .await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_larger_than_the_queued_request_budget_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |c| {
        c.queued_max_request_bytes = 1 << 20
    })
    .await;
    let mut s = TcpStream::connect(b.addr).await.unwrap();
    // Only the size prefix: the broker refuses before reading the body.
    s.write_all(&(2i32 << 20).to_be_bytes()).await.unwrap();
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
    served(&b.addr.to_string()).await;
    b.stop().await;
}

/// A `kaas broker` child whose fd table holds 64 files: connections beyond
/// that make every `accept` fail with EMFILE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_errors_back_off_and_are_logged_at_most_once_a_second() {
    use std::io::BufRead;
    if std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: prlimit (util-linux) is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let mut child = std::process::Command::new("prlimit")
        .arg("--nofile=64:64")
        .arg(env!("CARGO_BIN_EXE_kaas"))
        .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--policy")
        .arg(support::wasm("kaas_policy_apache37.wasm"))
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let addr = std::io::BufReader::new(stdout)
        .lines()
        .find_map(|l| {
            Some(
                l.ok()?
                    .strip_prefix("kaas broker listening on ")?
                    .to_string(),
            )
        })
        .expect("the broker listens");
    let failures = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("accept failed"))
            .count()
    };
    let mut held = Vec::new();
    for _ in 0..100 {
        held.push(TcpStream::connect(&addr).await.unwrap());
    }
    wait_for("an accept to fail", Duration::from_secs(10), || {
        failures() > 0
    })
    .await;
    let first = Instant::now();
    // An observation window: the old loop logged ~500,000 lines a second.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lines = failures();
    let window = first.elapsed().as_secs() + 1;
    assert!(
        lines as u64 <= window + 1,
        "{lines} 'accept failed' lines in about {window} s"
    );
    drop(held);
    // With the fds back, the backoff (at most 1 s) lets a new client in.
    let started = Instant::now();
    served(&addr).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_no_responses_is_closed_after_the_request_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |c| {
        c.request_timeout = Duration::from_millis(500)
    })
    .await;
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(b.addr).await.unwrap();
    // ~20,000 pipelined ApiVersions: ~9 MB of responses nobody reads.
    let mut requests = Vec::new();
    for i in 0..20_000 {
        requests.extend_from_slice(&api_versions_frame(i, 64));
    }
    let (mut rd, mut wr) = s.split();
    let send = wr.write_all(&requests);
    let m = &b.broker.metrics;
    let timed_out = wait_for(
        "a response write to time out",
        Duration::from_secs(20),
        || m.request_timeouts.load(Ordering::Relaxed) == 1,
    );
    // The broker stops reading requests once its writer is stuck, so the
    // send may never finish: wait for the timeout alone.
    tokio::select! {
        _ = timed_out => {}
        _ = async { let _ = send.await; std::future::pending::<()>().await } => {}
    }
    let mut sink = vec![0u8; 1 << 16];
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match rd.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the connection stays open");
    served(&b.addr.to_string()).await;
    b.stop().await;
}
