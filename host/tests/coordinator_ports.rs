//! The transaction coordinator against in-memory fakes of its ports: no
//! broker, no data directory, no sockets. The policy is the real apache37
//! component in the real sandbox; everything the coordinator asks of the
//! rest of the broker (producer ids, fences, who leads what, the local and
//! remote marker writers, its state log) is a fake that records what it
//! was asked and answers as a test scripts it.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kaas::cluster::NodeInfo;
use kaas::codes;
use kaas::policy::{
    AddPartitionsRequest, EndTxnRequest, PolicyRuntime, PolicySlot, SandboxLimits, TopicPartition,
    TxnState,
};
use kaas::txn::coordinator::Coordinator;
use kaas::txn::machine::{DEFAULT_LIMITS, InitProducerId, TxnMachine};
use kaas::txn::port::{
    BoxFuture, CoordinatorPorts, FenceSink, Flush, Leader, LeaderView, MarkerSet, MarkerSink,
    PeerMarkers, ProducerIdSource, StateLog, Unflushed,
};
use kaas::txn::record::{StateRecord, UnsyncedMarkers};
use tokio::sync::Notify;

/// The state log: records in memory; every append wakes the waiters.
#[derive(Debug, Default)]
struct MemoryLog {
    records: Mutex<Vec<(StateRecord, bool)>>,
    appended: Notify,
}

impl MemoryLog {
    fn push(&self, record: &StateRecord, synced: bool) {
        self.records.lock().unwrap().push((record.clone(), synced));
        self.appended.notify_waiters();
    }

    /// Waits until a record satisfies `done`; returns it and whether it
    /// was appended durably.
    async fn wait_for(&self, done: impl Fn(&StateRecord) -> bool) -> (StateRecord, bool) {
        let found = async {
            loop {
                let notified = self.appended.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if let Some(r) = self.records.lock().unwrap().iter().find(|(r, _)| done(r)) {
                    return r.clone();
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), found)
            .await
            .expect("the record was never appended")
    }
}

/// A shared handle, so the coordinator can own one and the test read it.
#[derive(Debug, Clone, Default)]
struct SharedLog(Arc<MemoryLog>);

impl StateLog for SharedLog {
    fn append<'a>(&'a self, record: &'a StateRecord) -> BoxFuture<'a, io::Result<()>> {
        self.0.push(record, true);
        Box::pin(async { Ok(()) })
    }
    fn append_unsynced(&self, record: &StateRecord) -> io::Result<()> {
        self.0.push(record, false);
        Ok(())
    }
    fn retire(&self) {}
    fn is_retired(&self) -> bool {
        false
    }
    fn compaction_worth_checking(&self) -> bool {
        false
    }
    fn maybe_compact(&self, _live: &[StateRecord]) -> io::Result<bool> {
        Ok(false)
    }
}

/// What a peer answers: per call, a code for every partition, and maybe a
/// new leader to install before answering (the leader moved).
type PeerScript = Box<dyn Fn(&FakeState, i32, &MarkerSet) -> i16 + Send + Sync>;

struct FakeState {
    next_pid: AtomicI64,
    fences: Mutex<Vec<(i64, i16)>>,
    leaders: Mutex<HashMap<TopicPartition, Leader>>,
    /// How many times the coordinator asked who leads a partition.
    routed: AtomicUsize,
    defers_sync: bool,
    /// Markers written here (durably or not).
    local: Mutex<Vec<MarkerSet>>,
    /// Markers sent to peers: (node, set).
    sent: Mutex<Vec<(i32, MarkerSet)>>,
    peer_answer: PeerScript,
    /// Released by the test: the unsynced markers' flush waits for it.
    flush_gate: Arc<Notify>,
    flushed: Mutex<bool>,
}

/// The coordinator's host: every port in memory.
#[derive(Clone)]
struct FakePorts(Arc<FakeState>);

impl ProducerIdSource for FakePorts {
    fn allocate(&self) -> BoxFuture<'_, io::Result<i64>> {
        let pid = self.0.next_pid.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Ok(pid) })
    }
}

impl FenceSink for FakePorts {
    fn fence(&self, producer_id: i64, epoch: i16) {
        self.0.fences.lock().unwrap().push((producer_id, epoch));
    }
}

