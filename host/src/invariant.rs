//! `invariant!`: an assertion of something the code relies on (offsets
//! strictly increasing, a group's applied records reproducing the state they
//! were computed on, ...). Checked in every test build — debug builds, and
//! the release build the test command makes with the `fault-injection`
//! feature — and compiled out of a production build, so it costs nothing
//! where it cannot be tested anyway.

/// Asserts `cond` in test builds (see the module doc); nothing otherwise.
#[macro_export]
macro_rules! invariant {
    ($cond:expr, $($msg:tt)+) => {
        #[cfg(any(debug_assertions, feature = "fault-injection"))]
        {
            assert!($cond, $($msg)+);
        }
    };
}
