//! [`invariant!`]: an assertion of something the code relies on, checked in
//! every test build (debug, and the release build the test command makes
//! with `fault-injection`), compiled out of a production build.
//!
//! `debug_assert!` alone would miss the test command's release build
//! (`cargo test --release --features fault-injection`, the profile every
//! integration test and the binary they start run in), and turning debug
//! assertions on in `[profile.release]` would slow production too. So the
//! switch is [`CHECKED`]: on with `debug_assertions` or the test-only
//! `fault-injection` feature, which a production build never has.
//!
//! Off, the condition is still type-checked (inside `if false`), so a value
//! computed only for an invariant is neither a compile error nor an unused
//! variable, and the optimizer removes it: it is never evaluated.
//!
//! Rules for an invariant: it holds by the code's own logic whatever a
//! client sends (input is refused with an error, never asserted); it is
//! checked where the state changes; it is cheap (O(1), no allocation, no
//! lock taken for it); its message names what broke, with the values.
//!
//! ```ignore
//! use crate::invariant::invariant;
//! invariant!(hw <= end, "high watermark {hw} is past the log end {end}");
//! ```
//!
//! A test showing that an invariant fires is `#[should_panic]` and carries
//! `#[cfg_attr(not(any(debug_assertions, feature = "fault-injection")),
//! ignore = "unchecked build")]`, so an unchecked build skips it.

/// Whether [`invariant!`]s are checked in this build.
pub const CHECKED: bool = cfg!(any(debug_assertions, feature = "fault-injection"));

/// `assert!($cond, $msg, $args...)` in a build where [`CHECKED`] is true;
/// nothing (the condition is never evaluated) in a production build.
macro_rules! invariant {
    ($cond:expr, $($msg:tt)+) => {
        if $crate::invariant::CHECKED {
            assert!($cond, $($msg)+);
        }
    };
}

pub(crate) use invariant;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        not(any(debug_assertions, feature = "fault-injection")),
        ignore = "unchecked build"
    )]
    #[should_panic(expected = "broke: 1 > 0")]
    fn a_broken_invariant_panics_with_its_message() {
        let (a, b) = (1, 0);
        invariant!(a <= b, "broke: {a} > {b}");
    }

    #[test]
    fn an_invariant_evaluates_its_condition_once_and_only_when_checked() {
        let mut calls = 0;
        let mut cond = || {
            calls += 1;
            true
        };
        invariant!(cond(), "never");
        assert_eq!(calls, usize::from(CHECKED));
    }
}
