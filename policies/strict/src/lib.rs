//! `strict`: a fail-closed transaction-coordinator policy.
//!
//! Where apache37 is lenient (to match Apache Kafka 3.7 exactly), strict
//! refuses: claims on absent entries and on the idempotent path, stale claims
//! that would abort an Ongoing transaction (quirk Q1), and retries once the
//! retried identity has been used. Everything else is apache37's rules.

pub mod rules;

use kaas_apache37_rules as apache;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, PolicyInfo};

/// The policy's name as `describe()` reports it.
pub const NAME: &str = "strict";

/// The exported policy.
#[derive(Debug)]
pub struct Strict;

impl apache::Variant for Strict {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            features: vec![
                "kip-98".into(),
                "kip-360".into(),
                "kip-890-verify".into(),
                "no-kafka-20357".into(),
                "fail-closed".into(),
                "no-q1".into(),
            ],
            protocol_features: apache::protocol_features(),
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        rules::init_producer_id(current, &req, limits)
    }
}

#[cfg(target_arch = "wasm32")]
kaas_policy_sdk::export_policy!(apache::Apache37Based<Strict>);
