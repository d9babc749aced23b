//! The transaction coordinator's ports: everything a [`super::Coordinator`]
//! asks of the rest of the broker, one narrow trait per collaborator, in
//! the style of [`crate::cluster::reconcile::ControlLoopPorts`]. The coordinator takes
//! an `Arc<dyn CoordinatorPorts>` (every port at once) and never sees the
//! broker, the log manager or the cluster view; the broker implements the
//! ports (`broker_ports.rs`), and the coordinator's unit tests implement
//! them in memory.
//!
//! - [`ProducerIdSource`]: fresh producer ids (a block on disk or in etcd).
//! - [`FenceSink`]: a producer-epoch bump, applied to every partition this
//!   broker leads and handed to the cross-broker fence ring.
//! - [`LeaderView`]: who leads a partition a marker goes to.
//! - [`MarkerSink`]: markers for partitions led here (the one local marker
//!   writer, [`super::markers`]).
//! - [`PeerMarkers`]: markers for partitions another broker leads.
//!
//! Every future a port hands back is `Send`; the ones the coordinator keeps
//! past the call ([`Flush`], [`PeerMarkers::send`]) own what they touch.

use std::future::Future;
use std::io;
use std::pin::Pin;

use super::record::UnsyncedMarkers;
use crate::cluster::NodeInfo;
use crate::policy::TopicPartition;

/// One coordinator's markers for one producer: the transaction's result on
/// every partition named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerSet {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// true: COMMIT; false: ABORT.
    pub commit: bool,
    /// The epoch of the coordinator writing them (its shard's leader epoch;
    /// 0 on a single node).
    pub coordinator_epoch: i32,
    pub partitions: Vec<TopicPartition>,
}

/// A boxed future a port returns (the ports are object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Makes appended markers durable, then lets consumers read up to them.
pub type Flush = BoxFuture<'static, ()>;

/// Fresh producer ids.
pub trait ProducerIdSource: Send + Sync {
    /// A producer id never handed out before (it may go unused).
    fn allocate(&self) -> BoxFuture<'_, io::Result<i64>>;
}

/// Where producer-epoch bumps go.
pub trait FenceSink: Send + Sync {
    /// `producer_id` moved to `epoch`: every partition this broker leads
    /// refuses the older epoch from now on, and the other brokers are told.
    /// Returns at once.
    fn fence(&self, producer_id: i64, epoch: i16);
}

/// Where one marker goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leader {
    /// This broker leads the partition (or its offsets shard).
    Here,
    /// Another broker does.
    Peer(NodeInfo),
    /// No live leader known yet: ask again later.
    Unknown,
    /// The topic or partition no longer exists.
    Gone,
}

/// Who leads what.
pub trait LeaderView: Send + Sync {
    /// The leader of `tp` (a `__consumer_offsets` partition: its group
    /// shard's coordinator).
    fn leader_of(&self, tp: &TopicPartition) -> Leader;

    /// Whether `tp` still exists, wherever it is led.
    fn exists(&self, tp: &TopicPartition) -> bool;

    /// Whether every partition is led here and a transaction may be
    /// completed before its markers' fdatasync (single-node mode; see the
    /// coordinator's docs). Cluster mode completes only durable markers.
    fn defers_marker_sync(&self) -> bool;
}

/// Markers appended here but not yet durable.
pub struct Unflushed {
    /// Per partition (in the set's order): the marker's offset, or the
    /// Kafka error code it was refused with.
    pub results: Vec<(TopicPartition, Result<i64, i16>)>,
    /// Makes the appended ones durable.
    pub flush: Flush,
}

impl std::fmt::Debug for Unflushed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unflushed")
            .field("results", &self.results)
            .finish_non_exhaustive()
    }
}

/// Markers for the partitions (and offsets shards) this broker leads.
pub trait MarkerSink: Send + Sync {
    /// Writes `set` and makes it durable: per partition, the Kafka error
    /// code (0 = written and durable).
    fn write_here(&self, set: MarkerSet) -> BoxFuture<'_, Vec<(TopicPartition, i16)>>;

    /// Appends `set` without waiting for the disk (no offsets partitions).
    fn append_here(&self, set: &MarkerSet) -> Unflushed;

    /// At load: appends again every marker of `markers` that a crash lost
    /// (the partition's log ends at or before its offset).
    fn repair(&self, txn_id: &str, markers: &UnsyncedMarkers) -> Flush;
}

/// Markers for partitions another broker leads.
pub trait PeerMarkers: Send + Sync {
    /// One WriteTxnMarkers to `node`: per partition, the code (every one
    /// COORDINATOR_NOT_AVAILABLE when the peer could not be asked).
    fn send(
        &self,
        node: NodeInfo,
        set: MarkerSet,
    ) -> BoxFuture<'static, Vec<(TopicPartition, i16)>>;
}

/// Every port a coordinator uses: what the transaction coordinator needs
/// from the rest of the broker.
pub trait CoordinatorPorts:
    ProducerIdSource + FenceSink + LeaderView + MarkerSink + PeerMarkers
{
}

impl<T: ProducerIdSource + FenceSink + LeaderView + MarkerSink + PeerMarkers + ?Sized>
    CoordinatorPorts for T
{
}

/// The coordinator's durable state log ([`super::store::TxnStore`] on
/// disk; a vector in the unit tests).
pub trait StateLog: Send + Sync + std::fmt::Debug {
    /// Appends `record` and makes it durable.
    fn append<'a>(
        &'a self,
        record: &'a super::record::StateRecord,
    ) -> BoxFuture<'a, io::Result<()>>;

    /// Appends `record` without waiting for the disk (a completion whose
    /// markers are durable, or whose unsynced markers it names).
    fn append_unsynced(&self, record: &super::record::StateRecord) -> io::Result<()>;

    /// Every later append fails: the shard moved to another coordinator.
    fn retire(&self);

    /// Whether [`Self::retire`] was called.
    fn is_retired(&self) -> bool;

    /// Whether the log grew enough since its last compaction to look again.
    fn compaction_worth_checking(&self) -> bool;

    /// Rewrites the log as `live` when that saves enough; true if it did.
    fn maybe_compact(&self, live: &[super::record::StateRecord]) -> io::Result<bool>;
}
