//! Hostile admin requests: topic creation is
//! bounded per request and per broker, by partitions and by the open-file
//! limit; a creation that fails or is refused leaves nothing on disk; the
//! broker raises its soft open-file limit at start.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::{Client, InProcess, Process};

use kaas::log::FsyncMode;

const LEADER_NOT_AVAILABLE: i16 = 5;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const POLICY_VIOLATION: i16 = 44;
const KAFKA_STORAGE_ERROR: i16 = 56;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn topic(n: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(n))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
}

/// CreateTopics v7 of `topics`: each topic's (error code, message).
async fn create(c: &mut Client, topics: Vec<CreatableTopic>) -> Vec<(i16, String)> {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(60_000)
        .with_topics(topics);
    c.call(&req, 7)
        .await
        .topics
        .into_iter()
        .map(|t| {
            (
                t.error_code,
                t.error_message.map(|m| m.to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

/// Metadata v4 naming `topics`: each topic's (name, error code).
async fn metadata(c: &mut Client, topics: &[String], auto_create: bool) -> Vec<(String, i16)> {
    let req = MetadataRequest::default()
        .with_allow_auto_topic_creation(auto_create)
        .with_topics(Some(
            topics
                .iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
                .collect(),
        ));
    c.call(&req, 4)
        .await
        .topics
        .into_iter()
        .map(|t| {
            (
                t.name.map(|n| n.0.to_string()).unwrap_or_default(),
                t.error_code,
            )
        })
        .collect()
}

/// Entries of the data directory belonging to `topic`: its partition
/// directories and its metadata file.
fn on_disk(dir: &Path, topic: &str) -> Vec<String> {
    let prefix = format!("{topic}-");
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .expect("data dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    let meta = dir.join("__topics").join(format!("{topic}.json"));
    if meta.exists() {
        found.push(meta.display().to_string());
    }
    found.sort();
    found
}

/// A `kaas broker` started through `sh -c 'ulimit <ulimit>; exec kaas ...'`,
/// so it starts with that open-file limit.
fn spawn_with_ulimit(dir: &Path, ulimit: &str, env: &[(&str, &str)]) -> Process {
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit {ulimit} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_kaas"))
        .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .arg("--policy")
        .arg(support::wasm("kaas_policy_apache37.wasm"))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn kaas broker");
    Process::listening(child)
}

/// (soft, hard) "Max open files" of a process.
fn open_file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line");
    let mut fields = line["Max open files".len()..].split_whitespace();
    (
        fields.next().expect("soft").to_string(),
        fields.next().expect("hard").to_string(),
    )
}

#[tokio::test]
async fn a_create_topics_over_the_partition_limit_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |c| c.max_partitions = 20).await;
    let mut c = Client::connect(&b.addr.to_string()).await;

    // The request: 12 topics of 10,000 partitions, 120,000 in one
    // request, with the default per-request bound of 10,000.
    let names: Vec<String> = (0..12).map(|i| format!("big{i}")).collect();
    let started = Instant::now();
    let results = create(&mut c, names.iter().map(|n| topic(n, 10_000)).collect()).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused before any work"
    );
    assert_eq!(results.len(), 12);
    for (code, message) in &results {
        assert_eq!(*code, POLICY_VIOLATION, "{message}");
        assert!(message.contains("120000"), "{message}");
    }
    for n in &names {
        assert_eq!(on_disk(dir.path(), n), Vec::<String>::new(), "{n}");
    }
    let meta = metadata(&mut c, &names, false).await;
    assert!(meta.iter().all(|(_, e)| *e == UNKNOWN_TOPIC_OR_PARTITION));

    // The broker-wide bound (20 here): 15 fit, 6 more do not, 5 still do.
    assert_eq!(create(&mut c, vec![topic("a", 15)]).await[0].0, 0);
    let refused = create(&mut c, vec![topic("b", 6)]).await;
    assert_eq!(refused[0].0, POLICY_VIOLATION, "{}", refused[0].1);
    assert_eq!(on_disk(dir.path(), "b"), Vec::<String>::new());
    assert_eq!(create(&mut c, vec![topic("c", 5)]).await[0].0, 0);
    assert_eq!(
        on_disk(dir.path(), "c").len(),
        5 + 1,
        "5 partitions and the metadata"
    );
    b.stop().await;
}

#[test]
fn a_failed_topic_creation_leaves_no_directories() {
    let dir = tempfile::tempdir().expect("tmp");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // The fault point fails the creation of the middle partition of the
    // first topic created with more than one partition, once.
    let b = Process::spawn_env(dir.path(), &[], &[("KAAS_FAULT", "create-partition")]);
    rt.block_on(async {
        let mut c = Client::connect(&b.addr).await;
        let failed = create(&mut c, vec![topic("t", 8)]).await;
        assert_eq!(failed[0].0, KAFKA_STORAGE_ERROR, "{}", failed[0].1);
        assert_eq!(on_disk(dir.path(), "t"), Vec::<String>::new());
        let meta = metadata(&mut c, &["t".to_string()], false).await;
        assert_eq!(meta[0].1, UNKNOWN_TOPIC_OR_PARTITION);
        assert_eq!(create(&mut c, vec![topic("t", 8)]).await[0].0, 0);
        assert_eq!(on_disk(dir.path(), "t").len(), 8 + 1);
    });
    b.terminate();
    let b = Process::spawn(dir.path(), &[]);
    rt.block_on(async {
        let mut c = Client::connect(&b.addr).await;
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("t"))),
            ]));
        let resp = c.call(&req, 4).await;
        assert_eq!(resp.topics[0].error_code, 0);
        assert_eq!(resp.topics[0].partitions.len(), 8);
    });
    b.terminate();
}

