//! Runs conformance cases through the real policy runtime and the real
//! coordinator state machine, with the real state-record codec on failover,
//! and checks each step against the suite's expectation or the policy's
//! declared difference. Replaying a case step by step ([`CaseRun`]) is shared
//! with the differential report (`diff.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::declared::Differences;
use super::show;
use super::vectors::{Case, Expect, Step, error_code};
use crate::policy::{
    AddPartitionsRequest, AddSource, EndTxnRequest, Entry, Policy, TopicPartition, TxnState,
    state_name,
};
use crate::txn::machine::{self, Answer, AppendError, InitProducerId, MarkerJob, TxnMachine};
use crate::txn::record::StateRecord;
use crate::txn::tenant::TenantClasses;

/// The clock every case starts at (ms since epoch).
pub const NOW0: i64 = 1_700_000_000_000;
/// Initial entries were last updated (and started, if in a transaction) this long before NOW0.
const AGE_MS: i64 = 1_000;

/// The result of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub id: String,
    /// None on success, else what differed.
    pub failure: Option<String>,
}

/// Parses `State(pid,epoch,lastPid,lastEpoch){t0-0,...}` or an object.
pub fn parse_entry(txn: &str, v: &Value) -> Result<Entry, String> {
    let mut e = Entry {
        transactional_id: txn.into(),
        producer_id: -1,
        producer_epoch: -1,
        last_producer_id: -1,
        last_producer_epoch: -1,
        state: TxnState::Empty,
        partitions: Vec::new(),
        timeout_ms: 60_000,
        start_timestamp_ms: -1,
        last_update_timestamp_ms: NOW0 - AGE_MS,
        next_producer_id: -1,
        client_transaction_version: 0,
        has_failed_epoch_fence: false,
    };
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => {
            let s = o
                .get("is")
                .and_then(Value::as_str)
                .ok_or("an entry object needs \"is\": \"State(...)\"")?;
            let mut base = parse_entry(txn, &Value::String(s.into()))?;
            if let Some(t) = o.get("timeout_ms").and_then(Value::as_i64) {
                base.timeout_ms = t as i32;
            }
            if let Some(t) = o.get("start_ms").and_then(Value::as_i64) {
                base.start_timestamp_ms = t;
            }
            if let Some(t) = o.get("failed_fence").and_then(Value::as_bool) {
                base.has_failed_epoch_fence = t;
            }
            return Ok(base);
        }
        other => return Err(format!("an entry must be a string or object, not {other}")),
    };
    let (head, parts) = match text.split_once('{') {
        Some((h, rest)) => (h.trim(), Some(rest.trim_end_matches('}'))),
        None => (text.trim(), None),
    };
    let (state, args) = head
        .split_once('(')
        .ok_or_else(|| format!("bad entry {text:?}"))?;
    e.state = parse_state(state.trim())?;
    let args = args.trim_end_matches(')');
    // Transaction version 2's fields follow a ';': `next=PID`, `tv=2`.
    let (args, extra) = match args.split_once(';') {
        Some((a, x)) => (a, Some(x)),
        None => (args, None),
    };
    for field in extra.into_iter().flat_map(|x| x.split(',')) {
        let (key, value) = field
            .trim()
            .split_once('=')
            .ok_or_else(|| format!("bad field {field:?} in {text:?} (next=PID or tv=N)"))?;
        let value: i64 = value
            .trim()
            .parse()
            .map_err(|_| format!("bad number {value:?} in {text:?}"))?;
        match key.trim() {
            "next" => e.next_producer_id = value,
            "tv" => e.client_transaction_version = value as i16,
            other => return Err(format!("unknown field {other:?} in {text:?}")),
        }
    }
    let nums: Vec<i64> = args
        .split(',')
        .map(|n| {
            n.trim()
                .parse::<i64>()
                .map_err(|_| format!("bad number {n:?} in {text:?}"))
        })
        .collect::<Result<_, _>>()?;
    let [pid, epoch, last_pid, last_epoch] = nums[..] else {
        return Err(format!(
            "entry {text:?} needs (pid,epoch,lastPid,lastEpoch)"
        ));
    };
    e.producer_id = pid;
    e.producer_epoch = epoch as i16;
    e.last_producer_id = last_pid;
    e.last_producer_epoch = last_epoch as i16;
    if let Some(parts) = parts {
        e.partitions = parts
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(parse_partition)
            .collect::<Result<_, _>>()?;
    }
    if e.state != TxnState::Empty {
        e.start_timestamp_ms = NOW0 - AGE_MS;
    }
    Ok(e)
}

