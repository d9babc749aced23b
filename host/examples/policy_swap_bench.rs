//! Policy hot-swap pause benchmark: how long no decision is made
//! while a new policy takes over, under a continuous decision load.
//!
//! ```text
//! cargo build --release --target wasm32-wasip2 --workspace --exclude kaas
//! cargo run --release -p kaas --example policy_swap_bench [-- --swaps 200 --threads 2]
//! ```
//!
//! What runs: `--threads` decision threads, each with its own coordinator
//! state machine ([`TxnMachine`]) over the one shared [`PolicySlot`], as the
//! broker's shards are. Each loops InitProducerId decisions (a rejoin that
//! bumps the epoch, planned and applied through the machine, as the broker
//! does minus the fsync) and timestamps the end of every decision, noting
//! which policy made it (the entry's written_by). Meanwhile a swapper
//! thread alternates apache37 and strict `--swaps` times through the
//! broker's [`Swapper`]: it vets the next policy (load from the artifact
//! cache, describe(), the smoke vectors, a fresh configured instance) while
//! the old one keeps deciding, then installs it.
//!
//! What is reported (all from the same run):
//! - swap pause: on the merged timeline of every thread's decisions, the
//!   gap between the first decision made by the new policy and the decision
//!   just before it: the time no decision is made across the take-over.
//!   Target p99 < 1 ms. The reference is every gap of that merged timeline.
//! - per thread: the same gap on each thread's own timeline, the worst
//!   thread counting for each swap (what one producer sees; on an
//!   oversubscribed machine it includes that thread being descheduled),
//!   with every gap of one thread as its reference.
//! - vetting window: the longest gap while a policy was being vetted (the
//!   vetting competes for the CPU with the decisions; it does not stop them).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use kaas::policy::{ArtifactCache, PolicyRuntime, PolicySlot, SandboxLimits};
use kaas::swap::Swapper;
use kaas::txn::machine::{DEFAULT_LIMITS, InitProducerId, Step, TxnMachine};

struct Args {
    swaps: usize,
    threads: usize,
    /// Pause between two swaps (decisions continue), ms.
    interval_ms: u64,
}

fn parse_args() -> Args {
    let mut a = Args {
        swaps: 200,
        threads: 2,
        interval_ms: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("{flag} needs a number"))
        };
        match flag.as_str() {
            "--swaps" => a.swaps = value() as usize,
            "--threads" => a.threads = value().max(1) as usize,
            "--interval-ms" => a.interval_ms = value(),
            "--help" | "-h" => {
                println!("policy_swap_bench [--swaps N] [--threads N] [--interval-ms MS]");
                std::process::exit(0);
            }
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

fn wasm(name: &str) -> Vec<u8> {
    let p = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join("target/wasm32-wasip2/release")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run `cargo build --release --target wasm32-wasip2 --workspace --exclude kaas`)",
            p.display()
        )
    })
}

/// One decision's end: nanoseconds since the start, and whether the
/// second policy (strict) made it.
#[derive(Clone, Copy)]
struct Mark {
    at: u64,
    strict: bool,
}

