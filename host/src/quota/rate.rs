//! The measurements behind client quotas, as Kafka's metrics library makes
//! them, with time passed in (milliseconds on any monotonic scale) so they
//! run without a clock in tests.
//!
//! - [`SampledRate`]: Kafka's `Rate` over a `SampledStat`: `samples`
//!   buckets of `window_ms` each; a value lands in the current bucket, a
//!   bucket older than `samples × window_ms` is reset before it is read,
//!   and the rate is the sum of the buckets over the elapsed window, which
//!   counts at least `samples − 1` whole windows (so a new client is not
//!   judged on its first millisecond).
//! - [`throttle_ms`]: ClientQuotaManager's delay that brings an observed
//!   rate `O` back to the bound `T` over the window `W` if nothing more is
//!   recorded: `O·W/(W+X) = T`, so `X = (O − T)/T · W`.
//! - [`TokenBucket`]: the controller-mutation quota's bucket: refills at
//!   the quota per second up to a burst of `quota × (samples − 1) ×
//!   window`, each mutation takes one token per partition; below zero the
//!   client waits `−tokens / quota` seconds.

/// Kafka's sampled rate: a ring of `samples` buckets of `window_ms`.
#[derive(Debug, Clone)]
pub struct SampledRate {
    /// quota.window.size.seconds, in milliseconds.
    window_ms: u64,
    /// The buckets: (start of the bucket's window, sum recorded in it).
    buckets: Vec<(u64, f64)>,
    /// Index of the bucket values land in now.
    current: usize,
}

impl SampledRate {
    /// A rate over `samples` (≥ 2) windows of `window_ms` (≥ 1) each,
    /// starting empty at `now`.
    pub fn new(samples: usize, window_ms: u64, now: u64) -> Self {
        SampledRate {
            window_ms: window_ms.max(1),
            buckets: vec![(now, 0.0); samples.max(2)],
            current: 0,
        }
    }

    fn expire_after(&self) -> u64 {
        self.buckets.len() as u64 * self.window_ms
    }

    /// Resets buckets that fell out of the whole window (Kafka's
    /// `purgeObsoleteSamples`).
    fn purge(&mut self, now: u64) {
        let expire = self.expire_after();
        for b in &mut self.buckets {
            if now.saturating_sub(b.0) >= expire {
                *b = (now, 0.0);
            }
        }
    }

    /// Adds `value` at `now` (negative values take back an earlier record,
    /// as Kafka's fetch "unrecord" does).
    pub fn record(&mut self, value: f64, now: u64) {
        let n = self.buckets.len();
        let (start, _) = self.buckets[self.current % n];
        if now.saturating_sub(start) >= self.window_ms {
            self.current = (self.current + 1) % n;
            self.buckets[self.current] = (now, 0.0);
        }
        self.buckets[self.current % n].1 += value;
    }

    /// The length of the window the rate is measured over (Kafka's
    /// `Rate.windowSize`): from the oldest bucket to `now`, at least
    /// `samples − 1` whole windows, at least 1 ms.
    pub fn window_size_ms(&mut self, now: u64) -> u64 {
        self.purge(now);
        let oldest = self.buckets.iter().map(|b| b.0).min().unwrap_or(now);
        let mut elapsed = now.saturating_sub(oldest);
        let full = elapsed / self.window_ms;
        let min_full = self.buckets.len() as u64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * self.window_ms;
        }
        elapsed.max(1)
    }

    /// The rate per second at `now`.
    pub fn rate(&mut self, now: u64) -> f64 {
        let window = self.window_size_ms(now);
        let total: f64 = self.buckets.iter().map(|b| b.1).sum();
        total / (window as f64 / 1000.0)
    }

    /// Records `value` at `now` and answers the throttle time the quota
    /// `bound` (per second) asks for, 0 within it (Kafka records, then
    /// checks).
    pub fn record_and_throttle(&mut self, value: f64, now: u64, bound: f64) -> u64 {
        self.record(value, now);
        self.throttle(now, bound)
    }

    /// The throttle time the quota `bound` asks for at `now`, recording
    /// nothing.
    pub fn throttle(&mut self, now: u64, bound: f64) -> u64 {
        let observed = self.rate(now);
        let window = self.window_size_ms(now);
        throttle_ms(observed, bound, window)
    }

    /// Whether nothing has been recorded in the whole window.
    pub fn is_idle(&mut self, now: u64) -> bool {
        self.purge(now);
        self.buckets.iter().all(|b| b.1 == 0.0)
    }
}

/// Kafka's `throttleTime`: `(observed − bound) / bound × window`, rounded;
/// 0 when the observed rate is within the bound (or the bound is not
/// positive, which validation refuses).
pub fn throttle_ms(observed: f64, bound: f64, window_ms: u64) -> u64 {
    if bound <= 0.0 || observed <= bound || !observed.is_finite() {
        return 0;
    }
    let x = (observed - bound) / bound * window_ms as f64;
    if x >= u32::MAX as f64 {
        u32::MAX as u64
    } else {
        x.round() as u64
    }
}

/// The controller-mutation quota's token bucket (Kafka's `TokenBucket`).
#[derive(Debug, Clone)]
pub struct TokenBucket {
    tokens: f64,
    last_ms: u64,
}

impl TokenBucket {
    /// A full bucket at `now` (Kafka's first refill fills it).
    pub fn new(bound: f64, samples: usize, window_ms: u64, now: u64) -> Self {
        TokenBucket {
            tokens: burst(bound, samples, window_ms),
            last_ms: now,
        }
    }