impl LeaderView for FakePorts {
    fn leader_of(&self, tp: &TopicPartition) -> Leader {
        self.0.routed.fetch_add(1, Ordering::SeqCst);
        self.0
            .leaders
            .lock()
            .unwrap()
            .get(tp)
            .cloned()
            .unwrap_or(Leader::Gone)
    }
    fn exists(&self, tp: &TopicPartition) -> bool {
        self.0.leaders.lock().unwrap().contains_key(tp)
    }
    fn defers_marker_sync(&self) -> bool {
        self.0.defers_sync
    }
}

impl MarkerSink for FakePorts {
    fn write_here(&self, set: MarkerSet) -> BoxFuture<'_, Vec<(TopicPartition, i16)>> {
        self.0.local.lock().unwrap().push(set.clone());
        Box::pin(async move { set.partitions.into_iter().map(|tp| (tp, 0)).collect() })
    }
    fn append_here(&self, set: &MarkerSet) -> Unflushed {
        self.0.local.lock().unwrap().push(set.clone());
        let results = set
            .partitions
            .iter()
            .enumerate()
            .map(|(i, tp)| (tp.clone(), Ok(100 + i as i64)))
            .collect();
        let state = self.0.clone();
        let gate = self.0.flush_gate.clone();
        let flush: Flush = Box::pin(async move {
            gate.notified().await;
            *state.flushed.lock().unwrap() = true;
        });
        Unflushed { results, flush }
    }
    fn repair(&self, _txn_id: &str, _markers: &UnsyncedMarkers) -> Flush {
        Box::pin(async {})
    }
}

impl PeerMarkers for FakePorts {
    fn send(
        &self,
        node: NodeInfo,
        set: MarkerSet,
    ) -> BoxFuture<'static, Vec<(TopicPartition, i16)>> {
        let state = self.0.clone();
        Box::pin(async move {
            state.sent.lock().unwrap().push((node.id, set.clone()));
            let code = (state.peer_answer)(&state, node.id, &set);
            set.partitions.into_iter().map(|tp| (tp, code)).collect()
        })
    }
}

fn node(id: i32) -> NodeInfo {
    NodeInfo {
        id,
        host: "127.0.0.1".into(),
        port: 9000 + id,
        incarnation: 0,
        listeners: Vec::new(),
    }
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

fn now() -> i64 {
    kaas::clock::now_ms()
}

/// A coordinator over the apache37 policy and a fresh in-memory log, with
/// its fake host.
fn coordinator(
    defers_sync: bool,
    leaders: &[(TopicPartition, Leader)],
    peer_answer: PeerScript,
) -> (
    Arc<Coordinator>,
    Arc<dyn CoordinatorPorts>,
    Arc<FakeState>,
    SharedLog,
) {
    let rt = PolicyRuntime::new(SandboxLimits::default(), None).expect("runtime");
    let policy = rt
        .load_file(&support::wasm("kaas_policy_apache37.wasm"))
        .expect("policy");
    let machine = TxnMachine::with_slot(PolicySlot::new(Arc::new(policy)), DEFAULT_LIMITS);
    let log = SharedLog::default();
    let coord = Arc::new(Coordinator::new(
        machine,
        Box::new(log.clone()),
        Vec::new(),
        i64::MAX,
        7,
    ));
    let state = Arc::new(FakeState {
        next_pid: AtomicI64::new(1000),
        fences: Mutex::new(Vec::new()),
        leaders: Mutex::new(leaders.iter().cloned().collect()),
        routed: AtomicUsize::new(0),
        defers_sync,
        local: Mutex::new(Vec::new()),
        sent: Mutex::new(Vec::new()),
        peer_answer,
        flush_gate: Arc::new(Notify::new()),
        flushed: Mutex::new(false),
    });
    let host: Arc<dyn CoordinatorPorts> = Arc::new(FakePorts(state.clone()));
    (coord, host, state, log)
}

fn init(txn_id: &str, producer_id: i64, producer_epoch: i16) -> InitProducerId {
    InitProducerId {
        transactional_id: Some(txn_id.into()),
        timeout_ms: 60_000,
        producer_id,
        producer_epoch,
        version: 4,
    }
}

/// InitProducerId, AddPartitionsToTxn of `partitions`, EndTxn(commit):
/// the producer id and epoch the transaction ran under.
async fn commit(
    coord: &Arc<Coordinator>,
    host: &Arc<dyn CoordinatorPorts>,
    txn_id: &str,
    partitions: Vec<TopicPartition>,
) -> (i64, i16) {
    let r = coord.init_producer_id(host, &init(txn_id, -1, -1)).await;
    assert_eq!(r.error_code, codes::NONE, "{r:?}");
    let (code, per_partition) = coord
        .add_partitions(
            host,
            &AddPartitionsRequest {
                transactional_id: txn_id.into(),
                producer_id: r.producer_id,
                producer_epoch: r.producer_epoch,
                partitions,
                version: 3,
                verify_only: false,
                source: kaas::policy::AddSource::AddPartitions,
                tenant: 0,
                now_ms: now(),
            },
        )
        .await;
    assert_eq!(code, codes::NONE);
    assert!(
        per_partition.iter().all(|&c| c == codes::NONE),
        "{per_partition:?}"
    );
    let ended = coord
        .end_txn(
            host,
            &EndTxnRequest {
                transactional_id: txn_id.into(),
                producer_id: r.producer_id,
                producer_epoch: r.producer_epoch,
                commit: true,
                version: 3,
                candidate_producer_id: -1,
                tenant: 0,
                now_ms: now(),
            },
        )
        .await;
    assert_eq!(ended, codes::NONE);
    (r.producer_id, r.producer_epoch)
}

fn completed(txn_id: &str) -> impl Fn(&StateRecord) -> bool + '_ {
    move |r| {
        matches!(r, StateRecord::Upsert { entry, .. }
            if entry.transactional_id == txn_id && entry.state == TxnState::CompleteCommit)
    }
}

