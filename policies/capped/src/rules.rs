//! The two rules `capped` adds in front of apache37's InitProducerId (every
//! other decision is apache37's). Each is listed in README.md, declared in
//! differences.json and exercised by conformance cases (CAPPED-01..).

use kaas_apache37_rules as apache;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, NO_EPOCH, TransactionalId, code};

/// The largest transaction timeout capped accepts (ms) from an id of tenant
/// class 0 (and of any class without its own cap). The broker's own limit
/// (`transaction.max.timeout.ms`, [`Limits::max_timeout_ms`]) still applies
/// when it is lower.
pub const MAX_TIMEOUT_MS: i32 = 60_000;

/// Tenant class 1 (`--tenant-class PREFIX=1`): interactive producers, whose
/// hung transaction may hold a partition's last stable offset for 15 s.
pub const INTERACTIVE_MAX_TIMEOUT_MS: i32 = 15_000;

/// Tenant class 2 (`--tenant-class PREFIX=2`): batch jobs, 5 minutes.
pub const BATCH_MAX_TIMEOUT_MS: i32 = 300_000;

/// The cap for an id of tenant class `tenant`.
pub fn max_timeout_ms(tenant: u8) -> i32 {
    match tenant {
        1 => INTERACTIVE_MAX_TIMEOUT_MS,
        2 => BATCH_MAX_TIMEOUT_MS,
        _ => MAX_TIMEOUT_MS,
    }
}

