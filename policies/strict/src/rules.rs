//! The fail-closed rules of `strict`: a few checks in front of the apache37
//! rules. Each difference is listed in README.md and has its own
//! conformance case (ids STRICT-01..).

use kaas_apache37_rules as apache;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, TxnState, code};

/// InitProducerId with strict's extra refusals, then apache37's rules.
pub fn init_producer_id(current: Option<Entry>, req: &InitRequest, limits: &Limits) -> Decision {
    if let Some(claim) = &req.claim {
        // S-1: a claim on the idempotent path is a client bug, not noise.
        let Some(_) = req.transactional_id else {
            return Decision::reject(code::INVALID_REQUEST);
        };
        let fenced = apache::fenced(req.version, apache::INIT_FENCED_SINCE);
        match &current {
            // S-2: nobody can hold an identity for an id that has none.
            None => return Decision::reject(fenced),
            Some(entry) if entry.producer_epoch >= 0 => {
                let current_holder = claim.producer_id == entry.producer_id
                    && claim.producer_epoch == entry.producer_epoch;
                let bump_retry = claim.producer_id == entry.producer_id
                    && claim.producer_epoch == entry.last_producer_epoch;
                let rotation_retry = claim.producer_id == entry.last_producer_id
                    && claim.producer_id != entry.producer_id
                    && claim.producer_epoch == entry.last_producer_epoch;
                // S-3: only the current holder may abort its Ongoing
                // transaction (no quirk Q1).
                if entry.state == TxnState::Ongoing && !current_holder {
                    return Decision::reject(fenced);
                }
                // S-4: a retry of a bump or rotation is recognised only while
                // the entry is still Empty, i.e. the new identity was never
                // used, and a rotation retry needs the exact recorded epoch.
                let retry_ok = entry.state == TxnState::Empty && (bump_retry || rotation_retry);
                if !current_holder && !retry_ok {
                    return Decision::reject(fenced);
                }
            }
            Some(_) => {}
        }
    }
    apache::init_producer_id(current, req, limits)
}
