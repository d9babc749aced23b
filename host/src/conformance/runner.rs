//! Runs conformance cases through the real policy runtime and the real
//! coordinator state machine, with the real state-record codec on failover.

use std::sync::Arc;

use serde_json::Value;

use super::vectors::{Case, Expect, Step, error_code};
use crate::policy::{
    AddPartitionsRequest, EndTxnRequest, Entry, Policy, TopicPartition, TxnState, state_name,
};
use crate::txn::machine::{self, Answer, AppendError, InitProducerId, MarkerJob, TxnMachine};
use crate::txn::record::StateRecord;

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
    let nums: Vec<i64> = args
        .trim_end_matches(')')
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

fn show_partition(p: &TopicPartition) -> String {
    format!("{}-{}", p.topic, p.partition)
}

/// `State(pid,epoch,lastPid,lastEpoch){parts}` for diffs.
pub fn show_entry(e: Option<&Entry>) -> String {
    match e {
        None => "absent".into(),
        Some(e) => {
            let parts: Vec<String> = e.partitions.iter().map(show_partition).collect();
            format!(
                "{}({},{},{},{}){{{}}}",
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

pub use crate::txn::offsets_partition;

/// Runs every case against `policy`.
pub fn run_cases(policy: &Arc<Policy>, cases: &[Case]) -> Vec<CaseResult> {
    cases
        .iter()
        .map(|case| CaseResult {
            id: case.id.clone(),
            failure: run_case(policy, case).err(),
        })
        .collect()
}

/// What one step produced, for comparison.
struct Observed {
    answer: Option<Answer>,
    markers: Vec<MarkerJob>,
    candidate_used: bool,
    fence: Option<(i64, i16)>,
}

struct CaseRun<'a> {
    machine: TxnMachine,
    next_pid: i64,
    now: i64,
    case: &'a Case,
}

fn run_case(policy: &Arc<Policy>, case: &Case) -> Result<(), String> {
    let mut run = CaseRun {
        machine: TxnMachine::new(policy.clone(), machine::DEFAULT_LIMITS),
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
    let name = policy.identity().name.clone();
    for (i, step) in case.steps.iter().enumerate() {
        let before = run.machine.entry(&case.txn).cloned();
        run.now += step.advance_ms.unwrap_or(1);
        let observed = run.step(step).map_err(|e| format!("step {i}: {e}"))?;
        let expect = case
            .by_policy
            .get(&name)
            .and_then(|m| m.get(&i.to_string()))
            .unwrap_or(&step.expect);
        run.check(expect, before.as_ref(), &observed)
            .map_err(|e| format!("step {i}: {e}"))?;
    }
    Ok(())
}

impl CaseRun<'_> {
    fn txn(&self, t: &Option<String>) -> String {
        t.clone().unwrap_or_else(|| self.case.txn.clone())
    }

    fn step(&mut self, step: &Step) -> Result<Observed, String> {
        let mut obs = Observed {
            answer: None,
            markers: Vec::new(),
            candidate_used: false,
            fence: None,
        };
        let append_error = match step.append_error.as_deref() {
            None => None,
            Some("NOT_ENOUGH_REPLICAS") => Some(AppendError::NotEnoughReplicas),
            Some("NOT_COORDINATOR") => Some(AppendError::NotCoordinator),
            Some(other) => return Err(format!("unknown append_error {other}")),
        };
        let mut append_error = append_error;
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
                now_ms: self.now,
            };
            let s = self.machine.end_txn(&req);
            self.resolve(s, &mut append_error, step.hold_markers, &mut obs);
        } else if step.reap {
            for id in self.machine.reap_candidates() {
                let s = self.machine.reap(&id, self.now);
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
            let mut fresh = TxnMachine::new(self.machine.policy().clone(), machine::DEFAULT_LIMITS);
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
        if append_error.is_some() {
            return Err("append_error was set but the step made no write".into());
        }
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
                let mut inner = Observed {
                    answer: None,
                    markers: Vec::new(),
                    candidate_used: false,
                    fence: None,
                };
                self.resolve(s, &mut none, false, &mut inner);
            }
        }
        if obs.answer.is_none() {
            obs.answer = Some(answer);
        }
    }

    fn check(&self, x: &Expect, before: Option<&Entry>, obs: &Observed) -> Result<(), String> {
        let after = self.machine.entry(&self.case.txn);
        if let Some(r) = &x.expect {
            let a = obs.answer.as_ref().ok_or("no reply was produced")?;
            let want = error_code(&r.error)?;
            if a.reply.error_code != want {
                return Err(format!(
                    "expected error {want}, got {} (pid {}, epoch {}); entry now {}",
                    a.reply.error_code,
                    a.reply.producer_id,
                    a.reply.producer_epoch,
                    show_entry(after)
                ));
            }
            let (pid, epoch) = if want == 0 {
                (r.pid, r.epoch)
            } else {
                (Some(r.pid.unwrap_or(-1)), Some(r.epoch.unwrap_or(-1)))
            };
            if pid.is_some_and(|p| p != a.reply.producer_id)
                || epoch.is_some_and(|e| e != a.reply.producer_epoch)
            {
                return Err(format!(
                    "expected reply ({}, {}), got ({}, {})",
                    pid.map_or("_".into(), |p| p.to_string()),
                    epoch.map_or("_".into(), |e| e.to_string()),
                    a.reply.producer_id,
                    a.reply.producer_epoch
                ));
            }
        }
        if let Some(v) = &x.entry {
            match v {
                Value::Null if after.is_some() => {
                    return Err(format!("expected no entry, got {}", show_entry(after)));
                }
                Value::Null => {}
                Value::String(s) if s == "unchanged" => {
                    if after != before {
                        return Err(format!(
                            "expected the entry unchanged at {}, got {}",
                            show_entry(before),
                            show_entry(after)
                        ));
                    }
                }
                v => {
                    let want = parse_entry(&self.case.txn, v)?;
                    let got = after.ok_or_else(|| {
                        format!("expected {}, got no entry", show_entry(Some(&want)))
                    })?;
                    let same = got.state == want.state
                        && got.producer_id == want.producer_id
                        && got.producer_epoch == want.producer_epoch
                        && got.last_producer_id == want.last_producer_id
                        && got.last_producer_epoch == want.last_producer_epoch;
                    let has_parts = v.as_str().is_some_and(|s| s.contains('{'));
                    if !same || (has_parts && got.partitions != want.partitions) {
                        return Err(format!(
                            "expected entry {}, got {}",
                            show_entry(Some(&want)),
                            show_entry(Some(got))
                        ));
                    }
                }
            }
        }
        if let Some(parts) = &x.partitions {
            let got: Vec<String> = after
                .map(|e| e.partitions.iter().map(show_partition).collect())
                .unwrap_or_default();
            if &got != parts {
                return Err(format!("expected partitions {parts:?}, got {got:?}"));
            }
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
                return Err(format!("expected partition errors {want:?}, got {got:?}"));
            }
        }
        if let Some(m) = &x.markers {
            let job = obs
                .markers
                .first()
                .ok_or_else(|| format!("expected {} markers, none were written", m.result))?;
            let result = if job.commit { "commit" } else { "abort" };
            let parts: Vec<String> = job.partitions.iter().map(show_partition).collect();
            if result != m.result
                || m.pid.is_some_and(|p| p != job.producer_id)
                || m.epoch.is_some_and(|e| e != job.producer_epoch)
                || m.partitions.as_ref().is_some_and(|p| p != &parts)
            {
                return Err(format!(
                    "expected {} markers {:?}/{:?} to {:?}, got {result} markers ({}, {}) to {parts:?}",
                    m.result, m.pid, m.epoch, m.partitions, job.producer_id, job.producer_epoch
                ));
            }
        }
        if let Some(allocated) = x.new_pid_allocated
            && allocated != obs.candidate_used
        {
            return Err(format!(
                "expected new_pid_allocated {allocated}, got {}",
                obs.candidate_used
            ));
        }
        if let Some(f) = &x.fence {
            let want: Option<(i64, i16)> =
                serde_json::from_value(f.clone()).map_err(|e| format!("fence: {e}"))?;
            if want != obs.fence {
                return Err(format!("expected fence {want:?}, got {:?}", obs.fence));
            }
        }
        Ok(())
    }
}