/// InitProducerId with capped's refusals, then apache37's rules.
pub fn init_producer_id(current: Option<Entry>, req: &InitRequest, limits: &Limits) -> Decision {
    // The idempotent path and the empty id keep apache37's answers (a fresh
    // pid; INVALID_REQUEST): neither has a transaction to time out or an
    // entry to claim.
    if req.transactional_id != TransactionalId::Present {
        return apache::init_producer_id(current, req, limits);
    }
    // C-1: the timeout cap. Checked where apache37 checks the broker's limit,
    // before any claim, so an over-cap request changes nothing (it neither
    // bumps an idle entry nor fences an Ongoing one).
    if req.timeout_ms > max_timeout_ms(req.tenant) {
        return Decision::reject(code::INVALID_TRANSACTION_TIMEOUT);
    }
    // C-2: a claim names an identity (pid, epoch) the coordinator handed out.
    // An id that was never initialised (no entry, or one that never reached
    // epoch 0) has handed out none, so the claim comes from a producer whose
    // id expired or from a confused client: fenced, as Kafka answers a claim
    // that does not match the stored identity.
    if req.claim().is_some()
        && current
            .as_ref()
            .is_none_or(|e| e.producer_epoch == NO_EPOCH)
    {
        return Decision::reject(apache::fenced(req.version, apache::INIT_FENCED_SINCE));
    }
    apache::init_producer_id(current, req, limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_policy_sdk::{Claim, DecisionKind, TxnState};

    const LIMITS: Limits = Limits {
        max_timeout_ms: 900_000,
        exhausted_epoch: 32766,
    };

    fn req(txn: TransactionalId, claim: Option<(i64, i16)>, timeout_ms: i32) -> InitRequest {
        InitRequest {
            transactional_id: txn,
            claim: Claim::of(claim),
            version: 4,
            timeout_ms,
            candidate_producer_id: 2000,
            tenant: 0,
        }
    }

    fn entry(state: TxnState, epoch: i16) -> Entry {
        Entry {
            producer_id: 1000,
            producer_epoch: epoch,
            last_producer_id: 1000,
            last_producer_epoch: -1,
            next_producer_id: -1,
            state,
            timeout_ms: 60_000,
            flags: kaas_policy_sdk::EntryFlags::empty(),
        }
    }

    #[test]
    fn each_tenant_class_has_its_own_cap() {
        for (tenant, cap) in [
            (0, MAX_TIMEOUT_MS),
            (1, INTERACTIVE_MAX_TIMEOUT_MS),
            (2, BATCH_MAX_TIMEOUT_MS),
            (9, MAX_TIMEOUT_MS),
        ] {
            let at = InitRequest {
                tenant,
                ..req(TransactionalId::Present, None, cap)
            };
            assert_eq!(
                init_producer_id(None, &at, &LIMITS).reply.error_code,
                code::NONE,
                "class {tenant} at {cap}"
            );
            let above = InitRequest {
                timeout_ms: cap + 1,
                ..at
            };
            assert_eq!(
                init_producer_id(None, &above, &LIMITS).reply.error_code,
                code::INVALID_TRANSACTION_TIMEOUT,
                "class {tenant} above {cap}"
            );
        }
    }

    #[test]
    fn a_timeout_at_the_cap_is_accepted_and_one_above_is_refused() {
        let at = init_producer_id(
            None,
            &req(TransactionalId::Present, None, MAX_TIMEOUT_MS),
            &LIMITS,
        );
        assert_eq!(
            (at.kind, at.reply.error_code),
            (DecisionKind::Initialize, code::NONE)
        );
        let above = init_producer_id(
            None,
            &req(TransactionalId::Present, None, MAX_TIMEOUT_MS + 1),
            &LIMITS,
        );
        assert_eq!(
            (above.kind, above.reply.error_code),
            (DecisionKind::Reject, code::INVALID_TRANSACTION_TIMEOUT)
        );
        assert!(above.entry.is_none());
    }

    #[test]
    fn an_over_cap_request_neither_bumps_nor_fences_an_existing_entry() {
        for state in [TxnState::Empty, TxnState::Ongoing] {
            let d = init_producer_id(
                Some(entry(state, 5)),
                &req(TransactionalId::Present, None, 300_000),
                &LIMITS,
            );
            assert_eq!(
                (d.kind, d.reply.error_code),
                (DecisionKind::Reject, code::INVALID_TRANSACTION_TIMEOUT),
                "{state:?}"
            );
            assert!(d.entry.is_none() && d.on_append_failure.is_none());
        }
    }

    #[test]
    fn the_brokers_lower_limit_still_applies() {
        let low = Limits {
            max_timeout_ms: 30_000,
            ..LIMITS
        };
        let d = init_producer_id(None, &req(TransactionalId::Present, None, 45_000), &low);
        assert_eq!(d.reply.error_code, code::INVALID_TRANSACTION_TIMEOUT);
    }

    #[test]
    fn the_idempotent_path_is_not_capped_and_ignores_a_claim() {
        let d = init_producer_id(
            None,
            &req(TransactionalId::Absent, Some((1000, 5)), 900_000),
            &LIMITS,
        );
        assert_eq!(
            (d.kind, d.reply.error_code, d.reply.producer_id),
            (DecisionKind::NewProducer, code::NONE, 2000)
        );
    }

    #[test]
    fn a_claim_on_an_absent_id_is_fenced_per_version() {
        let v4 = init_producer_id(
            None,
            &req(TransactionalId::Present, Some((1000, 3)), 60_000),
            &LIMITS,
        );
        assert_eq!(v4.reply.error_code, code::PRODUCER_FENCED);
        assert!(v4.entry.is_none());
        let mut v3 = req(TransactionalId::Present, Some((1000, 3)), 60_000);
        v3.version = 3;
        let v3 = init_producer_id(None, &v3, &LIMITS);
        assert_eq!(v3.reply.error_code, code::INVALID_PRODUCER_EPOCH);
    }

    #[test]
    fn a_claim_on_an_entry_that_never_reached_epoch_0_is_fenced() {
        let d = init_producer_id(
            Some(entry(TxnState::Empty, NO_EPOCH)),
            &req(TransactionalId::Present, Some((1000, 0)), 60_000),
            &LIMITS,
        );
        assert_eq!(d.reply.error_code, code::PRODUCER_FENCED);
    }

    #[test]
    fn without_a_claim_or_with_a_valid_one_apache37_decides() {
        let fresh = init_producer_id(None, &req(TransactionalId::Present, None, 60_000), &LIMITS);
        assert_eq!(
            (
                fresh.kind,
                fresh.reply.producer_id,
                fresh.reply.producer_epoch
            ),
            (DecisionKind::Initialize, 2000, 0)
        );
        let current = entry(TxnState::Empty, 5);
        let claimed = init_producer_id(
            Some(current),
            &req(TransactionalId::Present, Some((1000, 5)), 60_000),
            &LIMITS,
        );
        let apache = apache::init_producer_id(
            Some(current),
            &req(TransactionalId::Present, Some((1000, 5)), 60_000),
            &LIMITS,
        );
        assert_eq!(claimed, apache);
        assert_eq!(claimed.reply.producer_epoch, 6);
    }
}
