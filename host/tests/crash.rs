//! kill -9 under load: every acknowledged record must survive, exactly once.
//!
//! The story: a broker that acknowledges before the data is durable, or that
//! recovers a torn tail wrongly, loses or duplicates records a producer was
//! told are safe. This test runs producers against a real `kaas broker`
//! process with `--fsync always`, SIGKILLs it while produce requests are in
//! flight, restarts it on the same data directory, and reads everything
//! back. The second test then also takes from the segments everything a
//! power cut could: with no write-ahead log checkpoint in the run, nothing
//! ever fdatasynced a segment, so they may come back empty, and every
//! acknowledged record must come back from the shared write-ahead log. The
//! third checkpoints every 20 ms, so the log files are being recycled when
//! the broker dies.

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
use support::{Client, Process};
use tokio::sync::Mutex;

use kaas::log::batch::data_batch;

const PARTITIONS: i32 = 4;
const PRODUCERS: usize = 4;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acknowledged_record_survives_kill_9_exactly_once() {
    kill_under_load_and_read_back(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acknowledged_record_survives_a_power_cut_that_empties_the_segments() {
    kill_under_load_and_read_back(true).await;
}

/// Checkpoints every 20 ms, so write-ahead log files are recycled under the
/// load: the killed broker's current file holds an earlier life's frames
/// behind its own, and the restart must replay exactly its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acknowledged_record_survives_kill_9_while_log_files_are_recycled() {
    kill_under_load_and_read_back_with(false, &RECYCLING).await;
}

const FLAGS: [&str; 4] = [
    "--fsync",
    "always",
    "--wal-checkpoint-interval-ms",
    "3600000",
];

const RECYCLING: [&str; 4] = ["--fsync", "always", "--wal-checkpoint-interval-ms", "20"];

/// The highest write-ahead log file number in the data directory (the
/// first file is 1; a rotation that recycled a file makes 3 or more).
fn newest_wal_file(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir.join("__wal"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".wal"))
                        .and_then(|n| n.parse::<u64>().ok())
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Empties every segment file of the topic: what a power cut leaves of
/// files whose pages were written but never synced.
fn lose_unsynced_segment_pages(dir: &std::path::Path) {
    for p in 0..PARTITIONS {
        let part = dir.join(format!("crash-{p}"));
        for e in std::fs::read_dir(&part).expect("partition dir") {
            let path = e.expect("entry").path();
            if path.extension().is_some_and(|x| x == "log") {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .expect("open segment")
                    .set_len(0)
                    .expect("truncate");
            }
        }
    }
}

async fn kill_under_load_and_read_back(power_cut: bool) {
    kill_under_load_and_read_back_with(power_cut, &FLAGS).await;
}

async fn kill_under_load_and_read_back_with(power_cut: bool, flags: &[&str]) {
    let recycling = flags == RECYCLING;
    let dir = tempfile::tempdir().expect("tmp");
    let broker = Process::spawn(dir.path(), flags);
    let addr = broker.addr.clone();
    {
        let mut c = Client::connect(&addr).await;
        let req = CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default()
                .with_name(name("crash"))
                .with_num_partitions(PARTITIONS)
                .with_replication_factor(1),
        ]);
        assert_eq!(c.call(&req, 5).await.topics[0].error_code, 0);
    }
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for producer in 0..PRODUCERS {
        let (addr, acked, count) = (addr.clone(), acked.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            let Ok(stream) =
                tokio::time::timeout(Duration::from_secs(5), Client::connect(&addr)).await
            else {
                return;
            };
            let mut c = stream;
            let mut i = 0u64;
            loop {
                let values: Vec<String> = (0..20).map(|k| format!("p{producer}-{i}-{k}")).collect();
                let recs: Vec<(Option<&[u8]>, &[u8])> =
                    values.iter().map(|v| (None, v.as_bytes())).collect();
                let batch = data_batch(&recs, 1_700_000_000_000 + i as i64, None, false);
                let partition = ((producer as u64 + i) % PARTITIONS as u64) as i32;
                let req = ProduceRequest::default()
                    .with_acks(-1)
                    .with_timeout_ms(5000)
                    .with_topic_data(vec![
                        TopicProduceData::default()
                            .with_name(name("crash"))
                            .with_partition_data(vec![
                                PartitionProduceData::default()
                                    .with_index(partition)
                                    .with_records(Some(Bytes::from(batch))),
                            ]),
                    ]);
                let (_, frame) = c.frame(&req, 9);
                c.send_raw(&frame).await;
                let Some(mut resp) = c.read_frame().await else {
                    return;
                };
                use kafka_protocol::protocol::Decodable;
                if ResponseHeader::decode(&mut resp, 1).is_err() {
                    return;
                }
                let Ok(body) = ProduceResponse::decode(&mut resp, 9) else {
                    return;
                };
                if body.responses[0].partition_responses[0].error_code == 0 {
                    acked.lock().await.extend(values);
                    count.fetch_add(20, Ordering::Relaxed);
                }
                i += 1;
            }
        }));
    }
    // Kill mid-load, once a fair amount is acknowledged.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while count.load(Ordering::Relaxed) < 4000 || (recycling && newest_wal_file(dir.path()) < 4) {
        assert!(
            std::time::Instant::now() < deadline,
            "producers made no progress (or no log file was recycled)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    broker.kill9();
    for t in tasks {
        let _ = t.await;
    }
    let acked = acked.lock().await.clone();
    assert!(acked.len() >= 4000);
    if power_cut {
        lose_unsynced_segment_pages(dir.path());
    }

    let broker = Process::spawn(dir.path(), flags);
    let mut c = Client::connect(&broker.addr).await;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for p in 0..PARTITIONS {
        let mut offset = 0;
        loop {
            let req = FetchRequest::default()
                .with_max_wait_ms(0)
                .with_max_bytes(8 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(name("crash"))
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(8 << 20),
                        ]),
                ]);
            let resp = c.call(&req, 12).await;
            let part = &resp.responses[0].partitions[0];
            assert_eq!(part.error_code, 0);
            let mut records = part.records.clone().unwrap_or_default();
            if records.is_empty() {
                assert_eq!(
                    offset, part.high_watermark,
                    "read everything up to the high watermark"
                );
                break;
            }
            for set in
                RecordBatchDecoder::decode_all(&mut records).expect("recovered batches decode")
            {
                for r in set.records {
                    assert_eq!(r.offset, offset, "offsets are dense after recovery");
                    offset += 1;
                    let v = String::from_utf8(r.value.map(|v| v.to_vec()).unwrap_or_default())
                        .expect("utf8");
                    *seen.entry(v).or_default() += 1;
                }
            }
        }
    }
    let dupes: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dupes.is_empty(), "duplicated records: {dupes:?}");
    let lost: Vec<_> = acked.iter().filter(|v| !seen.contains_key(*v)).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged records lost, e.g. {:?}",
        lost.len(),
        lost.first()
    );
    eprintln!(
        "acknowledged {}, recovered {} (unacknowledged survivors allowed)",
        acked.len(),
        seen.len()
    );
    broker.terminate();
}
