//! The producer-id allocator: hands out ids from blocks reserved durably, so
//! no id is ever handed out twice, across crashes. The file holds the end of
//! the last reserved block; a restart continues from there (the unused rest
//! of a block is skipped, never reused).
//!
//! It also answers whether an id was ever handed out ([`Self::issued`]):
//! every id below the next one to hand out was, or was skipped for good;
//! every id at or above it was not. Produce refuses a batch under an id
//! that was not: a client that wrote seq-0 batches under
//! the next ids before they are handed out would make the real producer's
//! first batch look like a duplicate (acknowledged, and never stored).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

/// Ids reserved per durable write.
pub const BLOCK: i64 = 1000;

/// A durable block allocator.
#[derive(Debug)]
pub struct ProducerIdAllocator {
    path: PathBuf,
    /// Cluster mode: blocks come from etcd (no two brokers ever get the
    /// same one), and an id is issued when any broker's block holds it.
    etcd: Option<std::sync::Arc<crate::cluster::etcd::Etcd>>,
    /// (next id to hand out, end of the reserved block, exclusive)
    state: Mutex<(i64, i64)>,
    /// The next id to hand out (`state.0`), readable without the lock: the
    /// produce path asks [`Self::issued`] for every batch with a producer id.
    next: AtomicI64,
    /// Held by the one caller taking a new block.
    refill: tokio::sync::Mutex<()>,
}

impl ProducerIdAllocator {
    pub fn open(path: &Path) -> io::Result<Self> {
        let end = match std::fs::read_to_string(path) {
            Ok(s) => s.trim().parse::<i64>().map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(ProducerIdAllocator {
            path: path.to_path_buf(),
            etcd: None,
            state: Mutex::new((end, end)),
            next: AtomicI64::new(end),
            refill: tokio::sync::Mutex::new(()),
        })
    }

    /// Whether `id` was handed out (or skipped for good): it is below the
    /// next id to hand out. Ids at or above it have no producer yet, so no
    /// batch may carry them.
    pub fn issued(&self, id: i64) -> bool {
        id >= 0 && id < self.next()
    }

    /// The next id to hand out: every id below it was handed out or skipped.
    pub fn next(&self) -> i64 {
        let mine = self.next.load(Ordering::Acquire);
        match &self.etcd {
            None => mine,
            Some(e) => mine.max(e.producer_ids_next()),
        }
    }

    /// Cluster mode: blocks of ids from etcd's counter.
    pub fn from_etcd(etcd: std::sync::Arc<crate::cluster::etcd::Etcd>) -> Self {
        ProducerIdAllocator {
            path: PathBuf::new(),
            etcd: Some(etcd),
            state: Mutex::new((0, 0)),
            next: AtomicI64::new(0),
            refill: tokio::sync::Mutex::new(()),
        }
    }

    /// Cluster mode: the etcd connection ids come from.
    pub fn etcd(&self) -> Option<&std::sync::Arc<crate::cluster::etcd::Etcd>> {
        self.etcd.as_ref()
    }

    /// Takes the next block after `end`: from the file, or from etcd's
    /// counter (one round trip every `BLOCK` ids).
    async fn next_block(&self, end: i64) -> io::Result<(i64, i64)> {
        let Some(etcd) = &self.etcd else {
            let end = end + BLOCK;
            crate::log::atomic_file::write_atomically(&self.path, end.to_string().as_bytes())?;
            return Ok((end - BLOCK, end));
        };
        let start = etcd
            .producer_id_block(BLOCK)
            .await
            .map_err(io::Error::other)?;
        Ok((start, start + BLOCK))
    }

    /// The next id of the current block, if it has one left.
    fn take_one(&self) -> Option<i64> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.0 >= st.1 {
            return None;
        }
        let id = st.0;
        st.0 += 1;
        // Published before the id reaches anyone, so the id's first batch
        // always finds it issued.
        self.next.fetch_max(st.0, Ordering::AcqRel);
        Some(id)
    }

    /// Hands out a fresh id. Concurrent callers never get the same one; an
    /// id that ends up unused is simply skipped (ids are plentiful). One
    /// caller at a time takes a new block, the others wait for it without
    /// holding a thread (the state lock is never held across the etcd
    /// round trip: a caller blocked on it would stall its runtime worker).
    pub async fn allocate(&self) -> io::Result<i64> {
        loop {
            if let Some(id) = self.take_one() {
                return Ok(id);
            }
            let _refilling = self.refill.lock().await;
            if let Some(id) = self.take_one() {
                return Ok(id); // another caller took a block meanwhile
            }
            let end = self.state.lock().unwrap_or_else(|p| p.into_inner()).1;
            let block = self.next_block(end).await?;
            *self.state.lock().unwrap_or_else(|p| p.into_inner()) = block;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ids_are_never_handed_out_twice_across_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ids");
        let a = ProducerIdAllocator::open(&path).expect("open");
        let first = a.allocate().await.expect("allocate");
        let second = a.allocate().await.expect("allocate");
        assert_eq!(second, first + 1);
        drop(a);
        let b = ProducerIdAllocator::open(&path).expect("reopen");
        let third = b.allocate().await.expect("allocate");
        assert!(third > second, "{third} after restart must exceed {second}");
        assert_eq!(third, BLOCK);
    }

    #[tokio::test]
    async fn only_handed_out_ids_are_issued_and_a_restart_keeps_them_issued() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ids");
        let a = ProducerIdAllocator::open(&path).expect("open");
        assert!(!a.issued(0), "nothing handed out yet");
        let first = a.allocate().await.expect("allocate");
        assert!(a.issued(first));
        assert!(!a.issued(first + 1), "the next id is not handed out yet");
        assert!(!a.issued(-1));
        drop(a);
        let b = ProducerIdAllocator::open(&path).expect("reopen");
        assert!(b.issued(first), "an id handed out before a restart");
        assert!(!b.issued(BLOCK), "the first id after the restart");
    }
}

#[cfg(test)]
mod concurrency {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_across_a_block_boundary_get_distinct_ids() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a =
            std::sync::Arc::new(ProducerIdAllocator::open(&dir.path().join("ids")).expect("open"));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let a = a.clone();
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                for _ in 0..(BLOCK / 2) {
                    got.push(a.allocate().await.expect("allocate"));
                }
                got
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("task"));
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "no id twice");
    }
}