fn parse_state(s: &str) -> Result<TxnState, String> {
    Ok(match s {
        "Empty" => TxnState::Empty,
        "Ongoing" => TxnState::Ongoing,
        "PrepareCommit" => TxnState::PrepareCommit,
        "PrepareAbort" => TxnState::PrepareAbort,
        "CompleteCommit" => TxnState::CompleteCommit,
        "CompleteAbort" => TxnState::CompleteAbort,
        "Dead" => TxnState::Dead,
        other => return Err(format!("unknown state {other:?}")),
    })
}

/// `topic-partition` → TopicPartition (split at the last '-').
pub fn parse_partition(s: &str) -> Result<TopicPartition, String> {
    let s = s.trim();
    let (topic, n) = s
        .rsplit_once('-')
        .ok_or_else(|| format!("partition {s:?} is not topic-N"))?;
    let partition = n
        .parse()
        .map_err(|_| format!("partition {s:?} is not topic-N"))?;
    Ok(TopicPartition {
        topic: topic.into(),
        partition,
    })
}

pub(crate) fn show_partition(p: &TopicPartition) -> String {
    format!("{}-{}", p.topic, p.partition)
}

/// `State(pid,epoch,lastPid,lastEpoch){parts}` for diffs, with
/// `;next=PID,tv=2` inside the parentheses when they are set.
pub fn show_entry(e: Option<&Entry>) -> String {
    match e {
        None => "absent".into(),
        Some(e) => {
            let parts: Vec<String> = e.partitions.iter().map(show_partition).collect();
            let mut extra = Vec::new();
            if e.next_producer_id != -1 {
                extra.push(format!("next={}", e.next_producer_id));
            }
            if e.client_transaction_version != 0 {
                extra.push(format!("tv={}", e.client_transaction_version));
            }
            let extra = if extra.is_empty() {
                String::new()
            } else {
                format!(";{}", extra.join(","))
            };
            format!(
                "{}({},{},{},{}{extra}){{{}}}",
                state_name(e.state),
                e.producer_id,
                e.producer_epoch,
                e.last_producer_id,
                e.last_producer_epoch,
                parts.join(",")
            )
        }
    }
}

pub use crate::group::offsets_topic::offsets_partition;

/// A declared difference the run confirmed: the step answered as declared,
/// not as the suite expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    pub case: String,
    pub step: usize,
    pub reason: String,
}

/// The outcome of a suite run: one result per case, and the declared
/// differences that were confirmed (in case order).
#[derive(Debug, Clone)]
pub struct SuiteRun {
    pub results: Vec<CaseResult>,
    pub confirmed: Vec<Confirmed>,
    /// Cases not run: (id, the transaction.version they need), for a
    /// policy that finalizes a lower one.
    pub skipped: Vec<(String, i16)>,
}

/// Runs every case against `policy`, checking every step against the
/// suite's own expectations.
pub fn run_cases(policy: &Arc<Policy>, cases: &[Case]) -> Vec<CaseResult> {
    run_suite(policy, cases, &Differences::none()).results
}

