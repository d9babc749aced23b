//! The transaction coordinator: its sans-I/O state machine and the
//! state-record codec its log uses. Wire handlers and storage come later and
//! drive [`machine::TxnMachine`]; nothing here touches sockets or files.

pub mod coordinator;
pub mod machine;
pub mod markers;
pub mod record;
pub mod remote_markers;
pub mod route;
pub mod shards;
pub mod store;

/// The topic whose partitions stand for groups in a transaction
/// (AddOffsetsToTxn); kaas keeps no log for it: its markers complete the
/// group coordinator's pending transactional offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's partition of `__consumer_offsets` for a group (50 partitions):
/// abs'(javaStringHash(group)) % 50, abs' mapping i32::MIN to 0.
pub fn offsets_partition(group: &str) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % 50
}