    fn refill(&mut self, bound: f64, samples: usize, window_ms: u64, now: u64) {
        let elapsed = now.saturating_sub(self.last_ms) as f64 / 1000.0;
        self.tokens = (self.tokens + bound * elapsed).min(burst(bound, samples, window_ms));
        self.last_ms = self.last_ms.max(now);
    }

    /// Tokens left at `now` (negative: owed).
    pub fn tokens(&mut self, bound: f64, samples: usize, window_ms: u64, now: u64) -> f64 {
        self.refill(bound, samples, window_ms, now);
        self.tokens
    }

    /// Takes `permits` at `now`.
    pub fn take(&mut self, permits: f64, bound: f64, samples: usize, window_ms: u64, now: u64) {
        self.refill(bound, samples, window_ms, now);
        self.tokens -= permits;
    }

    /// The wait until the bucket is back at zero: `−tokens / bound`
    /// seconds, 0 when not below zero.
    pub fn throttle_ms(&mut self, bound: f64, samples: usize, window_ms: u64, now: u64) -> u64 {
        let t = self.tokens(bound, samples, window_ms, now);
        if t >= 0.0 || bound <= 0.0 {
            0
        } else {
            ((-t / bound) * 1000.0).round().min(u32::MAX as f64) as u64
        }
    }
}

fn burst(bound: f64, samples: usize, window_ms: u64) -> f64 {
    bound * samples.saturating_sub(1) as f64 * (window_ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_time_is_kafkas_formula() {
        // Kafka's own case: observed 100 against 50 over 2 s → 2000 ms.
        assert_eq!(throttle_ms(100.0, 50.0, 2000), 2000);
        assert_eq!(throttle_ms(18.2, 18.2, 11_000), 0);
        assert_eq!(throttle_ms(16.5, 20.4, 11_000), 0);
        assert_eq!(throttle_ms(150.0, 100.0, 10_000), 5000);
    }

    #[test]
    fn a_new_rate_counts_at_least_samples_minus_one_windows() {
        let mut r = SampledRate::new(11, 1000, 0);
        r.record(1000.0, 0);
        // 1000 bytes over the 10 s minimum window.
        assert_eq!(r.window_size_ms(0), 10_000);
        assert!((r.rate(0) - 100.0).abs() < 1e-9);
        // 5.5 s later: 5.5 s elapsed, padded to the 10 whole windows.
        assert_eq!(r.window_size_ms(5_500), 10_500);
    }

    #[test]
    fn recording_over_the_bound_throttles_by_kafkas_formula() {
        let mut r = SampledRate::new(11, 1000, 0);
        // 2000 B in the 10 s minimum window is 200 B/s against 100 B/s:
        // (200 − 100)/100 × 10 s.
        let t = r.record_and_throttle(2000.0, 0, 100.0);
        assert_eq!(t, 10_000);
        // The bucket leaves the window 11 windows later (Kafka's samples
        // expire; the formula's longer window is an estimate).
        assert!(!r.is_idle(10_999));
        assert!(r.is_idle(11_000));
        assert_eq!(r.throttle(11_000, 100.0), 0);
    }

    #[test]
    fn old_buckets_expire_after_the_whole_window() {
        let mut r = SampledRate::new(3, 1000, 0);
        r.record(500.0, 0);
        r.record(500.0, 1500);
        assert!(r.rate(1500) > 0.0);
        // 3 windows after the last record everything is gone.
        assert!(r.is_idle(4600));
        assert_eq!(r.rate(4600), 0.0);
    }

    #[test]
    fn a_negative_record_takes_back_a_value() {
        let mut r = SampledRate::new(11, 1000, 0);
        r.record(100.0, 10);
        r.record(5000.0, 20);
        r.record(-5000.0, 20);
        // 100 B over 20 ms padded with ten whole windows.
        assert!((r.rate(20) - 100.0 / 10.02).abs() < 1e-9);
    }

    #[test]
    fn a_saturating_client_settles_at_the_bound_over_whole_windows() {
        // A client that sends 100 B whenever it is not throttled, against
        // 1000 B/s. Samples expiring let bursts through (as in Kafka), so
        // the rate is measured after the first full window, over many.
        let mut r = SampledRate::new(11, 1000, 0);
        let (mut now, mut sent) = (0, 0.0);
        let mut from = None;
        while now < 110_000 {
            if from.is_none() && now >= 11_000 {
                from = Some((now, sent));
            }
            sent += 100.0;
            let t = r.record_and_throttle(100.0, now, 1000.0);
            now += t.max(1);
        }
        let (t0, s0) = from.unwrap();
        let measured = (sent - s0) / ((now - t0) as f64 / 1000.0);
        assert!(
            (measured - 1000.0).abs() / 1000.0 < 0.05,
            "measured {measured}"
        );
    }

    #[test]
    fn the_token_bucket_starts_full_and_owes_below_zero() {
        let (q, s, w) = (2.0, 11, 1000);
        let mut b = TokenBucket::new(q, s, w, 0);
        assert_eq!(b.tokens(q, s, w, 0), 20.0);
        b.take(30.0, q, s, w, 0);
        assert_eq!(b.throttle_ms(q, s, w, 0), 5000);
        // Refills at 2 per second.
        assert_eq!(b.throttle_ms(q, s, w, 4000), 1000);
        assert_eq!(b.throttle_ms(q, s, w, 5000), 0);
        // Never above the burst.
        assert_eq!(b.tokens(q, s, w, 1_000_000), 20.0);
    }
}
