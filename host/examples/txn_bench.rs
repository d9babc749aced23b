//! Transaction throughput and InitProducerId latency over the wire, next to
//! the fdatasync latency of the same disk measured in the same run.
//!
//! Run: `cargo run --release -p kaas --features fault-injection --example txn_bench -- [--seconds N] [--data-dir DIR] [--fsync never] [--only CASE] [--fsync-extra-us N] [--wal-checkpoint-ms N] [--bootstrap HOST:PORT] [--repeat N]`
//!
//! A transaction as a client sees it: AddPartitionsToTxn (durable state
//! record), Produce (durable data), EndTxn (durable PrepareCommit) — k = 3
//! durable writes on the critical path; the markers follow the EndTxn reply,
//! the CompleteCommit record is not fsynced on its own (txn::store), and the
//! markers' fdatasync rides along with the next flush of their file (the
//! next transaction's Produce). The
//! target for one producer is ≥ 0.75 × 1 / (k × fdatasync latency); 8
//! producers should reach ≥ 4× one producer through group commit, measured
//! with the 8 producers on 8 partitions (their data shares the write-ahead
//! log's file, `log::wal`) and on one partition. The broker's write-ahead
//! log checkpoints every `--wal-checkpoint-ms` (default: the broker's 10 s);
//! the count is printed at the end.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use kaas::config::BrokerConfig;
use kaas::conformance::client::Client;
use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;
use kaas::policy::{PolicyRuntime, SandboxLimits};

const K: f64 = 3.0;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// fdatasyncs so far and their total time (ns): the data logs' flusher,
/// the transaction state log's.
fn fsync_counts(broker: &kaas::broker::Broker) -> ((u64, u64), (u64, u64)) {
    use std::sync::atomic::Ordering::Relaxed;
    let read = |s: &kaas::log::sync::SyncStats| (s.syncs.load(Relaxed), s.sync_nanos.load(Relaxed));
    (
        read(broker.logs.group_commit().stats()),
        read(broker.txn.sync_stats()),
    )
}

/// How a case's producers are spread, as its report line says it.
fn placement(producers: usize, shared: bool) -> &'static str {
    match (producers, shared) {
        (1, _) => "",
        (_, true) => " on one partition",
        (_, false) => " on 8 partitions",
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// fdatasync latency (median, ms) of 4 KiB writes in `dir`: appends that
/// grow the file (`in_place` false), or writes into space already
/// zero-filled (`in_place` true, what the broker's logs do since their
/// zero-filled tails; the flush then writes no inode). With `pause` the
/// writer sleeps that long after each flush, so the CPUs and the device go
/// idle between flushes as they do under a broker answering one client: on
/// this VM a flush issued after an idle spell takes longer than one issued
/// back to back (BENCHMARKS.md, "Transactions").
fn fdatasync_ms(
    dir: &std::path::Path,
    in_place: bool,
    pause: Option<Duration>,
) -> anyhow::Result<f64> {
    use std::io::Write;
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path)?;
    let block = vec![7u8; 4096];
    let n = 200;
    if in_place {
        f.write_all(&vec![0u8; 4096 * n])?;
        f.sync_data()?;
        std::io::Seek::rewind(&mut f)?;
    }
    let mut lat = Vec::new();
    for _ in 0..n {
        f.write_all(&block)?;
        let t = Instant::now();
        f.sync_data()?;
        kaas::log::sync::slow_disk::pause();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        if let Some(p) = pause {
            std::thread::sleep(p);
        }
    }
    std::fs::remove_file(&path)?;
    Ok(percentile(&mut lat, 0.5))
}

