//! The conformance vector format (JSON files under tests/conformance/).
//!
//! A file holds `{"cases": [...]}`. A case:
//! ```json
//! { "id": "IT-04", "title": "...", "seed": ["current_claim_bumps_and_its_retry_is_stable"],
//!   "next_pid": 2000,
//!   "entry": "CompleteCommit(1000,5,1000,4)",   // or an object, or omitted (absent)
//!   "pending": false,
//!   "steps": [
//!     { "init": {"txn": "T", "claim": [1000, 5], "version": 4},
//!       "expect": {"error": "NONE", "pid": 1000, "epoch": 6},
//!       "entry": "Empty(1000,6,1000,5)" },
//!     { "failover": true },
//!     ...
//!   ] }
//! ```
//! Entries are written `State(pid,epoch,lastPid,lastEpoch)` optionally
//! followed by `{topic-partition,...}`; `null` means absent and `"unchanged"`
//! means equal to the entry before the step.
//!
//! The suite states one expectation per step: the reference policy's
//! (apache37's). A policy that decides some steps differently declares those
//! steps beside itself, in a differences file (see `declared.rs`), not here.

use serde::Deserialize;
use serde_json::Value;

/// One file of cases.
#[derive(Debug, Deserialize)]
pub struct VectorFile {
    pub cases: Vec<Case>,
}

/// One scenario. Unknown fields are refused, so a misspelt field (or a
/// leftover `by_policy` from before differences files) is an error, not a
/// silently unchecked expectation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Spec scenario id (IT-04) or a seed/strict id.
    pub id: String,
    #[serde(default)]
    pub title: String,
    /// Seed test names this case realises.
    #[serde(default)]
    pub seed: Vec<String>,
    /// The allocator's next producer id (the candidate).
    #[serde(default = "default_next_pid")]
    pub next_pid: i64,
    /// The transactional.id the initial entry belongs to.
    #[serde(default = "default_txn")]
    pub txn: String,
    /// Initial entry; absent when omitted.
    #[serde(default)]
    pub entry: Option<Value>,
    /// Whether a transition is in flight on the initial entry.
    #[serde(default)]
    pub pending: bool,
    /// The broker's `--tenant-class PREFIX=CLASS` values for this case
    /// (none: every id is tenant class 0).
    #[serde(default)]
    pub tenant_classes: Vec<String>,
    /// The finalized `transaction.version` the case needs (0: every
    /// policy). A policy that finalizes a lower level never gets its
    /// requests from a conforming client, so the case is skipped for it.
    #[serde(default)]
    pub transaction_version: i16,
    pub steps: Vec<Step>,
}

fn default_next_pid() -> i64 {
    2000
}
fn default_txn() -> String {
    "T".into()
}

/// One step: a request (or tick) and what must follow.
#[derive(Debug, Clone, Deserialize)]
pub struct Step {
    #[serde(default)]
    pub init: Option<InitStep>,
    #[serde(default)]
    pub add: Option<AddStep>,
    #[serde(default)]
    pub add_offsets: Option<AddOffsetsStep>,
    #[serde(default)]
    pub end: Option<EndStep>,
    /// A reaper tick over every entry.
    #[serde(default)]
    pub reap: bool,
    /// Encode every entry with the state-record codec, drop all in-memory
    /// state, decode and reload (a coordinator failover).
    #[serde(default)]
    pub failover: bool,
    /// Markers that were held are now all written.
    #[serde(default)]
    pub markers_done: bool,
    /// Keep this step's markers in flight (the entry stays Prepare*).
    #[serde(default)]
    pub hold_markers: bool,
    /// Make this step's state-record append fail: "NOT_ENOUGH_REPLICAS" or "NOT_COORDINATOR".
    #[serde(default)]
    pub append_error: Option<String>,
    /// Milliseconds the clock moves before this step (default 1).
    #[serde(default)]
    pub advance_ms: Option<i64>,
    #[serde(flatten)]
    pub expect: Expect,
}