/// Runs every case against `policy`; a step with a declared difference is
/// checked against the declaration instead, and must differ from the
/// suite's expectation (else the declaration is stale and the case fails).
/// The caller validates `declared` against `cases` first
/// ([`Differences::check_against`]).
pub fn run_suite(policy: &Arc<Policy>, cases: &[Case], declared: &Differences) -> SuiteRun {
    let mut results = Vec::with_capacity(cases.len());
    let mut confirmed = Vec::new();
    let mut skipped = Vec::new();
    let finalized =
        crate::policy::features::transaction_version(&policy.identity().protocol_features);
    for case in cases {
        if case.transaction_version > finalized {
            skipped.push((case.id.clone(), case.transaction_version));
            continue;
        }
        let mut mine = Vec::new();
        let failure = run_case(policy, case, declared, &mut mine).err();
        if failure.is_none() {
            confirmed.append(&mut mine);
        }
        results.push(CaseResult {
            id: case.id.clone(),
            failure,
        });
    }
    SuiteRun {
        results,
        confirmed,
        skipped,
    }
}

/// What one step produced, for comparison.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub answer: Option<Answer>,
    pub markers: Vec<MarkerJob>,
    pub candidate_used: bool,
    pub fence: Option<(i64, i16)>,
    /// The step set `append_error` but made no write (so nothing failed).
    pub unused_append_error: bool,
    /// Every entry before and after the step, by transactional id.
    pub before: BTreeMap<String, Entry>,
    pub after: BTreeMap<String, Entry>,
}

impl Observed {
    fn empty() -> Self {
        Observed {
            answer: None,
            markers: Vec::new(),
            candidate_used: false,
            fence: None,
            unused_append_error: false,
            before: BTreeMap::new(),
            after: BTreeMap::new(),
        }
    }
}

/// One policy replaying one case, step by step, on its own state.
pub(crate) struct CaseRun<'a> {
    machine: TxnMachine,
    next_pid: i64,
    now: i64,
    case: &'a Case,
}

fn run_case(
    policy: &Arc<Policy>,
    case: &Case,
    declared: &Differences,
    confirmed: &mut Vec<Confirmed>,
) -> Result<(), String> {
    let mut run = CaseRun::start(policy, case).map_err(|e| format!("initial entry: {e}"))?;
    for (i, step) in case.steps.iter().enumerate() {
        let fail = |detail: String| show::failure(case, i, &detail);
        let observed = run.play(i).map_err(&fail)?;
        let txn = &case.txn;
        match declared.get(&case.id, i) {
            None => {
                if observed.unused_append_error {
                    return Err(fail(
                        "append_error was set but the step made no write".into(),
                    ));
                }
                let misses = check(txn, &step.expect, &observed).map_err(&fail)?;
                if !misses.is_empty() {
                    return Err(fail(show::mismatch(
                        "expected",
                        txn,
                        &step.expect,
                        &observed,
                        &misses,
                    )));
                }
            }
            Some(d) => {
                let misses = check(txn, &d.expect, &observed).map_err(&fail)?;
                if !misses.is_empty() {
                    return Err(fail(format!(
                        "the declared difference did not hold ({})\n{}",
                        d.reason,
                        show::mismatch("declared", txn, &d.expect, &observed, &misses)
                    )));
                }
                if check(txn, &step.expect, &observed)
                    .map_err(&fail)?
                    .is_empty()
                {
                    return Err(fail(format!(
                        "stale declaration: the step meets the suite's expectation, so there is no difference ({})\n{}",
                        d.reason,
                        show::mismatch("suite", txn, &step.expect, &observed, &[])
                    )));
                }
                confirmed.push(Confirmed {
                    case: case.id.clone(),
                    step: i,
                    reason: d.reason.clone(),
                });
            }
        }
    }
    Ok(())
}

/// The case's tenant classes (`tenant_classes`).
fn tenants(case: &Case) -> Result<Arc<TenantClasses>, String> {
    TenantClasses::parse(&case.tenant_classes)
        .map(Arc::new)
        .map_err(|e| format!("{}: {e}", case.id))
}

