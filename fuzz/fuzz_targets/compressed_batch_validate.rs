#![no_main]

// The property lives in the shared harness, which the regression test
// (host/tests/fuzz_regressions.rs) runs on every saved input.
#[path = "../../host/tests/fuzz_regressions/harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::compressed_batch_validate(data));
