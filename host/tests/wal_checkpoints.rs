//! The shared write-ahead log's checkpoints run on their own in a live
//! broker: data older than the interval gets its segments synced and the
//! old file deleted, and the broker reports it on /metrics.

mod support;

use std::time::{Duration, Instant};

use kaas::log::FsyncMode;
use kaas::log::batch::data_batch;
use support::InProcess;

fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn a_checkpoint_runs_once_the_logged_data_is_older_than_the_interval() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |c| {
        c.wal_checkpoint_interval = Duration::from_millis(100);
    })
    .await;
    let t = b
        .broker
        .logs
        .create_topic("t", 2, Default::default(), false)
        .expect("create");
    for p in &t.partitions {
        p.append(data_batch(&[(None, b"v")], 1, None, false))
            .expect("append");
    }
    let text = b.broker.metrics.render(&b.broker);
    assert!(
        metric(&text, "kaas_wal_pending_bytes").is_some_and(|n| n > 0),
        "{text}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = b.broker.metrics.render(&b.broker);
        if metric(&text, "kaas_wal_checkpoints_total").is_some_and(|n| n >= 1) {
            assert_eq!(metric(&text, "kaas_wal_pending_bytes"), Some(0));
            break;
        }
        assert!(Instant::now() < deadline, "no checkpoint: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let files = std::fs::read_dir(dir.path().join("__wal"))
        .expect("wal dir")
        .count();
    assert_eq!(files, 1, "the checkpointed file is deleted");
    b.stop().await;
}