async fn producer(
    addr: String,
    id: usize,
    records: usize,
    partition: i32,
    until: Instant,
) -> anyhow::Result<(usize, Vec<f64>, [Vec<f64>; 3])> {
    let mut c = Client::connect(&addr).await?;
    // Per-step latencies (ms): AddPartitionsToTxn, Produce, EndTxn.
    let mut steps: [Vec<f64>; 3] = Default::default();
    let txn = format!("bench-{id}-{records}");
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(&txn))))
        .with_transaction_timeout_ms(60_000);
    let mut init_lat = Vec::new();
    let t = Instant::now();
    let r = c.call(&init, 4).await?;
    init_lat.push(t.elapsed().as_secs_f64() * 1e3);
    anyhow::ensure!(r.error_code == 0, "InitProducerId: {}", r.error_code);
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    let value = [b'x'; 100];
    let mut seq = 0i32;
    let mut done = 0;
    while Instant::now() < until {
        let t0 = Instant::now();
        let add = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s(&txn)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s("bench")))
                    .with_partitions(vec![partition]),
            ]);
        let code = c.call(&add, 3).await?.results_by_topic_v3_and_below[0].results_by_partition[0]
            .partition_error_code;
        if code == 51 {
            continue; // the previous transaction's markers are still being written
        }
        anyhow::ensure!(code == 0, "AddPartitionsToTxn: {code}");
        let t1 = Instant::now();
        let recs: Vec<(Option<&[u8]>, &[u8])> = (0..records).map(|_| (None, &value[..])).collect();
        let batch = data_batch(&recs, 1, Some((pid, epoch, seq)), true);
        seq += records as i32;
        let produce = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(s(&txn))))
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(s("bench")))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(Some(Bytes::from(batch))),
                    ]),
            ]);
        let code = c.call(&produce, 9).await?.responses[0].partition_responses[0].error_code;
        anyhow::ensure!(code == 0, "Produce: {code}");
        let t2 = Instant::now();
        let end = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(&txn)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(true);
        let code = c.call(&end, 3).await?.error_code;
        anyhow::ensure!(code == 0, "EndTxn: {code}");
        let t3 = Instant::now();
        for (i, (a, b)) in [(t0, t1), (t1, t2), (t2, t3)].into_iter().enumerate() {
            steps[i].push((b - a).as_secs_f64() * 1e3);
        }
        done += 1;
    }
    // InitProducerId latency samples on an idle entry (bumps).
    for _ in 0..20 {
        loop {
            let t = Instant::now();
            let r = c.call(&init, 4).await?;
            if r.error_code == 51 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
            anyhow::ensure!(r.error_code == 0, "InitProducerId: {}", r.error_code);
            init_lat.push(t.elapsed().as_secs_f64() * 1e3);
            break;
        }
    }
    Ok((done, init_lat, steps))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let seconds: u64 = arg("--seconds").and_then(|v| v.parse().ok()).unwrap_or(5);
    let base = arg("--data-dir").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench-data"))
    });
    std::fs::create_dir_all(&base)?;
    let dir = tempfile::tempdir_in(&base)?;
    // `--fsync-extra-us N`: simulate a slower disk (every fdatasync, the
    // references' included, takes N µs longer).
    if let Some(us) = arg("--fsync-extra-us").and_then(|v| v.parse().ok()) {
        kaas::log::sync::slow_disk::set(Duration::from_micros(us));
        println!("simulated disk: every fdatasync takes {us} µs longer");
    }
    // Interleaved so a burst of disk noise hits both references.
    let (mut grow, mut in_place, mut paced) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        grow.push(fdatasync_ms(dir.path(), false, None)?);
        in_place.push(fdatasync_ms(dir.path(), true, None)?);
        paced.push(fdatasync_ms(
            dir.path(),
            true,
            Some(Duration::from_micros(100)),
        )?);
    }
    let fsync = percentile(&mut grow, 0.5);
    let fsync_in_place = percentile(&mut in_place, 0.5);
    let fsync_paced = percentile(&mut paced, 0.5);

    let wasm = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/wasm32-wasip2/release/kaas_policy_apache37.wasm"
    ));
    let rt = PolicyRuntime::new(SandboxLimits::default(), None)?;
    let policy = Arc::new(rt.load_file(&wasm)?);
    // The policy's own cost per InitProducerId decision, for the 1% target.
    let decision_us = {
        let entry = kaas::policy::Entry {
            transactional_id: "x".into(),
            producer_id: 1000,
            producer_epoch: 5,
            last_producer_id: 1000,
            last_producer_epoch: -1,
            state: kaas::policy::TxnState::Empty,
            partitions: vec![],
            timeout_ms: 60_000,
            start_timestamp_ms: -1,
            last_update_timestamp_ms: 1,
            next_producer_id: -1,
            client_transaction_version: 0,
            has_failed_epoch_fence: false,
        };
        let req = kaas::policy::InitRequest {
            transactional_id: Some("x".into()),
            claim: None,
            version: 4,
            timeout_ms: 60_000,
            candidate_producer_id: 2000,
            tenant: 0,
            now_ms: 2,
        };
        let n = 20_000;
        let t = Instant::now();
        for _ in 0..n {
            policy.init_producer_id(Some(&entry), &req, kaas::txn::machine::DEFAULT_LIMITS)?;
        }
        t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    };

    // `--bootstrap HOST:PORT` drives a `kaas broker` process instead of the
    // in-process one (the fdatasync references still come from --data-dir:
    // put it on the broker's disk).
    let (addr, broker) = if let Some(addr) = arg("--bootstrap") {
        (addr, None)
    } else {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        // `--fsync never` shows what a step costs without its flush (the data
        // logs only: the transaction state log is always fsynced).
        let mode = match arg("--fsync").as_deref() {
            Some("never") => FsyncMode::Never,
            _ => FsyncMode::Always,
        };
        let mut config = BrokerConfig::new(dir.path());
        if let Some(ms) = arg("--wal-checkpoint-ms").and_then(|v| v.parse().ok()) {
            config.wal_checkpoint_interval = Duration::from_millis(ms);
        }
        let broker = kaas::broker::open(config, mode, policy)?;
        kaas::broker::spawn_tasks(&broker, Duration::from_secs(10));
        tokio::spawn(kaas::server::run(
            listener,
            broker.serving(),
            std::future::pending(),
        ));
        (addr, Some(broker))
    };
    let mut c = Client::connect(&addr).await?;
    let create = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s("bench")))
            .with_num_partitions(8)
            .with_replication_factor(1),
    ]);
    let created = c.call(&create, 5).await?.topics[0].error_code;
    anyhow::ensure!(
        created == 0 || (created == 36 && broker.is_none()),
        "create topic: error {created}"
    );

    println!(
        "fdatasync p50: {fsync:.3} ms appending, {fsync_in_place:.3} ms into zero-filled space, \
         {fsync_paced:.3} ms into zero-filled space after a 0.1 ms pause   \
         (k = {K} durable writes per transaction on the client's path)"
    );
    println!("policy decision (checked, in the sandbox): {decision_us:.2} µs");
    // One producer's target (txn/s) against a reference fdatasync (ms).
    let target = |fsync_ms: f64| 0.75 / (K * fsync_ms / 1e3);
    let (target_one, target_in_place, target_paced) =
        (target(fsync), target(fsync_in_place), target(fsync_paced));
    let mut init_all = Vec::new();
    // (records per transaction, producers, all on one partition?)
    let runs = [
        (1usize, 1usize, false),
        (1, 8, false),
        (1, 8, true),
        (100, 1, false),
        (100, 8, false),
        (100, 8, true),
    ];
    // `--only I`: run only case I of `runs` (for profiling one case).
    let only: Option<usize> = arg("--only").and_then(|v| v.parse().ok());
    // `--repeat N`: run the cases N times in turn (one producer, then 8, …),
    // so a minute of disk drift falls on both sides of a ratio; the summary
    // gives medians.
    let repeat: usize = arg("--repeat")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); runs.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); runs.len()];
    for round in 0..repeat {
        if repeat > 1 {
            println!("run {} of {repeat}", round + 1);
        }
        let mut one_of_size = 0.0;
        for (i, &(records, producers, shared)) in runs.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            let syncs_before = broker.as_ref().map(|b| fsync_counts(b));
            let until = Instant::now() + Duration::from_secs(seconds);
            let started = Instant::now();
            let tasks: Vec<_> = (0..producers)
                .map(|i| {
                    let partition = if shared { 0 } else { (i % 8) as i32 };
                    let id = i + producers * 1000 + usize::from(shared) * 100;
                    tokio::spawn(producer(addr.clone(), id, records, partition, until))
                })
                .collect();
            let mut total = 0;
            let mut steps: [Vec<f64>; 3] = Default::default();
            for t in tasks {
                let (n, lat, st) = t.await??;
                total += n;
                init_all.extend(lat);
                for (all, one) in steps.iter_mut().zip(st) {
                    all.extend(one);
                }
            }
            let rate = total as f64 / started.elapsed().as_secs_f64();
            rates[i].push(rate);
            if producers == 1 {
                one_of_size = rate;
            }
            let vs = if producers == 8 && one_of_size > 0.0 {
                let ratio = rate / f64::max(one_of_size, 1e-9);
                ratios[i].push(ratio);
                format!("  ({ratio:.1}× one producer)")
            } else {
                String::new()
            };
            let [a, p, e] = steps.map(|mut v| {
                if v.is_empty() {
                    0.0
                } else {
                    percentile(&mut v, 0.5)
                }
            });
            let placement = placement(producers, shared);
            // fdatasyncs per transaction, data logs / state log (in-process only).
            let per_txn = match (syncs_before, broker.as_ref()) {
                (Some((l0, s0)), Some(b)) if total > 0 => {
                    let (l1, s1) = fsync_counts(b);
                    let n = total as f64;
                    let mean = |a: (u64, u64), b: (u64, u64)| {
                        (b.1 - a.1) as f64 / 1e6 / (b.0 - a.0).max(1) as f64
                    };
                    format!(
                        ", fdatasyncs/txn: logs {:.2} (mean {:.3} ms), state log {:.2} (mean {:.3} ms)",
                        (l1.0 - l0.0) as f64 / n,
                        mean(l0, l1),
                        (s1.0 - s0.0) as f64 / n,
                        mean(s0, s1)
                    )
                }
                _ => String::new(),
            };
            println!(
                "{records:>3}-record transactions, {producers} producer(s){placement}: {rate:8.1} txn/s{vs}   \
                 p50 ms: AddPartitions {a:.3}, Produce {p:.3}, EndTxn {e:.3}{per_txn}"
            );
        }
    }
    let p50 = percentile(&mut init_all.clone(), 0.5);
    let p99 = percentile(&mut init_all, 0.99);
    println!(
        "InitProducerId latency: p50 {p50:.3} ms, p99 {p99:.3} ms; the policy is {:.2}% of p50",
        decision_us / 1e3 / p50 * 100.0
    );
    let median = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            percentile(&mut v.to_vec(), 0.5)
        }
    };
    if repeat > 1 {
        println!("medians of {repeat} runs (min–max):");
        for (i, &(records, producers, shared)) in runs.iter().enumerate() {
            if rates[i].is_empty() {
                continue;
            }
            let lo = rates[i].iter().copied().fold(f64::INFINITY, f64::min);
            let hi = rates[i].iter().copied().fold(0.0, f64::max);
            let placement = placement(producers, shared);
            let vs = if ratios[i].is_empty() {
                String::new()
            } else {
                let r: Vec<String> = ratios[i].iter().map(|r| format!("{r:.1}")).collect();
                format!(
                    "  ({:.1}× one producer; per run {})",
                    median(&ratios[i]),
                    r.join(" / ")
                )
            };
            println!(
                "{records:>3}-record transactions, {producers} producer(s){placement}: {:8.1} txn/s ({lo:.0}–{hi:.0}){vs}",
                median(&rates[i])
            );
        }
    }
    let one_rate = median(&rates[0]);
    let verdict = |t: f64| if one_rate >= t { "PASS" } else { "MISS" };
    println!(
        "target one producer ≥ 0.75/(k·fsync): {target_one:.1} txn/s with the appending fsync: {}; \
         {target_in_place:.1} txn/s with the in-place fsync: {}; \
         {target_paced:.1} txn/s with the in-place fsync after a pause: {}",
        verdict(target_one),
        verdict(target_in_place),
        verdict(target_paced)
    );
    if let Some(wal) = broker.as_ref().and_then(|b| b.logs.wal()) {
        println!(
            "write-ahead log checkpoints during the run: {}",
            wal.checkpoints()
        );
    }
    Ok(())
}
