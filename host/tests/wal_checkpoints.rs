//! The shared write-ahead log's checkpoints run on their own in a live
//! broker: data older than the interval gets its segments synced and the
//! old file deleted, and the broker reports it on /metrics.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;
use support::{InProcess, metric_value as metric};

/// A broker whose write-ahead log is checkpointed once its data is 100 ms old.
async fn start(dir: &std::path::Path) -> InProcess {
    InProcess::start_with(dir, FsyncMode::Always, |c| {
        c.wal_checkpoint_interval = Duration::from_millis(100);
    })
    .await
}

/// Polls /metrics until `name` reaches `at_least`; returns when it saw it
/// and the text it saw.
async fn await_metric(
    b: &InProcess,
    name: &str,
    at_least: u64,
    within: Duration,
) -> (Instant, String) {
    let deadline = Instant::now() + within;
    loop {
        let text = kaas::exposition::render(&b.broker);
        if metric(&text, name).is_some_and(|n| n >= at_least) {
            return (Instant::now(), text);
        }
        assert!(
            Instant::now() < deadline,
            "{name} stayed under {at_least}: {text}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_checkpoint_runs_once_the_logged_data_is_older_than_the_interval() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path()).await;
    let t = b
        .broker
        .logs
        .create_topic("t", 2, Default::default(), false)
        .expect("create");
    for p in &t.open_partitions() {
        p.append(data_batch(&[(None, b"v")], 1, None, false))
            .expect("append");
    }
    let text = kaas::exposition::render(&b.broker);
    assert!(
        metric(&text, "kaas_wal_pending_bytes").is_some_and(|n| n > 0),
        "{text}"
    );
    let (_, text) =
        await_metric(&b, "kaas_wal_checkpoints_total", 1, Duration::from_secs(10)).await;
    assert_eq!(metric(&text, "kaas_wal_pending_bytes"), Some(0));
    assert_eq!(
        wal_files(dir.path()).len(),
        1,
        "the checkpointed file is done with"
    );
    assert_eq!(
        kaas::log::wal::free_files(&dir.path().join("__wal"))
            .expect("free files")
            .len(),
        1,
        "and kept for the next rotation to recycle"
    );
    b.stop().await;
}

/// The write-ahead log files in use (not the free ones kept to recycle).
fn wal_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("__wal"))
        .expect("wal dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("free-"))
        })
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn a_failed_checkpoint_keeps_its_file_and_is_retried_only_after_a_pause() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(dir.path()).await;
    let files = wal_files(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let seq: u64 = files[0]
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("a numbered file");
    // The name of the file a checkpoint rotates to is taken (by a
    // directory, which even root cannot open as a file): rotating fails.
    let blocker = dir
        .path()
        .join("__wal")
        .join(format!("{:020}.wal", seq + 1));
    std::fs::create_dir(&blocker).expect("blocker");
    let t = b
        .broker
        .logs
        .create_topic("t", 1, Default::default(), false)
        .expect("create");
    t.partition(0)
        .expect("partition 0")
        .append(data_batch(&[(None, b"v")], 1, None, false))
        .expect("append");

    let (failed_at, text) = await_metric(
        &b,
        "kaas_wal_checkpoint_failures_total",
        1,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(metric(&text, "kaas_wal_checkpoints_total"), Some(0));
    assert!(
        files[0].exists(),
        "the file of the failed checkpoint stays for replay"
    );
    std::fs::remove_dir(&blocker).expect("unblock");

    let (done_at, text) =
        await_metric(&b, "kaas_wal_checkpoints_total", 1, Duration::from_secs(20)).await;
    assert_eq!(
        metric(&text, "kaas_wal_checkpoint_failures_total"),
        Some(1),
        "no retry during the pause, though the broker ticks every 25 ms"
    );
    assert!(
        done_at - failed_at >= kaas::broker::WAL_CHECKPOINT_RETRY - Duration::from_millis(200),
        "retried after {:?}",
        done_at - failed_at
    );
    assert!(!files[0].exists(), "the retried checkpoint deleted it");
    b.stop().await;
}