/// Partitions take no descriptor of their own (the open-file cache): with 300
/// descriptors a broker holds 400 partitions and more, their files going
/// through an open-file cache sized at start to what the limit leaves. The
/// budget still refuses a creation when connections have taken the room
/// the cache was given, and that refusal leaves nothing on disk.
#[test]
fn more_partitions_than_descriptors_fit_and_a_creation_without_room_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // 300 descriptors, at most 150 of them kept for connections and the
    // broker's own files.
    let b = spawn_with_ulimit(dir.path(), "-n 300", &[]);
    let pid = b.child.id();
    let fds = || std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    rt.block_on(async {
        let mut c = Client::connect(&b.addr).await;
        for t in ["wide", "wider"] {
            let created = create(&mut c, vec![topic(t, 400)]).await;
            assert_eq!(created[0].0, 0, "{}", created[0].1);
        }
        assert!(fds() < 200, "{} descriptors for 800 partitions", fds());
        // Idle connections take the room the cache was sized with.
        let mut idle = Vec::new();
        for _ in 0..120 {
            idle.push(
                tokio::net::TcpStream::connect(&b.addr)
                    .await
                    .expect("connect"),
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let refused = create(&mut c, vec![topic("late", 400)]).await;
        assert_eq!(refused[0].0, POLICY_VIOLATION, "{}", refused[0].1);
        assert!(refused[0].1.contains("open files"), "{}", refused[0].1);
        assert_eq!(on_disk(dir.path(), "late"), Vec::<String>::new());
        drop(idle);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(create(&mut c, vec![topic("narrow", 20)]).await[0].0, 0);
        // The broker still serves new clients.
        let mut other = Client::connect(&b.addr).await;
        let meta = metadata(
            &mut other,
            &["narrow".to_string(), "wide".to_string()],
            false,
        )
        .await;
        assert_eq!(meta[0].1, 0);
        assert_eq!(meta[1].1, 0);
    });
    b.terminate();
}

#[tokio::test]
async fn metadata_auto_creates_a_bounded_number_of_topics_per_request() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start_with(dir.path(), FsyncMode::Always, |c| {
        c.default_partitions = 1;
        c.max_auto_created_topics_per_request = 5;
        c.max_partitions = 12;
    })
    .await;
    let mut c = Client::connect(&b.addr.to_string()).await;
    let names: Vec<String> = (0..20).map(|i| format!("auto{i:02}")).collect();
    let created = |meta: &[(String, i16)]| meta.iter().filter(|(_, e)| *e == 0).count();

    let first = metadata(&mut c, &names, true).await;
    assert_eq!(first.len(), 20);
    assert_eq!(created(&first), 5);
    assert!(
        first[5..].iter().all(|(_, e)| *e == LEADER_NOT_AVAILABLE),
        "the rest are retriable: {first:?}"
    );
    assert_eq!(b.broker.logs.topics().len(), 5);

    // Asking again creates the next five.
    let second = metadata(&mut c, &names, true).await;
    assert_eq!(created(&second), 10);
    assert_eq!(b.broker.logs.topics().len(), 10);

    // The broker-wide bound (12 partitions) stops auto-creation too.
    let third = metadata(&mut c, &names, true).await;
    assert_eq!(created(&third), 12);
    assert!(
        third[12..]
            .iter()
            .all(|(_, e)| *e == UNKNOWN_TOPIC_OR_PARTITION),
        "{third:?}"
    );
    assert_eq!(b.broker.logs.topics().len(), 12);
    for n in &names[12..] {
        assert_eq!(on_disk(dir.path(), n), Vec::<String>::new(), "{n}");
    }
    b.stop().await;
}

#[test]
fn the_broker_raises_its_soft_fd_limit_at_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = spawn_with_ulimit(dir.path(), "-Sn 256", &[]);
    let (soft, hard) = open_file_limits(b.child.id());
    assert_ne!(hard, "256", "the hard limit is above the soft one given");
    assert_eq!(soft, hard, "the soft limit was raised to the hard one");
    b.terminate();
}

/// Creating thousands of partitions (directories, files, fsyncs) runs off
/// the async runtime and outside the lock produce and fetch take: with a
/// single runtime worker, another connection's ApiVersions and a produce
/// to another topic are answered while a big CreateTopics is still
/// creating.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn creating_many_partitions_does_not_stall_other_requests() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = InProcess::start(dir.path(), FsyncMode::Always).await;
    let addr = b.addr.to_string();
    let mut other = Client::connect(&addr).await;
    assert_eq!(create(&mut other, vec![topic("small", 1)]).await[0].0, 0);
    let mut creator = Client::connect(&addr).await;
    let req = CreateTopicsRequest::default()
        .with_topics(vec![topic("big", 4000)])
        .with_timeout_ms(60_000);
    let (_, frame) = creator.frame(&req, 5);
    creator.send_raw(&frame).await;
    // Wait (a condition: the creation has begun) for its first partition.
    let first = dir.path().join("big-0");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !first.exists() {
        assert!(Instant::now() < deadline, "the creation never began");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let v = other.call(&support::api_versions_v3(), 3).await;
    assert_eq!(v.error_code, 0);
    assert!(
        !dir.path().join("big-3999").exists(),
        "ApiVersions was answered only after all 4000 partitions existed"
    );
    let batch = kaas::log::batch::data_batch(&[(None, b"v")], 1, None, false);
    assert_eq!(
        support::records::produce(&mut other, "small", 0, batch).await,
        (0, 0)
    );
    assert!(
        !dir.path().join("big-3999").exists(),
        "a produce to another topic waited for all 4000 partitions"
    );
    let resp = creator
        .read_frame()
        .await
        .expect("the CreateTopics response");
    assert!(!resp.is_empty());
    assert!(dir.path().join("big-3999").exists());
    b.stop().await;
}
