//! Rate-limited logging of repeated events: a flood of
//! the same failure (a full fd table makes every `accept` fail) must not
//! turn into millions of identical log lines.
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

/// Exponential backoff between retries of a failing operation: `min`
/// doubling up to `max`, back to `min` after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub const fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max,
            next: min,
        }
    }

    /// How long to wait after one more failure.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    /// The operation worked: the next failure waits `min` again.
    pub fn succeeded(&mut self) {
        self.next = self.min;
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
}
