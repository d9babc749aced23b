//! `queued.max.request.bytes`: the broker-wide budget a large frame takes its
//! size from before its buffer is allocated, given back once the request has
//! been decoded and dispatched. Frames up to [`SMALL_FRAME`] skip it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Context as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::SMALL_FRAME;
use crate::metrics::Metrics;

/// queued.max.request.bytes: a semaphore counted in bytes.
#[derive(Debug)]
pub(super) struct Budget {
    pub(super) bytes: Arc<Semaphore>,
    pub(super) total: usize,
}

impl Budget {
    pub(super) fn new(total: usize) -> Self {
        let total = total.min(Semaphore::MAX_PERMITS);
        Budget {
            bytes: Arc::new(Semaphore::new(total)),
            total,
        }
    }

    /// Waits for `size` bytes of the budget (none for a small frame).
    pub(super) async fn acquire(
        &self,
        size: usize,
        metrics: &Arc<Metrics>,
    ) -> anyhow::Result<Option<Held>> {
        if size <= SMALL_FRAME {
            return Ok(None);
        }
        if size > self.total {
            anyhow::bail!(
                "a request of {size} bytes exceeds the whole queued.max.request.bytes budget of {}",
                self.total
            );
        }
        let permits = u32::try_from(size).context("request size")?;
        let permit = self
            .bytes
            .clone()
            .acquire_many_owned(permits)
            .await
            .context("the request budget is closed")?;
        metrics
            .queued_request_bytes
            .fetch_add(size as u64, Ordering::Relaxed);
        Ok(Some(Held {
            _permit: permit,
            bytes: size as u64,
            metrics: metrics.clone(),
        }))
    }
}

/// A frame's share of the budget, given back when dropped.
pub(super) struct Held {
    pub(super) _permit: OwnedSemaphorePermit,
    pub(super) bytes: u64,
    pub(super) metrics: Arc<Metrics>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.metrics
            .queued_request_bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}
