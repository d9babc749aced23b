//! The `kaas` binary's subcommands that outgrew main.rs.

pub(crate) mod broker;
