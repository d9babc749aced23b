//! Hostile connections (issue 13, items 1, 5 and 8): a tagged-field flood,
//! half-sent frames, idle connections and large frames racing for the
//! queued-request budget, all over raw sockets against an in-process broker.

mod support;

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
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
    ApiVersionsResponse::decode(&mut resp, 3).unwrap().error_code
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
    let resp = c.call(&ApiVersionsRequest::default(), 3).await;
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
