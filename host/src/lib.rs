//! kaas: a Kafka-wire-compatible broker whose transaction coordinator is
//! programmable.
//!
//! Major components and how they connect:
//! - [`policy`]: the wasmtime sandbox that runs a policy component (the WIT
//!   package in `policy-wit/`) and checks every decision it returns against
//!   the host's invariants.
//! - [`txn`]: the coordinator, sans I/O. [`txn::machine::TxnMachine`] asks the
//!   policy, plans a durable write, and applies it once the caller reports it
//!   durable; [`txn::record`] is the versioned state-record codec.
//! - [`conformance`]: data-driven vectors run through the real runtime and
//!   machine (`kaas conformance`).
//!
//! The wire server, partition log and consumer groups build on these.

pub mod conformance;
pub mod policy;
pub mod txn;