fn accept_all() -> PeerScript {
    Box::new(|_, _, _| codes::NONE)
}

#[tokio::test]
async fn rejoin_bumps_the_epoch_and_fences_the_old_one() {
    let (coord, host, state, _log) = coordinator(true, &[], accept_all());
    let first = coord.init_producer_id(&host, &init("rejoin", -1, -1)).await;
    assert_eq!(first.error_code, codes::NONE);
    // The same transactional id again, as a restarted client would: a new
    // session at a higher epoch, and the old one fenced everywhere.
    let second = coord.init_producer_id(&host, &init("rejoin", -1, -1)).await;
    assert_eq!(second.error_code, codes::NONE);
    assert_eq!(second.producer_id, first.producer_id);
    assert!(
        second.producer_epoch > first.producer_epoch,
        "{first:?} then {second:?}"
    );
    let fences = state.fences.lock().unwrap().clone();
    assert!(
        fences.contains(&(second.producer_id, second.producer_epoch)),
        "the fence sink got {fences:?}"
    );
    // The zombie's EndTxn at the old epoch is refused.
    let zombie = coord
        .end_txn(
            &host,
            &EndTxnRequest {
                transactional_id: "rejoin".into(),
                producer_id: first.producer_id,
                producer_epoch: first.producer_epoch,
                commit: true,
                version: 3,
                candidate_producer_id: -1,
                tenant: 0,
                now_ms: now(),
            },
        )
        .await;
    assert_eq!(zombie, codes::PRODUCER_FENCED);
}

#[tokio::test]
async fn commit_sends_markers_to_the_local_and_the_remote_leader() {
    let here = tp("orders", 0);
    let there = tp("orders", 1);
    let (coord, host, state, log) = coordinator(
        false,
        &[
            (here.clone(), Leader::Here),
            (there.clone(), Leader::Peer(node(2))),
        ],
        accept_all(),
    );
    let (pid, epoch) = commit(&coord, &host, "t-both", vec![here.clone(), there.clone()]).await;
    let (record, _) = log.0.wait_for(completed("t-both")).await;
    assert!(
        matches!(
            record,
            StateRecord::Upsert {
                unsynced_markers: None,
                ..
            }
        ),
        "cluster-mode completions follow durable markers: {record:?}"
    );
    let local = state.local.lock().unwrap().clone();
    assert_eq!(local.len(), 1, "{local:?}");
    assert_eq!(local[0].partitions, vec![here]);
    assert!(local[0].commit);
    assert_eq!(
        (local[0].producer_id, local[0].producer_epoch),
        (pid, epoch)
    );
    assert_eq!(local[0].coordinator_epoch, 7);
    let sent = state.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, 2);
    assert_eq!(sent[0].1.partitions, vec![there]);
    assert_eq!(sent[0].1.coordinator_epoch, 7);
}

