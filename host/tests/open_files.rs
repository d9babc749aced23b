//! More partitions than open segment files.
//!
//! The story: every partition used to hold its active segment's file open,
//! so a broker could hold no more partitions than the process could open
//! files (5,000 partitions held 5,018 descriptors; at ~18,800 creation was
//! refused on a 20,000 limit). Segment files now go through one bounded
//! cache (`--max-open-segment-files`): this test gives the broker 3,000
//! partitions and a cache of 64, produces to every partition (so every
//! append reopens a file another partition's append closed, and closing a
//! written file syncs it first), reads everything back, kills the broker
//! with SIGKILL while producers are still writing, and checks after the
//! restart that no acknowledged record was lost or duplicated, and that
//! the process's descriptors (`/proc/<pid>/fd`) stayed within the cache's
//! bound plus a fixed overhead throughout.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use support::records::{create, produce};
use support::{Client, InProcess, Process};
use tokio::sync::Mutex;

use kaas::log::batch::data_batch;

const TOPICS: usize = 3;
const PARTITIONS: i32 = 1000;
const CACHE: usize = 64;
/// Descriptors the broker holds besides segment files: the runtime, the
/// listeners, the write-ahead log, the state logs, a few connections.
const OVERHEAD: usize = 96;

const FLAGS: [&str; 8] = [
    "--fsync",
    "always",
    "--max-open-segment-files",
    "64",
    "--max-partitions",
    "4000",
    // Checkpoints sync segments (reopening closed ones) while producers
    // write.
    "--wal-checkpoint-interval-ms",
    "200",
];

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn topic(t: usize) -> String {
    format!("many-{t}")
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// One round: a batch to every partition of topic `t`, in one request;
/// returns the values of the partitions that acknowledged.
async fn produce_round(c: &mut Client, t: usize, round: u64) -> Option<Vec<String>> {
    let mut values = Vec::new();
    let mut parts = Vec::new();
    for p in 0..PARTITIONS {
        let v = format!("{}-{p}-{round}", topic(t));
        let batch = data_batch(
            &[(None, v.as_bytes())],
            1_700_000_000_000 + round as i64,
            None,
            false,
        );
        values.push(v);
        parts.push(
            PartitionProduceData::default()
                .with_index(p)
                .with_records(Some(Bytes::from(batch))),
        );
    }
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(&topic(t)))
                .with_partition_data(parts),
        ]);
    let (_, frame) = c.frame(&req, 9);
    c.send_raw(&frame).await;
    let mut resp = c.read_frame().await?;
    use kafka_protocol::protocol::Decodable;
    ResponseHeader::decode(&mut resp, 1).ok()?;
    let body = ProduceResponse::decode(&mut resp, 9).ok()?;
    let mut acked = Vec::new();
    for pr in &body.responses[0].partition_responses {
        if pr.error_code == 0 {
            acked.push(values[pr.index as usize].clone());
        }
    }
    Some(acked)
}

/// Reads every partition of every topic from offset 0 to its high
/// watermark; returns how often each value was seen.
async fn read_all(addr: &str) -> HashMap<String, usize> {
    let mut c = Client::connect(addr).await;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in 0..TOPICS {
        let mut offsets: Vec<i64> = vec![0; PARTITIONS as usize];
        let mut done = vec![false; PARTITIONS as usize];
        while done.iter().any(|d| !d) {
            let parts: Vec<FetchPartition> = (0..PARTITIONS)
                .filter(|p| !done[*p as usize])
                .map(|p| {
                    FetchPartition::default()
                        .with_partition(p)
                        .with_fetch_offset(offsets[p as usize])
                        .with_partition_max_bytes(64 << 10)
                })
                .collect();
            let req = FetchRequest::default()
                .with_max_wait_ms(0)
                .with_max_bytes(64 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(name(&topic(t)))
                        .with_partitions(parts),
                ]);
            let resp = c.call(&req, 12).await;
            for part in &resp.responses[0].partitions {
                assert_eq!(part.error_code, 0, "partition {}", part.partition_index);
                let i = part.partition_index as usize;
                let mut records = part.records.clone().unwrap_or_default();
                if records.is_empty() {
                    assert_eq!(offsets[i], part.high_watermark, "read up to the HW");
                    done[i] = true;
                    continue;
                }
                for set in RecordBatchDecoder::decode_all(&mut records).expect("batches decode") {
                    for r in set.records {
                        assert_eq!(r.offset, offsets[i], "offsets are dense");
                        offsets[i] += 1;
                        let v = String::from_utf8(r.value.map(|v| v.to_vec()).unwrap_or_default())
                            .expect("utf8");
                        *seen.entry(v).or_default() += 1;
                    }
                }
            }
        }
    }
    seen
}

