//! Test policy `wasi-probe`: InitProducerId uses one WASI facility, chosen by
//! the requested transaction timeout, so the host's tests can prove what the
//! sandbox grants (a bounded stderr, an empty environment) and what it does
//! not (clocks, the file system, random numbers: each traps).
//! Any other timeout, and every other call, is apache37's rules.

use kaas_apache37_rules as rules;
use kaas_policy_sdk::{Decision, Entry, InitRequest, Limits, PolicyInfo};

struct Probe;

/// Writes [`FLOOD_BYTES`] to stderr, then panics.
pub const FLOOD_TIMEOUT_MS: i32 = 1001;
/// Reads the wall clock.
pub const CLOCK_TIMEOUT_MS: i32 = 1002;
/// Reads a file.
pub const FILE_TIMEOUT_MS: i32 = 1003;
/// Asks for random bytes (a `RandomState` for a `HashMap`).
pub const RANDOM_TIMEOUT_MS: i32 = 1004;
/// Writes one line to stderr and decides normally.
pub const NOTE_TIMEOUT_MS: i32 = 1005;
/// Reads an environment variable: the environment is empty, so the decision
/// is made normally (a reject if a variable were ever visible).
pub const ENV_TIMEOUT_MS: i32 = 1006;

/// How much the flood writes: far over what the host keeps.
pub const FLOOD_BYTES: usize = 8 << 20;

impl rules::Variant for Probe {
    fn describe() -> PolicyInfo {
        PolicyInfo {
            name: "wasi-probe".into(),
            version: "0.0.1".into(),
            features: vec!["test-only".into()],
            protocol_features: Vec::new(),
        }
    }

    fn init_producer_id(current: Option<Entry>, req: InitRequest, limits: &Limits) -> Decision {
        match req.timeout_ms {
            FLOOD_TIMEOUT_MS => {
                use std::io::Write as _;
                let line = [b'x'; 1023];
                let mut stderr = std::io::stderr().lock();
                for _ in 0..FLOOD_BYTES / 1024 {
                    let _ = stderr.write_all(&line);
                    let _ = stderr.write_all(b"\n");
                }
                drop(stderr);
                panic!("flooded stderr with {FLOOD_BYTES} bytes")
            }
            CLOCK_TIMEOUT_MS => {
                let now = std::time::SystemTime::now();
                panic!("the clock was readable: {now:?}")
            }
            FILE_TIMEOUT_MS => {
                let read = std::fs::read("/etc/hostname");
                panic!("the file system was reachable: {read:?}")
            }
            RANDOM_TIMEOUT_MS => {
                let map: std::collections::HashMap<i32, i32> = std::collections::HashMap::new();
                panic!("random keys were available: {map:?}")
            }
            NOTE_TIMEOUT_MS => {
                eprintln!("wasi-probe: a note on stderr");
                rules::init_producer_id(current, &req, limits)
            }
            ENV_TIMEOUT_MS => match std::env::var_os("PATH") {
                None => rules::init_producer_id(current, &req, limits),
                Some(path) => panic!("the environment was visible: PATH={path:?}"),
            },
            _ => rules::init_producer_id(current, &req, limits),
        }
    }
}

kaas_policy_sdk::export_policy!(rules::Apache37Based<Probe>);
