//! `apache37`: the reference kaas transaction-coordinator policy.
//!
//! It reproduces Apache Kafka 3.7's coordinator decisions (KIP-98, KIP-360
//! epoch bump and rotation) without the failover bug KAFKA-20357: every field
//! the retry rules need is in the entry the host persists, so a retry gets the
//! same answer before and after a restart. The rules live in [`rules`] as
//! plain Rust; this file is only the WIT export glue.

pub use kaas_apache37_rules as rules;

use kaas_policy_sdk::PolicyInfo;
use std::string::String;

/// The policy's name as `describe()` reports it.
pub const NAME: &str = "apache37";

/// The exported policy.
#[derive(Debug)]
pub struct Apache37;

impl rules::Variant for Apache37 {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: String::from(env!("CARGO_PKG_VERSION")),
            features: rules::FEATURES.iter().map(|&f| f.into()).collect(),
            protocol_features: rules::protocol_features(),
        }
    }
}

#[cfg(target_arch = "wasm32")]
kaas_policy_sdk::export_policy!(rules::Apache37Based<Apache37>);