fn check(acked: &[String], seen: &HashMap<String, usize>) {
    let dupes: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dupes.is_empty(), "duplicated records: {:?}", dupes.first());
    let lost: Vec<_> = acked.iter().filter(|v| !seen.contains_key(*v)).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged records lost, e.g. {:?}",
        lost.len(),
        lost.first()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousands_of_partitions_through_64_open_files_survive_kill_9() {
    let dir = tempfile::tempdir().expect("tmp");
    let broker = Process::spawn(dir.path(), &FLAGS);
    let pid = broker.child.id();
    let addr = broker.addr.clone();
    {
        let mut c = Client::connect(&addr).await;
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(60_000)
            .with_topics(
                (0..TOPICS)
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(name(&topic(t)))
                            .with_num_partitions(PARTITIONS)
                            .with_replication_factor(1)
                    })
                    .collect(),
            );
        let resp = c.call(&req, 5).await;
        for t in &resp.topics {
            assert_eq!(t.error_code, 0, "{:?}", t.error_message);
        }
    }
    let after_create = open_fds(pid);
    assert!(
        after_create <= CACHE + OVERHEAD,
        "{after_create} descriptors open after creating {} partitions",
        TOPICS * PARTITIONS as usize
    );

    // Two full rounds, read back while the broker runs.
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut most_fds = 0;
    for round in 0..2 {
        for t in 0..TOPICS {
            let mut c = Client::connect(&addr).await;
            let got = produce_round(&mut c, t, round).await.expect("a response");
            assert_eq!(
                got.len(),
                PARTITIONS as usize,
                "every partition acknowledged"
            );
            acked.lock().await.extend(got);
            most_fds = most_fds.max(open_fds(pid));
        }
    }
    check(&acked.lock().await, &read_all(&addr).await);
    most_fds = most_fds.max(open_fds(pid));

    // Producers keep writing (one connection per topic) until SIGKILL.
    let rounds = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..TOPICS {
        let (addr, acked, rounds) = (addr.clone(), acked.clone(), rounds.clone());
        tasks.push(tokio::spawn(async move {
            let Ok(mut c) =
                tokio::time::timeout(Duration::from_secs(5), Client::connect(&addr)).await
            else {
                return;
            };
            for round in 2.. {
                let Some(got) = produce_round(&mut c, t, round).await else {
                    return;
                };
                acked.lock().await.extend(got);
                rounds.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while rounds.load(Ordering::Relaxed) < 2 * TOPICS {
        assert!(std::time::Instant::now() < deadline, "producers stalled");
        most_fds = most_fds.max(open_fds(pid));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        most_fds <= CACHE + OVERHEAD,
        "{most_fds} descriptors open under load (cache {CACHE})"
    );
    broker.kill9();
    for t in tasks {
        let _ = t.await;
    }
    let acked = acked.lock().await.clone();

    let broker = Process::spawn(dir.path(), &FLAGS);
    let pid = broker.child.id();
    let after_recovery = open_fds(pid);
    assert!(
        after_recovery <= CACHE + OVERHEAD,
        "{after_recovery} descriptors open after recovering {} partitions",
        TOPICS * PARTITIONS as usize
    );
    let seen = read_all(&broker.addr).await;
    check(&acked, &seen);
    assert!(open_fds(pid) <= CACHE + OVERHEAD);
    eprintln!(
        "acknowledged {}, recovered {}; descriptors: {after_create} after creation, \
         {most_fds} at most under load, {after_recovery} after recovery",
        acked.len(),
        seen.len()
    );
    let status = broker.sigterm();
    assert!(status.success(), "clean shutdown: {status:?}");
}

/// The value of an unlabelled sample on the broker's /metrics page.
fn metric(page: &str, name: &str) -> u64 {
    support::metric_value(page, name).unwrap_or_else(|| panic!("no {name} on /metrics"))
}

/// An operator sizing `--max-open-segment-files` sees on /metrics how many
/// files are open against the bound and how often appends had to evict
/// (and sync) another partition's file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_file_cache_is_visible_on_metrics() {
    const BOUND: usize = 8;
    const N: i32 = 40;
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), kaas::log::FsyncMode::Never, |c| {
        c.max_open_segment_files = BOUND
    })
    .await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    create(&mut c, "cached", N).await;
    for p in 0..N {
        let batch = data_batch(&[(None, b"v")], 1_700_000_000_000, None, false);
        assert_eq!(produce(&mut c, "cached", p, batch).await.0, 0);
    }
    let page = kaas::exposition::render(&b.broker);
    assert_eq!(metric(&page, "kaas_open_segment_files_max"), BOUND as u64);
    let open = metric(&page, "kaas_open_segment_files");
    assert!((1..=BOUND as u64).contains(&open), "{open} files open");
    let evictions = metric(&page, "kaas_segment_file_evictions_total");
    assert!(
        evictions >= (N as u64) - BOUND as u64,
        "{N} partitions written through {BOUND} files: {evictions} evictions"
    );
    // Every eviction closed a file some open had opened.
    assert!(metric(&page, "kaas_segment_file_opens_total") >= evictions + open);
    assert!(metric(&page, "kaas_segment_file_eviction_syncs_total") <= evictions);
    b.stop().await;
}
