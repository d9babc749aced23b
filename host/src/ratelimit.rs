//! Rate limits on repeated events: [`RateLimit`] for log lines (a flood of
//! the same failure, a full fd table making every `accept` fail, must not
//! turn into millions of identical log lines) and [`Backoff`] for retries
//! (every retry loop in the broker waits through one).
//!
//! ```ignore
//! static ACCEPT_FAILED: RateLimit = RateLimit::per_second();
//! if let Some(suppressed) = ACCEPT_FAILED.allow() {
//!     tracing::warn!(error = %e, suppressed, "accept failed");
//! }
//! ```

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lets an event through at most once per `every`, counting the ones it
/// holds back.
#[derive(Debug)]
pub struct RateLimit {
    every: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimit {
    /// At most one event per `every`.
    pub const fn new(every: Duration) -> Self {
        RateLimit {
            every,
            state: Mutex::new(State {
                last: None,
                suppressed: 0,
            }),
        }
    }

    /// At most one event per second.
    pub const fn per_second() -> Self {
        Self::new(Duration::from_secs(1))
    }

    /// `Some(n)` when this event may be logged, `n` being how many were
    /// held back since the last one let through; `None` when it is held
    /// back.
    pub fn allow(&self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    /// [`Self::allow`] at a given time (for tests).
    pub fn allow_at(&self, now: Instant) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match s.last {
            Some(last) if now.saturating_duration_since(last) < self.every => {
                s.suppressed += 1;
                None
            }
            _ => {
                s.last = Some(now);
                Some(std::mem::take(&mut s.suppressed))
            }
        }
    }
}

/// The waits between tries of a failing operation: `initial` after the
/// first failure, multiplied by `multiplier` after each further one up to
/// `max`, and `initial` again once the operation works ([`Self::succeeded`]).
///
/// Every retry loop in the broker waits through one, so its delays are named
/// where the loop builds it: `Backoff::new` (doubling), [`Backoff::fixed`]
/// (the same wait every time), [`Backoff::with_multiplier`]. The values are
/// `const`, so a loop's policy can be a `const` too, each use a fresh copy.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    multiplier: u32,
    next: Duration,
}

impl Backoff {
    /// `initial`, doubling up to `max`.
    pub const fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            multiplier: 2,
            next: initial,
        }
    }

    /// `wait` after every failure.
    pub const fn fixed(wait: Duration) -> Self {
        Backoff {
            initial: wait,
            max: wait,
            multiplier: 1,
            next: wait,
        }
    }

    /// The same, growing by `multiplier` (at least 1) instead of doubling.
    pub const fn with_multiplier(mut self, multiplier: u32) -> Self {
        self.multiplier = if multiplier == 0 { 1 } else { multiplier };
        self
    }

    /// How long to wait after one more failure.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = self.next.saturating_mul(self.multiplier).min(self.max);
        wait
    }

    /// The operation worked: the next failure waits `initial` again.
    pub fn succeeded(&mut self) {
        self.next = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_event_is_let_through_once_per_period_with_a_count_of_the_rest() {
        let limit = RateLimit::new(Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(limit.allow_at(t0), Some(0));
        for i in 1..=1000u64 {
            assert_eq!(limit.allow_at(t0 + Duration::from_micros(i * 900)), None);
        }
        assert_eq!(limit.allow_at(t0 + Duration::from_secs(1)), Some(1000));
        assert_eq!(
            limit.allow_at(t0 + Duration::from_millis(1500)),
            None,
            "the period restarts at the event let through"
        );
        assert_eq!(limit.allow_at(t0 + Duration::from_secs(3)), Some(1));
    }

    #[test]
    fn backoff_doubles_up_to_its_cap_and_resets_after_a_success() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
        let waits: Vec<u128> = (0..9).map(|_| b.failed().as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed(), Duration::from_millis(10));
    }

    #[test]
    fn a_fixed_backoff_waits_the_same_and_a_multiplier_sets_the_growth() {
        let mut fixed = Backoff::fixed(Duration::from_millis(500));
        let waits: Vec<u128> = (0..3).map(|_| fixed.failed().as_millis()).collect();
        assert_eq!(waits, [500, 500, 500]);
        let mut tenfold =
            Backoff::new(Duration::from_millis(1), Duration::from_millis(500)).with_multiplier(10);
        let waits: Vec<u128> = (0..5).map(|_| tenfold.failed().as_millis()).collect();
        assert_eq!(waits, [1, 10, 100, 500, 500]);
        tenfold.succeeded();
        assert_eq!(tenfold.failed(), Duration::from_millis(1));
    }
}
