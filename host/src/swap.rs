//! Policy hot swap: vets an offered policy component and,
//! when it passes, makes it the policy every coordinator decides with.
//!
//! Before a new policy takes over it must load in the broker's own
//! [`PolicyRuntime`] (same engine and sandbox limits; the load refuses a WIT
//! major this host does not speak and a `describe()` that traps), answer
//! `describe()` once more on a live call, and pass the smoke vectors
//! (`policy/smoke.json`, embedded: a happy-path transaction, an abort, the
//! idempotent path, a fence, a refused timeout) through the conformance
//! runner in the sandbox. Its instance is then renewed and configured with
//! the broker's limits, and only then is it stored in the [`PolicySlot`].
//! Anything else refuses it with the reason, and the old policy keeps
//! deciding. Every swap and refusal is logged with both identities and
//! counted on the slot (for /metrics).
//!
//! Entry points: the admin endpoint ([`crate::admin`]) and SIGHUP (the
//! broker's main). This module does the vetting and the swap; it knows no
//! protocol.

use std::sync::{Arc, Mutex, OnceLock};

use crate::conformance::{Case, VectorFile, run_cases};
use crate::policy::{Limits, Policy, PolicyIdentity, PolicyRuntime, PolicySlot};

/// The largest policy component accepted (the admin endpoint checks it
/// before reading a body).
pub const MAX_POLICY_BYTES: usize = 64 << 20;

/// The smoke vectors every offered policy must pass: policy-agnostic (any
/// sane policy, strict included, answers them alike).
const SMOKE: &str = include_str!("policy/smoke.json");

/// The parsed smoke vectors.
pub fn smoke_cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| match serde_json::from_str::<VectorFile>(SMOKE) {
        Ok(f) => f.cases,
        // Embedded at build time and covered by a unit test.
        Err(e) => {
            tracing::error!(error = %e, "the embedded smoke vectors do not parse");
            Vec::new()
        }
    })
}

/// `name@version sha256 <hex> wit <version>`: a policy's full identity for logs
/// and answers.
pub fn full_identity(id: &PolicyIdentity) -> String {
    format!(
        "{}@{} sha256 {} wit {}",
        id.name, id.version, id.sha256, id.wit_version
    )
}

/// A swap that took effect.
#[derive(Debug, Clone)]
pub struct Swapped {
    pub old: PolicyIdentity,
    pub new: PolicyIdentity,
}

/// Why an offered policy was refused (the old one keeps deciding).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Vets offered policies and swaps them in, one at a time.
#[derive(Debug)]
pub struct Swapper {
    /// The broker's runtime: the new policy runs on the same engine.
    runtime: PolicyRuntime,
    /// Where every coordinator reads its policy.
    slot: Arc<PolicySlot>,
    /// The broker's limits, which the new instance is configured with.
    limits: Limits,
    /// Serialises offers: two concurrent swaps would race on "old".
    busy: Mutex<()>,
}

impl Swapper {
    /// A swapper loading into `runtime` and swapping `slot`.
    pub fn new(runtime: PolicyRuntime, slot: Arc<PolicySlot>, limits: Limits) -> Self {
        Swapper {
            runtime,
            slot,
            limits,
            busy: Mutex::new(()),
        }
    }

    /// The slot this swapper replaces policies in.
    pub fn slot(&self) -> &Arc<PolicySlot> {
        &self.slot
    }

    /// Vets `wasm` (from `source`: a file path or "admin endpoint") and, if
    /// it passes, makes it the deciding policy. Blocking: compiles.
    pub fn offer(&self, wasm: &[u8], source: &str) -> Result<Swapped, Refused> {
        let _one = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        match self.vet(wasm) {
            Ok(next) => Ok(self.install(next, source)),
            Err(reason) => {
                self.slot.note_refused();
                tracing::warn!(
                    current = %full_identity(self.slot.current().identity()),
                    source,
                    reason = %reason,
                    "offered transaction policy refused; the current policy keeps deciding"
                );
                Err(reason)
            }
        }
    }

    /// Makes a vetted policy the deciding one (the swap itself: one store
    /// in the slot) and logs both identities.
    pub fn install(&self, next: Arc<Policy>, source: &str) -> Swapped {
        let new = next.identity().clone();
        let retired = self.slot.replace(next);
        let old = retired.identity().clone();
        tracing::info!(
            from = %full_identity(&old),
            to = %full_identity(&new),
            source,
            "transaction policy swapped"
        );
        release(retired);
        Swapped { old, new }
    }