fn decide_loop(slot: Arc<PolicySlot>, n: usize, start: Instant, stop: &AtomicBool) -> Vec<Mark> {
    let mut m = TxnMachine::with_slot(slot, DEFAULT_LIMITS);
    let txn = format!("bench-{n}");
    let req = InitProducerId {
        transactional_id: Some(txn.clone()),
        timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        version: 4,
    };
    let mut marks = Vec::with_capacity(1 << 22);
    let mut candidate = 1_000_000 * (n as i64 + 1);
    let mut now_ms = 1_700_000_000_000;
    while !stop.load(Ordering::Relaxed) {
        now_ms += 1;
        candidate += 1;
        match m.init_producer_id(&req, now_ms, candidate) {
            Step::Write(w) => {
                let a = m.finish(w, Ok(()));
                assert_eq!(a.reply.error_code, 0, "decision failed");
            }
            Step::Done(a) => panic!("no write: error {}", a.reply.error_code),
        }
        let strict = m.written_by(&txn).is_some_and(|b| b.starts_with("strict@"));
        marks.push(Mark {
            at: start.elapsed().as_nanos() as u64,
            strict,
        });
    }
    marks
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn us(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

fn main() -> anyhow::Result<()> {
    let args = parse_args();
    let cache_dir = std::env::temp_dir().join(format!("kaas-swap-bench-{}", std::process::id()));
    let runtime = PolicyRuntime::new(
        SandboxLimits::default(),
        Some(ArtifactCache::new(&cache_dir)),
    )
    .context("starting the policy runtime")?;
    let bytes = [
        wasm("kaas_policy_apache37.wasm"),
        wasm("kaas_policy_strict.wasm"),
    ];
    let first = Arc::new(runtime.load_bytes(&bytes[0]).context("loading apache37")?);
    let slot = PolicySlot::new(first);
    let swapper = Swapper::new(runtime.clone(), slot.clone(), DEFAULT_LIMITS);
    // Warm the artifact cache for both (what a broker that loaded them before has).
    for b in &bytes {
        swapper
            .vet(b)
            .context("vetting a policy to warm the cache")?;
    }

    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let deciders: Vec<_> = (0..args.threads)
        .map(|n| {
            let slot = slot.clone();
            let stop = stop.clone();
            std::thread::spawn(move || decide_loop(slot, n, start, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // (vet start, vet end = install instant, next is strict)
    let mut swaps = Vec::with_capacity(args.swaps);
    for i in 0..args.swaps {
        let next_is_strict = i % 2 == 0;
        let vet_start = start.elapsed().as_nanos() as u64;
        let next = swapper
            .vet(&bytes[usize::from(next_is_strict)])
            .with_context(|| format!("vetting the policy of swap {i}"))?;
        let installed = start.elapsed().as_nanos() as u64;
        swapper.install(next, "bench");
        swaps.push((vet_start, installed, next_is_strict));
        std::thread::sleep(Duration::from_millis(args.interval_ms));
    }
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let marks: Vec<Vec<Mark>> = deciders
        .into_iter()
        .map(|h| h.join().map_err(|_| anyhow!("a decision thread panicked")))
        .collect::<anyhow::Result<_>>()?;
    let _ = std::fs::remove_dir_all(&cache_dir);

    let mut all_gaps: Vec<u64> = marks
        .iter()
        .flat_map(|m| m.windows(2).map(|w| w[1].at - w[0].at))
        .collect();
    all_gaps.sort_unstable();
    let mut pauses = Vec::with_capacity(swaps.len());
    let mut vet_windows = Vec::with_capacity(swaps.len());
    for &(vet_start, installed, strict) in &swaps {
        let mut worst = 0;
        let mut worst_vet = 0;
        for m in &marks {
            // The first decision made by the new policy after the install.
            let Some(i) = m
                .iter()
                .position(|k| k.at >= installed && k.strict == strict)
            else {
                anyhow::bail!("a thread made no decision with the new policy");
            };
            if i > 0 {
                worst = worst.max(m[i].at - m[i - 1].at);
            }
            let window = m
                .windows(2)
                .filter(|w| w[1].at >= vet_start && w[0].at <= installed)
                .map(|w| w[1].at - w[0].at)
                .max()
                .unwrap_or(0);
            worst_vet = worst_vet.max(window);
        }
        pauses.push(worst);
        vet_windows.push(worst_vet);
    }
    // The definition itself: on the merged timeline of every thread, the
    // time between the first decision of the new policy and the decision
    // (by any thread, any policy) just before it.
    let mut merged: Vec<Mark> = marks.iter().flatten().copied().collect();
    merged.sort_unstable_by_key(|k| k.at);
    let mut merged_gaps: Vec<u64> = merged.windows(2).map(|w| w[1].at - w[0].at).collect();
    let mut global = Vec::with_capacity(swaps.len());
    for &(_, installed, strict) in &swaps {
        let i = merged
            .iter()
            .position(|k| k.at >= installed && k.strict == strict)
            .context("no decision was made with the new policy")?;
        if i > 0 {
            global.push(merged[i].at - merged[i - 1].at);
        }
    }
    merged_gaps.sort_unstable();
    global.sort_unstable();
    pauses.sort_unstable();
    vet_windows.sort_unstable();
    let decisions: usize = marks.iter().map(Vec::len).sum();
    println!(
        "policy swap bench: {} swaps (apache37 <-> strict), {} decision threads, {} decisions, {} swaps counted by the slot",
        swaps.len(),
        args.threads,
        decisions,
        slot.swaps_ok()
    );
    println!(
        "swap pause, no decision made by any thread:                            p50 {}  p99 {}  max {}",
        us(pct(&global, 0.5)),
        us(pct(&global, 0.99)),
        us(*global.last().unwrap_or(&0))
    );
    println!(
        "reference, every gap between two decisions of any thread:             p50 {}  p99 {}  p99.9 {}  max {}",
        us(pct(&merged_gaps, 0.5)),
        us(pct(&merged_gaps, 0.99)),
        us(pct(&merged_gaps, 0.999)),
        us(*merged_gaps.last().unwrap_or(&0))
    );
    println!(
        "swap pause (gap at the first decision of the new policy, worst thread): p50 {}  p99 {}  max {}",
        us(pct(&pauses, 0.5)),
        us(pct(&pauses, 0.99)),
        us(*pauses.last().unwrap_or(&0))
    );
    println!(
        "reference, every gap between two decisions of one thread:              p50 {}  p99 {}  p99.9 {}  max {}",
        us(pct(&all_gaps, 0.5)),
        us(pct(&all_gaps, 0.99)),
        us(pct(&all_gaps, 0.999)),
        us(*all_gaps.last().unwrap_or(&0))
    );
    println!(
        "longest gap while a policy was being vetted (worst thread):           p50 {}  p99 {}  max {}",
        us(pct(&vet_windows, 0.5)),
        us(pct(&vet_windows, 0.99)),
        us(*vet_windows.last().unwrap_or(&0))
    );
    let p99 = pct(&global, 0.99);
    println!(
        "target (no decision by any thread) p99 < 1 ms: {}",
        if p99 < 1_000_000 { "met" } else { "NOT met" }
    );
    Ok(())
}
