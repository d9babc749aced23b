//! Hostile batches, fetches and timestamp lookups
//! over a real socket with exact request bytes: corrupt compressed batches
//! are refused and never stored, Fetch honours max_bytes, partition limits
//! and `fetch.max.bytes`, a partition named many times is read once, and
//! timestamp lookups that decompress big batches stall neither other
//! connections nor produces to the same partition.
//!
//! The batches are built here byte by byte (flate2, zstd, lz4, snap), so
//! the tests say exactly what a hostile client sends.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use support::records::{create, name, produce};
use support::{Client, InProcess};

use kaas::log::FsyncMode;

const CORRUPT_MESSAGE: i16 = 2;
const INVALID_RECORD: i16 = 87;

fn list_offsets_request(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default().with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp),
            ]),
    ])
}

/// (error code, offset, timestamp) of ListOffsets for one partition.
async fn list_offset(c: &mut Client, topic: &str, partition: i32, ts: i64) -> (i16, i64, i64) {
    let resp = c.call(&list_offsets_request(topic, partition, ts), 7).await;
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}

fn fetch_request(max_bytes: i32, parts: &[(&str, i32, i64, i32)]) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(
            parts
                .iter()
                .map(|&(topic, partition, offset, max)| {
                    FetchTopic::default()
                        .with_topic(name(topic))
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition(partition)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(max),
                        ])
                })
                .collect(),
        )
}

/// (partition, record bytes) of every partition in a Fetch response.
fn fetched(resp: &FetchResponse) -> Vec<(i32, usize)> {
    resp.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
            (p.partition_index, p.records.as_ref().map_or(0, |r| r.len()))
        })
        .collect()
}

// ---- batches, byte by byte --------------------------------------------------

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let byte = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Records with the given timestamp deltas and values (offset delta = index,
/// no key, no headers).
fn records(values: &[(i64, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (i, (ts_delta, value)) in values.iter().enumerate() {
        let mut r = vec![0u8];
        put_varint(&mut r, *ts_delta);
        put_varint(&mut r, i as i64);
        put_varint(&mut r, -1);
        put_varint(&mut r, value.len() as i64);
        r.extend_from_slice(value);
        put_varint(&mut r, 0);
        put_varint(&mut body, r.len() as i64);
        body.extend_from_slice(&r);
    }
    body
}

fn compress(codec: i16, plain: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match codec {
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(plain).expect("gzip");
            e.finish().expect("gzip")
        }
        2 => snap::raw::Encoder::new()
            .compress_vec(plain)
            .expect("snappy"),
        3 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).expect("lz4");
            e.write_all(plain).expect("lz4");
            let (out, done) = e.finish();
            done.expect("lz4");
            out
        }
        4 => zstd::stream::encode_all(plain, 3).expect("zstd"),
        _ => plain.to_vec(),
    }
}