impl<'a> CaseRun<'a> {
    /// The case's initial state under `policy`.
    pub(crate) fn start(policy: &Arc<Policy>, case: &'a Case) -> Result<Self, String> {
        let mut run = CaseRun {
            machine: TxnMachine::new(policy.clone(), machine::DEFAULT_LIMITS)
                .with_tenants(tenants(case)?),
            next_pid: case.next_pid,
            now: NOW0,
            case,
        };
        if let Some(v) = &case.entry
            && !v.is_null()
        {
            run.machine.install(parse_entry(&case.txn, v)?);
            if case.pending {
                run.machine.set_external_pending(&case.txn);
            }
        }
        Ok(run)
    }

    /// Plays step `i` of the case (steps are played in order).
    pub(crate) fn play(&mut self, i: usize) -> Result<Observed, String> {
        let step = &self.case.steps[i];
        let before = self.all_entries();
        self.now += step.advance_ms.unwrap_or(1);
        let mut obs = self.step(step)?;
        obs.before = before;
        obs.after = self.all_entries();
        Ok(obs)
    }

    fn all_entries(&self) -> BTreeMap<String, Entry> {
        self.machine
            .entries()
            .map(|e| (e.transactional_id.clone(), e.clone()))
            .collect()
    }

    fn txn(&self, t: &Option<String>) -> String {
        t.clone().unwrap_or_else(|| self.case.txn.clone())
    }

    /// The candidate producer id the broker's coordinator would offer an
    /// EndTxn or the reaper about `txn_id`: the next one when the entry's
    /// epoch is exhausted, else none (-1).
    fn candidate_for(&self, txn_id: &str) -> i64 {
        if self.machine.wants_candidate(txn_id) {
            self.next_pid
        } else {
            -1
        }
    }