/// What a step must produce. Every field is optional; given ones are checked.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Expect {
    pub expect: Option<ReplyExpect>,
    /// Entry after the step (see module docs); checked when present.
    #[serde(default, deserialize_with = "some_value")]
    pub entry: Option<Value>,
    /// Exact partitions of the entry after the step.
    pub partitions: Option<Vec<String>>,
    /// Per-partition codes (VerifyOnly).
    pub partition_errors: Option<Vec<Value>>,
    /// Markers the host is asked to write by this step.
    pub markers: Option<MarkersExpect>,
    /// Whether this step consumed the candidate producer id.
    pub new_pid_allocated: Option<bool>,
    /// (pid, epoch) the host must fence after this step, or null for none.
    #[serde(default, deserialize_with = "some_value")]
    pub fence: Option<Value>,
}

/// Distinguishes an explicit `null` (Some(Null)) from an omitted field (None).
fn some_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyExpect {
    /// Error name ("PRODUCER_FENCED") or number.
    pub error: Value,
    pub pid: Option<i64>,
    pub epoch: Option<i16>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkersExpect {
    /// "commit" or "abort".
    pub result: String,
    pub pid: Option<i64>,
    pub epoch: Option<i16>,
    pub partitions: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InitStep {
    /// Transactional id; null for the idempotent path; defaults to the case's.
    #[serde(default = "txn_default", deserialize_with = "some_value")]
    pub txn: Option<Value>,
    /// Raw claim [pid, epoch]; omitted = [-1, -1].
    #[serde(default)]
    pub claim: Option<(i64, i16)>,
    #[serde(default = "v4")]
    pub version: i16,
    #[serde(default = "timeout")]
    pub timeout: i32,
}

fn txn_default() -> Option<Value> {
    None
}
fn v4() -> i16 {
    4
}
fn v3() -> i16 {
    3
}
fn timeout() -> i32 {
    60_000
}

#[derive(Debug, Clone, Deserialize)]
pub struct AddStep {
    #[serde(default)]
    pub txn: Option<String>,
    pub pid: i64,
    pub epoch: i16,
    pub partitions: Vec<String>,
    #[serde(default = "v3")]
    pub version: i16,
    #[serde(default)]
    pub verify_only: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct AddOffsetsStep {
    #[serde(default)]
    pub txn: Option<String>,
    pub pid: i64,
    pub epoch: i16,
    pub group: String,
    #[serde(default = "v3")]
    pub version: i16,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EndStep {
    #[serde(default)]
    pub txn: Option<String>,
    pub pid: i64,
    pub epoch: i16,
    pub commit: bool,
    #[serde(default = "v3")]
    pub version: i16,
}

/// The Kafka error names the vectors may use, with their codes.
const ERRORS: &[(&str, i16)] = &[
    ("NONE", 0),
    ("UNKNOWN_SERVER_ERROR", -1),
    ("UNKNOWN_TOPIC_OR_PARTITION", 3),
    ("COORDINATOR_LOAD_IN_PROGRESS", 14),
    ("COORDINATOR_NOT_AVAILABLE", 15),
    ("NOT_COORDINATOR", 16),
    ("INVALID_REQUEST", 42),
    ("INVALID_PRODUCER_EPOCH", 47),
    ("INVALID_TXN_STATE", 48),
    ("INVALID_PRODUCER_ID_MAPPING", 49),
    ("INVALID_TRANSACTION_TIMEOUT", 50),
    ("CONCURRENT_TRANSACTIONS", 51),
    ("OPERATION_NOT_ATTEMPTED", 55),
    ("PRODUCER_FENCED", 90),
];

/// `NAME(code)` for reports, or the bare number for a code without a name here.
pub fn error_label(code: i16) -> String {
    match ERRORS.iter().find(|(_, c)| *c == code) {
        Some((name, _)) => format!("{name}({code})"),
        None => code.to_string(),
    }
}

/// Kafka error names the vectors may use.
pub fn error_code(v: &Value) -> Result<i16, String> {
    if let Some(n) = v.as_i64() {
        return i16::try_from(n).map_err(|_| format!("error code {n} out of range"));
    }
    let name = v
        .as_str()
        .ok_or_else(|| format!("error must be a name or number, not {v}"))?;
    ERRORS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
        .ok_or_else(|| format!("unknown error name {name}"))
}