/// A batch of `count` records (as its header says) with `body` as its
/// (compressed) records, a valid length and CRC.
fn batch(codec: i16, body: &[u8], count: i32, timestamp: i64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((49 + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&codec.to_be_bytes());
    b.extend_from_slice(&(count - 1).to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&count.to_be_bytes());
    b.extend_from_slice(body);
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The batch with its header's max timestamp set (and the CRC redone).
fn with_max_timestamp(mut b: Vec<u8>, ts: i64) -> Vec<u8> {
    b[35..43].copy_from_slice(&ts.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// One uncompressed batch of `n` records of `size` bytes each.
fn plain_batch(n: usize, size: usize) -> Vec<u8> {
    let value = vec![b'x'; size];
    let values: Vec<(i64, &[u8])> = (0..n).map(|_| (0, &value[..])).collect();
    batch(0, &records(&values), n as i32, 1000)
}

// ---- corrupt compressed batches --------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_compressed_batches_are_refused_and_never_stored() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Never).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    assert_eq!(produce(&mut c, "t", 0, plain_batch(10, 10)).await, (0, 0));

    let garbage: Vec<u8> = (0..300u32).map(|i| (i * 31 + 7) as u8).collect();
    for codec in 1..=4 {
        let (code, _) = produce(&mut c, "t", 0, batch(codec, &garbage, 1, 1000)).await;
        assert_eq!(code, CORRUPT_MESSAGE, "codec {codec}: garbage body");
    }
    let one = records(&[(0, b"v")]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // The case: 2^31-1 records claimed, one held.
        ("huge count", batch(1, &compress(1, &one), i32::MAX, 1000)),
        ("offset delta", {
            let mut r = records(&[(0, b"a"), (0, b"b")]);
            r[3] = 4; // the first record's offset delta: 2, not 0
            batch(4, &compress(4, &r), 2, 1000)
        }),
        ("trailing bytes", {
            let mut r = one.clone();
            r.extend_from_slice(&[0, 0, 0]);
            batch(3, &compress(3, &r), 1, 1000)
        }),
        (
            "short record",
            batch(2, &compress(2, &one[..one.len() - 1]), 1, 1000),
        ),
    ];
    for (what, bytes) in cases {
        let (code, _) = produce(&mut c, "t", 0, bytes).await;
        assert_eq!(code, INVALID_RECORD, "{what}");
    }
    assert_eq!(list_offset(&mut c, "t", 0, -1).await, (0, 10, -1));
    // A good compressed batch in every codec continues the log at 10.
    for codec in 1..=4 {
        let r = records(&[(0, b"a"), (5, b"b")]);
        let b = with_max_timestamp(batch(codec, &compress(codec, &r), 2, 2000), 2005);
        let (code, base) = produce(&mut c, "t", 0, b).await;
        assert_eq!(
            (code, base),
            (0, 10 + 2 * i64::from(codec - 1)),
            "codec {codec}"
        );
    }
    assert_eq!(list_offset(&mut c, "t", 0, 2005).await, (0, 11, 2005));
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decompression_bomb_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Never).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 1).await;
    // 80 records of 1 MiB of zeros: 80 MiB of well-formed records, a few
    // KiB of zstd, past the 64 MiB a batch may decompress to.
    let zeros = vec![0u8; 1 << 20];
    let values: Vec<(i64, &[u8])> = (0..80).map(|_| (0, &zeros[..])).collect();
    let bomb = batch(4, &compress(4, &records(&values)), 80, 1000);
    assert!(bomb.len() < 100_000);
    assert_eq!(produce(&mut c, "t", 0, bomb).await.0, CORRUPT_MESSAGE);
    assert_eq!(list_offset(&mut c, "t", 0, -1).await, (0, 0, -1));
    b.stop().await;
}

// ---- fetch limits ----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_respects_the_request_max_bytes_after_the_first_batch() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Never).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 2).await;
    let big = plain_batch(1, 900_000);
    let size = big.len();
    for p in 0..2 {
        assert_eq!(produce(&mut c, "t", p, big.clone()).await, (0, 0));
    }
    // librdkafka's 0082_fetch_max_bytes: fetch.max.bytes=1000000.
    let req = fetch_request(1_000_000, &[("t", 0, 0, 1_048_576), ("t", 1, 0, 1_048_576)]);
    let resp = c.call(&req, 11).await;
    assert_eq!(fetched(&resp), vec![(0, size), (1, 0)]);
    assert_eq!(resp.responses[1].partitions[0].high_watermark, 1);
    // The first batch of a response may exceed max_bytes (progress)...
    let resp = c.call(&fetch_request(1000, &[("t", 1, 0, 1000)]), 11).await;
    assert_eq!(fetched(&resp), vec![(1, size)]);
    // ...and partition_max_bytes, but only for the first partition.
    let req = fetch_request(10 << 20, &[("t", 0, 0, 100), ("t", 1, 0, 100)]);
    let resp = c.call(&req, 11).await;
    assert_eq!(fetched(&resp), vec![(0, size), (1, 0)]);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_named_many_times_is_read_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Never).await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 2).await;
    let one = plain_batch(1, 100_000);
    let size = one.len();
    for _ in 0..3 {
        produce(&mut c, "t", 0, one.clone()).await;
    }
    produce(&mut c, "t", 1, one.clone()).await;
    // Partition 0 named 360 times (in one topic entry and in many), the
    // last time from offset 1; partition 1 once in between.
    let mut parts: Vec<(&str, i32, i64, i32)> = vec![("t", 0, 0, i32::MAX); 180];
    parts.push(("t", 1, 0, i32::MAX));
    parts.extend(vec![("t", 0, 0, i32::MAX); 179]);
    parts.push(("t", 0, 1, i32::MAX));
    let mut req = fetch_request(i32::MAX, &parts);
    req.topics[0].partitions = vec![req.topics[0].partitions[0].clone(); 5];
    let resp = c.call(&req, 12).await;
    assert_eq!(fetched(&resp), vec![(0, 2 * size), (1, size)]);
    // By topic id (v13+) likewise.
    let id = b.broker.logs.topic("t").expect("topic").id;
    for t in &mut req.topics {
        t.topic_id = uuid::Uuid::from_bytes(id);
    }
    let resp = c.call(&req, 13).await;
    assert_eq!(fetched(&resp), vec![(0, 2 * size), (1, size)]);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_max_bytes_caps_the_response() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |cfg| {
        cfg.fetch_max_bytes = 1_000_000;
    })
    .await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "t", 3).await;
    let one = plain_batch(1, 300_000);
    for p in 0..3 {
        for _ in 0..3 {
            produce(&mut c, "t", p, one.clone()).await;
        }
    }
    let parts: Vec<_> = (0..3).map(|p| ("t", p, 0, i32::MAX)).collect();
    let resp = c.call(&fetch_request(i32::MAX, &parts), 12).await;
    let got = fetched(&resp);
    let total: usize = got.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 3 * one.len(), "{got:?}");
    assert_eq!(got, vec![(0, 3 * one.len()), (1, 0), (2, 0)]);
    b.stop().await;
}

