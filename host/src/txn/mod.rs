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
