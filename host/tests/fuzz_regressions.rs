//! Replays every saved fuzz input (`tests/fuzz_regressions/<target>/*.bin`)
//! through the same property the cargo-fuzz target checks
//! (`tests/fuzz_regressions/harness.rs`, shared with `fuzz/`). An input that
//! once crashed must now pass; a panic here is the bug come back.
//!
//! Besides the property, every replay must stay under [`MAX_ALLOCATION`]
//! for any single allocation: most inputs here once made a decoder reserve
//! gigabytes from a count in a few bytes, which on a machine with enough
//! memory (or overcommit) succeeds quietly instead of aborting.
//!
//! `cargo test --release -p kaas --test fuzz_regressions`
// The counting allocator below needs `unsafe impl GlobalAlloc`.
#![allow(unsafe_code)]
// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "fuzz_regressions/harness.rs"]
mod harness;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;

/// The largest single allocation a replay may make.
const MAX_ALLOCATION: usize = 16 << 20;

thread_local! {
    /// Largest allocation requested on this thread since the last reset.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, noting each thread's largest request.
struct Counting;

// SAFETY: forwards every call unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|m| m.set(m.get().max(size)));
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_regressions")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("read input"))
        })
        .collect()
}

fn replay(target: &str, property: fn(&[u8])) {
    for (name, data) in inputs(target) {
        LARGEST.with(|m| m.set(0));
        let ok = std::panic::catch_unwind(|| property(&data)).is_ok();
        let largest = LARGEST.with(Cell::get);
        assert!(ok, "{target}/{name} fails its property again");
        assert!(
            largest <= MAX_ALLOCATION,
            "{target}/{name} allocated {largest} bytes at once"
        );
    }
}

#[test]
fn request_decode_inputs() {
    replay("request_decode", harness::request_decode);
}

#[test]
fn batch_validate_inputs() {
    replay("batch_validate", harness::batch_validate);
}

#[test]
fn compressed_batch_validate_inputs() {
    replay(
        "compressed_batch_validate",
        harness::compressed_batch_validate,
    );
}

#[test]
fn state_record_inputs() {
    replay("state_record", harness::state_record);
}

#[test]
fn producer_snapshot_inputs() {
    replay("producer_snapshot", harness::producer_snapshot);
}
