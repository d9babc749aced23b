//! `__consumer_offsets` as clients see it: kaas keeps no log for it, but
//! clients name its partitions (FindCoordinator's hash, AddOffsetsToTxn), so
//! groups and transactional ids map onto its 50 partitions exactly as Kafka
//! maps them. A leaf: the group and transaction coordinators both use it.

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
