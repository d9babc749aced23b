//! The log cleaner's two bounded resources, apart from the cleaner so the
//! partition's compaction pass can take them without knowing the cleaner:
//! the offset map (`log.cleaner.dedupe.buffer.size`) and the I/O pace
//! (`log.cleaner.io.max.bytes.per.second`). A leaf: it imports nothing of
//! the crate.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Bytes Kafka counts per offset-map entry.
const ENTRY_BYTES: u64 = 24;
/// Kafka's log.cleaner.io.buffer.load.factor.
const LOAD_FACTOR: f64 = 0.9;

/// The last offset of each key of the dirty part of a log, keyed by a
/// 16-byte digest of the key (Kafka keeps an MD5; SHA-256 cut to 128 bits
/// here), holding at most the configured number of keys.
#[derive(Debug)]
pub struct OffsetMap {
    map: HashMap<[u8; 16], i64>,
    capacity: usize,
}

impl OffsetMap {
    /// A map within `buffer_bytes`.
    pub fn new(buffer_bytes: u64) -> Self {
        let capacity = ((buffer_bytes / ENTRY_BYTES) as f64 * LOAD_FACTOR) as usize;
        OffsetMap {
            map: HashMap::new(),
            capacity: capacity.max(1),
        }
    }
    fn digest(key: &[u8]) -> [u8; 16] {
        let d = Sha256::digest(key);
        let mut out = [0u8; 16];
        out.copy_from_slice(&d[..16]);
        out
    }
    pub fn clear(&mut self) {
        self.map.clear();
    }
    /// Whether `n` more keys surely fit.
    pub fn fits(&self, n: usize) -> bool {
        self.map.len() + n <= self.capacity
    }
    /// Records `offset` as the latest of `key` (offsets come in ascending order).
    pub fn put(&mut self, key: &[u8], offset: i64) {
        let e = self.map.entry(Self::digest(key)).or_insert(offset);
        *e = (*e).max(offset);
    }
    /// The latest offset of `key`, if the map holds it.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.map.get(&Self::digest(key)).copied()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Paces the cleaner's reads and writes to a byte rate: after each
/// chunk, sleeps as long as it is ahead of the rate since the window began.
#[derive(Debug)]
pub struct Throttle {
    rate: Option<f64>,
    start: Instant,
    bytes: u64,
    /// Time spent paused (for the metrics).
    pub throttled: Duration,
}

impl Throttle {
    pub fn new(rate: Option<f64>) -> Self {
        Throttle {
            rate: rate.filter(|r| *r > 0.0 && r.is_finite()),
            start: Instant::now(),
            bytes: 0,
            throttled: Duration::ZERO,
        }
    }
    /// Counts `n` bytes of I/O and sleeps while ahead of the rate.
    pub fn pace(&mut self, n: u64) {
        let Some(rate) = self.rate else { return };
        self.bytes += n;
        let due = Duration::from_secs_f64(self.bytes as f64 / rate);
        let elapsed = self.start.elapsed();
        if due > elapsed {
            let pause = due - elapsed;
            std::thread::sleep(pause);
            self.throttled += pause;
        }
        // A fresh window every ~second, so an idle spell earns no burst.
        if self.start.elapsed() > Duration::from_secs(1) {
            self.start = Instant::now();
            self.bytes = 0;
        }
    }
}
