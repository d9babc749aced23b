//! The transaction coordinator: its sans-I/O state machine and the
//! state-record codec its log uses. Wire handlers and storage come later and
//! drive [`machine::TxnMachine`]; nothing here touches sockets or files.

pub mod machine;
pub mod record;
