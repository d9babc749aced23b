//! The time a group operation runs at: monotonic for deadlines, wall-clock
//! for what is stored. A leaf both group protocols share.

use std::time::Instant;

/// The time, monotonic for deadlines and wall-clock for what is stored.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub at: Instant,
    pub wall_ms: i64,
}

impl Now {
    pub fn current() -> Now {
        Now {
            at: Instant::now(),
            wall_ms: crate::clock::now_ms(),
        }
    }
}
