//! The wall clock, read in one place: every timestamp the broker stores or
//! compares (transaction timeouts, fences, offsets' commit times) comes from
//! [`now_ms`], so a later fake clock replaces one function.

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
