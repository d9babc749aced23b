//! `capped`: apache37 with two refusals in front of its InitProducerId rule,
//! built only from the ABI (no host changes): a transaction timeout cap of
//! 60 s below the broker's transaction.max.timeout.ms, and no KIP-360 epoch
//! claims from transactional ids that were never initialised. The rules are
//! in [`rules`]; this file is the `describe()` and the WIT export glue.

pub mod rules;

use kaas_apache37_rules as apache;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, PolicyInfo};

/// The policy's name as `describe()` reports it.
pub const NAME: &str = "capped";

/// The exported policy.
#[derive(Debug)]
pub struct Capped;

impl apache::Variant for Capped {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            // apache37's own, then capped's: it hands every other path
            // (PRODUCER_FENCED answers included) to apache37's rules.
            features: apache::FEATURES
                .iter()
                .chain(&[
                    "max-timeout-60000",
                    "max-timeout-per-tenant-class",
                    "no-claims-on-uninitialised-ids",
                ])
                .map(|&f| f.into())
                .collect(),
            protocol_features: apache::protocol_features(),
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        rules::init_producer_id(current, &req, limits)
    }
}

#[cfg(target_arch = "wasm32")]
kaas_policy_sdk::export_policy!(apache::Apache37Based<Capped>);
