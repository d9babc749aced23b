//! The lease gate: whether this broker may still write and acknowledge
//! for something it leads (a partition, a group shard's offsets journal, a
//! transaction shard's state log). In cluster mode every gate derives from
//! the broker's etcd lease (`cluster::lease`); alone, gates are always open.
//!
//! A closed gate fails the write with one typed error, [`GateClosed`]
//! inside an `io::Error`, whatever holds the gate; [`is_closed`] finds it,
//! and every caller maps it to the code that sends the client to the new
//! leader: NOT_LEADER_OR_FOLLOWER for a partition, NOT_COORDINATOR for a
//! group or transaction shard. A leaf: the log uses it without knowing the
//! cluster.

use std::io;
use std::sync::Arc;

/// True while its holder may still write and acknowledge.
pub type LeaseGate = Arc<dyn Fn() -> bool + Send + Sync>;

/// A gate that is always open (single-node mode).
pub fn always_open() -> LeaseGate {
    Arc::new(|| true)
}

/// The payload of the `io::Error` a write fails with once its gate closed.
#[derive(Debug, thiserror::Error)]
#[error("the lease gate is closed (this broker no longer leads it): {what}")]
pub struct GateClosed {
    /// What was refused.
    pub what: String,
}

/// The error of a write the gate refused; `what` says which write.
pub fn closed(what: impl Into<String>) -> io::Error {
    io::Error::other(GateClosed { what: what.into() })
}

/// Whether `e` is a write a closed gate refused.
pub fn is_closed(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<GateClosed>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_gate_error_is_recognised_and_others_are_not() {
        assert!(is_closed(&closed("appending")));
        assert!(!is_closed(&io::Error::other("disk full")));
        assert!(!is_closed(&io::Error::new(
            io::ErrorKind::NotConnected,
            "not here"
        )));
        assert!(closed("sealing").to_string().contains("sealing"));
    }
}