    fn step(&mut self, step: &Step) -> Result<Observed, String> {
        let mut obs = Observed::empty();
        let mut append_error = match step.append_error.as_deref() {
            None => None,
            Some("NOT_ENOUGH_REPLICAS") => Some(AppendError::NotEnoughReplicas),
            Some("NOT_COORDINATOR") => Some(AppendError::NotCoordinator),
            Some(other) => return Err(format!("unknown append_error {other}")),
        };
        if let Some(init) = &step.init {
            let txn = match &init.txn {
                None => Some(self.case.txn.clone()),
                Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(format!("init.txn must be a string or null, not {other}"));
                }
            };
            let (producer_id, producer_epoch) = init.claim.unwrap_or((-1, -1));
            let req = InitProducerId {
                transactional_id: txn,
                timeout_ms: init.timeout,
                producer_id,
                producer_epoch,
                version: init.version,
            };
            let s = self.machine.init_producer_id(&req, self.now, self.next_pid);
            self.resolve(s, &mut append_error, step.hold_markers, &mut obs);
        } else if let Some(add) = &step.add {
            let partitions = add
                .partitions
                .iter()
                .map(|p| parse_partition(p))
                .collect::<Result<Vec<_>, _>>()?;
            let req = AddPartitionsRequest {
                transactional_id: self.txn(&add.txn),
                producer_id: add.pid,
                producer_epoch: add.epoch,
                partitions,
                version: add.version,
                verify_only: add.verify_only,
                source: if add.version >= 4 && !add.verify_only {
                    AddSource::Implicit
                } else {
                    AddSource::AddPartitions
                },
                tenant: 0,
                now_ms: self.now,
            };
            let s = self.machine.add_partitions(&req);
            self.resolve(s, &mut append_error, step.hold_markers, &mut obs);
        } else if let Some(ao) = &step.add_offsets {
            let req = AddPartitionsRequest {
                transactional_id: self.txn(&ao.txn),
                producer_id: ao.pid,
                producer_epoch: ao.epoch,
                partitions: vec![TopicPartition {
                    topic: "__consumer_offsets".into(),
                    partition: offsets_partition(&ao.group),
                }],
                version: ao.version,
                verify_only: false,
                source: AddSource::AddOffsets,
                tenant: 0,
                now_ms: self.now,
            };
            let s = self.machine.add_partitions(&req);
            self.resolve(s, &mut append_error, step.hold_markers, &mut obs);
        } else if let Some(end) = &step.end {
            let req = EndTxnRequest {
                transactional_id: self.txn(&end.txn),
                producer_id: end.pid,
                producer_epoch: end.epoch,
                commit: end.commit,
                version: end.version,
                candidate_producer_id: -1,
                tenant: 0,
                now_ms: self.now,
            };
            let candidate = self.candidate_for(&req.transactional_id);
            let s = self.machine.end_txn(&req, candidate);
            self.resolve(s, &mut append_error, step.hold_markers, &mut obs);
        } else if step.reap {
            for id in self.machine.reap_candidates() {
                let candidate = self.candidate_for(&id);
                let s = self.machine.reap(&id, self.now, candidate);
                self.resolve(s, &mut append_error, step.hold_markers, &mut obs);
            }
        } else if step.failover {
            let bytes: Vec<Vec<u8>> = self
                .machine
                .snapshot()
                .iter()
                .map(StateRecord::encode)
                .collect();
            let records = bytes
                .iter()
                .map(|b| StateRecord::decode(b))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let mut fresh = TxnMachine::new(self.machine.policy().clone(), machine::DEFAULT_LIMITS)
                .with_tenants(tenants(self.case)?);
            obs.markers = fresh.load(records);
            self.machine = fresh;
        } else if step.markers_done {
            let ids: Vec<String> = self
                .machine
                .entries()
                .filter(|e| e.state == TxnState::PrepareCommit || e.state == TxnState::PrepareAbort)
                .map(|e| e.transactional_id.clone())
                .collect();
            for id in ids {
                let s = self.machine.markers_written(&id, self.now, None);
                self.resolve(s, &mut append_error, false, &mut obs);
            }
        } else {
            return Err(
                "a step needs one of init, add, add_offsets, end, reap, failover, markers_done"
                    .into(),
            );
        }
        obs.unused_append_error = append_error.is_some();
        if obs.candidate_used {
            self.next_pid += 1;
        }
        Ok(obs)
    }

    /// Drives a step to its answer: the write (maybe failed on purpose),
    /// then markers and completion unless they are held.
    fn resolve(
        &mut self,
        step: machine::Step,
        append_error: &mut Option<AppendError>,
        hold: bool,
        obs: &mut Observed,
    ) {
        let answer = match step {
            machine::Step::Done(a) => a,
            machine::Step::Write(w) => {
                let outcome = match append_error.take() {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
                self.machine.finish(w, outcome)
            }
        };
        obs.candidate_used |= answer.candidate_used;
        if obs.fence.is_none() {
            obs.fence = answer.fence;
        }
        if let Some(job) = answer.markers.clone() {
            obs.markers.push(job.clone());
            if !hold {
                let s = self
                    .machine
                    .markers_written(&job.transactional_id, self.now, None);
                let mut none = None;
                let mut inner = Observed::empty();
                self.resolve(s, &mut none, false, &mut inner);
            }
        }
        if obs.answer.is_none() {
            obs.answer = Some(answer);
        }
    }
}