// ---- timestamp lookups -----------------------------------------------------

// One runtime worker: a flood of lookups on other connections can occupy
// every worker of a real broker; here one connection suffices.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn timestamp_lookups_do_not_stall_other_requests() {
    let dir = tempfile::tempdir().expect("tmp");
    // A topic whose operator allows 16 MiB batches (max.message.bytes).
    let b = InProcess::start_with(dir.path(), FsyncMode::Never, |cfg| {
        cfg.log.max_message_bytes = 16 << 20;
    })
    .await;
    let addr = b.addr.to_string();
    let mut c = Client::connect(&addr).await;
    create(&mut c, "t", 1).await;
    // ~20 MiB of empty records at timestamp 1000, then one at 1001: every
    // lookup of 1001 decompresses and walks millions of records to find it.
    let mut values: Vec<(i64, &[u8])> = vec![(0, b""); 2_000_000];
    values.push((1, b"last"));
    let n = values.len() as i32;
    let big = with_max_timestamp(batch(4, &compress(4, &records(&values)), n, 1000), 1001);
    assert!(big.len() < 16 << 20, "{} bytes", big.len());
    assert_eq!(produce(&mut c, "t", 0, big).await, (0, 0));
    let last = i64::from(n - 1);
    let t = Instant::now();
    assert_eq!(list_offset(&mut c, "t", 0, 1001).await, (0, last, 1001));
    eprintln!("one lookup: {:?}", t.elapsed());

    // 48 pipelined lookups on one connection.
    let lookups = Instant::now();
    let mut scanner = Client::connect(&addr).await;
    for _ in 0..48 {
        let (_, frame) = scanner.frame(&list_offsets_request("t", 0, 1001), 7);
        scanner.send_raw(&frame).await;
    }
    // Give the broker a moment to start on them (not a condition: the
    // lookups are meant to be in progress).
    tokio::time::sleep(Duration::from_millis(50)).await;

    let started = Instant::now();
    let mut other = Client::connect(&addr).await;
    let v = other.call(&support::api_versions_v3(), 3).await;
    let api_versions = started.elapsed();
    assert_eq!(v.error_code, 0);

    let started = Instant::now();
    let (code, base) = produce(&mut other, "t", 0, plain_batch(1, 10)).await;
    let produce_took = started.elapsed();
    assert_eq!((code, base), (0, last + 1));

    for _ in 0..48 {
        {
            let mut resp = scanner.read_frame().await.expect("a ListOffsets response");
            ResponseHeader::decode(&mut resp, 1).expect("header v1 (ListOffsets v7 is flexible)");
            let body = ListOffsetsResponse::decode(&mut resp, 7).expect("body");
            let p = &body.topics[0].partitions[0];
            assert_eq!((p.error_code, p.offset, p.timestamp), (0, last, 1001));
        }
    }
    eprintln!(
        "ApiVersions {api_versions:?}, produce {produce_took:?}, all lookups {:?}",
        lookups.elapsed()
    );
    assert!(
        api_versions < Duration::from_millis(500),
        "ApiVersions took {api_versions:?} behind the lookups"
    );
    assert!(
        produce_took < Duration::from_millis(500),
        "a produce to the scanned partition took {produce_took:?}"
    );
    b.stop().await;
}