    /// Every check a policy must pass before it decides; the policy it
    /// returns is ready to [`Self::install`]. The current policy keeps
    /// deciding meanwhile: the vetting (compiling, the smoke vectors) runs
    /// on a thread of its own at a lower CPU priority, so on a busy machine
    /// it yields to the coordinators' decisions instead of displacing them.
    pub fn vet(&self, wasm: &[u8]) -> Result<Arc<Policy>, Refused> {
        std::thread::scope(|scope| {
            let vetting = std::thread::Builder::new()
                .name("kaas-policy-vet".into())
                .spawn_scoped(scope, || {
                    lower_priority();
                    self.vet_here(wasm)
                })
                .map_err(|e| Refused(format!("cannot start the vetting thread: {e}")))?;
            vetting
                .join()
                .unwrap_or_else(|_| Err(Refused("the vetting thread panicked".into())))
        })
    }

    fn vet_here(&self, wasm: &[u8]) -> Result<Arc<Policy>, Refused> {
        if wasm.len() > MAX_POLICY_BYTES {
            return Err(Refused(format!(
                "the component is {} bytes, over the {MAX_POLICY_BYTES}-byte limit",
                wasm.len()
            )));
        }
        // Compiles, checks the WIT major, instantiates, calls describe().
        let policy = self
            .runtime
            .load_bytes(wasm)
            .map_err(|e| Refused(format!("it does not load: {e:#}")))?;
        let id = full_identity(policy.identity());
        crate::policy::features::serveable(&policy.identity().protocol_features)
            .map_err(|e| Refused(format!("{id}: {e}")))?;
        policy
            .describe()
            .map_err(|e| Refused(format!("{id}: describe() failed: {e}")))?;
        let policy = Arc::new(policy);
        let cases = smoke_cases();
        if cases.is_empty() {
            return Err(Refused(
                "this kaas has no smoke vectors to vet it with".into(),
            ));
        }
        let failed: Vec<String> = run_cases(&policy, cases)
            .into_iter()
            .filter_map(|r| r.failure.map(|f| format!("{}: {f}", r.id)))
            .collect();
        if !failed.is_empty() {
            return Err(Refused(format!(
                "{id} fails {} of {} smoke vectors: {}",
                failed.len(),
                cases.len(),
                failed.join("; ")
            )));
        }
        policy
            .renew_instance(self.limits)
            .map_err(|e| Refused(format!("{id}: {e:#}")))?;
        // One decision on the fresh instance before it takes over, so the
        // first real one does not pay for first-touch memory and cold code
        // (the policy is pure: an idempotent InitProducerId changes nothing).
        let warm = crate::policy::InitRequest {
            transactional_id: None,
            claim: None,
            version: 4,
            timeout_ms: 60_000,
            candidate_producer_id: 1,
            tenant: 0,
            now_ms: 0,
        };
        policy
            .init_producer_id(None, &warm, self.limits)
            .map_err(|e| Refused(format!("{id}: the warm-up decision failed: {e}")))?;
        Ok(policy)
    }
}

/// Nice value of the vetting thread (Linux: per thread).
const VET_NICE: libc::c_int = 10;

/// Lowers the calling thread's CPU priority (best effort).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take and return plain integers;
        // PRIO_PROCESS with a thread id affects only that thread on Linux.
        #[allow(unsafe_code)]
        let rc = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, VET_NICE)
        };
        if rc != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "could not lower the vetting thread's priority");
        }
    }
}

/// How long [`release`] waits for decisions still using a replaced policy.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Drops a replaced policy here, once the decisions that read it before the
/// swap have finished, so that freeing its instance and compiled code
/// (unmapping memory: tens of microseconds) is not paid by the decision
/// that happened to hold the last reference. Bounded: a holder that keeps
/// it longer (a metrics render) frees it itself.
fn release(retired: Arc<Policy>) {
    let deadline = std::time::Instant::now() + RELEASE_WAIT;
    while Arc::strong_count(&retired) > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    drop(retired);
}

#[cfg(test)]
mod tests {
    #[test]
    fn embedded_smoke_vectors_parse_and_are_not_empty() {
        let cases = super::smoke_cases();
        assert!(cases.len() >= 5, "{} smoke cases", cases.len());
    }
}