/// Which expected fields of `x` the observation misses, each with what was
/// wanted and what happened. Empty = the step met `x`. An Err is a malformed
/// expectation (a vector bug), not a mismatch.
pub(crate) fn check(txn: &str, x: &Expect, obs: &Observed) -> Result<Vec<String>, String> {
    let mut misses = Vec::new();
    let before = obs.before.get(txn);
    let after = obs.after.get(txn);
    if let Some(r) = &x.expect {
        let want = error_code(&r.error)?;
        match obs.answer.as_ref() {
            None => misses.push("no reply was produced".to_owned()),
            Some(a) if a.reply.error_code != want => misses.push("error".to_owned()),
            Some(a) => {
                let (pid, epoch) = if want == 0 {
                    (r.pid, r.epoch)
                } else {
                    (Some(r.pid.unwrap_or(-1)), Some(r.epoch.unwrap_or(-1)))
                };
                if pid.is_some_and(|p| p != a.reply.producer_id)
                    || epoch.is_some_and(|e| e != a.reply.producer_epoch)
                {
                    misses.push("reply pid/epoch".to_owned());
                }
            }
        }
    }
    if let Some(v) = &x.entry {
        match v {
            Value::Null => {
                if after.is_some() {
                    misses.push("entry".to_owned());
                }
            }
            Value::String(s) if s == "unchanged" => {
                if after != before {
                    misses.push("entry".to_owned());
                }
            }
            v => {
                let want = parse_entry(txn, v)?;
                let same = after.is_some_and(|got| {
                    got.state == want.state
                        && got.producer_id == want.producer_id
                        && got.producer_epoch == want.producer_epoch
                        && got.last_producer_id == want.last_producer_id
                        && got.last_producer_epoch == want.last_producer_epoch
                        && got.next_producer_id == want.next_producer_id
                        && got.client_transaction_version == want.client_transaction_version
                });
                let has_parts = v.as_str().is_some_and(|s| s.contains('{'));
                let parts_ok =
                    !has_parts || after.is_some_and(|got| got.partitions == want.partitions);
                if !same || !parts_ok {
                    misses.push("entry".to_owned());
                }
            }
        }
    }
    if let Some(parts) = &x.partitions
        && &show::partitions_of(after) != parts
    {
        misses.push("partitions".to_owned());
    }
    if let Some(codes) = &x.partition_errors {
        let want = codes
            .iter()
            .map(error_code)
            .collect::<Result<Vec<_>, _>>()?;
        let got = obs
            .answer
            .as_ref()
            .map(|a| a.partition_errors.clone())
            .unwrap_or_default();
        if got != want {
            misses.push("partition errors".to_owned());
        }
    }
    if let Some(m) = &x.markers {
        match obs.markers.first() {
            None => misses.push("markers".to_owned()),
            Some(job) => {
                let result = if job.commit { "commit" } else { "abort" };
                let parts: Vec<String> = job.partitions.iter().map(show_partition).collect();
                if result != m.result
                    || m.pid.is_some_and(|p| p != job.producer_id)
                    || m.epoch.is_some_and(|e| e != job.producer_epoch)
                    || m.partitions.as_ref().is_some_and(|p| p != &parts)
                {
                    misses.push("markers".to_owned());
                }
            }
        }
    }
    if let Some(allocated) = x.new_pid_allocated
        && allocated != obs.candidate_used
    {
        misses.push("new pid allocation".to_owned());
    }
    if let Some(f) = &x.fence {
        let want: Option<(i64, i16)> =
            serde_json::from_value(f.clone()).map_err(|e| format!("fence: {e}"))?;
        if want != obs.fence {
            misses.push("fence".to_owned());
        }
    }
    Ok(misses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_with_a_next_producer_id_and_client_version_reads_back_as_shown() {
        let text = "PrepareCommit(1000,32767,1000,32766;next=2000,tv=2){t0-0}";
        let e = parse_entry("T", &Value::String(text.into())).expect("parses");
        assert_eq!(
            (
                e.next_producer_id,
                e.client_transaction_version,
                e.producer_epoch
            ),
            (2000, 2, 32767)
        );
        assert_eq!(show_entry(Some(&e)), text);
        // Without them the entry shows as before.
        let plain =
            parse_entry("T", &Value::String("Empty(1000,5,1000,4)".into())).expect("parses");
        assert_eq!(show_entry(Some(&plain)), "Empty(1000,5,1000,4){}");
        assert!(parse_entry("T", &Value::String("Empty(1,0,1,-1;color=3)".into())).is_err());
    }
}