#[tokio::test]
async fn marker_is_retried_through_a_leader_change() {
    let moving = tp("payments", 3);
    // Node 2 no longer leads the partition: it answers
    // NOT_LEADER_OR_FOLLOWER, and the view now names node 3.
    let script: PeerScript = Box::new(|state, node_id, set| {
        if node_id == 2 {
            let mut leaders = state.leaders.lock().unwrap();
            for tp in &set.partitions {
                leaders.insert(tp.clone(), Leader::Peer(node(3)));
            }
            codes::NOT_LEADER_OR_FOLLOWER
        } else {
            codes::NONE
        }
    });
    let (coord, host, state, log) =
        coordinator(false, &[(moving.clone(), Leader::Peer(node(2)))], script);
    commit(&coord, &host, "t-moved", vec![moving.clone()]).await;
    log.0.wait_for(completed("t-moved")).await;
    let sent: Vec<(i32, Vec<TopicPartition>)> = state
        .sent
        .lock()
        .unwrap()
        .iter()
        .map(|(n, s)| (*n, s.partitions.clone()))
        .collect();
    assert_eq!(
        sent,
        vec![(2, vec![moving.clone()]), (3, vec![moving])],
        "the marker goes to the old leader, then to the new one"
    );
}

#[tokio::test]
async fn completion_waits_for_no_leader_and_is_not_recorded_meanwhile() {
    let orphan = tp("audit", 0);
    let (coord, host, state, log) =
        coordinator(false, &[(orphan.clone(), Leader::Unknown)], accept_all());
    commit(&coord, &host, "t-orphan", vec![orphan.clone()]).await;
    // Without a leader the marker cannot be written, and the transaction
    // must not complete however often the coordinator asks again; once
    // one appears it does.
    let asked_thrice = async {
        while state.routed.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), asked_thrice)
        .await
        .expect("the coordinator stopped asking for a leader");
    assert!(
        !log.0
            .records
            .lock()
            .unwrap()
            .iter()
            .any(|(r, _)| completed("t-orphan")(r)),
        "completed with a marker unwritten"
    );
    state
        .leaders
        .lock()
        .unwrap()
        .insert(orphan.clone(), Leader::Peer(node(4)));
    log.0.wait_for(completed("t-orphan")).await;
    assert_eq!(state.sent.lock().unwrap()[0].0, 4);
}

#[tokio::test]
async fn single_node_completion_precedes_the_markers_flush() {
    let a = tp("events", 0);
    let b = tp("events", 1);
    let (coord, host, state, log) = coordinator(
        true,
        &[(a.clone(), Leader::Here), (b.clone(), Leader::Here)],
        accept_all(),
    );
    commit(&coord, &host, "t-fast", vec![a.clone(), b.clone()]).await;
    // Recorded before the markers are durable, naming them as unsynced.
    let (record, _) = log.0.wait_for(completed("t-fast")).await;
    let StateRecord::Upsert {
        unsynced_markers: Some(unsynced),
        ..
    } = record
    else {
        panic!("the completion does not name its unsynced markers: {record:?}");
    };
    assert_eq!(unsynced.markers, vec![(a, 100), (b, 101)]);
    assert!(coord.machine().has_unsynced_markers("t-fast"));
    assert!(!*state.flushed.lock().unwrap());
    // The flush finishes: the entry stops naming them.
    let wait = async {
        loop {
            state.flush_gate.notify_waiters();
            if !coord.machine().has_unsynced_markers("t-fast") {
                return;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the unsynced markers were never marked synced");
    assert!(*state.flushed.lock().unwrap());
    assert!(
        state.sent.lock().unwrap().is_empty(),
        "nothing goes to peers"
    );
}
