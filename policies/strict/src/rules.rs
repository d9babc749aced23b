//! The fail-closed rules of `strict`: a few checks in front of the apache37
//! rules. Each difference is listed in README.md and has its own
//! conformance case (ids STRICT-01..).

use kaas_apache37_rules as apache;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, TransactionalId, TxnState, code};

/// InitProducerId with strict's extra refusals, then apache37's rules.
pub fn init_producer_id(current: Option<Entry>, req: &InitRequest, limits: &Limits) -> Decision {
    if let Some(claim) = &req.claim() {
        // S-1: a claim on the idempotent path is a client bug, not noise.
        if req.transactional_id == TransactionalId::Absent {
            return Decision::reject(code::INVALID_REQUEST);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_policy_sdk::{Claim, DecisionKind};

    const LIMITS: Limits = Limits {
        max_timeout_ms: 900_000,
        exhausted_epoch: 32766,
    };

    fn req(txn: Option<&str>, claim: Option<(i64, i16)>) -> InitRequest {
        InitRequest {
            transactional_id: match txn {
                None => TransactionalId::Absent,
                Some("") => TransactionalId::Empty,
                Some(_) => TransactionalId::Present,
            },
            claim: Claim::of(claim),
            version: 4,
            timeout_ms: 60_000,
            candidate_producer_id: 2000,
            tenant: 0,
        }
    }

    fn ongoing(epoch: i16, last_epoch: i16) -> Entry {
        Entry {
            producer_id: 1000,
            producer_epoch: epoch,
            last_producer_id: 1000,
            last_producer_epoch: last_epoch,
            next_producer_id: -1,
            state: TxnState::Ongoing,
            timeout_ms: 60_000,
            flags: kaas_policy_sdk::EntryFlags::empty(),
        }
    }

    #[test]
    fn idempotent_claim_is_invalid_request() {
        let d = init_producer_id(None, &req(None, Some((1000, 5))), &LIMITS);
        assert_eq!(d.reply.error_code, code::INVALID_REQUEST);
    }

    #[test]
    fn claim_on_absent_entry_is_fenced() {
        let d = init_producer_id(None, &req(Some("T"), Some((1000, 5))), &LIMITS);
        assert_eq!(d.reply.error_code, code::PRODUCER_FENCED);
        assert!(d.entry.is_none());
    }

    #[test]
    fn stale_claim_never_aborts_an_ongoing_transaction() {
        let d = init_producer_id(
            Some(ongoing(7, 6)),
            &req(Some("T"), Some((1000, 6))),
            &LIMITS,
        );
        assert_eq!(
            (d.kind, d.reply.error_code),
            (DecisionKind::Reject, code::PRODUCER_FENCED)
        );
        let holder = init_producer_id(
            Some(ongoing(7, 6)),
            &req(Some("T"), Some((1000, 7))),
            &LIMITS,
        );
        assert_eq!(holder.kind, DecisionKind::FenceAndAbort);
    }
}
